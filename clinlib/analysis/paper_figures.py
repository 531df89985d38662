"""The paper's figures regenerated from its published tables alone, and an audit of the
paper's internal consistency (notebook 12; issue 7 "The paper's own numbers").

Figures rebuilt from ``data/paper`` (no predictions needed):

- Table 1 (§3/§5.1) as the 8 x 4 x 9 accuracy heatmap (cells from Table 14, Appendix I);
- Table 2 (§5.1) context lift as a diverging heatmap;
- Fig. 3 (§5.2) T2 / T6 bottleneck bars;
- Fig. 4 (§5.4) T9 abstention, as far as Tables 8 and 14 support it (:data:`T9_UNSUPPORTED`);
- Fig. 6 (§5.6) cost-accuracy Pareto plot with its frontier (cost from Table 4, Appendix D);
- §5.3 (SP2) blind-to-full gaps per backbone, as printed and as recomputed.

The audit recomputes every printed number that other printed numbers determine — Table 1's
Pool. / Macro / Δblind rows, Table 2's lifts, Table 4's totals, Tables 5–13 — and checks the
numbers quoted in the text against the tables. Each check is one row of a frame with
:data:`AUDIT_COLUMNS`; nothing is corrected or hidden: a row is ``flagged`` when the printed
number misses its recomputation by more than the printing precision explains (``tol``).

Conventions: accuracies are fractions in [0, 1]; differences in percentage points carry unit
"pp"; ``diff`` is always reported minus recomputed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
from scipy.optimize import linprog

from clinlib.analysis import metrics, paper
from clinlib.analysis.paper import BACKBONES, BLIND, N_QUESTIONS, STRATEGIES, TASK_N, TASKS
from clinlib.analysis.stats import minimum_detectable_effect, wilson_ci
from clinlib.core.config import FIGURES_DIR
from clinlib.core.io import atomic_path


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

# Table 1 caption: blue heat bins (<30, 30–45, 45–60, 60–70, >=70 %).
ACCURACY_BINS: tuple[float, ...] = (0.30, 0.45, 0.60, 0.70)
ACCURACY_COLOURS: tuple[str, ...] = ("#eff3ff", "#bdd7e7", "#6baed6", "#3182bd", "#08519c")
# Table 2 caption: lift bins (<=-5, -5 to 0, 0-5, 5-15, 15-30, 30-60, >=60 pp). Printed lifts
# are integers, so the first edge sits at -4.5 to put -5 itself in the "<= -5" bin.
LIFT_BINS: tuple[float, ...] = (-4.5, 0.0, 5.0, 15.0, 30.0, 60.0)
LIFT_COLOURS: tuple[str, ...] = (
    "#d6604d",
    "#f4a582",
    "#f7fbff",
    "#c6dbef",
    "#6baed6",
    "#2171b5",
    "#08306b",
)

# --- numbers quoted in the text (checked against the tables by audit_text_claims) ------------

# §5.1: full-context pooled accuracy (pp), DeepSeek / GPT-4o-mini / Haiku / Sonnet.
TEXT_FULL_POOLED_PP: dict[str, float] = {DS: 67.2, GPT: 63.0, HK: 70.6, SN: 69.8}
# §5.3 (SP2): (blind pooled, full-context pooled, gap in pp) per backbone.
SP2_TEXT: dict[str, tuple[float, float, float]] = {
    DS: (0.236, 0.672, 43.6),
    GPT: (0.332, 0.630, 29.8),
    HK: (0.079, 0.706, 62.7),
    SN: (0.203, 0.698, 49.6),
}
SP2_VERSIONS: tuple[str, ...] = ("text §5.3", "Table 1 Pool.", "recomputed from Table 14")
# Per-task accuracy ranges quoted in the text: (source, strategy, task, backbones, low, high);
# backbones None = all four.
TEXT_TASK_RANGES: tuple[tuple, ...] = (
    ("§5.2", "full-context", "T8", None, 0.269, 0.470),
    ("§5.2", "mem0", "T8", None, 0.291, 0.373),
    ("§5.2", "a-mem", "T8", None, 0.291, 0.373),
    ("§5.2", "llm-summary", "T8", None, 0.194, 0.254),
    ("§5.2", "full-context", "T7", (DS, HK, SN), 0.942, 0.965),
    ("§5.2", "mem0", "T7", None, 0.535, 0.733),
    ("§5.2", "llm-summary", "T7", None, 0.349, 0.512),
    ("§5.5", "full-context", "T3", None, 0.869, 0.938),
    ("§5.5", "last-visit-only", "T3", None, 0.769, 0.869),
    ("§5.5", "dense-retrieval", "T3", None, 0.769, 0.869),
    ("§6", "structured-timeline", "T1", None, 0.886, 0.923),
)
# Pooled-accuracy ranges quoted in the text: (source, strategies, low, high, tol).
TEXT_POOLED_RANGES: tuple[tuple, ...] = (
    ("§5.1", ("dense-retrieval",), 0.604, 0.697, 0.0005),
    ("§5.1", ("structured-timeline",), 0.584, 0.596, 0.0005),
    ("§5.1", ("mem0", "a-mem"), 0.508, 0.559, 0.0005),
    ("§5.1", ("llm-summary", "last-visit-only"), 0.416, 0.495, 0.0005),
    ("§5.6", ("structured-timeline",), 0.58, 0.60, 0.005),
)
# §5.4: T9 abstention per backbone (DS / GPT / Hk / Sn).
TEXT_T9: dict[str, tuple[float, float, float, float]] = {
    "no-context-blind": (0.355, 0.685, 0.000, 0.204),
    "full-context": (0.701, 0.698, 0.907, 0.747),
    "last-visit-only": (0.883, 0.895, 0.994, 0.926),
}
# §5.5: "all four upstream-built strategies ... giving exactly 0.500" on T3.
UPSTREAM_BUILT: tuple[str, ...] = ("structured-timeline", "llm-summary", "mem0", "a-mem")
# Table 5 caption: majority-class macro-F1 on T5.
T5_MAJORITY_F1 = 0.478

# --- T9 (Fig. 4) ---------------------------------------------------------------------------

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

AUDIT_COLUMNS: tuple[str, ...] = (
    "check",
    "source",
    "item",
    "relation",
    "reported",
    "recomputed",
    "diff",
    "tol",
    "unit",
    "size",
    "flagged",
    "note",
)
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

# =========================================================================== helpers


def _need(tables: Mapping[int, pd.DataFrame], number: int, cols: Sequence[str]) -> pd.DataFrame:
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


def _order(values: Sequence[str], canonical: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(map(str, values)))
    return [v for v in canonical if v in seen] + [v for v in seen if v not in canonical]


def _sort_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the paper's order: strategy, then backbone, then task (when present)."""
    key = np.zeros(len(df), dtype=np.int64)
    for col, canonical in (("strategy", STRATEGIES), ("backbone", BACKBONES), ("task", TASKS)):
        if col in df.columns:
            order = _order(df[col], canonical)
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


def _per_task(df: pd.DataFrame, number: int) -> pd.DataFrame:
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
        return metrics.summary_rows(per_task, task_n=task_n)
    except metrics.MetricsInputError as exc:
        raise PaperFiguresError(f"Table {number}: {exc}") from None


def check_rows(
    check: str,
    source: str,
    items: Sequence[str],
    reported: object,
    recomputed: object,
    tol: float | Sequence[float],
    unit: str,
    relation: str | Sequence[str] = "=",
    note: str | Sequence[str] = "",
) -> pd.DataFrame:
    """Rows of the audit table: one printed number against its recomputation each.

    ``relation`` says what the paper claims: "=" (reported equals recomputed), "<="
    (recomputed is at most the reported bound) or ">=" (at least the bound). ``size`` is how
    far the claim misses (|diff| for "=", the overshoot past the bound otherwise); a row is
    flagged when ``size`` exceeds ``tol``, the slack the printing precision explains.

    Args:
        check: short id shared by the rows of one check.
        source: where the reported number is printed (e.g. "Table 1 Pool.", "§5.3").
        items: one label per row.
        reported, recomputed: scalars or sequences (broadcast to ``items``).
        tol: allowed miss in ``unit`` (scalar or one per row).
        unit: unit of reported / recomputed / diff.
        relation: "=", "<=" or ">=" (scalar or one per row).
        note: text (or one per row) saying where the recomputation comes from.

    Returns:
        Frame with :data:`AUDIT_COLUMNS`.
    """
    n = len(items)

    def per_row(value: object, what: str, dtype: object) -> np.ndarray:
        try:
            return np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()
        except (ValueError, TypeError):
            raise PaperFiguresError(
                f"check {check!r}: {what} must be a scalar or one value per item ({n}), "
                f"got {value!r}"
            ) from None

    rel = per_row(relation, "relation", object)
    bad_rel = [r for r in rel if r not in ("=", "<=", ">=")]
    if bad_rel:
        raise PaperFiguresError(f"relation must be '=', '<=' or '>=', got {bad_rel[0]!r}")
    tols = per_row(tol, "tol", float)
    if not np.isfinite(tols).all() or (tols < 0).any():
        raise PaperFiguresError(f"check {check!r}: tol must be finite numbers >= 0, got {tol!r}")
    rep = per_row(reported, "reported", float)
    rec = per_row(recomputed, "recomputed", float)
    diff = rep - rec
    size = np.select(
        [rel == "=", rel == "<="],
        [np.abs(diff), np.maximum(0.0, -diff)],
        default=np.maximum(0.0, diff),
    )
    notes = [note] * n if isinstance(note, str) else list(note)
    if len(notes) != n:
        raise PaperFiguresError(f"check {check!r}: {len(notes)} notes for {n} items")
    # Slack for binary floating point, so 0.55 - 0.5 is not a discrepancy at tol 0.05.
    flagged = np.isfinite(size) & (size > tols + 1e-9)
    return pd.DataFrame(
        {
            "check": check,
            "source": source,
            "item": list(map(str, items)),
            "relation": rel.astype(str),
            "reported": rep,
            "recomputed": rec,
            "diff": diff,
            "tol": tols,
            "unit": unit,
            "size": size,
            "flagged": flagged,
            "note": notes,
        },
        columns=list(AUDIT_COLUMNS),
    )


def _cell_label(strategy: str, backbone: str) -> str:
    return f"{strategy} × {backbone}"


def _cell_labels(df: pd.DataFrame) -> list[str]:
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
    t14 = _need(tables, 14, ("strategy", "backbone", "task", "value"))
    cube = _per_task(t14, 14)
    cube["n"] = cube["task"].map(TASK_N)
    if 1 in tables:
        t1 = _need(tables, 1, ("strategy", "backbone", "task", "value"))
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
    t1 = _need(tables, 1, ("strategy", "backbone", "task", "value", "unit"))
    t14 = _need(tables, 14, ("strategy", "backbone", "task", "value"))
    keys = ["strategy", "backbone"]
    rec = _summary(_per_task(t14, 14), 14, weights)
    own = _summary(_per_task(t1, 1), 1, weights)
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
    t4 = _need(tables, 4, ("strategy", "backbone", "metric", "value"))
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
    labels = _cell_labels(summary)
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
    """§5.3 blind-to-full gaps per backbone: as the text prints them, from Table 1's Pool. row,
    and recomputed from Table 14.

    Args:
        summary: output of :func:`cell_summary`.

    Returns:
        backbone, version (:data:`SP2_VERSIONS`), blind, full (pooled fractions), gap_pp.
    """
    rows = []
    idx = summary.set_index(["strategy", "backbone"])
    for b in _order(summary["backbone"], BACKBONES):
        if (BLIND, b) not in idx.index or ("full-context", b) not in idx.index:
            continue
        blind, full = idx.loc[(BLIND, b)], idx.loc[("full-context", b)]
        if b in SP2_TEXT:
            tb, tf, _ = SP2_TEXT[b]
            rows.append((b, SP2_VERSIONS[0], tb, tf))
        rows.append((b, SP2_VERSIONS[1], blind["reported_pooled"], full["reported_pooled"]))
        rows.append((b, SP2_VERSIONS[2], blind["recomputed_pooled"], full["recomputed_pooled"]))
    out = pd.DataFrame(rows, columns=["backbone", "version", "blind", "full"])
    out["gap_pp"] = 100.0 * (out["full"] - out["blind"])
    return out


def lift_table(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Table 2 as printed next to its recomputation from Table 14 (:func:`metrics.context_lift`).

    Returns:
        regime, backbone, task (T1–T9, "macro"), printed_pp, recomputed_pp, diff_pp
        (printed - recomputed).
    """
    t2 = _need(tables, 2, ("strategy", "backbone", "task", "value"))
    t14 = _need(tables, 14, ("strategy", "backbone", "task", "value"))
    regimes = _order(t2["strategy"], metrics.TABLE2_REGIMES)
    try:
        lift = metrics.context_lift(_per_task(t14, 14), regimes=regimes)
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
    t8 = _need(tables, 8, ("strategy", "parser", "value"))
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
        for s in _order(wide.index, STRATEGIES)
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
    summary_cube = _per_task(_need(tables, 14, ("strategy", "backbone", "task", "value")), 14)
    t1 = _need(tables, 1, ("strategy", "backbone", "task", "value"))
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


# =========================================================================== audit


def audit_table1(
    tables: Mapping[int, pd.DataFrame], task_n: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """Table 1 against Table 14 and against itself.

    Checks: per-task cells vs Table 14 (tol 0.55 pp: 0.5 print rounding + 0.05 from 3-decimal
    inputs); Pool./Macro vs recomputation from Table 14 (0.55 pp) and Δblind (0.6 pp); Pool./
    Macro vs recomputation from Table 1's own integer cells (1.0 pp: cell rounding + print).

    Returns:
        Audit rows (:data:`AUDIT_COLUMNS`), unit percent / pp.
    """
    weights = dict(task_n or TASK_N)
    t1 = _need(tables, 1, ("strategy", "backbone", "task", "value", "unit"))
    t14 = _need(tables, 14, ("strategy", "backbone", "task", "value"))
    keys = ["strategy", "backbone", "task"]
    cells = _per_task(t1, 1).merge(_per_task(t14, 14), on=keys, suffixes=("_1", "_14"))
    frames = [
        check_rows(
            "table1_cells_vs_table14",
            "Table 1 per-task cells",
            [f"{_cell_label(s, b)} {t}" for s, b, t in cells[keys].to_numpy()],
            100 * cells["accuracy_1"],
            100 * cells["accuracy_14"],
            0.55,
            "percent",
            note="Table 14 accuracy x 100",
        )
    ]
    summary = summary_comparison(tables, weights)
    labels = _cell_labels(summary)
    for what, tol, unit in (("pooled", 0.55, "percent"), ("macro", 0.55, "percent")):
        frames.append(
            check_rows(
                f"table1_{what}_vs_table14",
                "Table 1 Pool." if what == "pooled" else "Table 1 Macro",
                labels,
                100 * summary[f"reported_{what}"],
                100 * summary[f"recomputed_{what}"],
                tol,
                unit,
                note="Σ n_t·acc_t / Σ n_t over Table 14 (§3 sizes)"
                if what == "pooled"
                else "mean of Table 14's nine per-task accuracies",
            )
        )
    has_delta = summary["reported_delta_blind"].notna()
    frames.append(
        check_rows(
            "table1_delta_blind_vs_table14",
            "Table 1 Δblind",
            [lab for lab, h in zip(labels, has_delta, strict=True) if h],
            100 * summary.loc[has_delta, "reported_delta_blind"],
            100 * summary.loc[has_delta, "recomputed_delta_blind"],
            0.6,
            "pp",
            note="Table 14 macro minus same-backbone blind macro",
        )
    )
    for what in ("pooled", "macro"):
        frames.append(
            check_rows(
                f"table1_{what}_vs_own_cells",
                "Table 1 Pool." if what == "pooled" else "Table 1 Macro",
                labels,
                100 * summary[f"reported_{what}"],
                100 * summary[f"table1_cells_{what}"],
                1.0,
                "percent",
                note=f"{what} of Table 1's own integer per-task cells",
            )
        )
    return pd.concat(frames, ignore_index=True)


def audit_lift(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Table 2 against Table 14 (0.6 pp: print rounding + two 3-decimal inputs) and Table 2's
    Macro column against Table 1's Δblind row (full/dense 0.5 pp; mem-avg 1.0 pp, a mean of
    two rounded Δblind values).

    Returns:
        Audit rows, unit pp.
    """
    lift = lift_table(tables)
    frames = [
        check_rows(
            "table2_vs_table14",
            "Table 2",
            [f"{r} × {b} {t}" for r, b, t in lift[["regime", "backbone", "task"]].to_numpy()],
            lift["printed_pp"],
            lift["recomputed_pp"],
            0.6,
            "pp",
            note="Table 14 regime accuracy minus same-backbone blind (mem-avg = mean of Mem0, "
            "A-MEM)",
        )
    ]
    if 1 in tables:
        t1 = _need(tables, 1, ("strategy", "backbone", "task", "value"))
        delta = t1[t1["task"] == "delta_blind"].astype({"strategy": str, "backbone": str})
        delta = delta.set_index(["strategy", "backbone"])["value"]
        macro = lift[lift["task"] == "macro"]
        rep, rec, items, tols = [], [], [], []
        for r, b, printed in macro[["regime", "backbone", "printed_pp"]].to_numpy():
            members = metrics.MEM_AVG_MEMBERS if r == metrics.MEM_AVG else (r,)
            if not all((m, b) in delta.index for m in members):
                continue
            rep.append(printed)
            rec.append(float(np.mean([delta[(m, b)] for m in members])))
            items.append(f"{r} × {b}")
            tols.append(1.0 if r == metrics.MEM_AVG else 0.5)
        for tol in sorted(set(tols)):
            sel = [i for i, t in enumerate(tols) if t == tol]
            frames.append(
                check_rows(
                    "table2_macro_vs_table1_delta",
                    "Table 2 Macro",
                    [items[i] for i in sel],
                    [rep[i] for i in sel],
                    [rec[i] for i in sel],
                    tol,
                    "pp",
                    note="Table 1 Δblind (mem-avg: mean of Mem0 and A-MEM Δblind)",
                )
            )
    return pd.concat(frames, ignore_index=True)


def audit_cost(tables: Mapping[int, pd.DataFrame], n_questions: int = N_QUESTIONS) -> pd.DataFrame:
    """Table 4's columns and Total row against its cells (Appendix D).

    Checks: $/q = cost / 6,271 (printed to 4 decimals); Total cost, input and output tokens
    vs the sums of the 32 printed cells (tolerance: 32 half-units of the printed precision);
    Total cache-hit % vs the input-weighted mean of the cell rates.

    Returns:
        Audit rows.
    """
    t4 = _need(tables, 4, ("strategy", "backbone", "metric", "value"))
    t4 = t4.astype({"strategy": str, "backbone": str, "metric": str})
    cells = t4[t4["strategy"] != "total"].pivot_table(
        index=["strategy", "backbone"], columns="metric", values="value"
    )
    need = ["cost_usd", "cost_per_question", "input_tokens", "output_tokens", "cache_hit_rate"]
    missing = [c for c in need if c not in cells.columns]
    if missing:
        raise PaperFiguresError(f"Table 4 lacks metric(s) {missing}")
    cells = cells.reset_index()
    labels = _cell_labels(cells)
    total = t4[t4["strategy"] == "total"].set_index("metric")["value"]
    n = len(cells)
    frames = [
        check_rows(
            "table4_cost_per_question",
            "Table 4 $/q",
            labels,
            cells["cost_per_question"],
            cells["cost_usd"] / n_questions,
            0.00005,
            "USD",
            note=f"cost_usd / {n_questions:,} (caption)",
        )
    ]
    weighted_hit = float(
        (cells["input_tokens"] * cells["cache_hit_rate"]).sum() / cells["input_tokens"].sum()
    )
    sums = {
        "cost_usd": ("USD", cells["cost_usd"].sum(), n * 0.005),
        "input_tokens": ("million_tokens", cells["input_tokens"].sum(), n * 0.05 + 0.5),
        "output_tokens": ("thousand_tokens", cells["output_tokens"].sum(), n * 0.05 + 0.5),
        "cache_hit_rate": ("percent", weighted_hit, 0.1),
    }
    for metric, (unit, value, tol) in sums.items():
        if metric not in total.index or pd.isna(total[metric]):
            continue
        frames.append(
            check_rows(
                "table4_total_vs_cells",
                "Table 4 Total",
                [metric],
                total[metric],
                value,
                tol,
                unit,
                note="input-weighted mean of the cell rates"
                if metric == "cache_hit_rate"
                else "sum of the 32 printed cells",
            )
        )
    return pd.concat(frames, ignore_index=True)


def audit_appendix_tables(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Tables 3, 5–10 and 13 against what determines them (Appendix G, §5.5).

    Checks (each only when its tables are given): Table 3 recalls are k/19; Tables 5/6 pooled
    macro-F1 vs the mean of the backbone columns (flagged rows are expected: the pooled
    column is computed on pooled predictions, not averaged); Table 7 MDE vs the two-proportion
    formula (:func:`clinlib.analysis.stats.minimum_detectable_effect`); Tables 8/9 strict vs the mean
    of Table 14 over backbones and Δ vs lenient - strict; Table 10 Δ vs matched - DeepSeek;
    Table 13 vs Table 14 macro over task subsets.

    Returns:
        Audit rows (fractions unless stated).
    """
    frames = []
    if 3 in tables:
        t3 = _need(tables, 3, ("prep", "strategy", "backbone", "value", "n"))
        t3 = t3[t3["value"].notna()]
        k = (t3["value"] * t3["n"]).round()
        frames.append(
            check_rows(
                "table3_recall_is_k_over_n",
                "Table 3",
                [f"{p} {s} × {b}" for p, s, b in t3[["prep", "strategy", "backbone"]].to_numpy()],
                t3["value"],
                k / t3["n"],
                0.0005,
                "fraction",
                note=[f"{int(x)}/{int(m)}" for x, m in zip(k, t3["n"], strict=True)],
            )
        )
    for number in (5, 6):
        if number not in tables:
            continue
        t = _need(tables, number, ("strategy", "backbone", "value"))
        wide = t.astype({"strategy": str, "backbone": str}).pivot_table(
            index="strategy", columns="backbone", values="value"
        )
        cols = [b for b in BACKBONES if b in wide.columns]
        if "pooled" not in wide.columns or not cols:
            continue
        frames.append(
            check_rows(
                f"table{number}_pooled_vs_backbone_mean",
                f"Table {number} pooled",
                list(wide.index),
                wide["pooled"],
                wide[cols].mean(axis=1),
                0.001,
                "fraction",
                note="mean of the backbone columns; macro-F1 of pooled predictions need not "
                "equal it (not an arithmetic error)",
            )
        )
    if 7 in tables:
        t7 = _need(tables, 7, ("task", "value", "n"))
        frames.append(
            check_rows(
                "table7_mde_formula",
                "Table 7",
                t7["task"].astype(str).tolist(),
                t7["value"],
                100 * np.asarray(minimum_detectable_effect(t7["n"].to_numpy(float))),
                0.05,
                "pp",
                note="(z_.975 + z_.8) sqrt(2·0.25/n)",
            )
        )
    if 14 in tables:
        cube = _per_task(_need(tables, 14, ("strategy", "backbone", "task", "value")), 14)
        for number, task in ((8, "T9"), (9, "T7")):
            if number not in tables:
                continue
            t = _need(tables, number, ("strategy", "parser", "value"))
            wide = t.astype({"strategy": str, "parser": str}).pivot_table(
                index="strategy", columns="parser", values="value"
            )
            mean = cube[cube["task"] == task].groupby("strategy")["accuracy"].mean()
            common = [s for s in wide.index if s in mean.index]
            frames.append(
                check_rows(
                    f"table{number}_strict_vs_table14",
                    f"Table {number} strict",
                    common,
                    wide.loc[common, "strict"],
                    mean[common],
                    0.001,
                    "fraction",
                    note=f"mean of Table 14 {task} over the four backbones",
                )
            )
            frames.append(
                check_rows(
                    f"table{number}_delta",
                    f"Table {number} Δ",
                    list(wide.index),
                    wide["delta"],
                    wide["lenient"] - wide["strict"],
                    0.001,
                    "fraction",
                    note="lenient - strict",
                )
            )
    if 10 in tables:
        t10 = _need(tables, 10, ("backbone", "strategy", "prep", "metric", "value"))
        t10 = t10.astype({"backbone": str, "strategy": str})
        acc = t10[t10["metric"] == "accuracy"].pivot_table(
            index=["backbone", "strategy"], columns="prep", values="value"
        )
        delta = t10[t10["metric"] != "accuracy"].set_index(["backbone", "strategy"])["value"]
        delta = delta.reindex(acc.index)
        frames.append(
            check_rows(
                "table10_delta",
                "Table 10 Δ",
                [f"{b} × {s}" for b, s in acc.index],
                delta,
                acc["backbone-matched"] - acc["deepseek-prepared"],
                0.001,
                "fraction",
                note="backbone-matched - DeepSeek-prepared",
            )
        )
    if 13 in tables and 14 in tables:
        t13 = _need(tables, 13, ("strategy", "task_subset", "value"))
        t13 = t13.astype({"strategy": str, "task_subset": str})
        for subset, part in t13.groupby("task_subset", sort=False):
            if subset not in paper.TASK_SUBSETS:
                raise PaperFiguresError(f"Table 13: unknown task_subset {subset!r}")
            sub = cube[cube["task"].isin(paper.TASK_SUBSETS[subset])]
            macro = sub.groupby(["strategy", "backbone"])["accuracy"].mean()
            per_strategy = macro.groupby(level="strategy").mean()
            part = part[part["strategy"].isin(per_strategy.index)]
            frames.append(
                check_rows(
                    "table13_vs_table14",
                    "Table 13",
                    [f"{s} ({subset})" for s in part["strategy"]],
                    part["value"],
                    per_strategy[part["strategy"]].to_numpy(),
                    0.001,
                    "fraction",
                    note="Table 14 macro over the subset, averaged over backbones",
                )
            )
    if not frames:
        return pd.DataFrame(columns=list(AUDIT_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _acc(cube: pd.DataFrame, strategy: str, task: str, backbones=None) -> pd.Series:
    sel = cube[(cube["strategy"] == strategy) & (cube["task"] == task)]
    if backbones is not None:
        sel = sel[sel["backbone"].isin(backbones)]
    if sel.empty:
        raise PaperFiguresError(f"Table 14 has no {task} cells for {strategy!r}")
    return sel.set_index("backbone")["accuracy"]


def audit_text_claims(
    tables: Mapping[int, pd.DataFrame], summary: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Numbers quoted in the text (abstract, §1, §3–§6, captions, Appendix C–G) against the
    tables. Needs Tables 1, 3, 4, 5, 8, 10, 12 and 14 (6 optional).

    Args:
        tables: the published tables.
        summary: :func:`cell_summary` output, reused when given.

    Returns:
        Audit rows; ``source`` names the section, ``note`` what the recomputation uses.
    """
    for n in (1, 3, 4, 5, 8, 10, 12, 14):
        _need(tables, n, ("value",))
    cube = accuracy_cube(tables)
    summary = cell_summary(tables) if summary is None else summary
    idx = summary.set_index(["strategy", "backbone"])
    frames: list[pd.DataFrame] = []
    add = frames.append

    # §5.1 full-context pooled and §5.3 SP2 values vs Table 1 Pool. and Table 14.
    bbs = [b for b in BACKBONES if ("full-context", b) in idx.index]
    full = idx.loc[[("full-context", b) for b in bbs]]
    add(
        check_rows(
            "text_full_pooled_vs_table1",
            "§5.1",
            [f"full-context × {b}" for b in bbs],
            [TEXT_FULL_POOLED_PP[b] for b in bbs],
            100 * full["reported_pooled"].to_numpy(),
            0.55,
            "percent",
            note="Table 1 Pool. (integer %)",
        )
    )
    add(
        check_rows(
            "text_full_pooled_vs_table14",
            "§5.1",
            [f"full-context × {b}" for b in bbs],
            [TEXT_FULL_POOLED_PP[b] for b in bbs],
            100 * full["recomputed_pooled"].to_numpy(),
            0.1,
            "percent",
            note="pooled from Table 14 (§3 sizes)",
        )
    )
    sp2 = sp2_gaps(summary)
    for version, check, tol in (
        (SP2_VERSIONS[1], "sp2_text_vs_table1", 0.0055),
        (SP2_VERSIONS[2], "sp2_text_vs_table14", 0.001),
    ):
        part = sp2[sp2["version"] == version].set_index("backbone")
        items, rep, rec = [], [], []
        for b in part.index:
            tb, tf, _ = SP2_TEXT[b]
            items += [f"blind × {b}", f"full-context × {b}"]
            rep += [tb, tf]
            rec += [part.loc[b, "blind"], part.loc[b, "full"]]
        add(check_rows(check, "§5.3", items, rep, rec, tol, "fraction", note=version))
        add(
            check_rows(
                check.replace("text", "gap"),
                "§5.3",
                [f"gap {b}" for b in part.index],
                [SP2_TEXT[b][2] for b in part.index],
                part["gap_pp"],
                0.15 if version == SP2_VERSIONS[2] else 1.05,
                "pp",
                note=f"full - blind, {version}",
            )
        )
    add(
        check_rows(
            "sp2_gap_arithmetic",
            "§5.3",
            [f"gap {b}" for b in SP2_TEXT],
            [v[2] for v in SP2_TEXT.values()],
            [100 * (v[1] - v[0]) for v in SP2_TEXT.values()],
            0.1,
            "pp",
            note="text full - text blind",
        )
    )

    # Pooled ranges quoted in §5.1 / §5.6, against both pooled versions.
    for source, strategies, low, high, tol in TEXT_POOLED_RANGES:
        sel = summary[summary["strategy"].isin(strategies)]
        name = " / ".join(strategies)
        for version, t in (("reported", max(tol, 0.0055)), ("recomputed", tol + 0.0005)):
            col = sel[f"{version}_pooled"]
            add(
                check_rows(
                    f"text_pooled_range_vs_{'table1' if version == 'reported' else 'table14'}",
                    source,
                    [f"{name} pooled low", f"{name} pooled high"],
                    [low, high],
                    [col.min(), col.max()],
                    t,
                    "fraction",
                    note="Table 1 Pool." if version == "reported" else "pooled from Table 14",
                )
            )

    # Per-task ranges quoted in §5.2 / §5.5 / §6.
    for source, strategy, task, backbones, low, high in TEXT_TASK_RANGES:
        acc = _acc(cube, strategy, task, backbones)
        add(
            check_rows(
                "text_task_range_vs_table14",
                source,
                [f"{strategy} {task} low", f"{strategy} {task} high"],
                [low, high],
                [acc.min(), acc.max()],
                0.0005,
                "fraction",
                note=f"Table 14 {task} over "
                + ("all backbones" if backbones is None else "/".join(backbones)),
            )
        )

    # §5.5: "exactly 0.500" for the four upstream-built strategies on T3.
    t3 = cube[(cube["task"] == "T3") & cube["strategy"].isin(UPSTREAM_BUILT)]
    add(
        check_rows(
            "text_t3_constant_no",
            "§5.5",
            _cell_labels(t3),
            0.5,
            t3["accuracy"],
            0.0005,
            "fraction",
            note="Table 14 T3 (the text: 'No' on all 600 questions in all 16 cells)",
        )
    )

    # §5.4: T9 per-cell abstention and the last-visit vs full-context contrast.
    for strategy, values in TEXT_T9.items():
        acc = _acc(cube, strategy, "T9")
        bbs = [b for b in BACKBONES if b in acc.index]
        add(
            check_rows(
                "text_t9_vs_table14",
                "§5.4",
                [_cell_label(strategy, b) for b in bbs],
                [values[BACKBONES.index(b)] for b in bbs],
                acc[bbs],
                0.0005,
                "fraction",
                note="Table 14 T9",
            )
        )
    gap = 100 * (_acc(cube, "last-visit-only", "T9") - _acc(cube, "full-context", "T9"))
    add(
        check_rows(
            "text_t9_last_visit_margin",
            "§5.4",
            ["last-visit - full T9 smallest", "last-visit - full T9 largest"],
            [5.0, 30.0],
            [gap.min(), gap.max()],
            0.5,
            "pp",
            relation=[">=", "<="],
            note="Table 14 T9 per backbone ('by 5–30 pp')",
        )
    )
    t8 = tables[8].astype({"strategy": str, "parser": str})
    t8w = t8.pivot_table(index="strategy", columns="parser", values="value")
    lv, fc = t8w.loc["last-visit-only"], t8w.loc["full-context"]
    add(
        check_rows(
            "text_t9_pooled_vs_table8",
            "§5.4",
            [
                "last-visit strict",
                "full-context strict",
                "Δ strict",
                "last-visit lenient",
                "full-context lenient",
                "Δ lenient",
            ],
            [0.924, 0.763, 0.161, 0.930, 0.838, 0.092],
            [
                lv["strict"],
                fc["strict"],
                lv["strict"] - fc["strict"],
                lv["lenient"],
                fc["lenient"],
                lv["lenient"] - fc["lenient"],
            ],
            0.0005,
            "fraction",
            note="Table 8 (pooled over backbones)",
        )
    )
    # G.4: fabricated share of genuine over-answers (36% value; 93% of the 36% 'other' are
    # parser-missed abstentions).
    add(
        check_rows(
            "text_g4_fabricated_share",
            "§5.4 / G.4",
            ["fabricated values among genuine over-answers"],
            54.0,
            100 * 0.36 / (1 - 0.36 * 0.93),
            1.0,
            "percent",
            note="36 / (100 - 36 x 0.93)",
        )
    )

    # §5.2: "GPT-4o-mini's -7.8 pp on T2 with summary memory".
    blind_t2 = _acc(cube, BLIND, "T2")
    lifts = {s: 100 * (_acc(cube, s, "T2")[GPT] - blind_t2[GPT]) for s in STRATEGIES[1:]}
    closest = min(lifts, key=lambda s: abs(lifts[s] + 7.8))
    add(
        check_rows(
            "text_gpt_t2_summary_lift",
            "§5.2",
            ["llm-summary × gpt-4o-mini T2 lift"],
            -7.8,
            lifts["llm-summary"],
            0.1,
            "pp",
            note=f"Table 14; the -7.8 pp lift belongs to {closest} × gpt-4o-mini "
            f"({lifts[closest]:+.1f} pp)",
        )
    )

    # §6: dense within 1–4 pp of full pooled; within 0–9 pp on every task except T4.
    for version in ("reported", "recomputed"):
        g = 100 * (
            idx.xs("full-context")[f"{version}_pooled"]
            - idx.xs("dense-retrieval")[f"{version}_pooled"]
        )
        add(
            check_rows(
                f"text_dense_pooled_gap_vs_{'table1' if version == 'reported' else 'table14'}",
                "§5.1 / §6",
                ["full - dense pooled smallest", "full - dense pooled largest"],
                [1.0, 4.0],
                [g.min(), g.max()],
                0.5,
                "pp",
                relation=[">=", "<="],
                note="Table 1 Pool." if version == "reported" else "pooled from Table 14",
            )
        )
    full_t, dense_t = (
        cube[cube["strategy"] == "full-context"],
        cube[cube["strategy"] == "dense-retrieval"],
    )
    both = full_t.merge(dense_t, on=["backbone", "task"], suffixes=("_f", "_d"))
    both["gap"] = 100 * (both["accuracy_f"] - both["accuracy_d"]).abs()
    worst = both[both["task"] != "T4"].loc[lambda d: d.groupby("task")["gap"].idxmax()]
    add(
        check_rows(
            "text_dense_task_gap",
            "§6",
            [f"|full - dense| {t}" for t in worst["task"]],
            9.0,
            worst["gap"],
            0.5,
            "pp",
            relation="<=",
            note=[f"largest on {b}" for b in worst["backbone"]],
        )
    )

    # Table 5 caption: which strategies beat the 0.478 majority macro-F1 on every backbone.
    t5 = tables[5].astype({"strategy": str, "backbone": str})
    t5 = t5[t5["backbone"].isin(BACKBONES)].groupby("strategy")["value"].min()
    above = [s for s in ("full-context", "dense-retrieval", "structured-timeline") if s in t5]
    below = [s for s in ("mem0", "a-mem", "llm-summary") if s in t5]
    add(
        check_rows(
            "text_t5_beats_majority",
            "Table 5 caption",
            [f"{s} lowest backbone macro-F1" for s in above],
            T5_MAJORITY_F1,
            t5[above],
            0.0,
            "fraction",
            relation=">=",
            note="'exceed the baseline on every backbone'",
        )
    )
    add(
        check_rows(
            "text_t5_compressed_do_not",
            "Table 5 caption",
            [f"{s} lowest backbone macro-F1" for s in below],
            T5_MAJORITY_F1,
            t5[below],
            0.0,
            "fraction",
            relation="<=",
            note="'the compressed strategies do not' (exceed it on every backbone)",
        )
    )
    # §5.1: pooled macro-F1 figures and the matched-prep Δ range.
    t5p = tables[5].astype({"strategy": str, "backbone": str})
    t5p = t5p[t5p["backbone"] == "pooled"].set_index("strategy")["value"]
    t6p = None
    if 6 in tables:
        t6p = tables[6].astype({"strategy": str, "backbone": str})
        t6p = t6p[t6p["backbone"] == "pooled"].set_index("strategy")["value"]
    items = ["T5 full-context", "T5 dense-retrieval", "T5 structured-timeline"]
    rep = [0.695, 0.736, 0.656]
    rec = [t5p["full-context"], t5p["dense-retrieval"], t5p["structured-timeline"]]
    if t6p is not None:
        items.append("T8 structured-timeline")
        rep.append(0.523)
        rec.append(t6p["structured-timeline"])
    add(
        check_rows(
            "text_macro_f1",
            "§5.1",
            items,
            rep,
            rec,
            0.0005,
            "fraction",
            note="Tables 5/6 pooled",
        )
    )
    t10 = tables[10]
    d10 = t10[t10["metric"] == "delta_matched_minus_deepseek"]["value"]
    add(
        check_rows(
            "text_matched_prep_range",
            "§5.1 / Limitations",
            ["matched-prep Δ largest", "matched-prep Δ smallest"],
            [-0.045, -0.244],
            [d10.max(), d10.min()],
            0.0005,
            "fraction",
            note="Table 10 Δ",
        )
    )
    t3v = tables[3]["value"].dropna()
    add(
        check_rows(
            "text_t3_best_recall",
            "§5.5",
            ["best equal-input recall (1/19)"],
            1 / 19,
            t3v.max(),
            0.0005,
            "fraction",
            note="Table 3 maximum",
        )
    )
    t12 = tables[12].astype({"backbone": str, "task_subset": str})
    agg = t12[t12["task_subset"] == "aggregation"]["value"]
    allw = t12[t12["task_subset"] == "all"].pivot_table(
        index="backbone", columns="budget_tokens", values="value"
    )
    add(
        check_rows(
            "text_table12_caption",
            "Table 12 caption",
            ["aggregation low", "aggregation high", "backbones where 1,000 tokens lowers 'all'"],
            [0.185, 0.304, 3],
            [agg.min(), agg.max(), int((allw[1000] < allw[500]).sum())],
            0.0005,
            "mixed",
            note="Table 12",
        )
    )
    add(
        check_rows(
            "text_t6_best_cell",
            "G.1",
            ["best T6 cell"],
            0.609,
            float(cube.loc[cube["task"] == "T6", "accuracy"].max()),
            0.0005,
            "fraction",
            note="Table 14 T6 maximum",
        )
    )

    # Costs quoted in the text vs Table 4.
    t4 = tables[4].astype({"strategy": str, "backbone": str, "metric": str})
    cost = t4[(t4["metric"] == "cost_usd") & (t4["strategy"] != "total")]
    cost = cost.set_index(["strategy", "backbone"])["value"]
    total = t4[(t4["strategy"] == "total") & (t4["metric"] == "cost_usd")]["value"].iloc[0]
    cheapest = cost.idxmin()
    add(
        check_rows(
            "text_cost_vs_table4",
            "abstract / §1 / §5.6 / §6 / captions",
            [
                "full-context × claude-sonnet-4.6 (abstract, §5.6, §6: $106.21)",
                "full-context × claude-haiku-4.5 ($25.76)",
                "total spend (§1: $527.85) vs Table 4 Total",
                "Table 4 Total ($527.87) vs sum of cells",
                "cheapest cell $/q (Fig. 16: DeepSeek × blind $0.00003)",
                "most expensive cell $/q (Fig. 16: Sonnet × full $0.0169)",
            ],
            [106.21, 25.76, 527.85, total, 0.00003, 0.0169],
            [
                cost[("full-context", SN)],
                cost[("full-context", HK)],
                total,
                cost.sum(),
                cost.min() / N_QUESTIONS,
                cost.max() / N_QUESTIONS,
            ],
            # Dollar figures to the cent; the Total may differ from the cell sum by 32 half-cents.
            [0.005, 0.005, 0.005, 32 * 0.005, 0.000005, 0.00005],
            "USD",
            note=[
                "Table 4",
                "Table 4",
                "Table 4 Total",
                "sum of the 32 cells (rounding allows ±0.16)",
                f"cheapest is {cheapest[0]} × {cheapest[1]} (${cost.min():.2f})",
                "Table 4 max cost / 6,271",
            ],
        )
    )
    inputs = t4[(t4["metric"] == "input_tokens") & (t4["strategy"] != "total")]
    rates = t4[(t4["metric"] == "cache_hit_rate") & (t4["strategy"] != "total")]
    cached = (
        inputs.set_index(["strategy", "backbone"])["value"]
        * rates.set_index(["strategy", "backbone"])["value"]
        / 100
    ).sum()
    add(
        check_rows(
            "text_cache_tokens",
            "§4",
            ["cache-read tokens (90.7 M)"],
            90.7,
            cached,
            # 32 cells x (0.05 M input rounding x 35% + 0.05% rate rounding x 45 M)
            1.3,
            "million_tokens",
            note="Σ input x cache-hit % over Table 4 cells (rounding allows ~±1.3 M)",
        )
    )

    # Counts: predictions, retrieval-eligible questions, CI half-widths.
    eligible = sum(n for t, n in TASK_N.items() if t != "T9")
    add(
        check_rows(
            "text_counts",
            "abstract / C.2",
            ["predictions (200,672)", "retrieval-eligible questions (C.2 text: 1,177)"],
            [200_672, 1_177],
            [len(STRATEGIES) * len(BACKBONES) * N_QUESTIONS, eligible],
            0.0,
            "count",
            note=[
                "32 cells x 6,271",
                "Σ T1–T8 sizes = Fig. 14 caption's and §5.6's 4,771",
            ],
        )
    )
    half = {}
    for name, n in (("pooled", N_QUESTIONS), ("T1/T9", 1500), ("T4", 53)):
        lo, hi = wilson_ci(0.5 * 4 * n, 4 * n)
        half[name] = 100 * (hi - lo) / 2
    add(
        check_rows(
            "text_wilson_half_width",
            "§3",
            ["pooled ±0.6 pp", "T1/T9 ±1.3 pp", "T4 ±9 pp"],
            [0.6, 1.3, 9.0],
            [half["pooled"], half["T1/T9"], half["T4"]],
            [0.05, 0.05, 0.5],
            "pp",
            note="Wilson 95% at p = 0.5 with n = 4 backbones x task size (the reading under "
            "which the pooled and T1/T9 figures hold; one cell of 53 gives ±13 pp)",
        )
    )
    return pd.concat(frames, ignore_index=True)


def audit_frontier(summary: pd.DataFrame, claimed_size: int = 11) -> pd.DataFrame:
    """§5.6 / Fig. 6 claims against the frontier under both pooled versions.

    Returns:
        Audit rows: frontier size (count), "Haiku dominates Sonnet under full-context" and
        "structured-timeline never reaches the frontier" (bool as 1/0), per version.
    """
    rep = frontier_report(summary, claimed_size)
    frames = []
    for version, table in (("reported", "Table 1 Pool."), ("recomputed", "Table 14")):
        dom = rep["haiku_dominates_sonnet_full_context"][version]
        frames.append(
            check_rows(
                f"frontier_{version}",
                "§5.6 / Fig. 6",
                [
                    "frontier size (11/32)",
                    "Haiku dominates Sonnet under full-context",
                    "structured-timeline off the frontier",
                ],
                [claimed_size, 1, 1],
                [
                    rep[version]["size"],
                    np.nan if dom is None else float(dom),
                    float(not rep["structured_timeline_on_frontier"][version]),
                ],
                0.0,
                "count / bool",
                note=f"pooled accuracy from {table}, cost from Table 4",
            )
        )
    return pd.concat(frames, ignore_index=True)


def audit_all(tables: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Every check of this module on the fourteen tables.

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


def discrepancies(audit: pd.DataFrame) -> pd.DataFrame:
    """The flagged rows of an audit, largest first within each check."""
    missing = [c for c in AUDIT_COLUMNS if c not in audit.columns]
    if missing:
        raise PaperFiguresError(f"discrepancies: audit lacks {missing}; use audit_all()")
    out = audit[audit["flagged"]]
    order = {c: i for i, c in enumerate(dict.fromkeys(audit["check"]))}
    out = out.assign(_c=out["check"].map(order)).sort_values(
        ["_c", "size"], ascending=[True, False]
    )
    return out.drop(columns="_c").reset_index(drop=True)


def audit_overview(audit: pd.DataFrame) -> pd.DataFrame:
    """One row per check: source, n_checked, n_flagged, largest miss and its unit."""
    g = audit.groupby("check", sort=False)
    out = pd.DataFrame(
        {
            "source": g["source"].first(),
            "n_checked": g.size(),
            "n_flagged": g["flagged"].sum().astype(int),
            "max_size": g["size"].max(),
            "unit": g["unit"].agg(lambda u: " / ".join(dict.fromkeys(u))),
        }
    )
    return out.reset_index()


# =========================================================================== charts


def heatmap_chart(cube: pd.DataFrame) -> alt.FacetChart:
    """Table 1 as a heatmap: task x strategy per backbone panel, Table 1's blue bins.

    Args:
        cube: output of :func:`accuracy_cube` (288 rows for the paper).
    """
    df = cube.assign(label=(100 * cube["accuracy"]).round().astype(int).astype(str))
    base = alt.Chart().encode(
        x=alt.X("task:N", sort=list(TASKS), title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
    )
    colour = alt.Color(
        "accuracy:Q",
        title="accuracy",
        scale=alt.Scale(type="threshold", domain=list(ACCURACY_BINS), range=ACCURACY_COLOURS),
        legend=alt.Legend(format=".0%"),
    )
    rect = base.mark_rect().encode(
        color=colour,
        tooltip=["strategy", "backbone", "task", alt.Tooltip("accuracy:Q", format=".3f"), "n"],
    )
    text = base.mark_text(fontSize=9).encode(
        text="label:N",
        color=alt.condition(
            alt.datum.accuracy >= ACCURACY_BINS[-2], alt.value("white"), alt.value("black")
        ),
    )
    return (
        alt.layer(rect, text, data=df)
        .properties(width=200, height=170)
        .facet(column=alt.Column("backbone:N", sort=list(BACKBONES), title=None))
        .properties(title="Table 1: accuracy (%) per strategy × backbone × task (Table 14 cells)")
    )


def lift_chart(lift: pd.DataFrame, values: str = "printed_pp") -> alt.FacetChart:
    """Table 2 as a diverging heatmap: task x backbone, one row per regime.

    Args:
        lift: output of :func:`lift_table` (120 rows for the paper).
        values: "printed_pp" (Table 2) or "recomputed_pp" (from Table 14).
    """
    if values not in ("printed_pp", "recomputed_pp"):
        raise PaperFiguresError(
            f"lift_chart: values must be printed_pp or recomputed_pp, got {values!r}"
        )
    df = lift.assign(
        lift_pp=lift[values],
        # Table 2 prints signed integers and an unsigned 0.
        label=lift[values].map(
            lambda v: "" if pd.isna(v) else ("0" if round(v) == 0 else f"{v:+.0f}")
        ),
    )
    base = alt.Chart().encode(
        x=alt.X("task:N", sort=[*TASKS, "macro"], title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("backbone:N", sort=list(BACKBONES), title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "lift_pp:Q",
            title="lift (pp)",
            scale=alt.Scale(type="threshold", domain=list(LIFT_BINS), range=LIFT_COLOURS),
        ),
        tooltip=[
            "regime",
            "backbone",
            "task",
            "printed_pp",
            alt.Tooltip("recomputed_pp:Q", format=".1f"),
        ],
    )
    text = base.mark_text(fontSize=9).encode(
        text="label:N",
        color=alt.condition(alt.datum.lift_pp >= 30, alt.value("white"), alt.value("black")),
    )
    source = "Table 2" if values == "printed_pp" else "recomputed from Table 14"
    return (
        alt.layer(rect, text, data=df)
        .properties(width=300, height=90)
        .facet(row=alt.Row("regime:N", sort=list(metrics.TABLE2_REGIMES), title=None))
        .properties(title=f"Context lift over same-backbone blind (pp, {source})")
    )


def _bar_panel(cube: pd.DataFrame, task: str, reference: float | None) -> alt.LayerChart:
    sub = cube[cube["task"] == task]
    if sub.empty:
        raise PaperFiguresError(f"bottleneck_bars_chart: no {task} cells in the cube")
    bars = (
        alt.Chart(sub)
        .mark_bar()
        .encode(
            x=alt.X("strategy:N", sort=list(STRATEGIES), title=None, axis=alt.Axis(labelAngle=-40)),
            xOffset=alt.XOffset("backbone:N", sort=list(BACKBONES)),
            y=alt.Y("accuracy:Q", title=f"{task} accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("backbone:N", sort=list(BACKBONES)),
            tooltip=["strategy", "backbone", alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    layers = [bars]
    if reference is not None:
        rule = alt.Chart(pd.DataFrame({"ref": [reference]})).mark_rule(strokeDash=[2, 2])
        layers.append(rule.encode(y="ref:Q"))
    n = int(sub["n"].iloc[0]) if "n" in sub and sub["n"].notna().all() else None
    title = f"{task} ({n} q/cell)" if n else task
    return alt.layer(*layers).properties(width=330, height=190, title=title)


def bottleneck_bars_chart(
    cube: pd.DataFrame,
    tasks: Sequence[str] = ("T2", "T6"),
    references: Mapping[str, float] | None = None,
) -> alt.HConcatChart:
    """Fig. 3: accuracy on the T2 / T6 bottlenecks by strategy (x) and backbone (colour).

    Args:
        cube: output of :func:`accuracy_cube`.
        tasks: one panel per task.
        references: task -> dotted reference line (Fig. 3: 0.5 on T6 only).
    """
    refs = {"T6": 0.5} if references is None else dict(references)
    panels = [_bar_panel(cube, t, refs.get(t)) for t in tasks]
    return alt.hconcat(*panels).properties(title="Fig. 3: aggregation bottlenecks (Table 14)")


def t9_chart(breakdown: pd.DataFrame, cube: pd.DataFrame) -> alt.HConcatChart:
    """Fig. 4 from the tables: pooled T9 outcomes per strategy (Table 8) next to the per-cell
    strict abstention (Table 14).

    Args:
        breakdown: output of :func:`t9_breakdown`.
        cube: output of :func:`accuracy_cube`.
    """
    colours = alt.Scale(domain=list(T9_OUTCOMES), range=["#009E73", "#8fd6bd", "#D55E00"])
    stacked = (
        alt.Chart(breakdown)
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
            x=alt.X(
                "share:Q",
                stack="zero",
                title="share of T9 (pooled over backbones)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("outcome:N", sort=list(T9_OUTCOMES), scale=colours, title="T9 outcome"),
            order=alt.Order("order:Q"),
            tooltip=["strategy", "outcome", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=300, height=200, title="Table 8: strict / lenient-rescued / rest")
    )
    cells = cube[cube["task"] == "T9"]
    dots = (
        alt.Chart(cells)
        .mark_point(filled=True, size=60)
        .encode(
            y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
            x=alt.X(
                "accuracy:Q", title="strict abstention per cell", scale=alt.Scale(domain=[0, 1])
            ),
            color=alt.Color("backbone:N", sort=list(BACKBONES)),
            tooltip=["strategy", "backbone", alt.Tooltip("accuracy:Q", format=".3f")],
        )
        .properties(width=260, height=200, title="Table 14: T9 per cell")
    )
    return (
        alt.hconcat(stacked, dots)
        .resolve_scale(color="independent", shape="independent")
        .properties(title="Fig. 4 (tables only): T9 abstention")
    )


def pareto_chart(summary: pd.DataFrame, version: str = "reported") -> alt.LayerChart:
    """Fig. 6: cost (log) vs pooled accuracy for every cell, dashed Pareto frontier.

    Args:
        summary: output of :func:`cell_summary`.
        version: "reported" (Table 1 Pool., the paper's figure) or "recomputed" (Table 14).
    """
    if version not in ("reported", "recomputed"):
        raise PaperFiguresError(
            f"pareto_chart: version must be reported or recomputed, got {version!r}"
        )
    acc, on = f"{version}_pooled", f"pareto_{version}"
    df = summary.assign(pooled=summary[acc], frontier=summary[on])
    # A data-tight log axis; a "nice" one would run to the next power of ten.
    lo, hi = float(df["cost_usd"].min()), float(df["cost_usd"].max())
    x = alt.X(
        "cost_usd:Q",
        scale=alt.Scale(type="log", domain=[lo / 1.5, hi * 1.5], nice=False),
        title="cost per 6,271-question cell (USD, log scale)",
    )
    y = alt.Y("pooled:Q", title="pooled accuracy", scale=alt.Scale(zero=False))
    points = (
        alt.Chart(df)
        .mark_point(filled=True, size=80, opacity=0.9)
        .encode(
            x=x,
            y=y,
            color=alt.Color("family:N", sort=list(FAMILIES), title="strategy family"),
            shape=alt.Shape("backbone:N", sort=list(BACKBONES)),
            tooltip=[
                "strategy",
                "backbone",
                alt.Tooltip("cost_usd:Q", format="$.2f"),
                alt.Tooltip("pooled:Q", format=".3f"),
                "frontier",
            ],
        )
    )
    on_frontier = alt.Chart(df[df["frontier"]])
    line = on_frontier.mark_line(strokeDash=[6, 4], color="black", strokeWidth=1).encode(
        x=x, y=y, order="cost_usd:Q"
    )
    rings = on_frontier.mark_point(size=220, color="black", strokeWidth=0.8).encode(x=x, y=y)
    key = df[(df["strategy"] == "full-context") & df["backbone"].isin([HK, SN])]
    labels = (
        alt.Chart(key.assign(tag=key["backbone"].map({HK: "full × Haiku", SN: "full × Sonnet"})))
        # Up and to the left: the space right of the dearest cells belongs to the legend.
        .mark_text(dx=-8, dy=-10, align="right", fontSize=10)
        .encode(x=x, y=y, text="tag:N")
    )
    n_on = int(df["frontier"].sum())
    source = "Table 1 Pool." if version == "reported" else "recomputed from Table 14"
    return alt.layer(line, rings, points, labels).properties(
        width=380,
        height=260,
        title=f"Fig. 6: cost vs pooled accuracy ({source}); frontier {n_on}/{len(df)}",
    )


def sp2_chart(sp2: pd.DataFrame) -> alt.LayerChart:
    """§5.3 blind-to-full gap per backbone, one bar per version (text / Table 1 / Table 14).

    Args:
        sp2: output of :func:`sp2_gaps`.
    """
    base = alt.Chart(sp2).encode(
        y=alt.Y("backbone:N", sort=list(BACKBONES), title=None),
        yOffset=alt.YOffset("version:N", sort=list(SP2_VERSIONS)),
        x=alt.X("gap_pp:Q", title="full-context minus blind, pooled (pp)"),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("version:N", sort=list(SP2_VERSIONS), title="source"),
        tooltip=[
            "backbone",
            "version",
            alt.Tooltip("blind:Q", format=".3f"),
            alt.Tooltip("full:Q", format=".3f"),
            alt.Tooltip("gap_pp:Q", format=".1f"),
        ],
    )
    text = base.mark_text(align="left", dx=3, fontSize=9).encode(
        text=alt.Text("gap_pp:Q", format=".1f")
    )
    return alt.layer(bars, text).properties(
        width=300, height=220, title="§5.3 SP2: blind-to-full gap per backbone"
    )


def pool_diff_chart(summary: pd.DataFrame) -> alt.LayerChart:
    """Table 1's printed Pool. row minus its recomputation from Table 14, per cell (pp).

    Args:
        summary: output of :func:`cell_summary`.
    """
    df = summary.assign(label=summary["pooled_diff_pp"].map(lambda v: f"{v:+.1f}"))
    lim = max(1.0, float(np.ceil(df["pooled_diff_pp"].abs().max())))
    base = alt.Chart(df).encode(
        x=alt.X("backbone:N", sort=list(BACKBONES), title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "pooled_diff_pp:Q",
            title="printed - recomputed (pp)",
            scale=alt.Scale(scheme="redblue", domain=[-lim, lim], domainMid=0),
        ),
        tooltip=[
            "strategy",
            "backbone",
            alt.Tooltip("reported_pooled:Q", format=".2f"),
            alt.Tooltip("recomputed_pooled:Q", format=".4f"),
            alt.Tooltip("pooled_diff_pp:Q", format=".2f"),
        ],
    )
    text = base.mark_text(fontSize=10).encode(
        text="label:N",
        color=alt.condition(
            f"abs(datum.pooled_diff_pp) > {0.6 * lim}", alt.value("white"), alt.value("black")
        ),
    )
    return alt.layer(rect, text).properties(
        width=260, height=220, title="Table 1 Pool. minus Σ n·acc / 6,271 from Table 14 (pp)"
    )


def compose(rows: Sequence[Sequence[alt.TopLevelMixin]], title: str = "") -> alt.VConcatChart:
    """Stack rows of charts into one figure; every panel keeps its own colour/shape scales.

    Args:
        rows: each a sequence of charts placed side by side.
        title: overall title.
    """
    if not rows or any(not r for r in rows):
        raise PaperFiguresError("compose: give at least one non-empty row of charts")
    lines = []
    for r in rows:
        line = r[0] if len(r) == 1 else alt.hconcat(*r)
        if len(r) > 1:
            line = line.resolve_scale(color="independent", shape="independent")
        lines.append(line)
    out = alt.vconcat(*lines).resolve_scale(color="independent", shape="independent")
    return out.properties(title=title) if title else out


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
        path: target (default ``figures/12_paper_summary.json``).

    Returns:
        The path written.
    """
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        raise PaperFiguresError(f"write_summary: summary lacks keys {missing}")
    path = Path(path) if path is not None else FIGURES_DIR / "12_paper_summary.json"
    text = json.dumps(_clean(dict(summary)), indent=1, ensure_ascii=False, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return path
