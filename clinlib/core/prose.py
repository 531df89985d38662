"""Prose that cannot drift: notebook text rendered from computed values, claims
checked where they are made, and the static check that keeps result numbers out of
hand-written prose.

- :func:`md` renders a Markdown template from computed values in a code cell, so a number
  the kit computes is never typed into prose: ``md("{n:,} questions; the paper's
  {seed[ctb_questions]}", n=len(questions))``. ``seed`` is the seed-facts table
  (:data:`clinlib.core.seed_facts.SEED_FACTS`): ``{seed[key]}`` is a seed's value as printed,
  ``{seed[key].cite}`` the value with its source. The result displays as Markdown.
  :func:`span` renders a computed range ("0.12–0.50", or one value when both ends agree).
- :func:`claim` states a qualitative claim as a computed predicate with a stated tolerance
  (``claim("full-context is never wrong where another strategy is right", c_max, "<=", 0)``),
  shows it with the figure it rests on, and raises :class:`ClaimFailed` when it does not
  hold, so the notebook fails under nbmake (``make test``, quick profile) and under
  ``make reproduce`` (paper profile) alike. A claim that holds on one profile only is not a
  claim: render the finding with :func:`md` instead.
- :func:`prose_numbers` lists the numbers in a Markdown text that are neither structural (ids
  of notebooks, tasks, tables, figures, sections, steps; parameter names the code sets) nor
  citations of a seed fact in a sentence that names its source. ``tests/test_notebook_prose.py``
  runs it over every notebook's Markdown cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clinlib.core.claims import VacuousClaim, counterexample, default_domain, holds
from clinlib.core.config import ALPHA
from clinlib.core.seed_facts import SEED_FACTS, SEEDS


class Markdown(str):
    """A string that Jupyter displays as Markdown (``_repr_markdown_``)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def md(template: str, /, **values: object) -> Markdown:
    """Render ``template`` (``str.format`` syntax) with computed values and the seed facts.

    Args:
        template: Markdown with ``{name}`` / ``{name:,}`` / ``{name:.1%}`` fields;
            ``{seed[key]}`` and ``{seed[key].cite}`` name seed facts.
        **values: the computed values the fields name.

    Returns:
        The rendered text; the last expression of a cell displays it as Markdown.
    """
    return Markdown(template.format(seed=SEED_FACTS, **values))


def span(low: float, high: float, fmt: str = ".2f") -> str:
    """A computed range as prose: "0.12–0.50", or one value when both ends print alike."""
    lo, hi = format(low, fmt), format(high, fmt)
    return lo if lo == hi else f"{lo}–{hi}"


class ClaimFailed(AssertionError):
    """A claim stated in a notebook does not hold on the data it was run on."""


@dataclass(frozen=True)
class Claim:
    """A checked claim: the statement, the measured value and the bound it is held to."""

    statement: str
    value: float
    op: str
    bound: float
    tol: float
    holds: bool
    fmt: str = ".3g"
    domain: str = "real"
    counterexample: float | None = None  # a value of the domain that would break it

    def _num(self, x: float) -> str:
        return format(int(round(x)) if self.fmt.endswith("d") else x, self.fmt)

    def _repr_markdown_(self) -> str:
        mark = "✓ holds" if self.holds else "✗ does not hold"
        tol = f" ± {self._num(self.tol)}" if self.tol else ""
        return (
            f"**Claim** ({mark}): {self.statement} — measured {self._num(self.value)} "
            f"{self.op} {self._num(self.bound)}{tol}"
        )

    def __str__(self) -> str:
        return self._repr_markdown_()


def claim(
    statement: str,
    value: float,
    op: str,
    bound: float,
    *,
    tol: float = 0.0,
    fmt: str = ".3g",
    domain: str | None = None,
    check: bool = True,
) -> Claim:
    """State a claim as ``value op bound`` within ``tol`` and check it.

    Args:
        statement: the claim in words, as the notebook makes it.
        value: the computed figure it rests on (a gap, a count, a largest violation, ...).
        op: ``"<="``, ``">="``, ``"<"``, ``">"`` or ``"=="`` (``|value - bound| <= tol``).
        bound: what the value is held to; ``tol`` widens it (``value <= bound + tol``,
            ``value >= bound - tol``) and is shown.
        fmt: format spec of the shown numbers.
        domain: the range the quantity can take, from :data:`clinlib.core.claims.DOMAINS`
            (``real``, ``nonneg``, ``count``, ``share``, ``flag``); default ``flag`` for a
            bool, ``count`` for ``fmt="d"``, else ``real``. A claim no value of its domain
            can break (``count >= 0``, ``share <= 1``) raises :class:`VacuousClaim`.
        check: raise :class:`ClaimFailed` when it does not hold (False only to display a
            claim the notebook then reports on as a finding).

    Returns:
        The :class:`Claim`; the last expression of a cell displays it.
    """
    domain = domain or default_domain(fmt, value)
    ok = holds(float(value), op, float(bound), float(tol))
    breaker = counterexample(op, float(bound), float(tol), domain)
    if breaker is None:
        raise VacuousClaim(
            f"claim {statement!r}: {op} {bound} holds for every {domain} value (it cannot fail)"
        )
    out = Claim(statement, float(value), op, float(bound), float(tol), ok, fmt, domain, breaker)
    if check and not ok:
        raise ClaimFailed(str(out))
    return out


# --- the static check: numbers in hand-written prose -----------------------------------------

# A number: optional sign or currency, digits with thousands commas and decimals, ratios
# (1/19, 33/34/33), an optional unit. Not preceded by a word character, '.', '-', '@', '/', '§'
# or '#' (T3, C.1, gpt-4o, hit@1, §5.2 are ids, not numbers).
_NUMBER = re.compile(
    r"(?<![\w.\-@/§#\\])(?P<num>[−-]?\$?\d(?:[\d,]*\d)?(?:\.\d+)?(?:/\d+)*)"
    r"(?P<unit>\s?(?:%|pp|k\b|M\b|×|x\b|s\b))?(?![\w.]\d|[\w])"
)
# Words after which a number is an id: tables, figures, sections, notebooks, steps.
_ID_WORDS = (
    r"(?:Tables?|Fig\.|Figures?|Appendix|App\.|§|[Ss]ections?|[Nn]otebooks?|[Ss]tages?|"
    r"[Ss]teps?|[Cc]ase|[Ii]ssue|[Pp]anel|[Pp]art|[Cc]olumns?|[Cc]ells?|[Ll]ine)"
)
_ID_BEFORE = re.compile(r"(?:" + _ID_WORDS + r"|§\d+(?:\.\d+)*\s*[–-])\s*$")
_LIST_GAP = re.compile(r"^\s*(?:,|–|-|/|&|and|or|,\s*and)\s*$")
# Parameters the notebooks' code sets, written name = value.
PARAMETERS = ("K", "k", "m", "Δ", "delta", "ratio", "seed", "budget", "top_k", "t")
_PARAM_BEFORE = re.compile(
    r"(?:^|[^\w])(?:" + "|".join(map(re.escape, PARAMETERS)) + r")\s*(?:=\s*|(?:∈|in)\s*\{[^}]*)$"
)
_HEADING_NUMBER = re.compile(r"^#+\s*$")
_LIST_ITEM = re.compile(r"^\s*$")  # a line's first token followed by ". " or ") "
_CONFIDENCE = re.compile(r"^\s*(?:CIs?|confidence|bounds|intervals?)\b")
# the confidence level prose may state bare ("95% CI"): the one the stats use (core.config.ALPHA)
CI_LEVEL_PERCENT = f"{1 - ALPHA:.0%}"
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = re.compile(r"```.*?```", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z*_(\[`])|\n(?=\s*(?:[-*]|\d+\.|#|\|))|\n\n")
_SEED_CUES = {
    "clintracebench": r"paper|ClinTraceBench|Table|Fig\.|Figure|Appendix|App\.|§",
    **{
        stem: re.escape(name) + r"|seed" for stem, name in SEEDS.items() if stem != "clintracebench"
    },
}


@dataclass(frozen=True)
class ProseNumber:
    """A number found in hand-written prose that nothing renders or cites."""

    number: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.number!r} in: {self.sentence.strip()[:160]}"


def _norm(value: str) -> str:
    """A number's comparable form: 0.5 and 0.500 alike, units and separators dropped."""
    v = value.replace("−", "-").replace(",", "").replace("$", "").replace(" ", "")
    v = re.sub(r"(%|pp|k|M|×|x|s)$", "", v)
    try:
        return repr(float(v))
    except ValueError:
        return v  # a ratio: 1/19, 33/34/33


def _seed_values() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fact in SEED_FACTS.values():
        out.setdefault(fact.seed, set()).update(_norm(v) for v in fact.values)
    return out


_SEED_VALUES = _seed_values()


def _is_code_span(span: str) -> bool:
    return bool(re.search(r"[A-Za-z_=(<>*+^]", span))


def _strip_code(text: str) -> str:
    text = _FENCE.sub(" ", text)
    text = _CODE_SPAN.sub(lambda m: " CODE " if _is_code_span(m[0]) else m[0].strip("`"), text)
    return _LINK_TARGET.sub("]", text)


def _cites_seed(sentence: str, value: str) -> bool:
    norm = _norm(value)
    for stem, cue in _SEED_CUES.items():
        if norm in _SEED_VALUES.get(stem, ()) and re.search(cue, sentence):
            return True
    return False


def prose_numbers(markdown: str) -> list[ProseNumber]:
    """Numbers in ``markdown`` that are neither structural nor a cited seed fact.

    Structural: a number right after an id word (Table, Fig., §, Appendix, section, notebook,
    stage, step, ...) or in a list of them ("Tables 12 and 13", "notebooks 04, 06 and 11"); a
    two-digit notebook id (01–09); a heading's section number ("## 2 · ..."); a parameter
    the code sets written ``K = 3`` (:data:`PARAMETERS`); anything inside a code span holding
    code. A seed citation: a number equal to a value of :data:`SEED_FACTS` whose sentence
    names that seed (for ClinTraceBench: "paper", a table, figure, appendix or section).
    """
    found = []
    for sentence in _SENTENCE_END.split(_strip_code(markdown)):
        prev_id_end = None
        for m in _NUMBER.finditer(sentence):
            before = sentence[max(0, m.start() - 40) : m.start()]
            line_before = sentence[sentence.rfind("\n", 0, m.start()) + 1 : m.start()]
            num = m["num"] + (m["unit"] or "")
            structural = (
                bool(_ID_BEFORE.search(before))
                or (
                    prev_id_end is not None
                    and bool(_LIST_GAP.match(sentence[prev_id_end : m.start()]))
                )
                or bool(re.fullmatch(r"0\d", m["num"]))
                or bool(_HEADING_NUMBER.match(line_before))
                or bool(_PARAM_BEFORE.search(before))
                or (
                    bool(_LIST_ITEM.match(line_before))
                    and sentence[m.end() : m.end() + 2] in (". ", ") ")
                )
                or bool(re.fullmatch(r"\s*\d+[.)]\s*", sentence))  # "1." split off its item
                or (
                    num.replace(" ", "") == CI_LEVEL_PERCENT
                    and bool(_CONFIDENCE.match(sentence[m.end() :]))
                )
                or num == "$0"  # the offline readers' and the local model's price
            )
            if structural:
                prev_id_end = m.end()
                continue
            prev_id_end = None
            if not _cites_seed(sentence, num):
                found.append(ProseNumber(num.strip(), sentence))
    return found
