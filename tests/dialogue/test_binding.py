"""Fact binding per clause (clinlib.dialogue.binding) and invented entities
(clinlib.dialogue.lexicon), on hand-written turns whose verdicts are worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.dialogue.binding import check_binding, patient_number_problems
from clinlib.dialogue.lexicon import invented_entity_problems, lexicon_names

DAY = pd.Timestamp("2150-01-02 08:00")
EVENTS = {
    "LAB-1": dict(
        event_id="LAB-1",
        kind="lab",
        label="Creatinine",
        value=1.1,
        value_text="1.1",
        unit="mg/dL",
        ref_low=0.5,
        ref_high=1.2,
        time=DAY,
    ),
    "LAB-2": dict(
        event_id="LAB-2",
        kind="lab",
        label="Urea Nitrogen",
        value=14.0,
        value_text="14",
        unit="mg/dL",
        ref_low=6.0,
        ref_high=20.0,
        time=DAY,
    ),
    "LAB-3": dict(
        event_id="LAB-3",
        kind="lab",
        label="Calcium, Total",
        value=7.1,
        value_text="7.1",
        unit="mg/dL",
        ref_low=8.4,
        ref_high=10.3,
        time=DAY,
    ),
    "RX-1": dict(
        event_id="RX-1",
        kind="medication",
        label="Senna",
        value_text="1-2",
        unit="TAB",
        route="PO",
        time=DAY,
    ),
    "RX-2": dict(
        event_id="RX-2",
        kind="medication",
        label="Cefepime",
        value_text="2",
        unit="g",
        route="IV",
        time=DAY,
    ),
    "DX-1": dict(event_id="DX-1", kind="diagnosis", label="Hypertension", code="I10", time=DAY),
    "DX-2": dict(event_id="DX-2", kind="diagnosis", label="Anemia", code="D649", time=DAY),
    "ADM-1": dict(
        event_id="ADM-1",
        kind="admission",
        label="Admission",
        code="EW EMER.",
        time=pd.Timestamp("2150-01-01 10:00"),
    ),
}


def turn(text, *ids, speaker="clinician"):
    return dict(
        turn_idx=0, speaker=speaker, text_tagged=f"{text} [{', '.join(ids)}]", event_ids=list(ids)
    )


def problems(text, *ids):
    return check_binding([turn(text, *ids)], EVENTS)


def test_the_template_sentence_binds():
    got = problems(
        "On 2150-01-02, your Creatinine was 1.1 mg/dL and Urea Nitrogen was 14 mg/dL.",
        "LAB-1",
        "LAB-2",
    )
    assert got == {"values_bound": [], "polarity_kept": []}


def test_two_values_swapped_in_one_sentence_fail():
    # the counterexample: each value is now beside the other lab's label
    got = problems(
        "On 2150-01-02: Creatinine 14 mg/dL and Urea Nitrogen 1.1 mg/dL.", "LAB-1", "LAB-2"
    )
    assert "turn 0: '14' is stated with 'Creatinine'" in got["values_bound"]
    assert "turn 0: '1.1' is stated with 'Urea Nitrogen'" in got["values_bound"]


def test_a_comma_inside_a_label_does_not_split_its_clause():
    got = problems("Results for 2150-01-02: Calcium, Total 7.1 mg/dL.", "LAB-3")
    assert got["values_bound"] == []


def test_a_reference_bound_beside_the_label_is_explained():
    text = (
        "On 2150-01-02, your Creatinine was 1.1 mg/dL. That Creatinine of 1.1 mg/dL is below "
        "the reference range of 0.5 to 1.2 mg/dL, which we will watch."
    )
    got = problems(text, "LAB-1")
    assert got["values_bound"] == []
    # 1.1 sits inside 0.5..1.2: "below" contradicts a value within range
    assert got["polarity_kept"] == ["turn 0: creatinine is within range but called 'below'"]


def test_unit_date_and_route_are_bound():
    wrong_unit = problems("On 2150-01-02, your Creatinine was 1.1 mmol/L.", "LAB-1")
    assert wrong_unit["values_bound"][0] == "turn 0: '1.1' given in 'mmol/L', not 'mg/dl'"
    wrong_day = problems("On 2150-01-03, your Creatinine was 1.1 mg/dL.", "LAB-1")
    assert "LAB-1 (Creatinine) is never stated" in wrong_day["values_bound"][0]
    meds = "On 2150-01-02 we started Senna 1-2 TAB PO and Cefepime 2 g IV."
    assert (
        problems(meds, "RX-1", "RX-2")["values_bound"] == []
    )  # the "2" of "1-2" is not Cefepime's
    no_route = "On 2150-01-02 we started Senna 1-2 TAB and Cefepime 2 g IV."
    assert "RX-1 (Senna) is never stated" in problems(no_route, "RX-1", "RX-2")["values_bound"][0]


def test_diagnosis_codes_are_bound_to_their_titles():
    ok = "The diagnoses recorded on 2150-01-02 were Hypertension (I10); and Anemia (D649)."
    assert problems(ok, "DX-1", "DX-2")["values_bound"] == []
    swapped = "The diagnoses recorded on 2150-01-02 were Hypertension (D649); and Anemia (I10)."
    assert (
        "turn 0: 'D649' is stated with 'Hypertension'"
        in problems(swapped, "DX-1", "DX-2")["values_bound"]
    )


@pytest.mark.parametrize(
    "text, ok",
    [
        ("You were admitted on 2150-01-01, and the admission type was EW EMER.", True),
        ("You were discharged on 2150-01-01, and the admission type was EW EMER.", False),
    ],
)
def test_an_admission_is_not_told_as_a_discharge(text, ok):
    assert (problems(text, "ADM-1")["values_bound"] == []) is ok


@pytest.mark.parametrize(
    "text, cue",
    [
        ("On 2150-01-02 we never started Cefepime 2 g IV.", "never"),
        ("On 2150-01-02 we stopped Cefepime 2 g IV.", "stopped"),
        ("The diagnoses on 2150-01-02 were not Hypertension (I10).", "not"),
    ],
)
def test_negated_or_stopped_facts_fail(text, cue):
    ids = ["DX-1"] if "Hypertension" in text else ["RX-2"]
    got = problems(text, *ids)["polarity_kept"]
    assert got == [f"turn 0: {cue!r} in a sentence stating a cited fact"]


def test_high_low_flip_against_the_event_direction():
    high = "On 2150-01-02 the Calcium, Total of 7.1 mg/dL is above the range, which is high."
    assert problems(high, "LAB-3")["polarity_kept"] == [
        "turn 0: calcium, total is low but the text says otherwise"
    ]
    low = "On 2150-01-02 the Calcium, Total of 7.1 mg/dL is below the range, which we treat."
    assert problems(low, "LAB-3")["polarity_kept"] == []


def test_patient_numbers_and_invented_entities():
    t = turn("I lost 5 pounds and I am allergic to penicillin.", speaker="patient")
    t["event_ids"], t["text_tagged"] = [], t["text_tagged"].split(" [")[0]
    assert patient_number_problems([t]) == ["turn 0: patient line holds '5'"]
    got = invented_entity_problems([t], EVENTS.values(), EVENTS)
    assert got == [
        "turn 0: 'penicillin' is not in the patient's record",
        "turn 0: 'allergic' but no cited event is an allergy",
    ]
    own = dict(event_id="DX-9", kind="diagnosis", label="Allergy to penicillin", code="Z880")
    t2 = dict(t, event_ids=["DX-9"])
    assert invented_entity_problems([t2], [*EVENTS.values(), own]) == []
    assert {"codeine", "sulfamethoxazole", "penicillin", "latex"} <= set(lexicon_names())


def test_a_number_the_patients_own_cited_statement_states_is_allowed():
    # an injected constraint (a monthly cost limit) is the patient's own words: its number may
    # stand in the patient line that cites it, and nowhere else
    said = "I can't spend more than 20 dollars a month on medicines."
    stmt = {"event_id": "INJ-COST-1", "kind": "statement", "label": said}
    t = turn(said, speaker="patient")
    t["event_ids"], t["text_tagged"] = ["INJ-COST-1"], said
    assert patient_number_problems([t], {"INJ-COST-1": stmt}) == []
    assert patient_number_problems([t]) == ["turn 0: patient line holds '20'"]
    other = dict(t, text_tagged="I can't spend more than 30 dollars a month on medicines.")
    assert patient_number_problems([other], {"INJ-COST-1": stmt}) == [
        "turn 0: patient line holds '30'"
    ]
    lab = {"event_id": "LAB-9", "kind": "lab", "label": "20"}
    assert patient_number_problems([dict(t, event_ids=["LAB-9"])], {"LAB-9": lab}) == [
        "turn 0: patient line holds '20'"
    ]


def test_cited_ids_may_come_as_an_array():
    # event_ids read back from parquet are numpy arrays (an empty one has no truth value)
    import numpy as np

    said = "I can't spend more than 20 dollars a month on medicines."
    stmt = {"event_id": "INJ-COST-1", "kind": "statement", "label": said}
    t = turn(said, speaker="patient")
    t["text_tagged"] = said
    t["event_ids"] = np.array(["INJ-COST-1"])
    assert patient_number_problems([t], {"INJ-COST-1": stmt}) == []
    t["event_ids"] = np.array([], dtype=object)
    assert patient_number_problems([t], {"INJ-COST-1": stmt}) == ["turn 0: patient line holds '20'"]


def test_a_thousands_comma_does_not_end_the_clause():
    # found by the keep-every-diagnosis what-if on quick: "25,000 UNIT IV" split at its comma
    # left the route in another clause and refused a faithful template sentence
    hep = dict(
        event_id="RX-9",
        kind="medication",
        label="Heparin (Porcine)",
        value_text="25,000",
        unit="UNIT",
        route="IV",
        time=DAY,
    )
    t = turn("On 2150-01-02 we started Heparin (Porcine) 25,000 UNIT IV.", "RX-9")
    assert check_binding([t], {"RX-9": hep}) == {"values_bound": [], "polarity_kept": []}
    # a comma after a number that is no thousands separator still ends the clause
    swapped = "On 2150-01-02, your Creatinine was 14, Urea Nitrogen was 1.1 mg/dL."
    assert problems(swapped, "LAB-1", "LAB-2")["values_bound"]
