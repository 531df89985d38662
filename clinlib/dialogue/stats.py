"""Reports on a dialogue corpus: kept/dropped counts, coverage by event kind, and our corpus
beside the paper's (paper §3 "Cohort": 385 of 400 kept; Appendix C.1, Fig. 13; docs/design.md
"Layout").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from clinlib.core.config import build_dir, resolve_profile
from clinlib.data.vocab import LAB_PANEL
from clinlib.dialogue.budget import BUDGET_REASON
from clinlib.dialogue.fields import KEY_LABS

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


# The paper's sentence (section "Limitations", "Synthetic dialogues"): "key labs, admissions
# and discharges, procedures, and diagnoses are covered at >= 98%". It does not say which labs
# are key; the kit's key labs are clinlib.dialogue.fields.KEY_LABS (the labs the index diseases
# and the tasks lean on), and every admission, discharge, procedure and diagnosis is key.
KEY_KINDS: dict[str, tuple[str, ...]] = {
    "key labs": ("lab",),
    "admissions/discharges": ("admission", "discharge"),
    "procedures": ("procedure",),
    "diagnoses": ("diagnosis",),
}
KEY_LAB_LABELS: frozenset[str] = frozenset(lab.label for lab in LAB_PANEL if lab.key in KEY_LABS)
PAPER_KEY_COVERAGE = 0.98


def key_coverage(coverage: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Coverage of the paper's key kinds over kept patients: every key event counts (a key lab
    left unstated by the rule and any event dropped for the length budget count as not
    covered), beside the paper's >= 98 %.

    Args:
        coverage: event_coverage rows (event_id, kind, status, reason, kept).
        events: the events table (event_id, label), to tell key labs from the others.

    Returns:
        kind, events, covered, missed_by_rule, dropped_for_length, unusable, coverage, paper,
        meets_paper.
    """
    cov = coverage[coverage["kept"]] if "kept" in coverage.columns else coverage
    labels = dict(zip(events["event_id"].astype(str), events["label"], strict=False))
    budget = cov["reason"].fillna("").str.startswith(BUDGET_REASON)
    rows = []
    for name, kinds in KEY_KINDS.items():
        sel = cov["kind"].isin(kinds)
        if name == "key labs":
            sel &= cov["event_id"].astype(str).map(labels).isin(KEY_LAB_LABELS)
        part, b = cov[sel], budget[sel]
        n = len(part)
        covered = int((part["status"] == "covered").sum())
        rows.append(
            dict(
                kind=name,
                events=n,
                covered=covered,
                missed_by_rule=int(((part["status"] == "missed") & ~b).sum()),
                dropped_for_length=int(((part["status"] == "missed") & b).sum()),
                unusable=int((part["status"] == "unusable").sum()),
                coverage=covered / n if n else float("nan"),
                paper=PAPER_KEY_COVERAGE,
                meets_paper=bool(n and covered / n >= PAPER_KEY_COVERAGE),
            )
        )
    return pd.DataFrame(rows)


def length_drops(coverage: pd.DataFrame) -> pd.DataFrame:
    """Events the length budget left out, by kind, with the budget's reason (the coverage
    gate names each one: its reason starts with clinlib.dialogue.budget.BUDGET_REASON)."""
    cov = coverage[coverage["kept"]] if "kept" in coverage.columns else coverage
    drops = cov[cov["reason"].fillna("").str.startswith(BUDGET_REASON)]
    return (
        drops.groupby(["kind", "reason"])
        .size()
        .rename("events")
        .reset_index()
        .sort_values("events", ascending=False)
        .reset_index(drop=True)
    )


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


# --- the what-if corpus (clinlib.dialogue.whatif): every diagnosis and procedure kept ---------
KIT = "kit: Fig. 13 lengths (budget)"
WHATIF = "what-if: every diagnosis and procedure kept"
PAPER = "paper"
WHATIF_FILE = "dialogue_whatif.parquet"
WHATIF_INPUTS: tuple[str, ...] = ("events", "cohort", "dialogue_summary", "event_coverage")


def whatif_fingerprints(build: Path) -> dict[str, str]:
    """sha256 of the inputs a what-if table was computed from."""
    return {
        name: hashlib.sha256((build / f"{name}.parquet").read_bytes()).hexdigest()
        for name in WHATIF_INPUTS
    }


def load_whatif(profile: str | None = None) -> tuple[pd.DataFrame | None, str]:
    """(the cached what-if table, "") or (None, the one line saying what to run)."""
    name = resolve_profile(profile)
    build = build_dir(name)
    run = f"run `python -m clinlib.dialogue.whatif --profile {name}`"
    try:
        recorded = json.loads((build / "dialogue_whatif.json").read_text())
        table = pd.read_parquet(build / WHATIF_FILE)
    except (OSError, ValueError):
        return None, f"The what-if corpus is not computed on this build; {run}."
    if recorded != whatif_fingerprints(build):
        return None, f"The what-if table is older than this build's dialogues; {run}."
    return table, ""
