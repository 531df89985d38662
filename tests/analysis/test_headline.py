"""clinlib.analysis.headline: the checks that end every notebook hold on right tables and fail
on the wrong ones (values worked out by hand; Holm by hand and by statsmodels)."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis import headline
from clinlib.analysis.metrics import accuracy_table
from clinlib.analysis.stats.question import holm_bonferroni
from clinlib.core.prose import Claim, ClaimFailed


def _preds() -> pd.DataFrame:
    # reference: full-context 3/4 right on T1, 2/2 on T2; blind 0/4 and 1/2 -> pooled 5/6 vs 1/6
    rows = [
        ("full-context", "T1", [True, True, True, False]),
        ("full-context", "T2", [True, True]),
        ("no-context-blind", "T1", [False] * 4),
        ("no-context-blind", "T2", [True, False]),
    ]
    return pd.DataFrame(
        [
            {"strategy": s, "backbone": "reference", "task": t, "correct": c}
            for s, t, cs in rows
            for c in cs
        ]  # fmt: skip
    )


def test_accuracy_checks_hold_on_accuracy_table():
    preds = _preds()
    acc = accuracy_table(preds)
    claims = headline.accuracy_checks(acc, preds)
    assert [c.holds for c in claims] == [True, True]
    assert claims[1].value == pytest.approx(5 / 6 - 1 / 6)  # pooled full - pooled blind


def test_pooled_weights_tasks_by_their_size():
    acc = accuracy_table(_preds())
    got = headline.pooled(acc, "reference")
    assert got["full-context"] == pytest.approx(5 / 6)  # not the task mean (0.75 + 1) / 2
    assert got["no-context-blind"] == pytest.approx(1 / 6)


def test_accuracy_checks_fail_on_one_minus_accuracy():
    preds = _preds()
    acc = accuracy_table(preds).assign(accuracy=lambda d: 1 - d["accuracy"])
    with pytest.raises(ClaimFailed, match="plain recount"):
        headline.accuracy_checks(acc, preds)


def test_full_context_not_above_blind_fails():
    preds = _preds()
    flipped = preds.assign(
        strategy=preds["strategy"].map(
            {"full-context": "no-context-blind", "no-context-blind": "full-context"}
        )  # fmt: skip
    )
    with pytest.raises(ClaimFailed, match="full-context pooled accuracy minus"):
        headline.accuracy_checks(accuracy_table(flipped), flipped)


def test_a_missing_cell_counts_as_a_gap():
    preds = _preds()
    acc = accuracy_table(preds).iloc[1:]  # one cell lost
    with pytest.raises(ClaimFailed, match="plain recount"):
        headline.accuracy_checks(acc, preds, backbone=None)


def test_holm_checks_against_statsmodels_and_by_hand():
    # one family per backbone. a: p = .01, .04, .03 -> sorted .01, .03, .04 times 3, 2, 1 ->
    # .03, .06, .04 -> running max .03, .06, .06; b: a family of one keeps its p
    tests = pd.DataFrame({"backbone": ["a", "a", "a", "b"], "p_value": [0.01, 0.04, 0.03, 0.2]})
    tests["p_adj"] = pd.concat(
        [holm_bonferroni(g["p_value"])["p_adj"] for _, g in tests.groupby("backbone")]
    )
    assert tests["p_adj"].tolist() == pytest.approx([0.03, 0.06, 0.06, 0.2])
    [ok] = headline.holm_checks(tests, ["backbone"])
    assert ok.holds
    with pytest.raises(ClaimFailed, match="Holm"):
        headline.holm_checks(tests.assign(p_adj=0.0), ["backbone"])
    # Holm over the pooled family (m = 4) is not Holm per backbone
    pooled_family = tests.assign(p_adj=holm_bonferroni(tests["p_value"])["p_adj"])
    with pytest.raises(ClaimFailed):
        headline.holm_checks(pooled_family, ["backbone"])
    # no family columns: the whole table is one family (m = 4: .01, .03, .04, .2 times 4, 3,
    # 2, 1 -> .04, .09, .08, .2 -> running max .04, .09, .09, .2), as notebook 11's sweeps
    assert pooled_family["p_adj"].tolist() == pytest.approx([0.04, 0.09, 0.09, 0.2])
    [ok] = headline.holm_checks(pooled_family, [])
    assert ok.holds
    with pytest.raises(ClaimFailed, match="Holm"):
        headline.holm_checks(tests, [])  # per-backbone Holm is not the one-family Holm


def _gates(**changes) -> pd.DataFrame:
    rows = [
        # L1 fails below 1 %: 1 of 101 (0.99 %) passes; L2 below 0.5 %: 1 of 200 (0.5 %) fails
        {"gate": "L1", "task": "T1", "n_checked": 101, "n_failed": 1, "passed": True, "severity": "hard"},
        {"gate": "L2", "task": "T1", "n_checked": 200, "n_failed": 1, "passed": False, "severity": "soft"},
        {"gate": "L0", "task": "T1", "n_checked": 10, "n_failed": 0, "passed": True, "severity": "hard"},
    ]  # fmt: skip
    frame = pd.DataFrame(rows)
    for col, value in changes.items():
        frame.loc[0, col] = value
    return frame


def test_gate_checks():
    assert all(c.holds for c in headline.gate_checks(_gates()))
    with pytest.raises(ClaimFailed, match="hard gates that fail"):
        headline.gate_checks(_gates(passed=False))
    # a verdict that contradicts the counts: 2 of 101 (1.98 %) is not below 1 %
    with pytest.raises(ClaimFailed, match="disagrees"):
        headline.gate_checks(_gates(n_failed=2))


def test_cohort_checks():
    attrition = pd.DataFrame({"step_idx": [0, 1, 2], "n_patients": [10, 6, 2]})
    cohort = pd.DataFrame({"subject_id": [1, 2]})
    events = pd.DataFrame({"subject_id": [1, 1, 2]})
    assert all(c.holds for c in headline.cohort_checks(attrition, cohort, events))
    with pytest.raises(ClaimFailed, match="add patients"):
        headline.cohort_checks(attrition.assign(n_patients=[10, 11, 2]), cohort, events)
    with pytest.raises(ClaimFailed, match="last attrition step"):
        headline.cohort_checks(attrition, cohort.iloc[:1], events.iloc[:2])
    with pytest.raises(ClaimFailed, match="outside the cohort"):
        headline.cohort_checks(attrition, cohort, pd.DataFrame({"subject_id": [1, 3]}))


def test_dialogue_checks():
    summary = pd.DataFrame({"subject_id": [1, 2], "kept": [True, False], "n_covered": [2, 0]})
    checks = pd.DataFrame({"subject_id": [1, 2], "severity": ["hard", "hard"],
                           "passed": [True, False]})  # fmt: skip
    coverage = pd.DataFrame({"subject_id": [1, 1, 1, 2], "status": ["covered", "covered",
                                                                    "missed", "covered"]})  # fmt: skip
    assert all(c.holds for c in headline.dialogue_checks(summary, checks, coverage))
    with pytest.raises(ClaimFailed, match="failing a HARD check"):
        headline.dialogue_checks(summary, checks.assign(passed=[False, False]), coverage)
    with pytest.raises(ClaimFailed, match="covered count"):
        headline.dialogue_checks(summary.assign(n_covered=[3, 0]), checks, coverage)
    with pytest.raises(ClaimFailed, match="kept dialogues"):
        headline.dialogue_checks(summary.assign(kept=False), checks, coverage)


def test_pooled_checks():
    preds = pd.concat([_preds(), _preds().assign(backbone="eager", correct=True)])
    summary = pd.DataFrame({"strategy": ["full-context", "no-context-blind"] * 2,
                            "backbone": ["reference"] * 2 + ["eager"] * 2,
                            "pooled": [5 / 6, 1 / 6, 1.0, 1.0]})  # fmt: skip
    assert headline.pooled_checks(summary, preds)[0].holds
    with pytest.raises(ClaimFailed, match="pooled accuracy equals a recount"):
        headline.pooled_checks(summary.assign(pooled=[1 / 6, 5 / 6, 1, 1]), preds)


def test_paper_pooled_checks():
    # two tasks of sizes 3 and 1: cells 40 % and 80 % -> pooled (3 * .4 + .8) / 4 = .5, macro .6
    t1 = pd.DataFrame({"strategy": "s", "backbone": "b", "task": ["T1", "T2", "pooled", "macro"],
                       "metric": "accuracy", "value": [40.0, 80.0, 50.0, 60.0]})  # fmt: skip
    summary = pd.DataFrame({"strategy": ["s"], "backbone": ["b"], "reported_pooled": [0.5],
                            "reported_macro": [0.6], "table1_cells_pooled": [0.5],
                            "table1_cells_macro": [0.6]})  # fmt: skip
    assert all(c.holds for c in headline.paper_pooled_checks(summary, t1, ["3", "1"]))
    with pytest.raises(ClaimFailed, match="size-weighted"):
        headline.paper_pooled_checks(summary.assign(table1_cells_pooled=0.6), t1, ["3", "1"])


@pytest.mark.parametrize("env", ["", "0"])
def test_require_local_skipped_says_skipped_and_claims_nothing(monkeypatch, env):
    monkeypatch.setenv(headline.REQUIRE_LOCAL_ENV, env)
    (note,) = headline.require_local(False, "no server")
    assert not isinstance(note, Claim)
    assert note.startswith("**Skipped**") and "no server" in note and "ran" not in note


def test_require_local_required_but_skipped_fails(monkeypatch):
    monkeypatch.setenv(headline.REQUIRE_LOCAL_ENV, "1")
    with pytest.raises(ClaimFailed, match="no server"):
        headline.require_local(False, "no server")


def test_require_local_ran_claims_rows_and_fails_on_none(monkeypatch):
    monkeypatch.setenv(headline.REQUIRE_LOCAL_ENV, "1")
    (c,) = headline.require_local(True, "", produced=3)
    assert c.holds and c.value == 3 and c.counterexample == 0  # 0 rows would break it
    with pytest.raises(ClaimFailed, match="rows it produced"):
        headline.require_local(True, "", produced=0)


def _hits() -> tuple[pd.DataFrame, pd.DataFrame]:
    # ranks 1, 2, 4 on T1 and 3 on T2: hit@1 = 1/3 (T1), 0 (T2), 1/4 overall;
    # hit@3 = 2/3, 1, 3/4
    hits = pd.DataFrame({"strategy": "dense-retrieval", "task": ["T1", "T1", "T1", "T2"],
                         "rank": [1, 2, 4, 3]})  # fmt: skip
    rates = pd.DataFrame({"strategy": "dense-retrieval", "task": ["T1", "T2", "overall"],
                          "hit@1": [1 / 3, 0.0, 0.25], "hit@3": [2 / 3, 1.0, 0.75]})  # fmt: skip
    return hits, rates


def test_hit_checks():
    hits, rates = _hits()
    assert all(c.holds for c in headline.hit_checks(hits, rates))
    with pytest.raises(ClaimFailed, match="recount of the anchor ranks"):
        headline.hit_checks(hits, rates.assign(**{"hit@1": [1 / 3, 0.0, 1 / 6]}))
    swapped = rates.rename(columns={"hit@1": "hit@3", "hit@3": "hit@1"})
    with pytest.raises(ClaimFailed):
        headline.hit_checks(hits, swapped)


def test_streaming_checks():
    fes = pd.DataFrame({"strategy": ["mem0"], "accuracy_final": [0.5], "accuracy_static": [0.5]})
    assert all(c.holds for c in headline.streaming_checks(fes))
    with pytest.raises(ClaimFailed, match="final-checkpoint accuracy minus static"):
        headline.streaming_checks(fes.assign(accuracy_final=0.4))
    with pytest.raises(ClaimFailed, match="cells compared"):
        headline.streaming_checks(fes.iloc[:0])
