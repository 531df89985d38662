"""Gate L3 (no gold leakage) at its edges (issue 33 §3: the gates group's L3 mutants). Each
row is built by hand and each expected reason worked out from clinlib.tasks.gates.content:

- the stem is the question without the task's answer format, the abstention clause and
  (T7 / T7R) the option lines and the word "Options:"; each removed part leaves one space;
- a number is "stated" when not glued to a word (base.STATED_NUMBER); ISO dates / times and
  the rule parameters "5 %" and "7 (or more) days" are not numbers of the stem; numbers are
  compared as decimals (1.90 = 1.9, 4 = 4.0);
- a label word leaks when its stem starts a word of the stem (any case, any ending) and not
  every label of its axis is named;
- T9's abstention cues count only as whole words.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.tasks.answers import ABSTAIN_CLAUSE, ANSWER_FORMATS
from clinlib.tasks.gates import gate_l3
from clinlib.tasks.gates.content import leak as row_leak
from clinlib.tasks.gates.content import question_stem

FMT = ANSWER_FORMATS
T1_GOLD = "the stem states the gold value {!r}"
RELATIVE = "the relative stem states a number (a date, time or visit number)"
OPTIONS = ["Metformin", "Insulin", "Warfarin", "Aspirin"]
OPTION_BLOCK = "\nOptions:\nA. Metformin\nB) Insulin\n(C) Warfarin\n  D. Aspirin\n"


def leak(task: str, gold: str, question: str, **cols) -> str | None:
    return row_leak({"task": task, "gold": gold, "question": question, **cols})


# --------------------------------------------------------------------------- the stem


def test_the_stem_drops_format_and_abstention_clause_leaving_a_space():
    # the format's example "1.3 mg/dL" is not the stem's; the clause alone is dropped too
    assert question_stem({"task": "T1", "question": "Glucose?" + FMT["T1"]}) == "Glucose? "
    assert question_stem({"task": "T9", "question": "Na?" + ABSTAIN_CLAUSE}) == "Na? "
    # glued to the format, "13" stands before the space the format leaves: it is stated
    assert leak("T1", "13 mg/dL", "Was glucose 13" + FMT["T1"]) == T1_GOLD.format("13 mg/dL")
    # T9's cue "insufficient" is in the clause: a stem with only the clause carries no cue
    assert leak("T9", "insufficient information", "Sodium on 2150-01-02? " + ABSTAIN_CLAUSE) is None
    assert leak("T9", "140 mEq/L", "Sodium on 2150-01-02? " + FMT["T9"]) is None


def test_a_task_without_a_format_keeps_its_whole_question():
    q = "Glucose 1.3? " + ABSTAIN_CLAUSE
    assert question_stem({"task": "TX", "question": q}) == "Glucose 1.3?  "
    assert question_stem({"task": "T1"}) == ""  # no question at all


@pytest.mark.parametrize("task", ["T7", "T7R"])
def test_t7_option_lines_and_the_word_options_are_not_the_stem(task):
    q = "Which drug was started on 2150-01-02?" + OPTION_BLOCK + FMT[task]
    assert question_stem({"task": task, "question": q}).split() == [
        "Which", "drug", "was", "started", "on", "2150-01-02?"
    ]  # fmt: skip
    assert leak(task, "A", q, options=OPTIONS, subtype="explicit") is None
    # an option named "Options": the word "Options:" above the block is not the answer
    opts = ["Options", "Insulin", "Warfarin", "Aspirin"]
    q = "Which drug?\nOptions:\nA. Options\nB. Insulin\nC. Warfarin\nD. Aspirin\n"
    assert leak(task, "A", q, options=opts, subtype="explicit") is None


def test_option_lines_stay_in_the_stem_of_other_tasks():
    q = "Which?\nA. Metformin\n"
    assert question_stem({"task": "T1", "question": q}) == q


# --------------------------------------------------------------------------- T1 / T1R / T1F


@pytest.mark.parametrize(
    ("gold", "question", "leaks"),
    [
        ("1.90 mg/dL", "Creatinine 1.9 on 2150-01-02?", True),  # 1.90 = 1.9 as decimals
        ("1.9 mg/dL", "Creatinine 1.90?", True),
        ("1.9 mg/dL", "Creatinine 1.91 or 11.9?", False),
        ("19 mg/dL", "Creatinine 1.9?", False),
        ("40 mg/dL", "Dose 40mg?", False),  # glued to a word: not stated
        ("45 mg/dL", "Glucose at 2150-01-02 13:45?", False),  # ISO date-time
        ("30 mg/dL", "Glucose at 2150-01-02T13:45:30?", False),
        ("5 mg/dL", "Did it move by 5% or 5 %?", False),  # the similarity rule parameter
        ("7 mg/dL", "Within 7 days, 7 day or 7 or more days?", False),  # T8's window
        ("7 mg/dL", "Within 7 weeks?", True),
        # a removed date or rule parameter leaves one space: a digit right after it is stated
        ("3 mg/dL", "On 2150-01-023?", True),
        ("2 mg/dL", "Within 5%2 visits?", True),
        ("insufficient information", "Glucose 3?", False),  # a gold without a number
    ],
)
def test_t1_states_the_gold_value(gold, question, leaks):
    assert leak("T1", gold, question) == (T1_GOLD.format(gold) if leaks else None)


def test_t1r_relative_and_t1f_stems_state_no_number():
    q = "Creatinine two visits after the first, visit 2?"
    assert leak("T1R", "1.9 mg/dL", q, subtype="relative") == RELATIVE
    assert leak("T1R", "1.9 mg/dL", q, subtype="explicit") is None
    assert leak("T1", "1.9 mg/dL", q, subtype="relative") is None  # only T1R's rule
    assert leak("T1R", "1.9 mg/dL", "Creatinine at the last visit?", subtype="relative") is None
    # the gold value is checked first, in T1R as in T1
    assert leak("T1R", "2 mg/dL", q, subtype="relative") == T1_GOLD.format("2 mg/dL")
    assert leak("T1F", "1.9 mg/dL", q) == (
        "the rejection stem states a number (a date, time or visit number)"
    )
    assert leak("T1F", "1.9 mg/dL", "Creatinine at the last visit?") is None


# --------------------------------------------------------------------------- T2 / T8 labels


@pytest.mark.parametrize(
    ("gold", "question", "reason"),
    [
        ("increased;moderate", "Was it INCREASING?", "the stem contains the gold direction 'increased'"),
        ("increased;moderate", "Was it reincreased?", None),  # not at a word start
        ("increased;moderate", "Increased, decreased or stable?", None),  # all listed
        ("increased;moderate", "Increased or decreased?", "the stem contains the gold direction 'increased'"),
        ("stable;strong", "Was the change strongly marked?", "the stem contains the gold magnitude 'strong'"),
        ("stable;strong", "Weak, moderate or strong?", None),
        ("stable;none", "Was it weak, moderate or none?", None),  # "none" is never a leak
        ("decreased;weak", "Was it stable?", None),  # another label is not the gold's
    ],
)  # fmt: skip
def test_t2_gold_labels(gold, question, reason):
    assert leak("T2", gold, question) == reason


def test_t8_gold_label_and_its_before_after_values():
    meta = json.dumps({"before": {"event_id": "LAB-1", "value": 100.0}, "after": 1.25})
    assert leak("T8", "similar", "Was it similar?", meta=meta) == (
        "the stem contains the gold direction 'similar'"
    )
    assert leak("T8", "similar", "Increased, decreased or similar?", meta=meta) is None
    assert leak("T8", "increased", "Glucose 100 then?", meta=meta) == (
        "the stem states the before/after value(s) ['100']"
    )
    assert leak("T8", "increased", "From 1.250 to 7.5?", meta=meta) == (
        "the stem states the before/after value(s) ['1.25']"
    )
    assert leak("T8", "increased", "Glucose 10 then 1.2?", meta=meta) is None


# --------------------------------------------------------------------------- T3 / T5 / T4


@pytest.mark.parametrize("task", ["T3", "T5"])
def test_the_physician_noted_marker(task):
    marker = "the stem contains the injected 'Physician noted:' marker"
    assert leak(task, "yes", "Given PHYSICIAN NOTED: chest pain, admit?") == marker
    assert leak(task, "yes", "Given the physician noted chest pain, admit?") is None


def test_t4_gold_event_ids_in_any_case():
    assert leak("T4", "LAB-1;RX-2", "Is rx-2 evidence?") == "the stem contains gold event id RX-2"
    assert leak("T4", "LAB-1;RX-2", "Is LAB-1 or RX-2 evidence?") == (
        "the stem contains gold event id LAB-1"
    )
    assert leak("T4", "LAB-1;RX-2", "Is LAB-3 evidence?") is None


# --------------------------------------------------------------------------- T6 values


@pytest.mark.parametrize(
    ("meta", "question", "hit"),
    [
        ({"value_a": 4, "value_b": 7.0}, "A has 4.00 codes, B 7?", ["4", "7"]),
        ({"value_a_float": 100.0}, "A holds 100?", ["100"]),
        ({"value_b_float": {"event_id": "LAB-1", "value": 1.3}}, "B peaked at 1.30?", ["1.3"]),
        ({"value_a": [2, 3.5]}, "A had 3.5?", ["3.5"]),
        ({"value_a": True, "value_b": "4"}, "A 1, B 4?", None),  # a flag or a string: no value
        ({"value_c": 4}, "A 4?", None),  # not a T6 value key
        ({"value_a": 4}, "A 44 or 0.4?", None),
    ],
)
def test_t6_computed_values(meta, question, hit):
    reason = f"the stem states the computed value(s) {hit}" if hit else None
    assert leak("T6", "A", question, meta=json.dumps(meta)) == reason


# --------------------------------------------------------------------------- T7 / T7R


def test_t7_answer_named_outside_the_options():
    q = "Was metformin started?" + OPTION_BLOCK + FMT["T7"]
    named = "the stem names the answer 'metformin' outside the options"
    assert leak("T7", "A", q, options=OPTIONS) == named
    assert leak("T7", "A", "Was metformin-xr started?", options=OPTIONS) == named
    assert leak("T7", "A", "Was metformins started?", options=OPTIONS) is None  # whole words
    assert leak("T7", "B", q, options=OPTIONS) is None  # another option is not the answer
    assert leak("T7", "A", q, options=OPTIONS[:3]) is None  # not four options: not judged
    assert leak("T7", "insufficient information", q, options=OPTIONS) is None
    assert leak("T7", "A", "Which was started?", options=[" "] + OPTIONS[1:]) is None
    # the answer is stripped and lower-cased before the search
    assert leak("T7", "D", "Was ASPIRIN given?", options=OPTIONS[:3] + [" Aspirin "]) == (
        "the stem names the answer 'aspirin' outside the options"
    )


def test_t7r_relative_stem_states_no_number():
    q = "Which drug was started at visit 2?"
    assert leak("T7R", "A", q, options=OPTIONS, subtype="relative") == RELATIVE
    assert leak("T7R", "A", q, options=OPTIONS, subtype="explicit") is None
    assert leak("T7", "A", q, options=OPTIONS, subtype="relative") is None


# --------------------------------------------------------------------------- T9, T10, T11


@pytest.mark.parametrize(
    ("question", "cues"),
    [
        ("Sodium, not recorded or unknown?", ["not recorded", "unknown"]),  # in T9_CUES order
        ("Was sodium MISSING?", ["missing"]),
        ("Sodium, if any?", ["if any"]),
        ("Sodium of anyone, if anyone?", None),  # whole words only
        ("Sodium, unknowns?", None),
    ],
)
def test_t9_abstention_cues(question, cues):
    reason = f"the stem carries abstention cue(s) {cues}" if cues else None
    assert leak("T9", "insufficient information", question) == reason


def test_t10_and_t11_use_their_own_leak_rules():
    # T10 items shown in their gold order; T11 without a cut time (clinlib.tasks.gates.ordering)
    assert leak("T10", "A,B", "Order:\nA. x\nB. y", options=["x", "y"]) == (
        "the items are shown in their gold order"
    )
    assert leak("T11", "A", "Next?", meta="{}") == "meta lacks cut_time"


def test_a_task_without_rules_never_leaks():
    assert leak("TX", "1.9", "Creatinine 1.9? Physician noted: yes") is None


def test_gate_l3_counts_every_question_and_keeps_each_reason_by_task():
    q = pd.DataFrame(
        [
            {"qid": "T1-a", "task": "T1", "gold": "1.9 mg/dL", "question": "Creatinine 1.9?"},
            {"qid": "T1-b", "task": "T1", "gold": "1.9 mg/dL", "question": "Creatinine?"},
            {"qid": "T4-a", "task": "T4", "gold": "LAB-1", "question": "Is LAB-2 evidence?"},
        ]
    )
    assert gate_l3(q) == {
        "T1": (2, [("T1-a", "the stem states the gold value '1.9 mg/dL'")]),
        "T4": (1, []),
    }
