"""SYNTHETIC patients, admissions and dictionary tables, and the design manifest (paper §3
"Cohort"; the manifest is for tests and attrition checks, never read as data).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.synthetic.arrow import _ChunkIds, _date, _int, _take, _ts, arrow_schema
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
from clinlib.data.sources.synthetic.numeric import _providers
from clinlib.data.vocab import INDEX_DISEASES


def _patients_table(p: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    dod_null = p.death_s == np.iinfo(np.int64).max
    return pa.Table.from_arrays(
        [
            _int(ids.subject + np.arange(p.n), pa.int32()),
            _take(["M", "F"], p.female.astype(np.int32)),
            _int(p.anchor_age, pa.int16()),
            _int(p.anchor_year, pa.int16()),
            _take(ANCHOR_YEAR_GROUPS, p.anchor_group),
            _date(np.where(dod_null, 0, p.death_s), dod_null),
        ],
        schema=arrow_schema("patients"),
    )


def _admissions_table(p: SimpleNamespace, a: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    pat = a.pat
    no_ed = ~a.ed
    marital_null = p.marital[pat] == len(MARITAL)
    return pa.Table.from_arrays(
        [
            _int(ids.subject + pat, pa.int32()),
            _int(ids.hadm + np.arange(a.n), pa.int32()),
            _ts(a.admit),
            _ts(a.disch),
            _ts(a.disch, ~a.died),
            _take(ADMISSION_TYPES, a.type),
            _take(_providers(), a.provider),
            _take(ADMISSION_LOCATIONS, a.location),
            _take(DISCHARGE_LOCATIONS, a.discharge),
            _take(INSURANCES, p.insurance[pat]),
            _take(LANGUAGES, p.language[pat]),
            _take(MARITAL, np.minimum(p.marital[pat], len(MARITAL) - 1), marital_null),
            _take(RACES, p.race[pat]),
            _ts(a.edreg, no_ed),
            _ts(a.edout, no_ed),
            _int(a.died.astype(np.int16), pa.int16()),
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


def _manifest_table(p: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    fails = [",".join(sorted(MODE_FAILS[m])) for m in MODES]
    des_null = p.designated < 0
    return pa.Table.from_arrays(
        [
            _int(ids.subject + np.arange(p.n), pa.int32()),
            _take(MODES, p.mode),
            _take(INDEX_DISEASES, np.maximum(p.designated, 0), des_null),
            pa.array(p.dm),
            pa.array(p.htn),
            pa.array(p.ckd),
            pa.array(p.cad),
            _int(p.n_adm, pa.int32()),
            _take(fails, p.mode),
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
