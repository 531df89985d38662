"""LongMedBench's cohort rule in SQL, shared by the cohort stage (``--cohort-rule longmedbench``,
:mod:`clinlib.data.cohort`) and its measurement (:mod:`clinlib.data.long_cohort`).

The seed (fact ``lmb_cohort_rule``): "we retain only abnormal lab results and patients with
complete admission/discharge records. Filtering for patients with >= 15 hospitalizations
yields 355 patients and 6,999 visits". So:

* an admission is COMPLETE when it has an admission and a discharge time, the discharge not
  before the admission; a patient qualifies when every admission is complete and there are at
  least :data:`MIN_HOSPITALISATIONS` of them;
* only lab rows flagged ``abnormal`` exist: a build under the rule opens its source with
  :func:`restrict_labs`, so every reader of that source (event extraction, the question
  generators, gate L2's recompute from the raw tables) sees the same abnormal-only labs.
"""

from __future__ import annotations

import duckdb

from clinlib.core.seed_facts import seed_fact

MIN_HOSPITALISATIONS = int(seed_fact("lmb_cohort_rule").number(0))
COMPLETE_ADMISSION_SQL = (
    "admittime IS NOT NULL AND dischtime IS NOT NULL AND dischtime >= admittime"
)
ABNORMAL_LAB_SQL = "flag = 'abnormal'"
ALL_LABS_VIEW = "ct_all_labevents"


def restrict_labs(con: duckdb.DuckDBPyConnection) -> None:
    """Keep only abnormal lab rows in the ``labevents`` view of ``con`` (the full view stays
    queryable as :data:`ALL_LABS_VIEW`)."""
    con.execute(f"ALTER VIEW labevents RENAME TO {ALL_LABS_VIEW}")
    con.execute(f"CREATE VIEW labevents AS SELECT * FROM {ALL_LABS_VIEW} WHERE {ABNORMAL_LAB_SQL}")
