"""The offline readers on relative-time (T1R) questions: every template is recognised, the
k-th measurement of the N-th visit is read from a hand-written record, and a record without
that visit makes the reference reader abstain and the eager one guess."""

from __future__ import annotations

import pytest

from clinlib.eval.policies import eager_policy, reference_policy
from clinlib.eval.prompts import build_messages
from clinlib.eval.reader_relative import RelativeQuestion, recognise_relative
from clinlib.tasks import TASKS
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T1R_RELATIVE_TEMPLATES

RECORD = """Visit 1 (2150-01-10)
Clinician: On 2150-01-10, your Potassium was 4.1 mEq/L. [LAB-1]

Visit 2 (2150-03-02)
Clinician: On 2150-03-02, your Potassium was 5.4 mEq/L and Calcium, Total was 8.1 mg/dL. [LAB-2, LAB-3]
Clinician: Your Potassium of 5.4 mEq/L is above the usual range. [LAB-2]
Clinician: On 2150-03-04, your Potassium was 4.6 mEq/L. [LAB-4]
Clinician: On 2150-03-05, your Potassium was 3.9 mEq/L. [LAB-5]"""


def _ask(template: str, lab: str, ordinal: str, visit: str, record: str = RECORD, eager=False):
    q = template.format(lab=lab, ordinal=ordinal, visit=visit)
    q = f"{q} {TASKS['T1R'].answer_format}"
    policy = eager_policy if eager else reference_policy
    return policy(build_messages({"question": q}, record))


@pytest.mark.parametrize("template", T1R_RELATIVE_TEMPLATES)
def test_every_template_is_recognised(template):
    q = template.format(lab="Calcium, Total", ordinal="third", visit="twenty-first")
    assert recognise_relative(q) == RelativeQuestion("Calcium, Total", 3, 21)


@pytest.mark.parametrize("template", T1R_RELATIVE_TEMPLATES)
def test_kth_measurement_of_the_nth_visit(template):
    # visit 2's potassium days: 03-02 (5.4, restated once), 03-04 (4.6), 03-05 (3.9)
    assert _ask(template, "Potassium", "first", "second") == "5.4 mEq/L"
    assert _ask(template, "Potassium", "second", "second") == "4.6 mEq/L"
    assert _ask(template, "Potassium", "third", "second") == "3.9 mEq/L"
    assert _ask(template, "Potassium", "first", "first") == "4.1 mEq/L"
    assert _ask(template, "Calcium, Total", "first", "second") == "8.1 mg/dL"


def test_absent_visit_or_position_abstains_or_guesses():
    t = T1R_RELATIVE_TEMPLATES[0]
    assert _ask(t, "Potassium", "first", "third") == ABSTAIN
    assert _ask(t, "Potassium", "fourth", "second") == ABSTAIN
    assert _ask(t, "Potassium", "fourth", "second", eager=True) == "3.9 mEq/L"  # the last one
    guess = _ask(t, "Potassium", "first", "third", eager=True)
    assert guess != ABSTAIN and guess.endswith("mEq/L")


def test_t1_wording_is_not_taken_for_a_relative_question():
    assert recognise_relative("What was the patient's Potassium on 2150-03-04?") is None
