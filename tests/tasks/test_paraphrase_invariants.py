"""Paraphrase invariants (clinlib.tasks.paraphrase_invariants) and the hostile paraphrasers
(clinlib.eval.synthesis.hostile_paraphrase): a paraphrase that reverses an order, changes a
superlative, comparative, negation, time anchor or unit is refused by ``invariants_kept``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.eval.synthesis.hostile_paraphrase import PARAPHRASE_WRITERS, paraphrase_refusals
from clinlib.eval.synthesis.rule_writers import paraphrase_text
from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.paraphrase import check_paraphrase, first_problem
from clinlib.tasks.paraphrase_invariants import answer_form, invariant_problems, invariants

T2_STEM = (
    "Take the first Creatinine result of each of these 3 encounters: 2150-01-01, 2150-03-01 "
    "and 2150-06-01. What is the trend of the Creatinine from the earliest to the latest of them?"
)
T2 = {
    "qid": "T2-a",
    "task": "T2",
    "gold": "increased;strong",
    "options": [],
    "injection": "",
    "question": f"{T2_STEM} {ANSWER_FORMATS['T2']}",
    "meta": json.dumps({"lab": "creatinine", "dates": ["2150-01-01", "2150-03-01"]}),
}
T6 = T2 | {
    "qid": "T6-a",
    "task": "T6",
    "question": "Which patient had the higher maximum Glucose before 2150-01-01, not counting "
    "values within 5 days? " + ANSWER_FORMATS["T6"],
}


def test_invariants_by_hand():
    got = invariants("the latest Creatinine at or before the start, not the highest, in mg/dL")
    assert got["order"] == ["latest"] and got["time_anchor"] == ["before"]
    assert got["negation"] == ["not"] and got["superlative"] == ["max"]
    assert got["unit"] == ["mg/dl"] and got["comparative"] == []
    # a time word is a unit shortly after a number only
    assert invariants("on that day, 7 or more days later")["unit"] == ["day"]
    assert invariants("% Hemoglobin A1c on that day")["unit"] == ["%"]


def test_the_reverse_order_is_a_change_though_the_words_are_the_same():
    a = "from the earliest to the latest of them"
    b = "from the latest to the earliest of them"
    assert invariant_problems(a, b) == ["order: ['earliest', 'latest'] -> ['latest', 'earliest']"]
    assert answer_form(a) == {"order": "ascending"} and answer_form(b) == {"order": "descending"}
    # synonyms are the same word: "oldest" is "earliest", "maximum" is "highest"
    assert invariant_problems("the highest, oldest value", "the maximum, earliest value") == []


def test_counts_matter_outside_order_words():
    assert invariant_problems("not stated as uncontrolled", "not not stated as uncontrolled") == [
        "negation: ['not'] -> ['not', 'not']"
    ]


@pytest.mark.parametrize(
    "old, new",
    [
        ("from the earliest to the latest", "from the latest to the earliest"),
        ("Creatinine result of each", "Creatinine result, not of each"),
    ],
)
def test_check_paraphrase_refuses_a_flip(old, new):
    reply = T2["question"].replace("Take the", "Consider the").replace(old, new)
    assert first_problem(check_paraphrase(T2, reply))[0] == "invariants_kept"


def test_a_faithful_paraphrase_still_passes():
    reply = paraphrase_text(T2["question"])
    assert reply != T2["question"]
    assert first_problem(check_paraphrase(T2, reply)) == ("", "")


def test_every_hostile_paraphraser_is_refused_by_invariants_kept():
    table = paraphrase_refusals(pd.DataFrame([T2, T6])).set_index("writer")
    for w in PARAPHRASE_WRITERS:
        row = table.loc[w.name]
        assert row["n_questions"] > 0, w.name
        assert row["refused_by_check"] == row["n_questions"], (w.name, row.to_dict())
