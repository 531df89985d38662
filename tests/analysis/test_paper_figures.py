"""Tests for clinlib.analysis.paper_figures: the audit on hand-built tables with planted discrepancies
(found, with the size worked out by hand), on the paper's real tables (the known
discrepancies appear, the clean checks stay clean), the chart builders' data, and the JSON
summary.

Line numbers in comments refer to the paper text seeds/clintracebench.txt.
"""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest

from clinlib.analysis import metrics
from clinlib.analysis import paper_figures as pf
from clinlib.analysis.paper import BACKBONES, STRATEGIES, TASK_N, TASKS, recompute_pooled_macro
from clinlib.analysis.paper_figures import PaperFiguresError
from clinlib.analysis.paper_figures.claim_record import Claim, Evidence, Ours, claim_rows

DS, GPT, HK, SN = BACKBONES
BLIND, FULL = "no-context-blind", "full-context"


@pytest.fixture(scope="module")
def tables() -> dict[int, pd.DataFrame]:
    return pf.load_paper_tables()


@pytest.fixture(scope="module")
def summary(tables) -> pd.DataFrame:
    return pf.cell_summary(tables)


@pytest.fixture(scope="module")
def audit(tables) -> pd.DataFrame:
    return pf.audit_all(tables)


def flagged(audit: pd.DataFrame, check: str) -> pd.DataFrame:
    rows = audit[audit["check"] == check]
    assert not rows.empty, f"no rows for check {check!r}"
    return rows[rows["flagged"]]


def row(audit: pd.DataFrame, check: str, item: str) -> pd.Series:
    rows = audit[(audit["check"] == check) & (audit["item"] == item)]
    assert len(rows) == 1, (check, item, len(rows))
    return rows.iloc[0]


# --- hand-built tiny tables ---------------------------------------------------------------------
#
# One backbone (DeepSeek), two strategies. blind: 0.2 on every task. full: 1.0 on T1, 0.5
# elsewhere. By hand, with the §3 sizes (total 6,271, T1 = 1,500):
#   full pooled = (1500 * 1.0 + 4771 * 0.5) / 6271 = 3885.5 / 6271 = 0.619598...
#   full macro  = (1.0 + 8 * 0.5) / 9 = 5/9 = 0.5556;  Δblind = 5/9 - 0.2 = 0.3556
#   blind pooled = blind macro = 0.2

FULL_POOLED = 3885.5 / 6271


def tiny_t14() -> pd.DataFrame:
    rows = []
    for t in TASKS:
        rows.append((t, BLIND, DS, 0.2))
        rows.append((t, FULL, DS, 1.0 if t == "T1" else 0.5))
    df = pd.DataFrame(rows, columns=["task", "strategy", "backbone", "value"])
    return df.assign(metric="accuracy", unit="fraction", n=df["task"].map(TASK_N))


def tiny_t1(pooled_full: float = 62, blind_t4: float = 20) -> pd.DataFrame:
    rows = []
    for t in TASKS:
        rows.append((BLIND, DS, t, "accuracy", blind_t4 if t == "T4" else 20, "percent"))
        rows.append((FULL, DS, t, "accuracy", 100 if t == "T1" else 50, "percent"))
    rows += [
        (BLIND, DS, "pooled", "accuracy", 20, "percent"),
        (BLIND, DS, "macro", "accuracy", 20, "percent"),
        (BLIND, DS, "delta_blind", "delta_blind", np.nan, "pp"),
        (FULL, DS, "pooled", "accuracy", pooled_full, "percent"),
        (FULL, DS, "macro", "accuracy", 56, "percent"),
        (FULL, DS, "delta_blind", "delta_blind", 36, "pp"),
    ]
    return pd.DataFrame(rows, columns=["strategy", "backbone", "task", "metric", "value", "unit"])


def tiny_t4(cost_full: float = 12.542, per_q_full: float = 0.002) -> pd.DataFrame:
    # blind $6.271 -> $0.0010/q; full $12.542 -> $0.0020/q. Cache: 10 M at 10%, 30 M at 30%
    # -> input-weighted 25% (a plain mean of the two rates would be 20%).
    rows = [
        (BLIND, DS, "cost_usd", 6.271),
        (BLIND, DS, "cost_per_question", 0.0010),
        (BLIND, DS, "input_tokens", 10.0),
        (BLIND, DS, "output_tokens", 50.0),
        (BLIND, DS, "cache_hit_rate", 10.0),
        (FULL, DS, "cost_usd", cost_full),
        (FULL, DS, "cost_per_question", per_q_full),
        (FULL, DS, "input_tokens", 30.0),
        (FULL, DS, "output_tokens", 70.0),
        (FULL, DS, "cache_hit_rate", 30.0),
        ("total", "total", "cost_usd", 18.81),
        ("total", "total", "input_tokens", 40.0),
        ("total", "total", "output_tokens", 120.0),
        ("total", "total", "cache_hit_rate", 25.0),
    ]
    return pd.DataFrame(rows, columns=["strategy", "backbone", "metric", "value"])


def test_tiny_summary_matches_hand_values():
    out = pf.cell_summary({1: tiny_t1(), 4: tiny_t4(), 14: tiny_t14()}).set_index("strategy")
    assert out.loc[FULL, "recomputed_pooled"] == pytest.approx(FULL_POOLED)
    assert out.loc[FULL, "recomputed_macro"] == pytest.approx(5 / 9)
    assert out.loc[FULL, "recomputed_delta_blind"] == pytest.approx(5 / 9 - 0.2)
    assert np.isnan(out.loc[BLIND, "recomputed_delta_blind"])  # printed as a dash
    assert out.loc[FULL, "reported_pooled"] == pytest.approx(0.62)
    assert out.loc[FULL, "pooled_diff_pp"] == pytest.approx(62 - 100 * FULL_POOLED)
    assert out.loc[FULL, "cost_usd"] == 12.542
    # full is dearer and more accurate: both cells are on the frontier
    assert out["pareto_reported"].all() and out["pareto_recomputed"].all()
    assert out.loc[FULL, "family"] == "full" and out.loc[BLIND, "family"] == "floor"


def test_audit_table1_finds_planted_pooled_and_cell_errors():
    clean = pf.audit_table1({1: tiny_t1(), 14: tiny_t14()})
    assert not clean["flagged"].any()
    assert set(clean.columns) == set(pf.AUDIT_COLUMNS)
    # Planted: full pooled printed 65 (true 61.96) and blind T4 printed 30 (true 20).
    bad = pf.audit_table1({1: tiny_t1(pooled_full=65, blind_t4=30), 14: tiny_t14()})
    found = bad[bad["flagged"]]
    got = {(r.check, r.item): r.diff for r in found.itertuples()}
    full = f"{FULL} × {DS}"
    blind = f"{BLIND} × {DS}"
    assert set(got) == {
        ("table1_cells_vs_table14", f"{blind} T4"),
        ("table1_pooled_vs_table14", full),
        ("table1_pooled_vs_own_cells", full),
        # the wrong cell moves Table 1's own blind macro to (8 * 20 + 30) / 9 = 21.11
        ("table1_macro_vs_own_cells", blind),
    }
    assert got[("table1_cells_vs_table14", f"{blind} T4")] == pytest.approx(10.0)
    assert got[("table1_pooled_vs_table14", full)] == pytest.approx(65 - 100 * FULL_POOLED)
    assert got[("table1_macro_vs_own_cells", blind)] == pytest.approx(20 - 190 / 9)


def test_audit_lift_finds_planted_lift():
    lifts = {t: (80.0 if t == "T1" else 30.0) for t in TASKS}
    lifts["macro"] = 36.0  # (80 + 8 * 30) / 9 = 35.56
    t2 = pd.DataFrame(
        [(FULL, DS, t, "lift_vs_blind", v, "pp") for t, v in lifts.items()],
        columns=["strategy", "backbone", "task", "metric", "value", "unit"],
    )
    tabs = {1: tiny_t1(), 2: t2, 14: tiny_t14()}
    assert not pf.audit_lift(tabs)["flagged"].any()
    t2.loc[t2["task"] == "T1", "value"] = 85.0
    out = pf.audit_lift({**tabs, 2: t2})
    hit = out[out["flagged"]]
    assert hit["item"].tolist() == [f"{FULL} × {DS} T1"]
    assert hit["diff"].iloc[0] == pytest.approx(5.0)
    # Table 2 Macro vs Table 1 Δblind: printed 36 vs 36 -> agrees
    assert row(out, "table2_macro_vs_table1_delta", f"{FULL} × {DS}").recomputed == 36


def test_audit_cost_finds_planted_per_question_and_total():
    ok = pf.audit_cost({4: tiny_t4()})
    assert not ok["flagged"].any()
    assert row(ok, "table4_total_vs_cells", "cache_hit_rate").recomputed == pytest.approx(25.0)
    bad_t4 = tiny_t4(per_q_full=0.0025)
    bad_t4.loc[bad_t4["strategy"].eq("total") & bad_t4["metric"].eq("cost_usd"), "value"] = 19.31
    bad_t4.loc[bad_t4["strategy"].eq("total") & bad_t4["metric"].eq("cache_hit_rate"), "value"] = 20
    found = pf.audit_cost({4: bad_t4}).query("flagged")
    got = dict(zip(found["item"], found["diff"], strict=True))
    assert set(got) == {f"{FULL} × {DS}", "cost_usd", "cache_hit_rate"}
    assert got[f"{FULL} × {DS}"] == pytest.approx(0.0005)
    assert got["cost_usd"] == pytest.approx(19.31 - (6.271 + 12.542))
    assert got["cache_hit_rate"] == pytest.approx(-5.0)


def test_audit_appendix_tables_tiny():
    t8 = pd.DataFrame(
        [
            (BLIND, "strict", 0.2),
            (BLIND, "lenient", 0.3),
            (BLIND, "delta", 0.1),
            (FULL, "strict", 0.5625),  # mean of Table 14 T9 for full is 0.5: planted +0.0625
            (FULL, "lenient", 0.6),
            (FULL, "delta", 0.1),  # planted: lenient - strict is 0.0375
        ],
        columns=["strategy", "parser", "value"],
    )
    t10 = pd.DataFrame(
        [
            (GPT, "mem0", "deepseek-prepared", "accuracy", 0.532),
            (GPT, "mem0", "backbone-matched", "accuracy", 0.340),
            (GPT, "mem0", None, "delta_matched_minus_deepseek", -0.192),
        ],
        columns=["backbone", "strategy", "prep", "metric", "value"],
    )
    out = pf.audit_appendix_tables({8: t8, 10: t10, 14: tiny_t14()})
    found = out[out["flagged"]]
    got = {(r.check, r.item): r.diff for r in found.itertuples()}
    assert got == {
        ("table8_strict_vs_table14", FULL): pytest.approx(0.0625),
        ("table8_delta", FULL): pytest.approx(0.1 - 0.0375),
    }
    assert row(out, "table10_delta", f"{GPT} × mem0")["size"] == pytest.approx(0.0, abs=1e-12)


def test_check_rows_relations_and_tolerance():
    out = pf.check_rows(
        "c",
        "src",
        ["eq-at-tol", "eq-over", "le-ok", "le-over", "ge-ok", "ge-under"],
        [1.0, 1.0, 9.0, 9.0, 5.0, 5.0],
        [1.5, 1.6, 8.0, 11.6, 8.7, 4.0],
        0.5,
        "pp",
        relation=["=", "=", "<=", "<=", ">=", ">="],
    )
    assert out["size"].tolist() == pytest.approx([0.5, 0.6, 0.0, 2.6, 0.0, 1.0])
    assert out["flagged"].tolist() == [False, True, False, True, False, True]
    assert out["diff"].tolist() == pytest.approx([-0.5, -0.6, 1.0, -2.6, -3.7, 1.0])
    assert list(out.columns) == list(pf.AUDIT_COLUMNS)
    per_row = pf.check_rows("c", "s", ["a", "b"], [1.0, 1.0], [2.0, 2.0], [0.5, 2.0], "pp")
    assert per_row["flagged"].tolist() == [True, False]
    with pytest.raises(PaperFiguresError, match="relation"):
        pf.check_rows("c", "s", ["a"], 1, 1, 0.1, "pp", relation="~")
    with pytest.raises(PaperFiguresError, match="tol"):
        pf.check_rows("c", "s", ["a"], 1, 1, -1.0, "pp")
    with pytest.raises(PaperFiguresError, match="one value per item"):
        pf.check_rows("c", "s", ["a", "b", "c"], [1, 2], 1, 0.1, "pp")
    with pytest.raises(PaperFiguresError, match="notes"):
        pf.check_rows("c", "s", ["a", "b"], 1, 1, 0.1, "pp", note=["x"])


def test_implied_pool_weights_hand_cases():
    # Printed pooled equal to the stated-size pooled: both residuals ~0.
    tabs = {1: tiny_t1(pooled_full=100 * FULL_POOLED), 14: tiny_t14()}
    out = pf.implied_pool_weights(tabs)
    assert out["stated_max_residual_pp"] == pytest.approx(0.0, abs=1e-9)
    assert out["max_residual_pp"] == pytest.approx(0.0, abs=1e-7)
    # Full printed 110% and blind 20%: no weighting of cells <= 100% reaches 110; the best
    # puts all weight on T1 (full 100, blind 20) and misses by exactly 10 pp.
    out = pf.implied_pool_weights({1: tiny_t1(pooled_full=110), 14: tiny_t14()})
    assert out["max_residual_pp"] == pytest.approx(10.0, abs=1e-6)
    assert out["weights"]["T1"]["implied_n"] == pytest.approx(6271, abs=1e-3)


def test_missing_tables_and_columns_are_named():
    with pytest.raises(PaperFiguresError, match="Table 4 is needed"):
        pf.cell_summary({1: tiny_t1(), 14: tiny_t14()})
    with pytest.raises(PaperFiguresError, match=r"Table 14 lacks column\(s\) \['value'\]"):
        pf.accuracy_cube({14: tiny_t14().drop(columns="value")})
    t4 = tiny_t4()
    t4 = t4[~(t4["strategy"].eq(FULL) & t4["metric"].eq("cost_usd"))]
    with pytest.raises(PaperFiguresError, match=r"no cost_usd for cell \(full-context"):
        pf.cell_summary({1: tiny_t1(), 4: t4, 14: tiny_t14()})
    t14 = tiny_t14()
    t14 = t14[~(t14["strategy"].eq(FULL) & t14["task"].eq("T4"))]
    with pytest.raises(PaperFiguresError, match="Table 14: .*lacks task"):
        pf.summary_comparison({1: tiny_t1(), 14: t14})
    t8 = pd.DataFrame(
        [(FULL, "strict", 0.6), (FULL, "lenient", 0.5)], columns=["strategy", "parser", "value"]
    )
    with pytest.raises(PaperFiguresError, match="lenient 0.5 outside"):
        pf.t9_breakdown({8: t8})
    assert issubclass(PaperFiguresError, ValueError)


# --- the paper's real tables --------------------------------------------------------------------

POOLED_OK = {(BLIND, DS), (BLIND, SN)}


def _pooled_by_hand(tables) -> tuple[pd.Series, pd.Series]:
    """(Table 14's n-weighted pooled accuracy in %, printed Pool. minus it in pp) per cell,
    computed here with plain pandas from the two tables and the task sizes of §3."""
    t14 = tables[14].pivot_table(index=["strategy", "backbone"], columns="task", values="value")
    sizes = pd.Series(TASK_N)
    mine = 100 * (t14[list(sizes.index)] * sizes).sum(axis=1) / sizes.sum()
    t1 = tables[1]
    printed = t1[t1["task"] == "pooled"].set_index(["strategy", "backbone"])["value"]
    return mine, (printed - mine.reindex(printed.index)).astype(float)


def test_real_pooled_row_mismatch(audit, summary, tables):
    # The printed Pool. row misses Σ n·acc / 6,271 of Table 14 in 30 of 32 cells.
    hits = flagged(audit, "table1_pooled_vs_table14")
    cells = {tuple(i.split(" × ")) for i in hits["item"]}
    assert cells == {(s, b) for s in STRATEGIES for b in BACKBONES} - POOLED_OK
    _, gap = _pooled_by_hand(tables)
    assert gap.idxmin() == ("dense-retrieval", GPT) and gap.idxmax() == (BLIND, HK)
    assert hits["diff"].min() == pytest.approx(gap.min(), abs=1e-9)
    assert hits["diff"].max() == pytest.approx(gap.max(), abs=1e-9)
    # Hand-worked (test_paper_tables): full x DS = 4410.213 / 6271 = 70.327 % vs printed 67.
    full_ds = summary.set_index(["strategy", "backbone"]).loc[(FULL, DS)]
    assert full_ds["recomputed_pooled"] == pytest.approx(4410.213 / 6271)
    # Macro / Δblind / per-task cells all agree within rounding; so does Table 2.
    for check in (
        "table1_cells_vs_table14",
        "table1_macro_vs_table14",
        "table1_delta_blind_vs_table14",
        "table2_vs_table14",
        "table2_macro_vs_table1_delta",
        "table4_cost_per_question",
        "table7_mde_formula",
        "table8_strict_vs_table14",
        "table9_strict_vs_table14",
        "table10_delta",
        "table13_vs_table14",
    ):
        assert flagged(audit, check).empty, check
    # Independent: paper.recompute_pooled_macro (now a wrapper) agrees with cell_summary.
    rec = recompute_pooled_macro(pf.load_paper_tables()[14])
    pooled = rec[rec["task"] == "pooled"].set_index(["strategy", "backbone"])["value"]
    mine = summary.set_index(["strategy", "backbone"])["recomputed_pooled"]
    assert np.allclose(pooled.reindex(mine.index), mine, atol=1e-12)


def test_real_frontier_claims(summary, audit):
    rep = pf.frontier_report(summary)
    assert rep["reported"]["size"] == 11 and rep["recomputed"]["size"] == 11
    assert rep["same_membership"] and not rep["only_reported"] and not rep["only_recomputed"]
    assert rep["haiku_dominates_sonnet_full_context"] == {"reported": True, "recomputed": True}
    assert rep["structured_timeline_on_frontier"] == {"reported": False, "recomputed": False}
    assert f"{FULL} × {HK}" in rep["reported"]["cells"]
    assert f"{FULL} × {SN}" not in rep["recomputed"]["cells"]
    for check in ("frontier_reported", "frontier_recomputed"):
        assert flagged(audit, check).empty
    # independent brute force on the printed pooled row
    c, a = summary["cost_usd"].to_numpy(), summary["reported_pooled"].to_numpy()
    brute = [
        not any(c[j] <= c[i] and a[j] >= a[i] and (c[j] < c[i] or a[j] > a[i]) for j in range(32))
        for i in range(32)
    ]
    assert summary["pareto_reported"].tolist() == brute


def test_real_text_discrepancies(audit):
    # C.2 prints 1,177 retrieval-eligible questions; T1–T8 sizes sum to 4,771 (Fig. 14 caption).
    r = row(audit, "text_counts", "retrieval-eligible questions (C.2 text: 1,177)")
    assert (r.recomputed, r.flagged, r["size"]) == (4771, True, 3594)
    assert not row(audit, "text_counts", "predictions (200,672)").flagged
    # $106.21 in the text vs $106.20 in Table 4; $527.85 (§1) vs Total $527.87.
    cost = flagged(audit, "text_cost_vs_table4").set_index("item")["diff"]
    assert cost.filter(like="claude-sonnet-4.6").iloc[0] == pytest.approx(0.01)
    assert cost.filter(like="§1: $527.85").iloc[0] == pytest.approx(-0.02)
    # Fig. 16 caption: cheapest is GPT x blind ($0.13 / 6271), not DeepSeek x blind.
    cheap = audit[audit["item"].str.startswith("cheapest cell")].iloc[0]
    assert cheap.flagged and cheap.recomputed == pytest.approx(0.13 / 6271)
    # §5.2: GPT's -7.8 pp on T2 is full-context's lift (0.255 - 0.333), summary's is 0.
    r = row(audit, "text_gpt_t2_summary_lift", "llm-summary × gpt-4o-mini T2 lift")
    assert r.flagged and r.recomputed == pytest.approx(0.0) and "full-context" in r.note
    # §5.5 "exactly 0.500": Table 14 T3 cells that are not 0.500 (lines 756–790).
    t3 = flagged(audit, "text_t3_constant_no").set_index("item")["recomputed"].to_dict()
    assert t3 == pytest.approx(
        {
            f"mem0 × {DS}": 0.492,
            f"mem0 × {GPT}": 0.477,
            f"a-mem × {GPT}": 0.477,
            f"a-mem × {HK}": 0.477,
            f"structured-timeline × {DS}": 0.508,
            f"structured-timeline × {GPT}": 0.508,
            f"llm-summary × {GPT}": 0.492,
        }
    )
    # §5.5 last-visit T3 "0.769–0.869" vs 0.508–0.562; §5.2 Mem0 T8 low 0.291 vs 0.299.
    ranges = flagged(audit, "text_task_range_vs_table14").set_index("item")["recomputed"]
    assert ranges.to_dict() == pytest.approx(
        {"last-visit-only T3 low": 0.508, "last-visit-only T3 high": 0.562, "mem0 T8 low": 0.299}
    )
    # §6 "within 0–9 pp on every task except T4": T3 (Sonnet .885 vs .769) and T6 (GPT .497
    # vs .391) exceed it.
    gaps = flagged(audit, "text_dense_task_gap").set_index("item")["recomputed"]
    assert gaps.to_dict() == pytest.approx({"|full - dense| T3": 11.6, "|full - dense| T6": 10.6})
    # The text's pooled numbers follow the printed Pool. row, not the per-task cells.
    assert flagged(audit, "text_full_pooled_vs_table1").empty
    assert len(flagged(audit, "text_full_pooled_vs_table14")) == 4
    assert flagged(audit, "sp2_text_vs_table1").empty
    assert flagged(audit, "sp2_gap_arithmetic").empty
    # Tables 5/6: pooled macro-F1 is not the mean of the backbone columns in these rows.
    assert set(flagged(audit, "table5_pooled_vs_backbone_mean")["item"]) == {
        BLIND,
        "llm-summary",
        "structured-timeline",
    }
    assert len(flagged(audit, "table6_pooled_vs_backbone_mean")) == 6
    # Table 5 caption: A-MEM's lowest backbone macro-F1 (GPT 0.491) still beats 0.478.
    r = row(audit, "text_t5_compressed_do_not", "a-mem lowest backbone macro-F1")
    assert r.flagged and r.recomputed == pytest.approx(0.491)


def test_claim_record_rows_by_hand(tables, summary):
    ev = Evidence(tables, pf.accuracy_cube(tables), summary)
    # A mapping claim: one row per key the recomputation covers, in the mapping's order.
    keyed = Claim(
        "k", "§x", "cell {}", {"b": 2.0, "a": 1.0, "zz": 9.0},
        lambda ev: pd.Series({"a": 1.4, "b": 2.0}), 0.5, "pp",
    )  # fmt: skip
    out = claim_rows(keyed, ev)
    assert out["item"].tolist() == ["cell b", "cell a"]
    assert out["diff"].tolist() == pytest.approx([0.0, -0.4])
    assert not out["flagged"].any()
    # Items from the recomputation's index; a note returned with the values wins; a claimed
    # value read from the tables (a callable).
    found = Claim(
        "f", "§y", None, lambda ev: 3.0,
        lambda ev: Ours(pd.Series([2.0, 3.7], index=["p", "q"]), ["n1", "n2"]), 0.5, "pp",
        relation="<=",
    )  # fmt: skip
    out = claim_rows(found, ev)
    assert out["item"].tolist() == ["p", "q"] and out["note"].tolist() == ["n1", "n2"]
    assert out["size"].tolist() == pytest.approx([0.0, 0.7])
    assert out["flagged"].tolist() == [False, True]


def test_text_claims_one_loop_finds_planted_claim_error(tables, summary):
    # Every claim record yields rows, and the rows are the records' rows in order.
    out = pf.audit_text_claims(tables, summary)
    assert list(dict.fromkeys(out["check"])) == list(dict.fromkeys(c.check for c in pf.CLAIMS))
    # Planted: Table 4 prints Haiku x full-context at $27.76; the text says $25.76.
    t4 = tables[4].copy()
    hit = t4["strategy"].eq(FULL) & t4["backbone"].eq(HK) & t4["metric"].eq("cost_usd")
    t4.loc[hit, "value"] = 27.76
    bad = pf.audit_text_claims({**tables, 4: t4}, summary)
    r = row(bad, "text_cost_vs_table4", "full-context × claude-haiku-4.5 ($25.76)")
    assert r.flagged and r["diff"] == pytest.approx(-2.0)


def test_real_audit_overview_and_discrepancies(audit):
    over = pf.audit_overview(audit)
    assert list(over.columns) == ["check", "source", "n_checked", "n_flagged", "max_size", "unit"]
    assert over["n_checked"].sum() == len(audit)
    assert over["n_flagged"].sum() == int(audit["flagged"].sum())
    found = pf.discrepancies(audit)
    assert found["flagged"].all() and len(found) == int(audit["flagged"].sum())
    first = found[found["check"] == "table1_pooled_vs_table14"]["size"].to_numpy()
    assert (np.diff(first) <= 0).all()  # largest first within a check
    with pytest.raises(PaperFiguresError, match="lacks"):
        pf.discrepancies(audit.drop(columns="size"))


def test_real_implied_weights(tables):
    out = pf.implied_pool_weights(tables)
    # with the stated sizes the residual is the largest |printed - recomputed| pooled gap
    assert out["stated_max_residual_pp"] == pytest.approx(_pooled_by_hand(tables)[1].abs().max())
    assert out["max_residual_pp"] < 0.5  # some weighting reproduces the printed row
    w = np.array([out["weights"][t]["implied_n"] for t in TASKS])
    assert (w >= -1e-9).all() and w.sum() == pytest.approx(6271)
    # independent check of the claimed residual with plain numpy
    t14 = tables[14].pivot_table(index=["strategy", "backbone"], columns="task", values="value")
    t1 = tables[1][tables[1]["task"] == "pooled"].set_index(["strategy", "backbone"])["value"]
    resid = np.abs(100 * t14[list(TASKS)].to_numpy() @ (w / w.sum()) - t1.reindex(t14.index))
    assert resid.max() == pytest.approx(out["max_residual_pp"], abs=1e-6)


def test_sp2_gaps_and_lift_table(summary, tables):
    sp2 = pf.sp2_gaps(summary)
    assert len(sp2) == 12 and set(sp2["version"]) == set(pf.SP2_VERSIONS)
    hk = sp2[(sp2["backbone"] == HK)].set_index("version")["gap_pp"]
    assert hk["text §5.3"] == pytest.approx(62.7)
    sn = sp2[(sp2["backbone"] == SN)].set_index("version")["gap_pp"]
    assert sn["text §5.3"] == pytest.approx(49.6)  # as printed, not 69.8 - 20.3 = 49.5
    assert hk["Table 1 Pool."] == pytest.approx(63.0)  # 71 - 8
    mine, _ = _pooled_by_hand(tables)  # full minus blind, both recomputed from Table 14
    assert hk["recomputed from Table 14"] == pytest.approx(mine[(FULL, HK)] - mine[(BLIND, HK)])
    lift = pf.lift_table(tables)
    assert len(lift) == 120 and lift["recomputed_pp"].notna().all()
    # Table 2 full x GPT T2 printed -8; Table 14 0.255 - 0.333 = -7.8
    r = lift[(lift.regime == FULL) & (lift.backbone == GPT) & (lift.task == "T2")].iloc[0]
    assert (r.printed_pp, r.recomputed_pp) == (-8, pytest.approx(-7.8))


def test_t9_breakdown(tables):
    t9 = pf.t9_breakdown(tables)
    assert len(t9) == 8 * 3
    wide = t9.pivot(index="strategy", columns="outcome", values="share")
    assert np.allclose(wide.sum(axis=1), 1.0)
    # Table 8 line 573: structured-timeline strict 0.535, lenient 0.791
    st = wide.loc["structured-timeline"]
    assert st["correct_abstain"] == pytest.approx(0.535)
    assert st["rescued_lenient"] == pytest.approx(0.256)
    assert st["not_abstained"] == pytest.approx(0.209)
    assert len(pf.T9_UNSUPPORTED) >= 3


# --- charts -------------------------------------------------------------------------------------


def _data(chart, parent=None) -> pd.DataFrame:
    """A chart's own data, else the data its layer parent hoisted (altair moves shared data up)."""
    data = chart.data if isinstance(chart.data, pd.DataFrame) else getattr(parent, "data", None)
    assert isinstance(data, pd.DataFrame)
    return data


def test_chart_builders_carry_the_expected_rows(tables, summary):
    cube = pf.accuracy_cube(tables)
    assert len(cube) == 288
    assert cube[["strategy", "backbone", "task"]].iloc[0].tolist() == [BLIND, DS, "T1"]
    assert (cube["table1_percent"] - 100 * cube["accuracy"]).abs().max() <= 0.55

    heat = pf.heatmap_chart(cube)
    assert isinstance(heat, alt.FacetChart) and len(_data(heat)) == 288
    spec = heat.to_dict()
    assert spec["facet"]["column"]["field"] == "backbone"

    lift = pf.lift_chart(pf.lift_table(tables))
    assert len(_data(lift)) == 120
    recomputed = pf.lift_chart(pf.lift_table(tables), values="recomputed_pp")
    assert _data(recomputed)["lift_pp"].iloc[0] == pytest.approx(80.6)  # .806 - .000
    with pytest.raises(PaperFiguresError, match="printed_pp or recomputed_pp"):
        pf.lift_chart(pf.lift_table(tables), values="x")

    bars = pf.bottleneck_bars_chart(cube)
    assert [len(_data(p.layer[0], p)) for p in bars.hconcat] == [32, 32]
    assert len(bars.hconcat[0].layer) == 1 and len(bars.hconcat[1].layer) == 2  # T6 0.5 rule

    t9 = pf.t9_chart(pf.t9_breakdown(tables), cube)
    assert [len(_data(p)) for p in t9.hconcat] == [24, 32]

    for version in ("reported", "recomputed"):
        chart = pf.pareto_chart(summary, version)
        line, rings, points, labels = chart.layer
        assert len(_data(points, chart)) == 32
        assert len(_data(line, chart)) == 11 and len(_data(rings, chart)) == 11
        assert _data(points, chart)["pooled"].tolist() == summary[f"{version}_pooled"].tolist()
        assert len(_data(labels, chart)) == 2
        assert points.to_dict()["encoding"]["x"]["scale"]["type"] == "log"
    with pytest.raises(PaperFiguresError, match="reported or recomputed"):
        pf.pareto_chart(summary, "printed")

    sp2 = pf.sp2_chart(pf.sp2_gaps(summary))
    assert len(_data(sp2)) == 12
    pool = pf.pool_diff_chart(summary)
    assert len(_data(pool)) == 32

    fig = pf.compose([[heat], [lift, pf.pareto_chart(summary)], [sp2, pool]], title="t")
    assert isinstance(fig, alt.VConcatChart) and len(fig.vconcat) == 3
    assert fig.to_dict()["resolve"]["scale"]["color"] == "independent"
    with pytest.raises(PaperFiguresError, match="non-empty"):
        pf.compose([[]])


# --- JSON summary -------------------------------------------------------------------------------


def test_summary_json_has_documented_keys(tables, audit, tmp_path):
    out = pf.build_summary(tables, audit)
    assert tuple(out) == pf.SUMMARY_KEYS
    assert len(out["cells"]) == 32
    cell = out["cells"][0]
    for key in (
        "strategy",
        "backbone",
        "reported_pooled",
        "recomputed_pooled",
        "reported_macro",
        "recomputed_macro",
        "pareto_reported",
        "pareto_recomputed",
        "cost_usd",
    ):
        assert key in cell
    assert cell["reported_delta_blind"] is None  # the blind cell's printed dash
    assert out["frontier"]["reported"]["size"] == 11
    assert len(out["discrepancies"]) == int(audit["flagged"].sum())
    assert set(out["discrepancies"][0]) == set(pf.AUDIT_COLUMNS)
    assert out["lift"]["n_cells"] == 120 and out["lift"]["n_flagged"] == 0

    path = pf.write_summary(out, tmp_path / "sub" / "12_paper_summary.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(out))
    assert [p.name for p in path.parent.iterdir()] == ["12_paper_summary.json"]  # no temp left
    with pytest.raises(PaperFiguresError, match="lacks keys"):
        pf.write_summary({"cells": []}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_summary_rows_is_the_single_arithmetic(tables):
    # paper.recompute_pooled_macro delegates to metrics.summary_rows: same numbers in percent.
    t1 = tables[1]
    rec = recompute_pooled_macro(t1).query("task == 'macro'").set_index(["strategy", "backbone"])
    per_task = t1[t1["task"].isin(TASKS)].assign(accuracy=lambda d: d["value"] / 100)
    direct = metrics.summary_rows(per_task, task_n=TASK_N).set_index(["strategy", "backbone"])
    assert np.allclose(rec["value"].reindex(direct.index), 100 * direct["macro"], atol=1e-9)
