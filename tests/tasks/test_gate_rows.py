"""Gate L0's row reasons, L1's exclusion matching and the gates' shared helpers, each at its
edges and with its exact message, worked out by hand (issue 33 §3; split from
test_thresholds.py, which keeps the thresholds themselves).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from clinlib.tasks import gates
from clinlib.tasks.answers import ALL_TASK_NAMES
from clinlib.tasks.gates.common import (
    as_list,
    check_per_task,
    int_like,
    meta_of,
    require_columns,
)
from clinlib.tasks.gates.structure import (
    _excluded_touch,
    _l0_row,
    _source_tokens,
    excluded_keys,
)
from tests.tasks import test_gates as tg

# --------------------------------------------------------------------------- L1 exclusions
# (the source rows a question rests on, matched against exclusions.parquet; issue 33 §3)


def test_excluded_keys_name_each_table_its_way():
    assert excluded_keys(None) == {} and excluded_keys(pd.DataFrame()) == {}
    excl = pd.DataFrame(
        {"table": ["admissions", "labevents", "prescriptions", "chartevents"],
         "key": [102, " 424242 ", "77", 5], "rule": ["r1", "r2", 3, "r4"]}
    )  # fmt: skip
    assert excluded_keys(excl) == {"hadm:102": "r1", "LAB-424242": "r2", "RX-77": "3"}


def test_source_tokens_from_anchors_and_meta():
    meta = {
        "hadm_id": 201,
        "stays": {"hadm_ids": [202, " 203 ", [206]]},
        "source": {"event_id": "LAB-7"},
        "evidence": {"event_ids": ["RX-8-1", "DX-204-1"], "items": [{"event_id": "PX-205-2"}]},
        "note_hadm_id": "x",  # not an integer
        "flag_hadm_id": True,  # a flag, not a stay
        "other": "LAB-9",  # not under an event-id key
        "n_event_id": 5,  # not a string
    }
    row = {
        "anchor_event_ids": "LAB-5 RX-9-2 ADM-101 DIS-102 DX-103-4 XX-1 LAB DX".split(),
        "meta": json.dumps(meta),
    }
    assert _source_tokens(row) == {
        "LAB-5", "RX-9", "hadm:101", "hadm:102", "hadm:103",  # anchors
        "hadm:201", "hadm:202", "hadm:203", "hadm:206", "LAB-7", "RX-8", "hadm:204",
        "hadm:205",  # meta
    }  # fmt: skip
    assert _source_tokens({"anchor_event_ids": None, "meta": "{}"}) == set()


def test_excluded_touch_names_the_first_hit_and_counts_the_rest():
    keys = {"hadm:101": "r1", "LAB-5": "r2", "RX-9": "r3"}
    one = {"anchor_event_ids": ["ADM-101-0"], "meta": "{}"}
    assert _excluded_touch(one, keys) == "built on an excluded source row: hadm:101 (r1)"
    # sorted: "LAB-5" < "RX-9" < "hadm:101" (capitals first)
    three = {"anchor_event_ids": ["ADM-101-0", "LAB-5", "RX-9-1"], "meta": "{}"}
    assert _excluded_touch(three, keys) == ("built on an excluded source row: LAB-5 (r2) (+2 more)")
    two = {"anchor_event_ids": ["ADM-101-0", "RX-9-1"], "meta": "{}"}
    assert _excluded_touch(two, keys) == "built on an excluded source row: RX-9 (r3) (+1 more)"
    assert _excluded_touch({"anchor_event_ids": ["LAB-6"], "meta": "{}"}, keys) is None


# --------------------------------------------------------------------------- shared helpers


def test_require_names_every_missing_column():
    with pytest.raises(gates.GateInputError, match=r"^events: missing column\(s\) kind, time$"):
        require_columns(pd.DataFrame(columns=["event_id", "subject_id", "code"]), "events")
    require_columns(pd.DataFrame(columns=["event_id", "subject_id", "status"]), "event_coverage")


@pytest.mark.parametrize(
    ("x", "want"),
    [(3, True), (np.int64(3), True), (" 12 ", True), (True, False), (1.0, False),
     ("1.5", False), ("-1", False), (None, False)],
)  # fmt: skip
def test_int_like(x, want):
    assert int_like(x) is want


def test_as_list_and_meta():
    assert as_list((1, 2)) == [1, 2] and as_list(np.array([3])) == [3]
    assert as_list("ab") is None and as_list(None) is None
    assert meta_of({"meta": '{"a": 1}'}) == {"a": 1}
    assert meta_of({"meta": "[1]"}) == {} and meta_of({"meta": "x"}) == {} and meta_of({}) == {}


def test_per_task_counts_every_row_and_records_a_crash_as_a_failure():
    # "" and None are no failure; the reason of "d" is missing: its KeyError is recorded
    rows = pd.DataFrame({"qid": ["a", "b", "c", "d"], "task": ["T1", "T1", "T2", "T2"]})
    reasons = {"a": "bad", "b": "", "c": None}
    got = check_per_task(rows, lambda r: reasons[r["qid"]])
    assert got == {"T1": (2, [("a", "bad")]), "T2": (2, [("d", "KeyError: 'd'")])}


def test_gate_l0_flags_every_copy_of_a_repeated_qid():
    rows = [{**r, "qid": "T1-same"} for r in tg.good_rows() if r["task"] == "T1"] * 2
    n, fails = gates.gate_l0(tg.frame(rows))["T1"]
    assert n == 2 and fails == [("T1-same", "qid is not unique")] * 2
    one = [r for r in tg.good_rows() if r["task"] == "T1"][:1]
    assert gates.gate_l0(tg.frame(one))["T1"] == (1, [])


# --------------------------------------------------------------------------- L0 rows
# each row differs from a valid T1 row in one field; the reason is the first check it fails
L0_OK = {"qid": "T1-a", "task": "T1", "subtype": "normal", "question": "q", "gold": "1.9 mg/dL",
         "disease": "diabetes", "tertile": "low", "meta": "{}", "injection": "",
         "subject_ids": ["1"], "options": [], "anchor_event_ids": [],
         "evidence_turns": [], "template_id": "0"}  # fmt: skip
NOT_STR = "column {} is empty or not a string ({!r})"
TURNS = "evidence_turns {} are not '<subject>:<turn>'"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"task": "T12"}, "task 'T12' is not one of " + ", ".join(ALL_TASK_NAMES)),
        ({"qid": 5}, "qid 5 is not 'T1-<hash>'"),
        ({"qid": "T1-"}, "qid 'T1-' is not 'T1-<hash>'"),  # a hash of one character is enough
        ({"qid": "T10-a"}, "qid 'T10-a' is not 'T1-<hash>'"),
        ({"qid": "T1-dup"}, "qid is not unique"),
        *[({c: "  "}, NOT_STR.format(c, "  "))
          for c in ("subtype", "question", "gold", "disease", "tertile", "meta")],
        ({"gold": None}, NOT_STR.format("gold", None)),
        ({"injection": 5}, "column injection is not a string (5)"),
        ({"injection": "  "}, None),
        ({"injection": "{x"}, "injection is neither '' nor JSON"),
        ({"meta": "x"}, "meta is not JSON"),
        ({"meta": "[]"}, "meta is not a JSON object"),
        ({"subject_ids": "1"}, "column subject_ids is not a list (str)"),
        ({"evidence_turns": None}, "column evidence_turns is not a list (NoneType)"),
        ({"subject_ids": ["x"]}, "subject_ids ['x'] are not integers"),
        ({"subject_ids": []}, "subject_ids []: T1 needs 1 distinct patient(s)"),
        ({"subject_ids": [1, 2]}, "subject_ids [1, 2]: T1 needs 1 distinct patient(s)"),
        ({"task": "T6", "qid": "T6-a", "subject_ids": [1, "1"]},
         "subject_ids [1, '1']: T6 needs 2 distinct patient(s)"),
        ({"anchor_event_ids": ["LAB-1", ""]}, "anchor_event_ids holds a non-string or empty id"),
        ({"anchor_event_ids": [5]}, "anchor_event_ids holds a non-string or empty id"),
        ({"evidence_turns": ["1:2", "12:30"]}, None),
        ({"evidence_turns": ["1:2x", "a", "b", "c"]}, TURNS.format("['1:2x', 'a', 'b']")),
        ({"evidence_turns": [12]}, TURNS.format("[12]")),
        ({"template_id": -1}, "template_id -1 is not a non-negative integer"),
        ({"template_id": "x"}, "template_id 'x' is not a non-negative integer"),
        ({"disease": "flu"}, "disease 'flu' is not an index disease"),
        ({"tertile": "mid"}, "tertile 'mid' is not low/medium/high"),
        ({"options": ["x"]}, "T1 must have no options (found 1)"),
        ({"gold": "1.9mg/dL"}, "gold '1.9mg/dL': not '<value_text> <unit>'"),
        *[({"task": t, "qid": f"{t}-a", "options": ["a", " "]},
           "options hold a non-string or an empty text") for t in ("T7", "T7R", "T10", "T11")],
        ({"task": "T10", "qid": "T10-a", "options": ["a", "a", "b"]}, "T10 items repeat"),
        # T7 repeats are its gold check's to name
        ({"task": "T7", "qid": "T7-a", "gold": "A", "options": ["a", "a", "b", "c"]},
         "gold 'A': options are not distinct"),
        ({"task": "T11", "qid": "T11-a", "options": ["a", "a"]}, "T11 items repeat"),
        ({"task": "T10", "qid": "T10-a", "gold": "A,B", "options": ["a", "b"]},
         "gold 'A,B': needs 3..10 items, has 2"),  # options reach T10's gold check
        ({"task": "T11", "qid": "T11-a", "gold": "A", "options": ["a", "b"]}, None),
    ],
)  # fmt: skip
def test_l0_row_reasons(changes, reason):
    assert _l0_row({**L0_OK, **changes}, {"T1-dup"}) == reason
