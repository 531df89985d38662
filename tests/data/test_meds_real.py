"""MEDS that keeps its patients (issue 26 §2): unnamed codes excluded and counted, a missing
codes.parquet refused, code families read / used / ignored, content-derived event ids stable
under other patients and splits, and the real-export shapes of the MEDS fixture writer.

Counts on the hand-built dataset are worked out by hand below; the end-to-end checks run on
the synthetic generator's MIMIC shapes turned into a MEDS dataset with every real-export shape
(clinlib.data.sources.meds_fixture.REAL_SHAPES)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.data.build import load
from clinlib.data.events import extract_events
from clinlib.data.sources import synthetic as syn
from clinlib.data.sources.meds import meds_shards, open_meds, read_meds
from clinlib.data.sources.meds.families import (
    FAMILY_COLUMNS,
    UNNAMED_RULE,
    code_families,
    unnamed_exclusions,
)
from clinlib.data.sources.meds_fixture import REAL_SHAPES, MedsShapes, mimic_to_meds
from clinlib.dialogue import synth as D
from clinlib.tasks.generators import t3, t4
from clinlib.tasks.generators.inputs import make_inputs
from tests.hosp_fixture import write_csv_dir

T = pd.Timestamp
MIN_KEPT = 0.9


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


# subject, time, code, numeric_value, text_value
ROWS = [
    (5, None, "GENDER//M", None, None),
    (5, T("2150-01-01"), "MEDS_BIRTH", None, None),
    (5, T("2200-01-01 05:00"), "ED_REGISTRATION", None, None),
    (5, T("2200-01-01 08:00"), "HOSPITAL_ADMISSION//URGENT//EMERGENCY ROOM", None, None),
    (5, T("2200-01-01 08:00"), "TRANSFER_TO//admit//MICU", None, None),
    (5, T("2200-01-01 09:00"), "LAB//50912//mg/dL", 2.0, "2.0"),
    (5, T("2200-01-01 09:00"), "LAB//UNK//mg/dL", 3.0, "3.0"),
    (5, T("2200-01-01 10:00"), "MEDICATION//START//Aspirin", None, None),
    (5, T("2200-01-01 10:00"), "MEDICATION//START//UNK", None, None),
    (5, T("2200-01-01 10:30"), "MEDICATION//Aspirin//Administered", None, None),
    (5, T("2200-01-01 11:00"), "INFUSION_START//225158", 100.0, None),
    (5, T("2200-01-01 11:00"), "Blood Pressure", None, "128/76"),
    (5, T("2200-01-02 10:00"), "MEDICATION//STOP//Aspirin", None, None),
    (5, T("2200-01-02 10:00"), "MEDICATION//STOP//UNK", None, None),
    (5, T("2200-01-03 08:00"), "DIAGNOSIS//ICD//10//I10", None, None),
    (5, T("2200-01-03 08:00"), "DIAGNOSIS//ICD//10//UNK", None, None),
    (5, T("2200-01-03 08:00"), "HOSPITAL_DISCHARGE//HOME", None, None),
    (6, None, "GENDER//F", None, None),
    (6, T("2201-01-01 08:00"), "HOSPITAL_ADMISSION//URGENT//UNK", None, None),
    (6, T("2201-01-01 10:00"), "MEDICATION//START//UNK", None, None),
    (6, T("2201-01-02 08:00"), "HOSPITAL_DISCHARGE//HOME", None, None),
]


def write_rows(root: Path, rows=ROWS, codes: bool = True) -> Path:
    table = pa.table({
        "subject_id": pa.array([r[0] for r in rows], pa.int64()),
        "time": pa.array([r[1] for r in rows], pa.timestamp("us")),
        "code": pa.array([r[2] for r in rows], pa.string()),
        "numeric_value": pa.array([r[3] for r in rows], pa.float32()),
        "text_value": pa.array([r[4] for r in rows], pa.string()),
    })  # fmt: skip
    (root / "data").mkdir(parents=True)
    (root / "metadata").mkdir()
    pq.write_table(table, root / "data" / "0.parquet")
    if codes:
        described = pa.table({"code": ["DIAGNOSIS//ICD//10//I10"],
                              "description": ["Essential (primary) hypertension"]})  # fmt: skip
        pq.write_table(described, root / "metadata" / "codes.parquet")
    return root


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    out = tmp_path_factory.mktemp("meds_real_raw")
    syn.generate_hosp(out, n_patients=160, seed=21, fmt="csv.gz", chunk_patients=160)
    return out


@pytest.fixture(scope="module")
def real(raw, tmp_path_factory):
    """The synthetic MIMIC shapes as a MEDS dataset with every real-export shape."""
    return mimic_to_meds(raw, tmp_path_factory.mktemp("meds_real") / "meds", shapes=REAL_SHAPES)


@pytest.fixture(scope="module")
def cohort_run(real, tmp_path_factory):
    """The cohort stage on ``real`` (profile ``mr``), run once for the module: its output and
    its build folder (the stage's own selection and events serve ``built`` too)."""
    build = tmp_path_factory.mktemp("meds_real_build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", build)
        result = CliRunner().invoke(
            app, ["cohort", "--meds-dir", str(real), "--profile", "mr", "--per-disease", "6"]
        )
        assert result.exit_code == 0, result.output
        arts = {name: load(name, "mr") for name in
                ("cohort", "events", "code_families", "exclusions")}  # fmt: skip
    return result, arts


@pytest.fixture(scope="module")
def built(cohort_run):
    cohort, events = cohort_run[1]["cohort"], cohort_run[1]["events"]
    corpus = D.synthesize_corpus(events, cohort, seed=0)
    return cohort, events, corpus


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> Path:
    """The hand-made dataset of ROWS (with codes.parquet), written once; tests only read it."""
    return write_rows(tmp_path_factory.mktemp("meds_hand") / "m")


# --------------------------------------------------------------------------- unnamed codes


def test_unnamed_codes_feed_no_view_and_are_counted(hand: Path) -> None:
    con = open_meds(hand)
    assert con.execute("SELECT drug FROM prescriptions").fetchall() == [("Aspirin",)]
    assert con.execute("SELECT itemid FROM labevents").fetchall() == [(50912,)]
    assert con.execute("SELECT icd_code FROM diagnoses_icd").fetchall() == [("I10",)]
    ex = unnamed_exclusions(con, [5, 6])
    # by hand: subject 5 has 3 unnamed rows (lab, order, diagnosis), subject 6 one order; the
    # STOP//UNK row is no order (ignored, not excluded)
    assert ex[["table", "subject_id", "value"]].values.tolist() == [
        ["labevents", 5, "LAB//UNK//mg/dL"],
        ["prescriptions", 5, "MEDICATION//START//UNK"],
        ["diagnoses_icd", 5, "DIAGNOSIS//ICD//10//UNK"],
        ["prescriptions", 6, "MEDICATION//START//UNK"],
    ]
    assert set(ex["rule"]) == {UNNAMED_RULE} and set(ex["field"]) == {"code"}
    assert ex["key"].str.fullmatch(r"\d+").all() and ex["key"].is_unique
    assert unnamed_exclusions(con, [6])["value"].tolist() == ["MEDICATION//START//UNK"]


def test_code_families_count_read_used_excluded_ignored(hand: Path) -> None:
    fam = code_families(open_meds(hand)).set_index("family")
    assert list(fam.reset_index().columns) == list(FAMILY_COLUMNS)
    got = fam[["rows", "subjects", "used", "excluded", "ignored", "text_only"]]
    expected = {  # worked out by hand from ROWS
        "MEDICATION//START": (3, 2, 1, 2, 0, 0),
        "MEDICATION//STOP": (2, 1, 0, 0, 2, 0),
        "MEDICATION//<drug>//<event>": (1, 1, 0, 0, 1, 0),
        "LAB": (2, 1, 1, 1, 0, 0),
        "DIAGNOSIS//ICD": (2, 1, 1, 1, 0, 0),
        "HOSPITAL_ADMISSION": (2, 2, 2, 0, 0, 0),
        "HOSPITAL_DISCHARGE": (2, 2, 2, 0, 0, 0),
        "GENDER": (2, 2, 2, 0, 0, 0),
        "MEDS_BIRTH": (1, 1, 1, 0, 0, 0),
        "ED_REGISTRATION": (1, 1, 0, 0, 1, 0),
        "TRANSFER_TO": (1, 1, 0, 0, 1, 0),
        "INFUSION_START": (1, 1, 0, 0, 1, 0),
        "Blood Pressure": (1, 1, 0, 0, 1, 1),
    }
    assert {f: tuple(int(v) for v in r) for f, r in got.iterrows()} == expected
    assert fam["rows"].sum() == len(ROWS)
    assert fam.loc["INFUSION_START", "use"] == "ignored: not used by the kit"
    assert fam.loc["MEDICATION//<drug>//<event>", "use"].startswith("ignored: eMAR")
    assert "1 rows excluded (name_unknown)" in fam.loc["LAB", "use"]


def test_cohort_stage_reports_families_and_unnamed_rows(cohort_run) -> None:
    result, arts = cohort_run
    fam = arts["code_families"].set_index("family")
    assert {"INFUSION_START", "TRANSFER_TO", "DRG", "ICU_ADMISSION", "HCPCS", "Blood Pressure",
            "PROCEDURE//START", "SUBJECT_WEIGHT_AT_INFUSION"} <= set(fam.index)  # fmt: skip
    assert (fam["used"] + fam["excluded"] + fam["ignored"] == fam["rows"]).all()
    assert fam.loc["MEDICATION//START", "excluded"] > 0
    assert fam.loc["Weight (Lbs)", "text_only"] == fam.loc["Weight (Lbs)", "rows"]
    ex = arts["exclusions"]
    unnamed = ex[ex["rule"] == UNNAMED_RULE]
    assert len(unnamed) > 0 and set(unnamed["table"]) == {"prescriptions"}
    assert set(unnamed["subject_id"]) <= set(arts["cohort"]["subject_id"])
    assert f"prescriptions: {len(unnamed)} rows excluded, name unknown" in result.output
    assert "MEDS codes ignored: " in result.output and "INFUSION_START x" in result.output
    # the fixture's NaN / inf / -5 / 1e30 lab values: excluded with their rule, never stated
    lab_rules = set(ex.loc[ex["table"] == "labevents", "rule"])
    assert lab_rules == {"value_not_finite", "value_out_of_bounds"}
    events = arts["events"]
    assert events.loc[events["kind"] == "medication", "label"].notna().all()
    values = events.loc[events["kind"] == "lab", "value"]
    assert values.notna().all() and (values.abs() <= 30000).all()  # widest bound: triglycerides


# --------------------------------------------------------------------------- codes.parquet


def test_missing_codes_parquet_is_refused_at_the_cohort_stage(tmp_path: Path, tmp_build) -> None:
    meds = write_rows(tmp_path / "m", codes=False)
    result = CliRunner().invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "nc"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert str(meds / "metadata" / "codes.parquet") in lines[0]
    assert "no such file" in lines[0] and "no ICD vocabulary to fall back on" in lines[0]


# --------------------------------------------------------------------------- stable ids


def _events(meds: Path, subjects) -> pd.DataFrame:
    return extract_events(open_meds(meds), subjects).set_index("event_id")


def test_event_ids_are_the_same_from_a_subset_and_from_the_whole(real: Path, built, tmp_path):
    cohort = built[0]["subject_id"].tolist()
    full = built[1].set_index("event_id")
    # the subset: one split folder removed (other patients, other shards)
    subset = tmp_path / "subset"
    shutil.copytree(real, subset)
    shutil.rmtree(subset / "data" / "train")
    kept_subjects = set(read_meds(subset)["subject_id"])
    shared = [s for s in cohort if s in kept_subjects]
    assert 0 < len(shared) < len(cohort)
    part = _events(subset, shared)
    want = full[full["subject_id"].isin(shared)]
    assert len(part) == len(want) > 0
    assert set(part.index) == set(want.index)  # every id identical, none renumbered
    pd.testing.assert_frame_equal(part.sort_index(), want.sort_index())
    # one shard for everybody instead of 3 splits x 2 shards: the same ids again
    flat = tmp_path / "flat"
    table = pa.concat_tables([pq.read_table(p) for p in meds_shards(real)])
    (flat / "data").mkdir(parents=True)
    pq.write_table(table.sort_by([("subject_id", "ascending"),
                                  ("time", "ascending", "at_start")]), flat / "data" / "0.parquet")  # fmt: skip
    shutil.copytree(real / "metadata", flat / "metadata")
    assert set(_events(flat, cohort).index) == set(full.index)


def test_exact_duplicates_get_distinct_ids_whatever_the_row_order(tmp_path: Path) -> None:
    lab = (5, T("2200-01-01 09:00"), "LAB//50912//mg/dL", 2.0, "2.0")
    rows = ROWS[:6] + [lab, lab] + ROWS[6:]
    a = open_meds(write_rows(tmp_path / "a", rows))
    ids = [r[0] for r in a.execute("SELECT labevent_id FROM labevents WHERE itemid = 50912")
           .fetchall()]  # fmt: skip
    assert len(ids) == 3 and len(set(ids)) == 3
    # other patients' rows before them change nothing
    other = [(1, T("2100-01-01"), "LAB//50912//mg/dL", 2.0, "2.0")]
    b = open_meds(write_rows(tmp_path / "b", other + rows))
    got = b.execute("SELECT labevent_id FROM labevents WHERE subject_id = 5").fetchall()
    assert sorted(r[0] for r in got) == sorted(ids)


# --------------------------------------------------------------------------- end to end


def test_real_shaped_meds_keeps_its_patients_and_t3_t4_have_questions(built) -> None:
    cohort, events, corpus = built
    summary = corpus["dialogue_summary"]
    assert len(cohort) >= 20
    assert events["event_id"].is_unique
    assert summary["kept"].mean() >= MIN_KEPT, summary.loc[~summary["kept"], "drop_reason"]
    inp = make_inputs(events, corpus["event_coverage"], corpus["dialogues"], cohort, summary)
    assert len(t3.generate(inp)) > 0
    assert len(t4.generate(inp)) > 0


def test_fixture_writes_every_real_export_shape(real: Path, tmp_path: Path) -> None:
    names = sorted(p.relative_to(real / "data").as_posix() for p in meds_shards(real))
    assert {n.split("/")[0] for n in names} == {"train", "tuning", "held_out"}
    assert len(names) > 3  # several shards per split
    splits = pq.read_table(real / "metadata" / "subject_splits.parquet").to_pandas()
    df = read_meds(real)
    assert set(splits["subject_id"]) == set(df["subject_id"]) and splits["subject_id"].is_unique
    for split, part in splits.groupby("split"):
        in_folder = {s for p in meds_shards(real) if p.parent.name == split
                     for s in pq.read_table(p, columns=["subject_id"])["subject_id"].to_pylist()}  # fmt: skip
        assert in_folder == set(part["subject_id"])
    starts = df[df["code"].str.startswith("MEDICATION//START//")]
    share = (starts["code"] == "MEDICATION//START//UNK").mean()
    assert 0.05 < share < 0.15  # REAL_SHAPES.unk_drug_pct = 10
    labs = df[df["code"].str.startswith("LAB//")]["numeric_value"].astype("float64")
    assert labs.isna().sum() > 0 and (labs == float("inf")).sum() > 0
    assert (labs == -5).sum() > 0 and ((labs - 1e30).abs() < 1e24).sum() > 0
    hosp = write_csv_dir(tmp_path / "hosp")
    no_codes = mimic_to_meds(hosp, tmp_path / "nc", shapes=MedsShapes(codes=False))
    assert not (no_codes / "metadata" / "codes.parquet").exists()
    assert [p.name for p in meds_shards(no_codes)] == ["0.parquet"]


def test_code_family_table_for_notebook_01(hand: Path) -> None:
    from clinlib.data.report import code_family_table

    fam = code_families(open_meds(hand))
    table = code_family_table(fam)
    assert table["rows"].tolist() == sorted(table["rows"], reverse=True)
    assert table.iloc[0]["family"] == "MEDICATION//START"  # 3 rows, the largest family
    empty = code_family_table(pd.DataFrame(columns=list(FAMILY_COLUMNS)))
    assert empty.empty and "ignored" in empty.columns
