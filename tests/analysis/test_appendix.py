"""Appendix diagnostics (clinlib.analysis.appendix; paper Appendices B–G, issue 27) on
hand-built predictions whose rates and accuracies are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from clinlib.analysis.appendix import diagnostics as dg
from clinlib.analysis.appendix import memory_size as ms
from clinlib.analysis.appendix import sensitivity as se
from clinlib.analysis.appendix import subtypes as st
from clinlib.analysis.metrics import MetricsInputError


def _row(qid, task, subtype, correct, *, strategy="full-context", backbone="b1", response="x",
         parsed=None, empty=False, error=None, finish="stop", out=5, lenient=None,
         setting="post", latency=0.1):  # fmt: skip
    return {
        "qid": qid, "task": task, "subtype": subtype, "strategy": strategy,
        "backbone": backbone, "prep_model": "rule-based", "setting": setting,
        "response": response, "parsed": parsed if parsed is not None else response,
        "correct": correct, "correct_lenient": correct if lenient is None else lenient,
        "parse_failed": False, "empty": empty, "error": error, "finish_reason": finish,
        "output_tokens": out, "input_tokens": 100, "cached_tokens": 0, "cost_usd": 0.0,
        "latency_s": latency,
    }  # fmt: skip


def _questions(rows):
    seen = {}
    for r in rows:
        seen.setdefault(r["qid"], {"qid": r["qid"], "task": r["task"], "subtype": r["subtype"],
                                   "subject_ids": [r.get("sid", 1)], "disease": "ckd",
                                   "tertile": "low", "gold": r.get("gold", "g")})  # fmt: skip
    return pd.DataFrame(list(seen.values()))


# --- Figs 7-12 -------------------------------------------------------------------------------


def test_subtype_accuracy_counts_each_subtype():
    rows = [_row("a", "T1", "lab", True), _row("b", "T1", "lab", False),
            _row("c", "T1", "med", True), _row("d", "T1", "lab", True, strategy="mem0")]  # fmt: skip
    out = st.subtype_accuracy(pd.DataFrame(rows), tasks=["T1"]).set_index("subtype")
    assert out.loc["lab", "n"] == 2 and out.loc["lab", "accuracy"] == 0.5  # mem0 row left out
    assert out.loc["med", "accuracy"] == 1.0


def test_t5_families_collapse_controlled_subtypes():
    rows = [_row("a", "T5", "controlled_dx_presence", True),
            _row("b", "T5", "controlled_lab_value", False),
            _row("c", "T5", "controlled_control", True),
            _row("d", "T5", "natural_c2_lab_non_glucose", False)]  # fmt: skip
    out = st.t5_families(pd.DataFrame(rows)).set_index("family")
    assert out.loc["controlled", "n"] == 3 and out.loc["controlled", "k"] == 2
    assert out.loc["natural", "accuracy"] == 0.0


def test_t3_classes_keep_settings_apart():
    rows = [_row("a", "T3", "Y-admit", False), _row("a", "T3", "Y-admit", True, setting="pre"),
            _row("b", "T3", "N-er", True)]  # fmt: skip
    out = st.t3_classes(pd.DataFrame(rows)).set_index(["setting", "subtype"])
    assert out.loc[("post", "Y-admit"), "accuracy"] == 0.0
    assert out.loc[("pre", "Y-admit"), "accuracy"] == 1.0


def test_set_f1_by_hand():
    assert st.set_f1("LAB-1;LAB-2", "LAB-1;LAB-3") == pytest.approx(0.5)  # 2*1/(2+2)
    assert st.set_f1("lab-1", "LAB-1") == 1.0
    assert st.set_f1(None, "LAB-1") == 0.0
    assert st.set_f1("LAB-1;LAB-2;LAB-3", "LAB-1") == pytest.approx(0.5)  # 2*1/(3+1)


def test_t4_retrieval_pool_and_f1():
    rows = [dict(_row("a", "T4", "ckd", False, parsed="LAB-1;LAB-2"), gold="LAB-1;LAB-3"),
            dict(_row("b", "T4", "ckd", True, parsed="LAB-9"), gold="LAB-9"),
            dict(_row("c", "T4", "diabetes", False, parsed=None, response=None), gold="LAB-4")]  # fmt: skip
    preds = pd.DataFrame(rows).drop(columns="gold")
    out = st.t4_retrieval(preds, _questions(rows))
    assert out["pool"].set_index("subtype")["n"].to_dict() == {"ckd": 2, "diabetes": 1}
    full = out["full"].iloc[0]
    assert full["set_f1"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert full["accuracy"] == pytest.approx(1 / 3)


def test_t8_bins_counts_and_accuracy():
    rows = [_row("a", "T8", "L-", True), _row("b", "T8", "L-", False), _row("c", "T8", "S+", False)]
    out = st.t8_bins(pd.DataFrame(rows), _questions(rows))
    assert out["counts"].set_index("bin")["n"].to_dict() == {"L-": 2, "S+": 1}
    assert out["accuracy"].set_index("bin").loc["L-", "accuracy"] == 0.5


def test_t9_by_kind_rates():
    abst = "insufficient information"
    rows = [_row("a", "T9", "lab", True, response=abst),
            _row("b", "T9", "lab-unmeasured", False, response="Sodium was 140 mEq/L"),
            _row("c", "T9", "lab", False, response="The value was not recorded"),  # parser-missed
            _row("d", "T9", "lab", False, response=None, empty=True),
            _row("e", "T9", "other", False, response="yes")]  # fmt: skip
    out = st.t9_by_kind(pd.DataFrame(rows)).set_index("kind")
    lab = out.loc["lab"]
    assert lab["n"] == 4 and lab["accuracy"] == 0.25
    assert lab["abstention_rate"] == 0.5  # strict + parser-missed
    assert lab["over_answer_when_wrong"] == pytest.approx(1 / 3)  # 1 over-answer of 3 wrong
    assert out.loc["other", "over_answer_when_wrong"] == 1.0
    with pytest.raises(MetricsInputError, match="subtype"):
        st.t9_by_kind(pd.DataFrame([_row("z", "T9", "weird", True)]))


# --- D1-D8 -----------------------------------------------------------------------------------


def _diag_rows():
    return [
        _row("a", "T1", "s", True, out=3),
        _row("b", "T1", "s", False, response=None, empty=True, out=0),
        _row("c", "T1", "s", False, response=None, error="timeout", finish=None, out=0),
        _row("d", "T4", "s", False, finish="length", out=120),
        _row("e", "T4", "s", True, out=119),
        _row("f", "T4", "s", True, backbone="b2", out=10),
    ]


def test_empty_rate_d1():
    out = dg.empty_rate(pd.DataFrame(_diag_rows())).set_index("backbone")
    assert out.loc["b1", "n"] == 5 and out.loc["b1", "n_empty"] == 1
    assert out.loc["b1", "empty_rate"] == pytest.approx(0.2)
    assert out.loc["b1", "error_rate"] == pytest.approx(0.2)
    assert out.loc["b2", "empty_rate"] == 0.0


def test_empty_flags_without_the_harness_flag():
    df = pd.DataFrame(_diag_rows()).drop(columns="empty")
    assert dg.empty_flags(df).tolist() == [False, True, False, False, False, False]


def test_truncation_rate_d4_from_finish_reason():
    out = dg.truncation_rate(pd.DataFrame(_diag_rows())).set_index(["task", "backbone"])
    t4 = out.loc[("T4", "b1")]
    assert t4["n"] == 2 and t4["truncation_rate"] == 0.5
    assert t4["at_cap_rate"] == 1.0  # 120 and 119 are both >= 120 - 1
    assert t4["max_tokens"] == 120
    assert out.loc[("T1", "b1"), "n"] == 2  # the errored row is not an answer


def test_output_lengths_d3_histogram():
    out = dg.output_lengths(pd.DataFrame(_diag_rows()), bin_width=4)
    t4 = out[(out["task"] == "T4") & (out["backbone"] == "b1")].set_index("bin_start")
    assert t4["n"].to_dict() == {116: 1, 120: 1}
    assert set(out["max_tokens"][out["task"] == "T1"]) == {60}


def test_patient_accuracy_and_spread_d5():
    rows = [dict(_row("a", "T1", "s", True), sid=1), dict(_row("b", "T1", "s", False), sid=1),
            dict(_row("c", "T1", "s", True), sid=2), dict(_row("d", "T1", "s", True), sid=3)]  # fmt: skip
    per = dg.patient_accuracy(pd.DataFrame(rows), _questions(rows))
    assert per.set_index("subject_id")["accuracy"].to_dict() == {1: 0.5, 2: 1.0, 3: 1.0}
    spread = dg.patient_spread(per).iloc[0]
    assert spread["median"] == 1.0 and spread["n_patients"] == 3
    assert spread["sd"] == pytest.approx(np.std([0.5, 1, 1], ddof=1))


def test_stratum_accuracy_d6_full_context_only():
    rows = [_row("a", "T1", "s", True), _row("b", "T2", "s", False),
            _row("c", "T1", "s", False, strategy="mem0")]  # fmt: skip
    q = _questions(rows).assign(disease=["ckd", "cad", "ckd"])
    out = dg.stratum_accuracy(pd.DataFrame(rows), "disease", q).set_index("disease")
    assert out["accuracy"].to_dict() == {"cad": 0.0, "ckd": 1.0}


def test_ci_widths_d8_against_a_hand_bootstrap():
    rows = [_row(str(i), "T1", "s", i % 3 == 0) for i in range(30)]
    out = dg.ci_widths(pd.DataFrame(rows), n_boot=200, seed=7).iloc[0]
    x = np.array([i % 3 == 0 for i in range(30)], float)
    rng = np.random.default_rng(7)
    means = x[rng.integers(0, 30, size=(200, 30))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    assert out["boot_width"] == pytest.approx(hi - lo, abs=0.07)
    assert 0 < out["boot_width"] < 1 and out["wilson_width"] > 0


# --- G.4, Table 13, empty sensitivity ----------------------------------------------------------


@pytest.mark.parametrize(("text", "kind"), [
    ("Sodium was 138 mEq/L on that day", "invented_value"),
    ("It was 4.2", "invented_value"),
    ("Yes.", "bare_yes_no"),
    ("no", "bare_yes_no"),
    ("The patient was seen on 2150-01-02 for LAB-11", "other"),
    ("The patient seemed well", "other"),
])  # fmt: skip
def test_overanswer_kind(text, kind):
    assert se.overanswer_kind(text) == kind


def test_overanswer_makeup_g4():
    rows = [_row("a", "T9", "lab", False, response="It was 140 mEq/L"),
            _row("b", "T9", "lab", False, response="Yes"),
            _row("c", "T9", "lab", False, response="Probably fine"),
            _row("d", "T9", "lab", False, response="It was not documented"),  # parser-missed
            _row("e", "T9", "lab", True, response="insufficient information")]  # fmt: skip
    out = se.overanswer_makeup(pd.DataFrame(rows)).iloc[0]
    assert (out["n_t9"], out["n_over_answer"], out["n_parser_missed"]) == (5, 3, 1)
    assert out["invented_value_share"] == pytest.approx(1 / 3)
    assert out["bare_yes_no"] == 1 and out["other"] == 1


def test_macro_ablation_table13_by_hand():
    rows = []
    # backbone b1: T3 1.0, T5 0.0, T1 0.5 ; backbone b2: T3 0.0, T5 1.0, T1 1.0
    for bb, acc in (("b1", {"T1": [1, 0], "T3": [1], "T5": [0]}),
                    ("b2", {"T1": [1, 1], "T3": [0], "T5": [1]})):  # fmt: skip
        for task, flags in acc.items():
            rows += [_row(f"{bb}{task}{i}", task, "s", bool(f), backbone=bb)
                     for i, f in enumerate(flags)]  # fmt: skip
    out = se.macro_ablation(pd.DataFrame(rows)).set_index("task_subset")["macro_accuracy"]
    assert out["all"] == pytest.approx(((0.5 + 1 + 0) / 3 + (1 + 0 + 1) / 3) / 2)
    assert out["without_T3"] == pytest.approx(((0.5 + 0) / 2 + (1 + 1) / 2) / 2)
    assert out["without_T5_T8_T9"] == pytest.approx(((0.5 + 1) / 2 + (1 + 0) / 2) / 2)


def test_macro_ablation_beside_paper_drops():
    kit = pd.DataFrame({"strategy": ["s"] * 2, "task_subset": ["all", "without_T3"],
                        "macro_accuracy": [0.6, 0.5]})  # fmt: skip
    paper = pd.DataFrame({"strategy": ["s"] * 2, "task_subset": ["all", "without_T3"],
                          "value": [0.7, 0.75]})  # fmt: skip
    out = se.macro_ablation_beside_paper(kit, paper).set_index("task_subset")
    assert out.loc["without_T3", "kit_drop"] == pytest.approx(-0.1)
    assert out.loc["without_T3", "paper_drop"] == pytest.approx(0.05)


def test_empty_sensitivity_counted_vs_excluded():
    rows = [_row("a", "T1", "s", True), _row("b", "T1", "s", False),
            _row("c", "T1", "s", False, response=None, empty=True),
            _row("d", "T1", "s", True)]  # fmt: skip
    out = se.empty_sensitivity(pd.DataFrame(rows)).iloc[0]
    assert out["acc_counted"] == 0.5 and out["acc_excluded"] == pytest.approx(2 / 3)
    assert out["delta"] == pytest.approx(2 / 3 - 0.5)
    bad = pd.DataFrame([_row("x", "T1", "s", True, response=None, empty=True)])
    with pytest.raises(MetricsInputError, match="empty response is scored correct"):
        se.empty_sensitivity(bad)


# --- Fig. 15D ---------------------------------------------------------------------------------


def test_size_vs_accuracy_pearson_matches_scipy():
    sizes = {1: 100, 2: 250, 3: 400, 4: 150, 5: 600, 6: 320}
    acc = {1: [1, 1], 2: [1, 0], 3: [0, 0], 4: [1, 1, 0], 5: [0, 1], 6: [1, 0, 0, 0]}
    rows = [dict(_row(f"{s}-{i}", "T1", "s", bool(f), strategy="mem0"), sid=s)
            for s, flags in acc.items() for i, f in enumerate(flags)]  # fmt: skip
    rows.append(dict(_row("7-0", "T1", "s", True, strategy="mem0"), sid=7))  # no footprint
    fp = pd.DataFrame({"subject_id": list(sizes), "strategy": "mem0",
                       "memory_chars": list(sizes.values())})  # fmt: skip
    per = ms.size_vs_accuracy(fp, pd.DataFrame(rows), _questions(rows))
    assert per["subject_id"].tolist() == [1, 2, 3, 4, 5, 6]
    assert per.set_index("subject_id").loc[4, "accuracy"] == pytest.approx(2 / 3)
    r = ms.size_accuracy_r(per)
    ref = sps.pearsonr(per["size"], per["accuracy"])
    assert r.r == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)  # scipy's Fisher-z interval
    assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high))


# --- from the paper's printed tables (notebook 12) ---------------------------------------------


def test_fig16_cells_recompute_cost_per_question():
    from clinlib.analysis.appendix import from_paper as fp

    t4 = pd.DataFrame({"strategy": ["s", "s", "total"], "backbone": ["b", "b", "total"],
                       "metric": ["cost_usd", "cache_hit_rate", "cost_usd"],
                       "value": [0.19, 2.2, 527.87]})  # fmt: skip
    out = fp.fig16_cells(t4, n_questions=6271).set_index("metric")["value"]
    assert out["cost_per_question"] == pytest.approx(0.19 / 6271)  # ~$0.00003, Fig. 16's low end
    assert out["cache_hit_rate"] == 2.2 and len(out) == 2


def test_wilson_widths_match_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    from clinlib.analysis.appendix import from_paper as fp

    t14 = pd.DataFrame({"task": ["T4", "T1"], "strategy": "s", "backbone": "b",
                        "value": [0.132, 0.5], "n": [53, 1500]})  # fmt: skip
    out = fp.wilson_widths(t14)
    lo, hi = proportion_confint(7, 53, alpha=0.05, method="wilson")  # 0.132 x 53 = 7
    assert out.loc[0, "wilson_width"] == pytest.approx(hi - lo)
    assert out.loc[1, "wilson_width"] < out.loc[0, "wilson_width"]
    t4 = fp.t4_cells(t14)
    assert t4["t4_score"].tolist() == [0.132]
