"""The plausibility screen of the cohort stage (issue 26 §1): impossible source rows are
excluded with their rule, counted and reported, never turned into events; known alternative
units are converted. Expected rows and values worked out by hand in tests/hosp_fixture.py."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.data import plausibility as pl
from clinlib.data.build import SourceSpec, load, open_source
from clinlib.data.cohort import select_cohort
from clinlib.data.events import extract_events
from tests import hosp_fixture

CLI = CliRunner()


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


@pytest.fixture()
def implausible(tmp_path):
    return hosp_fixture.write_csv_dir(tmp_path / "mimic", implausible=True)


def _screen(root):
    con = duckdb.connect()
    open_source(SourceSpec("mimic", root, True), con=con)
    bad_adm, n_adm = pl.screen_admissions(con)
    result = select_cohort(con, per_disease=100, seed=0)
    events = extract_events(con, result.cohort["subject_id"].tolist())
    bad_lab, n_lab = pl.lab_exclusions(con)
    return result, events, bad_adm, n_adm, bad_lab, n_lab


def test_each_impossible_row_is_excluded_with_its_rule(implausible):
    expected = hosp_fixture.build(implausible=True)["_implausible"]
    wrong_unit = hosp_fixture.build()["_wrong_unit"]["labevent_id"].iloc[0]
    result, events, bad_adm, n_adm, bad_lab, n_lab = _screen(implausible)
    adm = expected[expected["kind"] == "admission"]
    assert dict(zip(bad_adm["key"].astype(int), bad_adm["rule"], strict=True)) == dict(
        zip(adm["key"], adm["rule"], strict=True)
    )
    assert n_adm == 16 + 4
    labs = expected[(expected["kind"] == "lab") & expected["rule"].notna()]
    want = dict(zip(labs["key"], labs["rule"], strict=True)) | {wrong_unit: "unit_not_convertible"}
    assert dict(zip(bad_lab["key"].astype(int), bad_lab["rule"], strict=True)) == want
    # the funnel is the hand-worked one: no impossible admission made anyone eligible
    assert result.attrition["n_patients"].tolist()[:6] == hosp_fixture.EXPECTED_FUNNEL
    # nothing excluded is stated: no event of an excluded admission or lab, no year 9999
    ids = set(events["event_id"])
    for key in adm["key"]:
        assert f"ADM-{key}" not in ids and f"DIS-{key}" not in ids
    for key in want:
        assert f"LAB-{key}" not in ids
    assert events["time"].dt.year.max() < 2200
    # visits stay numbered 0.. without the excluded stays
    assert sorted(events.loc[events["subject_id"] == 7, "visit_idx"].unique()) == [0, 1]


def test_known_alternative_units_are_converted(implausible):
    expected = hosp_fixture.build(implausible=True)["_implausible"]
    converted = expected[(expected["kind"] == "lab") & expected["rule"].isna()]["key"].tolist()
    _, events, *_ = _screen(implausible)
    rows = events.set_index("event_id").loc[[f"LAB-{k}" for k in converted]]
    # rounded to the source's significant digits: 100 umol/L / 88.42 = 1.1310 -> 1.13 mg/dL
    # (3 digits); 5.5 mmol/L * 18.016 = 99.088 -> 99 mg/dL (2 digits); 4.2 mmol/L K = mEq/L
    assert rows["value"].tolist() == [1.13, 99.0, 4.2]
    assert rows["value_text"].tolist() == ["1.1", "99", "4.2"]
    assert rows["unit"].tolist() == ["mg/dL", "mg/dL", "mEq/L"]
    # the range goes with the value: 44 / 88.42 = 0.4976 -> 0.50, 106 / 88.42 = 1.1988 -> 1.2
    assert rows["ref_low"].tolist()[0] == 0.5 and rows["ref_high"].tolist()[0] == 1.2


def test_conversions_are_counted_in_the_cohort_report(implausible, tmp_build):
    result = CLI.invoke(
        app, ["cohort", "--mimic-dir", str(implausible), "--profile", "t", "--allow-drops"]
    )
    assert result.exit_code == 0, result.output
    # glucose and creatinine change number; potassium mmol/L = mEq/L only renames its unit
    assert (
        "converted: labevents: 2 values and their ranges converted to canonical units "
        "(creatinine µmol/L -> mg/dL x1, glucose mmol/L -> mg/dL x1)"
    ) in result.output
    conv = pd.read_parquet(tmp_build / "t" / "conversions.parquet")
    assert conv["rows"].tolist() == [1, 1]


def test_the_default_fixture_loses_only_its_unknown_unit(tmp_path):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    _, _, bad_adm, _, bad_lab, _ = _screen(root)
    assert bad_adm.empty
    assert bad_lab["rule"].tolist() == ["unit_not_convertible"]
    assert bad_lab["value"].tolist() == ["U/L"]


def test_the_stage_fails_past_the_drop_threshold_with_the_reasons(implausible, tmp_build):
    result = CLI.invoke(app, ["cohort", "--mimic-dir", str(implausible), "--profile", "t"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    # 6 of 27 panel lab rows of the cohort (22%) are impossible
    assert "cohort (plausibility): 6 of 27 panel lab rows dropped (22% > 20% allowed)" in lines[0]
    assert "'value_out_of_bounds' x2" in lines[0] and "'unknown_hadm_id' x1" in lines[0]
    assert not (tmp_build / "t" / "events.parquet").exists()


def test_accepted_drops_are_reported_and_written(implausible, tmp_build):
    result = CLI.invoke(
        app, ["cohort", "--mimic-dir", str(implausible), "--profile", "t", "--allow-drops"]
    )
    assert result.exit_code == 0, result.output
    assert (
        "excluded: admissions: 4 rows excluded as implausible ('admission_after_death' x1, "
        "'admittime_out_of_range' x1, 'age_at_admission_out_of_range' x1, "
        "'discharge_before_admission' x1)"
    ) in result.output
    assert "excluded: labevents: 6 rows excluded as implausible" in result.output
    table = load("exclusions", "t")
    assert list(table.columns) == list(pl.EXCLUSION_COLUMNS)
    assert table.groupby("table").size().to_dict() == {"admissions": 4, "labevents": 6}
    row = table[table["rule"] == "admittime_out_of_range"].iloc[0]
    assert (row["key"], row["field"], row["value"]) == ("709", "admittime", "9999-12-20 08:00:00")


def test_meds_impossible_values_are_excluded(implausible, tmp_path, tmp_build):
    from clinlib.data.sources.meds_fixture import mimic_to_meds

    meds = mimic_to_meds(implausible / "hosp", tmp_path / "meds")
    shard = sorted((meds / "data").rglob("*.parquet"))[0]
    table = pq.read_table(shard)
    labs = table.filter(pa.compute.starts_with(table["code"], "LAB//50912//"))
    nan_row = labs.slice(0, 1).set_column(
        labs.schema.get_field_index("numeric_value"), "numeric_value",
        pa.array([float("nan")], type=labs.schema.field("numeric_value").type),
    )  # fmt: skip
    both = pa.concat_tables([table, nan_row]).sort_by(
        [("subject_id", "ascending"), ("time", "ascending", "at_start")]
    )  # MEDS order: by subject, then time, static rows first
    pq.write_table(both, shard)
    result = CLI.invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "m", "--allow-drops"])
    assert result.exit_code == 0, result.output
    got = load("exclusions", "m")
    lab_rules = got.loc[got["table"] == "labevents", "rule"].value_counts().to_dict()
    # float32 numeric_value: 1e308 and inf are both infinite; -5 out of bounds; the added NaN
    assert lab_rules.get("value_not_finite", 0) == 3
    assert lab_rules.get("value_out_of_bounds", 0) == 1
    adm_rules = set(got.loc[got["table"] == "admissions", "rule"])
    assert "admittime_out_of_range" in adm_rules
    events = load("events", "m")
    assert events["time"].dt.year.max() < 2200
    assert not (events["value"].abs() > 1e6).any()


def test_the_gold_recompute_sees_the_rows_the_events_were_built_from(implausible, tmp_build):
    from clinlib.tasks.gates.run import _load_inputs
    from clinlib.tasks.recompute import load_raw

    args = ["cohort", "--mimic-dir", str(implausible), "--profile", "t", "--allow-drops"]
    assert CLI.invoke(app, args).exit_code == 0
    events = load("events", "t")
    unscreened = duckdb.connect()
    open_source(SourceSpec("mimic", implausible, True), con=unscreened)
    before = load_raw(unscreened, [1, 7, 8])
    # without the screen the recompute would number 4 stays for patient 7 (9999 and 2250 too)
    assert set(before.visit_of(7)) == {701, 702, 709, 710}
    # the gates' own connection (run_gates without raw_con) applies exclusions.parquet
    _, _, con = _load_inputs("t", events, events, None)
    raw = load_raw(con, [1, 7, 8])
    for sid in (1, 7, 8):
        told = events[(events["subject_id"] == sid) & (events["kind"] == "admission")]
        assert {h: v["visit_idx"] for h, v in raw.visit_of(sid).items()} == dict(
            zip(told["hadm_id"], told["visit_idx"], strict=True)
        )
    excluded = set(load("exclusions", "t").query("table == 'labevents'")["key"].astype(int))
    assert excluded and not excluded & set(raw.labs["labevent_id"].astype(int))
    # ... which the unscreened source does hold
    held = set(unscreened.execute("SELECT labevent_id FROM labevents").df()["labevent_id"])
    assert excluded <= held


def test_exclusion_table_counts_rows_and_patients_per_rule():
    from clinlib.data.report import exclusion_table

    ex = pd.DataFrame(
        {
            "table": ["labevents", "labevents", "labevents", "admissions"],
            "rule": ["value_out_of_bounds", "value_out_of_bounds", "unknown_hadm_id",
                     "admission_after_death"],
            "key": ["1", "2", "3", "101"],
            "subject_id": [1, 1, 2, 1],
            "field": ["valuenum", "valuenum", "hadm_id", "admittime"],
            "value": ["-5", "1e308", "999", "2153-03-01"],
        }
    )  # fmt: skip
    got = exclusion_table(ex)
    assert got.to_dict("records") == [
        {"table": "admissions", "rule": "admission_after_death", "field": "admittime",
         "rows": 1, "patients": 1},
        {"table": "labevents", "rule": "value_out_of_bounds", "field": "valuenum", "rows": 2,
         "patients": 1},
        {"table": "labevents", "rule": "unknown_hadm_id", "field": "hadm_id", "rows": 1,
         "patients": 1},
    ]  # fmt: skip
    assert exclusion_table(ex.iloc[:0]).empty


def test_the_gold_recompute_converts_known_units_as_the_events_do(implausible, tmp_build):
    from clinlib.tasks.gates.run import _load_inputs
    from clinlib.tasks.recompute import load_raw

    args = ["cohort", "--mimic-dir", str(implausible), "--profile", "t", "--allow-drops"]
    assert CLI.invoke(app, args).exit_code == 0
    events = load("events", "t")
    _, _, con = _load_inputs("t", events, events, None)
    raw = load_raw(con, [1, 7, 8])
    labs = raw.labs.set_index("event_id")
    told = events[events["kind"] == "lab"].set_index("event_id")
    # the recompute's own SQL finds the same lab events, values, texts and units
    assert sorted(labs.index) == sorted(told.index)
    got = labs.loc[told.index, "valuenum"].astype(float).round(6).tolist()
    assert got == told["value"].astype(float).round(6).tolist()
    assert labs.loc[told.index, "value_text"].tolist() == told["value_text"].tolist()
    assert labs.loc[told.index, "unit"].tolist() == told["unit"].tolist()
