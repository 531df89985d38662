"""Question paraphrases and the checks that keep one (paper Fig. 2 stage 4: "an LLM
paraphrases each (anchor, gold) template"; §3 "Task suite"; Appendix A gate L3).

A paraphrase of a question is kept only if every check of :data:`PARAPHRASE_CHECKS` passes,
otherwise the template wording stays:

* ``rewriter_error`` — the backbone returned a reply (no error, not empty);
* ``reworded`` — the reply differs from the template (an echo is not a paraphrase);
* ``answer_format`` — the parse-back: the task's answer-format statement, the abstention
  clause and (T7) every option line are still there verbatim, so the task's parser reads the
  reply to the paraphrase exactly as it reads the reply to the template;
* ``invariants_kept`` — order words, superlatives, comparatives, negations, time anchors and
  units of the stem are unchanged, and so is the answer form they ask for
  (:mod:`clinlib.tasks.paraphrase_invariants`): the gold is computed from ``meta``, so a
  paraphrase that reverses the order or asks for the lowest instead of the highest is refused,
  and so is one whose wording asks for another kind of answer than its gold (a date for a
  value, a value for yes/no: gate L2's ``form_problem``);
* ``slots_verbatim`` — every slot of the template stem (dates, numbers, ICD-like codes, lab
  names, drug names, and every string field of the question's ``meta`` the stem states, e.g. a
  diagnosis title) survives verbatim, and the paraphrase adds no date, number or code;
* ``no_gold_leak`` — gate L3 (:func:`clinlib.tasks.gates.content.leak`) on the new wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from clinlib.dialogue.matching import (
    CODE_RE,
    DATE_RE,
    DRUG_LEXICON,
    NUMBER_RE,
    DrugMatcher,
    contains_verbatim,
    find_spans,
    labels_mentioned,
)
from clinlib.tasks.answers import ABSTAIN_CLAUSE
from clinlib.tasks.base import TASKS
from clinlib.tasks.gates.leaks import OPTION_LINE, question_stem
from clinlib.tasks.gates.leaks import leak as _leak
from clinlib.tasks.paraphrase_invariants import answer_form, form_problem, invariant_problems

PARAPHRASE_SYSTEM_PROMPT = """You reword one question about a patient's hospital record.
Rules:
1. Keep its meaning: the same facts, the same request.
2. Copy every date, number, code, lab name, drug name and diagnosis or procedure title
   exactly as written.
3. Keep the closing sentences that say how to reply, and any "Options:" block, word for word.
4. Add no fact, number or date, and give no hint of the answer.
Return only the reworded question."""
PARAPHRASE_USER_TEMPLATE = "Question:\n{question}"

PARAPHRASE_CHECKS: dict[str, str] = {
    "rewriter_error": "the backbone returned a reply (no error, not empty)",
    "reworded": "the reply differs from the template wording",
    "answer_format": "the answer-format statement, abstention clause and options survive "
    "verbatim (the task's parser reads the reply as before)",
    "invariants_kept": "order words, superlatives, comparatives, negations, time anchors, "
    "units and the answer form they ask for are unchanged",
    "slots_verbatim": "every date, number, code, lab, drug and stated meta field of the stem "
    "survives verbatim; no new date, number or code",
    "no_gold_leak": "gate L3 passes on the new wording",
}
_MIN_META_CHARS = 3
# A number standing alone (not the "1" of "A1c"): the boundary-aware form of NUMBER_RE.
_NUMBER = re.compile(r"(?<![A-Za-z\d.])" + NUMBER_RE.pattern + r"(?![A-Za-z\d])")


def paraphrase_messages(question: str) -> list[dict[str, str]]:
    """The chat messages asking for one question's paraphrase."""
    return [
        {"role": "system", "content": PARAPHRASE_SYSTEM_PROMPT},
        {"role": "user", "content": PARAPHRASE_USER_TEMPLATE.format(question=question)},
    ]


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _tokens(text: str) -> set[str]:
    """Dates, then codes, then numbers outside them, of a text."""
    out = set(DATE_RE.findall(text))
    rest = DATE_RE.sub(" ", text)
    out |= set(CODE_RE.findall(rest))
    out |= set(_NUMBER.findall(CODE_RE.sub(" ", rest)))
    return out


def question_slots(row: Mapping[str, Any], drugs: DrugMatcher | None = None) -> list[str]:
    """The strings of a question's stem a paraphrase must keep verbatim (sorted)."""
    stem = question_stem(row)
    drugs = drugs or DrugMatcher(list(DRUG_LEXICON))
    # a drug as the stem writes it ("MetFORMIN" for the lexicon's "metformin")
    named = {stem[i:j] for d in drugs.find(stem) for i, j in find_spans(stem, d, True)}
    slots = _tokens(stem) | labels_mentioned(stem) | named
    try:
        meta = json.loads(str(row.get("meta") or "{}"))
    except json.JSONDecodeError:
        meta = {}
    slots |= {s for s in _strings(meta) if len(s) >= _MIN_META_CHARS and contains_verbatim(stem, s)}
    return sorted(slots)


def _fixed_parts(row: Mapping[str, Any]) -> list[str]:
    """The verbatim parts a parser relies on: format statement, clause, option lines."""
    task = str(row.get("task"))
    spec = TASKS.get(task)
    fmt = spec.answer_format if spec is not None else ""
    parts = [p for p in (fmt, ABSTAIN_CLAUSE) if p and p in str(row.get("question") or "")]
    if spec is not None and spec.options == "texts":
        parts += [m.group(0).strip() for m in OPTION_LINE.finditer(str(row["question"]))]
    return parts


def check_paraphrase(row: Mapping[str, Any], reply: str | None) -> dict[str, list[str]]:
    """Every check of :data:`PARAPHRASE_CHECKS` on one reply.

    Args:
        row: the question (QUESTION_COLUMNS: task, question, gold, meta, injection, ...).
        reply: the backbone's paraphrase (None or "" when it returned nothing).

    Returns:
        ``{check: problems}``, empty lists for checks that pass.
    """
    problems: dict[str, list[str]] = {c: [] for c in PARAPHRASE_CHECKS}
    text = str(reply or "").strip()
    if not text:
        problems["rewriter_error"].append("empty reply")
        return problems
    template = str(row["question"]).strip()
    if " ".join(text.split()) == " ".join(template.split()):
        problems["reworded"].append("the reply repeats the template")
    for part in _fixed_parts(row):
        if part not in text:
            problems["answer_format"].append(f"lost {part[:50]!r}")
    new = dict(row) | {"question": text}
    for slot in question_slots(row):
        if not contains_verbatim(question_stem(new), slot):
            problems["slots_verbatim"].append(f"lost {slot!r}")
    added = _tokens(question_stem(new)) - _tokens(question_stem(row))
    problems["slots_verbatim"] += [f"added {tok!r}" for tok in sorted(added)]
    old_stem, new_stem = question_stem(row), question_stem(new)
    problems["invariants_kept"] = invariant_problems(old_stem, new_stem)
    form_a, form_b = answer_form(old_stem), answer_form(new_stem)
    if form_a != form_b:
        problems["invariants_kept"].append(f"answer form: {form_a} -> {form_b}")
    asked = form_problem(new_stem, text, str(row.get("gold") or ""), str(row.get("task")))
    if asked:  # gate L2's own reading: the new wording asks for another kind of answer
        problems["invariants_kept"].append(asked)
    leak = _leak(new)
    if leak:
        problems["no_gold_leak"].append(leak)
    return problems


def first_problem(problems: Mapping[str, list[str]]) -> tuple[str, str]:
    """(check, its first problem) of the first failing check, or ("", "")."""
    for check in PARAPHRASE_CHECKS:
        if problems.get(check):
            return check, problems[check][0]
    return "", ""
