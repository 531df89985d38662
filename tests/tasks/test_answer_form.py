"""The answer form a question's wording asks for (clinlib.tasks.paraphrase_invariants
``asked_form``): gate L2 fails a question whose gold is not of that form, and the paraphrase
check refuses a rewording that asks for another kind of answer. Forms worked out by hand from
each template's wording."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from clinlib.tasks import templates as T
from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.gates.gold import gate_l2
from clinlib.tasks.paraphrase import check_paraphrase, first_problem
from clinlib.tasks.paraphrase_invariants import GOLD_FORMS, asked_form, form_problem

# every T1-T9 template, rendered, and the form a reader of its wording expects (by hand)
CASES = [
    *[(t, "value") for t in T.T1_TEMPLATES],
    *[(t, "direction") for t in T.T2_TEMPLATES],
    *[(t, "yes/no") for t in T.T3_TEMPLATES],
    *[(t, "ids") for t in T.T4_TEMPLATES],
    *[(t, "yes/no") for t in T.T5_TEMPLATES],
    *[(t, "patient") for t in (*T.T6A_TEMPLATES, *T.T6B_TEMPLATES, *T.T6C_TEMPLATES)],
    *[(t, "direction") for t in T.T8_TEMPLATES],
    *[(t, "value") for t in T.T9_DOSE_TEMPLATES],
    *[(t, "date") for t in T.T9_START_TEMPLATES],
]
FILL = dict(
    lab="Creatinine",
    date="2150-01-02",
    dates="2150-01-02 and 2150-03-04",
    n="2",
    value="1.3",
    unit="mg/dL",
    problem="Acute kidney failure, unspecified",
    code="N179",
    labs="Creatinine or Urea Nitrogen",
    topic="the Creatinine result of 2150-01-02",
    disease="diabetes",
    pct="5",
    drug="MetFORMIN",
    min_days="7",
)


@pytest.mark.parametrize("template, form", CASES)
def test_every_template_asks_for_its_tasks_form(template, form):
    assert asked_form(template.format(**FILL)) == form


def test_an_options_block_asks_for_a_letter():
    stem = T.T7_PROCEDURE_TEMPLATES[0].format(date="2150-01-02")
    question = f"{stem}\nOptions:\nA. Coronary arteriography\nB. Insertion of stent"
    assert asked_form(stem, question) == "letter"


@pytest.mark.parametrize(
    "form, good, bad",
    [
        ("value", ["4.3 mEq/L", "1-2 TAB", "1,000 mg"], ["yes", "2150-01-02"]),
        ("date", ["2150-01-02"], ["4.3 mEq/L", "yes"]),
        ("yes/no", ["yes", "no"], ["A", "4.3 mEq/L"]),
        ("letter", ["A", "D"], ["yes", "AB"]),
        ("patient", ["A", "B", "similar"], ["C", "yes"]),
        ("direction", ["increased;strong", "similar", "decreased"], ["up", "yes"]),
        ("ids", ["LAB-101;LAB-202", "LAB-7"], ["LAB-1, LAB-2", "yes"]),
    ],
)
def test_gold_forms(form, good, bad):
    for g in good:
        assert GOLD_FORMS[form].fullmatch(g), (form, g)
    for g in bad:
        assert not GOLD_FORMS[form].fullmatch(g), (form, g)


def test_the_abstention_and_an_unread_wording_are_never_refused():
    assert form_problem("On what date was it started?", "", "insufficient information") == ""
    assert form_problem("Tell me about the stay.", "", "4.3 mEq/L") == ""


T1_STEM = "Report the patient's Potassium result from 2125-07-05."
T1 = {
    "qid": "T1-x",
    "task": "T1",
    "subtype": "abnormal",
    "gold": "4.3 mEq/L",
    "options": [],
    "injection": "",
    "question": f"{T1_STEM} {ANSWER_FORMATS['T1']}",
    "meta": json.dumps({"lab": "potassium", "date": "2125-07-05"}),
}
AS_DATE = "On what date was the patient's Potassium result from 2125-07-05 reported?"


def test_l2_fails_a_question_whose_wording_asks_for_another_form():
    # the counterexample: the stem now asks for a date, the gold is still a lab value; L2
    # reads the form before it recomputes (raw data is never reached for this row)
    row = T1 | {"question": T1["question"].replace(T1_STEM, AS_DATE)}
    got = gate_l2(
        pd.DataFrame([row]), raw=None, coverage=pd.DataFrame(columns=["event_id", "status"])
    )
    n, fails = got["T1"]
    assert n == 1 and fails == [
        ("T1-x", "the wording asks for a date answer but the gold '4.3 mEq/L' is not one")
    ]


def test_a_paraphrase_asking_for_another_form_is_refused():
    reply = T1["question"].replace(T1_STEM, AS_DATE)
    check, detail = first_problem(check_paraphrase(T1, reply))
    assert check == "invariants_kept"
    assert re.search(r"asks for a date answer", detail)
    # a yes/no question turned into a value question keeps its gold "yes": refused too
    t3 = T1 | {
        "task": "T3",
        "gold": "yes",
        "question": "During the encounter starting "
        "2143-09-07, was the Creatinine of 5.3 mg/dL noted as consistent with "
        "Acute kidney failure? " + ANSWER_FORMATS["T3"],
    }
    reply = (
        t3["question"]
        .replace(", was the Creatinine", ", what was the Creatinine")
        .replace(" noted as consistent", " that was noted as consistent")
    )
    problems = check_paraphrase(t3, reply)
    assert any(
        "asks for a value answer but the gold 'yes'" in p for p in problems["invariants_kept"]
    )


def test_a_faithful_rewording_keeps_its_form():
    reply = T1["question"].replace(T1_STEM, "What was the patient's Potassium on 2125-07-05?")
    assert check_paraphrase(T1, reply)["invariants_kept"] == []


def test_the_extended_sets_are_not_read():
    # T10's gold is a letter sequence under a "what remains" wording; only T1-T9 are read
    stem = "Several events were removed; what remains of the visit is shown. Put them in order."
    assert form_problem(stem, stem, "B,C,D,A", "T10") == ""
    assert form_problem(stem, stem, "B,C,D,A", "T1") != ""
