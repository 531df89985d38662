"""A T5 question's answer-time dialogue holds its patient's injections of the WHOLE question set
(clinlib.strategies.construction.injection_source), whichever questions a run asks with it.

The shape, by hand: one patient with four visits and two T5 questions, a controlled one whose
contradiction statement is injected into visit 1 and a control one that injects nothing. A run
asking only the control question (notebook 14's stratified subset; ``--limit``) used to build the
injected dialogue from the asked rows alone, so the control question's context lacked the other
question's statement: a full ``post`` run and the subset's ``stream`` final checkpoint answered
the same prediction key over different text (on a MEDS-shaped build the final checkpoint
scored 1.000 against static 0.955)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.strategies.construction import injection_source, question_contexts

PROFILE = "handmade"
STATEMENT = "Patient reports never having taken metformin."
DATES = ["2150-01-10", "2150-03-01", "2150-06-01", "2150-09-01"]


def _turns() -> pd.DataFrame:
    rows = []
    for v, date in enumerate(DATES):
        for k in range(2):
            rows.append({"subject_id": 1, "visit_idx": v, "turn_idx": 2 * v + k,
                         "speaker": "clinician" if k else "patient", "text": f"visit {v} turn {k}",
                         "text_tagged": f"visit {v} turn {k}", "event_ids": [f"LAB-{v}"] if k else [], "visit_date": date})  # fmt: skip
    return pd.DataFrame(rows)


def _question(qid: str, task: str, injection: str | None, anchor: str) -> dict:
    return {"qid": qid, "task": task, "subtype": "x", "subject_ids": [1],
            "question": f"question {qid}?", "gold": "yes", "options": None,
            "anchor_event_ids": [anchor], "evidence_turns": [], "meta": json.dumps({}),
            "injection": injection}  # fmt: skip


def _questions() -> pd.DataFrame:
    inj = {"kind": "t5", "subject_id": 1, "visit_idx": 1, "after_turn_idx": 3,
           "speaker": "clinician", "text": STATEMENT, "qid": "T5-controlled"}  # fmt: skip
    return pd.DataFrame([
        _question("T5-controlled", "T5", json.dumps(inj, sort_keys=True), "LAB-1"),
        _question("T5-control", "T5", None, "LAB-2"),
        _question("T1-other", "T1", None, "LAB-0"),
    ])  # fmt: skip


@pytest.fixture
def handmade(tmp_path, monkeypatch):
    """A build folder holding only the hand-made dialogue and question set."""
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    (tmp_path / PROFILE).mkdir()
    _turns().to_parquet(tmp_path / PROFILE / "dialogues.parquet")
    _questions().to_parquet(tmp_path / PROFILE / "questions.parquet")
    return _questions()


def _context(questions: pd.DataFrame, qid: str, setting: str = "post") -> str:
    ctx = question_contexts(questions, "full-context", PROFILE, setting)
    if setting.startswith("stream"):
        ctx = ctx[ctx["checkpoint_final"].astype(bool)]
    return str(ctx.loc[ctx["qid"] == qid, "context"].iloc[0])


def test_a_subset_sees_the_whole_sets_injections(handmade):
    whole = _context(handmade, "T5-control")
    assert STATEMENT in whole  # the patient's variant holds every T5 injection of the set
    alone = handmade[handmade["qid"] == "T5-control"]
    assert _context(alone, "T5-control") == whole  # asked alone: the same text
    # the stream's final checkpoint sees the whole dialogue: the static context, exactly
    assert _context(alone, "T5-control", "stream(delta=2)") == whole
    assert _context(handmade, "T5-control", "stream(delta=2)") == whole
    # the sentence sits right after turn 3 (visit 1), before visit 2
    assert whole.index("visit 1 turn 1") < whole.index(STATEMENT) < whole.index("visit 2 turn 0")
    # a task without injections is untouched
    assert STATEMENT not in _context(handmade[handmade["qid"] == "T1-other"], "T1-other")


def test_injection_source_rows(handmade):
    alone = handmade[handmade["qid"] == "T5-control"]
    assert sorted(injection_source(alone, PROFILE)["qid"]) == ["T5-control", "T5-controlled"]
    # no injection task asked: the asked rows, the profile's set not read
    other = handmade[handmade["qid"] == "T1-other"]
    assert injection_source(other, PROFILE) is other
    # a hand-made set not drawn from questions.parquet: only its own injections
    mine = alone.assign(qid="T5-mine")
    assert injection_source(mine, PROFILE) is mine
