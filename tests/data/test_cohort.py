"""Cohort rules and event extraction on a hand-built dataset (tests/hosp_fixture.py), through
the DuckDB path and, independently, the pandas implementation."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from clinlib.data.cohort import select_cohort, stratum_targets
from clinlib.data.cohort_pandas import extract_events_pandas, select_cohort_pandas
from clinlib.data.events import extract_events
from tests import hosp_fixture


@pytest.fixture()
def con():
    c = duckdb.connect()
    for name, df in hosp_fixture.build().items():
        if not name.startswith("_"):
            c.register(name, df)
    yield c
    c.close()


@pytest.fixture()
def csv_dir(tmp_path):
    return hosp_fixture.write_csv_dir(tmp_path) / "hosp"


def test_stratum_targets_match_the_paper():
    assert stratum_targets(100) == {"low": 33, "medium": 34, "high": 33}
    assert sum(stratum_targets(12).values()) == 12
    assert sum(stratum_targets(7).values()) == 7


def test_funnel_counts_worked_by_hand(con):
    result = select_cohort(con, per_disease=3, seed=0)
    assert result.attrition["n_patients"].tolist()[:6] == hosp_fixture.EXPECTED_FUNNEL
    eligible = dict(zip(result.eligible["subject_id"], result.eligible["disease"], strict=True))
    assert eligible == hosp_fixture.ELIGIBLE


def test_sampling_takes_all_and_reports_shortfall(con):
    result = select_cohort(con, per_disease=3, seed=0)
    # diabetes has 1 eligible patient (tertile low), hypertension 2 (low, medium).
    assert sorted(result.cohort["subject_id"]) == [1, 7, 8]
    assert result.attrition["n_patients"].iloc[-1] == 3
    assert any(s.startswith("diabetes/medium") for s in result.shortfalls)
    assert any(s.startswith("ckd/low") for s in result.shortfalls)


def test_pandas_implementation_agrees(con, csv_dir):
    duck = select_cohort(con, per_disease=3, seed=0)
    pand = select_cohort_pandas(csv_dir, per_disease=3, seed=0)
    assert duck.attrition["n_patients"].tolist() == pand.attrition["n_patients"].tolist()
    cols = ["subject_id", "disease", "tertile", "n_admissions", "n_labs", "n_meds", "n_index_codes"]
    pd.testing.assert_frame_equal(
        duck.cohort[cols].reset_index(drop=True),
        pand.cohort[cols].reset_index(drop=True),
        check_dtype=False,
    )


def test_event_dedup_and_visit_attachment(con):
    events = extract_events(con, [1])
    ids = set(events["event_id"])
    expected = hosp_fixture.build()["_expected"]
    for keep in expected["keep"]:
        assert f"LAB-{keep}" in ids
    for drop in expected["drop"]:
        assert f"LAB-{drop}" not in ids
    wrong_unit = hosp_fixture.build()["_wrong_unit"]["labevent_id"].iloc[0]
    assert f"LAB-{wrong_unit}" not in ids
    # The '___' value is verbalised from valuenum at the panel's precision (glucose: 0 dp),
    # and the outpatient draw without hadm_id joins the admission whose window holds it.
    attached = events[events["event_id"] == f"LAB-{expected['keep'][2]}"].iloc[0]
    assert attached["value_text"] == "180"
    assert attached["hadm_id"] == 102 and attached["visit_idx"] == 1
    by_kind = events.groupby("kind").size().to_dict()
    assert by_kind == {
        "admission": 2,
        "discharge": 2,
        "lab": 3,
        "medication": 2,
        "diagnosis": 4,
        "procedure": 1,
    }
    assert set(events.loc[events["kind"] == "diagnosis", "event_id"]) == {
        "DX-101-1",
        "DX-101-2",
        "DX-102-1",
        "DX-102-2",
    }
    first = events.iloc[0]
    assert first["event_id"] == "ADM-101" and first["visit_idx"] == 0
    assert events.iloc[-1]["event_id"] == "DIS-102"


def test_events_agree_with_pandas_and_are_order_independent(con, csv_dir):
    duck = extract_events(con, [1, 7, 8])
    pand = extract_events_pandas(csv_dir, [8, 1, 7])
    pd.testing.assert_frame_equal(duck, pand, check_dtype=False)
    # Row order of the source does not change ids or content.
    shuffled = duckdb.connect()
    for name, df in hosp_fixture.build().items():
        if not name.startswith("_"):
            shuffled.register(name, df.sample(frac=1.0, random_state=3))
    again = extract_events(shuffled, [7, 8, 1])
    pd.testing.assert_frame_equal(duck, again)
