"""Per-task-family readings of a normalised response: yes / no (T3, T5), trends (T2, T8),
event ids (T4), patient comparison (T6) and options (T7) (paper §3 "Task suite";
Appendix G.3 "strict vs lenient parser").

Each family has a strict reading (the requested format only) and a lenient one (a careful
human reader); both return the canonical answer or None.
"""

from __future__ import annotations

import re

from clinlib.data.vocab import EVENT_ID_PREFIX
from clinlib.tasks.answers.text import negated
from clinlib.tasks.rules import OPTION_LETTERS

# --------------------------------------------------------------------------- yes / no

# the requested format: the word alone or followed by punctuation ("Yes." / "No, the ...")
YN_START = re.compile(r"^(yes|no)(?=$|\s*[.,;:!)\-–—])", re.IGNORECASE)
_YN_ANSWER = re.compile(
    r"\b(?:answer\s+is|answer:|i\s+would\s+say|i'd\s+say|so)\s*[\"']?(yes|no)\b"
    r"|\b(yes|no)\s*(?=[.,;:!)]|$)",
    re.IGNORECASE,
)
_T3_POLARITY = re.compile(
    r"\b(?:attribut\w*|consistent\s+with|due\s+to|secondary\s+to|explained\s+by|caused\s+by|"
    r"linked\s+to|link\w*|ascribed\s+to)",
    re.IGNORECASE,
)
_T5_CONTRA = re.compile(
    r"\b(?:contradict\w*|conflict\w*|inconsisten\w*|discrepan\w*|mismatch\w*)", re.IGNORECASE
)
_T5_CONSISTENT = re.compile(r"\b(?:consistent|agree\w*|match(?:es|ed)?)\b", re.IGNORECASE)


def yes_no_strict(norm: str) -> str | None:
    m = YN_START.match(norm)
    return m.group(1).lower() if m else None


def yes_no_lenient(norm: str, polarity: str = "attribution") -> str | None:
    """Yes/no in prose; without one, the ``polarity`` phrases (``attribution``: T3,
    ``contradiction``: T5) decide."""
    found: set[str] = set()
    for m in _YN_ANSWER.finditer(norm):
        word = (m.group(1) or m.group(2)).lower()
        if word == "yes" and negated(norm, m.start(m.lastindex or 1)):
            continue  # "I would not say yes": discarded, never flipped
        if word == "no" and m.group(2) and negated(norm, m.start(2)):
            continue
        found.add(word)
    if not found:
        if polarity == "attribution":
            for m in _T3_POLARITY.finditer(norm):
                found.add("no" if negated(norm, m.start(), window=8) else "yes")
        else:
            for m in _T5_CONTRA.finditer(norm):
                found.add("no" if negated(norm, m.start(), window=8) else "yes")
            if not found:
                for m in _T5_CONSISTENT.finditer(norm):
                    found.add("yes" if negated(norm, m.start(), window=6) else "no")
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- trends (T2, T8)

_STABLE_RE = re.compile(
    r"\b(?:stable|unchanged|steady|flat|constant|similar|"
    r"no\s+(?:significant\s+|meaningful\s+|real\s+|notable\s+|clinically\s+significant\s+|"
    r"appreciable\s+|substantial\s+|major\s+)?(?:change|difference)|"
    r"(?:did|does|has)\s*(?:not|n't)\s+(?:\w+\s+)?change\w*|"
    r"(?:remained|stayed|remains|stays|was|were)\s+(?:essentially\s+|roughly\s+|about\s+|"
    r"largely\s+)?(?:the\s+same|stable|steady|flat|constant|unchanged|level)|"
    r"(?:about|roughly|essentially|basically|largely)\s+the\s+same)",
    re.IGNORECASE,
)
_UP_RE = re.compile(
    r"\b(?:increas\w*|rose|risen|rising|rises|rise|went\s+up|gone\s+up|go(?:es)?\s+up|"
    r"trend(?:ed|ing)?\s+up\w*|up-?trend\w*|upward\w*|climb\w*|higher|grew|grown|jump\w*)\b",
    re.IGNORECASE,
)
_DOWN_RE = re.compile(
    r"\b(?:decreas\w*|fell|fallen|falling|falls|fall|dropp\w*|drops?|went\s+down|gone\s+down|"
    r"go(?:es)?\s+down|trend(?:ed|ing)?\s+down\w*|down-?trend\w*|downward\w*|declin\w*|lower|"
    r"lowered|reduc\w*)\b",
    re.IGNORECASE,
)
_MAGNITUDE_RES: dict[str, re.Pattern[str]] = {
    "weak": re.compile(
        r"\b(?:weak(?:ly)?|slight(?:ly)?|mild(?:ly)?|small|minor|marginal(?:ly)?|a\s+little|"
        r"a\s+bit)\b",
        re.IGNORECASE,
    ),
    "moderate": re.compile(r"\bmoderate(?:ly)?\b", re.IGNORECASE),
    "strong": re.compile(
        r"\b(?:strong(?:ly)?|marked(?:ly)?|substantial(?:ly)?|significant(?:ly)?|sharp(?:ly)?|"
        r"large|dramatic(?:ally)?|considerabl[ey]|major|steep(?:ly)?|greatly|big)\b",
        re.IGNORECASE,
    ),
    "none": re.compile(r"\bnone\b", re.IGNORECASE),
}


def _directions(norm: str) -> set[str]:
    """Directions asserted in ``norm`` (negated clauses discarded)."""
    found: set[str] = set()
    if _STABLE_RE.search(norm):
        found.add("stable")
    rest = _STABLE_RE.sub(" ", norm)
    for label, rx in (("increased", _UP_RE), ("decreased", _DOWN_RE)):
        for m in rx.finditer(rest):
            if not negated(rest, m.start()):
                found.add(label)
    return found


def _magnitudes(norm: str) -> set[str]:
    rest = _STABLE_RE.sub(" ", norm)
    return {
        label
        for label, rx in _MAGNITUDE_RES.items()
        if any(not negated(rest, m.start(), window=2) for m in rx.finditer(rest))
    }


_T2_STRICT = re.compile(
    r"^(increased|decreased|stable)\s*[;,]\s*(none|weak|moderate|strong)$", re.IGNORECASE
)


def t2_strict(norm: str) -> str | None:
    m = _T2_STRICT.match(norm)
    return f"{m.group(1).lower()};{m.group(2).lower()}" if m else None


def t2_lenient(norm: str) -> str | None:
    dirs = _directions(norm)
    if len(dirs) != 1:
        return None
    direction = dirs.pop()
    if direction == "stable":
        return "stable;none"
    mags = _magnitudes(norm) - {"none"}
    return f"{direction};{mags.pop()}" if len(mags) == 1 else None


def t8_strict(norm: str) -> str | None:
    m = re.match(r"^(increased|decreased|similar)\b", norm, re.IGNORECASE)
    return m.group(1).lower() if m else None


def t8_lenient(norm: str) -> str | None:
    dirs = _directions(norm)
    if len(dirs) != 1:
        return None
    d = dirs.pop()
    return "similar" if d == "stable" else d


# --------------------------------------------------------------------------- T4 event ids

ID_RE = re.compile(
    r"\b(" + "|".join(sorted(set(EVENT_ID_PREFIX.values()))) + r")-(\d+(?:-\d+)?)\b",
    re.IGNORECASE,
)


def _join_ids(ids) -> str:
    return ";".join(sorted({i.upper() for i in ids}))


def t4_strict(norm: str) -> str | None:
    parts = [p.strip().strip("[]()") for p in norm.split(";")]
    if not parts or any(not ID_RE.fullmatch(p) for p in parts):
        return None
    return _join_ids(parts)


def t4_lenient(norm: str) -> str | None:
    ids = [m.group(0) for m in ID_RE.finditer(norm) if not negated(norm, m.start(), window=3)]
    return _join_ids(ids) if ids else None


# --------------------------------------------------------------------------- T6

# "Patient A: 5, patient B: 7" is a list, not an answer: a colon does not end the answer
_T6_START = re.compile(
    r"^(?:patient\s+\(?([ab])\)?|\(?([ab])\)?)(?=$|\s*[.,;)\-–—])|^(similar)\b", re.IGNORECASE
)
_T6_ANSWER = re.compile(
    r"\b(?:answer\s+is|answer:|so|therefore|thus|hence)\s*[:,]?\s*(?:patient\s+)?"
    r"(?:(?P<p>[AB])\b|(?P<s>similar)\b)",
    re.IGNORECASE,
)
# a bare capital A/B names a patient only before a verb or punctuation ("A has", "B.") — a
# sentence-initial article "A higher count ..." must not count.
_T6_PATIENT = re.compile(
    r"(?i:\bpatient)\s+([abAB])\b|(?<![\w'])([AB])(?=\s*(?:[.,;:)!]|$)|\s+(?:has|had|have|is|was|"
    r"shows|showed|with|'s)\b)"
)
_T6_COMPARE = re.compile(
    r"\b(?:patient\s+)?(?P<x>[AB])\s+(?:has|had|have|shows|showed|with|is|was)\s+(?:a\s+|the\s+)?"
    r"(?:(?P<more>more|higher|greater|larger|bigger|most|highest|largest|greatest)|"
    r"(?P<less>fewer|lower|less|smaller|least|lowest|fewest))\b",
    re.IGNORECASE,
)
_T6_SIMILAR = re.compile(
    r"\b(?:similar|the\s+same|equal(?:ly)?|comparable|identical|a\s+tie|tied|"
    r"no\s+(?:meaningful\s+|significant\s+|real\s+)?difference)\b",
    re.IGNORECASE,
)


def t6_strict(norm: str) -> str | None:
    m = _T6_START.match(norm)
    if not m:
        return None
    return "similar" if m.group(3) else (m.group(1) or m.group(2)).upper()


def t6_lenient(norm: str) -> str | None:
    answers = [
        (m["p"].upper() if m["p"] else "similar")
        for m in _T6_ANSWER.finditer(norm)
        if not m["p"] or m["p"].isupper() or "patient" in m.group(0).lower()
    ]
    if answers:
        return answers[-1]
    compares = set()
    for m in _T6_COMPARE.finditer(norm):
        if not m["x"].isupper() and "patient" not in m.group(0).lower():
            continue
        x = m["x"].upper()
        compares.add(x if m["more"] else ("B" if x == "A" else "A"))
    if len(compares) == 1:
        return compares.pop()
    named = {
        (m.group(1) or m.group(2)).upper()
        for m in _T6_PATIENT.finditer(norm)
        if not negated(norm, m.start(), window=2)
    }
    similar = any(not negated(norm, m.start(), window=3) for m in _T6_SIMILAR.finditer(norm))
    if len(named) == 1 and not similar:
        return named.pop()
    if similar and len(named) != 1:
        return "similar"
    return None


# --------------------------------------------------------------------------- T7


def norm_text(s: str) -> str:
    """Lower case, every run of other characters (spaces included) one space."""
    return re.sub(r"[^a-z0-9]+", " ", str(s).lower()).strip()


def _options_in(text: str, options: list[str]) -> set[int]:
    """Indices of options whose text (or distinctive head word) is mentioned, un-negated."""
    hay = norm_text(text)
    hits: set[int] = set()
    norms = [norm_text(o) for o in options]
    heads = [n.split(" ")[0] if n else "" for n in norms]
    for i, n in enumerate(norms):
        m = re.search(r"(?<![a-z0-9])" + re.escape(n) + r"(?![a-z0-9])", hay) if n else None
        if m is None and len(heads[i]) >= 4 and heads.count(heads[i]) == 1:
            m = re.search(r"(?<![a-z0-9])" + re.escape(heads[i]) + r"(?![a-z0-9])", hay)
        if m is not None and not negated(hay, m.start(), window=3):
            hits.add(i)
    return hits


_T7_START = re.compile(
    r"^(?P<pre>(?:option|choice)\s+)?\(?(?P<letter>[A-Da-d])\)?"
    r"(?:(?P<sep>\s*[.):,;\-–—]\s*|\s*$)|\s+)(?P<rest>.*)$",
    re.IGNORECASE,
)
# "answer is C", "option (b).", "(C)": a lower-case letter only when punctuation follows.
_T7_LETTER = re.compile(
    r"(?i:\b(?:option|answer|choice)\s*(?:is|:)?\s*)\(?(?:([A-D])\b|([a-d])(?=\)|[.,;:]|$))\)?"
    r"|\(([A-D])\)"
)


def _t7_from_start(norm: str, options: list[str]) -> str | None | bool:
    """Letter at the start of ``norm`` (False: no letter there; None: contradictory text)."""
    m = _T7_START.match(norm)
    if not m:
        return False
    letter, rest = m["letter"], m["rest"].strip()
    idx = OPTION_LETTERS.index(letter.upper())
    if m["sep"] is None and not m["pre"]:
        # "A patient ..." is prose, not a letter: a letter followed by a space counts only
        # when an option's text comes next ("C Atorvastatin")
        head = norm_text(rest)
        if not letter.isupper() or not any(
            norm_text(o) and head.startswith(norm_text(o).split(" ")[0]) for o in options
        ):
            return False
    if rest and options:
        hits = _options_in(rest, options)
        if hits and idx not in hits:
            return None  # "B. Metformin" when B is Lisinopril: contradictory
    return OPTION_LETTERS[idx]


def t7_strict(norm: str, options: list[str] | None) -> str | None:
    r = _t7_from_start(norm, list(options or []))
    return r if isinstance(r, str) else None


def t7_lenient(norm: str, options: list[str] | None) -> str | None:
    options = list(options or [])
    r = _t7_from_start(norm, options)
    if r is None:
        return None
    letters: set[str] = {r} if isinstance(r, str) else set()
    for m in _T7_LETTER.finditer(norm):
        letter = m.group(1) or m.group(2) or m.group(3)
        if not negated(norm, m.start(), window=2):
            letters.add(letter.upper())
    if options:
        letters |= {OPTION_LETTERS[i] for i in _options_in(norm, options)}
    return letters.pop() if len(letters) == 1 else None
