"""LongMedBench's cohort rule as an option any profile's raw source can apply (seed fact
``lmb_cohort_rule``: "we retain only abnormal lab results and patients with complete
admission/discharge records. Filtering for patients with >= 15 hospitalizations yields 355
patients and 6,999 visits"; its visits hold 44.91 events on average, ``lmb_visit_events``).

The rule, over MIMIC-IV-shaped hosp views (the synthetic source, MIMIC-IV or a MEDS dataset,
:func:`clinlib.data.build.open_source`):

* an admission is COMPLETE when it has an admission and a discharge time, the discharge not
  before the admission;
* a patient qualifies when every one of their admissions is complete and they have at least
  :data:`MIN_HOSPITALISATIONS` of them;
* of the labs only rows flagged ``abnormal`` are kept, attached to a visit by their own
  ``hadm_id`` (rows without one are left out, like the seed's visit-bound events).

:func:`long_cohort` returns the qualifying patients, their visits (with the abnormal labs,
orders and procedures each holds) and the seed's summary statistics, so the seed's setting
can be measured on any source. The cohort stage applies the same rule when a build asks for it
(``clintrace cohort --cohort-rule longmedbench``, the ``long-quick`` profile:
:func:`clinlib.data.cohort.select_cohort`), sampling its strata from the qualifying patients.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from clinlib.core.seed_facts import seed_fact
from clinlib.data.build import open_source, source_spec
from clinlib.data.cohort_rules import (
    ABNORMAL_LAB_SQL,
    COMPLETE_ADMISSION_SQL,
    MIN_HOSPITALISATIONS,
)

__all__ = [
    "MIN_HOSPITALISATIONS",
    "LongCohort",
    "built_rule",
    "long_cohort",
    "profile_long_cohort",
    "seed_summary",
]

VISITS_SQL = f"""
WITH adm AS (
    SELECT subject_id, hadm_id, admittime, dischtime, {COMPLETE_ADMISSION_SQL} AS complete
    FROM admissions
),
pat AS (
    SELECT subject_id, count(*) AS n_visits
    FROM adm GROUP BY subject_id
    HAVING bool_and(complete) AND count(*) >= {{min_visits}}
),
labs AS (
    SELECT hadm_id, count(*) AS n_abnormal_labs FROM labevents
    WHERE {ABNORMAL_LAB_SQL} AND hadm_id IS NOT NULL GROUP BY hadm_id
),
rx AS (SELECT hadm_id, count(*) AS n_orders FROM prescriptions GROUP BY hadm_id),
px AS (SELECT hadm_id, count(*) AS n_procedures FROM procedures_icd GROUP BY hadm_id)
SELECT a.subject_id, a.hadm_id, a.admittime, a.dischtime,
       coalesce(l.n_abnormal_labs, 0) AS n_abnormal_labs,
       coalesce(r.n_orders, 0) AS n_orders, coalesce(p.n_procedures, 0) AS n_procedures
FROM adm a JOIN pat USING (subject_id)
LEFT JOIN labs l USING (hadm_id) LEFT JOIN rx r USING (hadm_id) LEFT JOIN px p USING (hadm_id)
ORDER BY a.subject_id, a.admittime, a.hadm_id
"""


@dataclass(frozen=True)
class LongCohort:
    """The qualifying patients and visits and the seed's summary figures.

    Attributes:
        visits: subject_id, hadm_id, admittime, dischtime, n_abnormal_labs, n_orders,
            n_procedures, n_events (those three + the admission and discharge events).
        patients: subject_id, n_visits.
        summary: n_patients, n_visits, visits_mean / _median / _sd (per patient, sample SD),
            events_mean / _median / _sd (per visit).
    """

    visits: pd.DataFrame
    patients: pd.DataFrame
    summary: dict[str, float]


def long_cohort(con: duckdb.DuckDBPyConnection, min_visits: int = MIN_HOSPITALISATIONS):
    """Apply the rule (module docstring) to the hosp views of ``con``.

    Returns:
        A :class:`LongCohort` (empty frames when no patient qualifies).
    """
    if int(min_visits) < 1:
        raise ValueError(f"min_visits must be >= 1, got {min_visits!r}")
    visits = con.execute(VISITS_SQL.format(min_visits=int(min_visits))).df()
    visits["n_events"] = visits[["n_abnormal_labs", "n_orders", "n_procedures"]].sum(axis=1) + 2
    patients = visits.groupby("subject_id", as_index=False).agg(n_visits=("hadm_id", "size"))
    per_patient, per_visit = patients["n_visits"], visits["n_events"]
    summary = {
        "n_patients": int(len(patients)),
        "n_visits": int(len(visits)),
        "visits_mean": float(per_patient.mean()) if len(patients) else float("nan"),
        "visits_median": float(per_patient.median()) if len(patients) else float("nan"),
        "visits_sd": float(per_patient.std(ddof=1)) if len(patients) > 1 else float("nan"),
        "events_mean": float(per_visit.mean()) if len(visits) else float("nan"),
        "events_median": float(per_visit.median()) if len(visits) else float("nan"),
        "events_sd": float(per_visit.std(ddof=1)) if len(visits) > 1 else float("nan"),
    }
    return LongCohort(visits, patients, summary)


def seed_summary() -> dict[str, float]:
    """The seed's figures for the same rule (MIMIC-IV; seed facts lmb_cohort_rule and
    lmb_visit_events), keyed like :attr:`LongCohort.summary`."""
    rule, ev = seed_fact("lmb_cohort_rule"), seed_fact("lmb_visit_events")
    return {
        "n_patients": rule.number(1),
        "n_visits": rule.number(2),
        "visits_mean": rule.number(3),
        "visits_median": rule.number(4),
        "visits_sd": rule.number(5),
        "events_mean": ev.number(0),
        "events_median": ev.number(1),
        "events_sd": ev.number(2),
    }


def profile_long_cohort(profile: str | None = None, min_visits: int = MIN_HOSPITALISATIONS):
    """:func:`long_cohort` over a profile's raw source (the synthetic hosp tables, MIMIC-IV or
    MEDS, as recorded by its cohort stage).

    Raises:
        FileNotFoundError: the profile has no recorded source (run ``clintrace cohort``).
    """
    con = open_source(source_spec(profile))
    try:
        return long_cohort(con, min_visits)
    finally:
        con.close()


def built_rule(profile: str | None = None) -> str:
    """The cohort rule a profile's own cohort was built with (``clintracebench`` or
    ``longmedbench``; recorded by its cohort stage)."""
    return source_spec(profile).cohort_rule
