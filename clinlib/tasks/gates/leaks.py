"""Gate L3, no gold leakage: the question stem must not state its answer (paper Appendix A;
rules in :mod:`clinlib.tasks.gates`). One check per answer shape; a task names its check in its
spec (``TaskSpec.leak``), :func:`leak` looks it up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from clinlib.tasks import rules
from clinlib.tasks.answers import ABSTAIN_CLAUSE
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates.common import as_list, is_str, meta_of
from clinlib.tasks.registry import TASKS

T9_CUES: tuple[str, ...] = (
    "insufficient",
    "not documented",
    "not recorded",
    "not reported",
    "not mentioned",
    "not stated",
    "not measured",
    "not available",
    "unknown",
    "missing",
    "no record",
    "if available",
    "if recorded",
    "if documented",
    "if any",
    "absent",
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?")
OPTION_LINE = re.compile(r"^\s*\(?[A-D][.)]\s+.*$", re.MULTILINE)
_RULE_PARAMS = re.compile(
    rf"\b{int(round(rules.SIMILAR_REL * 100))}\s*%|\b{rules.T8_MIN_AFTER_DAYS}\s+(?:or more\s+)?days?\b"
)


def question_stem(row: Mapping[str, Any]) -> str:
    """The question text without its format statement, abstention clause and options block."""
    text = str(row.get("question") or "")
    task = str(row.get("task"))
    spec = TASKS.get(task)
    fmt = spec.answer_format if spec is not None else ""
    for part in (fmt, ABSTAIN_CLAUSE):
        if part:
            text = text.replace(part, " ")
    if spec is not None and spec.options == "texts":
        text = OPTION_LINE.sub(" ", text).replace("Options:", " ")
    return text


def _numbers(text: str) -> list[Decimal]:
    text = _RULE_PARAMS.sub(" ", _ISO_DATE.sub(" ", text))
    out = []
    for m in STATED_NUMBER.finditer(text):
        try:
            out.append(Decimal(m.group(0)))
        except InvalidOperation:  # pragma: no cover
            continue
    return out


def _num(x: Any) -> Decimal | None:
    m = re.search(r"\d+(?:\.\d+)?", str(x))
    if m is None:
        return None
    try:
        return Decimal(m.group(0))
    except InvalidOperation:  # pragma: no cover
        return None


def _word(text: str, stem: str) -> bool:
    return re.search(rf"\b{stem}\w*", text, re.IGNORECASE) is not None


_DIRECTION_STEMS = {"increased": "increas", "decreased": "decreas", "stable": "stable"}
_MAGNITUDE_STEMS = {"weak": "weak", "moderate": "moderate", "strong": "strong"}
_T8_STEMS = {"increased": "increas", "decreased": "decreas", "similar": "similar"}


def _label_leak(stem: str, gold_label: str, axis: Mapping[str, str]) -> bool:
    """The gold's label word is in the stem and not merely as one of all listed choices."""
    if gold_label not in axis or not _word(stem, axis[gold_label]):
        return False
    return not all(_word(stem, s) for s in axis.values())


def _injected_text(row: Mapping[str, Any]) -> list[str]:
    raw = row.get("injection")
    if not is_str(raw) or not raw.strip():
        return []
    data = json.loads(raw)
    items = data if isinstance(data, list) else [data]
    return [str(i.get("text")) for i in items if isinstance(i, dict) and i.get("text")]


def _meta_numbers(meta: Mapping[str, Any], keys: Iterable[str]) -> list[Decimal]:
    out = []
    for k in keys:
        v = meta.get(k)
        if isinstance(v, dict):  # {"event_id": ..., "value": 1.3}
            v = v.get("value")
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, int | float) and not isinstance(x, bool):
                out.append(Decimal(repr(float(x))).normalize())
    return out


def leak(row: Mapping[str, Any]) -> str | None:
    """Why the stem of question ``row`` leaks its gold (its task's check), None when clean."""
    spec = TASKS.get(str(row["task"]))
    return spec.leak(row) if spec is not None and spec.leak is not None else None


def _relative_number(row: Mapping[str, Any]) -> str | None:
    if row.get("subtype") == "relative" and STATED_NUMBER.search(question_stem(row)):
        return "the relative stem states a number (a date, time or visit number)"
    return None


def value_leak(row: Mapping[str, Any]) -> str | None:
    """T1: the stem states the gold value."""
    gold, stem = str(row["gold"]), question_stem(row)
    g = _num(gold)
    if g is not None and any(n == g for n in _numbers(stem)):
        return f"the stem states the gold value {gold!r}"
    return None


def relative_value_leak(row: Mapping[str, Any]) -> str | None:
    """T1R: T1's check, and a relative stem states no number (it names the visit by rank)."""
    return value_leak(row) or _relative_number(row)


def rejection_leak(row: Mapping[str, Any]) -> str | None:
    """T1F: the rejection stem states a number."""
    if STATED_NUMBER.search(question_stem(row)):
        return "the rejection stem states a number (a date, time or visit number)"
    return None


def trend_leak(row: Mapping[str, Any]) -> str | None:
    """T2: the stem names the gold direction or magnitude."""
    stem = question_stem(row)
    direction, _, magnitude = str(row["gold"]).partition(";")
    if _label_leak(stem, direction, _DIRECTION_STEMS):
        return f"the stem contains the gold direction {direction!r}"
    if magnitude != "none" and _label_leak(stem, magnitude, _MAGNITUDE_STEMS):
        return f"the stem contains the gold magnitude {magnitude!r}"
    return None


def injection_leak(row: Mapping[str, Any]) -> str | None:
    """T3, T5: the stem quotes the injected sentence or its marker."""
    low = question_stem(row).lower()
    if "physician noted:" in low:
        return "the stem contains the injected 'Physician noted:' marker"
    for text in _injected_text(row):
        if text.strip().lower() in low:
            return "the stem quotes the injected sentence"
    return None


def ids_leak(row: Mapping[str, Any]) -> str | None:
    """T4: the stem names a gold event id."""
    low = question_stem(row).lower()
    for eid in str(row["gold"]).split(";"):
        if eid.lower() in low:
            return f"the stem contains gold event id {eid}"
    return None


def _stated(row: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    values = _meta_numbers(meta_of(row), keys)
    nums = {n.normalize() for n in _numbers(question_stem(row))}
    return [format(v, "f") for v in values if v in nums]


def comparison_leak(row: Mapping[str, Any]) -> str | None:
    """T6: the stem states the computed values."""
    hit = _stated(row, ("value_a", "value_b", "value_a_float", "value_b_float"))
    return f"the stem states the computed value(s) {hit}" if hit else None


def relative_option_leak(row: Mapping[str, Any]) -> str | None:
    """T7R: a relative stem states no number, then T7's check."""
    return _relative_number(row) or option_leak(row)


def option_leak(row: Mapping[str, Any]) -> str | None:
    """T7: the stem names the answer outside the options."""
    gold, low = str(row["gold"]), question_stem(row).lower()
    options = as_list(row.get("options")) or []
    if gold in rules.OPTION_LETTERS and len(options) == 4:
        answer = str(options[rules.OPTION_LETTERS.index(gold)]).strip().lower()
        if answer and re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", low):
            return f"the stem names the answer {answer!r} outside the options"
    return None


def response_leak(row: Mapping[str, Any]) -> str | None:
    """T8: the stem names the gold direction or states the before/after values."""
    gold = str(row["gold"])
    if _label_leak(question_stem(row), gold, _T8_STEMS):
        return f"the stem contains the gold direction {gold!r}"
    hit = _stated(row, ("before", "after"))
    return f"the stem states the before/after value(s) {hit}" if hit else None


def abstention_cue_leak(row: Mapping[str, Any]) -> str | None:
    """T9: the stem carries an abstention cue."""
    low = question_stem(row).lower()
    cues = [c for c in T9_CUES if re.search(rf"\b{re.escape(c)}\b", low)]
    return f"the stem carries abstention cue(s) {cues}" if cues else None
