"""Tests for clinlib.analysis.figures: pure builders on hand-built frames."""

from __future__ import annotations

import altair as alt
import pandas as pd
import pytest

from clinlib.analysis import figures as af
from clinlib.analysis import metrics, paper


def _preds(rows):
    cols = ["qid", "task", "strategy", "backbone", "setting", "correct"]
    return pd.DataFrame(rows, columns=cols)


def test_post_setting_filters_and_errors():
    df = _preds([("q1", "T3", "full-context", "reference", "pre", True),
                 ("q1", "T3", "full-context", "reference", "post", False)])  # fmt: skip
    assert af.post_setting(df)["setting"].tolist() == ["post"]
    with pytest.raises(af.AnalysisInputError, match="no 'post' rows"):
        af.post_setting(df[df["setting"] == "pre"])
    with pytest.raises(ValueError, match="lacks column"):
        af.post_setting(df.drop(columns="setting"))


def test_mcnemar_vs_full_counts_discordant_pairs_and_holm():
    # full-context right on q1..q6; last-visit right on q1 only; blind right on q1..q5 and q7.
    rows = []
    for i in range(1, 8):
        q = f"q{i}"
        rows.append((q, "T1", "full-context", "reference", "post", i <= 6))
        rows.append((q, "T1", "last-visit-only", "reference", "post", i == 1))
        rows.append((q, "T1", "no-context-blind", "reference", "post", i <= 5 or i == 7))
    out = af.mcnemar_vs_full(_preds(rows)).set_index("strategy")
    lv, bl = out.loc["last-visit-only"], out.loc["no-context-blind"]
    assert (lv["b"], lv["c"], lv["n"]) == (5, 0, 7)
    assert (bl["b"], bl["c"]) == (1, 1)
    # exact binomial: 2 * 0.5**5 = 0.0625; b = c = 1 -> p = 1.
    assert lv["p_value"] == pytest.approx(0.0625)
    assert bl["p_value"] == pytest.approx(1.0)
    # Holm with m = 2: smallest p doubled.
    assert lv["p_adj"] == pytest.approx(0.125)
    assert lv["acc_reference"] == pytest.approx(6 / 7) and lv["acc_strategy"] == pytest.approx(
        1 / 7
    )


def test_mcnemar_vs_full_counts_a_t3_question_once():
    # T3 q1 is answered in both settings; only the post row is paired (it was counted twice).
    rows = [
        ("q1", "T3", s, "reference", setting, ok)
        for setting in ("post", "pre")
        for s, ok in (("full-context", True), ("last-visit-only", False))
    ]
    rows += [("q2", "T1", "full-context", "reference", "post", True),
             ("q2", "T1", "last-visit-only", "reference", "post", False)]  # fmt: skip
    row = af.mcnemar_vs_full(_preds(rows)).iloc[0]
    assert (row["n"], row["b"], row["c"]) == (2, 2, 0)


def test_mcnemar_vs_full_with_patient_clusters():
    # Six questions of two patients; full-context right everywhere, last-visit wrong on the
    # three questions of patient 1: McNemar b = 3 (p = 0.25), sign flip over 1 patient p = 1.
    rows = []
    for i in range(6):
        rows.append((f"q{i}", "T1", "full-context", "reference", "post", True))
        rows.append((f"q{i}", "T1", "last-visit-only", "reference", "post", i >= 3))
    qs = pd.DataFrame({"qid": [f"q{i}" for i in range(6)],
                       "subject_ids": [[1]] * 3 + [[2]] * 3})  # fmt: skip
    row = af.mcnemar_vs_full(_preds(rows), questions=qs).iloc[0]
    assert (row["b"], row["c"], row["p_value"]) == (3, 0, pytest.approx(0.25))
    assert (row["n_clusters"], row["clusters_discordant"]) == (2, 1)
    assert row["p_cluster"] == pytest.approx(1.0) and not row["survives"]


def test_mcnemar_vs_full_needs_reference():
    rows = [("q1", "T1", "last-visit-only", "eager", "post", True),
            ("q1", "T1", "no-context-blind", "eager", "post", False)]  # fmt: skip
    with pytest.raises(af.AnalysisInputError, match="no 'full-context' rows"):
        af.mcnemar_vs_full(_preds(rows))


def _summary():
    return pd.DataFrame({
        "strategy": ["no-context-blind", "full-context", "no-context-blind", "full-context"],
        "backbone": ["reference", "reference", "eager", "eager"],
        "pooled": [0.10, 0.95, 0.30, 0.90],
        "macro": [0.12, 0.93, 0.28, 0.91],
    })  # fmt: skip


def test_blind_full_gap_by_hand():
    out = af.blind_full_gap(_summary()).set_index("backbone")
    assert out.loc["reference", "gap_pp"] == pytest.approx(85.0)
    assert out.loc["eager", "gap_pp"] == pytest.approx(60.0)
    assert set(out["source"]) == {"kit"}
    with pytest.raises(af.AnalysisInputError, match="full-context"):
        af.blind_full_gap(_summary().iloc[[0, 2]])
    chart = af.gap_chart(out.reset_index())
    assert isinstance(chart, alt.LayerChart)
    chart.to_dict()


def test_lift_wide_matches_context_lift_in_pp():
    per_task = pd.DataFrame({
        "strategy": ["no-context-blind"] * 2 + ["full-context"] * 2,
        "backbone": ["reference"] * 4,
        "task": ["T1", "T2"] * 2,
        "accuracy": [0.0, 0.5, 1.0, 0.75],
    })  # fmt: skip
    wide = af.lift_wide(metrics.context_lift(per_task)).set_index(["regime", "backbone"])
    row = wide.loc[("full-context", "reference")]
    assert row["T1"] == 100.0 and row["T2"] == 25.0 and row["macro"] == 62.5


def test_paper_lift_wide_reads_table2():
    wide = af.paper_lift_wide(paper.load_table(2)).set_index(["regime", "backbone"])
    assert wide.shape == (12, 10)
    # First printed cell of Table 2: full-context x DeepSeek T1 = +81 pp.
    assert wide.loc[("full-context", "deepseek-chat-v3.1"), "T1"] == 81


def test_skewed_f1_adds_majority_baseline():
    questions = pd.DataFrame({
        "qid": ["a", "b", "c", "d"], "task": ["T5"] * 4,
        "gold": ["no", "no", "no", "yes"],
    })  # fmt: skip
    preds = pd.DataFrame({
        "qid": ["a", "b", "c", "d"], "task": ["T5"] * 4,
        "strategy": ["full-context"] * 4, "backbone": ["eager"] * 4,
        "parsed": ["no", "no", "yes", "yes"],
    })  # fmt: skip
    out = af.skewed_f1(preds, questions, tasks=["T5"]).iloc[0]
    # F1(no) = 2*2/(2*2+0+1) = 0.8; F1(yes) = 2*1/(2+1+0) = 2/3.
    assert out["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2)
    assert out["accuracy"] == pytest.approx(0.75)
    # Majority "no": accuracy 3/4; F1(no) = 6/7, F1(yes) = 0.
    assert out["majority_accuracy"] == pytest.approx(0.75)
    assert out["majority_macro_f1"] == pytest.approx(3 / 7)


def _t9_preds():
    return pd.DataFrame({
        "qid": ["a", "b", "c", "d"] * 2,
        "task": ["T9"] * 8,
        "strategy": ["full-context"] * 4 + ["no-context-blind"] * 4,
        "backbone": ["reference"] * 8,
        "setting": ["post"] * 8,
        "response": ["insufficient information", "Not documented in the dialogue.",
                     "4.2 mg/dL", "", "insufficient information",
                     "insufficient information", "maybe", "insufficient information"],
        "correct": [True, False, False, False, True, True, False, True],
        "correct_lenient": [True, True, False, False, True, True, False, True],
        "context_tokens": [100, 100, 300, 100, 0, 0, 0, 0],
    })  # fmt: skip


def test_t9_long_and_abstention_vs_context():
    preds = _t9_preds()
    decomp = metrics.t9_decomposition(preds)
    long = af.t9_long(decomp)
    assert len(long) == 2 * len(metrics.T9_CATEGORIES)
    full = long[long["strategy"] == "full-context"].set_index("outcome")["count"]
    assert full.to_dict() == {"correct_abstain": 1, "rescued_lenient": 1, "parser_missed": 0,
                              "over_answer": 1, "empty": 1}  # fmt: skip
    af.t9_chart(long).to_dict()
    ctx = af.abstention_vs_context(preds, decomp).set_index("strategy")
    assert ctx.loc["full-context", "mean_context_tokens"] == 150.0
    assert ctx.loc["no-context-blind", "rank_context"] == 1
    assert ctx.loc["full-context", "abstention_total"] == pytest.approx(0.5)
    assert ctx["monotone"].all()  # two points are always monotone


def test_abstention_monotone_flag_detects_a_dip():
    decomp = pd.DataFrame({
        "strategy": ["a", "b", "c"], "backbone": ["r"] * 3,
        "abstention_total": [0.2, 0.9, 0.5],
    })  # fmt: skip
    preds = pd.DataFrame({
        "strategy": ["a", "b", "c"], "backbone": ["r"] * 3, "task": ["T9"] * 3,
        "context_tokens": [10, 20, 30],
    })  # fmt: skip
    out = af.abstention_vs_context(preds, decomp)
    assert not out["monotone"].any()
    assert out["max_reversal"].iloc[0] == pytest.approx(0.4)  # min(drop 0.4, rise 0.7)
    assert out["strategy"].tolist() == ["a", "b", "c"]


def test_abstention_monotone_tolerates_a_small_reversal():
    # One wrong answer in 1,500 (a 1/1500 dip) stays monotone at the 1 pp tolerance; a 2 pp
    # dip does not; tol=0 restores the strict test.
    preds = pd.DataFrame({
        "strategy": ["a", "b", "c"], "backbone": ["r"] * 3, "task": ["T9"] * 3,
        "context_tokens": [10, 20, 30],
    })  # fmt: skip
    for dip, tol, expect in ((1 / 1500, af.MONOTONE_TOL, True), (0.02, af.MONOTONE_TOL, False),
                             (1 / 1500, 0.0, False)):  # fmt: skip
        decomp = pd.DataFrame({"strategy": ["a", "b", "c"], "backbone": ["r"] * 3,
                               "abstention_total": [0.5, 0.9, 0.9 - dip]})  # fmt: skip
        out = af.abstention_vs_context(preds, decomp, tol=tol)
        assert out["monotone"].all() == expect
        assert out["max_reversal"].iloc[0] == pytest.approx(dip)
    assert af.max_reversal([0.3, 0.2, 0.25, 0.1]) == pytest.approx(0.05)
    assert af.max_reversal([1.0]) == 0.0


def test_parser_table_puts_paper_beside_kit():
    kit = metrics.strict_vs_lenient(_t9_preds(), by=("task", "strategy", "backbone"))
    out = af.parser_table(kit, paper.load_table(8), paper.load_table(9))
    row = out[(out["task"] == "T9") & (out["strategy"] == "full-context")].set_index("source")
    assert row.loc["reference", "strict"] == 0.25 and row.loc["reference", "lenient"] == 0.5
    assert row.loc["paper (pooled LLMs)", "strict"] == pytest.approx(0.763)
    assert row.loc["paper (pooled LLMs)", "delta"] == pytest.approx(0.075)


def test_estimated_cells_sums_settings_and_finds_frontier():
    est = pd.DataFrame({
        "strategy": ["full-context", "full-context", "full-context", "no-context-blind"],
        "backbone": ["gpt-4o-mini", "gpt-4o-mini", "claude-sonnet-4.6", "gpt-4o-mini"],
        "setting": ["post", "pre", "post", "post"],
        "questions": [10, 2, 10, 10],
        "input_tokens": [1000, 200, 1100, 50],
        "output_tokens_typical": [30, 4, 31, 30],
        "cost_usd_typical": [0.5, 0.1, 5.0, 0.01],
    })  # fmt: skip
    acc = pd.DataFrame({"strategy": ["full-context", "no-context-blind"], "pooled": [0.9, 0.2]})
    out = af.estimated_cells(est, acc).set_index(["strategy", "backbone"])
    mini = out.loc[("full-context", "gpt-4o-mini")]
    assert mini["cost_usd"] == pytest.approx(0.6) and mini["questions"] == 12
    assert mini["cost_per_question"] == pytest.approx(0.05)
    # Sonnet: same accuracy, dearer -> dominated; blind is cheapest -> on the frontier.
    assert out["pareto"].to_dict() == {
        ("full-context", "gpt-4o-mini"): True,
        ("full-context", "claude-sonnet-4.6"): False,
        ("no-context-blind", "gpt-4o-mini"): True,
    }
    af.pareto_chart(out.reset_index()).to_dict()
    with pytest.raises(af.AnalysisInputError, match="no accuracy for strategy 'no-context-blind'"):
        af.estimated_cells(est, acc.iloc[:1])


def test_heatmap_and_tax_charts_build():
    preds = _preds([(f"q{i}", t, s, "reference", "post", (i + len(s)) % 2 == 0)
                    for i in range(4) for t in ("T2", "T6", "T8")
                    for s in ("full-context", "no-context-blind")])  # fmt: skip
    acc = metrics.accuracy_table(preds)
    spec = af.accuracy_heatmap_chart(acc).to_dict()
    assert spec["facet"]["column"]["field"] == "backbone"
    af.aggregation_tax_chart(acc).to_dict()
    with pytest.raises(af.AnalysisInputError, match="no rows for tasks"):
        af.aggregation_tax_chart(acc, tasks=["T1"])
