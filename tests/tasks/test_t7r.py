"""T7R medication retrieval, explicit vs relative (clinlib.tasks.generators.t7r), on the quick
profile's extended set: every pair shares T7's options, gold and anchor; the explicit twin is
T7's wording, the relative one names the stay by its rank in words; gate L2 (T7's rule)
recomputes both from the raw tables and catches a wrong letter; the reference reader answers
a hand-written relative prompt inside the right stay only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinlib.data.build import SourceSpec, load, open_source, read_source_info
from clinlib.dialogue.turns import ordinal_word
from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.readers.policies import answer
from clinlib.eval.readers.relative import recognise_relative_option
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates import gate_l2
from clinlib.tasks.recompute import load_raw


@pytest.fixture(scope="module")
def t7r(quick_temporal):
    ext = load("temporal_questions", "quick")
    return ext[ext["task"] == "T7R"].reset_index(drop=True)


def test_pairs_share_options_gold_and_anchor(t7r):
    assert len(t7r) == 16 and set(t7r["subtype"]) == {"explicit", "relative"}
    for _, pair in t7r.groupby(t7r["meta"].map(lambda m: json.loads(m)["pair"])):
        assert sorted(pair["subtype"]) == ["explicit", "relative"]
        assert pair["gold"].nunique() == 1 and pair["options"].map(tuple).nunique() == 1
        rel = pair[pair["subtype"] == "relative"].iloc[0]
        exp = pair[pair["subtype"] == "explicit"].iloc[0]
        meta = json.loads(rel["meta"])
        assert f"{ordinal_word(meta['visit_idx'] + 1)} hospital stay" in rel["question"]
        assert meta["date"] in exp["question"] and meta["date"] not in rel["question"]
        stem = rel["question"].split("\nOptions:")[0]
        assert not STATED_NUMBER.search(stem)


def test_l2_recomputes_both_twins_and_catches_a_wrong_letter(t7r):
    info = read_source_info("quick")
    con = open_source(SourceSpec(info["kind"], Path(info["path"]), bool(info["credentialed"])))
    try:
        raw = load_raw(con, {int(s) for ids in t7r["subject_ids"] for s in ids})
    finally:
        con.close()
    cov = load("event_coverage", "quick")
    checked, fails = gate_l2(t7r, raw, cov)["T7R"]
    assert checked == len(t7r) and fails == []
    bad = t7r.assign(gold=t7r["gold"].map({"A": "B", "B": "C", "C": "D", "D": "A"}))
    assert len(gate_l2(bad, raw, cov)["T7R"][1]) == len(t7r)


def test_reader_answers_inside_the_named_stay():
    record = ("Visit 1 (2150-01-01)\nClinician: We began Metformin 500 mg PO on 2150-01-01.\n\n"
              "Visit 2 (2150-03-01)\nClinician: The team prescribed Aspirin 81 mg PO.\n")  # fmt: skip
    q = ("Which medication was started during the patient's second hospital stay?\nOptions:\n"
         "A. Metformin\nB. Lisinopril\nC. Aspirin\nD. Warfarin\n"
         "Reply with the letter of one option (A, B, C or D).")  # fmt: skip
    rq = recognise_relative_option(q)
    assert rq.visit == 2 and rq.options[2] == "Aspirin"
    msgs = build_messages({"question": q, "task": "T7R"}, record)
    assert answer(msgs) == "C"
    first = build_messages({"question": q.replace("second", "first"), "task": "T7R"}, record)
    assert answer(first) == "A"
    third = build_messages({"question": q.replace("second", "third"), "task": "T7R"}, record)
    assert answer(third) == "insufficient information"
