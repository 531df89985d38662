"""The reference reader on T4 when the record states a lab's range past a decimal value
(issue 26 §3: "Hematocrit 35.0 %" stated at turn 3, answered "insufficient information").

Cause: the reader looked for the stated range with a pattern that could not cross a "." — so
never past "35.0" to "the reference range of 40.0 to 52.0 %" — and fell back to the panel's
range (34-51 %), inside which 35.0 lies. The record's real-MIMIC ranges differ from the
panel's, so on real data the evidence went unseen. Values worked out by hand."""

from __future__ import annotations

from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.base import ABSTAIN
from tests.eval.test_readers import ask

VISIT2 = """
Visit 2 (2150-06-01)
Patient: Hello again.
Clinician: The diagnoses recorded on 2150-06-04 were Anemia, unspecified (D649). [DX-2-1]
"""
TURN3 = (
    "Visit 1 (2150-01-10)\nPatient: I feel tired.\n"
    "Clinician: Results for 2150-01-10: Hemoglobin 12.5 g/dL, Hematocrit 35.0 %. [LAB-7, LAB-8] "
)
REACTION = (
    "That Hematocrit of 35.0 % is below the reference range of 40.0 to 52.0 %, which can mean "
    "anemia. [LAB-8]\n"
)
Q = (
    "At the encounter that began on 2150-06-01, Anemia, unspecified (ICD code D649) was coded "
    "for the first time. Which earlier abnormal Hemoglobin or Hematocrit results, documented "
    "before that encounter, are evidence for it? " + ANSWER_FORMATS["T4"]
)


def test_a_range_stated_past_a_decimal_value_is_read():
    # 35.0 < 40.0 (the stated range); Hemoglobin 12.5 lies inside the panel's 11.2-17.5
    assert ask(TURN3 + REACTION + VISIT2, Q) == "LAB-8"


def test_a_repeat_noted_as_still_out_of_range_is_evidence_too():
    later = (
        "Clinician: Also on 2150-01-11: Hematocrit 36.0 %. [LAB-9] "
        "Hematocrit is still below its range. [LAB-9]\n"
    )
    # 36.0 is inside the panel's range; only the record says it is still low
    assert ask(TURN3 + REACTION + later + VISIT2, Q) == "LAB-8;LAB-9"


def test_the_direction_said_wins_over_the_panel_range():
    high = REACTION.replace("is below", "is above")  # said high: not anemia evidence
    assert ask(TURN3 + high + VISIT2, Q) == ABSTAIN


def test_without_any_statement_the_panel_range_decides():
    # nothing said about 35.0 and the panel's 34-51 % holds it: no evidence, abstain
    assert ask(TURN3 + "\n" + VISIT2, Q) == ABSTAIN
    # 33.0 is below the panel's 34
    assert ask(TURN3.replace("35.0", "33.0") + "\n" + VISIT2, Q) == "LAB-8"
