"""SYNTHETIC patients, admissions and dictionary tables, and the design manifest (paper §3
"Cohort"; the manifest is for tests and attrition checks, never read as data).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.synthetic.arrow import (
    ChunkIds,
    arrow_schema,
    date_array,
    int_array,
    take_strings,
    ts_array,
)
from clinlib.data.sources.synthetic.design import (
    ADMISSION_LOCATIONS,
    ADMISSION_TYPES,
    ANCHOR_YEAR_GROUPS,
    DISCHARGE_LOCATIONS,
    INSURANCES,
    LANGUAGES,
    MARITAL,
    MODE_FAILS,
    MODES,
    RACES,
)
from clinlib.data.sources.synthetic.numeric import providers
from clinlib.data.vocab import INDEX_DISEASES


def patients_table(p: SimpleNamespace, ids: ChunkIds) -> pa.Table:
    dod_null = p.death_s == np.iinfo(np.int64).max
    return pa.Table.from_arrays(
        [
            int_array(ids.subject + np.arange(p.n), pa.int32()),
            take_strings(["M", "F"], p.female.astype(np.int32)),
            int_array(p.anchor_age, pa.int16()),
            int_array(p.anchor_year, pa.int16()),
            take_strings(ANCHOR_YEAR_GROUPS, p.anchor_group),
            date_array(np.where(dod_null, 0, p.death_s), dod_null),
        ],
        schema=arrow_schema("patients"),
    )


def admissions_table(p: SimpleNamespace, a: SimpleNamespace, ids: ChunkIds) -> pa.Table:
    pat = a.pat
    no_ed = ~a.ed
    marital_null = p.marital[pat] == len(MARITAL)
    return pa.Table.from_arrays(
        [
            int_array(ids.subject + pat, pa.int32()),
            int_array(ids.hadm + np.arange(a.n), pa.int32()),
            ts_array(a.admit),
            ts_array(a.disch),
            ts_array(a.disch, ~a.died),
            take_strings(ADMISSION_TYPES, a.type),
            take_strings(providers(), a.provider),
            take_strings(ADMISSION_LOCATIONS, a.location),
            take_strings(DISCHARGE_LOCATIONS, a.discharge),
            take_strings(INSURANCES, p.insurance[pat]),
            take_strings(LANGUAGES, p.language[pat]),
            take_strings(MARITAL, np.minimum(p.marital[pat], len(MARITAL) - 1), marital_null),
            take_strings(RACES, p.race[pat]),
            ts_array(a.edreg, no_ed),
            ts_array(a.edout, no_ed),
            int_array(a.died.astype(np.int16), pa.int16()),
        ],
        schema=arrow_schema("admissions"),
    )


MANIFEST_SCHEMA = pa.schema(
    [
        ("subject_id", pa.int32()),
        ("mode", pa.string()),
        ("designated_disease", pa.string()),
        ("has_diabetes", pa.bool_()),
        ("has_hypertension", pa.bool_()),
        ("has_ckd", pa.bool_()),
        ("has_cad", pa.bool_()),
        ("n_admissions", pa.int32()),
        ("expected_fail", pa.string()),
    ]
)


def manifest_table(p: SimpleNamespace, ids: ChunkIds) -> pa.Table:
    fails = [",".join(sorted(MODE_FAILS[m])) for m in MODES]
    des_null = p.designated < 0
    return pa.Table.from_arrays(
        [
            int_array(ids.subject + np.arange(p.n), pa.int32()),
            take_strings(MODES, p.mode),
            take_strings(INDEX_DISEASES, np.maximum(p.designated, 0), des_null),
            pa.array(p.dm),
            pa.array(p.htn),
            pa.array(p.ckd),
            pa.array(p.cad),
            int_array(p.n_adm, pa.int32()),
            take_strings(fails, p.mode),
        ],
        schema=MANIFEST_SCHEMA,
    )


def dictionary_tables() -> dict[str, pa.Table]:
    """The static tables: d_labitems, d_icd_diagnoses, d_icd_procedures (every emitted code)."""
    items = sorted(sv.LAB_ITEMS.values(), key=lambda i: i.itemid)
    d_lab = pa.Table.from_arrays(
        [
            pa.array([i.itemid for i in items], pa.int32()),
            pa.array([i.label for i in items]),
            pa.array([i.fluid for i in items]),
            pa.array([i.category for i in items]),
        ],
        schema=arrow_schema("d_labitems"),
    )

    def titles(by9: dict[str, str], by10: dict[str, str], table: str) -> pa.Table:
        rows = sorted([(c, 9, t) for c, t in by9.items()] + [(c, 10, t) for c, t in by10.items()])
        return pa.Table.from_arrays(
            [
                pa.array([r[0] for r in rows]),
                pa.array([r[1] for r in rows], pa.int16()),
                pa.array([r[2] for r in rows]),
            ],
            schema=arrow_schema(table),
        )

    return {
        "d_labitems": d_lab,
        "d_icd_diagnoses": titles(sv.ICD9_DX_TITLES, sv.ICD10_DX_TITLES, "d_icd_diagnoses"),
        "d_icd_procedures": titles(sv.ICD9_PX_TITLES, sv.ICD10_PX_TITLES, "d_icd_procedures"),
    }
