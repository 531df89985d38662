"""The synthetic CSV tables taught the real-data shapes (clinlib.data.sources.synthetic.real_shapes):
each shape is written as a real export has it, and the cohort stage meets each with a counted
exclusion, a counted conversion or a one-line refusal (docs/real-data.md)."""

from __future__ import annotations

import gzip
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.data.sources.synthetic.real_shapes import INJECTED_NAME, RealShapes, write_real_shapes
from tests import hosp_fixture

# an order with a strength: 5 mg tablets, 5 mg ordered (patient 6's kept admission)
OXY = {
    "subject_id": 6,
    "hadm_id": 601,
    "pharmacy_id": 7001,
    "starttime": pd.Timestamp("2150-01-01 12:00"),
    "stoptime": pd.Timestamp("2150-01-02 12:00"),
    "drug_type": "MAIN",
    "drug": "OxyCODONE (Immediate Release)",
    "prod_strength": "5mg Tablet",
    "dose_val_rx": "5",
    "dose_unit_rx": "mg",
    "route": "PO/NG",
}
NONE = RealShapes(0, 0, 0, 0, 0)


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _csv(root, table):
    with gzip.open(root / "hosp" / f"{table}.csv.gz", "rt") as fh:
        return pd.read_csv(fh, dtype=str, keep_default_na=False)


def _src(tmp_path):
    return hosp_fixture.write_csv_dir(tmp_path / "src", extra={"prescriptions": [OXY]})


def test_no_shape_copies_every_value(tmp_path):
    src = _src(tmp_path)
    out = write_real_shapes(src, tmp_path / "out", NONE)
    for table in ("labevents", "prescriptions", "admissions", "patients"):
        pd.testing.assert_frame_equal(_csv(out, table), _csv(src, table))


def test_creatinine_in_umol_keeps_its_range_and_is_converted_back(tmp_path, tmp_build):
    src = _src(tmp_path)
    out = write_real_shapes(src, tmp_path / "out", RealShapes(100, 0, 0, 0, 0))
    labs = _csv(out, "labevents").set_index("labevent_id")
    # patient 1's 1.9 mg/dL (range 0.5-1.2): 1.9 x 88.42 = 167.998 -> 168; 0.5 -> 44.21 -> 44;
    # 1.2 -> 106.104 -> 106; the U/L row is not creatinine in mg/dL: left as it was
    assert labs.loc[
        "1001", ["valuenum", "valueuom", "ref_range_lower", "ref_range_upper"]
    ].tolist() == ["168", "umol/L", "44", "106"]
    assert labs.loc["1007", "valueuom"] == "U/L"
    res = CliRunner().invoke(
        app, ["cohort", "--mimic-dir", str(out), "--profile", "t", "--allow-drops"]
    )
    assert res.exit_code == 0, res.output
    assert "(creatinine umol/L -> mg/dL x" in res.output
    events = pd.read_parquet(tmp_build / "t" / "events.parquet").set_index("event_id")
    # back: 168 / 88.42 = 1.90002 -> 3 significant digits -> 1.9; range 44 -> 0.50, 106 -> 1.2
    assert events.loc["LAB-1001", ["value", "unit", "ref_low", "ref_high"]].tolist() == [
        1.9,
        "mg/dL",
        0.5,
        1.2,
    ]


def _last_line(out, profile="t"):
    res = CliRunner().invoke(app, ["cohort", "--mimic-dir", str(out), "--profile", profile])
    return res.exit_code, [ln for ln in res.output.splitlines() if ln.strip()][-1]


def test_a_lab_without_a_unit_is_written_and_excluded(tmp_path, tmp_build):
    """Every panel lab without a unit: none is read as the panel's unit, so none is kept, and
    the stage refuses in one line naming the rule (a stage never passes on mostly-dropped rows)."""
    out = write_real_shapes(_src(tmp_path), tmp_path / "out", RealShapes(0, 100, 0, 0, 0))
    labs = _csv(out, "labevents")
    assert (labs["valueuom"] == "").sum() == (
        labs["valuenum"] != ""
    ).sum() - 5  # 5 magnesium (non-panel): 2 + 3
    rc, line = _last_line(out)
    assert rc == 2
    assert re.fullmatch(
        r"error: cohort \(plausibility\): 0 of (\d+) panel lab rows kept: "
        r"'unit_missing' x\1",
        line,
    ), line


def test_an_instruction_shaped_drug_name_never_reaches_an_event(tmp_path, tmp_build):
    out = write_real_shapes(_src(tmp_path), tmp_path / "out", RealShapes(0, 0, 0, 100, 0))
    assert set(_csv(out, "prescriptions")["drug"]) == {INJECTED_NAME}
    rc, line = _last_line(out)
    assert rc == 2
    assert re.fullmatch(
        r"error: cohort \(plausibility\): 0 of (\d+) medication order rows "
        r"kept: 'drug_name_instruction_shaped' x\1",
        line,
    ), line


def test_a_duplicated_admission_row_is_refused_in_one_line(tmp_path, tmp_build):
    out = write_real_shapes(_src(tmp_path), tmp_path / "out", RealShapes(0, 0, 0, 0, 1))
    adm = _csv(out, "admissions")
    assert len(adm) == len(_csv(_src(tmp_path / "again"), "admissions")) + 1
    res = CliRunner().invoke(app, ["cohort", "--mimic-dir", str(out), "--profile", "t"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "admissions" in lines[0] and "hadm_id" in lines[0], res.output
