"""Recomputations of the numbers the paper's text quotes: each a function of the
:class:`.claim_record.Evidence` built once from the published tables (or a factory of one),
returning our value for a :class:`.claim_record.Claim` to compare with the printed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from clinlib.analysis.paper import BACKBONES, BLIND, N_QUESTIONS, STRATEGIES, TASK_N
from clinlib.analysis.paper_figures.cells import cell_labels, sp2_gaps
from clinlib.analysis.paper_figures.claim_record import Evidence, Ours
from clinlib.analysis.probe_terms import UPSTREAM_BUILT
from clinlib.analysis.stats.question import wilson_ci

_, GPT, HK, SN = BACKBONES


def full_pooled_pp(version: str) -> Callable[[Evidence], pd.Series]:
    return lambda ev: 100 * ev.idx.xs("full-context")[f"{version}_pooled"]


def sp2_part(ev: Evidence, version: str) -> pd.DataFrame:
    """:func:`.cells.sp2_gaps` rows of one version, by backbone."""
    sp2 = sp2_gaps(ev.summary)
    return sp2[sp2["version"] == version].set_index("backbone")


def sp2_pooled(version: str) -> Callable[[Evidence], pd.Series]:
    def ours(ev: Evidence) -> pd.Series:
        part = sp2_part(ev, version)
        out = {}
        for b in part.index:
            out[f"blind × {b}"] = part.loc[b, "blind"]
            out[f"full-context × {b}"] = part.loc[b, "full"]
        return pd.Series(out, dtype=float)

    return ours


def sp2_gap(version: str) -> Callable[[Evidence], pd.Series]:
    return lambda ev: sp2_part(ev, version)["gap_pp"]


def pooled_range(strategies: Sequence[str], version: str) -> Callable[[Evidence], list]:
    def ours(ev: Evidence) -> list:
        col = ev.summary[ev.summary["strategy"].isin(strategies)][f"{version}_pooled"]
        return [col.min(), col.max()]

    return ours


def task_range(strategy: str, task: str, backbones) -> Callable[[Evidence], list]:
    def ours(ev: Evidence) -> list:
        acc = ev.acc(strategy, task, backbones)
        return [acc.min(), acc.max()]

    return ours


def upstream_t3(ev: Evidence) -> pd.Series:
    t3 = ev.cube[(ev.cube["task"] == "T3") & ev.cube["strategy"].isin(UPSTREAM_BUILT)]
    return pd.Series(t3["accuracy"].to_numpy(), index=cell_labels(t3))


def t9_margin(ev: Evidence) -> list:
    gap = 100 * (ev.acc("last-visit-only", "T9") - ev.acc("full-context", "T9"))
    return [gap.min(), gap.max()]


def t9_pooled_table8(ev: Evidence) -> list:
    t8 = ev.tables[8].astype({"strategy": str, "parser": str})
    t8w = t8.pivot_table(index="strategy", columns="parser", values="value")
    lv, fc = t8w.loc["last-visit-only"], t8w.loc["full-context"]
    strict, lenient = [lv["strict"], fc["strict"]], [lv["lenient"], fc["lenient"]]
    return [*strict, strict[0] - strict[1], *lenient, lenient[0] - lenient[1]]


def gpt_t2_lift(ev: Evidence) -> Ours:
    blind_t2 = ev.acc(BLIND, "T2")
    lifts = {s: 100 * (ev.acc(s, "T2")[GPT] - blind_t2[GPT]) for s in STRATEGIES[1:]}
    closest = min(lifts, key=lambda s: abs(lifts[s] + 7.8))
    note = (
        f"Table 14; the -7.8 pp lift belongs to {closest} × gpt-4o-mini ({lifts[closest]:+.1f} pp)"
    )
    return Ours(lifts["llm-summary"], note)


def dense_pooled_gap(version: str) -> Callable[[Evidence], list]:
    def ours(ev: Evidence) -> list:
        idx, col = ev.idx, f"{version}_pooled"
        g = 100 * (idx.xs("full-context")[col] - idx.xs("dense-retrieval")[col])
        return [g.min(), g.max()]

    return ours


def dense_task_gap(ev: Evidence) -> Ours:
    cube = ev.cube
    full_t, dense_t = (
        cube[cube["strategy"] == "full-context"],
        cube[cube["strategy"] == "dense-retrieval"],
    )
    both = full_t.merge(dense_t, on=["backbone", "task"], suffixes=("_f", "_d"))
    both["gap"] = 100 * (both["accuracy_f"] - both["accuracy_d"]).abs()
    worst = both[both["task"] != "T4"].loc[lambda d: d.groupby("task")["gap"].idxmax()]
    gaps = pd.Series(worst["gap"].to_numpy(), index=[f"|full - dense| {t}" for t in worst["task"]])
    return Ours(gaps, [f"largest on {b}" for b in worst["backbone"]])


def t5_lowest(ev: Evidence) -> pd.Series:
    """Each strategy's lowest per-backbone T5 macro-F1 (Table 5)."""
    t5 = ev.tables[5].astype({"strategy": str, "backbone": str})
    return t5[t5["backbone"].isin(BACKBONES)].groupby("strategy")["value"].min()


def pooled_macro_f1(ev: Evidence) -> pd.Series:
    out = {}
    for number, task in ((5, "T5"), (6, "T8")):
        if number not in ev.tables:
            continue
        t = ev.tables[number].astype({"strategy": str, "backbone": str})
        pooled = t[t["backbone"] == "pooled"].set_index("strategy")["value"]
        out.update({f"{task} {s}": v for s, v in pooled.items()})
    return pd.Series(out, dtype=float)


def matched_prep_range(ev: Evidence) -> list:
    t10 = ev.tables[10]
    d10 = t10[t10["metric"] == "delta_matched_minus_deepseek"]["value"]
    return [d10.max(), d10.min()]


def table12_caption(ev: Evidence) -> list:
    t12 = ev.tables[12].astype({"backbone": str, "task_subset": str})
    agg = t12[t12["task_subset"] == "aggregation"]["value"]
    allw = t12[t12["task_subset"] == "all"].pivot_table(
        index="backbone", columns="budget_tokens", values="value"
    )
    return [agg.min(), agg.max(), int((allw[1000] < allw[500]).sum())]


def table4(ev: Evidence, metric: str) -> pd.Series:
    """Table 4's ``metric`` per (strategy, backbone) cell, the Total row left out."""
    t4 = ev.tables[4].astype({"strategy": str, "backbone": str, "metric": str})
    cells = t4[(t4["metric"] == metric) & (t4["strategy"] != "total")]
    return cells.set_index(["strategy", "backbone"])["value"]


def table4_total_cost(ev: Evidence) -> float:
    t4 = ev.tables[4].astype({"strategy": str, "backbone": str, "metric": str})
    return t4[(t4["strategy"] == "total") & (t4["metric"] == "cost_usd")]["value"].iloc[0]


def quoted_costs(ev: Evidence) -> list:
    cost = table4(ev, "cost_usd")
    return [cost[("full-context", SN)], cost[("full-context", HK)], table4_total_cost(ev)]


def cost_per_question_extremes(ev: Evidence) -> Ours:
    cost = table4(ev, "cost_usd")
    cheapest = cost.idxmin()
    notes = [
        f"cheapest is {cheapest[0]} × {cheapest[1]} (${cost.min():.2f})",
        "Table 4 max cost / 6,271",
    ]
    return Ours([cost.min() / N_QUESTIONS, cost.max() / N_QUESTIONS], notes)


def cached_tokens(ev: Evidence) -> float:
    return (table4(ev, "input_tokens") * table4(ev, "cache_hit_rate") / 100).sum()


def counts(ev: Evidence) -> list:
    eligible = sum(n for t, n in TASK_N.items() if t != "T9")
    return [len(STRATEGIES) * len(BACKBONES) * N_QUESTIONS, eligible]


def wilson_half_widths(ev: Evidence) -> list:
    half = []
    for n in (N_QUESTIONS, 1500, 53):  # pooled, T1/T9, T4
        lo, hi = wilson_ci(0.5 * 4 * n, 4 * n)
        half.append(100 * (hi - lo) / 2)
    return half


# --- the claims, in the order the audit lists them -------------------------------------------
