"""Ablations as one-line changes (paper Appendix G.5–G.6; §5.5 pre vs post injection).

An ablation is a strategy label with one parameter changed (``dense-retrieval(k=3)``,
``llm-summary(budget_tokens=1000)``), a different T3 setting, or a different prep model. The
harness keys predictions by label (:func:`clinlib.eval.harness.runner.run`), and the construction cache keys
artifacts by the construction parameters only, so a K sweep re-uses the K=5 embeddings and
builds nothing, while a summary-budget change rebuilds only the summaries.

Pure functions over the predictions table; the notebook ``11_ablations`` calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis import metrics, stats
from clinlib.analysis.probe import recall_by_setting
from clinlib.analysis.stats import cluster as cluster_stats
from clinlib.analysis.stats import cluster_tables as cluster_report
from clinlib.strategies import get_strategy, parse_label
from clinlib.strategies.encoder_eval import ENCODERS
from clinlib.strategies.views import hit_table

DENSE_K: tuple[int, ...] = (3, 5, 10)  # Appendix G.6
SUMMARY_BUDGETS: tuple[int, ...] = (500, 1000)  # Appendix G.6
# Appendix G: "the ablations in Table 10–Table 12 were run on a stratified 20-patient subset".
PAPER_SUBSET_SIZE = 20
SUBSET_STRATA: tuple[str, ...] = ("disease", "tertile")


class AblationInputError(ValueError):
    """The predictions do not hold the variants an ablation compares."""


def variant_labels(strategy: str, param: str, values: Sequence[Any]) -> list[str]:
    """The labels of ``strategy`` with ``param`` set to each value (the default's label is
    the bare name, so it shares the main run's predictions).

    Example: ``variant_labels("dense-retrieval", "k", (3, 5, 10))`` ->
    ``["dense-retrieval(k=3)", "dense-retrieval", "dense-retrieval(k=10)"]``.
    """
    return [get_strategy(strategy, **{param: v}).label() for v in values]


def stratified_subset(
    cohort: pd.DataFrame,
    n: int = PAPER_SUBSET_SIZE,
    strata: Sequence[str] = SUBSET_STRATA,
    seed: int = 0,
) -> list[int]:
    """A stratified sample of patients, like the paper's 20-patient ablation subset.

    Each value of the first stratum column gets its proportional share of ``n``
    (largest-remainder rounding, ties to the value sorted first), then the same within it for
    the next column; the patients of each cell are drawn with a seeded generator.

    Args:
        cohort: one row per patient with ``subject_id`` and the ``strata`` columns.
        n: patients wanted (all of them if the cohort is smaller).
        strata: columns defining the strata.
        seed: sampling seed.

    Returns:
        The sampled subject ids, sorted.
    """
    missing = [c for c in ("subject_id", *strata) if c not in cohort.columns]
    if missing:
        raise AblationInputError(f"stratified_subset: cohort lacks column(s) {missing}")
    if not isinstance(n, int) or n < 1:
        raise AblationInputError(f"stratified_subset: n must be a positive integer, got {n!r}")
    ids = cohort.drop_duplicates("subject_id")
    if n >= len(ids):
        return sorted(ids["subject_id"].astype(int))
    rng = np.random.default_rng(seed)
    return sorted(_allocate(ids, n, list(strata), rng))


def _largest_remainder(sizes: Sequence[int], n: int) -> list[int]:
    """Integer shares of ``n`` proportional to ``sizes`` (ties to the earlier entry)."""
    total = sum(sizes)
    quota = [n * size / total for size in sizes]
    take = [int(q) for q in quota]
    order = sorted(range(len(sizes)), key=lambda i: -(quota[i] - take[i]))
    for i in order[: n - sum(take)]:
        take[i] += 1
    return take


def _allocate(ids: pd.DataFrame, n: int, strata: list[str], rng: np.random.Generator) -> list[int]:
    # Level by level (disease, then tertile within disease), so each level is as balanced as
    # its sizes allow rather than ties piling up on the first diseases listed.
    if not strata:
        return [
            int(i) for i in rng.choice(sorted(ids["subject_id"].astype(int)), size=n, replace=False)
        ]
    groups = [g for _, g in ids.groupby(strata[0], sort=True)]
    shares = _largest_remainder([len(g) for g in groups], n)
    return [
        i
        for g, k in zip(groups, shares, strict=True)
        if k
        for i in _allocate(g, k, strata[1:], rng)
    ]


def subset_questions(questions: pd.DataFrame, subjects: Sequence[int] | None) -> pd.DataFrame:
    """The questions all of whose patients are in ``subjects`` (every question if None)."""
    if subjects is None:
        return questions
    keep = {int(s) for s in subjects}
    mask = [all(int(s) in keep for s in ids) for ids in questions["subject_ids"]]
    return questions[mask].reset_index(drop=True)


def sweep_table(
    preds: pd.DataFrame,
    strategy: str,
    param: str,
    values: Sequence[Any],
    by: Sequence[str] = ("backbone", "task"),
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Accuracy (Wilson 95% CI) of each variant of one parameter, per task and reader, on the
    ``post`` rows (the default variant's T3 ``pre`` rows belong to the injection probe).

    Args:
        preds: predictions (``strategy`` holds labels).
        strategy: the base strategy name.
        param: the parameter swept.
        values: its values, in plot order.
        by: grouping columns besides the variant.
        questions: questions (qid, subject_ids); when given, each row also gets the
            patient-clustered bootstrap CI (boot_low, boot_high;
            :func:`clinlib.analysis.stats.cluster_tables.clustered_accuracy`).

    Returns:
        label, param (its name), value, ``by``, n, k (correct), accuracy, ci_low, ci_high
        (+ boot_low, boot_high); plus a ``task == "pooled"`` row per reader and variant (all
        tasks, weighted by size).

    Raises:
        AblationInputError: a variant has no predictions.
    """
    labels = variant_labels(strategy, param, values)
    sub = preds[preds["strategy"].isin(labels) & (preds["setting"] == "post")]
    missing = [lab for lab in labels if lab not in set(sub["strategy"])]
    if missing:
        raise AblationInputError(
            f"sweep_table: no predictions for {missing}; run them first, e.g. "
            f"runner.run(RunSpec(profile, {missing!r}, backbones))"
        )
    value_of = dict(zip(labels, values, strict=True))
    by = list(by)
    per_task = metrics.accuracy_table(sub, by=["strategy", *by])
    pooled_by = [c for c in by if c != "task"]
    pooled = metrics.accuracy_table(sub, by=["strategy", *pooled_by]).assign(task="pooled")
    out = pd.concat([per_task, pooled], ignore_index=True)
    if questions is not None:
        out = out.merge(_clustered_bounds(sub, questions, by), on=["strategy", *by], how="left")
    out = out.rename(columns={"strategy": "label"})
    out.insert(1, "param", param)
    out.insert(2, "value", out["label"].map(value_of))
    return out.sort_values([*pooled_by, "task", "value"], kind="stable").reset_index(drop=True)


def _clustered_bounds(sub: pd.DataFrame, questions: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Patient-clustered bootstrap bounds per (variant, ``by``) row and per pooled row."""
    with_cl = cluster_stats.with_clusters(sub, questions)
    pooled_by = [c for c in by if c != "task"]
    per_task = cluster_report.clustered_accuracy(with_cl, by=["strategy", *by])
    pooled = cluster_report.clustered_accuracy(with_cl, by=["strategy", *pooled_by])
    both = pd.concat([per_task, pooled.assign(task="pooled")], ignore_index=True)
    return both[["strategy", *by, "boot_low", "boot_high"]]


def paired_tests(
    preds: pd.DataFrame,
    labels: Sequence[str],
    backbone: str,
    alpha: float = 0.05,
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Paired McNemar tests between consecutive variants (Holm-corrected as one family), on
    the ``post`` rows paired by qid for one reader (a T3 question counts once).

    With ``questions`` the patient-clustered test sits beside each McNemar test
    (:func:`clinlib.analysis.stats.cluster_tables.pairwise_clustered`).

    Returns:
        :func:`clinlib.analysis.stats.pairwise_mcnemar`'s columns (``strategy_a`` /
        ``strategy_b``), + the clustered columns with ``questions``.
    """
    sub = preds[
        (preds["backbone"] == backbone)
        & preds["strategy"].isin(labels)
        & (preds["setting"] == "post")
    ]
    pairs = list(zip(labels[:-1], labels[1:], strict=True))
    if questions is None:
        return stats.pairwise_mcnemar(sub, cell=["strategy"], pairs=pairs, key=["qid"], alpha=alpha)
    return cluster_report.pairwise_clustered(
        cluster_stats.with_clusters(sub, questions),
        cell=["strategy"],
        pairs=pairs,
        key=["qid"],
        alpha=alpha,
    )


def clustered_sweep(
    preds: pd.DataFrame, labels: Sequence[str], questions: pd.DataFrame
) -> pd.DataFrame:
    """Pooled accuracy per variant and reader (``post`` rows) with the question-level Wilson
    interval beside the patient-clustered ones and the design effect
    (:func:`clinlib.analysis.stats.cluster_tables.clustered_accuracy`).

    Returns:
        label, backbone + clustered_accuracy's columns, variants in the order of ``labels``.
    """
    sub = preds[preds["strategy"].isin(labels) & (preds["setting"] == "post")]
    missing = [lab for lab in labels if lab not in set(sub["strategy"])]
    if missing:
        raise AblationInputError(f"clustered_sweep: no post predictions for {missing}")
    out = cluster_report.clustered_accuracy(
        cluster_stats.with_clusters(sub, questions), by=("strategy", "backbone")
    ).rename(columns={"strategy": "label"})
    out["_order"] = out["label"].map({lab: i for i, lab in enumerate(labels)})
    return out.sort_values(["backbone", "_order"]).drop(columns="_order").reset_index(drop=True)


def sweep_chart(table: pd.DataFrame, param: str, title: str = "") -> alt.FacetChart:
    """Accuracy vs the swept value per task (pooled first), one line per reader, with the Wilson
    CI (thin bar) and, when the table has them, the patient-clustered CI (thick faint bar)."""
    tasks = ["pooled", *sorted(t for t in table["task"].unique() if t != "pooled")]
    base = alt.Chart(table).encode(
        x=alt.X("value:O", title=param),
        color=alt.Color("backbone:N", title="reader"),
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title="accuracy"),
        tooltip=[
            "label",
            "backbone",
            "task",
            "n",
            alt.Tooltip("accuracy:Q", format=".3f"),
            alt.Tooltip("ci_low:Q", format=".3f"),
            alt.Tooltip("ci_high:Q", format=".3f"),
        ],
    )
    band = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title="accuracy"), y2="ci_high:Q")
    if {"boot_low", "boot_high"} <= set(table.columns):  # patient-clustered, drawn thick and faint
        band = band + base.mark_errorbar(thickness=6, opacity=0.3).encode(
            y=alt.Y("boot_low:Q", title="accuracy"), y2="boot_high:Q"
        )
    return (
        (band + line)
        .properties(width=110, height=110)
        .facet(facet=alt.Facet("task:N", sort=tasks, title=None), columns=5, title=title)
    )


def setting_table(preds: pd.DataFrame, questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """T3 under the two settings per strategy and reader: accuracy and positive-class
    recall, pre beside post (§5.5; Table 3).

    Returns:
        strategy, backbone, acc_pre, acc_post, recall_pre, recall_post, recall_drop.
    """
    t3 = preds[preds["task"] == "T3"]
    if t3.empty or set(t3["setting"]) != {"pre", "post"}:
        raise AblationInputError(
            "setting_table: needs T3 predictions under both 'pre' and 'post'; got settings "
            f"{sorted(set(t3['setting']))}"
        )
    acc = metrics.accuracy_table(t3, by=["strategy", "backbone", "setting"])
    wide = acc.pivot_table(index=["strategy", "backbone"], columns="setting", values="accuracy")
    wide.columns = [f"acc_{c}" for c in wide.columns]
    rec = recall_by_setting(t3, questions)
    out = wide.reset_index().merge(
        rec[["strategy", "backbone", "recall_pre", "recall_post", "drop"]],
        on=["strategy", "backbone"],
    )
    return out.rename(columns={"drop": "recall_drop"})[
        ["strategy", "backbone", "acc_pre", "acc_post", "recall_pre", "recall_post", "recall_drop"]
    ]


def setting_chart(table: pd.DataFrame, order: Sequence[str] | None = None) -> alt.FacetChart:
    """T3 positive recall pre vs post per strategy, one panel per reader: ``pre`` is a ring
    and ``post`` a dot, so equal values stay visible as a dot inside a ring."""
    long = table.melt(
        id_vars=["strategy", "backbone"],
        value_vars=["recall_pre", "recall_post"],
        var_name="setting",
        value_name="recall",
    )
    long["setting"] = long["setting"].str.removeprefix("recall_")
    y = alt.Y("strategy:N", sort=list(order) if order else None, title=None)
    x = alt.X("recall:Q", scale=alt.Scale(domain=[0, 1]), title="T3 positive-class recall")
    color = alt.Color("setting:N", sort=["pre", "post"], title="T3 setting")
    tip = ["strategy", "backbone", "setting", alt.Tooltip("recall:Q", format=".3f")]
    base = alt.Chart(long).encode(y=y, x=x, color=color, tooltip=tip)
    ring = base.transform_filter("datum.setting == 'pre'").mark_point(size=220, strokeWidth=2)
    dot = base.transform_filter("datum.setting == 'post'").mark_point(filled=True, size=60)
    return (
        (ring + dot)
        .properties(width=260, height=200)
        .facet(column=alt.Column("backbone:N", title="reader"))
    )


def construction_reuse(builds: pd.DataFrame) -> pd.DataFrame:
    """What an ablation's construction pass built vs found in the cache.

    Args:
        builds: :func:`clinlib.strategies.build_all` output.

    Returns:
        label, parameters (what differs from the defaults), n_dialogues, built, reused
        (found in the construction cache), seconds.
    """
    need = {"label", "n_dialogues", "built", "cached", "seconds"}
    if not need <= set(builds.columns):
        raise AblationInputError(f"construction_reuse: needs columns {sorted(need)}")
    out = builds[["label", "n_dialogues", "built", "cached", "seconds"]].copy()
    out.insert(1, "parameters", [parse_label(lab)[1] or "defaults" for lab in out["label"]])
    return out.rename(columns={"cached": "reused"}).reset_index(drop=True)


def encoder_hits(
    questions: pd.DataFrame,
    profile: str | None = None,
    encoders: Sequence[str] = ENCODERS,
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Dense-retrieval hit@k of the anchor visit (Appendix C.2) per encoder on the given
    questions (e.g. the ablation subset's), through the construction cache.

    Returns:
        encoder, label, task (per task and ``overall``), n, hit@1 ... hit@10.
    """
    labels = variant_labels("dense-retrieval", "embedding_model", encoders)
    _, rates = hit_table(questions, profile, strategies=labels, dialogues=dialogues)
    rates = rates.rename(columns={"strategy": "label"})
    rates.insert(0, "encoder", rates["label"].map(dict(zip(labels, encoders, strict=True))))
    return rates
