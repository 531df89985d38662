"""Reports on a dialogue corpus: kept/dropped counts, coverage by event kind, and our corpus
beside the paper's (paper §3 "Cohort": 385 of 400 kept; Appendix C.1, Fig. 13; docs/design.md
"Layout").
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

# Appendix C.1, Figure 13: the paper's n = 385 verified dialogues.
PAPER_DIALOGUE_STATS: dict[str, dict[str, float]] = {
    "visits per patient": {"median": 10.0, "mean": 16.0, "max": 93.0},
    "characters per dialogue (k)": {"median": 13.7, "mean": 15.0, "max": 30.7},
}


def build_report(out: Mapping[str, pd.DataFrame]) -> str:
    """One-paragraph text report of a build: kept/dropped counts and drop reasons by check."""
    summary, checks = out["dialogue_summary"], out["dialogue_checks"]
    kept = int(summary["kept"].sum())
    lines = [f"dialogues: {kept}/{len(summary)} kept, {len(summary) - kept} dropped"]
    failed = checks[(checks["severity"] == "hard") & ~checks["passed"]]
    for check, n in failed.groupby("check")["subject_id"].nunique().items():
        lines.append(f"  HARD {check}: {n} patient(s)")
    soft = checks[(checks["severity"] == "soft") & ~checks["passed"]]
    for check, n in soft.groupby("check")["subject_id"].nunique().items():
        lines.append(f"  soft {check}: {n} patient(s) warned")
    return "\n".join(lines)


# --- corpus statistics ---------------------------------------------------------------------


def coverage_report(coverage: pd.DataFrame, kept_only: bool = True) -> pd.DataFrame:
    """Coverage by event kind: events, covered, missed, unusable and the share of must-cover
    events (everything not missed by rule) that is covered.

    Args:
        coverage: event_coverage rows.
        kept_only: restrict to kept patients when a ``kept`` column is present.
    """
    cov = coverage
    if kept_only and "kept" in cov.columns:
        cov = cov[cov["kept"]]
    tab = pd.crosstab(cov["kind"].fillna("?"), cov["status"])
    for col in ("covered", "missed", "unusable"):
        if col not in tab.columns:
            tab[col] = 0
    tab = tab[["covered", "missed", "unusable"]]
    tab.loc["all"] = tab.sum()
    tab.insert(0, "events", tab.sum(axis=1))
    must = tab["covered"] + tab["unusable"]
    tab["must_cover_coverage"] = (tab["covered"] / must.where(must > 0)).round(4)
    return tab.rename_axis("kind").reset_index()


def corpus_stats(summary: pd.DataFrame, turns: pd.DataFrame) -> pd.DataFrame:
    """Our corpus beside the paper's (Appendix C.1): visits per patient, characters per
    dialogue (thousands) and turns per visit, over kept patients.

    Returns:
        Rows per metric with ours_median/mean/max and paper_median/mean/max (NaN where the
        paper gives no number).
    """
    kept = summary[summary["kept"]]
    per_visit = turns.groupby(["subject_id", "visit_idx"]).size()
    ours = {
        "visits per patient": kept["n_visits"].astype(float),
        "characters per dialogue (k)": kept["n_chars"].astype(float) / 1000,
        "turns per visit": per_visit.astype(float),
    }
    rows = []
    for metric, s in ours.items():
        paper = PAPER_DIALOGUE_STATS.get(metric, {})
        rows.append(
            dict(
                metric=metric,
                n=len(s),
                ours_median=float(s.median()) if len(s) else float("nan"),
                ours_mean=float(s.mean()) if len(s) else float("nan"),
                ours_max=float(s.max()) if len(s) else float("nan"),
                paper_median=paper.get("median", float("nan")),
                paper_mean=paper.get("mean", float("nan")),
                paper_max=paper.get("max", float("nan")),
            )
        )
    return pd.DataFrame(rows).round(2)
