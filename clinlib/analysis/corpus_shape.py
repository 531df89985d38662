"""Our corpus beside the paper's Fig. 13 (Appendix C.1): visits per patient, dialogue length
(thousand characters) and questions per patient, as median / mean / max bars (notebook 02).

The paper prints the three distributions only as a figure; its text gives their median, mean
and max (data/paper/figure13_corpus.csv, :func:`clinlib.analysis.paper.load_corpus_figure`), so the
comparison is of those statistics. The paper's questions per patient count a stratified
evaluation subset (385 x 4.3 ~ 1,656 questions), ours every question of the set, a patient
counted once per question that names it (T6 names two).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clinlib.analysis.paper import CORPUS_DISTRIBUTIONS, CORPUS_STATISTICS, load_corpus_figure

TITLES: dict[str, str] = {
    "visits_per_patient": "visits per patient",
    "dialogue_kchars": "dialogue length (k chars)",
    "questions_per_patient": "questions per patient",
}
COLUMNS = ("distribution", "statistic", "source", "value")


def ours(summary: pd.DataFrame, questions: pd.DataFrame | None = None) -> dict[str, pd.Series]:
    """Our three distributions over kept patients (questions: None when not built yet)."""
    kept = summary[summary["kept"]]
    out = {
        "visits_per_patient": kept["n_visits"].astype(float),
        "dialogue_kchars": kept["n_chars"].astype(float) / 1000,
    }
    if questions is not None:
        per = questions["subject_ids"].explode().astype("int64").value_counts()
        per = per.reindex(kept["subject_id"].astype("int64"), fill_value=0)
        out["questions_per_patient"] = per.astype(float)
    return out


def compare(summary: pd.DataFrame, questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Tidy median / mean / max of ours and the paper's: distribution, statistic, source
    (``ours`` / ``paper``), value."""
    paper = load_corpus_figure()
    rows = [
        dict(distribution=r.distribution, statistic=r.statistic, source="paper", value=r.value)
        for r in paper.itertuples()
    ]
    for dist, s in ours(summary, questions).items():
        stats = {"median": s.median(), "mean": s.mean(), "max": s.max()}
        rows += [
            dict(distribution=dist, statistic=k, source="ours", value=float(v))
            for k, v in stats.items()
        ]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    order = {d: i for i, d in enumerate(CORPUS_DISTRIBUTIONS)}
    st = {s: i for i, s in enumerate(CORPUS_STATISTICS)}
    df = df.sort_values(
        ["distribution", "statistic", "source"],
        key=lambda c: (
            c.map(order) if c.name == "distribution" else c.map(st) if c.name == "statistic" else c
        ),
    )
    return df.reset_index(drop=True)


def bars(df: pd.DataFrame) -> alt.HConcatChart:
    """One panel per distribution: median / mean / max, ours beside the paper's."""
    charts = []
    for dist in CORPUS_DISTRIBUTIONS:
        part = df[df["distribution"] == dist]
        if part.empty:
            continue
        chart = (
            alt.Chart(part)
            .mark_bar()
            .encode(
                x=alt.X("statistic:N", sort=list(CORPUS_STATISTICS), title=None),
                xOffset=alt.XOffset("source:N", sort=["ours", "paper"]),
                y=alt.Y("value:Q", title=TITLES[dist]),
                color=alt.Color("source:N", sort=["ours", "paper"], title=None),
                tooltip=["statistic", "source", alt.Tooltip("value:Q", format=".1f")],
            )
            .properties(width=170, height=180, title=TITLES[dist])
        )
        charts.append(chart)
    return alt.hconcat(*charts)
