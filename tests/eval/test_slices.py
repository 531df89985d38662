"""A profile slice as its own build folder (clinlib.eval.harness.slices), on the quick profile."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.eval.harness.slices import local_slice, slice_profile, smallest_patients
from clinlib.eval.harness.store import RunnerError


@pytest.fixture
def root(quick_in_tmp_build):
    return quick_in_tmp_build


def test_a_slice_holds_its_patients_single_patient_questions_only(root):
    quick = root / "quick"
    qs = pd.read_parquet(quick / "questions.parquet")
    turns = pd.read_parquet(quick / "dialogues.parquet").groupby("subject_id").size()
    # by hand: single-patient T1/T9 questions' patients, shortest dialogue first
    single = qs[qs["subject_ids"].map(len).eq(1) & qs["task"].isin(["T1", "T9"])]
    asked = sorted({int(ids[0]) for ids in single["subject_ids"]}, key=lambda s: (turns[s], s))
    chosen = smallest_patients("quick", ["T1", "T9"], n=2)
    assert chosen == asked[:2]
    assert slice_profile("quick", "sliced", chosen, ["T1", "T9"]) == "sliced"
    got_q = pd.read_parquet(root / "sliced" / "questions.parquet")
    want = single[single["subject_ids"].map(lambda ids: int(ids[0]) in chosen)]
    assert sorted(got_q["qid"]) == sorted(want["qid"])
    got_d = pd.read_parquet(root / "sliced" / "dialogues.parquet")
    assert sorted(set(got_d["subject_id"])) == sorted(chosen)
    assert len(got_d) == int(turns[chosen].sum())
    before = (root / "sliced" / "questions.parquet").stat().st_mtime_ns
    slice_profile("quick", "sliced", chosen, ["T1", "T9"])  # unchanged: not rewritten
    assert (root / "sliced" / "questions.parquet").stat().st_mtime_ns == before


def test_a_slice_refuses_its_own_source_and_unknown_patients(root):
    with pytest.raises(RunnerError, match="its own name"):
        slice_profile("quick", "quick", [1])
    with pytest.raises(RunnerError, match=r"no dialogue for patient\(s\) \[1\]"):
        slice_profile("quick", "sliced", [1])


def test_the_local_slice_is_the_shortest_patient_with_an_injected_t3_positive(root):
    qs = pd.read_parquet(root / "quick" / "questions.parquet")
    turns = pd.read_parquet(root / "quick" / "dialogues.parquet").groupby("subject_id").size()
    single = qs[qs["subject_ids"].map(len).eq(1)]
    pos = single[(single["task"] == "T3") & (single["gold"] == "yes")]
    # by hand: every T3 positive's patient is asked T3, so the pick is the shortest of them
    want = min({int(ids[0]) for ids in pos["subject_ids"]}, key=lambda s: (turns[s], s))
    assert smallest_patients("quick", ["T1", "T3", "T9"], n=1, positive="T3") == [want]
    assert local_slice("quick") == "quick-local"
    got = pd.read_parquet(root / "quick-local" / "questions.parquet")
    mine = single[single["subject_ids"].map(lambda ids: int(ids[0]) == want)]
    assert sorted(got["qid"]) == sorted(mine.loc[mine["task"].isin(["T1", "T3", "T9"]), "qid"])
    assert ((got["task"] == "T3") & (got["gold"] == "yes")).sum() >= 1
