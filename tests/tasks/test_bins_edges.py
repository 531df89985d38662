"""The generators' shared machinery (clinlib.tasks.generators.common) and the recompute's bin
arithmetic (clinlib.tasks.recompute.arithmetic) at their edges, worked out by hand (issue 33,
the ``bins`` mutation group).

Hash-derived values (stable_hash, make_qid, thin, pick_index) are checked against the
documented formula spelt out with ``hashlib`` here: ``stable_hash(*parts)`` is the first 16
hex digits of ``sha1("|".join(parts))`` read as an integer, a qid is ``"<task>-"`` plus the
first 12 hex digits of ``sha1(task | subjects | sorted anchors | subtype | extra)``.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from clinlib.tasks import recompute
from clinlib.tasks.answers import ABSTAIN_CLAUSE, ANSWER_FORMATS
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.generators import common


def _sha_int(text: str) -> int:
    """The documented stable hash: the first 8 bytes of sha1(text), big-endian."""
    return int(hashlib.sha1(text.encode()).hexdigest()[:16], 16)


# --------------------------------------------------------------------------- ids, hashing


def test_stable_hash_is_the_first_64_bits_of_sha1_of_the_joined_parts():
    # sha1("a|1") = 469f9400148c19c6 63c1aa53...: the first 16 hex digits, big-endian
    assert common.stable_hash("a", 1) == 0x469F9400148C19C6 == _sha_int("a|1")
    assert common.stable_hash("a", 1) != common.stable_hash("a1")  # parts joined with "|"
    assert common.stable_hash(None) == _sha_int("None")


def test_make_qid_joins_every_part_in_its_documented_order():
    key = "T2|1,2|LAB-1,LAB-2|2_visits|x,3"  # subjects as ints, anchors sorted, extra joined
    expected = "T2-" + hashlib.sha1(key.encode()).hexdigest()[:12]
    assert expected == "T2-4a0551dd5db5"
    assert common.make_qid("T2", [1.0, np.int64(2)], ["LAB-2", "LAB-1"], "2_visits",
                           ("x", 3)) == expected  # fmt: skip


def test_thin_keeps_per_group_the_smallest_salted_hashes_in_item_order():
    # hashes of "s|<item>": group abc sorts b < a < c, group def sorts e < f < d; unsalted
    # ("<item>") it would be c and d, with the salt None ("None|<item>") a and e, by index a, d
    items = ["a", "b", "c", "d", "e", "f"]
    assert sorted("abc", key=lambda x: _sha_int(f"s|{x}")) == ["b", "a", "c"]
    assert sorted("def", key=lambda x: _sha_int(f"s|{x}")) == ["e", "f", "d"]
    group = lambda s: s in "abc"  # noqa: E731
    assert common.thin(items, key=group, ident=str, cap=1, salt="s") == ["b", "e"]
    assert common.thin(items, key=group, ident=str, cap=2, salt="s") == ["a", "b", "e", "f"]
    # ident is what gets hashed: "s|A", "s|B", ... sort C < A < B and F < E < D
    assert common.thin(items, key=group, ident=str.upper, cap=1, salt="s") == ["c", "f"]


def test_pick_index_hashes_the_qid_with_its_salt():
    # sha1("T6-x|template") mod 7 = 1; with the salt "variant" 6; unsalted ("T6-x") 6
    assert common.pick_index("T6-x", 7) == _sha_int("T6-x|template") % 7 == 1
    assert common.pick_index("T6-x", 7, salt="variant") == _sha_int("T6-x|variant") % 7 == 6
    assert isinstance(common.pick_index("T6-x", 7), int)


# --------------------------------------------------------------------------- rule arithmetic


def test_relative_change_divides_by_the_absolute_first_value():
    assert common.relative_change(-2, -1.9) == Fraction(1, 20)  # 0.1 / |-2|
    assert common.relative_change(4, 1) == Fraction(-3, 4)
    assert common.exact(Fraction(1, 3)) == Fraction(1, 3)  # a Fraction is kept as is
    assert common.exact(1.3) == Fraction(13, 10)


@pytest.mark.parametrize(
    ("first", "last", "trend", "t8"),
    [
        (1, 1.3, "increased;strong", ("increased", "L+")),  # r = 0.3: a "r > 1" would say no
        (1, 0.7, "decreased;strong", ("decreased", "L-")),
        (1, 2.5, "increased;strong", ("increased", "L+")),  # r = 1.5 > 1
    ],
)
def test_direction_is_the_sign_of_r_not_its_size(first, last, trend, t8):
    assert common.trend_label(first, last) == recompute.trend_gold(first, last) == trend
    assert common.t8_label(first, last) == recompute.t8_gold(first, last) == t8


def test_change_bin_of_a_first_value_of_one():
    # 1 is a legal first value: only 0 is refused
    assert recompute.change_bin(1, 1.04) == (0, "none")
    assert recompute.change_bin(1, 0.5) == (-1, "strong")
    assert recompute.trend_gold(1, 1.04) == "stable;none"


def test_compare_values_keeps_a_decimal_exact():
    # |100 - 94.9999999999999999999| = 5.0000000000000000001 > 0.05 * 100: "A"; as a float
    # the second value would be 95.0 and the pair "similar"
    a, b = Decimal("100"), Decimal("94.9999999999999999999")
    assert recompute.compare_values(a, b) == "A"
    assert recompute.compare_values(b, a) == "B"
    assert recompute.compare_values(a, 95) == "similar"


def test_compare_ab_counts_compare_as_integers():
    assert common.compare_ab(3.9, 3, count=True) == "similar"  # int(3.9) = 3
    assert common.compare_ab("7", 6, count=True) == "A"
    assert common.compare_ab(100, 95) == "similar"  # count defaults to False: the 5 % band


# --------------------------------------------------------------------------- clinical helpers


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # glucose's panel range is 70-100 mg/dL; both ends are inside
        ({"lab_key": "glucose", "value": 100.0}, None),
        ({"lab_key": "glucose", "value": 100.1}, "high"),
        ({"lab_key": "glucose", "value": 70.0}, None),
        ({"lab_key": "glucose", "value": 69.9}, "low"),
        ({"lab_key": "glucose", "value": 85.0}, None),
        # the event's own range wins over the panel's
        ({"lab_key": "glucose", "value": 120.0, "ref_high": 150.0, "ref_low": 60.0}, None),
        ({"lab_key": "glucose", "value": 65.0, "ref_high": 150.0, "ref_low": 60.0}, None),
        ({"lab_key": "glucose", "value": 151.0, "ref_high": 150.0, "ref_low": 60.0}, "high"),
        ({"lab_key": "glucose", "value": 59.0, "ref_high": 150.0, "ref_low": 60.0}, "low"),
        # a missing (None / NaN) own bound falls back to the panel's
        ({"lab_key": "glucose", "value": 101.0, "ref_high": float("nan")}, "high"),
        ({"lab_key": "glucose", "value": 69.0, "ref_low": float("nan")}, "low"),
        ({"lab_key": "glucose", "value": 101.0, "ref_high": None, "ref_low": None}, "high"),
        # LDL has no lower bound: a low value is not "low"
        ({"lab_key": "ldl", "value": 10.0}, None),
        ({"lab_key": "ldl", "value": 131.0}, "high"),
        # an unknown lab has only its own bounds
        ({"lab_key": "mystery", "value": 5.0}, None),
        ({"lab_key": "mystery", "value": 5.0, "ref_high": 4.0}, "high"),
        ({"lab_key": "mystery", "value": 5.0, "ref_low": 6.0}, "low"),
        ({"lab_key": "mystery", "value": 5.0, "ref_high": float("nan")}, None),
        # no value
        ({"lab_key": "glucose", "value": None}, None),
        ({"lab_key": "glucose", "value": float("nan")}, None),
        ({"lab_key": "glucose", "value": pd.NA}, None),  # a nullable column's missing value
        ({"lab_key": "glucose"}, None),
    ],
)
def test_lab_direction(row, expected):
    assert common.lab_direction(row) == expected


def test_family_prefixes_reads_both_tables_and_names_an_unknown_family():
    assert common.family_prefixes("diabetes") == {
        9: ("249", "250"),
        10: ("E08", "E09", "E10", "E11", "E13"),
    }
    assert common.family_prefixes("anemia") == {9: ("285",), 10: ("D63", "D64")}
    with pytest.raises(KeyError, match="unknown diagnosis family 'gout'"):
        common.family_prefixes("gout")


@pytest.mark.parametrize(
    ("code", "version", "expected"),
    [
        (" e87.5 ", 10, ["hyperkalemia"]),  # trimmed, upper-cased, dot removed: E875
        ("E87.1", 10, ["hyponatremia"]),
        ("I12.0", 10, ["hypertension", "ckd"]),  # in two families, in the order asked
        ("403.90", 9.0, ["hypertension", "ckd"]),  # a float version reads as 9
        ("E11.9", "10", ["diabetes"]),
        ("E11.9", 9, []),  # an ICD-10 code read as ICD-9
        ("E11.9", 11, []),  # a version no family lists
        ("E11.9", None, []),
        ("E11.9", float("nan"), []),
    ],
)
def test_families_of(code, version, expected):
    fams = ["diabetes", "hypertension", "ckd", "hyperkalemia", "hyponatremia"]
    assert common.families_of(code, version, fams) == expected


def test_lab_event_meta_names_every_field():
    e = {"subject_id": np.int64(7), "event_id": "LAB-42", "lab_key": "ldl", "code": "50905",
         "date": "2150-03-04", "hadm_id": 2001.0, "visit_idx": np.int64(2), "value": 99.0}  # fmt: skip
    assert common.lab_event_meta(e) == {
        "subject_id": 7,
        "event_id": "LAB-42",
        "lab": "ldl",
        "itemid": 50905,
        "itemids": [50906, 50905],  # the panel's, in priority order
        "date": "2150-03-04",
        "hadm_id": 2001,
        "visit_idx": 2,
    }
    assert common.panel_itemids("glucose") == [50931]


# --------------------------------------------------------------------------- text helpers


@pytest.mark.parametrize(
    ("text", "number", "expected"),
    [
        ("The value was 11 mg/dL.", "11", True),
        ("It ended at 11.", "11", True),  # a full stop is not a decimal
        ("The value was 111.", "11", False),
        ("The value was 0.11.", "11", False),
        ("The value was 11.3.", "11", False),
        ("The value was 11.3.", "11.3", True),
        ("Seen on 2150-11-03.", "11", False),  # inside an ISO date
        ("Seen on 2150-11-03, 11 later.", "11", True),
        ("Seen on 2150-11-03.", "2150", False),
        ("anything", "", False),  # no number is never mentioned
    ],
)
def test_mentions_number(text, number, expected):
    assert common.mentions_number(text, number) is expected


def test_join_dates_and_the_abstain_clause():
    assert common.join_dates(["d1"]) == "d1"
    assert common.join_dates(["d1", "d2"]) == "d1 and d2"
    assert common.join_dates(["d1", "d2", "d3"]) == "d1, d2 and d3"
    assert common.join_dates(["d1", "d2", "d3", "d4"]) == "d1, d2, d3 and d4"
    assert common.abstain_clause() == ABSTAIN_CLAUSE
    assert common.abstain_clause().endswith("insufficient information.")


# --------------------------------------------------------------------------- rows


class _Inputs:
    """What question_row reads of TaskInputs: ``strata`` and ``evidence`` (the real contract:
    ``"<subject_id>:<turn>"`` of the turn covering each event, in order, without repeats)."""

    turn_of = {"LAB-9": 4, "LAB-3": 4, "LAB-5": 7, "RX-1": 2}
    strata = {11: ("ckd", "high"), 12: ("cad", "low")}

    def evidence(self, subject_id, event_ids):
        out = []
        for eid in event_ids:
            tag = f"{int(subject_id)}:{self.turn_of[eid]}"
            if tag not in out:
                out.append(tag)
        return out


TEMPLATES7 = [f"Q{i}: compare {{lab}}." for i in range(7)]


def _t6_row(**kw):
    args = dict(task="T6", subtype="values", subject_ids=[np.int64(11), 12],
                anchors=["LAB-9", "LAB-3"], templates=TEMPLATES7, fields={"lab": "sodium"},
                gold="A", extra_key=("sodium", "2150-01-02"), conflicts=("k1",),
                meta={"b": Fraction(3, 20), "a": np.int64(2),
                      "when": pd.Timestamp("2150-01-02 03:04:05"), "x": np.float32(0.5)})  # fmt: skip
    args.update(kw)
    return common.question_row(_Inputs(), **args)


def test_question_row_with_its_defaults():
    row = _t6_row()
    key = "T6|11,12|LAB-3,LAB-9|values|sodium,2150-01-02"
    qid = "T6-" + hashlib.sha1(key.encode()).hexdigest()[:12]
    assert qid == "T6-a7d1d02ee050"
    assert _sha_int(f"{qid}|template") % 7 == 6  # the template
    assert row == {
        "qid": qid,
        "task": "T6",
        "subtype": "values",
        "subject_ids": [11, 12],
        "question": "Q6: compare sodium. " + ANSWER_FORMATS["T6"],
        "gold": "A",
        "options": [],
        "anchor_event_ids": ["LAB-9", "LAB-3"],
        # both anchors of the first patient (11) sit in turn 4: one tag
        "evidence_turns": ["11:4"],
        "disease": "ckd",  # the first patient's strata
        "tertile": "high",
        "template_id": 6,
        "injection": "",
        # keys sorted; a Fraction as p/q, a Timestamp in ISO, numpy scalars as numbers
        "meta": '{"a": 2, "b": "3/20", "when": "2150-01-02T03:04:05", "x": 0.5}',
        "conflicts": ["k1"],
        "_body": "Q6: compare sodium.",
    }
    assert type(row["template_id"]) is int


def test_question_row_with_every_option_given():
    row = common.question_row(
        _Inputs(), task="T7", subtype="drug", subject_ids=[12], anchors=["RX-1"],
        templates=["A {d}", "B {d}", "C {d}"], fields={"d": "x"}, gold="B", meta={},
        fmt="Reply A or B.", options=("metformin", "insulin"), injection='{"k": 1}',
        evidence_events=[(12, "LAB-5"), (11, "LAB-9"), (12, "LAB-5")], suffix="A) m\nB) i",
    )  # fmt: skip
    # qid T7-03aefbe579d9: sha1("T7-03aefbe579d9|template") mod 3 = 1 -> "B {d}"
    assert row["qid"] == "T7-" + hashlib.sha1(b"T7|12|RX-1|drug|").hexdigest()[:12]
    assert row["template_id"] == 1
    assert row["question"] == "B x\nA) m\nB) i\nReply A or B."
    assert row["_body"] == "B x"
    assert row["options"] == ["metformin", "insulin"]
    assert row["evidence_turns"] == ["12:7", "11:4"]  # the events given, repeats dropped
    assert row["injection"] == '{"k": 1}'
    assert (row["disease"], row["tertile"], row["meta"], row["conflicts"]) == (
        "cad", "low", "{}", [])  # fmt: skip


def test_meta_that_json_cannot_write_is_named():
    with pytest.raises(TypeError, match=r"^meta value \{1\} of type set is not JSON-serialisable$"):
        _t6_row(meta={"bad": {1}})


def test_to_frame_types_sorts_and_drops_the_body():
    rows = [_t6_row(extra_key=(k,)) for k in ("z", "y", "w")]
    qids = [r["qid"] for r in rows]
    df = common.to_frame(rows)
    assert list(df.columns) == [*QUESTION_COLUMNS, "conflicts"]  # no "_body", no index
    assert list(df["qid"]) == sorted(qids)
    assert list(df.index) == [0, 1, 2]
    for c, t in QUESTION_COLUMNS.items():
        if t == "string":
            assert df[c].dtype == "string", c
        elif t == "int64":
            assert df[c].dtype == "int64", c
        else:
            assert df[c].dtype == object, c
    first = next(r for r in rows if r["qid"] == min(qids))
    assert df.loc[0, "subject_ids"] == [11, 12] and df.loc[0, "meta"] == first["meta"]


def test_to_frame_of_no_rows_still_has_the_column_types():
    df = common.to_frame([])
    assert len(df) == 0
    assert df["template_id"].dtype == "int64"
    assert df["qid"].dtype == "string"


def test_to_frame_refuses_a_question_emitted_twice():
    rows = [_t6_row(), _t6_row(gold="B"), _t6_row(extra_key=("other",))]
    qid = rows[0]["qid"]
    with pytest.raises(AssertionError, match=f"^generator emitted question {qid} twice$"):
        common.to_frame(rows)
