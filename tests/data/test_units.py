"""Lab units by what they are (docs/real-data.md): a converted value and its range keep the
source's significant digits; the SQL and Python conversions agree on values worked out by
hand; a MEDS code carrying a known alternative unit is flagged against its own unit's range."""

from __future__ import annotations

import duckdb
import pytest

from clinlib.data import units

# (reported value, factor, by hand): 100 umol/L / 88.42 = 1.13096 -> 3 digits -> 1.13;
# 88 -> 0.99525 -> 2 digits -> 1.0; 44 -> 0.49762 -> 0.50; 106 -> 1.19882 -> 1.20;
# 5.5 mmol/L * 18.016 = 99.088 -> 99; 0.81 mmol/L Ca * 4.008 = 3.24648 -> 3.2;
# 140 g/L * 0.1 = 14.0 -> 14.0; 1.2 * 88.42 = 106.104 -> 6 digits -> back to 1.2
HAND = [
    (100.0, 1 / 88.42, 1.13),
    (88.0, 1 / 88.42, 1.0),
    (44.0, 1 / 88.42, 0.5),
    (106.0, 1 / 88.42, 1.2),
    (5.5, 18.016, 99.0),
    (0.81, 4.008, 3.2),
    (140.0, 0.1, 14.0),
    (106.104, 1 / 88.42, 1.2),
    (4.2, 1.0, 4.2),
]


@pytest.mark.parametrize(("x", "factor", "want"), HAND)
def test_conversion_keeps_the_source_precision(x, factor, want):
    assert units.convert(x, factor) == want
    con = duckdb.connect()
    got = con.execute(
        f"SELECT {units.convert_sql('x', 'f')} FROM (SELECT ?::DOUBLE AS x, ?::DOUBLE AS f)",
        [x, factor],
    ).fetchone()[0]
    assert got == want


def test_significant_digits_of_the_source_text():
    assert [units.sig_digits(v) for v in (88.0, 100.0, 0.5, 106.104, 1e-5)] == [2, 3, 2, 6, 6]


def test_an_unknown_unit_has_no_factor():
    assert units.factor_of("creatinine", "mg/dL") == 1.0
    assert units.factor_of("creatinine", "umol/L") == pytest.approx(1 / 88.42)
    assert units.factor_of("creatinine", "mmol/L") is None  # never assumed canonical
    assert units.factor_of("creatinine", None) is None


def test_conversion_lines_name_lab_units_and_counts():
    import pandas as pd

    conv = pd.DataFrame(
        {
            "lab_key": ["creatinine"],
            "from_unit": ["umol/L"],
            "to_unit": ["mg/dL"],
            "factor": [1 / 88.42],
            "rows": [12],
        }
    )
    assert units.conversion_lines(conv) == [
        "labevents: 12 values and their ranges converted to canonical units "
        "(creatinine umol/L -> mg/dL x12)"
    ]
    assert units.conversion_lines(conv.iloc[:0]) == []


def _meds_events(tmp_path, rows):
    from clinlib.data import plausibility as pl
    from clinlib.data.build import SourceSpec, open_source
    from clinlib.data.events import extract_events
    from tests.data.test_meds_real import write_rows

    root = write_rows(tmp_path / "m", rows)
    con = duckdb.connect()
    open_source(SourceSpec("meds", root, True), con=con)
    pl.screen_admissions(con)
    events = extract_events(con, [5])
    return events, pl.lab_exclusions(con)[0], pl.lab_conversions(con)


def test_meds_creatinine_in_umol_is_judged_in_its_own_unit(tmp_path):
    """A MEDS export without ranges, creatinine as LAB//50912//umol/L: before, the panel's
    mg/dL range was attached as if in µmol/L and converted with the value (range 0.0057 to
    0.0136 mg/dL, every creatinine abnormal)."""
    from tests.data.test_meds_real import ROWS, T

    labs = [
        (5, T("2200-01-01 09:00"), "LAB//50912//umol/L", 88.0, "88"),
        (5, T("2200-01-02 09:00"), "LAB//50912//umol/L", 200.0, "200"),
        (5, T("2200-01-02 10:00"), "LAB//50912//mmol/L", 0.09, "0.09"),  # no such unit here
    ]
    rows = [r for r in ROWS if not r[2].startswith("LAB//")] + labs
    rows.sort(key=lambda r: (r[0], r[1] is not None, r[1] or T("1900-01-01")))
    events, bad, conv = _meds_events(tmp_path, rows)
    cr = events[events["label"] == "Creatinine"].sort_values("time")
    # 88 / 88.42 = 0.995 -> 1.0 mg/dL, normal; 200 / 88.42 = 2.262 -> 2.26, abnormal
    assert cr["value"].tolist() == [1.0, 2.26]
    assert cr["unit"].tolist() == ["mg/dL", "mg/dL"]
    assert cr["ref_low"].tolist() == [0.5, 0.5] and cr["ref_high"].tolist() == [1.2, 1.2]
    assert cr["flag"].isna().tolist() == [True, False]
    # the unit the table does not know is excluded, never assumed to be mg/dL
    assert bad["rule"].tolist() == ["unit_not_convertible"]
    assert bad["value"].tolist() == ["mmol/L"]
    assert conv[["lab_key", "from_unit", "rows"]].values.tolist() == [["creatinine", "umol/L", 2]]


# A creatinine with no unit, in a stay the default fixture keeps (patient 5, admission 501):
# 1.4 could be mg/dL (abnormal) or a mis-keyed µmol/L; it is never read as the panel's unit.
NO_UNIT = {
    "labevent_id": 9901,
    "subject_id": 5,
    "hadm_id": 501,
    "specimen_id": 99010,
    "itemid": 50912,
    "charttime": "2150-01-01 06:30:00",
    "value": "1.4",
    "valuenum": 1.4,
    "valueuom": None,
}


def test_a_lab_without_a_unit_is_excluded_and_counted(tmp_path):
    """CSV path (SQL screen): excluded as unit_missing, listed in the exclusions with field
    valueuom, and no event states it; every other fixture row keeps its fate."""
    import pandas as pd

    from clinlib.data import plausibility as pl
    from clinlib.data.build import SourceSpec, open_source
    from clinlib.data.events import extract_events
    from tests import hosp_fixture

    row = {**NO_UNIT, "charttime": pd.Timestamp(NO_UNIT["charttime"])}
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic", extra={"labevents": [row]})
    con = duckdb.connect()
    open_source(SourceSpec("mimic", root, True), con=con)
    pl.screen_admissions(con)
    events = extract_events(con, [1, 5])
    bad, _ = pl.lab_exclusions(con)
    got = bad[["rule", "key", "field", "value"]].values.tolist()
    # the fixture's own U/L creatinine (patient 1, its 7th lab: 1000 + 7) stays unit_not_convertible
    assert sorted(got) == sorted(
        [
            ["unit_missing", "9901", "valueuom", ""],
            ["unit_not_convertible", "1007", "valueuom", "U/L"],
        ]
    )
    assert "LAB-9901" not in set(events["event_id"])
    lines = pl.summary_lines(bad)
    assert any("'unit_missing' x1" in ln for ln in lines), lines


def test_the_pandas_twin_excludes_a_lab_without_a_unit():
    from clinlib.data.plausibility_pandas import _lab_rule

    assert _lab_rule("creatinine", 1.4, None, None) == (
        "unit_missing",
        pytest.approx(float("nan"), nan_ok=True),
    )
    assert _lab_rule("creatinine", 1.4, " ", None)[0] == "unit_missing"
    assert _lab_rule("creatinine", 1.4, "mg/dL", None) == (None, 1.0)


def test_a_meds_lab_code_without_a_unit_is_excluded(tmp_path):
    """MEDS: LAB//50912//UNK (MEDS-transforms' placeholder for a NULL valueuom)."""
    from tests.data.test_meds_real import ROWS, T

    labs = [
        (5, T("2200-01-01 09:00"), "LAB//50912//mg/dL", 1.0, "1.0"),
        (5, T("2200-01-02 09:00"), "LAB//50912//UNK", 1.4, "1.4"),
    ]
    rows = [r for r in ROWS if not r[2].startswith("LAB//")] + labs
    rows.sort(key=lambda r: (r[0], r[1] is not None, r[1] or T("1900-01-01")))
    events, bad, _ = _meds_events(tmp_path, rows)
    cr = events[events["label"] == "Creatinine"]
    assert cr["value"].tolist() == [1.0]
    assert bad["rule"].tolist() == ["unit_missing"] and bad["value"].tolist() == [""]
