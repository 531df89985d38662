"""A tiny hand-built MIMIC-IV-shaped hosp dataset whose cohort outcome is worked out by hand.

Patients (subject_id: what it has -> where it leaves the funnel):
  1  diabetes 3 codes (ICD-9 25000), 2 admissions 30 d apart, 7 panel labs, 2 rx -> eligible
  2  hypertension 1 code                                            -> fails ">=2 codes"
  3  no index-disease code                                         -> fails ">=1 index code"
  4  CKD 2 codes (N183), admissions 5 days apart                    -> fails "admissions > 7 d"
  5  CAD 2 codes, admissions 20 d apart, 4 panel labs (+3 non-panel, +1 null valuenum)
                                                                   -> fails ">=5 panel labs"
  6  CAD 2 codes, admissions ok, 6 labs, 1 prescription           -> fails ">=2 prescriptions"
  7  I129 x2 + I10 x1: hypertension 3 codes, CKD 2 codes          -> eligible, hypertension
  8  I129 x2: hypertension 2, CKD 2 (tie -> INDEX_DISEASES order)  -> eligible, hypertension
Expected funnel: 8, 7, 6, 5, 4, 3.
Patient 1's labs also exercise de-duplication and visit attachment (see EXPECTED_LAB_IDS).

``build(implausible=True)`` adds the clinically impossible shapes of issue 26 §1, each
worked out by hand in ``out["_implausible"]`` (kind, key, rule; rule None = kept, converted):
an admission in 9999, one at age 160, a discharge before its admission, an admission after the
date of death; creatinine -5 and 1e308, an infinite result (a CSV cannot hold a NaN apart
from an empty value; the MEDS test adds one), labs on an unknown or an excluded
admission, and labs in known alternative units, rounded to the source's significant digits
(creatinine 100 µmol/L = 1.13 mg/dL with its range 44-106 µmol/L = 0.50-1.20 mg/dL, glucose
5.5 mmol/L = 99 mg/dL, potassium 4.2 mmol/L = 4.2 mEq/L). The funnel is unchanged.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from clinlib.data.schema import HOSP_TABLES

EXPECTED_FUNNEL = [8, 7, 6, 5, 4, 3]
ELIGIBLE = {1: "diabetes", 7: "hypertension", 8: "hypertension"}


def _adm(sid, hadm, admit, disch, atype="EW EMER.", loc="HOME"):
    return dict(
        subject_id=sid,
        hadm_id=hadm,
        admittime=pd.Timestamp(admit),
        dischtime=pd.Timestamp(disch),
        admission_type=atype,
        discharge_location=loc,
    )


def build(implausible: bool = False) -> dict[str, pd.DataFrame]:
    """Return the hosp tables as DataFrames with every MIMIC column (with ``implausible``,
    also the impossible rows of the module docstring)."""
    patients = [
        dict(subject_id=s, gender="F", anchor_age=60, anchor_year=2150) for s in range(1, 9)
    ]
    admissions = [
        _adm(1, 101, "2150-01-01 08:00", "2150-01-04 12:00"),
        _adm(1, 102, "2150-01-31 09:00", "2150-02-02 10:00", atype="ELECTIVE"),
        _adm(2, 201, "2150-01-01", "2150-01-02"),
        _adm(2, 202, "2150-03-01", "2150-03-02"),
        _adm(3, 301, "2150-01-01", "2150-01-02"),
        _adm(3, 302, "2150-03-01", "2150-03-02"),
        _adm(4, 401, "2150-01-01", "2150-01-02"),
        _adm(4, 402, "2150-01-06", "2150-01-08"),
        _adm(5, 501, "2150-01-01", "2150-01-02"),
        _adm(5, 502, "2150-01-21", "2150-01-22"),
        _adm(6, 601, "2150-01-01", "2150-01-02"),
        _adm(6, 602, "2150-02-01", "2150-02-02"),
        _adm(7, 701, "2150-01-01", "2150-01-02"),
        _adm(7, 702, "2150-05-01", "2150-05-03"),
        _adm(8, 801, "2150-01-01", "2150-01-02"),
        _adm(8, 802, "2151-01-01", "2151-01-05"),
    ]
    dx = []

    def code(sid, hadm, seq, c, v):
        dx.append(dict(subject_id=sid, hadm_id=hadm, seq_num=seq, icd_code=c, icd_version=v))

    code(1, 101, 1, "25000", 9)
    code(1, 101, 2, "4019", 9)
    code(1, 102, 1, "25000", 9)
    code(1, 102, 2, "25040", 9)
    code(2, 201, 1, "I10", 10)
    code(2, 202, 1, "J189", 10)
    code(3, 301, 1, "J189", 10)
    code(4, 401, 1, "N183", 10)
    code(4, 402, 1, "N183", 10)
    code(5, 501, 1, "I2510", 10)
    code(5, 502, 1, "I214", 10)
    code(6, 601, 1, "41401", 9)
    code(6, 602, 1, "41401", 9)
    code(7, 701, 1, "I129", 10)
    code(7, 702, 1, "I129", 10)
    code(7, 702, 2, "I10", 10)
    code(8, 801, 1, "I129", 10)
    code(8, 802, 1, "I129", 10)

    labs = []
    lid = [1000]

    def lab(sid, hadm, itemid, t, valuenum, value=None, uom="mg/dL", flag=None, lo=None, hi=None):
        lid[0] += 1
        labs.append(
            dict(
                labevent_id=lid[0],
                subject_id=sid,
                hadm_id=hadm,
                specimen_id=lid[0] * 10,
                itemid=itemid,
                charttime=pd.Timestamp(t),
                value=value if value is not None else (None if valuenum is None else f"{valuenum}"),
                valuenum=valuenum,
                valueuom=uom,
                ref_range_lower=lo,
                ref_range_upper=hi,
                flag=flag,
            )
        )
        return lid[0]

    # Patient 1: 6 panel rows with numbers (the cohort count) plus de-dup / attachment cases.
    keep_cr = lab(1, 101, 50912, "2150-01-02 14:00", 1.9, flag="abnormal", lo=0.5, hi=1.2)
    drop_cr = lab(1, 101, 50912, "2150-01-02 06:00", 1.1, lo=0.5, hi=1.2)  # same day, normal
    keep_ldl = lab(1, 101, 50906, "2150-01-03 06:00", 150.0, flag="abnormal", hi=130)
    drop_ldl = lab(1, 101, 50905, "2150-01-03 06:00", 148.0, flag="abnormal", hi=130)
    attached = lab(1, None, 50931, "2150-01-31 07:00", 180.0, value="___", flag="abnormal")
    outside = lab(1, None, 50931, "2150-06-01 07:00", 95.0)  # no admission window -> left out
    # a unit that is no known alternative of creatinine's mg/dL: refused (unit_not_convertible)
    wrong_unit = lab(1, 102, 50912, "2150-02-01 07:00", 100.0, uom="U/L")
    for t, v in (("2150-01-01", 10), ("2150-01-02", 11)):  # non-panel (magnesium)
        lab(1, 101, 50960, t + " 09:00", v)
    # Patient 5: 4 panel labs + 3 non-panel + 1 panel without valuenum
    for day in range(1, 5):
        lab(5, 501, 50983, f"2150-01-01 0{day}:00", 140.0, uom="mEq/L")
    for day in range(1, 4):
        lab(5, 501, 50960, f"2150-01-01 0{day}:30", 2.0)
    lab(5, 501, 50971, "2150-01-01 05:00", None, value="HEMOLYZED", uom="mEq/L")
    for sid, hadm in ((6, 601), (7, 701), (8, 801), (4, 401), (2, 201), (3, 301)):
        for day in range(1, 7):
            lab(sid, hadm, 50983, f"2150-01-01 0{day}:00", 139.0, uom="mEq/L")

    rx = []
    pid = [5000]

    def med(sid, hadm, drug, start, dose="500", unit="mg", route="PO"):
        pid[0] += 1
        rx.append(
            dict(
                subject_id=sid,
                hadm_id=hadm,
                pharmacy_id=pid[0],
                starttime=pd.Timestamp(start),
                stoptime=pd.Timestamp(start) + pd.Timedelta(days=2),
                drug=drug,
                dose_val_rx=dose,
                dose_unit_rx=unit,
                route=route,
            )
        )

    med(1, 101, "MetFORMIN (Glucophage)", "2150-01-02 09:00")
    med(1, 102, "Insulin", "2150-01-31 10:00", dose="0-10", unit="UNIT", route="SC")
    med(6, 601, "Aspirin", "2150-01-01 10:00", dose="81")
    for sid, hadm in (
        (7, 701),
        (7, 702),
        (8, 801),
        (8, 802),
        (2, 201),
        (2, 202),
        (4, 401),
        (4, 402),
    ):
        med(sid, hadm, "Lisinopril", "2150-01-01 10:00", dose="10")
    for sid, hadm in ((5, 501), (5, 502), (3, 301), (3, 302)):
        med(sid, hadm, "Aspirin", "2150-01-01 10:00", dose="81")

    px = [
        dict(
            subject_id=1,
            hadm_id=101,
            seq_num=1,
            chartdate=pd.Timestamp("2150-01-02"),
            icd_code="3995",
            icd_version=9,
        ),
    ]
    d_dx = pd.DataFrame(
        [
            (
                "25000",
                9,
                "Diabetes mellitus without mention of complication, type II or unspecified type, not stated as uncontrolled",
            ),
            ("4019", 9, "Unspecified essential hypertension"),
            (
                "25040",
                9,
                "Diabetes with renal manifestations, type II or unspecified type, not stated as uncontrolled",
            ),
            ("I10", 10, "Essential (primary) hypertension"),
            ("J189", 10, "Pneumonia, unspecified organism"),
            ("N183", 10, "Chronic kidney disease, stage 3 (moderate)"),
            (
                "I2510",
                10,
                "Atherosclerotic heart disease of native coronary artery without angina pectoris",
            ),
            ("I214", 10, "Non-ST elevation (NSTEMI) myocardial infarction"),
            ("41401", 9, "Coronary atherosclerosis of native coronary artery"),
            (
                "I129",
                10,
                "Hypertensive chronic kidney disease with stage 1 through stage 4 chronic kidney disease, or unspecified chronic kidney disease",
            ),
        ],
        columns=["icd_code", "icd_version", "long_title"],
    )
    d_px = pd.DataFrame(
        [("3995", 9, "Hemodialysis")], columns=["icd_code", "icd_version", "long_title"]
    )
    d_lab = pd.DataFrame(
        [
            (50912, "Creatinine", "Blood", "Chemistry"),
            (50906, "Cholesterol, LDL, Measured", "Blood", "Chemistry"),
            (50905, "Cholesterol, LDL, Calculated", "Blood", "Chemistry"),
            (50931, "Glucose", "Blood", "Chemistry"),
            (50983, "Sodium", "Blood", "Chemistry"),
            (50971, "Potassium", "Blood", "Chemistry"),
            (50960, "Magnesium", "Blood", "Chemistry"),
        ],
        columns=["itemid", "label", "fluid", "category"],
    )
    raw = {
        "patients": pd.DataFrame(patients),
        "admissions": pd.DataFrame(admissions),
        "labevents": pd.DataFrame(labs),
        "d_labitems": d_lab,
        "prescriptions": pd.DataFrame(rx),
        "diagnoses_icd": pd.DataFrame(dx),
        "d_icd_diagnoses": d_dx,
        "procedures_icd": pd.DataFrame(px),
        "d_icd_procedures": d_px,
    }
    if implausible:
        raw["_implausible"] = _add_implausible(patients, admissions, lab)
        raw["patients"] = pd.DataFrame(patients)
        raw["admissions"] = pd.DataFrame(admissions)
        raw["labevents"] = pd.DataFrame(labs)
    out = {name: (_complete(name, df) if not name.startswith("_") else df)
           for name, df in raw.items()}  # fmt: skip
    out["_expected"] = pd.DataFrame(
        {
            "keep": [keep_cr, keep_ldl, attached],
            "drop": [drop_cr, drop_ldl, outside],
        }
    )
    out["_wrong_unit"] = pd.DataFrame({"labevent_id": [wrong_unit]})
    return out


def _add_implausible(patients: list, admissions: list, lab) -> pd.DataFrame:
    """Append issue 26 §1's impossible rows; returns (kind, key, rule) worked out by hand."""
    patients[0]["dod"] = pd.Timestamp("2152-01-01")  # patient 1 dies in 2152
    admissions += [
        _adm(7, 709, "9999-12-20 08:00", "9999-12-22 08:00"),  # year 9999
        _adm(7, 710, "2250-03-01 08:00", "2250-03-04 08:00"),  # age 60 + 100 = 160
        _adm(8, 808, "2151-11-18 08:00", "2151-11-01 08:00"),  # discharged before admitted
        _adm(1, 109, "2153-03-01 08:00", "2153-03-03 08:00"),  # after the date of death
    ]
    rows = [
        ("admission", 709, "admittime_out_of_range"),
        ("admission", 710, "age_at_admission_out_of_range"),
        ("admission", 808, "discharge_before_admission"),
        ("admission", 109, "admission_after_death"),
    ]
    for t, v, uom, rule in (
        ("2150-01-01 10:00", -5.0, "mg/dL", "value_out_of_bounds"),
        ("2150-01-01 11:00", 1e308, "mg/dL", "value_out_of_bounds"),
        ("2150-01-01 13:00", float("inf"), "mg/dL", "value_not_finite"),
    ):
        rows.append(("lab", lab(1, 101, 50912, t, v, value=str(v), uom=uom), rule))
    rows.append(("lab", lab(1, 999, 50912, "2150-01-03 10:00", 1.0), "unknown_hadm_id"))
    rows.append(("lab", lab(7, 709, 50983, "9999-12-21 10:00", 140.0, uom="mEq/L"),
                 "admission_excluded"))  # fmt: skip
    # known alternative units, converted (each alone on its day and lab: not de-duplicated)
    umol = lab(1, 101, 50912, "2150-01-04 07:00", 100.0, uom="µmol/L", lo=44.0, hi=106.0)
    rows.append(("lab", umol, None))
    rows.append(("lab", lab(1, 101, 50931, "2150-01-04 08:00", 5.5, uom="mmol/L"), None))
    rows.append(("lab", lab(1, 102, 50971, "2150-02-01 08:00", 4.2, uom="mmol/L"), None))
    return pd.DataFrame(rows, columns=["kind", "key", "rule"])


def _complete(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Add the missing MIMIC columns (NULL) in MIMIC's order with pandas dtypes."""
    cols = HOSP_TABLES[table]
    for col in cols:
        if col not in df:
            df[col] = None
    df = df[list(cols)].copy()
    for col, t in cols.items():
        if t in ("INTEGER", "SMALLINT"):
            df[col] = df[col].astype("Int64")
        elif t in ("DOUBLE", "REAL"):
            df[col] = df[col].astype("float64")
        elif t in ("TIMESTAMP", "DATE"):
            df[col] = pd.to_datetime(df[col])
        else:
            df[col] = df[col].astype("string")
    return df


def write_csv_dir(
    root: Path, implausible: bool = False, extra: Mapping[str, list[dict]] | None = None
) -> Path:
    """Write the fixture as ``root/hosp/<table>.csv.gz`` (MIMIC layout), each table with the
    ``extra`` rows given for it appended; returns root."""
    hosp = Path(root) / "hosp"
    hosp.mkdir(parents=True, exist_ok=True)
    for name, df in build(implausible).items():
        if name.startswith("_"):
            continue
        out = df.copy()
        if (extra or {}).get(name):
            add = _complete(name, pd.DataFrame(extra[name]))
            out = pd.concat([_complete(name, out), add], ignore_index=True)
        for col, t in HOSP_TABLES[name].items():
            if t == "TIMESTAMP":
                out[col] = out[col].dt.strftime("%Y-%m-%d %H:%M:%S")
            elif t == "DATE":
                out[col] = out[col].dt.strftime("%Y-%m-%d")
        with gzip.open(hosp / f"{name}.csv.gz", "wt", newline="") as fh:
            out.to_csv(fh, index=False)
    return Path(root)


def open_source(source: str, root: Path, scratch: Path):
    """A DuckDB connection over the fixture at ``root`` read as ``"mimic"`` (the MIMIC loader)
    or as ``"meds"`` (the same data converted to MIMIC-derived MEDS under ``scratch``)."""
    from clinlib.data.sources.meds import open_meds
    from clinlib.data.sources.meds_fixture import mimic_to_meds
    from clinlib.data.sources.mimic import open_hosp

    if source == "mimic":
        return open_hosp(root)
    return open_meds(mimic_to_meds(root, Path(scratch) / "meds"))


def filler_labs(n: int, first_id: int = 900_000) -> list[dict]:
    """``n`` magnesium rows (not in the panel) of patient 3, who fails the funnel at its first
    step: they push later rows past DuckDB's 10,000-row sample without changing any outcome."""
    return [
        dict(labevent_id=first_id + i, subject_id=3, hadm_id=301, specimen_id=first_id + i,
             itemid=50960, charttime="2150-01-01 09:00:00", value="2.0", valuenum=2.0,
             valueuom="mg/dL")
        for i in range(n)
    ]  # fmt: skip


def append_csv_rows(root: Path, table: str, rows: list[dict]) -> int:
    """Append ``rows`` (text values; missing columns empty) to ``root/hosp/<table>.csv.gz``.

    Returns the file line (1 = the header) of the first appended row."""
    path = Path(root) / "hosp" / f"{table}.csv.gz"
    with gzip.open(path, "rt", newline="") as fh:
        old = pd.read_csv(fh, dtype=str, keep_default_na=False)
    new = pd.DataFrame(rows).astype(str).reindex(columns=old.columns, fill_value="")
    with gzip.open(path, "wt", newline="") as fh:
        pd.concat([old, new], ignore_index=True).to_csv(fh, index=False)
    return len(old) + 2
