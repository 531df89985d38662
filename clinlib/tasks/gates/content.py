"""Gates L3 no gold leakage and L4 distribution coverage (paper Appendix A; Appendix B.6
for the event-type mix; rules in :mod:`clinlib.tasks.gates`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import pandas as pd

from clinlib.data.vocab import INDEX_DISEASES
from clinlib.tasks import rules
from clinlib.tasks.answers import ABSTAIN_CLAUSE, ANSWER_FORMATS
from clinlib.tasks.base import STATED_NUMBER, TASKS
from clinlib.tasks.gates.common import (
    DETAIL_EXAMPLES,
    SEVERITY,
    TERTILES,
    THRESHOLDS,
    _as_list,
    _is_str,
    _meta,
    _per_task,
)
from clinlib.tasks.gates.ordering import t10_leak, t11_leak

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
MAX_PATIENT_SHARE = 0.10
MIN_N_FOR_PATIENT_SHARE = 20
# (task, anchor kind, low, high): share of questions whose anchor is of that kind (paper: T7
# split between medication and procedure; T9 1,147 lab vs 353 other = 76%, Appendix B.6).
EVENT_TYPE_TARGETS: tuple[tuple[str, str, float, float], ...] = (
    ("T7", "medication", 0.35, 0.65),
    ("T9", "lab", 0.60, 0.90),
)
# Binary tasks (gold yes / no) whose balance is a HARD part of L4 (issue 26 §3: on real
# MIMIC-IV all 174 T5 golds were "yes", so a constant "yes" scored 100%): from
# MIN_N_BINARY questions, the rarer gold must hold at least MIN_MINORITY_SHARE (half of T5's
# designed 40 / 495 = 8.1%, the most skewed binary design of the paper) and no one subtype
# more than MAX_SUBTYPE_SHARE (T5's largest designed subtype holds 31%, T3's 25%).
BINARY_TASKS: tuple[str, ...] = ("T3", "T5")
MIN_N_BINARY = 10
MIN_MINORITY_SHARE = 0.04
MAX_SUBTYPE_SHARE = 0.75

# --------------------------------------------------------------------------- L3

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?")
_OPTION_LINE = re.compile(r"^\s*\(?[A-D][.)]\s+.*$", re.MULTILINE)
_RULE_PARAMS = re.compile(
    rf"\b{int(round(rules.SIMILAR_REL * 100))}\s*%|\b{rules.T8_MIN_AFTER_DAYS}\s+(?:or more\s+)?days?\b"
)


def question_stem(row: Mapping[str, Any]) -> str:
    """The question text without its format statement, abstention clause and options block."""
    text = str(row.get("question") or "")
    task = str(row.get("task"))
    # an extended task (T1R) states its format in the task registry
    fmt = ANSWER_FORMATS.get(task) or (TASKS[task].answer_format if task in TASKS else "")
    for part in (fmt, ABSTAIN_CLAUSE):
        if part:
            text = text.replace(part, " ")
    if row.get("task") in ("T7", "T7R"):
        text = _OPTION_LINE.sub(" ", text).replace("Options:", " ")
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
    if not _is_str(raw) or not raw.strip():
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


def _leak(row: Mapping[str, Any]) -> str | None:
    task, gold = str(row["task"]), str(row["gold"])
    stem = question_stem(row)
    low = stem.lower()
    meta = _meta(row)
    if task in ("T1", "T1R"):
        g = _num(gold)
        if g is not None and any(n == g for n in _numbers(stem)):
            return f"the stem states the gold value {gold!r}"
        if task == "T1R" and row.get("subtype") == "relative" and STATED_NUMBER.search(stem):
            return "the relative stem states a number (a date, time or visit number)"
    elif task == "T1F":
        if STATED_NUMBER.search(stem):
            return "the rejection stem states a number (a date, time or visit number)"
    elif task == "T2":
        direction, _, magnitude = gold.partition(";")
        if _label_leak(stem, direction, _DIRECTION_STEMS):
            return f"the stem contains the gold direction {direction!r}"
        if magnitude != "none" and _label_leak(stem, magnitude, _MAGNITUDE_STEMS):
            return f"the stem contains the gold magnitude {magnitude!r}"
    elif task in ("T3", "T5"):
        if "physician noted:" in low:
            return "the stem contains the injected 'Physician noted:' marker"
        for text in _injected_text(row):
            if text.strip().lower() in low:
                return "the stem quotes the injected sentence"
    elif task == "T4":
        for eid in gold.split(";"):
            if eid.lower() in low:
                return f"the stem contains gold event id {eid}"
    elif task == "T6":
        values = _meta_numbers(meta, ("value_a", "value_b", "value_a_float", "value_b_float"))
        nums = {n.normalize() for n in _numbers(stem)}
        hit = [format(v, "f") for v in values if v in nums]
        if hit:
            return f"the stem states the computed value(s) {hit}"
    elif task in ("T7", "T7R"):
        if task == "T7R" and row.get("subtype") == "relative" and STATED_NUMBER.search(stem):
            return "the relative stem states a number (a date, time or visit number)"
        options = _as_list(row.get("options")) or []
        if gold in rules.OPTION_LETTERS and len(options) == 4:
            answer = str(options[rules.OPTION_LETTERS.index(gold)]).strip().lower()
            if answer and re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", low):
                return f"the stem names the answer {answer!r} outside the options"
    elif task == "T8":
        if _label_leak(stem, gold, _T8_STEMS):
            return f"the stem contains the gold direction {gold!r}"
        values = _meta_numbers(meta, ("before", "after"))
        nums = {n.normalize() for n in _numbers(stem)}
        hit = [format(v, "f") for v in values if v in nums]
        if hit:
            return f"the stem states the before/after value(s) {hit}"
    elif task == "T9":
        cues = [c for c in T9_CUES if re.search(rf"\b{re.escape(c)}\b", low)]
        if cues:
            return f"the stem carries abstention cue(s) {cues}"
    elif task == "T10":
        return t10_leak(row)
    elif task == "T11":
        return t11_leak(row)
    return None


def gate_l3(questions: pd.DataFrame) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L3 leakage failures per task (see module docstring)."""
    return _per_task(questions, _leak)


# --------------------------------------------------------------------------- L4


def _anchor_kind(row: Mapping[str, Any]) -> str:
    anchors = _as_list(row.get("anchor_event_ids")) or []
    prefix = str(anchors[0]).split("-")[0] if anchors else "LAB"  # anchorless T9 = a lab
    return {"LAB": "lab", "RX": "medication", "PX": "procedure", "DX": "diagnosis"}.get(
        prefix, "other"
    )


def binary_collapse(q: pd.DataFrame) -> list[str]:
    """The HARD L4 failures of a binary task's questions ``q``: its gold balance or its
    subtype coverage collapsed (see :data:`BINARY_TASKS`); [] when it holds."""
    n = len(q)
    if n < MIN_N_BINARY:
        return []
    out = []
    golds = q["gold"].astype(str).str.strip().str.lower().value_counts()
    minority = min(int(golds.get("yes", 0)), int(golds.get("no", 0)))
    if minority < MIN_MINORITY_SHARE * n:
        top = golds.idxmax()
        out.append(
            f"gold balance collapsed: {top!r} holds {int(golds.max())} of {n} "
            f"(the other answer {minority} < {MIN_MINORITY_SHARE:.0%}; a constant answer "
            "would score high)"
        )
    subs = q["subtype"].astype(str).value_counts()
    if subs.max() > MAX_SUBTYPE_SHARE * n:
        out.append(
            f"subtype coverage collapsed: {subs.idxmax()} holds {int(subs.max())} of {n} "
            f"(> {MAX_SUBTYPE_SHARE:.0%})"
        )
    return out


def gate_l4(questions: pd.DataFrame, tasks: Iterable[str]) -> list[dict]:
    """L4 distribution checks per task: one row each (soft; see module docstring)."""
    rows = []
    for task in tasks:
        q = questions[questions["task"] == task]
        n = len(q)
        checks: list[tuple[str, bool]] = []
        if n == 0:
            checks.append(("the task has no questions", False))
        else:
            expected_sub = tuple(TASKS[task].subtypes) if task in TASKS else ()
            strata = {
                "disease": (q["disease"].astype(str), INDEX_DISEASES),
                "tertile": (q["tertile"].astype(str), TERTILES),
                "subtype": (q["subtype"].astype(str), expected_sub),
            }
            for name, (col, expected) in strata.items():
                counts = col.value_counts()
                if expected and n >= len(expected):
                    for s in expected:
                        checks.append((f"{name} {s} empty", int(counts.get(s, 0)) > 0))
                if name == "disease" and n >= len(INDEX_DISEASES):
                    top = counts.max() / n
                    checks.append(
                        (
                            f"disease {counts.idxmax()} holds {top:.0%}",
                            top <= 2 / len(INDEX_DISEASES),
                        )
                    )
            if n >= MIN_N_FOR_PATIENT_SHARE:
                first = q["subject_ids"].map(lambda s: int((_as_list(s) or [0])[0]))
                share = first.value_counts().max() / n
                checks.append(
                    (
                        f"patient {first.value_counts().idxmax()} holds {share:.0%}",
                        share <= MAX_PATIENT_SHARE,
                    )
                )
            for t, kind, lo, hi in EVENT_TYPE_TARGETS:
                if t == task:
                    share = float((q.apply(_anchor_kind, axis=1) == kind).mean())
                    checks.append(
                        (f"{kind} share {share:.0%} outside {lo:.0%}-{hi:.0%}", lo <= share <= hi)
                    )
        hard = binary_collapse(q) if task in BINARY_TASKS else []
        failed = hard + [msg for msg, ok in checks if not ok]
        rows.append(
            {
                "gate": "L4",
                "task": task,
                "n_checked": len(checks) + (2 if task in BINARY_TASKS and n >= MIN_N_BINARY else 0),
                "n_failed": len(failed),
                "threshold": THRESHOLDS["L4"],
                "passed": not failed,
                "severity": "hard" if hard else SEVERITY["L4"],
                "detail": "; ".join(failed[:DETAIL_EXAMPLES])
                + (
                    f" (+{len(failed) - DETAIL_EXAMPLES} more)"
                    if len(failed) > DETAIL_EXAMPLES
                    else ""
                ),
            }
        )
    return rows
