"""Tables and charts that describe a built cohort (notebook 01; paper §3, Fig. 2 stages 1–2,
Appendix C.1)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from clinlib.data.cohort import TERTILES
from clinlib.data.vocab import INDEX_DISEASES


def funnel_chart(attrition: pd.DataFrame) -> alt.Chart:
    """Horizontal bar chart of the attrition funnel (patients remaining after each step)."""
    df = attrition.copy()
    df["label"] = df["n_patients"].map(lambda n: f"{n:,}")
    base = alt.Chart(df).encode(
        y=alt.Y("step:N", sort=df["step"].tolist(), title=None, axis=alt.Axis(labelLimit=320)),
        x=alt.X("n_patients:Q", title="patients remaining", scale=alt.Scale(type="symlog")),
    )
    return (base.mark_bar() + base.mark_text(align="left", dx=4).encode(text="label:N")).properties(
        title="Cohort attrition funnel", width=420
    )


def strata_table(cohort: pd.DataFrame) -> pd.DataFrame:
    """Disease x tertile patient counts with totals."""
    table = (
        pd.crosstab(cohort["disease"], cohort["tertile"], margins=True, margins_name="total")
        .reindex(index=[*INDEX_DISEASES, "total"], columns=[*TERTILES, "total"])
        .fillna(0)
        .astype(int)
    )
    return table


def per_patient_stats(cohort: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Per-patient visits, events (by kind) and span for the distributions figure."""
    kinds = events.pivot_table(
        index="subject_id", columns="kind", values="event_id", aggfunc="count", fill_value=0
    )
    visits = events.groupby("subject_id")["visit_idx"].nunique().rename("visits")
    out = cohort.set_index("subject_id")[["disease", "tertile", "span_days", "n_events"]]
    return out.join(visits).join(kinds).reset_index()


def distributions_chart(stats: pd.DataFrame) -> alt.HConcatChart:
    """Histograms of visits, events and span per patient, coloured by disease."""
    panels = []
    for col, title in (
        ("visits", "visits per patient"),
        ("n_events", "events per patient"),
        ("span_days", "span (days)"),
    ):
        panels.append(
            alt.Chart(stats)
            .mark_bar(opacity=0.85)
            .encode(
                x=alt.X(f"{col}:Q", bin=alt.Bin(maxbins=25), title=title),
                y=alt.Y("count():Q", title="patients"),
                color=alt.Color("disease:N", sort=list(INDEX_DISEASES)),
            )
            .properties(width=220, height=180)
        )
    return alt.hconcat(*panels).properties(title="Per-patient distributions")


def summary_stats(stats: pd.DataFrame) -> pd.DataFrame:
    """Median / mean / max of visits, events and span per patient."""
    cols = ["visits", "n_events", "span_days"]
    return stats[cols].agg(["median", "mean", "max"]).round(1).T


def exclusion_table(exclusions: pd.DataFrame) -> pd.DataFrame:
    """Source rows the plausibility screen excluded (exclusions.parquet), counted per table,
    rule and field: rows and patients (empty when nothing was excluded)."""
    cols = ["table", "rule", "field"]
    if exclusions.empty:
        return pd.DataFrame(columns=[*cols, "rows", "patients"])
    return (
        exclusions.groupby(cols)
        .agg(rows=("key", "size"), patients=("subject_id", "nunique"))
        .reset_index()
        .sort_values(["table", "rows"], ascending=[True, False], kind="stable")
        .reset_index(drop=True)
    )


def code_family_table(families: pd.DataFrame) -> pd.DataFrame:
    """What a MEDS source held (code_families.parquet): rows read per code
    family, how many the kit used, excluded (name unknown) and ignored, subjects, text-only
    rows and what the kit makes of the family; largest first, empty for other sources."""
    cols = ["family", "rows", "used", "excluded", "ignored", "subjects", "text_only", "use"]
    if families.empty:
        return pd.DataFrame(columns=cols)
    return (
        families[cols]
        .sort_values(["rows", "family"], ascending=[False, True], kind="stable")
        .reset_index(drop=True)
    )
