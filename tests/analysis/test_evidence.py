"""Evidence recall and the representation-vs-reading loss split (issue 27 §2) on hand-built
questions, contexts and predictions whose recall and split are worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from clinlib.analysis.evidence import loss_split, lost_in, recall_of_contexts, recall_table
from clinlib.analysis.stats.cluster import cluster_bootstrap_ci, cluster_robust_ci
from clinlib.analysis.stats.question import StatsInputError, bootstrap_ci


def _questions() -> pd.DataFrame:
    inj = json.dumps({"subject_id": 2, "visit_idx": 0, "text": "Physician noted: X is Y."})
    return pd.DataFrame({
        "qid": ["q1", "q2", "q3", "q4", "q9", "q0"],
        "task": ["T1", "T1", "T2", "T3", "T9", "T1"],
        "subject_ids": [[1], [1], [2], [2], [3], [3]],
        "anchor_event_ids": [["LAB-1", "LAB-2"], ["LAB-3"], ["LAB-4", "RX-5"], ["LAB-6"],
                             ["LAB-9"], []],
        "injection": ["", "", "", inj, "", ""],
    })  # fmt: skip


def _contexts(strategy: str, texts: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"qid": list(texts), "strategy": strategy, "label": strategy,
                         "setting": "post", "context": list(texts.values())})  # fmt: skip


def test_recall_is_the_share_of_anchor_ids_tagged_in_the_context():
    ctx = _contexts("s", {
        "q1": "Sodium 140 [LAB-1] and [LAB-7, LAB-1]",  # 1 of 2 anchors
        "q2": "nothing tagged here but text",  # tags absent: not measured
        "q3": "[LAB-4, RX-5] Physician noted",  # 2 of 2
        "q4": "Physician noted: X is Y. [LAB-8]",  # 0 of 1, injection present
        "q9": "[LAB-9]",  # T9: excluded
        "q0": "[LAB-1]",  # no anchor: excluded
    })  # fmt: skip
    r = recall_of_contexts(_questions(), ctx).set_index("qid")
    assert list(r.index) == ["q1", "q2", "q3", "q4"]
    assert r.loc["q1", "recall"] == 0.5 and r.loc["q1", "n_present"] == 1
    assert not bool(r.loc["q1", "all_present"])
    assert np.isnan(r.loc["q2", "recall"]) and not r.loc["q2", "measurable"]
    assert r.loc["q3", "recall"] == 1.0 and bool(r.loc["q3", "all_present"])
    assert r.loc["q4", "recall"] == 0.0 and bool(r.loc["q4", "injection_in_context"])
    assert pd.isna(r.loc["q1", "injection_in_context"])
    blind = recall_of_contexts(_questions(), _contexts("blind", {"q1": "", "q2": ""}))
    assert blind["recall"].tolist() == [0.0, 0.0] and blind["measurable"].all()
    with pytest.raises(StatsInputError, match="qid 'nope'"):
        recall_of_contexts(_questions(), _contexts("s", {"nope": ""}))


def test_recall_table_gives_means_with_question_and_patient_intervals():
    per_q = pd.DataFrame({
        "qid": ["q1", "q2", "q3", "q4"], "task": ["T1", "T1", "T2", "T3"], "strategy": "s",
        "setting": "post", "n_anchors": [2, 1, 2, 1], "n_present": [1, 1, 2, 0],
        "recall": [0.5, 1.0, 1.0, 0.0], "all_present": [False, True, True, False],
        "measurable": True, "injection_in_context": pd.NA,
    })  # fmt: skip
    t = recall_table(per_q, _questions(), n_boot=500).set_index("task")
    assert t.loc["T1", "recall"] == 0.75 and t.loc["T1", "full_recall"] == 0.5
    assert t.loc["all", "recall"] == pytest.approx(2.5 / 4) and t.loc["all", "n"] == 4
    assert t.loc["all", "n_clusters"] == 2  # patients 1 and 2
    y, cl = np.array([0.5, 1.0, 1.0, 0.0]), np.array([1, 1, 2, 2])
    boot = cluster_bootstrap_ci(y, cl, 500, 0.05, 0)
    cr = cluster_robust_ci(y, cl)
    assert (t.loc["all", "boot_low"], t.loc["all", "boot_high"]) == (boot.low, boot.high)
    assert (t.loc["all", "cr_low"], t.loc["all", "cr_high"]) == (cr.low, cr.high)
    assert (t.loc["all", "q_low"], t.loc["all", "q_high"]) == bootstrap_ci(y, np.mean, 500)
    # CR1 by hand: p = 0.625, cluster residual sums +0.25 and -0.25, var = G/(G-1) sum S^2 / N^2
    resid = np.array([0.5 + 1.0 - 2 * 0.625, 1.0 + 0.0 - 2 * 0.625])
    se = np.sqrt(2 / 1 * np.sum(resid**2) / 16)
    assert cr.se == pytest.approx(se)


def _preds(strategy: str, correct: dict[str, bool | None], backbone: str = "b") -> pd.DataFrame:
    return pd.DataFrame({"qid": list(correct), "task": "T1", "strategy": strategy,
                         "backbone": backbone, "setting": "post",
                         "correct": pd.array(list(correct.values()), dtype="boolean")})  # fmt: skip


def _split_case() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Five T1 questions of two patients under strategy s and the oracle:

    ====  ==========  ========  =========  ===============
    qid   all anchors s correct oracle     lost in
    ====  ==========  ========  =========  ===============
    a1    yes         yes       right      correct
    a2    no          no        right      representation
    a3    yes         no        right      reading (oracle right)
    b1    yes         None      wrong      reading (oracle wrong; an error counts wrong)
    b2    no          yes       right      correct (without the evidence)
    ====  ==========  ========  =========  ===============
    """
    qs = pd.DataFrame({"qid": ["a1", "a2", "a3", "b1", "b2"], "task": "T1",
                       "subject_ids": [[1], [1], [1], [2], [2]]})  # fmt: skip
    present = {"a1": True, "a2": False, "a3": True, "b1": True, "b2": False}
    rows = []
    for strat in ("s", "oracle"):
        for q, ok in present.items():
            full = ok or strat == "oracle"
            rows.append({"qid": q, "task": "T1", "strategy": strat, "setting": "post",
                         "n_anchors": 1, "n_present": int(full), "recall": float(full),
                         "all_present": full, "measurable": True,
                         "injection_in_context": pd.NA})  # fmt: skip
    per_q = pd.DataFrame(rows)
    preds = pd.concat([
        _preds("s", {"a1": True, "a2": False, "a3": False, "b1": None, "b2": True}),
        _preds("oracle", {"a1": True, "a2": True, "a3": True, "b1": False, "b2": True}),
    ], ignore_index=True)  # fmt: skip
    return preds, per_q, qs


def test_lost_in_labels_each_prediction():
    preds, per_q, _ = _split_case()
    out = lost_in(preds, per_q)
    s = out[out["strategy"] == "s"].set_index("qid")["lost_in"].to_dict()
    assert s == {"a1": "correct", "a2": "representation", "a3": "reading", "b1": "reading",
                 "b2": "correct"}  # fmt: skip
    unmeasured = lost_in(preds.assign(setting="pre"), per_q)
    assert set(unmeasured["lost_in"]) == {"not measured"}


def test_loss_split_is_exact_and_uses_the_oracle_as_reading_ceiling():
    preds, per_q, qs = _split_case()
    split = loss_split(preds, per_q, qs, n_boot=400)
    row = split[(split["strategy"] == "s") & (split["task"] == "all")].iloc[0]
    assert row["n"] == 5 and row["n_clusters"] == 2
    assert row["accuracy"] == pytest.approx(2 / 5)
    assert row["lost_representation"] == pytest.approx(1 / 5)
    assert row["lost_reading"] == pytest.approx(2 / 5)
    assert row["lost_reading_oracle_right"] == pytest.approx(1 / 5)  # a3
    assert row["lost_reading_oracle_wrong"] == pytest.approx(1 / 5)  # b1
    assert row["correct_without_evidence"] == pytest.approx(1 / 5)  # b2
    assert row["oracle_accuracy"] == pytest.approx(4 / 5)
    assert row["accuracy"] + row["lost_representation"] + row["lost_reading"] == pytest.approx(1)
    boot = cluster_bootstrap_ci(np.array([0, 0, 1, 1, 0.0]), np.array([1, 1, 1, 2, 2]), 400)
    assert (row["lost_reading_boot_low"], row["lost_reading_boot_high"]) == (boot.low, boot.high)
    orc = split[(split["strategy"] == "oracle") & (split["task"] == "all")].iloc[0]
    assert orc["lost_representation"] == 0 and orc["accuracy"] == pytest.approx(4 / 5)
    no_oracle = loss_split(preds[preds["strategy"] == "s"], per_q, qs, n_boot=200)
    assert no_oracle["oracle_accuracy"].isna().all()
    assert no_oracle["lost_reading"].iloc[0] == pytest.approx(2 / 5)


def test_lost_in_names_missing_columns():
    preds, per_q, _ = _split_case()
    with pytest.raises(StatsInputError, match="correct"):
        lost_in(preds.drop(columns="correct"), per_q)


def test_evidence_recall_builds_contexts_once_and_caches_per_strategy(tmp_path, monkeypatch):
    """On a tiny hand-built profile: full-context names the anchor, no-context-blind does
    not; a second call reads the cache (one file per strategy and setting) and returns the
    same table; a changed question set is a different key."""
    from clinlib.analysis import evidence
    from clinlib.core import config
    from tests import strategy_fixtures as sf

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    d = tmp_path / "tiny"
    d.mkdir()
    events = sf.events_7001()
    sf.dialogue(events).to_parquet(d / "dialogues.parquet", index=False)
    (d / "source.json").write_text(json.dumps({"kind": "synthetic", "credentialed": False}))
    lab = events[events["kind"] == "lab"].iloc[0]
    qs = pd.DataFrame({"qid": ["a", "b"], "task": ["T1", "T1"], "subject_ids": [[7001], [7001]],
                       "question": ["Creatinine?", "Potassium?"], "gold": ["x", "y"],
                       "anchor_event_ids": [[lab["event_id"]], ["LAB-404"]], "injection": "",
                       "evidence_turns": [[], []], "meta": "{}"})  # fmt: skip
    strategies = ["full-context", "no-context-blind"]
    first = evidence.evidence_recall(qs, strategies, "tiny")
    got = first.set_index(["strategy", "qid"])["recall"].to_dict()
    assert got == {("full-context", "a"): 1.0, ("full-context", "b"): 0.0,
                   ("no-context-blind", "a"): 0.0, ("no-context-blind", "b"): 0.0}  # fmt: skip
    cached = sorted((d / evidence.CACHE_DIR).glob("recall-*.parquet"))
    assert len(cached) == 2
    again = evidence.evidence_recall(qs, strategies, "tiny")
    pd.testing.assert_frame_equal(first, again)
    evidence.evidence_recall(qs.head(1), ["full-context"], "tiny")
    assert len(list((d / evidence.CACHE_DIR).glob("recall-*.parquet"))) == 3
