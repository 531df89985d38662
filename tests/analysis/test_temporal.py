"""Temporal stratification (clinlib.analysis.temporal) on hand-built tables: anchor positions
worked out by hand, equal-width bins, Wilson intervals from the kit's own function, length
quartiles by rank and the longest-minus-shortest drop in percentage points."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from clinlib.analysis import temporal as T
from clinlib.analysis.metrics import MetricsInputError
from clinlib.analysis.stats.question import wilson_ci


def _events() -> pd.DataFrame:
    rows = [(f"E{s}-{v}", s, v) for s, n in ((1, 5), (2, 1)) for v in range(n)]
    return pd.DataFrame(rows, columns=["event_id", "subject_id", "visit_idx"])


def _questions() -> pd.DataFrame:
    return pd.DataFrame({
        "qid": ["a", "b", "c", "d", "e"],
        "subject_ids": [[1], [1], [2], [1], [1, 2]],
        "anchor_event_ids": [["E1-3", "E1-1"], ["E1-4"], ["E2-0"], [], ["E2-0", "E1-2"]],
    })  # fmt: skip


def test_anchor_positions_by_hand():
    pos = T.anchor_positions(_questions(), _events()).set_index("qid")
    # a: earliest anchor visit 1 of 5 visits -> 1/4; b: the last visit -> 1; c: a one-visit
    # record -> 1; d: no anchor -> NaN; e: only the first patient's anchors count -> 2/4
    assert pos.loc["a", "visit_idx"] == 1 and pos.loc["a", "n_visits"] == 5
    assert pos["position"].tolist()[:3] == [0.25, 1.0, 1.0]
    assert np.isnan(pos.loc["d", "position"]) and pos.loc["e", "position"] == 0.5


def test_position_bins_are_equal_width_and_closed():
    got = T.position_bin(pd.Series([0.0, 0.25, 0.26, 0.5, 0.75, 1.0, np.nan]))
    assert got.tolist()[:6] == ["0-25%", "0-25%", "25-50%", "25-50%", "50-75%", "75-100%"]
    assert pd.isna(got.iloc[6])


def test_accuracy_by_anchor_position_counts_and_wilson():
    preds = pd.DataFrame({"qid": ["a", "b", "c", "d", "e"], "strategy": "s", "backbone": "r",
                          "correct": [True, False, True, True, False]})  # fmt: skip
    pos = T.anchor_positions(_questions(), _events())
    out = T.accuracy_by_anchor_position(preds, pos).set_index("position_bin")
    # 0-25%: a (1/1); 25-50%: e (0/1); 75-100%: b, c (1/2); d has no position
    assert out["n"].to_dict() == {"0-25%": 1, "25-50%": 1, "75-100%": 2}
    assert out.loc["75-100%", "accuracy"] == 0.5
    lo, hi = wilson_ci(1, 2)
    assert out.loc["75-100%", ["ci_low", "ci_high"]].tolist() == pytest.approx([lo, hi])


def test_length_quartiles_and_the_drop():
    # eight predictions, lengths 10..80 given out of order; by rank two per quartile:
    # Q1 = 10, 20 (both right), Q4 = 70, 80 (one right) -> drop -50 pp
    tokens = [80, 10, 50, 20, 70, 30, 60, 40]
    correct = [False, True, True, True, True, False, False, True]
    preds = pd.DataFrame({"strategy": "full-context", "backbone": "r",
                          "context_tokens": tokens, "correct": correct})  # fmt: skip
    table = T.accuracy_by_length_quartile(preds).set_index("quartile")
    assert table["n"].tolist() == [2, 2, 2, 2]
    assert table.loc["Q1 shortest", ["min_tokens", "max_tokens"]].tolist() == [10, 20]
    assert table["accuracy"].to_dict() == {"Q1 shortest": 1.0, "Q2": 0.5, "Q3": 0.5,
                                           "Q4 longest": 0.5}  # fmt: skip
    drop = T.quartile_drop(table.reset_index())
    assert drop["drop_pp"].tolist() == [-50.0]


def test_ties_cannot_empty_a_quartile_and_too_few_rows_fail():
    q = T.length_quartile(pd.Series([5] * 8))
    assert q.value_counts().tolist() == [2, 2, 2, 2]
    with pytest.raises(MetricsInputError, match="cannot fill"):
        T.length_quartile(pd.Series([1, 2, 3]))


def test_seed_values_are_the_texts():
    t2 = T.LONGMEDBENCH_TABLE2.set_index(["system", "question", "m"])["value"]
    assert t2[("qwen-turbo", "explicit", "1")] == 0.882
    assert t2[("qwen-turbo", "explicit", "inf")] == 0.423
    t3 = T.LONGMEDBENCH_TABLE3.set_index(["subtask", "model"])["tau"]
    assert t3[("visit cloze", "gpt-5-mini")] == 0.925
    assert T.CLINTRACE_LENGTH_DROP_PP == (-14.0, -13.0)
    mem0 = T.LONGMEDBENCH_TABLE2[T.LONGMEDBENCH_TABLE2["system"] == "mem0"]
    assert mem0.set_index("metric")["value"].to_dict() == {"Lab-T": 0.993, "Medication": 0.983,
                                                           "Overall": 0.331}  # fmt: skip


def test_beside_table3_states_no_lowest_where_the_seed_gives_only_its_best():
    scores = pd.DataFrame({"strategy": "full-context", "backbone": "r",
                           "subtype": list(T.T10_SUBTASKS), "mean_score": [1.0, 0.1, 0.2, 0.3]})  # fmt: skip
    wide = T.beside_table3(scores).set_index("subtype")
    # the seed's text: cloze best 0.969 (thinking), weakest stated 0.046 (qwen-turbo); visit
    # sorting and joint sorting state only their best, 0.423 and 0.330; the seed's visit
    # sorting is over note summaries, so its value stands beside the notes variant too
    assert wide["seed_best"].tolist() == [0.969, 0.423, 0.330, 0.423]
    assert wide.loc["visit_cloze", "seed_lowest_stated"] == 0.046
    sorting = ["visit_sorting", "joint_sorting", "visit_sorting_notes"]
    assert wide.loc[sorting, "seed_lowest_stated"].isna().all()


def test_window_table_pairs_explicit_and_relative_by_m():
    # reader r: m=1 explicit 2/2, relative 1/2; m=inf explicit 1/2, relative 0/2; a T1 row and
    # a non-window T1R row are ignored
    rows = [("T1R", "window-visits(m=1)", "explicit", True, 100),
            ("T1R", "window-visits(m=1)", "explicit", True, 300),
            ("T1R", "window-visits(m=1)", "relative", True, 100),
            ("T1R", "window-visits(m=1)", "relative", False, 300),
            ("T1R", "window-visits(m=inf)", "explicit", True, 900),
            ("T1R", "window-visits(m=inf)", "explicit", False, 900),
            ("T1R", "window-visits(m=inf)", "relative", False, 900),
            ("T1R", "window-visits(m=inf)", "relative", False, 900),
            ("T1", "window-visits(m=1)", "normal", False, 5),
            ("T1R", "full-context", "relative", False, 5)]  # fmt: skip
    preds = pd.DataFrame(rows, columns=["task", "strategy", "subtype", "correct",
                                        "context_tokens"]).assign(backbone="r")  # fmt: skip
    table = T.window_table(preds)
    assert table["m"].tolist() == ["1", "1", "inf", "inf"]
    assert table["accuracy"].tolist() == [1.0, 0.5, 0.5, 0.0]
    assert table["mean_context_tokens"].tolist() == [200.0, 200.0, 900.0, 900.0]
    wide = T.beside_table2(table).set_index("m")
    assert wide["explicit_minus_relative"].tolist() == [0.5, 0.5]
    assert wide["seed_explicit_qwen_turbo"].tolist() == [0.882, 0.423]
    assert T.window_of("window-visits(m=3, with_ids=False)") == "3"
    assert T.window_of("dense-retrieval(k=3)") is None


# --- joint sorting's pairing (scored apart from the order) ------------------------------------
CLIPS = [[1, "discharge"], [1, "admission"], [2, "admission"], [2, "discharge"]]


def test_joint_pairing_by_hand():
    # gold B,A,C,D: both visits paired
    assert T.joint_pairing("B,A,C,D", CLIPS) == 1.0
    # visits in the wrong order but each paired: pairing 1 (the order score is tau's business)
    assert T.joint_pairing("C,D,B,A", CLIPS) == 1.0
    # discharge before admission: visit 1 unpaired
    assert T.joint_pairing("A,B,C,D", CLIPS) == 0.5
    # the halves interleaved: positions (B,C) and (A,D) pair no visit
    assert T.joint_pairing("B,C,A,D", CLIPS) == 0.0
    assert T.joint_pairing("B,A,C", CLIPS) == 0.0  # not a permutation
    assert T.joint_pairing(None, CLIPS) == 0.0


def test_pairing_table_is_apart_from_tau():
    preds = pd.DataFrame(
        {
            "qid": ["q", "q"],
            "task": "T10",
            "subtype": "joint_sorting",
            "backbone": ["r", "e"],
            "strategy": "s",
            "parsed": ["C,D,B,A", "A,B,C,D"],
            "score": [-1 / 3, 2 / 3],
        }
    )
    qs = pd.DataFrame({"qid": ["q"], "meta": [json.dumps({"clips": CLIPS})]})
    out = T.pairing_table(preds, qs).set_index("backbone")
    assert out.loc["r", "mean_pairing"] == 1.0 and out.loc["e", "mean_pairing"] == 0.5
    assert out.loc["r", "mean_tau"] == pytest.approx(-1 / 3)
    with pytest.raises(MetricsInputError, match="not in questions"):
        T.pairing_table(preds, qs.assign(qid="other"))
