"""L5 human spot-check support (paper Appendix A, L5: "A stratified sample of 370 questions
(30/task low-risk x 4 + 50/task high-risk x 5) was hand-audited by the authors; 366/370 =
98.92% agreement with the automated gold ... Both below the 10% fix threshold").

Risk classes. High risk (50 per task) are the tasks whose gold is computed from several
events or from an absence, where one wrong field silently flips the label: T2 (trend over
2–5 visits and three thresholds), T4 (a set of evidence events — every member must be right),
T6 (aggregates over two patients), T8 (before/after windows around a treatment start) and T9
(the fact must be absent from the WHOLE dialogue). Low risk (30 per task) are single-fact or
construction-controlled tasks: T1 (one value), T3 and T5 (gold set by the injection we
inserted) and T7 (one documented treatment; its distractors are also checked by L2).

Sampling is stratified: within a task, questions are dealt round-robin over (subtype, disease)
strata in a seeded hash order, so every stratum is represented before any is repeated; a task
with fewer questions than its quota contributes all of them.

The sheet is a CSV (written atomically) with the columns in :data:`AUDIT_COLUMNS`; the auditor
fills ``auditor_verdict`` with ``agree`` or ``disagree`` (and an optional note).
:func:`import_audit_sheet` validates it (clear :class:`AuditSheetError` naming the file, row
and value) and :func:`audit_agreement` gives per-task and overall agreement.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.io import atomic_path
from clinlib.data.drugnames import drug_display
from clinlib.tasks.answers import TASK_NAMES

HIGH_RISK_TASKS: tuple[str, ...] = ("T2", "T4", "T6", "T8", "T9")
LOW_RISK_TASKS: tuple[str, ...] = ("T1", "T3", "T5", "T7")
QUOTA: dict[str, int] = {**{t: 50 for t in HIGH_RISK_TASKS}, **{t: 30 for t in LOW_RISK_TASKS}}
AUDIT_COLUMNS: tuple[str, ...] = (
    "qid",
    "task",
    "subtype",
    "risk",
    "subject_ids",
    "question",
    "options",
    "gold",
    "evidence",
    "auditor_verdict",
    "auditor_note",
)
VERDICTS: tuple[str, ...] = ("agree", "disagree")
FIX_THRESHOLD = 0.10  # a task whose disagreement rate reaches 10% must be fixed (Appendix A)
PAPER_AGREEMENT = (366, 370)  # 98.92%


class AuditSheetError(ValueError):
    """A malformed audit sheet: names the file, the row (CSV line) and the offending value."""


# --------------------------------------------------------------------------- sampling


def _rank(seed: int, qid: str) -> str:
    return hashlib.sha1(f"{seed}|{qid}".encode()).hexdigest()


def sample_audit(questions: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The stratified L5 sample (quota per task, round-robin over (subtype, disease)).

    Args:
        questions: the evaluation set (QUESTION_COLUMNS).
        seed: sampling seed.

    Returns:
        The sampled questions, ordered by task then draw order.
    """
    picked = []
    for task in TASK_NAMES:
        q = questions[questions["task"] == task]
        if q.empty:
            continue
        q = q.assign(_rank=[_rank(seed, str(x)) for x in q["qid"]]).sort_values("_rank")
        strata = [
            g.index.tolist()
            for _, g in sorted(q.groupby(["subtype", "disease"], sort=True), key=lambda kv: kv[0])
        ]
        order: list = []
        depth = 0
        while len(order) < min(QUOTA[task], len(q)):
            for s in strata:
                if depth < len(s):
                    order.append(s[depth])
            depth += 1
        picked.append(q.loc[order[: QUOTA[task]]].drop(columns="_rank"))
    if not picked:
        return questions.iloc[0:0].copy()
    return pd.concat(picked).reset_index(drop=True)


# --------------------------------------------------------------------------- evidence


def _as_list(x: Any) -> list:
    if isinstance(x, np.ndarray):
        return x.tolist()
    return list(x) if isinstance(x, list | tuple) else []


def _event_line(e: Mapping[str, Any]) -> str:
    when = pd.Timestamp(e["time"]).strftime("%Y-%m-%d %H:%M") if pd.notna(e["time"]) else "?"
    kind = str(e["kind"])
    if kind == "lab":
        flag = " (abnormal)" if str(e.get("flag")) == "abnormal" else ""
        what = f"{e['label']} = {e.get('value_text')} {e.get('unit') or ''}".strip() + flag
    elif kind == "medication":
        what = (
            f"{drug_display(e['label'])} {e.get('value_text') or ''} {e.get('unit') or ''}".strip()
        )
    else:
        what = f"{e.get('code_system')} {e.get('code')} {e.get('label')}"
    return f"{e['event_id']} [{when}] {what}"


def evidence_text(
    row: Mapping[str, Any],
    events: pd.DataFrame | None = None,
    turns: pd.DataFrame | None = None,
) -> str:
    """What an auditor needs beside the question: anchor events, evidence turns, injection, meta.

    Args:
        row: a question row.
        events: events.parquet (anchor details), optional.
        turns: dialogues.parquet (evidence turn text), optional.

    Returns:
        A multi-line text.
    """
    lines = []
    anchors = [str(a) for a in _as_list(row.get("anchor_event_ids"))]
    if anchors:
        if events is not None:
            ev = events[events["event_id"].astype(str).isin(anchors)]
            lines += [_event_line(e) for e in ev.to_dict("records")]
            lines += [f"{a} [not in events]" for a in anchors if a not in set(ev["event_id"])]
        else:
            lines.append("anchors: " + ", ".join(anchors))
    if turns is not None:
        for tag in _as_list(row.get("evidence_turns")):
            sid, _, idx = str(tag).partition(":")
            hit = turns[
                (turns["subject_id"].astype(int) == int(sid))
                & (turns["turn_idx"].astype(int) == int(idx))
            ]
            for t in hit.to_dict("records"):
                lines.append(f"turn {tag} {t['speaker']}: {t['text']}")
    injection = row.get("injection")
    if isinstance(injection, str) and injection.strip():
        data = json.loads(injection)
        items = data if isinstance(data, list) else [data]
        lines += [f"injected: {i.get('text')}" for i in items if isinstance(i, dict)]
    lines.append(f"meta: {row.get('meta')}")
    return "\n".join(lines)


def export_audit_sheet(
    questions: pd.DataFrame,
    path: str | Path,
    seed: int = 0,
    *,
    events: pd.DataFrame | None = None,
    turns: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Write the L5 audit sheet (CSV, atomically) for a human auditor.

    Args:
        questions: the evaluation set.
        path: output CSV path.
        seed: sampling seed.
        events: events.parquet, to spell out anchor events (optional).
        turns: dialogues.parquet, to quote the evidence turns (optional).

    Returns:
        The sheet as written (:data:`AUDIT_COLUMNS`).
    """
    sample = sample_audit(questions, seed)
    sheet = pd.DataFrame(
        {
            "qid": sample["qid"].astype(str),
            "task": sample["task"].astype(str),
            "subtype": sample["subtype"].astype(str),
            "risk": ["high" if t in HIGH_RISK_TASKS else "low" for t in sample["task"]],
            "subject_ids": [
                ";".join(str(int(s)) for s in _as_list(x)) for x in sample["subject_ids"]
            ],
            "question": sample["question"].astype(str),
            "options": [
                " | ".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(_as_list(x)))
                for x in sample["options"]
            ],
            "gold": sample["gold"].astype(str),
            "evidence": [evidence_text(r, events, turns) for r in sample.to_dict("records")],
            "auditor_verdict": "",
            "auditor_note": "",
        },
        columns=list(AUDIT_COLUMNS),
    )
    with atomic_path(Path(path)) as tmp:
        sheet.to_csv(tmp, index=False)
    return sheet


# --------------------------------------------------------------------------- import


def import_audit_sheet(path: str | Path, *, allow_blank: bool = False) -> pd.DataFrame:
    """Read a filled audit sheet and validate every verdict.

    Args:
        path: the CSV written by :func:`export_audit_sheet` and filled by the auditor.
        allow_blank: keep rows without a verdict (excluded from agreement) instead of failing.

    Returns:
        The sheet with ``auditor_verdict`` normalised to lower case ("" when blank).

    Raises:
        AuditSheetError: a missing file or column, a duplicated qid, an unknown task, or a
            verdict other than agree / disagree (naming the CSV line and the value).
    """
    path = Path(path)
    if not path.exists():
        raise AuditSheetError(f"{path}: no such audit sheet")
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in ("qid", "task", "gold", "auditor_verdict") if c not in sheet.columns]
    if missing:
        raise AuditSheetError(f"{path}: missing column(s) {', '.join(missing)}")
    sheet["auditor_verdict"] = sheet["auditor_verdict"].str.strip().str.lower()
    seen: dict[str, int] = {}
    for i, r in enumerate(sheet.to_dict("records")):
        line = i + 2  # the header is line 1
        if r["qid"] in seen:
            raise AuditSheetError(
                f"{path}: line {line}: qid {r['qid']!r} repeats line {seen[r['qid']]}"
            )
        seen[r["qid"]] = line
        if r["task"] not in TASK_NAMES:
            raise AuditSheetError(f"{path}: line {line} (qid {r['qid']}): task {r['task']!r}")
        v = r["auditor_verdict"]
        if v == "" and allow_blank:
            continue
        if v not in VERDICTS:
            raise AuditSheetError(
                f"{path}: line {line} (qid {r['qid']}): auditor_verdict {v!r} is not one of "
                f"{', '.join(VERDICTS)}"
            )
    return sheet


def audit_agreement(sheet: pd.DataFrame) -> pd.DataFrame:
    """Per-task and overall agreement of the auditor with the automated gold.

    Args:
        sheet: :func:`import_audit_sheet` output.

    Returns:
        One row per task plus ``all``: task, n, n_agree, n_disagree, agreement, fail_rate,
        below_fix_threshold (fail_rate < 10%).
    """
    done = sheet[sheet["auditor_verdict"].isin(VERDICTS)]
    rows = []
    groups = [(t, done[done["task"] == t]) for t in TASK_NAMES if (done["task"] == t).any()]
    for task, g in groups + [("all", done)]:
        n = len(g)
        agree = int((g["auditor_verdict"] == "agree").sum())
        rate = agree / n if n else float("nan")
        rows.append(
            {
                "task": task,
                "n": n,
                "n_agree": agree,
                "n_disagree": n - agree,
                "agreement": rate,
                "fail_rate": 1 - rate if n else float("nan"),
                "below_fix_threshold": bool(n) and (1 - rate) < FIX_THRESHOLD,
            }
        )
    return pd.DataFrame(rows)
