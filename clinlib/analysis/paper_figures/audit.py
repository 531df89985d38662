"""The audit of the paper's tables against each other: every printed number that other
printed numbers determine, recomputed (Table 1 §3/§5.1, Table 2 §5.1, Table 4 Appendix D,
Tables 3 and 5–13 §5.5 and Appendix G, the Fig. 6 frontier §5.6).

Each check is one row of a frame with :data:`AUDIT_COLUMNS` (built by :func:`check_rows`);
nothing is corrected or hidden: a row is ``flagged`` when the printed number misses its
recomputation by more than the printing precision explains (``tol``). The numbers quoted in
the text are checked by :mod:`.claims`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from clinlib.analysis import metrics, paper
from clinlib.analysis.paper import BACKBONES, N_QUESTIONS, TASK_N
from clinlib.analysis.paper_figures.cells import (
    PaperFiguresError,
    cell_label,
    cell_labels,
    frontier_report,
    lift_table,
    need_table,
    per_task_accuracy,
    summary_comparison,
)
from clinlib.analysis.stats.question import minimum_detectable_effect

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
    t1 = need_table(tables, 1, ("strategy", "backbone", "task", "value", "unit"))
    t14 = need_table(tables, 14, ("strategy", "backbone", "task", "value"))
    keys = ["strategy", "backbone", "task"]
    cells = per_task_accuracy(t1, 1).merge(
        per_task_accuracy(t14, 14), on=keys, suffixes=("_1", "_14")
    )
    frames = [
        check_rows(
            "table1_cells_vs_table14",
            "Table 1 per-task cells",
            [f"{cell_label(s, b)} {t}" for s, b, t in cells[keys].to_numpy()],
            100 * cells["accuracy_1"],
            100 * cells["accuracy_14"],
            0.55,
            "percent",
            note="Table 14 accuracy x 100",
        )
    ]
    summary = summary_comparison(tables, weights)
    labels = cell_labels(summary)
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
        t1 = need_table(tables, 1, ("strategy", "backbone", "task", "value"))
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
    t4 = need_table(tables, 4, ("strategy", "backbone", "metric", "value"))
    t4 = t4.astype({"strategy": str, "backbone": str, "metric": str})
    cells = t4[t4["strategy"] != "total"].pivot_table(
        index=["strategy", "backbone"], columns="metric", values="value"
    )
    need = ["cost_usd", "cost_per_question", "input_tokens", "output_tokens", "cache_hit_rate"]
    missing = [c for c in need if c not in cells.columns]
    if missing:
        raise PaperFiguresError(f"Table 4 lacks metric(s) {missing}")
    cells = cells.reset_index()
    labels = cell_labels(cells)
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


def _audit_table3(tables: Mapping[int, pd.DataFrame]) -> list[pd.DataFrame]:
    """Table 3 (§5.5): each recall is k/19 (k/n) for a whole k."""
    t3 = need_table(tables, 3, ("prep", "strategy", "backbone", "value", "n"))
    t3 = t3[t3["value"].notna()]
    k = (t3["value"] * t3["n"]).round()
    return [
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
    ]


def _audit_pooled_f1(tables: Mapping[int, pd.DataFrame], number: int) -> list[pd.DataFrame]:
    """Tables 5/6 (G.1): pooled macro-F1 vs the mean of the backbone columns."""
    t = need_table(tables, number, ("strategy", "backbone", "value"))
    wide = t.astype({"strategy": str, "backbone": str}).pivot_table(
        index="strategy", columns="backbone", values="value"
    )
    cols = [b for b in BACKBONES if b in wide.columns]
    if "pooled" not in wide.columns or not cols:
        return []
    return [
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
    ]


def _audit_table7(tables: Mapping[int, pd.DataFrame]) -> list[pd.DataFrame]:
    """Table 7 (G.2): the MDE column vs the two-proportion formula."""
    t7 = need_table(tables, 7, ("task", "value", "n"))
    return [
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
    ]


def _audit_parser(
    tables: Mapping[int, pd.DataFrame], number: int, task: str, cube: pd.DataFrame
) -> list[pd.DataFrame]:
    """Tables 8/9 (G.3): strict vs Table 14 averaged over backbones; Δ vs lenient - strict."""
    t = need_table(tables, number, ("strategy", "parser", "value"))
    wide = t.astype({"strategy": str, "parser": str}).pivot_table(
        index="strategy", columns="parser", values="value"
    )
    mean = cube[cube["task"] == task].groupby("strategy")["accuracy"].mean()
    common = [s for s in wide.index if s in mean.index]
    return [
        check_rows(
            f"table{number}_strict_vs_table14",
            f"Table {number} strict",
            common,
            wide.loc[common, "strict"],
            mean[common],
            0.001,
            "fraction",
            note=f"mean of Table 14 {task} over the four backbones",
        ),
        check_rows(
            f"table{number}_delta",
            f"Table {number} Δ",
            list(wide.index),
            wide["delta"],
            wide["lenient"] - wide["strict"],
            0.001,
            "fraction",
            note="lenient - strict",
        ),
    ]


def _audit_table10(tables: Mapping[int, pd.DataFrame]) -> list[pd.DataFrame]:
    """Table 10 (G.5): Δ vs backbone-matched minus DeepSeek-prepared accuracy."""
    t10 = need_table(tables, 10, ("backbone", "strategy", "prep", "metric", "value"))
    t10 = t10.astype({"backbone": str, "strategy": str})
    acc = t10[t10["metric"] == "accuracy"].pivot_table(
        index=["backbone", "strategy"], columns="prep", values="value"
    )
    delta = t10[t10["metric"] != "accuracy"].set_index(["backbone", "strategy"])["value"]
    delta = delta.reindex(acc.index)
    return [
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
    ]


def _audit_table13(tables: Mapping[int, pd.DataFrame], cube: pd.DataFrame) -> list[pd.DataFrame]:
    """Table 13 (G.7): macro over each task subset, from Table 14, averaged over backbones."""
    t13 = need_table(tables, 13, ("strategy", "task_subset", "value"))
    t13 = t13.astype({"strategy": str, "task_subset": str})
    frames = []
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
    return frames


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
        frames += _audit_table3(tables)
    for number in (5, 6):
        if number in tables:
            frames += _audit_pooled_f1(tables, number)
    if 7 in tables:
        frames += _audit_table7(tables)
    if 14 in tables:
        cube = per_task_accuracy(
            need_table(tables, 14, ("strategy", "backbone", "task", "value")), 14
        )
        for number, task in ((8, "T9"), (9, "T7")):
            if number in tables:
                frames += _audit_parser(tables, number, task, cube)
    if 10 in tables:
        frames += _audit_table10(tables)
    if 13 in tables and 14 in tables:
        frames += _audit_table13(tables, cube)
    if not frames:
        return pd.DataFrame(columns=list(AUDIT_COLUMNS))
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
