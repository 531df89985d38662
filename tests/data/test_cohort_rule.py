"""LongMedBench's cohort rule as a build option (``--cohort-rule longmedbench``, the
``long-quick`` profile; clinlib.data.cohort / cohort_rules), on hand-built hosp tables.

The fixture of tests/hosp_fixture.py (patients 1-8, none with more than two admissions) plus:
  9  diabetes (25000 in two stays), 15 complete stays 30 days apart, each with an abnormal
     creatinine and a normal sodium, Metformin in the first two stays        -> qualifies
 10  as 9 with 16 stays, one without a discharge time (the plausibility screen drops that
     stay, leaving 15; the seed's rule looks at the record as given)          -> not complete
 11  as 9 with 14 stays                                                        -> too few
Funnel by hand: 11 patients; every admission complete 10 (all but 10); >= 15 stays 1 (9);
index disease 1; >= 5 abnormal panel labs 1 (15 creatinines); >= 2 prescriptions 1; sampled 1.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.core.config import cohort_rule, question_counts
from clinlib.data.build import SourceSpec, build_cohort, open_source, source_spec
from clinlib.data.long_cohort import built_rule
from clinlib.data.schema import HOSP_TABLES
from tests import hosp_fixture

CLI = CliRunner()
FUNNEL = [11, 10, 1, 1, 1, 1, 1]


def _long_patient(tables: dict, sid: int, n_stays: int, open_stay: int | None = None) -> None:
    """Append one patient of the module docstring to the fixture's tables."""
    adm, dx, labs, rx = [], [], [], []
    for i in range(n_stays):
        hadm = sid * 1000 + i
        start = pd.Timestamp("2150-01-01 08:00") + pd.Timedelta(days=30 * i)
        end = pd.NaT if i == open_stay else start + pd.Timedelta(days=3)
        adm.append(dict(subject_id=sid, hadm_id=hadm, admittime=start, dischtime=end,
                        admission_type="EW EMER.", discharge_location="HOME"))  # fmt: skip
        day = start + pd.Timedelta(days=1)
        for k, (item, val, uom, flag) in enumerate(
            ((50912, 1.9, "mg/dL", "abnormal"), (50983, 139.0, "mEq/L", None))
        ):
            lid = sid * 100_000 + i * 10 + k
            labs.append(dict(labevent_id=lid, subject_id=sid, hadm_id=hadm, specimen_id=lid,
                             itemid=item, charttime=day + pd.Timedelta(hours=k), value=str(val),
                             valuenum=val, valueuom=uom, flag=flag))  # fmt: skip
        if i < 2:
            dx.append(
                dict(subject_id=sid, hadm_id=hadm, seq_num=1, icd_code="25000", icd_version=9)
            )
            rx.append(dict(subject_id=sid, hadm_id=hadm, pharmacy_id=sid * 1000 + i,
                           starttime=day, stoptime=day + pd.Timedelta(days=1),
                           drug="MetFORMIN (Glucophage)", dose_val_rx="500", dose_unit_rx="mg",
                           route="PO"))  # fmt: skip
    patient = dict(subject_id=sid, gender="F", anchor_age=60, anchor_year=2150)
    for name, rows in (("patients", [patient]), ("admissions", adm), ("diagnoses_icd", dx),
                       ("labevents", labs), ("prescriptions", rx)):  # fmt: skip
        tables[name] = pd.concat([tables[name], hosp_fixture._complete(name, pd.DataFrame(rows))],
                                 ignore_index=True)  # fmt: skip


def _write(root: Path, tables: dict) -> Path:
    hosp = root / "hosp"
    hosp.mkdir(parents=True)
    for name, df in tables.items():
        if name.startswith("_"):
            continue
        out = df.copy()
        for col, t in HOSP_TABLES[name].items():
            if t in ("TIMESTAMP", "DATE"):
                fmt = "%Y-%m-%d %H:%M:%S" if t == "TIMESTAMP" else "%Y-%m-%d"
                out[col] = pd.to_datetime(out[col]).dt.strftime(fmt)
        with gzip.open(hosp / f"{name}.csv.gz", "wt", newline="") as fh:
            out.to_csv(fh, index=False)
    return root


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


@pytest.fixture()
def long_source(tmp_path) -> Path:
    tables = hosp_fixture.build()
    _long_patient(tables, 9, 15)
    _long_patient(tables, 10, 16, open_stay=5)
    _long_patient(tables, 11, 14)
    return _write(tmp_path / "mimic", tables)


def test_profiles_name_their_rule_and_counts():
    assert cohort_rule("quick") == "clintracebench" and cohort_rule("paper") == "clintracebench"
    assert cohort_rule("long-quick") == "longmedbench"
    assert cohort_rule("mimic") == "clintracebench"  # a real-data profile: the paper's unless asked
    assert cohort_rule("quick", "longmedbench") == "longmedbench"
    with pytest.raises(ValueError, match="unknown cohort rule 'longmed'; known: clintracebench"):
        cohort_rule("quick", "longmed")
    assert [question_counts(p) for p in ("quick", "long-quick", "quick+rw-x", "paper", "mimic")] == [
        "quick", "quick", "quick", "paper", "paper"]  # fmt: skip


def test_long_rule_builds_its_cohort_by_hand(long_source, tmp_build):
    out = build_cohort("lq", mimic_dir=long_source, per_disease=3, rule="longmedbench")
    assert out["attrition"]["n_patients"].tolist() == FUNNEL
    assert out["attrition"]["step"].iloc[2] == ">=15 hospitalisations"
    assert out["cohort"]["subject_id"].tolist() == [9]
    assert out["cohort"]["disease"].tolist() == ["diabetes"]
    ev = out["events"]
    labs = ev[ev["kind"] == "lab"]
    # the 15 abnormal creatinines; none of the 15 normal sodiums
    assert len(labs) == 15 and set(labs["label"]) == {"Creatinine"}
    assert set(labs["flag"]) == {"abnormal"}
    assert ev["visit_idx"].nunique() == 15
    info = json.loads((tmp_build / "lq" / "source.json").read_text())
    assert info["cohort_rule"] == "longmedbench" and built_rule("lq") == "longmedbench"
    # every later reader of the source (generators, gate L2) sees the same abnormal-only labs
    con = open_source(source_spec("lq"))
    n_all, n_abnormal = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE flag = 'abnormal') FROM labevents"
    ).fetchone()
    assert n_all == n_abnormal > 0
    con.close()
    # the same source under the paper's rule keeps patient 9's normal labs in its view
    plain = open_source(SourceSpec("mimic", long_source, True))
    assert plain.execute("SELECT count(*) FROM labevents WHERE subject_id = 9").fetchone()[0] == 30
    plain.close()


def test_long_rule_counts_independently(long_source):
    """The funnel's first two steps recomputed with pandas from the CSVs (no DuckDB)."""
    with gzip.open(long_source / "hosp" / "admissions.csv.gz", "rt") as fh:
        adm = pd.read_csv(fh, parse_dates=["admittime", "dischtime"])
    adm["complete"] = adm["dischtime"].notna() & (adm["dischtime"] >= adm["admittime"])
    per = adm.groupby("subject_id").agg(all_complete=("complete", "all"), n=("hadm_id", "size"))
    assert int(per["all_complete"].sum()) == FUNNEL[1]
    assert int((per["all_complete"] & (per["n"] >= 15)).sum()) == FUNNEL[2]


def test_no_qualifying_patient_exits_2_with_one_line(tmp_path, tmp_build):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")  # nobody has 15 stays
    result = CLI.invoke(app, ["cohort", "--mimic-dir", str(root), "--profile", "t",
                              "--cohort-rule", "longmedbench"])  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "0 of 8 patients selected" in lines[0] and ">=15 hospitalisations" in lines[0]
    bad = CLI.invoke(app, ["cohort", "--mimic-dir", str(root), "--profile", "t",
                           "--cohort-rule", "longmed"])  # fmt: skip
    assert bad.exit_code == 2 and "unknown cohort rule 'longmed'" in bad.output


def test_a_meds_source_under_the_rule_shows_abnormal_labs_only(long_source, tmp_path):
    from clinlib.data.sources.meds_fixture import mimic_to_meds

    meds = mimic_to_meds(long_source, tmp_path / "meds")
    full = open_source(SourceSpec("meds", meds, True))
    long = open_source(SourceSpec("meds", meds, True, "longmedbench"))
    q = "SELECT count(*) FILTER (WHERE flag = 'abnormal'), count(*) FROM labevents "
    try:
        n_abn, n_all = full.execute(q + "WHERE subject_id = 9").fetchone()
        assert (n_abn, n_all) == (15, 30)  # its creatinines flagged, its sodiums not
        assert long.execute(q + "WHERE subject_id = 9").fetchone() == (15, 15)
    finally:
        full.close()
        long.close()
