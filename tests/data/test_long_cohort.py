"""LongMedBench's cohort rule (clinlib.data.long_cohort) on hand-built hosp tables.

Patient 1: 15 complete admissions (qualifies); each has one abnormal and one normal lab, and
admission 0 also two orders and a procedure -> its events: 1 abnormal lab + 2 orders +
1 procedure + admission + discharge = 6; the others 1 + 2 = 3.
Patient 2: 15 admissions, one without a discharge time (not complete: excluded).
Patient 3: 14 complete admissions (too few: excluded).
So 1 patient, 15 visits; visits per patient mean = median = 15 (one patient: SD undefined);
events per visit: fourteen 3s and one 6 -> mean 3.2, median 3.
"""

from __future__ import annotations

import math

import duckdb
import pandas as pd
import pytest

from clinlib.data.long_cohort import MIN_HOSPITALISATIONS, long_cohort, seed_summary


def _con() -> duckdb.DuckDBPyConnection:
    adm, labs = [], []
    for sid, n in ((1, 15), (2, 15), (3, 14)):
        for i in range(n):
            hadm = sid * 100 + i
            start = pd.Timestamp("2150-01-01") + pd.Timedelta(days=30 * i)
            end = None if (sid == 2 and i == 7) else start + pd.Timedelta(days=2)
            adm.append((sid, hadm, start, end))
            labs += [(sid, hadm, "abnormal"), (sid, hadm, None)]
    labs.append((1, None, "abnormal"))  # no hadm_id: left out
    con = duckdb.connect()
    con.register("admissions", pd.DataFrame(adm, columns=["subject_id", "hadm_id", "admittime",
                                                          "dischtime"]))  # fmt: skip
    con.register("labevents", pd.DataFrame(labs, columns=["subject_id", "hadm_id", "flag"]))
    con.register("prescriptions", pd.DataFrame({"subject_id": [1, 1], "hadm_id": [100, 100]}))
    con.register("procedures_icd", pd.DataFrame({"subject_id": [1], "hadm_id": [100]}))
    return con


def test_rule_by_hand():
    assert MIN_HOSPITALISATIONS == 15
    c = long_cohort(_con())
    assert c.patients.to_dict("records") == [{"subject_id": 1, "n_visits": 15}]
    assert c.summary["n_patients"] == 1 and c.summary["n_visits"] == 15
    assert c.summary["visits_mean"] == 15 and math.isnan(c.summary["visits_sd"])
    first = c.visits.iloc[0]
    assert (first["n_abnormal_labs"], first["n_orders"], first["n_procedures"]) == (1, 2, 1)
    assert first["n_events"] == 6 and set(c.visits["n_events"].iloc[1:]) == {3}
    assert c.summary["events_mean"] == pytest.approx(3.2) and c.summary["events_median"] == 3
    assert long_cohort(_con(), min_visits=14).summary["n_patients"] == 2  # patient 3 joins


def test_seed_figures():
    assert seed_summary()["n_patients"] == 355 and seed_summary()["visits_sd"] == 5.72
    with pytest.raises(ValueError, match="min_visits"):
        long_cohort(_con(), min_visits=0)
