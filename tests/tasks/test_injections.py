"""Controlled injections (T3 / T5): placement, renumbering, purity, pre/post views."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.tasks.generate import generate_candidates
from clinlib.tasks.injections import (
    SETTINGS,
    Injection,
    InjectionError,
    answer_dialogue,
    apply_injections,
    construction_dialogue,
    injected_dialogue,
    injections_of,
)
from tests import task_fixture as F


@pytest.fixture(scope="module")
def turns() -> pd.DataFrame:
    return F.dialogue_and_coverage()[0]


def _inj(sid=1001, visit=0, after=2, text="Physician noted: X is consistent with Y.", qid="T3-a"):
    return Injection("t3", sid, visit, after, "clinician", text, qid)


def test_apply_inserts_after_the_anchor_turn_and_renumbers(turns):
    before = turns.copy(deep=True)
    out = apply_injections(turns, [_inj(after=2)])
    pd.testing.assert_frame_equal(turns, before)  # the stored dialogue is untouched
    p = out[out["subject_id"] == 1001].reset_index(drop=True)
    assert len(p) == (turns["subject_id"] == 1001).sum() + 1
    assert p["turn_idx"].tolist() == list(range(len(p)))
    new = p[p["injected"]]
    assert len(new) == 1
    row = new.iloc[0]
    assert row["turn_idx"] == 3 and row["visit_idx"] == 0 and row["speaker"] == "clinician"
    assert row["text"] == row["text_tagged"] == "Physician noted: X is consistent with Y."
    assert list(row["event_ids"]) == [] and row["source_turn_idx"] == -1
    assert row["injected_qid"] == "T3-a" and row["visit_date"] == "2150-01-01"
    # every original turn keeps its text and order; later ones shift by one
    orig = p[~p["injected"]]
    assert orig["source_turn_idx"].tolist() == sorted(turns.loc[turns["subject_id"] == 1001,
                                                                "turn_idx"])  # fmt: skip
    assert (orig["turn_idx"] - orig["source_turn_idx"]).tolist() == [0, 0, 0] + [1] * (
        len(orig) - 3
    )
    # other patients are unchanged apart from the added columns
    other = out[out["subject_id"] == 1002].drop(columns=["source_turn_idx", "injected",
                                                         "injected_qid"])  # fmt: skip
    pd.testing.assert_frame_equal(
        other.reset_index(drop=True),
        turns[turns["subject_id"] == 1002].reset_index(drop=True),
    )


def test_several_injections_after_one_turn_keep_qid_order(turns):
    out = apply_injections(turns, [_inj(after=2, qid="T3-b", text="second"),
                                   _inj(after=2, qid="T3-a", text="first")])  # fmt: skip
    p = out[out["subject_id"] == 1001]
    assert p.loc[p["injected"], "text"].tolist() == ["first", "second"]
    assert p.loc[p["injected"], "turn_idx"].tolist() == [3, 4]


def test_bad_injections_are_named(turns):
    with pytest.raises(InjectionError, match="patient 1001 has no turn 999"):
        apply_injections(turns, [_inj(after=999)])
    with pytest.raises(InjectionError, match="belongs to visit 0, not visit 1"):
        apply_injections(turns, [_inj(visit=1, after=2)])
    with pytest.raises(InjectionError, match="speaker"):
        Injection("t3", 1, 0, 0, "nurse", "x", "q")
    with pytest.raises(InjectionError, match="malformed"):
        Injection.from_json('{"kind": "t3"}')


def test_json_round_trip():
    inj = _inj()
    assert Injection.from_json(inj.to_json()) == inj
    assert json.loads(inj.to_json())["after_turn_idx"] == 2


def test_injected_dialogue_carries_every_positive_of_the_task(turns):
    cands = generate_candidates(F.inputs(), ["T3", "T5"])
    q = pd.concat([cands["T3"], cands["T5"]], ignore_index=True)
    t3 = injected_dialogue(turns, q, "T3")
    pos = cands["T3"][cands["T3"]["gold"] == "yes"]
    assert t3["injected"].sum() == len(pos)
    assert set(t3.loc[t3["injected"], "injected_qid"]) == set(pos["qid"])
    for _, r in pos.iterrows():
        inj = Injection.from_json(r["injection"])
        row = t3[t3["injected_qid"] == r["qid"]].iloc[0]
        # inserted in the finding's encounter, right after the finding's (original) turn
        assert row["visit_idx"] == inj.visit_idx
        prev = t3[(t3["subject_id"] == inj.subject_id) & (t3["turn_idx"] < row["turn_idx"])]
        prev_orig = prev[~prev["injected"]].iloc[-1]
        assert prev_orig["source_turn_idx"] == inj.after_turn_idx
        assert r["anchor_event_ids"][0] in list(prev_orig["event_ids"])
    # negatives add nothing; T5 statements are a separate variant
    t5 = injected_dialogue(turns, q, "T5")
    assert set(t5.loc[t5["injected"], "injected_qid"]) == set(
        cands["T5"].loc[cands["T5"]["injection"] != "", "qid"]
    )
    assert not set(t5["injected_qid"]) & set(pos["qid"])
    with pytest.raises(InjectionError, match="no injections"):
        injected_dialogue(turns, q, "T1")


def test_pre_and_post_views(turns):
    q = generate_candidates(F.inputs(), ["T3"])["T3"]
    assert SETTINGS == ("post", "pre")  # clinlib.tasks.settings.STATIC_SETTINGS
    pre = construction_dialogue(turns, q, "T3", "pre")
    post = construction_dialogue(turns, q, "T3", "post")
    assert pre["injected"].any() and not post["injected"].any()
    assert len(post) == len(turns)
    # what the model reads at answer time holds the sentence in both settings
    pd.testing.assert_frame_equal(answer_dialogue(turns, q, "T3"), pre)
    with pytest.raises(InjectionError, match="setting"):
        construction_dialogue(turns, q, "T3", "during")


def test_injections_of_reads_only_the_task(turns):
    c = generate_candidates(F.inputs(), ["T3", "T5"])
    q = pd.concat([c["T3"], c["T5"]], ignore_index=True)
    assert {i.kind for i in injections_of(q, "T3")} == {"t3"}
    assert {i.kind for i in injections_of(q, "T5")} == {"t5"}
    qids = [i.qid for i in injections_of(q)]
    assert qids == sorted(qids)


def test_a_visit_slice_keeps_its_numbering(turns):
    visit = turns[(turns["subject_id"] == 1001) & (turns["visit_idx"] == 1)]
    after = visit["turn_idx"].iloc[1]
    out = apply_injections(visit, [_inj(visit=1, after=int(after))])
    first = int(visit["turn_idx"].min())
    assert out["turn_idx"].tolist() == list(range(first, first + len(visit) + 1))
    assert out.loc[out["injected"], "turn_idx"].tolist() == [int(after) + 1]
