"""L5 human spot-check (paper Appendix A, L5: "A stratified sample of 370 questions
(30/task low-risk × 4 + 50/task high-risk × 5) was hand-audited by the authors;
366/370 = 98.92% agreement with the automated gold. 7/9 tasks scored 0% FAIL; T7 = 2%
(distractor substring leak), T9 = 6% (Secondary-pool textual templating). Both below the 10%
fix threshold").

Risk classes, derived from that passage's arithmetic (:func:`paper_quota_solutions`). A task
audited q times with d disagreements prints as round(100 d / q) %. T7 = 2% needs d/q = 1/50
(1/30 prints as 3%, and no integer d gives 2% of 30); T9 = 6% needs 3/50 (2/30 prints 7%,
1/30 3%). Their disagreements, 1 + 3 = 4, are exactly 370 − 366, so the other seven tasks
have none ("7/9 tasks scored 0% FAIL"). Hence T7 and T9 are two of the five high-risk tasks.
The arithmetic says nothing about which three other tasks are high risk; the kit's choice is
the tasks whose gold is computed from several events, where one wrong field silently flips
the label: T2 (trend over 2–5 visits and three thresholds), T4 (a set of evidence events —
every member must be right) and T8 (before/after windows around a treatment start). Low risk
(30 per task): T1 (one value), T3 and T5 (gold set by the injection the kit inserted) and T6
(each patient's side is one count, maximum or difference read from structured fields).
Before this derivation the kit sampled T7 as low risk and T6 as high; with T7 at 30 the
paper's 2% cannot be reproduced.

Sampling is stratified: within a task, questions are dealt round-robin over (subtype, disease)
strata in a seeded hash order, so every stratum is represented before any is repeated; a task
with fewer questions than its quota contributes all of them.

The sheet is a CSV (written atomically) with the columns in :data:`AUDIT_COLUMNS`; the auditor
fills ``auditor_verdict`` with ``agree`` or ``disagree`` (and an optional note).
:func:`import_audit_sheet` validates it (clear :class:`AuditSheetError` naming the file, row
and value) and :func:`audit_agreement` gives per-task and overall agreement;
:func:`build_audit_sheet` / :func:`score_audit_sheet` do both for a profile
(``clintrace audit``), the latter with the paper's figures beside.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.config import build_dir
from clinlib.core.io import atomic_path
from clinlib.core.seed_facts import seed_fact
from clinlib.data.build import load
from clinlib.data.drugnames import drug_display
from clinlib.tasks.registry import task_names

HIGH_RISK_TASKS: tuple[str, ...] = ("T2", "T4", "T7", "T8", "T9")
LOW_RISK_TASKS: tuple[str, ...] = ("T1", "T3", "T5", "T6")
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
# What Appendix A prints about L5 (seed facts ctb_l5_sample / ctb_l5_fails): the two quotas and
# how many tasks get each, the agreement, the printed per-task FAIL percentages (the other 7
# tasks: 0%) and the fix threshold.
_L5, _L5_FAILS = seed_fact("ctb_l5_sample"), seed_fact("ctb_l5_fails")
PAPER_AGREEMENT = (int(_L5.number(5)), int(_L5.number(0)))  # 366 of 370
PAPER_QUOTAS: dict[int, int] = {
    int(_L5.number(1)): int(_L5.number(2)),
    int(_L5.number(3)): int(_L5.number(4)),
}
PAPER_FAIL_PCT: dict[str, int] = {"T7": int(_L5_FAILS.number(1)), "T9": int(_L5_FAILS.number(2))}
FIX_THRESHOLD = _L5_FAILS.number(3) / 100  # a task at 10% disagreement or more must be fixed
QUOTA: dict[str, int] = {
    **{t: max(PAPER_QUOTAS) for t in HIGH_RISK_TASKS},
    **{t: min(PAPER_QUOTAS) for t in LOW_RISK_TASKS},
}
SHEET_NAME = "l5_audit_sheet.csv"


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
    for task in task_names("paper"):
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
        if r["task"] not in task_names("paper"):
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
    groups = [
        (t, done[done["task"] == t]) for t in task_names("paper") if (done["task"] == t).any()
    ]
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


# --------------------------------------------------------------------------- the paper's L5


def _printed_pct(d: int, q: int) -> int:
    """round(100 d / q) as a percentage is printed (half up, not Python's half-to-even)."""
    return int(np.floor(100 * d / q + 0.5))


def paper_quota_solutions() -> pd.DataFrame:
    """Every (quota, disagreements) reading of the paper's printed per-task FAIL percentages
    (module docstring). For each task with a printed FAIL and each quota q, every d in 1..q is
    tried: a row per d that prints as the paper's percentage (``matches``), else one row with
    the d that prints closest (to show why that quota fails). ``total_ok`` marks the matches
    when each task has exactly one and they sum to 370 − 366.

    Returns:
        Frame: task, quota, disagreements, printed_pct, paper_pct, matches, total_ok.
    """
    rows = []
    for task, pct in PAPER_FAIL_PCT.items():
        for q in sorted(PAPER_QUOTAS):
            ds = [d for d in range(1, q + 1) if _printed_pct(d, q) == pct]
            if not ds:
                ds = [min(range(1, q + 1), key=lambda d: abs(100 * d / q - pct))]
            rows += [
                {
                    "task": task,
                    "quota": q,
                    "disagreements": d,
                    "printed_pct": _printed_pct(d, q),
                    "paper_pct": pct,
                }
                for d in ds
            ]
    out = pd.DataFrame(rows)
    out["matches"] = out["printed_pct"] == out["paper_pct"]
    hit = out[out["matches"]]
    unique = set(hit["task"]) == set(PAPER_FAIL_PCT) and hit["task"].is_unique
    total = PAPER_AGREEMENT[1] - PAPER_AGREEMENT[0]
    out["total_ok"] = out["matches"] & bool(unique and hit["disagreements"].sum() == total)
    return out


def paper_l5_table() -> pd.DataFrame:
    """The paper's L5 outcome per task under the derived risk classes: task, risk, n,
    n_disagree, agreement (with ``all``: 370, 4, 366/370)."""
    sol = paper_quota_solutions()
    d = dict(
        zip(
            sol.loc[sol["total_ok"], "task"], sol.loc[sol["total_ok"], "disagreements"], strict=True
        )
    )
    rows = [
        {
            "task": t,
            "risk": "high" if t in HIGH_RISK_TASKS else "low",
            "n": QUOTA[t],
            "n_disagree": int(d.get(t, 0)),
        }
        for t in task_names("paper")
    ]
    rows.append(
        {
            "task": "all",
            "risk": "",
            "n": sum(r["n"] for r in rows),
            "n_disagree": sum(r["n_disagree"] for r in rows),
        }
    )
    out = pd.DataFrame(rows)
    out["agreement"] = 1 - out["n_disagree"] / out["n"]
    return out


# --------------------------------------------------------------------------- a profile's sheet


def sheet_path(profile: str | None = None) -> Path:
    """``data/build/<profile>/audit/l5_audit_sheet.csv``: where :func:`build_audit_sheet`
    writes the sheet to fill."""
    return build_dir(profile) / "audit" / SHEET_NAME


def build_audit_sheet(profile: str | None = None, seed: int = 0) -> tuple[pd.DataFrame, Path]:
    """The profile's L5 sheet (sampled questions, gold, anchor events and the dialogue turns
    that state them), written to :func:`sheet_path` for a human to fill.

    Returns:
        (sheet, path).
    """
    path = sheet_path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet = export_audit_sheet(
        load("questions", profile),
        path,
        seed,
        events=load("events", profile),
        turns=load("dialogues", profile),
    )
    return sheet, path


def score_audit_sheet(
    path: str | Path, profile: str | None = None, *, allow_blank: bool = False
) -> pd.DataFrame:
    """Agreement of a filled sheet per task and overall, with the paper's figures beside.

    Every qid must be a question of the profile and carry the task and gold it has there (a
    sheet from another build or an edited gold is refused, naming the CSV line).

    Returns:
        :func:`audit_agreement` columns plus paper_n, paper_n_disagree, paper_agreement.
    """
    sheet = import_audit_sheet(path, allow_blank=allow_blank)
    qs = load("questions", profile).set_index("qid")
    for i, r in enumerate(sheet.to_dict("records")):
        where = f"{path}: line {i + 2} (qid {r['qid']})"
        if r["qid"] not in qs.index:
            raise AuditSheetError(f"{where}: not a question of this build")
        for col in ("task", "gold"):
            if str(qs.at[r["qid"], col]) != r[col]:
                raise AuditSheetError(
                    f"{where}: {col} {r[col]!r} differs from the build's "
                    f"{str(qs.at[r['qid'], col])!r}"
                )
    paper = paper_l5_table().set_index("task")
    out = audit_agreement(sheet)
    out["paper_n"] = out["task"].map(paper["n"])
    out["paper_n_disagree"] = out["task"].map(paper["n_disagree"])
    out["paper_agreement"] = out["task"].map(paper["agreement"])
    return out


def sheet_summary(sheet: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per task: risk class, quota, questions available in the set and rows sampled (a task
    with fewer questions than its quota contributes all of them).

    Returns:
        Frame: task, risk, quota, available, sampled.
    """
    avail = questions["task"].value_counts()
    sampled = sheet["task"].value_counts()
    return pd.DataFrame(
        [
            {
                "task": t,
                "risk": "high" if t in HIGH_RISK_TASKS else "low",
                "quota": QUOTA[t],
                "available": int(avail.get(t, 0)),
                "sampled": int(sampled.get(t, 0)),
            }
            for t in task_names("paper")
        ]
    )
