"""Notebook 12's result: every audit check on the fourteen published tables
(:func:`audit_all`) and the machine-readable summary written to
``figures/<profile>/12_paper_summary.json`` (cells, Fig. 6 frontier, §5.3 gaps, Table 2 lifts, Fig. 4
T9 outcomes, implied pooling weights, checks and discrepancies).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from clinlib.analysis.paper import N_QUESTIONS, TASK_N
from clinlib.analysis.paper_figures.audit import (
    audit_appendix_tables,
    audit_cost,
    audit_frontier,
    audit_lift,
    audit_overview,
    audit_table1,
    discrepancies,
)
from clinlib.analysis.paper_figures.cells import (
    T9_UNSUPPORTED,
    PaperFiguresError,
    cell_summary,
    frontier_report,
    implied_pool_weights,
    lift_table,
    sp2_gaps,
    t9_breakdown,
)
from clinlib.analysis.paper_figures.claims import audit_text_claims
from clinlib.core.config import figures_dir
from clinlib.core.io import atomic_path

# Keys of the JSON written by write_summary (documented in build_summary).
SUMMARY_KEYS: tuple[str, ...] = (
    "schema_version",
    "source",
    "conventions",
    "cells",
    "frontier",
    "sp2",
    "lift",
    "t9",
    "implied_pool_weights",
    "checks",
    "discrepancies",
)


def audit_all(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Every check of the audit (tables and text claims) on the fourteen tables.

    Returns:
        Audit rows (:data:`AUDIT_COLUMNS`), flagged and passing.
    """
    summary = cell_summary(tables)
    frames = [
        audit_table1(tables),
        audit_lift(tables),
        audit_cost(tables),
        audit_appendix_tables(tables),
        audit_frontier(summary),
        audit_text_claims(tables, summary),
    ]
    return pd.concat(frames, ignore_index=True)


# =========================================================================== JSON summary


def _clean(value: object) -> object:
    """JSON-safe: NaN -> None, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        return None if math.isnan(float(value)) else float(value)
    if value is pd.NA:
        return None
    return value


def build_summary(tables: Mapping[int, pd.DataFrame], audit: pd.DataFrame | None = None) -> dict:
    """The machine-readable result of notebook 12.

    Keys (:data:`SUMMARY_KEYS`): schema_version; source (tables used); conventions; cells (32
    records of :func:`cell_summary`); frontier (:func:`frontier_report`); sp2 (records of
    :func:`sp2_gaps`); lift (n_cells, max_abs_diff_pp, n_flagged); t9 (breakdown records and
    unsupported parts); implied_pool_weights (:func:`implied_pool_weights`); checks (records
    of :func:`audit_overview`); discrepancies (records of :func:`discrepancies`).

    Args:
        tables: the fourteen published tables.
        audit: output of :func:`audit_all` (computed when omitted).
    """
    audit = audit_all(tables) if audit is None else audit
    summary = cell_summary(tables)
    lift = lift_table(tables)
    lift_flags = audit[audit["check"] == "table2_vs_table14"]["flagged"]
    out = {
        "schema_version": 1,
        "source": {
            "tables": "data/paper/table01..table14 (ClinTraceBench Tables 1–14, as printed)",
            "task_n": dict(TASK_N),
            "n_questions": N_QUESTIONS,
        },
        "conventions": {
            "accuracy": "fraction in [0, 1]",
            "diff": "reported minus recomputed, in the row's unit",
            "size": "how far a claim misses (|diff| for '=', overshoot for '<=' / '>=')",
            "flagged": "size > tol, the slack explained by printing precision",
        },
        "cells": summary.to_dict(orient="records"),
        "frontier": frontier_report(summary),
        "sp2": sp2_gaps(summary).to_dict(orient="records"),
        "lift": {
            "n_cells": int(len(lift)),
            "max_abs_diff_pp": float(lift["diff_pp"].abs().max()),
            "n_flagged": int(lift_flags.sum()),
        },
        "t9": {
            "breakdown": t9_breakdown(tables).drop(columns="order").to_dict(orient="records"),
            "unsupported": list(T9_UNSUPPORTED),
        },
        "implied_pool_weights": implied_pool_weights(tables),
        "checks": audit_overview(audit).to_dict(orient="records"),
        "discrepancies": discrepancies(audit).to_dict(orient="records"),
    }
    return _clean(out)


def write_summary(summary: Mapping, path: Path | None = None) -> Path:
    """Write ``summary`` as indented JSON, atomically.

    Args:
        summary: output of :func:`build_summary`.
        path: target (default ``figures/<profile>/12_paper_summary.json``, active profile).

    Returns:
        The path written.
    """
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        raise PaperFiguresError(f"write_summary: summary lacks keys {missing}")
    path = Path(path) if path is not None else figures_dir() / "12_paper_summary.json"
    text = json.dumps(_clean(dict(summary)), indent=1, ensure_ascii=False, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return path
