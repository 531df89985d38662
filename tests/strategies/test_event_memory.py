"""LongMedBench's flattened event memory and the history-bounded RAG / Mem0
(clinlib.strategies.event_memory): the flat rendering keeps every clinical sentence and drops
what names a stay's rank (headers, rank greetings); the history-bounded strategies show only
visits (or memories) from before the target; all are selectable by name."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from clinlib.data.build import load
from clinlib.strategies import get_strategy
from clinlib.strategies.base import render
from clinlib.strategies.event_memory import before_target, flatten
from clinlib.strategies.prep import get_prep

TURNS = pd.DataFrame(
    {
        "subject_id": [1] * 6,
        "visit_idx": [0, 0, 1, 1, 2, 2],
        "turn_idx": [0, 1, 2, 3, 4, 5],
        "speaker": ["clinician", "clinician"] * 3,
        "text": [
            "You were admitted on 2150-01-01, and the admission type was URGENT.",
            "On 2150-01-01 we started Metformin 500 mg PO.",
            "Welcome back; this is your second hospital stay with us.",
            "Our records show an admission on 2150-03-01 with admission type URGENT.",
            "Let's review this stay, your third one with us. You came in on 2150-05-01, "
            "and the admission is recorded as URGENT.",
            "We began Warfarin 5 mg PO on 2150-05-02.",
        ],
        "event_ids": [[], [], [], [], [], []],
        "visit_date": ["2150-01-01", "2150-01-01", "2150-03-01", "2150-03-01"] + ["2150-05-01"] * 2,
    }
).assign(text_tagged=lambda d: d["text"])


def test_flatten_drops_headers_and_rank_greetings_only():
    full = render(TURNS, with_ids=False)
    assert "Visit 2 (2150-03-01)" in full and "second hospital stay" in full
    flat = flatten(full)
    assert "Visit" not in flat and "\n\n" not in flat
    assert "second" not in flat and "third" not in flat
    assert flat.splitlines() == [
        "Clinician: You were admitted on 2150-01-01, and the admission type was URGENT.",
        "Clinician: On 2150-01-01 we started Metformin 500 mg PO.",
        "Clinician: Our records show an admission on 2150-03-01 with admission type URGENT.",
        "Clinician: You came in on 2150-05-01, and the admission is recorded as URGENT.",
        "Clinician: We began Warfarin 5 mg PO on 2150-05-02.",
    ]


def test_flat_strategies_by_name_and_their_windows():
    q = {"qid": "q", "question": "?", "subject_ids": [1], "meta": '{"visit_idx": 1}'}
    window = get_strategy("flat-window(m=0)")
    hist = get_strategy("flat-history(m=inf)")
    assert window.label() == "flat-window(m=0)" and not window.history_only
    assert hist.history_only
    art_w = window.construct(1, TURNS)
    assert window.access(art_w, q, TURNS).splitlines() == [
        "Clinician: Our records show an admission on 2150-03-01 with admission type URGENT."
    ]
    shown = hist.access(hist.construct(1, TURNS), q, TURNS)
    assert "Metformin" in shown and "2150-03-01" not in shown and "Warfarin" not in shown


def test_before_target_is_the_history_of_the_meta_visit():
    q = {"question": "?", "meta": '{"visit_idx": 2}'}
    assert before_target(q, TURNS) == [0, 1]
    assert before_target({"question": "?", "meta": '{"visit_idx": 0}'}, TURNS) == []
    # no visit named: the last visit is the target, its history the rest
    assert before_target({"question": "?"}, TURNS) == [0, 1]


@pytest.fixture(scope="module")
def patient(quick_built):
    d = load("dialogues", quick_built)
    sid = int(d.groupby("subject_id")["visit_idx"].nunique().idxmax())
    return d[d["subject_id"] == sid].reset_index(drop=True)


def _sid(turns: pd.DataFrame) -> int:
    return int(turns["subject_id"].iloc[0])


def test_history_mem0_is_mem0_built_on_the_visits_before_the_target(patient):
    """history-mem0's context for target visit t equals plain mem0's context built from the
    turns of the visits before t only (an independent construction)."""
    prep, visits = get_prep("rule-based"), sorted(set(patient["visit_idx"]))
    hist = get_strategy("history-mem0(k=8)")
    art = hist.construct(_sid(patient), patient, prep=prep)
    for t in (visits[1], visits[len(visits) // 2], visits[-1]):
        q = {
            "qid": "q",
            "question": "Which medications?",
            "subject_ids": [1],
            "meta": json.dumps({"visit_idx": int(t)}),
        }
        plain = get_strategy("mem0(k=8)")
        before = patient[patient["visit_idx"] < t]
        want = plain.access(plain.construct(_sid(patient), before, prep=prep), q, before)
        assert hist.access(art, q, patient) == want, t
    first = {
        "qid": "q",
        "question": "?",
        "subject_ids": [1],
        "meta": json.dumps({"visit_idx": int(visits[0])}),
    }
    assert hist.access(art, first, patient).endswith("(none)")


def test_history_rag_retrieves_only_visits_before_the_target(patient):
    visits = sorted(set(patient["visit_idx"]))
    s = get_strategy("history-dense-retrieval(k=50)")
    art = s.construct(_sid(patient), patient)
    t = visits[len(visits) // 2]
    q = {
        "qid": "q",
        "question": "Which medications and labs?",
        "subject_ids": [1],
        "meta": json.dumps({"visit_idx": int(t)}),
    }
    shown = [int(n) for n in re.findall(r"^Visit (\d+)", s.access(art, q, patient), re.M)]
    assert shown == [v + 1 for v in visits if v < t]  # k covers them all: every earlier visit
    assert s.history_only and not get_strategy("dense-retrieval").history_only
