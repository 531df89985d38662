"""The verifier checks' branches and messages on a handful of hand-built records
(clinlib.dialogue.checks; issue 33, the last mutation round). A failed check's detail is what
the user reads in dialogue_checks, so each problem is asserted whole: it names the turn, the
event and the value. Events are passed as plain ``{event_id: record}`` mappings, as a caller
without an :class:`~clinlib.dialogue.fields.EventIndex` would.
"""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.dialogue import checks as C
from clinlib.dialogue.budget import BUDGET_REASON
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher, strip_tags

DAY = pd.Timestamp("2150-01-02 08:00")


def _lab(eid: str, label: str, value: str, unit: str = "mEq/L", **extra) -> dict:
    return {"event_id": eid, "kind": "lab", "visit_idx": 0, "time": DAY, "label": label,
            "value_text": value, "unit": unit, **extra}  # fmt: skip


def _turn(idx: int, tagged: str, ids: list[str], visit: int = 0, text: str | None = None):
    return {"turn_idx": idx, "visit_idx": visit, "text_tagged": tagged, "event_ids": ids,
            "text": strip_tags(tagged) if text is None else text}  # fmt: skip


# --------------------------------------------------------------------------- detail_of


def test_detail_lists_three_problems_then_counts_the_rest():
    assert C.MAX_DETAIL_ITEMS == 3
    assert C.detail_of([]) == ""
    assert C.detail_of([], "all fine") == "all fine"
    assert C.detail_of(["a"]) == "a"
    assert C.detail_of(["a", "b", "c"]) == "a; b; c"  # exactly three: nothing more to count
    assert C.detail_of(["a", "b", "c", "d"]) == "a; b; c; and 1 more"
    assert C.detail_of(["a", "b", "c", "d", "e"]) == "a; b; c; and 2 more"


def test_check_row_severity_and_default_detail():
    assert C.check_row(5, "event_ids_exist", 0) == {
        "subject_id": 5, "check": "event_ids_exist", "severity": "hard", "passed": False,
        "detail": "",
    }  # fmt: skip
    assert C.check_row(5, "noise_states_no_patient_fact", 1)["severity"] == "hard"
    assert C.check_row(5, "turn_alternation", True, "x")["severity"] == "soft"


# --------------------------------------------------------------------------- HARD checks


def test_ids_exist_reads_the_tags_as_well_as_event_ids():
    events = {"LAB-1": _lab("LAB-1", "Sodium", "139"), "LAB-2": _lab("LAB-2", "Potassium", "4.1")}
    status = {"LAB-2": {"status": "unusable", "reason": "no unit"}}
    turns = [
        # LAB-9 only in a tag, never in event_ids
        {"turn_idx": 0, "text_tagged": "Sodium 139. [LAB-1] More. [LAB-9]", "event_ids": ["LAB-1"]},
        # LAB-2 listed twice and tagged: one problem
        {"turn_idx": 1, "text_tagged": "K 4.1. [LAB-2]", "event_ids": ["LAB-2", "LAB-2"]},
    ]
    assert C.check_ids_exist(turns, events, status) == [
        "turn 0: LAB-9 is not a source event",
        "turn 1: LAB-2 is unusable (no unit)",
    ]


def test_tags_consistent_names_each_fault_and_its_turn():
    events = {"LAB-1": _lab("LAB-1", "Sodium", "139")}
    turns = [
        _turn(0, "Sodium was 139 mEq/L. [LAB-1]", ["LAB-1"]),  # clean
        _turn(1, "Sodium was fine. [LAB-1] More.", ["LAB-1"], text="Sodium was fine."),
        # a tag left in the plain text: strip_tags(tagged) is "See here." != text
        _turn(2, "See [LAB-1] here.", ["LAB-1"], text="See [LAB-1] here."),
        _turn(3, "Nothing here.", ["LAB-1"]),  # lists LAB-1, tags nothing
    ]
    assert C.check_turns(turns, events, DrugMatcher(DRUG_LEXICON)) == {
        "tags_consistent": [
            "turn 1: text differs from untagged text",
            "turn 2: text differs from untagged text",
            "turn 2: plain text contains a tag",
            "turn 3: tags do not match event_ids",
        ],
        # the tag's id left in the plain text is also a number no cited event explains
        "no_untraced_numbers": ["turn 2: number '1' traces to no cited event"],
        "no_untraced_dates": [],
        "no_untraced_codes": [],
        "no_untraced_drugs": [],
    }


def test_covered_fields_reports_every_covered_event_in_order():
    events = {
        "LAB-1": _lab("LAB-1", "Sodium", "139"),
        "LAB-2": _lab("LAB-2", "Sodium", "140"),
        "LAB-3": _lab("LAB-3", "Sodium", "141"),
        "LAB-4": _lab("LAB-4", "Potassium", "4.1"),
        "LAB-5": _lab("LAB-5", "Sodium", "142"),
    }
    turns = [_turn(0, "On 2150-01-02 Sodium was 139 mEq/L. [LAB-1, LAB-4]", ["LAB-1", "LAB-4"])]
    covered = {
        "LAB-404": 0,  # not a source event
        "LAB-2": None,  # no turn named
        "LAB-3": 7,  # no turn 7
        "LAB-5": 0,  # turn 0 does not list it
        "LAB-4": 0,  # listed, but its label and value are missing (date and unit are there)
        "LAB-1": 0,  # fine
    }
    assert C.check_covered(turns, events, covered) == [
        "LAB-404: covered but not a source event",
        "LAB-2: covered but names no existing turn",
        "LAB-3: covered but names no existing turn",
        "LAB-5: turn 0 does not list it",
        "LAB-4: label 'Potassium' not in turn 0",
        "LAB-4: value '4.1' not in turn 0",
    ]


def _med(eid: str, label: str, visit: int = 0) -> dict:
    return {"event_id": eid, "kind": "medication", "visit_idx": visit, "time": DAY,
            "label": label}  # fmt: skip


def _dx(eid: str, code, title: str, visit: int = 0, kind: str = "diagnosis") -> dict:
    return {"event_id": eid, "kind": kind, "visit_idx": visit, "time": DAY, "code": code,
            "label": title}  # fmt: skip


def test_missed_events_unstated_by_hand():
    events = {
        e["event_id"]: e
        for e in [
            _med("RX-1", "Heparin Flush"),  # cited; its name contains the missed RX-2's
            _dx("DX-1", "I10", "Essential hypertension"),  # cited beside RX-1
            _med("RX-2", "Heparin"),  # missed: "Heparin" occurs only inside "Heparin Flush"
            _dx("DX-2", "E119", "Type 2 diabetes"),  # missed: its code is named in turn 1
            _dx("PX-3", "02HV", "Catheter", kind="procedure"),  # the same for a procedure
            _med("RX-3", "Aspirin", visit=1),  # missed but cited by turn 2
            _dx("PX-2", None, "Chest x-ray", kind="procedure"),  # no code: its title is free
            _med("RX-4", "Warfarin", visit=5),  # missed in a visit without turns
            _dx("PX-9", "0040", "Angioplasty", visit=5, kind="procedure"),  # the same
            _med("RX-5", "Metoprolol"),  # missed: named in turn 1
        ]
    }
    turns = [
        _turn(0, "Continue Heparin Flush; I10 was noted. [RX-1, DX-1]", ["RX-1", "DX-1"]),
        _turn(1, "Code E119 came up, 02HV, a chest x-ray too, and metoprolol. [DX-1]", ["DX-1"]),
        _turn(2, "Take it daily. [RX-3]", ["RX-3"], visit=1),
    ]
    missed = ["RX-3", "DX-2", "PX-3", "RX-2", "PX-2", "RX-4", "PX-9", "RX-5", "NOT-AN-EVENT"]
    assert C.check_missed(turns, events, missed) == [
        "RX-3: missed but cited by a turn",
        "DX-2: code E119 named in turn 1",
        "PX-3: code 02HV named in turn 1",
        "RX-5: Metoprolol named in turn 1",
    ]
    assert C.check_missed(turns, events, ["NOT-AN-EVENT"]) == []


def _adm(visit: int, day: str) -> dict:
    return {"event_id": f"ADM-{visit}", "kind": "admission", "visit_idx": visit,
            "time": pd.Timestamp(day)}  # fmt: skip


def test_time_order_messages_for_turn_and_visit_numbering():
    events = [_adm(0, "2150-01-01"), _adm(1, "2150-02-01")]
    by_id = {e["event_id"]: e for e in events}
    # turn_idx 0, 2, 1; visits 0, 1, 0 (the decrease is between neighbours 2 and 3)
    turns = [{"turn_idx": 0, "visit_idx": 0}, {"turn_idx": 2, "visit_idx": 1},
             {"turn_idx": 1, "visit_idx": 0}]  # fmt: skip
    assert C.check_time_order(turns, events, by_id, {}) == [
        "turn_idx is not 0..n-1 in order",
        "visit_idx decreases along the dialogue",
    ]


def test_time_order_skips_covered_rows_it_cannot_place():
    events = [_adm(0, "2150-01-01"), _adm(1, "2150-02-01"),
              {**_lab("LAB-1", "Sodium", "139"), "visit_idx": 1},
              {**_lab("LAB-2", "Sodium", "140"), "visit_idx": 1}]  # fmt: skip
    by_id = {e["event_id"]: e for e in events}
    turns = [{"turn_idx": 0, "visit_idx": 0}, {"turn_idx": 1, "visit_idx": 1}]
    covered = {
        "NOT-AN-EVENT": 1,  # skipped: no such event
        "LAB-1": None,  # skipped: no turn named
        "ADM-1": 9,  # skipped: no turn 9
        "LAB-2": 0,  # visit 1's lab told in visit 0's turn
    }
    assert C.check_time_order(turns, events, by_id, covered) == ["LAB-2 (visit 1) told in visit 0"]


def _key_lab(eid: str, day: str, label: str = "Creatinine") -> dict:
    return {"event_id": eid, "kind": "lab", "visit_idx": 0, "time": pd.Timestamp(day),
            "label": label, "value": 1.0, "ref_low": 0.5, "ref_high": 1.2, "flag": None}  # fmt: skip


def test_coverage_refuses_a_key_lab_missed_on_the_first_or_last_lab_day():
    labs = [_key_lab("LAB-1", "2150-01-01"), _key_lab("LAB-2", "2150-01-02"),
            _key_lab("LAB-3", "2150-01-03"), _key_lab("LAB-4", "2150-01-01", "Chloride")]  # fmt: skip
    events = {e["event_id"]: e for e in [*labs, _dx("DX-1", "I10", "Hypertension")]}
    status = {e: {"status": "missed", "reason": "rule"} for e in ("LAB-1", "LAB-2", "LAB-3",
                                                                   "LAB-4")}  # fmt: skip
    status["DX-1"] = {"status": "covered", "reason": ""}
    bad, ok = C.check_coverage(events, status, ["LAB-1", "LAB-2", "LAB-3", "LAB-4"])
    # Creatinine is a key lab: normal on the middle day (LAB-2) it may be missed, on the
    # visit's first and last lab days it may not; Chloride is not a key lab
    assert bad == [
        "LAB-1: key lab Creatinine may not be missed on that day",
        "LAB-3: key lab Creatinine may not be missed on that day",
    ]
    assert ok == "1/1 must-cover events covered"


def test_coverage_messages_in_order_with_the_ratio_first():
    events = {
        e["event_id"]: e
        for e in [
            _adm(1, "2150-02-01"),
            _dx("DX-1", "I10", "Hypertension"),
            _dx("DX-2", "E119", "Type 2 diabetes", visit=1),
            _dx("PX-1", "0040", "Angioplasty", kind="procedure"),
            _dx("PX-2", "0041", "Stent", kind="procedure"),
            _dx("PX-3", "0042", "Biopsy", kind="procedure"),  # no coverage row
        ]
    }
    budget = f"{BUDGET_REASON} (visit 1)"
    status = {
        "ADM-1": {"status": "missed", "reason": budget},  # an admission is never left out
        "DX-1": {"status": "covered", "reason": ""},
        "DX-2": {"status": "missed", "reason": budget},  # allowed, but visit 1 then tells none
        "PX-1": {"status": "covered", "reason": ""},
        "PX-2": {"status": "unusable", "reason": "no title"},
        "NOT-AN-EVENT": {"status": "missed", "reason": "rule"},
    }
    bad, ok = C.check_coverage(events, status, ["NOT-AN-EVENT", "ADM-1", "DX-2"])
    # must-cover: DX-1, PX-1, PX-2; covered 2 of 3 = 66.7 %
    assert bad == [
        "coverage 2/3 = 66.7% < 98%; unusable: PX-2 (no title)",
        "PX-3 has no coverage row",
        "NOT-AN-EVENT: missed but not a source event",  # read "a None may not be missed"
        "ADM-1: a admission may not be left out for length",
        "visit 1: none of its diagnoses is told",
    ]
    assert ok == "2/3 must-cover events covered"


def test_visit_diagnoses_counts_usable_diagnoses_per_visit():
    events = {
        e["event_id"]: e
        for e in [
            {**_lab("LAB-1", "Sodium", "139"), "visit_idx": 2},  # not a diagnosis (first)
            _dx("DX-1", "I10", "a"),
            _dx("DX-2", "I11", "b"),
            _dx("DX-3", "I12", "c", visit=1),  # unusable
            _dx("DX-4", "I13", "d", visit=1),  # no coverage row
            _dx("DX-5", "I14", "e", visit=None),  # no visit
            _dx("DX-6", "I15", "f", visit=3),
        ]
    }
    status = {"LAB-1": {"status": "covered"}, "DX-1": {"status": "covered"},
              "DX-2": {"status": "missed"}, "DX-3": {"status": "unusable"},
              "DX-5": {"status": "covered"}, "DX-6": {"status": "missed"}}  # fmt: skip
    assert C._visit_diagnoses(events, status, "covered") == {0: 1, 3: 0}
    assert C._visit_diagnoses(events, status, "") == {0: 2, 3: 1}


def test_noise_check_names_the_patients_lab_or_drug_on_its_date():
    events = [
        {**_lab("LAB-1", "Potassium", "5.9")},
        _med("RX-1", "Lisinopril"),
        _dx("DX-1", "I10", "Hypertension"),  # a diagnosis is not a noise fact
        {**_lab("LAB-2", "Sodium", "139"), "time": None},  # no date: never matched
    ]
    real = {**_turn(0, "Your Potassium on 2150-01-02 was 5.9 mEq/L. [LAB-1]", ["LAB-1"]),
            "is_noise": False}  # fmt: skip
    noise = {**_turn(1, "My brother's potassium was high on 2150-01-02; his hypertension "
                        "too; sodium; he takes lisinopril. [NOISE-PROXY-brother-1]",
                     ["NOISE-PROXY-brother-1"]), "is_noise": True}  # fmt: skip
    assert C.check_noise_facts([real, noise], events) == [
        "turn 1: names lab Potassium on 2150-01-02 (LAB-1)",
        "turn 1: names medication Lisinopril on 2150-01-02 (RX-1)",
    ]


# --------------------------------------------------------------------------- SOFT checks


def test_chars_per_visit_and_the_length_row():
    assert C.chars_per_visit([]) == 0.0
    turns = [{"visit_idx": 0, "text": "abc"}, {"visit_idx": 0, "text": "defgh"},
             {"visit_idx": 1, "text": "ij"}]  # fmt: skip
    assert C.chars_per_visit(turns) == 5.0  # 10 characters over 2 visits
    assert C.length_row(7, [], (150.0, 20_000.0)) == {
        "subject_id": 7, "check": "length_outlier", "severity": "soft", "passed": False,
        "detail": "0 chars/visit, bounds 150-20000",
    }  # fmt: skip


def _speaking(*speakers_by_visit: tuple[int, str], text: str = "Fine.") -> list[dict]:
    return [{"turn_idx": i, "visit_idx": v, "speaker": s, "text": text, "text_tagged": text}
            for i, (v, s) in enumerate(speakers_by_visit)]  # fmt: skip


def test_turn_alternation_names_a_visit_the_clinician_opens():
    turns = _speaking((0, "clinician"), (0, "patient"), (1, "clinician"))
    rows = {r["check"]: r for r in C.soft_checks(1, turns)}
    assert rows["turn_alternation"]["passed"] is False
    assert rows["turn_alternation"]["detail"] == (
        "visit 0 opens with clinician; visit 1 opens with clinician"
    )


def test_repeated_sentences_detail_without_and_with_one_sentence():
    rows = {r["check"]: r for r in C.soft_checks(1, _speaking((0, "patient")))}
    assert rows["repeated_sentences"]["passed"] is True  # "Fine." has 1 word: nothing counted
    assert rows["repeated_sentences"]["detail"] == ""
    # one sentence of 64 characters: the detail quotes its first 60 (lower case)
    long = "Abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi end."
    rows = {r["check"]: r for r in C.soft_checks(1, _speaking((0, "patient"), text=long))}
    assert rows["repeated_sentences"]["detail"] == (
        "most repeated: 1x of 1 (100%): "
        "'abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi abcdefghi '"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # 21 values with log10 = 0, 0.05, ..., 1.0: q1 = 0.25, q3 = 0.75 (np.percentile,
        # linear, at positions 5 and 15 exactly), IQR 0.5, fences 10^(0.25 - 1.5) and
        # 10^(0.75 + 1.5); a 0 (log undefined) is left out
        ([], (10**-1.25, 10**2.25)),
        ([0.0], (10**-1.25, 10**2.25)),
    ],
)
def test_length_bounds_tukey_fences_by_hand(extra, expected):
    values = [10 ** (k / 20) for k in range(21)] + extra
    assert values[0] == 1.0  # log10 = 0: counted
    assert C.length_bounds_from(values) == pytest.approx(expected, rel=1e-9)


def test_length_bounds_leave_out_zeros_before_counting_twenty():
    assert C.length_bounds_from([100.0] * 19 + [0.0]) == C.DEFAULT_CHARS_PER_VISIT
