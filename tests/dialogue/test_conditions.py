"""Invented diagnoses written without their code (clinlib.dialogue.conditions): verdicts
worked out by hand on hand-written turns, and on the verifier of a synthesised dialogue."""

from __future__ import annotations

from clinlib.dialogue import synth as D
from clinlib.dialogue import verify as V
from clinlib.dialogue.conditions import (
    condition_stems,
    find_conditions,
    invented_condition_problems,
    vocabulary_conditions,
)
from clinlib.dialogue.lexicon import record_text
from tests.dialogue_fixtures import make_events

HTN = dict(event_id="DX-1", kind="diagnosis", label="Essential (primary) hypertension", code="I10")
A1C = dict(event_id="LAB-1", kind="lab", label="Hemoglobin A1c", code="50852", value_text="9.1")
BY_ID = {"DX-1": HTN, "LAB-1": A1C}
RECORD = record_text(BY_ID.values())


def turn(text, ids=()):
    return dict(turn_idx=0, speaker="clinician", text_tagged=text, event_ids=list(ids))


def test_names_are_found_longest_first_and_word_bounded():
    text = "Your congestive heart failure and high blood pressure; not a heartbeat issue."
    assert find_conditions(text) == ["congestive heart failure", "high blood pressure"]
    assert find_conditions("We talked about strokes of luck and diabetics.") == []
    assert "acute kidney failure" in vocabulary_conditions()
    # status and symptom titles are no invented condition
    assert not any("use of" in n or "chest pain" in n for n in vocabulary_conditions())
    assert vocabulary_conditions(["Unspecified essential hypertension", "Chest pain, other"]) == [
        "essential hypertension"
    ]
    assert "hypertens" in condition_stems("essential hypertension")


def test_an_invented_diagnosis_without_a_code_is_refused():
    got = invented_condition_problems(
        [turn("We also found that you have diabetes.")], RECORD, BY_ID
    )
    assert got == ["turn 0: 'diabetes' is not among the patient's diagnoses"]
    two = turn("You have asthma and a history of stroke.")
    assert invented_condition_problems([two], RECORD, BY_ID) == [
        "turn 0: 'asthma' is not among the patient's diagnoses",
        "turn 0: 'stroke' is not among the patient's diagnoses",
    ]


def test_the_patients_own_diagnosis_in_other_words_is_accepted():
    for text in (
        "We also talked about your hypertension.",
        "Your high blood pressure is being treated.",
        "The essential hypertension is stable.",
    ):
        assert invented_condition_problems([turn(text)], RECORD, BY_ID) == [], text


def test_the_templates_own_lab_explanation_is_allowed_only_beside_its_lab():
    said = "Your Hemoglobin A1c is high, which means your diabetes control needs tightening."
    assert invented_condition_problems([turn(said, ["LAB-1"])], RECORD, BY_ID) == []
    assert invented_condition_problems([turn(said)], RECORD, BY_ID) == [
        "turn 0: 'diabetes' is not among the patient's diagnoses"
    ]


def test_the_verifier_names_the_check_on_a_synthesised_dialogue():
    ev = make_events()
    ev = ev[ev["subject_id"] == 1001]
    res = D.synthesize_dialogue(ev)
    checks = V.verify_dialogue(res.turns, ev, res.coverage).set_index("check")
    assert checks["passed"].all(), checks[~checks["passed"]]
    turns = res.turns.copy()
    i = turns.index[turns["speaker"] == "clinician"][0]
    added = " We also found that you have epilepsy."
    turns.loc[i, "text"] += added
    turns.loc[i, "text_tagged"] += added
    checks = V.verify_dialogue(turns, ev, res.coverage).set_index("check")
    assert checks.index[~checks["passed"]].tolist() == ["no_invented_conditions"]
    assert checks.loc["no_invented_conditions", "severity"] == "hard"
    assert "'epilepsy' is not among the patient's diagnoses" in str(
        checks.loc["no_invented_conditions", "detail"]
    )
