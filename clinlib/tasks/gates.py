"""Validation gates L0–L4 on the candidate evaluation set (paper Appendix A; Fig. 2 stage 4
"L0–L4 deterministic + L5 human audit"; L5 support lives in :mod:`clinlib.tasks.audit`).

:func:`run_gates` returns one row per (gate, task) — gate, task, n_checked, n_failed,
threshold, passed, severity, detail — for all nine tasks (a task without questions is checked
on nothing and flagged by L4). :func:`check_gates` raises :class:`GateError` when a HARD gate
failed, so nothing downstream runs on a set that failed; :func:`gate_report` renders the table.

L0 schema (hard, 0 failures). Every :data:`clinlib.tasks.base.QUESTION_COLUMNS` column is
    present; per row: qid ``"<task>-..."`` and unique; task T1..T9; non-empty strings; lists
    where lists are due (subject_ids: one patient, two distinct for T6; evidence_turns
    ``"<subject>:<turn>"``); template_id >= 0; disease an index disease, tertile
    low/medium/high; meta a JSON object; injection "" or JSON; gold in the task's canonical
    vocabulary (:func:`clinlib.tasks.answers.gold_problem`); T7 four distinct options, other
    tasks none.
L1 anchor source (hard, < 1%). T1–T8: every anchor is a ``covered`` event
    (event_coverage.status) of the question's patients; anchors may be empty only for
    :data:`ANCHORLESS_SUBTYPES`. T9: every anchor is a ``missed`` event; a T9 question without
    anchors (a lab never measured on a date) must have no event of that lab on that date in the
    events table and no panel row of it that day in the raw labevents.
L2 gold recompute (hard, < 0.5%). :mod:`clinlib.tasks.recompute` regenerates every gold from
    the raw hosp tables and the question's meta with its own SQL and arithmetic; a question
    fails when the gold differs, cannot be recomputed, or (where the rule fixes them) the
    recomputed anchor events differ from the question's.
L3 no gold leakage (hard, 0 failures). The question stem — the text without the task's
    answer-format statement, the shared abstention clause and T7's options block — must not
    contain: T1 the gold value (as a number, dates excluded); T2 / T8 the gold's label words
    unless every alternative of that axis is listed (a list of choices is not a leak); T3 / T5
    the injected sentence or its "Physician noted:" marker; T4 any gold event id; T6 the
    computed values of A or B (rule parameters such as "5%" excluded); T7 the answer option's
    text; T8 the before/after values; T9 an abstention cue (:data:`T9_CUES`).
L4 distribution coverage (soft). Per task: no empty disease / tertile / subtype stratum when
    the task has at least as many questions as strata; no disease holding more than twice its
    uniform share; no patient above :data:`MAX_PATIENT_SHARE` of a task of >= 20 questions;
    event-type mix of T7 (medication vs procedure) and T9 (lab vs other) within
    :data:`EVENT_TYPE_TARGETS`. Reported, never blocking.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.vocab import INDEX_DISEASES, PANEL_ITEMIDS
from clinlib.tasks import rules
from clinlib.tasks.answers import ABSTAIN_CLAUSE, ANSWER_FORMATS, TASK_NAMES, gold_problem
from clinlib.tasks.base import QUESTION_COLUMNS, STATED_NUMBER, TASKS
from clinlib.tasks.recompute import RawRecord, load_raw, recompute_question

GATE_NAMES: dict[str, str] = {
    "L0": "schema",
    "L1": "anchor source",
    "L2": "gold recompute",
    "L3": "no gold leakage",
    "L4": "distribution coverage",
}
# Failure-rate thresholds: 0 means "no failure allowed"; otherwise pass iff rate < threshold.
THRESHOLDS: dict[str, float] = {"L0": 0.0, "L1": 0.01, "L2": 0.005, "L3": 0.0, "L4": 0.0}
SEVERITY: dict[str, str] = {"L0": "hard", "L1": "hard", "L2": "hard", "L3": "hard", "L4": "soft"}
GATE_COLUMNS: dict[str, str] = {
    "gate": "string",
    "task": "string",
    "n_checked": "int64",
    "n_failed": "int64",
    "threshold": "float64",
    "passed": "bool",
    "severity": "string",
    "detail": "string",
}
TERTILES = ("low", "medium", "high")
DETAIL_EXAMPLES = 3

# T1–T8 subtypes whose questions legitimately have no anchor event.
ANCHORLESS_SUBTYPES: frozenset[tuple[str, str]] = frozenset({("T5", "controlled_control")})

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


class GateError(ValueError):
    """A hard validation gate failed; the message names gate, task, count and examples."""


class GateInputError(ValueError):
    """An input of the gates (events, coverage) lacks a column the gates read."""


INPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("event_id", "subject_id", "kind", "code", "time"),
    "event_coverage": ("event_id", "subject_id", "status"),
}


def _require(df: pd.DataFrame, name: str) -> None:
    missing = [c for c in INPUT_COLUMNS[name] if c not in df.columns]
    if missing:
        raise GateInputError(f"{name}: missing column(s) {', '.join(missing)}")


# --------------------------------------------------------------------------- helpers


def _as_list(x: Any) -> list | None:
    if isinstance(x, list | tuple):
        return list(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return None


def _is_str(x: Any) -> bool:
    return isinstance(x, str)


def _int_like(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int | np.integer):
        return True
    return isinstance(x, str) and x.strip().isdigit()


def _meta(row: Mapping[str, Any]) -> dict:
    try:
        data = json.loads(str(row.get("meta")))
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _passed(gate: str, n_checked: int, n_failed: int) -> bool:
    t = THRESHOLDS[gate]
    if t == 0:
        return n_failed == 0
    return n_checked == 0 or n_failed / n_checked < t


def _detail(failures: list[tuple[str, str]], extra: str = "") -> str:
    shown = "; ".join(f"{q}: {why}" for q, why in failures[:DETAIL_EXAMPLES])
    more = f" (+{len(failures) - DETAIL_EXAMPLES} more)" if len(failures) > DETAIL_EXAMPLES else ""
    return (extra + (" | " if extra and shown else "") + shown + more).strip()


def _rows_for(
    gate: str, by_task: Mapping[str, tuple[int, list[tuple[str, str]]]], tasks: Iterable[str]
) -> list[dict]:
    out = []
    for task in tasks:
        n, fails = by_task.get(task, (0, []))
        out.append(
            {
                "gate": gate,
                "task": task,
                "n_checked": int(n),
                "n_failed": len(fails),
                "threshold": THRESHOLDS[gate],
                "passed": _passed(gate, n, len(fails)),
                "severity": SEVERITY[gate],
                "detail": _detail(fails),
            }
        )
    return out


def _per_task(questions: pd.DataFrame, check) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """Run ``check(row) -> reason | None`` on every row, grouped by task."""
    out: dict[str, tuple[int, list[tuple[str, str]]]] = {}
    for row in questions.to_dict("records"):
        task = str(row.get("task"))
        try:
            why = check(row)
        except Exception as exc:  # a malformed row must become a recorded failure
            why = f"{type(exc).__name__}: {exc}"
        n, fails = out.get(task, (0, []))
        if why:
            fails = fails + [(str(row.get("qid")), why)]
        out[task] = (n + 1, fails)
    return out


# --------------------------------------------------------------------------- L0


def _l0_row(row: Mapping[str, Any], dup_qids: set[str]) -> str | None:
    task, qid = row.get("task"), row.get("qid")
    if task not in TASK_NAMES:
        return f"task {task!r} is not one of T1..T9"
    if not _is_str(qid) or not qid.startswith(f"{task}-") or len(qid) <= len(task) + 1:
        return f"qid {qid!r} is not '{task}-<hash>'"
    if qid in dup_qids:
        return "qid is not unique"
    for col in ("subtype", "question", "gold", "disease", "tertile", "meta"):
        if not _is_str(row.get(col)) or not row.get(col).strip():
            return f"column {col} is empty or not a string ({row.get(col)!r})"
    if not _is_str(row.get("injection")):
        return f"column injection is not a string ({row.get('injection')!r})"
    if row["injection"].strip():
        try:
            json.loads(row["injection"])
        except ValueError:
            return "injection is neither '' nor JSON"
    try:
        meta = json.loads(row["meta"])
    except ValueError:
        return "meta is not JSON"
    if not isinstance(meta, dict):
        return "meta is not a JSON object"
    lists = {c: _as_list(row.get(c)) for c, t in QUESTION_COLUMNS.items() if t == "list"}
    for col, val in lists.items():
        if val is None:
            return f"column {col} is not a list ({type(row.get(col)).__name__})"
    sids = lists["subject_ids"]
    if not all(_int_like(s) for s in sids):
        return f"subject_ids {sids!r} are not integers"
    want = 2 if task == "T6" else 1
    if len(sids) != want or len({int(s) for s in sids}) != want:
        return f"subject_ids {sids!r}: {task} needs {want} distinct patient(s)"
    if not all(_is_str(a) and a for a in lists["anchor_event_ids"]):
        return "anchor_event_ids holds a non-string or empty id"
    if not all(_is_str(t) and re.fullmatch(r"\d+:\d+", t) for t in lists["evidence_turns"]):
        return f"evidence_turns {lists['evidence_turns'][:3]!r} are not '<subject>:<turn>'"
    tid = row.get("template_id")
    if not _int_like(tid) or int(tid) < 0:
        return f"template_id {tid!r} is not a non-negative integer"
    if row["disease"] not in INDEX_DISEASES:
        return f"disease {row['disease']!r} is not an index disease"
    if row["tertile"] not in TERTILES:
        return f"tertile {row['tertile']!r} is not low/medium/high"
    options = lists["options"]
    if task == "T7":
        if not all(_is_str(o) for o in options):
            return "options hold a non-string"
        problem = gold_problem(task, row["gold"], options)
    else:
        if options:
            return f"{task} must have no options (found {len(options)})"
        problem = gold_problem(task, row["gold"])
    if problem:
        return f"gold {row['gold']!r}: {problem}"
    return None


def gate_l0(questions: pd.DataFrame) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L0 schema failures per task (see module docstring)."""
    counts = Counter(q for q in questions["qid"] if _is_str(q))
    dup = {q for q, n in counts.items() if n > 1}
    return _per_task(questions, lambda row: _l0_row(row, dup))


# --------------------------------------------------------------------------- L1


def _lab_events_by_day(events: pd.DataFrame) -> set[tuple[int, str, str]]:
    labs = events[events["kind"].astype(str) == "lab"]
    dates = pd.to_datetime(labs["time"]).dt.strftime("%Y-%m-%d").tolist()
    out = set()
    for s, c, d in zip(labs["subject_id"].tolist(), labs["code"].tolist(), dates, strict=True):
        key = PANEL_ITEMIDS.get(int(c), (None,))[0] if str(c).strip().isdigit() else None
        if key is not None:
            out.add((int(s), key, d))
    return out


def _l1_row(
    row: Mapping[str, Any],
    status: Mapping[str, tuple[int, str]],
    event_days: set,
    raw_days: frozenset | None,
) -> str | None:
    task = str(row["task"])
    anchors = _as_list(row.get("anchor_event_ids")) or []
    sids = {int(s) for s in (_as_list(row.get("subject_ids")) or [])}
    want = "missed" if task == "T9" else "covered"
    if not anchors:
        if task != "T9":
            if (task, str(row.get("subtype"))) in ANCHORLESS_SUBTYPES:
                return None
            return "no anchor event"
        meta = _meta(row)
        try:
            key = (int(meta["subject_id"]), str(meta["lab"]), str(meta["date"]))
        except (KeyError, TypeError, ValueError):
            return "T9 question without anchors lacks meta subject_id / lab / date"
        if key in event_days:
            return f"never-measured lab {key[1]} has an event on {key[2]}"
        if raw_days is not None and key in raw_days:
            return f"never-measured lab {key[1]} has a raw labevents row on {key[2]}"
        return None
    for a in anchors:
        sid, st = status.get(str(a), (None, "absent"))
        if st != want:
            return f"anchor {a} is {st}, not {want}"
        if sid not in sids:
            return f"anchor {a} belongs to subject {sid}, not {sorted(sids)}"
    return None


def gate_l1(
    questions: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    raw_days: frozenset | None = None,
) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L1 anchor-source failures per task (see module docstring)."""
    status = {
        str(e): (int(s), str(st))
        for e, s, st in zip(
            coverage["event_id"].tolist(),
            coverage["subject_id"].tolist(),
            coverage["status"].tolist(),
            strict=True,
        )
    }
    days = _lab_events_by_day(events)
    return _per_task(questions, lambda row: _l1_row(row, status, days, raw_days))


# --------------------------------------------------------------------------- L2


def gate_l2(
    questions: pd.DataFrame, raw: RawRecord, coverage: pd.DataFrame
) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L2 gold-recompute failures per task (see module docstring)."""
    status = dict(
        zip(
            coverage["event_id"].astype(str).tolist(),
            coverage["status"].astype(str).tolist(),
            strict=True,
        )
    )

    def check(row):
        rec = recompute_question(row, raw, status)
        if rec.gold is None:
            return f"not recomputable: {rec.problem}"
        if rec.gold != row["gold"]:
            return f"gold {row['gold']!r} but recomputed {rec.gold!r}"
        if rec.anchors is not None:
            have = sorted(str(a) for a in (_as_list(row.get("anchor_event_ids")) or []))
            if sorted(rec.anchors) != have:
                return f"anchors {have} but recomputed {sorted(rec.anchors)}"
        return rec.problem

    return _per_task(questions, check)


# --------------------------------------------------------------------------- L3

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?")
_OPTION_LINE = re.compile(r"^\s*\(?[A-D][.)]\s+.*$", re.MULTILINE)
_RULE_PARAMS = re.compile(
    rf"\b{int(round(rules.SIMILAR_REL * 100))}\s*%|\b{rules.T8_MIN_AFTER_DAYS}\s+(?:or more\s+)?days?\b"
)


def question_stem(row: Mapping[str, Any]) -> str:
    """The question text without its format statement, abstention clause and options block."""
    text = str(row.get("question") or "")
    fmt = ANSWER_FORMATS.get(str(row.get("task")), "")
    for part in (fmt, ABSTAIN_CLAUSE):
        if part:
            text = text.replace(part, " ")
    if row.get("task") == "T7":
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
    if task in ("T1",):
        g = _num(gold)
        if g is not None and any(n == g for n in _numbers(stem)):
            return f"the stem states the gold value {gold!r}"
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
    elif task == "T7":
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
        failed = [msg for msg, ok in checks if not ok]
        rows.append(
            {
                "gate": "L4",
                "task": task,
                "n_checked": len(checks),
                "n_failed": len(failed),
                "threshold": THRESHOLDS["L4"],
                "passed": not failed,
                "severity": SEVERITY["L4"],
                "detail": "; ".join(failed[:DETAIL_EXAMPLES])
                + (
                    f" (+{len(failed) - DETAIL_EXAMPLES} more)"
                    if len(failed) > DETAIL_EXAMPLES
                    else ""
                ),
            }
        )
    return rows


# --------------------------------------------------------------------------- driver


def _load_inputs(profile, events, coverage, raw_con):
    from clinlib.core.config import artifact_path
    from clinlib.core.io import read_artifact

    if events is None:
        events = read_artifact(artifact_path("events.parquet", profile), "clintrace cohort")
    if coverage is None:
        coverage = read_artifact(
            artifact_path("event_coverage.parquet", profile), "clintrace dialogues"
        )
    if raw_con is None:
        from pathlib import Path

        from clinlib.data.build import SourceSpec, open_source, read_source_info

        info = read_source_info(profile)
        raw_con = open_source(SourceSpec(info["kind"], Path(info["path"]), info["credentialed"]))
    return events, coverage, raw_con


def run_gates(
    questions: pd.DataFrame,
    profile: str | None = None,
    *,
    events: pd.DataFrame | None = None,
    coverage: pd.DataFrame | None = None,
    raw_con=None,
) -> pd.DataFrame:
    """Run gates L0–L4 on a candidate question set.

    Args:
        questions: questions with :data:`clinlib.tasks.base.QUESTION_COLUMNS`.
        profile: build profile whose artifacts (events, event_coverage, source.json -> raw
            hosp tables) are read when ``events`` / ``coverage`` / ``raw_con`` are not given.
        events: events.parquet of the cohort.
        coverage: event_coverage.parquet (event_id, subject_id, status).
        raw_con: DuckDB connection with the raw hosp views (clinlib.data.sources.mimic.open_hosp).

    Returns:
        One row per (gate, task) with :data:`GATE_COLUMNS`; gates L0..L4 x tasks T1..T9.
    """
    tasks = list(TASK_NAMES) + sorted(
        {str(t) for t in questions.get("task", pd.Series(dtype=str))} - set(TASK_NAMES)
    )
    missing = [c for c in QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        by_task = {
            t: (int((questions["task"] == t).sum()) if "task" in questions else 0, [])
            for t in tasks
        }
        rows = []
        for gate in GATE_NAMES:
            for task in tasks:
                n = by_task[task][0]
                rows.append(
                    {
                        "gate": gate,
                        "task": task,
                        "n_checked": n,
                        "n_failed": n if gate == "L0" else 0,
                        "threshold": THRESHOLDS[gate],
                        "passed": False,
                        "severity": SEVERITY[gate],
                        "detail": f"missing column(s) {', '.join(missing)}"
                        + ("" if gate == "L0" else "; not run"),
                    }
                )
        return _frame(rows)
    own_con = raw_con is None
    events, coverage, raw_con = _load_inputs(profile, events, coverage, raw_con)
    _require(events, "events")
    _require(coverage, "event_coverage")
    sids = {
        int(s) for lst in questions["subject_ids"] for s in (_as_list(lst) or []) if _int_like(s)
    }
    try:
        raw = load_raw(raw_con, sids)
    finally:
        if own_con:  # a connection we opened ourselves
            raw_con.close()
    rows = _rows_for("L0", gate_l0(questions), tasks)
    rows += _rows_for("L1", gate_l1(questions, events, coverage, raw.lab_days), tasks)
    rows += _rows_for("L2", gate_l2(questions, raw, coverage), tasks)
    rows += _rows_for("L3", gate_l3(questions), tasks)
    rows += gate_l4(questions, tasks)
    return _frame(rows)


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(GATE_COLUMNS))
    for col, dtype in GATE_COLUMNS.items():
        df[col] = df[col].astype(dtype)
    return df


def failed_hard(gates: pd.DataFrame) -> pd.DataFrame:
    """The hard gate rows that did not pass."""
    return gates[(gates["severity"] == "hard") & ~gates["passed"].astype(bool)]


def check_gates(gates: pd.DataFrame) -> None:
    """Raise :class:`GateError` when any HARD gate failed (soft L4 warnings never raise).

    Args:
        gates: :func:`run_gates` output.

    Raises:
        GateError: naming every failed hard (gate, task) with its failure count, threshold and
            first failing questions.
    """
    bad = failed_hard(gates)
    if bad.empty:
        return
    lines = [
        f"{r.gate} {GATE_NAMES.get(r.gate, '')} / {r.task}: {r.n_failed} of {r.n_checked} "
        f"failed ({_threshold_text(r.threshold)}): {r.detail}"
        for r in bad.itertuples(index=False)
    ]
    raise GateError(
        f"{len(bad)} hard validation gate(s) failed; the question set must not be used:\n  "
        + "\n  ".join(lines)
    )


def _threshold_text(t: float) -> str:
    return "0 failures allowed" if t == 0 else f"threshold < {t:.1%}"


def gate_report(gates: pd.DataFrame) -> str:
    """A readable text table of :func:`run_gates` output with the details of failures."""
    lines = [f"{'gate':<26}{'task':<6}{'checked':>8}{'failed':>8}  {'rule':<20}result"]
    for r in gates.itertuples(index=False):
        name = f"{r.gate} {GATE_NAMES.get(r.gate, '')}"
        verdict = "PASS" if r.passed else ("FAIL" if r.severity == "hard" else "WARN")
        lines.append(
            f"{name:<26}{r.task:<6}{r.n_checked:>8}{r.n_failed:>8}  "
            f"{_threshold_text(r.threshold):<20}{verdict}"
        )
        if not r.passed and r.detail:
            lines.append(f"{'':<8}-> {r.detail}")
    n_hard = len(failed_hard(gates))
    n_soft = int(((gates["severity"] == "soft") & ~gates["passed"].astype(bool)).sum())
    lines.append(
        f"hard failures: {n_hard}; soft warnings: {n_soft}"
        + ("" if n_hard else " — the set passes L0–L3")
    )
    return "\n".join(lines)
