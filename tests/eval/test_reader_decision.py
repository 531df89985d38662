"""The offline readers on T11 decision questions (clinlib.eval.readers.decision): each rule on a
hand-written prompt, answers worked out by hand."""

from __future__ import annotations

from clinlib.eval.readers.decision import answer_decision, decision_subtype, usual_stay_days
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T11_TEMPLATES

STREAM = (
    "2150-02-01 07:00 labs: Glucose 180 mg/dL (abnormal)\n"
    "2150-02-01 08:00 admission: URGENT\n"
    "2150-02-01 10:00 medication: Metformin 500 mg PO\n"
    "2150-02-01 22:15 medication: Heparin 5000 UNIT SC\n"
    "2150-02-02 06:00 labs: Potassium 4.1 mEq/L; Sodium 139 mEq/L"
)
# Two earlier stays: 2150-01-01 .. 01-04 (3 days) and 2150-01-10 .. 01-15 (5 days): median 4.
MEMORY = (
    "Visit 1 (2150-01-01)\nClinician: You came in on 2150-01-01. Insulin 10 UNIT SC was "
    "started. You were discharged on 2150-01-04 to HOME.\n\n"
    "Visit 2 (2150-01-10)\nClinician: Our records show an admission on 2150-01-10. Aspirin "
    "81 mg PO was given. The stay ended on 2150-01-15.\n"
)


def _q(subtype: str, now: str, options: list[str], **fields) -> str:
    body = T11_TEMPLATES[subtype][0].format(stream=STREAM, now=now, **fields)
    opts = "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(options))
    return f"{body}\n{opts}\nReply with the letter of one option only."


def test_recognises_each_subtype():
    assert decision_subtype(_q("next_action", "2150-02-02 07:00", ["lab test"])) == "next_action"
    assert decision_subtype(_q("argument", "2150-02-02 07:00", ["x"], action="lab test",
                               what="lab test")) == "argument"  # fmt: skip
    assert decision_subtype(_q("discharge", "2150-02-02 07:00", ["yes", "no"])) == "discharge"
    assert decision_subtype("What was the patient's Potassium on 2150-03-04?") is None


def test_next_action_repeats_the_last_kind():
    q = _q("next_action", "2150-02-02 07:00", ["procedure", "medication order", "lab test"])
    assert answer_decision("", q) == "C"  # the last line is a labs line
    q2 = _q("next_action", "2150-02-02 07:00", ["procedure", "medication order"])
    assert answer_decision("", q2) == ABSTAIN  # its kind is no option
    assert answer_decision("", q2, eager=True) == "A"


def test_argument_takes_the_latest_mention():
    q = _q("argument", "2150-02-02 07:00",
           ["Insulin 10 UNIT SC", "Metformin 500 mg PO", "Heparin 5000 UNIT SC", "Aspirin 81 mg PO"],
           action="medication order", what="medication (drug, dose and route)")  # fmt: skip
    assert answer_decision("", q) == "C"  # Heparin is the stay's latest order
    q2 = _q("argument", "2150-02-02 07:00", ["Insulin 10 UNIT SC", "Aspirin 81 mg PO", "Lisinopril"],
            action="medication order", what="medication (drug, dose and route)")  # fmt: skip
    assert answer_decision(MEMORY, q2) == "B"  # none in the stay: Aspirin is the memory's latest
    assert answer_decision("", q2) == ABSTAIN
    assert answer_decision("", q2, eager=True) == "A"


def test_discharge_by_the_usual_length_of_stay():
    assert usual_stay_days(MEMORY) == 4.0
    assert usual_stay_days("") is None
    # admitted 02-01: on 02-04 three days have passed (< 4: no); on 02-05 four (yes)
    assert answer_decision(MEMORY, _q("discharge", "2150-02-04 09:00", ["yes", "no"])) == "B"
    assert answer_decision(MEMORY, _q("discharge", "2150-02-05 09:00", ["yes", "no"])) == "A"
    no_memory = _q("discharge", "2150-02-05 09:00", ["yes", "no"])
    assert answer_decision("", no_memory) == ABSTAIN
    assert answer_decision("", no_memory, eager=True) == "B"


def test_usual_stay_without_headers_reads_admission_sentences():
    """A flattened record or discharge notes: stays start at admission sentences (hand values:
    stays of 4 and 2 days -> median 3; of 3 and 2 days -> 2.5)."""
    from clinlib.eval.readers.decision import usual_stay_days

    notes = (
        "Admitted on 2150-01-01; admission type X. Discharged on 2150-01-05 to HOME.\n\n"
        "Admitted on 2150-03-01; admission type X. Discharged on 2150-03-03 to HOME."
    )
    assert usual_stay_days(notes) == 3.0
    flat = (
        "Clinician: You came in on 2150-01-01, and the admission is recorded as URGENT.\n"
        "Clinician: The stay ended on 2150-01-04 with discharge location HOME.\n"
        "Clinician: Our records show an admission on 2150-02-01 with admission type URGENT.\n"
        "Clinician: You were discharged on 2150-02-03 to HOME."
    )
    assert usual_stay_days(flat) == 2.5
    assert usual_stay_days("Clinician: nothing dated") is None
