"""Run gates L0–L4 on a candidate question set, block on a failed hard gate and render the
report (paper Appendix A; Fig. 2 stage 4).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.core.config import artifact_path
from clinlib.core.io import read_artifact
from clinlib.data.build import open_source, source_spec
from clinlib.data.plausibility import apply_exclusions
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.gates.common import (
    GATE_COLUMNS,
    GATE_NAMES,
    SEVERITY,
    THRESHOLDS,
    GateError,
    as_list,
    gate_rows,
    int_like,
    require_columns,
)
from clinlib.tasks.gates.content import gate_l3, gate_l4
from clinlib.tasks.gates.gold import gate_l2
from clinlib.tasks.gates.structure import EXCLUDED_PREFIX, gate_l0, gate_l1
from clinlib.tasks.recompute import load_raw
from clinlib.tasks.registry import task_names

# --------------------------------------------------------------------------- driver


def _load_exclusions(profile, exclusions, own_source: bool):
    """The given exclusions; else, when the gates read the profile's own source, its
    exclusions.parquet (if the cohort stage wrote one)."""
    if exclusions is not None or not own_source:
        return exclusions
    path = artifact_path("exclusions.parquet", profile)
    return pd.read_parquet(path) if path.exists() else None


def _zero_tolerance_exclusions(rows: list[dict], l1: dict) -> list[dict]:
    """An L1 row with any question built on an excluded source row fails, whatever L1's
    threshold: such a question states or asks about a fact that is not in the record."""
    for r in rows:
        fails = l1.get(r["task"], (0, []))[1]
        n_bad = sum(why.startswith(EXCLUDED_PREFIX) for _, why in fails)
        if n_bad:
            r["passed"] = False
            r["detail"] = f"{n_bad} built on excluded source rows (0 allowed) | {r['detail']}"
    return rows


def _load_inputs(profile, events, coverage, raw_con):
    if events is None:
        events = read_artifact(artifact_path("events.parquet", profile), "clintrace cohort")
    if coverage is None:
        coverage = read_artifact(
            artifact_path("event_coverage.parquet", profile), "clintrace dialogues"
        )
    if raw_con is None:
        raw_con = open_source(source_spec(profile))
        excluded = artifact_path("exclusions.parquet", profile)
        if excluded.exists():  # the implausible rows the events left out (data.plausibility)
            apply_exclusions(raw_con, pd.read_parquet(excluded))
    return events, coverage, raw_con


def run_gates(
    questions: pd.DataFrame,
    profile: str | None = None,
    *,
    events: pd.DataFrame | None = None,
    coverage: pd.DataFrame | None = None,
    raw_con=None,
    tasks: Sequence[str] | None = None,
    exclusions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Run gates L0–L4 on a candidate question set.

    Args:
        questions: questions with :data:`clinlib.tasks.base.QUESTION_COLUMNS`.
        profile: build profile whose artifacts (events, event_coverage, source.json -> raw
            hosp tables) are read when ``events`` / ``coverage`` / ``raw_con`` are not given.
        events: events.parquet of the cohort.
        coverage: event_coverage.parquet (event_id, subject_id, status).
        raw_con: DuckDB connection with the raw hosp views (clinlib.data.sources.mimic.open_hosp).
        tasks: the tasks to report (default T1..T9 plus any other task present); the extended
            set (clinlib.tasks.extended) reports its own tasks only.
        exclusions: exclusions.parquet of the cohort stage (default: the profile's, when it
            exists and ``raw_con`` is not given): L1 fails, with zero tolerance, any question whose anchors or gold source
            rows (meta event ids and hadm_ids) touch an excluded row.

    Returns:
        One row per (gate, task) with :data:`GATE_COLUMNS`; gates L0..L4 x tasks.
    """
    present = {str(t) for t in questions.get("task", pd.Series(dtype=str))}
    if tasks is None:
        paper = task_names("paper")
        tasks = list(paper) + sorted(present - set(paper))
    else:
        tasks = list(tasks) + sorted(present - set(tasks))
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
    require_columns(events, "events")
    require_columns(coverage, "event_coverage")
    sids = {int(s) for lst in questions["subject_ids"] for s in (as_list(lst) or []) if int_like(s)}
    try:
        raw = load_raw(raw_con, sids)
    finally:
        if own_con:  # a connection we opened ourselves
            raw_con.close()
    rows = gate_rows("L0", gate_l0(questions), tasks)
    l1 = gate_l1(
        questions, events, coverage, raw.lab_days, _load_exclusions(profile, exclusions, own_con)
    )
    rows += _zero_tolerance_exclusions(gate_rows("L1", l1, tasks), l1)
    rows += gate_rows("L2", gate_l2(questions, raw, coverage), tasks)
    rows += gate_rows("L3", gate_l3(questions), tasks)
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
