"""What the paper's figures show, rebuilt from its published tables alone (§5.1–§5.6,
Appendices D, G and I; notebook 12).

The strategy x backbone x task accuracy cube (Table 14 beside Table 1's printed percent),
Table 1's Pool./Macro/Δblind rows against their recomputation, each cell's cost and Pareto
membership (Fig. 6), the §5.3 blind-to-full gaps, Table 2's lifts and the T9 outcomes Table
8 supports (Fig. 4). The charts drawing these live in :mod:`.charts`, the audit of the
printed numbers in :mod:`.audit` and :mod:`.claims`.

Conventions: accuracies are fractions in [0, 1]; ``diff`` is reported minus recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from clinlib.analysis import metrics, paper
from clinlib.analysis.paper import BACKBONES, BLIND, STRATEGIES, TASK_N, TASKS, canonical_order


class PaperFiguresError(ValueError):
    """A published table handed to a figure builder or audit is missing or malformed."""


DS, GPT, HK, SN = BACKBONES

# §4 "grouped into six families" (colour of Fig. 6).
STRATEGY_FAMILY: dict[str, str] = {
    "no-context-blind": "floor",
    "last-visit-only": "recency",
    "full-context": "full",
    "dense-retrieval": "retrieval",
    "structured-timeline": "compression",
    "llm-summary": "compression",
    "mem0": "agentic memory",
    "a-mem": "agentic memory",
}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(STRATEGY_FAMILY.values()))
# §5.3 (SP2): (blind pooled, full-context pooled, gap in pp) per backbone.
SP2_TEXT: dict[str, tuple[float, float, float]] = {
    DS: (0.236, 0.672, 43.6),
    GPT: (0.332, 0.630, 29.8),
    HK: (0.079, 0.706, 62.7),
    SN: (0.203, 0.698, 49.6),
}
SP2_VERSIONS: tuple[str, ...] = ("text §5.3", "Table 1 Pool.", "recomputed from Table 14")

T9_OUTCOMES: tuple[str, ...] = ("correct_abstain", "rescued_lenient", "not_abstained")
T9_UNSUPPORTED: tuple[str, ...] = (
    "Fig. 4 splits each (strategy, backbone) cell; Table 8 pools the four backbones, so the "
    "lenient parser's rescues are known per strategy only (per cell only the strict "
    "abstention of Table 14 is printed).",
    "Parser-missed verbose abstentions and genuine over-answers are not separated by any "
    "table: 'not_abstained' (1 - lenient) holds both; splitting them needs the responses "
    "(clinlib.analysis.metrics.t9_decomposition on predictions).",
    "Empty API responses (Appendix E.1) are not tabulated per cell.",
    "The only over-answer composition printed (G.4: 36% fabricated value, 28% bare yes/no, "
    "36% other, 93% of 'other' verbose abstentions) covers 307 full-context responses on a "
    "diagnostic subset, not the 6,000 full-context T9 predictions.",
)
# =========================================================================== helpers


def need_table(
    tables: Mapping[int, pd.DataFrame], number: int, cols: Sequence[str]
) -> pd.DataFrame:
    """Table ``number`` from ``tables``, checked for ``cols``."""
    if number not in tables:
        raise PaperFiguresError(
            f"published Table {number} is needed but not given (have {sorted(tables)}); "
            "load it with clinlib.analysis.paper.load_table"
        )
    df = tables[number]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise PaperFiguresError(
            f"Table {number} lacks column(s) {missing}; it has {list(df.columns)}"
        )
    return df


def _sort_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the paper's order: strategy, then backbone, then task (when present)."""
    key = np.zeros(len(df), dtype=np.int64)
    for col, canonical in (("strategy", STRATEGIES), ("backbone", BACKBONES), ("task", TASKS)):
        if col in df.columns:
            order = canonical_order(df[col], canonical)
            key = key * 1000 + df[col].astype(str).map(order.index).to_numpy()
    out = df.assign(_k=key).sort_values("_k", kind="mergesort").drop(columns="_k")
    return out.reset_index(drop=True)


def _fractions(df: pd.DataFrame, number: int) -> pd.Series:
    """``value`` as a fraction (Table 1 prints percent)."""
    scale = df["unit"].astype(str).map(paper.UNIT_SCALE) if "unit" in df.columns else 1.0
    if isinstance(scale, pd.Series) and scale.isna().any():
        bad = df.loc[scale.isna(), "unit"].iloc[0]
        raise PaperFiguresError(f"Table {number}: unit {bad!r} is not an accuracy unit")
    return pd.to_numeric(df["value"], errors="coerce") / scale


def per_task_accuracy(df: pd.DataFrame, number: int) -> pd.DataFrame:
    """strategy, backbone, task, accuracy (fraction) for the T1–T9 cells of ``df``."""
    rows = df[df["task"].isin(TASKS)]
    out = pd.DataFrame(
        {
            "strategy": rows["strategy"].astype(str).to_numpy(),
            "backbone": rows["backbone"].astype(str).to_numpy(),
            "task": rows["task"].astype(str).to_numpy(),
            "accuracy": _fractions(rows, number).to_numpy(),
        }
    )
    if out.empty:
        raise PaperFiguresError(f"Table {number} has no per-task (T1–T9) cells")
    if out["accuracy"].isna().any():
        r = out[out["accuracy"].isna()].iloc[0]
        raise PaperFiguresError(
            f"Table {number}: accuracy missing for ({r.strategy}, {r.backbone}, {r.task})"
        )
    return out


def _summary(per_task: pd.DataFrame, number: int, task_n: Mapping[str, int]) -> pd.DataFrame:
    try:
        return metrics.summary_rows(per_task, task_n=task_n, partial="refuse")
    except metrics.MetricsInputError as exc:
        raise PaperFiguresError(f"Table {number}: {exc}") from None


def cell_label(strategy: str, backbone: str) -> str:
    return f"{strategy} × {backbone}"


def cell_labels(df: pd.DataFrame) -> list[str]:
    """The label "strategy × backbone" of every row of ``df``."""
    return (df["strategy"].astype(str) + " × " + df["backbone"].astype(str)).tolist()


# =========================================================================== data for figures


def load_paper_tables(data_dir: Path | None = None) -> dict[int, pd.DataFrame]:
    """All fourteen published tables, validated (``clinlib.analysis.paper.load_table``).

    Returns:
        Table number -> long-format frame.
    """
    try:
        return {n: paper.load_table(n, data_dir=data_dir) for n in range(1, 15)}
    except paper.PaperTableError as exc:
        raise PaperFiguresError(str(exc)) from None


def accuracy_cube(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """The strategy x backbone x task accuracy cube (Table 14, with Table 1's printed %).

    Returns:
        One row per cell: strategy, backbone, family, task, n, accuracy (Table 14 fraction),
        table1_percent (Table 1's integer percent; NaN if Table 1 is not given).
    """
    t14 = need_table(tables, 14, ("strategy", "backbone", "task", "value"))
    cube = per_task_accuracy(t14, 14)
    cube["n"] = cube["task"].map(TASK_N)
    if 1 in tables:
        t1 = need_table(tables, 1, ("strategy", "backbone", "task", "value"))
        printed = t1[t1["task"].isin(TASKS)].astype({"strategy": str, "backbone": str, "task": str})
        cube = cube.merge(
            printed[["strategy", "backbone", "task", "value"]].rename(
                columns={"value": "table1_percent"}
            ),
            on=["strategy", "backbone", "task"],
            how="left",
        )
    else:
        cube["table1_percent"] = np.nan
    cube["family"] = cube["strategy"].map(STRATEGY_FAMILY).fillna("other")
    cols = ["strategy", "backbone", "family", "task", "n", "accuracy", "table1_percent"]
    return _sort_cells(cube[cols])


SUMMARY_COLUMNS: tuple[str, ...] = (
    "strategy",
    "backbone",
    "family",
    "reported_pooled",
    "reported_macro",
    "reported_delta_blind",
    "recomputed_pooled",
    "recomputed_macro",
    "recomputed_delta_blind",
    "table1_cells_pooled",
    "table1_cells_macro",
    "pooled_diff_pp",
    "macro_diff_pp",
)


def summary_comparison(
    tables: Mapping[int, pd.DataFrame], task_n: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """Per (strategy, backbone) cell: Table 1's printed Pool./Macro/Δblind and recomputations.

    Recomputation uses :func:`clinlib.analysis.metrics.summary_rows` (pooled = Σ n_t acc_t / Σ n_t with
    the §3 task sizes; macro = mean over T1–T9; Δblind = macro - same-backbone blind macro),
    once from Table 14's 3-decimal cells and once from Table 1's own integer cells.

    Args:
        tables: needs Tables 1 and 14.
        task_n: task sizes for pooling (default the §3 sizes).

    Returns:
        :data:`SUMMARY_COLUMNS` (fractions; the _pp columns are printed - recomputed in pp).
    """
    weights = dict(task_n or TASK_N)
    t1 = need_table(tables, 1, ("strategy", "backbone", "task", "value", "unit"))
    t14 = need_table(tables, 14, ("strategy", "backbone", "task", "value"))
    keys = ["strategy", "backbone"]
    rec = _summary(per_task_accuracy(t14, 14), 14, weights)
    own = _summary(per_task_accuracy(t1, 1), 1, weights)
    rows = t1[t1["task"].isin(paper.SUMMARY_TASKS)]
    printed = pd.DataFrame(
        {
            "strategy": rows["strategy"].astype(str).to_numpy(),
            "backbone": rows["backbone"].astype(str).to_numpy(),
            "task": rows["task"].astype(str).to_numpy(),
            "value": _fractions(rows, 1).to_numpy(),
        }
    )
    rep = printed.pivot_table(index=keys, columns="task", values="value", dropna=False)
    rep = rep.reindex(columns=list(paper.SUMMARY_TASKS)).add_prefix("reported_").reset_index()
    out = (
        rec[[*keys, "pooled", "macro", "delta_blind"]]
        .rename(columns=lambda c: c if c in keys else f"recomputed_{c}")
        .merge(rep, on=keys, how="left")
        .merge(
            own[[*keys, "pooled", "macro"]].rename(
                columns={"pooled": "table1_cells_pooled", "macro": "table1_cells_macro"}
            ),
            on=keys,
            how="left",
        )
    )
    for col in ("reported_pooled", "reported_macro", "table1_cells_pooled"):
        if col not in out or out[col].isna().any():
            r = out[out[col].isna()].iloc[0] if col in out else out.iloc[0]
            raise PaperFiguresError(
                f"Table 1 lacks {col.split('_', 1)[1]} for cell ({r.strategy}, {r.backbone})"
            )
    out["family"] = out["strategy"].map(STRATEGY_FAMILY).fillna("other")
    out["pooled_diff_pp"] = 100.0 * (out["reported_pooled"] - out["recomputed_pooled"])
    out["macro_diff_pp"] = 100.0 * (out["reported_macro"] - out["recomputed_macro"])
    return _sort_cells(out[list(SUMMARY_COLUMNS)])


def cell_summary(
    tables: Mapping[int, pd.DataFrame], task_n: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """:func:`summary_comparison` plus each cell's cost (Table 4) and its Pareto-frontier
    membership (:func:`clinlib.analysis.metrics.pareto_frontier`) under the printed and under the
    recomputed pooled accuracy (Fig. 6, §5.6).

    Args:
        tables: needs Tables 1, 4 and 14.
        task_n: task sizes for pooling (default the §3 sizes).

    Returns:
        :data:`SUMMARY_COLUMNS` + cost_usd, pareto_reported, pareto_recomputed.
    """
    t4 = need_table(tables, 4, ("strategy", "backbone", "metric", "value"))
    out = summary_comparison(tables, task_n)
    cost = t4[(t4["metric"] == "cost_usd") & (t4["strategy"] != "total")]
    cost = cost.astype({"strategy": str, "backbone": str})[["strategy", "backbone", "value"]]
    out = out.merge(
        cost.rename(columns={"value": "cost_usd"}), on=["strategy", "backbone"], how="left"
    )
    if out["cost_usd"].isna().any():
        r = out[out["cost_usd"].isna()].iloc[0]
        raise PaperFiguresError(f"Table 4 has no cost_usd for cell ({r.strategy}, {r.backbone})")
    out["pareto_reported"] = metrics.pareto_frontier(out, acc="reported_pooled").to_numpy()
    out["pareto_recomputed"] = metrics.pareto_frontier(out, acc="recomputed_pooled").to_numpy()
    return _sort_cells(out)


def _dominates(a: pd.Series, b: pd.Series, acc: str) -> bool:
    """Does cell ``a`` Pareto-dominate cell ``b`` (cheaper or equal, at least as accurate)?"""
    le = a["cost_usd"] <= b["cost_usd"] and a[acc] >= b[acc]
    return bool(le and (a["cost_usd"] < b["cost_usd"] or a[acc] > b[acc]))


def frontier_report(summary: pd.DataFrame, claimed_size: int = 11) -> dict:
    """Fig. 6 / §5.6 claims under the printed and the recomputed pooled accuracy.

    Args:
        summary: output of :func:`cell_summary`.
        claimed_size: the paper's frontier size ("11/32").

    Returns:
        dict: claimed_size, n_cells, reported / recomputed -> {size, cells}, same_membership,
        only_reported, only_recomputed, haiku_dominates_sonnet_full_context (per version),
        structured_timeline_on_frontier (per version).
    """
    need = ["strategy", "backbone", "cost_usd", "reported_pooled", "recomputed_pooled"]
    missing = [c for c in need + ["pareto_reported", "pareto_recomputed"] if c not in summary]
    if missing:
        raise PaperFiguresError(f"frontier_report: summary lacks {missing}; use cell_summary()")
    labels = cell_labels(summary)
    on = {
        v: [lab for lab, m in zip(labels, summary[f"pareto_{v}"], strict=True) if m]
        for v in ("reported", "recomputed")
    }
    idx = summary.set_index(["strategy", "backbone"])
    dominated = {}
    for v in ("reported", "recomputed"):
        try:
            hk, sn = idx.loc[("full-context", HK)], idx.loc[("full-context", SN)]
        except KeyError:
            dominated[v] = None
            continue
        dominated[v] = _dominates(hk, sn, f"{v}_pooled")
    struct = summary["strategy"] == "structured-timeline"
    return {
        "claimed_size": int(claimed_size),
        "n_cells": int(len(summary)),
        "reported": {"size": len(on["reported"]), "cells": on["reported"]},
        "recomputed": {"size": len(on["recomputed"]), "cells": on["recomputed"]},
        "same_membership": set(on["reported"]) == set(on["recomputed"]),
        "only_reported": sorted(set(on["reported"]) - set(on["recomputed"])),
        "only_recomputed": sorted(set(on["recomputed"]) - set(on["reported"])),
        "haiku_dominates_sonnet_full_context": dominated,
        "structured_timeline_on_frontier": {
            v: bool((summary[f"pareto_{v}"] & struct).any()) for v in ("reported", "recomputed")
        },
    }


def sp2_gaps(summary: pd.DataFrame) -> pd.DataFrame:
    """§5.3 blind-to-full gaps per backbone: as the text prints them (its printed gap, which
    can differ in the last digit from the difference of its rounded endpoints), from Table 1's
    Pool. row, and recomputed from Table 14.

    Args:
        summary: output of :func:`cell_summary`.

    Returns:
        backbone, version (:data:`SP2_VERSIONS`), blind, full (pooled fractions), gap_pp.
    """
    rows = []
    idx = summary.set_index(["strategy", "backbone"])
    for b in canonical_order(summary["backbone"], BACKBONES):
        if (BLIND, b) not in idx.index or ("full-context", b) not in idx.index:
            continue
        blind, full = idx.loc[(BLIND, b)], idx.loc[("full-context", b)]
        if b in SP2_TEXT:  # the gap as the text prints it (Sonnet's +49.6, not 69.8 - 20.3)
            tb, tf, printed = SP2_TEXT[b]
            rows.append((b, SP2_VERSIONS[0], tb, tf, printed))
        for version, col in (
            (SP2_VERSIONS[1], "reported_pooled"),
            (SP2_VERSIONS[2], "recomputed_pooled"),
        ):
            rows.append((b, version, blind[col], full[col], 100.0 * (full[col] - blind[col])))
    return pd.DataFrame(rows, columns=["backbone", "version", "blind", "full", "gap_pp"])


def lift_table(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Table 2 as printed next to its recomputation from Table 14 (:func:`metrics.context_lift`).

    Returns:
        regime, backbone, task (T1–T9, "macro"), printed_pp, recomputed_pp, diff_pp
        (printed - recomputed).
    """
    t2 = need_table(tables, 2, ("strategy", "backbone", "task", "value"))
    t14 = need_table(tables, 14, ("strategy", "backbone", "task", "value"))
    regimes = canonical_order(t2["strategy"], metrics.TABLE2_REGIMES)
    try:
        lift = metrics.context_lift(per_task_accuracy(t14, 14), regimes=regimes)
    except metrics.MetricsInputError as exc:
        raise PaperFiguresError(f"Table 14: {exc}") from None
    rec = lift.assign(recomputed_pp=100.0 * lift["lift"])[
        ["regime", "backbone", "task", "recomputed_pp"]
    ]
    printed = pd.DataFrame(
        {
            "regime": t2["strategy"].astype(str).to_numpy(),
            "backbone": t2["backbone"].astype(str).to_numpy(),
            "task": t2["task"].astype(str).to_numpy(),
            "printed_pp": pd.to_numeric(t2["value"], errors="coerce").to_numpy(),
        }
    )
    out = printed.merge(rec, on=["regime", "backbone", "task"], how="left")
    out["diff_pp"] = out["printed_pp"] - out["recomputed_pp"]
    return out.reset_index(drop=True)


def t9_breakdown(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Fig. 4's T9 outcomes as far as the tables support them (Table 8, pooled over backbones).

    correct_abstain = strict abstention; rescued_lenient = lenient - strict (the paper's
    "patched correct / other rescored"); not_abstained = 1 - lenient (parser-missed verbose
    abstentions and genuine over-answers together; see :data:`T9_UNSUPPORTED`).

    Returns:
        strategy, outcome (:data:`T9_OUTCOMES`), share, order (stacking position).
    """
    t8 = need_table(tables, 8, ("strategy", "parser", "value"))
    wide = t8.astype({"strategy": str, "parser": str}).pivot_table(
        index="strategy", columns="parser", values="value"
    )
    for col in ("strict", "lenient"):
        if col not in wide.columns or wide[col].isna().any():
            raise PaperFiguresError(f"Table 8 lacks {col!r} accuracy for some strategy")
    bad = wide[(wide["lenient"] < wide["strict"] - 1e-9) | (wide["lenient"] > 1)]
    if not bad.empty:
        raise PaperFiguresError(
            f"Table 8: strategy {bad.index[0]!r} has lenient {bad['lenient'].iloc[0]} outside "
            f"[strict {bad['strict'].iloc[0]}, 1]"
        )
    shares = {
        "correct_abstain": wide["strict"],
        "rescued_lenient": wide["lenient"] - wide["strict"],
        "not_abstained": 1.0 - wide["lenient"],
    }
    rows = [
        {"strategy": s, "outcome": o, "share": float(shares[o][s]), "order": i}
        for s in canonical_order(wide.index, STRATEGIES)
        for i, o in enumerate(T9_OUTCOMES)
    ]
    return pd.DataFrame(rows)


def implied_pool_weights(tables: Mapping[int, pd.DataFrame]) -> dict:
    """Is Table 1's Pool. row a task-weighted mean of Table 14 under *some* task weights?

    Solves the linear programme min_w max_cells |Σ_t w_t acc_t - printed pooled| with w >= 0,
    Σ w = 1 (HiGHS). A minimax residual below the printing precision (0.5 pp) means some
    weighting reproduces the printed row; the weights returned are one such solution, not a
    unique one, and are a diagnostic, not a claim about how the paper computed the row.

    Returns:
        dict: max_residual_pp (best achievable), stated_max_residual_pp (with the §3 sizes),
        weights: task -> {stated_n, implied_n} (implied scaled to the stated total).
    """
    summary_cube = per_task_accuracy(
        need_table(tables, 14, ("strategy", "backbone", "task", "value")), 14
    )
    t1 = need_table(tables, 1, ("strategy", "backbone", "task", "value"))
    wide = summary_cube.pivot_table(
        index=["strategy", "backbone"], columns="task", values="accuracy"
    )
    tasks = [t for t in TASKS if t in wide.columns]
    printed = t1[t1["task"] == "pooled"].astype({"strategy": str, "backbone": str})
    target = printed.set_index(["strategy", "backbone"])["value"].reindex(wide.index).to_numpy()
    if np.isnan(target).any():
        raise PaperFiguresError("Table 1 Pool. row lacks a value for a Table 14 cell")
    a = 100.0 * wide[tasks].to_numpy()
    m, k = a.shape
    ones = np.ones((m, 1))
    res = linprog(
        c=np.r_[np.zeros(k), 1.0],
        A_ub=np.block([[a, -ones], [-a, -ones]]),
        b_ub=np.r_[target, -target],
        A_eq=np.r_[np.ones(k), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0, None)] * (k + 1),
        method="highs",
    )
    if res.status != 0:  # pragma: no cover - the LP is always feasible (any w, large t)
        raise PaperFiguresError(f"implied_pool_weights: LP failed: {res.message}")
    stated = np.array([TASK_N[t] for t in tasks], dtype=float)
    stated_resid = np.abs(a @ (stated / stated.sum()) - target).max()
    total = stated.sum()
    return {
        "max_residual_pp": float(res.x[-1]),
        "stated_max_residual_pp": float(stated_resid),
        "weights": {
            t: {"stated_n": int(TASK_N[t]), "implied_n": float(w * total)}
            for t, w in zip(tasks, res.x[:k], strict=True)
        },
    }
