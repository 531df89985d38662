"""The quick profile's cohort checked against the raw tables with independent queries
and the DuckDB path against the pandas implementation."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from clinlib.core.config import PROFILES, raw_hosp_dir
from clinlib.data.build import load
from clinlib.data.cohort_pandas import extract_events_pandas, select_cohort_pandas
from clinlib.data.vocab import INDEX_DISEASE_ICD, PANEL_ITEMIDS


def _csv(table: str) -> str:
    path = raw_hosp_dir("quick") / f"{table}.csv.gz"
    # Independent of clinlib.data.sources: DuckDB's own CSV reader with MIMIC's quoting rules.
    return f"read_csv('{path}', header=true, quote='\"', escape='\"', all_varchar=true)"


@pytest.fixture(scope="module")
def raw(quick_cohort):
    con = duckdb.connect()
    cohort = load("cohort", "quick")
    con.register("cohort", cohort)
    yield con, cohort
    con.close()


def test_every_patient_has_two_admissions_more_than_7_days_apart(raw):
    con, cohort = raw
    ok = con.execute(
        f"""
        SELECT DISTINCT a.subject_id FROM {_csv("admissions")} a
        JOIN {_csv("admissions")} b ON a.subject_id = b.subject_id
        WHERE CAST(b.admittime AS TIMESTAMP) > CAST(a.admittime AS TIMESTAMP) + INTERVAL 7 DAY
          AND CAST(a.subject_id AS BIGINT) IN (SELECT subject_id FROM cohort)
        """
    ).df()
    assert set(ok["subject_id"].astype(int)) == set(cohort["subject_id"])


def test_lab_prescription_and_code_minimums(raw):
    con, cohort = raw
    items = ",".join(str(i) for i in PANEL_ITEMIDS)
    labs = (
        con.execute(
            f"""SELECT CAST(subject_id AS BIGINT) s, count(*) n FROM {_csv("labevents")}
            WHERE CAST(itemid AS INT) IN ({items}) AND valuenum IS NOT NULL AND valuenum <> ''
            GROUP BY 1"""
        )
        .df()
        .set_index("s")["n"]
    )
    rx = (
        con.execute(
            f"SELECT CAST(subject_id AS BIGINT) s, count(*) n FROM {_csv('prescriptions')} GROUP BY 1"
        )
        .df()
        .set_index("s")["n"]
    )
    dx = con.execute(
        f"SELECT CAST(subject_id AS BIGINT) s, icd_code, CAST(icd_version AS INT) v "
        f"FROM {_csv('diagnoses_icd')}"
    ).df()
    for row in cohort.itertuples():
        assert labs.get(row.subject_id, 0) >= 5
        assert labs[row.subject_id] == row.n_labs
        assert rx.get(row.subject_id, 0) >= 2
        mine = dx[dx["s"] == row.subject_id]
        prefixes = INDEX_DISEASE_ICD[row.disease]
        hits = sum(
            any(code.startswith(p) for p in prefixes[v])
            for code, v in zip(mine["icd_code"], mine["v"], strict=True)
        )
        assert hits >= 2 and hits == row.n_index_codes


def test_strata_are_balanced(raw):
    _, cohort = raw
    counts = cohort.groupby(["disease", "tertile"]).size()
    assert counts.groupby("disease").sum().eq(12).all()
    assert set(counts.values) == {4}


def test_duckdb_and_pandas_paths_agree_on_the_quick_profile(quick_cohort):
    hosp = raw_hosp_dir("quick")
    pand = select_cohort_pandas(hosp, per_disease=12, seed=0)
    cohort = load("cohort", "quick")
    assert (
        load("attrition", "quick")["n_patients"].tolist() == pand.attrition["n_patients"].tolist()
    )
    assert cohort["subject_id"].tolist() == pand.cohort["subject_id"].tolist()
    assert cohort["tertile"].tolist() == pand.cohort["tertile"].tolist()
    events = load("events", "quick")
    pevents = extract_events_pandas(hosp, cohort["subject_id"])
    pd.testing.assert_frame_equal(events, pevents, check_dtype=False)


def test_two_runs_with_one_seed_give_identical_event_ids(quick_cohort, tmp_path):
    from clinlib.data.cohort import select_cohort
    from clinlib.data.events import extract_events
    from clinlib.data.sources.mimic import open_hosp
    from clinlib.data.sources.synthetic import generate_hosp

    sizes = PROFILES["quick"]
    generate_hosp(tmp_path / "raw", n_patients=sizes.n_patients, seed=sizes.seed)
    con = duckdb.connect()
    open_hosp(tmp_path / "raw", con=con)
    result = select_cohort(con, per_disease=sizes.per_disease, seed=sizes.seed)
    again = extract_events(con, result.cohort["subject_id"].tolist())
    assert again["event_id"].tolist() == load("events", "quick")["event_id"].tolist()
