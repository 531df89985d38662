"""The paper's cohort: inclusion rules, complexity tertiles and deterministic sampling
(paper §3 "Cohort", Fig. 2 stage 1: MIMIC-IV 364,627 -> 400 patients).

Runs as DuckDB SQL over the MIMIC-shaped views that :mod:`clinlib.data.sources` registers (the
synthetic default, a real MIMIC-IV directory, or a MEDS dataset), so labevents is scanned in
place and never loaded into pandas.

Rules, in funnel order (each step keeps the patients that pass all earlier steps):

1. at least one diagnoses_icd row in an index-disease code set
   (:data:`clinlib.data.vocab.INDEX_DISEASE_ICD`; prefix match on the text code, per ICD version);
2. >= 2 diagnosis rows in one index disease (code assignments, counted per (hadm_id, seq_num));
3. >= 2 admissions more than 7 days apart (equivalently: last admittime - first admittime > 7 d);
4. >= 5 labevents rows from the 18-lab panel with a numeric result;
5. >= 2 prescriptions rows that are medication orders (a BASE diluent row is part of its
   MAIN order, :data:`clinlib.data.schema.RX_DILUENT_TYPES`).

Each eligible patient gets one primary disease: the eligible index disease with most code rows,
ties broken in the order of :data:`clinlib.data.vocab.INDEX_DISEASES` (hypertensive CKD codes count
for both hypertension and CKD, so a tie is common). Within a disease, a complexity score — the
mean percentile rank of raw event count (panel labs + prescriptions + diagnoses + procedures +
2 x admissions), admission count, span in days and prescription count — splits patients into
low / medium / high tertiles; the sample takes 33 / 34 / 33 per 100 (scaled for other sizes).
Within a stratum the order is md5("<seed>:<subject_id>"), so sampling is deterministic per seed
and independent of row order or engine. With fewer eligible patients than a stratum needs, every
eligible patient is taken and the shortfall is reported.

LongMedBench's rule (``rule="longmedbench"``; seed fact ``lmb_cohort_rule``,
:mod:`clinlib.data.cohort_rules`) replaces steps 1-5 by its own, over a source that shows
abnormal labs only: every admission complete, >= 15 hospitalisations, then what the kit's
questions need — an index disease (>= 2 code rows, the stratum), >= 5 panel labs (abnormal
ones) and >= 2 medication orders. Strata, tertiles and sampling are the paper's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import duckdb
import pandas as pd

from clinlib.core.config import CTB_RULE, LONG_RULE
from clinlib.data.cohort_rules import COMPLETE_ADMISSION_SQL, MIN_HOSPITALISATIONS
from clinlib.data.plausibility import RAW_ADMISSIONS, view_exists
from clinlib.data.schema import RX_ORDER_SQL
from clinlib.data.vocab import INDEX_DISEASE_ICD, INDEX_DISEASES, PANEL_ITEMIDS

log = logging.getLogger(__name__)

TERTILES: tuple[str, ...] = ("low", "medium", "high")
MIN_ADMISSION_GAP_DAYS = 7
MIN_PANEL_LABS = 5
MIN_PRESCRIPTIONS = 2
MIN_INDEX_CODES = 2

ATTRITION_STEPS: tuple[str, ...] = (
    "all patients",
    ">=1 index-disease ICD code",
    f">={MIN_INDEX_CODES} ICD codes in one index disease",
    f">=2 admissions >{MIN_ADMISSION_GAP_DAYS} days apart",
    f">={MIN_PANEL_LABS} panel labs",
    f">={MIN_PRESCRIPTIONS} prescriptions",
    "sampled (disease x tertile)",
)
LONG_ATTRITION_STEPS: tuple[str, ...] = (
    "all patients",
    "every admission complete",
    f">={MIN_HOSPITALISATIONS} hospitalisations",
    f">={MIN_INDEX_CODES} ICD codes in one index disease",
    f">={MIN_PANEL_LABS} abnormal panel labs",
    f">={MIN_PRESCRIPTIONS} prescriptions",
    "sampled (disease x tertile)",
)


@dataclass
class CohortResult:
    """What :func:`select_cohort` returns.

    Attributes:
        cohort: one row per sampled patient (subject_id, disease, tertile, n_admissions,
            n_labs, n_meds, n_dx, n_px, n_index_codes, span_days, n_events_raw, complexity).
        attrition: one row per funnel step (step_idx, step, n_patients).
        eligible: every eligible patient with disease, tertile and complexity.
        shortfalls: human-readable notes where a stratum had fewer eligible patients than
            its target.
    """

    cohort: pd.DataFrame
    attrition: pd.DataFrame
    eligible: pd.DataFrame
    shortfalls: list[str] = field(default_factory=list)


def stratum_targets(per_disease: int) -> dict[str, int]:
    """Patients per tertile for ``per_disease`` patients (33/34/33 per 100, rounded)."""
    outer = round(per_disease * 33 / 100)
    return {"low": outer, "medium": per_disease - 2 * outer, "high": outer}


def _register_constants(con: duckdb.DuckDBPyConnection) -> None:
    prefixes = pd.DataFrame(
        [
            (disease, version, prefix)
            for disease, by_version in INDEX_DISEASE_ICD.items()
            for version, codes in by_version.items()
            for prefix in codes
        ],
        columns=["disease", "icd_version", "prefix"],
    )
    order = pd.DataFrame({"disease": list(INDEX_DISEASES), "disease_order": range(4)})
    panel = pd.DataFrame(
        [(itemid, key, rank) for itemid, (key, rank) in PANEL_ITEMIDS.items()],
        columns=["itemid", "lab_key", "item_rank"],
    )
    con.register("ct_index_prefixes", prefixes)
    con.register("ct_disease_order", order)
    con.register("ct_panel", panel)


# Per-patient counts over the whole source. One pass per table; labevents is filtered to the
# panel before grouping so the scan stays a single streaming aggregation.
STATS_SQL = f"""
CREATE OR REPLACE TEMP TABLE ct_stats AS
WITH dx AS (
    SELECT d.subject_id, p.disease, count(DISTINCT (d.hadm_id, d.seq_num)) AS n_codes
    FROM diagnoses_icd d
    JOIN ct_index_prefixes p
      ON d.icd_version = p.icd_version AND starts_with(upper(trim(d.icd_code)), p.prefix)
    GROUP BY ALL
),
dx_any AS (
    SELECT subject_id, max(n_codes) AS max_codes FROM dx GROUP BY subject_id
),
primary_dx AS (
    SELECT subject_id, disease, n_codes FROM (
        SELECT dx.*, row_number() OVER (
            PARTITION BY dx.subject_id ORDER BY dx.n_codes DESC, o.disease_order) AS rn
        FROM dx JOIN ct_disease_order o USING (disease)
        WHERE dx.n_codes >= {MIN_INDEX_CODES}
    ) WHERE rn = 1
),
adm AS (
    SELECT subject_id, count(*) AS n_admissions,
           min(admittime) AS first_admit, max(admittime) AS last_admit,
           max(dischtime) AS last_disch
    FROM admissions GROUP BY subject_id
),
complete AS (
    -- LongMedBench's "complete admission/discharge records", over the admissions as recorded
    -- (before the plausibility screen drops an admission without a discharge)
    SELECT subject_id, bool_and({COMPLETE_ADMISSION_SQL}) AS all_complete
    FROM {{raw_admissions}} GROUP BY subject_id
),
labs AS (
    SELECT subject_id, count(*) AS n_labs
    FROM labevents WHERE itemid IN (SELECT itemid FROM ct_panel) AND valuenum IS NOT NULL
    GROUP BY subject_id
),
rx AS (SELECT subject_id, count(*) AS n_meds FROM prescriptions WHERE {RX_ORDER_SQL}
       GROUP BY subject_id),
alldx AS (SELECT subject_id, count(*) AS n_dx FROM diagnoses_icd GROUP BY subject_id),
px AS (SELECT subject_id, count(*) AS n_px FROM procedures_icd GROUP BY subject_id)
SELECT p.subject_id,
       coalesce(dx_any.max_codes, 0) AS max_index_codes,
       primary_dx.disease,
       coalesce(primary_dx.n_codes, 0) AS n_index_codes,
       coalesce(adm.n_admissions, 0) AS n_admissions,
       coalesce(complete.all_complete, false) AS all_complete,
       adm.first_admit, adm.last_admit, adm.last_disch,
       coalesce(labs.n_labs, 0) AS n_labs,
       coalesce(rx.n_meds, 0) AS n_meds,
       coalesce(alldx.n_dx, 0) AS n_dx,
       coalesce(px.n_px, 0) AS n_px
FROM patients p
LEFT JOIN dx_any USING (subject_id)
LEFT JOIN primary_dx USING (subject_id)
LEFT JOIN adm USING (subject_id)
LEFT JOIN complete USING (subject_id)
LEFT JOIN labs USING (subject_id)
LEFT JOIN rx USING (subject_id)
LEFT JOIN alldx USING (subject_id)
LEFT JOIN px USING (subject_id)
"""

# Funnel: every step is cumulative (a patient reaching step k passed steps 1..k).
FUNNEL_SQL = f"""
SELECT
    count(*) AS s0,
    count(*) FILTER (WHERE max_index_codes >= 1) AS s1,
    count(*) FILTER (WHERE max_index_codes >= {MIN_INDEX_CODES}) AS s2,
    count(*) FILTER (WHERE max_index_codes >= {MIN_INDEX_CODES}
        AND date_diff('second', first_admit, last_admit) > {MIN_ADMISSION_GAP_DAYS} * 86400) AS s3,
    count(*) FILTER (WHERE max_index_codes >= {MIN_INDEX_CODES}
        AND date_diff('second', first_admit, last_admit) > {MIN_ADMISSION_GAP_DAYS} * 86400
        AND n_labs >= {MIN_PANEL_LABS}) AS s4,
    count(*) FILTER (WHERE max_index_codes >= {MIN_INDEX_CODES}
        AND date_diff('second', first_admit, last_admit) > {MIN_ADMISSION_GAP_DAYS} * 86400
        AND n_labs >= {MIN_PANEL_LABS} AND n_meds >= {MIN_PRESCRIPTIONS}) AS s5
FROM ct_stats
"""

# LongMedBench's funnel (module docstring), over a source with abnormal labs only.
LONG_STEPS_SQL: tuple[str, ...] = (
    "all_complete",
    f"n_admissions >= {MIN_HOSPITALISATIONS}",
    f"max_index_codes >= {MIN_INDEX_CODES}",
    f"n_labs >= {MIN_PANEL_LABS}",
    f"n_meds >= {MIN_PRESCRIPTIONS}",
)
LONG_FUNNEL_SQL = (
    "SELECT count(*) AS s0, "
    + ", ".join(
        f"count(*) FILTER (WHERE {' AND '.join(LONG_STEPS_SQL[: k + 1])}) AS s{k + 1}"
        for k in range(len(LONG_STEPS_SQL))
    )
    + " FROM ct_stats"
)
CTB_ELIGIBLE_WHERE = f"""max_index_codes >= {MIN_INDEX_CODES}
      AND date_diff('second', first_admit, last_admit) > {MIN_ADMISSION_GAP_DAYS} * 86400
      AND n_labs >= {MIN_PANEL_LABS}
      AND n_meds >= {MIN_PRESCRIPTIONS}"""
# rule -> (attrition step names, funnel query, eligibility condition over ct_stats)
RULES: dict[str, tuple[tuple[str, ...], str, str]] = {
    CTB_RULE: (ATTRITION_STEPS, FUNNEL_SQL, CTB_ELIGIBLE_WHERE),
    LONG_RULE: (LONG_ATTRITION_STEPS, LONG_FUNNEL_SQL, " AND ".join(LONG_STEPS_SQL)),
}

ELIGIBLE_SQL = """
WITH e AS (
    SELECT *,
        date_diff('second', first_admit, last_disch) / 86400.0 AS span_days,
        n_labs + n_meds + n_dx + n_px + 2 * n_admissions AS n_events_raw
    FROM ct_stats
    WHERE {where}
),
ranked AS (
    SELECT *,
        (percent_rank() OVER (PARTITION BY disease ORDER BY n_events_raw)
         + percent_rank() OVER (PARTITION BY disease ORDER BY n_admissions)
         + percent_rank() OVER (PARTITION BY disease ORDER BY span_days)
         + percent_rank() OVER (PARTITION BY disease ORDER BY n_meds)) / 4.0 AS complexity
    FROM e
)
SELECT subject_id, disease, n_index_codes, n_admissions, n_labs, n_meds, n_dx, n_px,
       span_days, n_events_raw, complexity,
       ['low', 'medium', 'high'][
           ntile(3) OVER (PARTITION BY disease ORDER BY complexity, subject_id)] AS tertile,
       md5(CAST($seed AS VARCHAR) || ':' || CAST(subject_id AS VARCHAR)) AS sample_key
FROM ranked
"""


def cohort_stats(con: duckdb.DuckDBPyConnection) -> None:
    """Compute per-patient rule statistics into the temp table ``ct_stats``."""
    _register_constants(con)
    raw = RAW_ADMISSIONS if view_exists(con, RAW_ADMISSIONS) else "admissions"
    con.execute(STATS_SQL.format(raw_admissions=raw))


def select_cohort(
    con: duckdb.DuckDBPyConnection, per_disease: int = 100, seed: int = 0, rule: str = CTB_RULE
) -> CohortResult:
    """Apply the inclusion rules, stratify and sample.

    Args:
        con: a DuckDB connection with MIMIC-shaped hosp views (see clinlib.data.sources);
            under ``longmedbench`` its labevents view holds abnormal rows only
            (:func:`clinlib.data.cohort_rules.restrict_labs`).
        per_disease: patients per index disease (the paper: 100).
        seed: sampling seed.
        rule: ``clintracebench`` (the paper's funnel) or ``longmedbench`` (module docstring).

    Returns:
        A :class:`CohortResult`.
    """
    if rule not in RULES:
        raise ValueError(f"unknown cohort rule {rule!r}; known: {', '.join(RULES)}")
    steps, funnel_sql, where = RULES[rule]
    cohort_stats(con)
    funnel = con.execute(funnel_sql).fetchone()
    eligible = con.execute(ELIGIBLE_SQL.format(where=where), {"seed": seed}).df()
    targets = stratum_targets(per_disease)
    picked, shortfalls = [], []
    for disease in INDEX_DISEASES:
        for tertile in TERTILES:
            pool = eligible[(eligible["disease"] == disease) & (eligible["tertile"] == tertile)]
            pool = pool.sort_values("sample_key", kind="stable")
            want = targets[tertile]
            if len(pool) < want:
                shortfalls.append(
                    f"{disease}/{tertile}: {len(pool)} eligible < target {want}; took all"
                )
            picked.append(pool.head(want))
    cohort = pd.concat(picked, ignore_index=True).drop(columns="sample_key")
    cohort = cohort.sort_values("subject_id", kind="stable").reset_index(drop=True)
    counts = list(funnel) + [len(cohort)]
    attrition = pd.DataFrame({"step_idx": range(len(steps)), "step": steps, "n_patients": counts})
    for note in shortfalls:
        log.warning("cohort shortfall: %s", note)
    return CohortResult(cohort, attrition, eligible.drop(columns="sample_key"), shortfalls)
