"""Nothing dropped without a row (docs/real-data.md): an excluded stay's diagnoses and
procedures are counted by kind; a duplicated MEDS admission row is de-duplicated with a count
(a conflicting one refused in one line); a MEDS shard holding none of the subjects its split
lists is refused in one line (a counted warning with --allow-drops). Expected values worked out
by hand from tests/hosp_fixture.py."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.data import plausibility as pl
from clinlib.data.build import SourceSpec, open_source
from clinlib.data.events import extract_events
from clinlib.data.sources.meds_fixture import mimic_to_meds
from tests import hosp_fixture

CLI = CliRunner()
# two diagnoses and a procedure on stay 709 (year 9999, excluded) of patient 7
STAY_ROWS = {
    "diagnoses_icd": [
        dict(subject_id=7, hadm_id=709, seq_num=1, icd_code="Z000", icd_version=10),
        dict(subject_id=7, hadm_id=709, seq_num=2, icd_code="R51", icd_version=10),
    ],
    "procedures_icd": [
        dict(subject_id=7, hadm_id=709, seq_num=1, chartdate=pd.Timestamp("9999-12-21"),
             icd_code="0BH17EZ", icd_version=10),
    ],
}  # fmt: skip


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _stay_counts(spec: SourceSpec) -> pd.DataFrame:
    con = duckdb.connect()
    open_source(spec, con=con)
    pl.screen_admissions(con)
    extract_events(con, [1, 7, 8])
    return pl.stay_exclusions(con)


def test_an_excluded_stay_counts_its_diagnoses_and_procedures(tmp_path):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic", implausible=True, extra=STAY_ROWS)
    got = _stay_counts(SourceSpec("mimic", root, True))
    assert got[["table", "rule", "key"]].values.tolist() == [
        ["diagnoses_icd", "admission_excluded", "709-1"],
        ["diagnoses_icd", "admission_excluded", "709-2"],
        ["procedures_icd", "admission_excluded", "709-1"],
    ]


def test_an_excluded_meds_stay_counts_its_rows_by_kind(tmp_path):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic", implausible=True, extra=STAY_ROWS)
    meds = mimic_to_meds(root, tmp_path / "meds")
    got = _stay_counts(SourceSpec("meds", meds, True))
    # MEDS has no seq_num: the keys are the content-ranked DX/PX numbers; 2 + 1 rows
    assert got.groupby("table").size().to_dict() == {"diagnoses_icd": 2, "procedures_icd": 1}
    assert set(got["value"]) == {"709"}


def _with_copied_admission(meds: Path, shift: pd.Timedelta | None = None) -> int:
    """Insert a copy of the first HOSPITAL_ADMISSION row right after it (time shifted by
    ``shift`` when given: a conflicting row); returns its hadm_id."""
    shard = sorted((meds / "data").rglob("*.parquet"))[0]
    table = pq.read_table(shard)
    df = table.to_pandas()
    i = int(df.index[df["code"].str.startswith("HOSPITAL_ADMISSION//")][0])
    copy = df.iloc[[i]].copy()
    if shift is not None:
        copy["time"] = copy["time"] + shift
    df = pd.concat([df.iloc[: i + 1], copy, df.iloc[i + 1 :]], ignore_index=True)
    pq.write_table(pa.Table.from_pandas(df, schema=table.schema, preserve_index=False), shard)
    return int(copy["hadm_id"].iloc[0])


def test_a_duplicated_meds_admission_row_is_one_admission_and_counted(tmp_path, tmp_build):
    """Before: the copy made a second admission with the same hadm_id, every event of the
    stay came twice (events 3,115 vs 3,063 unique ids on the demo) and n_admissions was 7."""
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    meds = mimic_to_meds(root, tmp_path / "meds")
    con = duckdb.connect()
    open_source(SourceSpec("meds", meds, True), con=con)
    n_before = con.execute("SELECT count(*) FROM admissions").fetchone()[0]
    _with_copied_admission(meds)
    con = duckdb.connect()
    open_source(SourceSpec("meds", meds, True), con=con)
    assert con.execute("SELECT count(*) FROM admissions").fetchone()[0] == n_before
    result = CLI.invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "t"])
    assert result.exit_code == 0, result.output
    assert "de-duplicated: admissions: 1 exact copies of a row dropped (one kept)" in result.output
    events = pd.read_parquet(tmp_build / "t" / "events.parquet")
    assert events["event_id"].is_unique


def test_a_hadm_id_on_two_different_admission_rows_is_refused(tmp_path, tmp_build):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    meds = mimic_to_meds(root, tmp_path / "meds")
    hadm = _with_copied_admission(meds, shift=pd.Timedelta("1h"))
    result = CLI.invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "t"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert f"hadm_id {hadm} on 2 different rows" in lines[0]
    assert "column 'hadm_id'" in lines[0]


def test_a_split_whose_shards_hold_none_of_its_subjects_is_one_line(tmp_path, tmp_build):
    """Before: an empty (0-row) shard was accepted though subject_splits listed its subjects."""
    from clinlib.data.sources.meds_fixture import MedsShapes

    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    meds = mimic_to_meds(root, tmp_path / "meds", shapes=MedsShapes(splits=("train", "tuning")))
    splits = pq.read_table(meds / "metadata" / "subject_splits.parquet").to_pandas()
    n_tuning = int((splits["split"] == "tuning").sum())
    assert n_tuning > 0
    for shard in (meds / "data" / "tuning").glob("*.parquet"):
        table = pq.read_table(shard)
        pq.write_table(table.slice(0, 0), shard)  # header only
    result = CLI.invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "t"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert (
        f"the {n_tuning} subjects metadata/subject_splits.parquet lists for split 'tuning'"
        in lines[0]
    )
    result = CLI.invoke(app, ["cohort", "--meds-dir", str(meds), "--profile", "t", "--allow-drops"])
    assert result.exit_code == 0, result.output
    assert (
        f"missing: split 'tuning': {n_tuning} of {n_tuning} subjects "
        "metadata/subject_splits.parquet lists are in no shard of tuning/"
    ) in result.output
