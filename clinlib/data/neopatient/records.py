"""neopatient's output (PopMedQA §3: "The resulting records are produced in the Medical Event Data
Standard (MEDS) format"): verified records as the kit's event table, written with the kit's own
MEDS writer (:func:`clinlib.data.sources.meds.write_meds`: ``data/<split>/*.parquet``,
``metadata/codes.parquet``, ``metadata/subject_splits.parquet``, ``metadata/dataset.json``), and
``metadata/codes.parquet`` rewritten with every code's full description (diagnoses and
procedures: the official long title; labs: label, fluid, category and unit; drugs: name,
strength, form and route), so ``clintrace cohort --meds-dir`` reads the records back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.data.neopatient.generate import TextEvent, event_time
from clinlib.data.neopatient.match import Match, drug_description, lab_description
from clinlib.data.neopatient.recipes import DX, LAB, PX, RX, Recipe
from clinlib.data.schema import ARTIFACTS
from clinlib.data.sources.meds import CODES_SCHEMA, write_meds
from clinlib.data.sources.synthetic_vocab import DRUGS, ICD10_DX_TITLES, ICD10_PX_TITLES
from clinlib.data.vocab import LAB_BY_KEY, PANEL_ITEMIDS

KIND = {DX: "diagnosis", PX: "procedure", LAB: "lab", RX: "medication"}
ROUTE_WORDS = {"PO": "by mouth", "IV": "intravenous", "SC": "subcutaneous", "SL": "sublingual"}


def _row(sid: int, hadm: int, visit: int, **kw) -> dict:
    base = dict.fromkeys(ARTIFACTS["events"])
    base.update(subject_id=sid, hadm_id=hadm, visit_idx=visit, source="neopatient", **kw)
    return base


def _coded(e: TextEvent, code: str, seg, hadm: int, k: int, serial: dict) -> dict:
    """One matched event as an event-table row (ids as the kit's extractor makes them)."""
    t = event_time(seg, e.system, e.day, k)
    if e.system == LAB:
        lab = LAB_BY_KEY[PANEL_ITEMIDS[int(code)][0]]
        serial["lab"] += 1
        lo, hi = lab.ref_low, lab.ref_high
        flag = "abnormal" if (lo is not None and e.value < lo) or e.value > hi else None
        return dict(
            event_id=f"LAB-{serial['lab']}",
            time=t,
            kind="lab",
            code=code,
            code_system="itemid",
            label=lab.label,
            value=e.value,
            value_text=f"{e.value:.{lab.decimals}f}",
            unit=lab.unit,
            ref_low=lo,
            ref_high=hi,
            flag=flag,
        )
    if e.system == RX:
        drug = DRUGS[code]
        serial["rx"] += 1
        dose = f"{e.value:g}" if e.value is not None else None
        return dict(
            event_id=f"RX-{serial['rx']}",
            time=t,
            kind="medication",
            code=drug.drug,
            code_system="drug",
            label=drug.drug,
            value=e.value,
            value_text=dose,
            unit=drug.dose_unit,
            route=drug.routes[0],
            end_time=seg.discharge,
        )
    serial[hadm, e.system] = serial.get((hadm, e.system), 0) + 1
    n = serial[hadm, e.system]
    if e.system == DX:
        return dict(
            event_id=f"DX-{hadm}-{n}",
            time=t,
            kind="diagnosis",
            code=code,
            code_system="ICD10-CM",
            label=ICD10_DX_TITLES[code],
        )
    return dict(
        event_id=f"PX-{hadm}-{n}",
        time=t,
        kind="procedure",
        code=code,
        code_system="ICD10-PCS",
        label=ICD10_PX_TITLES[code],
    )


def record_events(
    recipe: Recipe, events: Sequence[TextEvent], matches: Sequence[Match], serial: dict
) -> list[dict]:
    """A verified record as event-table rows (admission and discharge rows per stay)."""
    sid = recipe.subject_id
    rows = []
    for seg in recipe.segments:
        hadm = sid * 100 + seg.index
        rows.append(
            _row(
                sid,
                hadm,
                seg.index,
                event_id=f"ADM-{hadm}",
                time=seg.admit,
                kind="admission",
                code=seg.admission_type,
                code_system="admission_type",
                label="Admission",
                end_time=seg.discharge,
            )
        )
        rows.append(
            _row(
                sid,
                hadm,
                seg.index,
                event_id=f"DIS-{hadm}",
                time=seg.discharge,
                kind="discharge",
                code="HOME",
                code_system="discharge_location",
                label="Discharge",
            )
        )
    for k, (e, m) in enumerate(zip(events, matches, strict=True)):
        seg = recipe.segments[e.segment]
        hadm = sid * 100 + seg.index
        rows.append(_row(sid, hadm, seg.index, **_coded(e, m.code, seg, hadm, k, serial)))
    return rows


def events_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as the kit's event table (artifact dtypes, the extractor's sort order)."""
    df = pd.DataFrame(rows, columns=list(ARTIFACTS["events"]))
    for col, dtype in ARTIFACTS["events"].items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col]).astype("datetime64[us]")
        elif dtype == "string":
            df[col] = df[col].astype("string")
        else:
            df[col] = df[col].astype(dtype)
    return df.sort_values(["subject_id", "visit_idx", "time", "event_id"]).reset_index(drop=True)


def patients_frame(recipes: Sequence[Recipe]) -> pd.DataFrame:
    """MIMIC-shaped ``patients`` rows (anchor_year: the first stay's year)."""
    return pd.DataFrame(
        {
            "subject_id": [r.subject_id for r in recipes],
            "gender": [r.gender for r in recipes],
            "anchor_age": [r.age for r in recipes],
            "anchor_year": [r.segments[0].admit.year for r in recipes],
            "dod": pd.Series([pd.NaT] * len(recipes), dtype="datetime64[us]"),
        }
    )


def full_description(code: str, current: str | None) -> str | None:
    """A MEDS code's full description (see the module docstring); others keep theirs."""
    parts = code.split("//")
    if parts[0] == "LAB" and parts[1].isdigit():
        return lab_description(int(parts[1]))
    if parts[0] == "MEDICATION":
        key = next((k for k, d in DRUGS.items() if d.drug == parts[1]), None)
        if key is not None:
            route = parts[2] if len(parts) > 2 else ""
            return f"{drug_description(key)}, {ROUTE_WORDS.get(route, route)} ({route})"
    return current


def write_records(
    events: pd.DataFrame, recipes: Sequence[Recipe], out_dir: Path, label: str
) -> Path:
    """Write the records as MEDS under ``out_dir`` and give every code its full description."""
    out = write_meds(
        events,
        out_dir,
        patients=patients_frame(recipes),
        dataset_name=f"neopatient synthetic ({label})",
    )
    path = out / "metadata" / "codes.parquet"
    codes = pq.read_table(path).to_pylist()
    for row in codes:
        row["description"] = full_description(row["code"], row["description"])
    pq.write_table(pa.Table.from_pylist(codes, schema=CODES_SCHEMA), path)
    return out
