"""The streaming protocol on the strategies side (clinlib.strategies.streaming): answerable
visits and checkpoint plans worked out by hand, prefixes, and Mem0 / A-Mem snapshots equal to a
from-scratch build of the truncated dialogue."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.data.build import load
from clinlib.strategies import ConstructionCache, get_prep, get_strategy
from clinlib.strategies.base import dialogue_hash
from clinlib.strategies.streaming import (
    Checked,
    Prefixes,
    answerable_visit,
    checkpoint_plan,
    fill_snapshots,
    truncate,
)
from clinlib.tasks.settings import parse_setting
from tests import strategy_fixtures as F

DATES = ["2150-01-10", "2150-03-01", "2150-06-01", "2150-09-01"]


def turns_of(sid: int = 1) -> pd.DataFrame:
    """Four visits (visit_idx 0..3), two turns each; LAB-<v> is stated in visit v."""
    rows = []
    for v, date in enumerate(DATES):
        for k in range(2):
            ids = [f"LAB-{v}"] if k else []
            rows.append({"subject_id": sid, "visit_idx": v, "turn_idx": 2 * v + k,
                         "speaker": "clinician" if k else "patient",
                         "text": f"visit {v} turn {k}", "event_ids": ids,
                         "visit_date": date})  # fmt: skip
    return pd.DataFrame(rows)


def q(qid, anchors=(), evidence=(), meta=None, sids=(1,)):
    return {"qid": qid, "task": "T1", "subject_ids": list(sids), "anchor_event_ids": list(anchors),
            "evidence_turns": list(evidence), "meta": json.dumps(meta or {})}  # fmt: skip


def test_answerable_visit_by_hand():
    t = turns_of()
    assert answerable_visit(q("a", anchors=["LAB-0", "LAB-2"]), t) == 2  # the latest anchor
    assert answerable_visit(q("b", evidence=["1:3"]), t) == 1  # turn 3 is in visit 1
    # T9-like: anchors absent from the dialogue -> the visit of the question's date
    assert answerable_visit(q("c", anchors=["LAB-99"], meta={"date": "2150-06-15"}), t) == 2
    assert answerable_visit(q("d", meta={"date": "2150-06-01"}), t) == 2  # starts that day
    assert answerable_visit(q("e"), t) == 0  # nothing to locate: from the first visit
    assert answerable_visit(q("f", sids=(1, 2)), t) is None  # T6: no single clock


def test_checkpoint_plan_by_hand():
    t = {1: turns_of()}
    qs = pd.DataFrame([q("early", anchors=["LAB-0"]), q("late", anchors=["LAB-2"])])
    plan = checkpoint_plan(qs, t, t, parse_setting("stream(delta=2)"))
    # 4 sessions, delta 2: checkpoints 2 and 4; "late" is answerable from session 3
    assert list(plan.itertuples(index=False, name=None)) == [
        ("early", "stream@2", 2, False), ("early", "stream@4", 4, True),
        ("late", "stream@4", 4, True),
    ]  # fmt: skip
    every = checkpoint_plan(qs, t, t, parse_setting("stream"))
    assert every.groupby("qid").size().to_dict() == {"early": 4, "late": 2}


def test_plan_over_an_extended_sequence_uses_source_visits():
    """Under stream+mixed the sessions counted include noise; a real visit is found by its
    source_visit_idx (a noise session after every real visit here)."""
    real = turns_of()
    noise = real.assign(visit_idx=real["visit_idx"] * 2 + 1, text="noise", event_ids=[[]] * 8,
                        is_noise=True, source_visit_idx=-1)  # fmt: skip
    ext = pd.concat([real.assign(visit_idx=real["visit_idx"] * 2, is_noise=False,
                                 source_visit_idx=real["visit_idx"]), noise])  # fmt: skip
    ext = ext.sort_values(["visit_idx", "turn_idx"]).assign(turn_idx=range(16))
    plan = checkpoint_plan(pd.DataFrame([q("late", anchors=["LAB-2"])]), {1: real}, {1: ext},
                           parse_setting("stream(delta=3)+mixed"))  # fmt: skip
    # visit 2 is session 5 of 8; checkpoints 3, 6, 8
    assert plan["setting"].tolist() == ["stream+mixed@6", "stream+mixed@8"]
    assert plan["checkpoint_final"].tolist() == [False, True]


def test_prefixes_truncate_lazily():
    p = Prefixes(Checked({1: turns_of()}), 2)
    assert sorted(p[1]["visit_idx"].unique()) == [0, 1] and list(p) == [1] and len(p) == 1
    tagged = turns_of().assign(text_tagged=lambda d: d["text"])
    assert p.sha(1) == dialogue_hash(tagged[tagged["visit_idx"] < 2])
    assert len(truncate(turns_of(), 9)) == 8
    # out of visit order: the same turns by visit
    shuffled = turns_of().iloc[::-1].reset_index(drop=True)
    assert sorted(truncate(shuffled, 3)["turn_idx"]) == list(range(6))


@pytest.fixture(scope="module")
def quick_patient(quick_built):
    turns = load("dialogues", "quick")
    counts = turns.groupby("subject_id")["visit_idx"].nunique()
    sid = int(counts[(counts >= 6) & (counts <= 12)].index[0])
    return sid, turns[turns["subject_id"] == sid].reset_index(drop=True)


@pytest.mark.parametrize("name", ["mem0", "a-mem"])
def test_snapshots_equal_scratch_builds(name, quick_patient, tmp_path):
    sid, turns = quick_patient
    strat, prep = get_strategy(name, profile="quick"), get_prep("rule-based")
    n = turns["visit_idx"].nunique()
    at = [1, 3, n]
    snaps = F.assert_snapshots_equal_truncated_builds(strat, sid, turns, prep, at)
    assert snaps[1] != snaps[n]  # the store grows
    # fill_snapshots stores them under the truncated dialogue's cache key
    cache = ConstructionCache(tmp_path)
    full = Checked({sid: turns})
    needs = [(sid, full[sid], {t: Prefixes(full, t) for t in at})]
    assert fill_snapshots(strat, needs, prep, cache) == len(at)
    key = cache.key(strat, sid, dialogue_hash(truncate(turns, 3)), prep)
    assert cache.get(strat.name, sid, key).data == json.loads(json.dumps(snaps[3]))
    assert fill_snapshots(strat, needs, prep, cache) == 0  # all cached
    # a strategy that does not build visit by visit takes no snapshot
    assert fill_snapshots(get_strategy("full-context"), needs, prep, cache) == 0
