"""Hand-built events tables for the dialogue tests (columns of clinlib.data.schema events).

``make_events()`` — three patients x three visits, every event kind:

- 1001 clean (ICD-10): abnormal and normal labs over several days, disease and background
  medications, diagnoses, a procedure. Kept.
- 1002 kept despite bad rows: ICD-9 codes (all-digit, e.g. 4019), a lab value "<0.01", a dose
  range "1-2", a discharge without location, a last visit ending in DIED, and ONE unusable
  event (Creatinine without unit) among more than fifty must-cover events (coverage >= 98 %).
- 1003 dropped: its visit_idx 1 starts before visit_idx 0 (visits_in_time_order), plus a
  diagnosis with no title, a medication dose without unit, a lab itemid outside the panel and a
  row of unknown kind (all unusable, so coverage falls below 98 %).

``random_events(n_patients, seed)`` — larger, randomised but realistic tables (paper-like
visit counts) for timing and variety tests.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import LAB_BY_KEY

COLUMNS = list(ARTIFACTS["events"])
_ids = itertools.count(900_000)


def _row(**kw) -> dict:
    row = {c: None for c in COLUMNS}
    row.update(kw)
    return row


def adm(sid, hadm, v, when, atype="EW EMER.", end=None):
    return _row(event_id=f"ADM-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="admission", code=atype,
                code_system="admission_type", label="Admission",
                end_time=pd.Timestamp(end) if end else None, source="admissions")  # fmt: skip


def dis(sid, hadm, v, when, loc="HOME"):
    return _row(event_id=f"DIS-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="discharge", code=loc,
                code_system="discharge_location", label="Discharge", source="admissions")  # fmt: skip


def lab(sid, hadm, v, when, key, value, value_text=None, unit="canon", lab_id=None, flag=None):
    spec = LAB_BY_KEY[key]
    vt = value_text if value_text is not None else f"{value:.{spec.decimals}f}"
    lo, hi = spec.ref_low, spec.ref_high
    abnormal = (hi is not None and value > hi) or (lo is not None and value < lo)
    return _row(event_id=f"LAB-{lab_id or next(_ids)}", subject_id=sid, hadm_id=hadm,
                visit_idx=v, time=pd.Timestamp(when), kind="lab", code=str(spec.itemids[0]),
                code_system="itemid", label=spec.label, value=float(value), value_text=vt,
                unit=spec.unit if unit == "canon" else unit, ref_low=lo, ref_high=hi,
                flag=flag if flag is not None else ("abnormal" if abnormal else None),
                source="labevents")  # fmt: skip


def med(sid, hadm, v, when, drug, dose, unit="mg", route="PO", rx_id=None):
    try:
        value = float(dose)
    except (TypeError, ValueError):
        value = None
    return _row(event_id=f"RX-{rx_id or next(_ids)}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="medication", code=drug, code_system="drug",
                label=drug, value=value, value_text=dose, unit=unit, route=route,
                source="prescriptions")  # fmt: skip


def dx(sid, hadm, v, when, seq, code, title, version=10):
    return _row(event_id=f"DX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="diagnosis", code=code,
                code_system=f"ICD{version}-CM", label=title, source="diagnoses_icd")  # fmt: skip


def px(sid, hadm, v, when, seq, code, title, version=10):
    return _row(event_id=f"PX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="procedure", code=code,
                code_system=f"ICD{version}-PCS", label=title, source="procedures_icd")  # fmt: skip


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col, dtype in ARTIFACTS["events"].items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col]).astype("datetime64[us]")
        elif dtype == "int64" and col != "hadm_id":
            df[col] = df[col].astype("int64")
        elif dtype == "string":
            df[col] = df[col].astype("string")
        elif dtype == "float64":
            df[col] = df[col].astype("float64")
    df["hadm_id"] = df["hadm_id"].astype("Int64")
    return df


def patient_1001() -> list[dict]:
    s = 1001
    r = [
        # visit 0
        adm(s, 5001, 0, "2150-01-10 08:00", "EW EMER.", end="2150-01-13 14:00"),
        lab(s, 5001, 0, "2150-01-10 09:00", "creatinine", 1.3, lab_id=11),
        lab(s, 5001, 0, "2150-01-10 09:00", "potassium", 4.1, lab_id=12),
        lab(s, 5001, 0, "2150-01-10 09:00", "sodium", 139, lab_id=13),
        lab(s, 5001, 0, "2150-01-10 09:00", "glucose", 212, lab_id=14),
        lab(s, 5001, 0, "2150-01-10 09:00", "bicarbonate", 24, lab_id=15),
        lab(s, 5001, 0, "2150-01-11 06:00", "bicarbonate", 21, lab_id=16),
        lab(s, 5001, 0, "2150-01-11 06:00", "chloride", 101, lab_id=17),
        lab(s, 5001, 0, "2150-01-11 06:00", "wbc", 11.2, lab_id=18),
        lab(s, 5001, 0, "2150-01-11 06:00", "creatinine", 1.2, lab_id=19),
        lab(s, 5001, 0, "2150-01-12 06:00", "hba1c", 8.1, lab_id=20),
        lab(s, 5001, 0, "2150-01-12 06:00", "platelets", 250, lab_id=21),
        med(s, 5001, 0, "2150-01-10 10:00", "Metformin", "500", rx_id=31),
        med(s, 5001, 0, "2150-01-10 10:00", "Insulin", "4", unit="UNIT", route="SC", rx_id=32),
        med(s, 5001, 0, "2150-01-11 08:00", "Acetaminophen", "650", rx_id=33),
        med(s, 5001, 0, "2150-01-11 08:00", "Docusate Sodium", "100", rx_id=34),
        dx(
            s,
            5001,
            0,
            "2150-01-13 14:00",
            1,
            "E119",
            "Type 2 diabetes mellitus without complications",
        ),
        dx(s, 5001, 0, "2150-01-13 14:00", 2, "I10", "Essential (primary) hypertension"),
        dis(s, 5001, 0, "2150-01-13 14:00", "HOME"),
        # visit 1
        adm(s, 5002, 1, "2150-03-02 11:00", "URGENT"),
        lab(s, 5002, 1, "2150-03-02 12:00", "troponin_t", 0.08, lab_id=41),
        lab(s, 5002, 1, "2150-03-02 12:00", "hemoglobin", 12.9, lab_id=42),
        lab(s, 5002, 1, "2150-03-02 12:00", "potassium", 5.6, lab_id=43),
        lab(s, 5002, 1, "2150-03-03 06:00", "anion_gap", 14, lab_id=44),
        lab(s, 5002, 1, "2150-03-03 06:00", "calcium", 9.1, lab_id=45),
        lab(s, 5002, 1, "2150-03-03 06:00", "troponin_t", 0.05, lab_id=46),
        med(s, 5002, 1, "2150-03-02 13:00", "Aspirin", "81", rx_id=51),
        med(s, 5002, 1, "2150-03-02 13:00", "Atorvastatin", "80", rx_id=52),
        med(s, 5002, 1, "2150-03-03 09:00", "Ondansetron", "4", route="IV", rx_id=53),
        med(s, 5002, 1, "2150-03-03 09:00", "Pantoprazole", "40", rx_id=54),
        px(
            s,
            5002,
            1,
            "2150-03-03",
            1,
            "02703ZZ",
            "Dilation of Coronary Artery, One Artery, Percutaneous Approach",
        ),  # fmt: skip
        dx(
            s,
            5002,
            1,
            "2150-03-05 10:00",
            1,
            "I214",
            "Non-ST elevation (NSTEMI) myocardial infarction",
        ),  # fmt: skip
        dx(
            s,
            5002,
            1,
            "2150-03-05 10:00",
            2,
            "I2510",
            "Atherosclerotic heart disease of native coronary artery without angina pectoris",
        ),  # fmt: skip
        dx(
            s,
            5002,
            1,
            "2150-03-05 10:00",
            3,
            "E119",
            "Type 2 diabetes mellitus without complications",
        ),
        dis(s, 5002, 1, "2150-03-05 10:00", "HOME HEALTH CARE"),
        # visit 2
        adm(s, 5003, 2, "2150-06-20 07:30", "ELECTIVE"),
        lab(s, 5003, 2, "2150-06-20 08:00", "ldl", 145, lab_id=61),
        lab(s, 5003, 2, "2150-06-20 08:00", "hemoglobin", 10.9, lab_id=62),
        lab(s, 5003, 2, "2150-06-20 08:00", "creatinine", 1.7, lab_id=63),
        lab(s, 5003, 2, "2150-06-21 06:00", "triglycerides", 180, lab_id=64),
        lab(s, 5003, 2, "2150-06-21 06:00", "hematocrit", 33.0, lab_id=65),
        med(s, 5003, 2, "2150-06-20 09:00", "Lisinopril", "10", rx_id=71),
        med(s, 5003, 2, "2150-06-21 09:00", "Senna", "8.6", rx_id=72),
        px(
            s,
            5003,
            2,
            "2150-06-21",
            1,
            "5A1D70Z",
            "Performance of Urinary Filtration, Intermittent, Less than 6 Hours Per Day",
        ),  # fmt: skip
        dx(s, 5003, 2, "2150-06-22 12:00", 1, "N183", "Chronic kidney disease, stage 3 (moderate)"),
        dx(
            s,
            5003,
            2,
            "2150-06-22 12:00",
            2,
            "I129",
            "Hypertensive chronic kidney disease with stage 1 through stage 4 chronic kidney "
            "disease, or unspecified chronic kidney disease",
        ),  # fmt: skip
        dis(s, 5003, 2, "2150-06-22 12:00", "HOME"),
    ]
    return r


def patient_1002() -> list[dict]:
    s = 1002
    r = []
    stays = [
        (6001, "2151-02-01 10:00", "2151-02-04 09:00", "HOME"),
        (6002, "2151-05-10 22:00", "2151-05-13 15:00", None),
        (6003, "2151-09-01 06:00", "2151-09-03 18:00", "DIED"),
    ]
    keys = ["creatinine", "potassium", "sodium", "glucose", "bun", "hemoglobin", "platelets"]
    for v, (hadm, a, d, loc) in enumerate(stays):
        r.append(adm(s, hadm, v, a, "OBSERVATION ADMIT" if v == 1 else "EW EMER."))
        day0 = pd.Timestamp(a).normalize()
        for day in range(3):
            when = day0 + pd.Timedelta(days=day, hours=7)
            if when > pd.Timestamp(d):
                break
            for i, key in enumerate(keys):
                spec = LAB_BY_KEY[key]
                hi = spec.ref_high if spec.ref_high is not None else 1.0
                lo = spec.ref_low if spec.ref_low is not None else 0.0
                value = lo + (hi - lo) * (0.3 + 0.25 * ((v + day + i) % 4))
                r.append(lab(s, hadm, v, when, key, value))
        r.append(dis(s, hadm, v, d, loc))
    # ICD-9 codes (all digits) and titles with digits
    r += [
        dx(s, 6001, 0, "2151-02-04 09:00", 1, "4019", "Unspecified essential hypertension", 9),
        dx(
            s,
            6001,
            0,
            "2151-02-04 09:00",
            2,
            "25000",
            "Diabetes mellitus without mention of complication, type II or unspecified type, "
            "not stated as uncontrolled",
            9,
        ),  # fmt: skip
        dx(
            s,
            6002,
            1,
            "2151-05-13 15:00",
            1,
            "41401",
            "Coronary atherosclerosis of native coronary artery",
            9,
        ),  # fmt: skip
        dx(s, 6002, 1, "2151-05-13 15:00", 2, "5856", "End stage renal disease", 9),
        dx(s, 6003, 2, "2151-09-03 18:00", 1, "0389", "Unspecified septicemia", 9),
        px(s, 6002, 1, "2151-05-11", 1, "3995", "Hemodialysis", 9),
        # troponin reported as "<0.01" (a real MIMIC quirk) on the last lab day of the stay, so
        # the missed rule (normal key lab on a middle day) does not apply; a dose range, background drugs
        lab(s, 6002, 1, "2151-05-12 09:00", "troponin_t", 0.01, value_text="<0.01", lab_id=81),
        med(s, 6001, 0, "2151-02-01 12:00", "Glipizide", "5", rx_id=91),
        med(
            s,
            6001,
            0,
            "2151-02-02 12:00",
            "Oxycodone (Immediate Release)",
            "1-2",
            unit="TAB",
            rx_id=92,
        ),  # fmt: skip
        med(s, 6002, 1, "2151-05-11 08:00", "Heparin", "5000", unit="UNIT", route="SC", rx_id=93),
        med(s, 6002, 1, "2151-05-11 08:00", "Docusate Sodium", "100", rx_id=94),
        med(s, 6002, 1, "2151-05-12 08:00", "Docusate Sodium", "100", rx_id=95),
        med(s, 6003, 2, "2151-09-01 08:00", "Vancomycin", "1000", route="IV", rx_id=96),
        # the one bad row: a key lab without unit
        lab(s, 6003, 2, "2151-09-02 07:00", "creatinine", 2.4, unit=None, lab_id=99),
    ]
    return r


def patient_1003() -> list[dict]:
    s = 1003
    return [
        # visit_idx 0 starts AFTER visit_idx 1: a time-order defect in the input
        adm(s, 7001, 0, "2152-05-01 09:00"),
        lab(s, 7001, 0, "2152-05-01 10:00", "glucose", 95, lab_id=101),
        lab(s, 7001, 0, "2152-05-01 10:00", "sodium", 141, lab_id=102),
        dx(s, 7001, 0, "2152-05-03 09:00", 1, "I10", "Essential (primary) hypertension"),
        dx(s, 7001, 0, "2152-05-03 09:00", 2, "Z9999", None),  # unknown code, no title
        dis(s, 7001, 0, "2152-05-03 09:00"),
        adm(s, 7002, 1, "2152-01-10 09:00"),
        lab(s, 7002, 1, "2152-01-10 10:00", "potassium", 3.9, lab_id=103),
        # a dose without its unit (a medication WITHOUT a dose is usable: told as started)
        med(s, 7002, 1, "2152-01-10 11:00", "Amlodipine", "5", unit=None, rx_id=104),
        _row(
            event_id="LAB-105",
            subject_id=s,
            hadm_id=7002,
            visit_idx=1,
            time=pd.Timestamp("2152-01-11 06:00"),
            kind="lab",
            code="99999",
            code_system="itemid",
            label="Mystery",
            value=1.0,
            value_text="1.0",
            unit="mg/dL",
            source="labevents",
        ),  # fmt: skip
        _row(
            event_id="VS-106",
            subject_id=s,
            hadm_id=7002,
            visit_idx=1,
            time=pd.Timestamp("2152-01-11 06:00"),
            kind="vitals",
            code="HR",
            label="Heart rate",
            value=80.0,
            value_text="80",
            unit="bpm",
            source="chartevents",
        ),  # fmt: skip
        dx(s, 7002, 1, "2152-01-12 09:00", 1, "I10", "Essential (primary) hypertension"),
        dis(s, 7002, 1, "2152-01-12 09:00"),
        adm(s, 7003, 2, "2152-08-01 09:00"),
        lab(s, 7003, 2, "2152-08-01 10:00", "creatinine", 1.0, lab_id=107),
        dx(s, 7003, 2, "2152-08-02 09:00", 1, "I10", "Essential (primary) hypertension"),
        dis(s, 7003, 2, "2152-08-02 09:00"),
    ]


def make_events() -> pd.DataFrame:
    """The three hand-built patients (see module docstring); the same ids on every call."""
    global _ids
    _ids = itertools.count(900_000)
    return frame(patient_1001() + patient_1002() + patient_1003())


def make_cohort(subject_ids=(1001, 1002, 1003, 1004)) -> pd.DataFrame:
    """A cohort table; 1004 has no events (reported as dropped)."""
    return pd.DataFrame(
        {
            "subject_id": pd.Series(subject_ids, dtype="int64"),
            "disease": pd.Series(
                ["diabetes", "hypertension", "hypertension", "cad"][: len(subject_ids)],
                dtype="string",
            ),
        }
    )


# --- randomised, paper-like tables -----------------------------------------------------------

DX_POOL = [
    ("E119", "Type 2 diabetes mellitus without complications"),
    ("E1122", "Type 2 diabetes mellitus with diabetic chronic kidney disease"),
    ("I10", "Essential (primary) hypertension"),
    ("I129", "Hypertensive chronic kidney disease with stage 1 through stage 4 chronic kidney "
             "disease, or unspecified chronic kidney disease"),
    ("N183", "Chronic kidney disease, stage 3 (moderate)"),
    ("I2510", "Atherosclerotic heart disease of native coronary artery without angina pectoris"),
    ("I5032", "Chronic diastolic (congestive) heart failure"),
    ("E785", "Hyperlipidemia, unspecified"),
    ("N179", "Acute kidney failure, unspecified"),
    ("J189", "Pneumonia, unspecified organism"),
    ("D649", "Anemia, unspecified"),
    ("I4891", "Unspecified atrial fibrillation"),
    ("E876", "Hypokalemia"),
    ("Z794", "Long term (current) use of insulin"),
    ("4019", "Unspecified essential hypertension"),
    ("25000", "Diabetes mellitus without mention of complication, type II or unspecified type, "
              "not stated as uncontrolled"),
    ("5849", "Acute kidney failure, unspecified"),
]  # fmt: skip
PX_POOL = [
    ("02703ZZ", "Dilation of Coronary Artery, One Artery, Percutaneous Approach"),
    ("5A1D70Z", "Performance of Urinary Filtration, Intermittent, Less than 6 Hours Per Day"),
    ("3995", "Hemodialysis"),
    ("B2111ZZ", "Fluoroscopy of Multiple Coronary Arteries using Low Osmolar Contrast"),
]
RX_POOL = [
    ("Metformin", "500", "mg", "PO"), ("Insulin", "6", "UNIT", "SC"),
    ("Lisinopril", "10", "mg", "PO"), ("Amlodipine", "5", "mg", "PO"),
    ("Metoprolol Tartrate", "25", "mg", "PO"), ("Furosemide", "40", "mg", "IV"),
    ("Aspirin", "81", "mg", "PO"), ("Atorvastatin", "40", "mg", "PO"),
    ("Heparin", "5000", "UNIT", "SC"), ("Sevelamer Carbonate", "800", "mg", "PO"),
    ("Acetaminophen", "650", "mg", "PO"), ("Docusate Sodium", "100", "mg", "PO"),
    ("Senna", "8.6", "mg", "PO"), ("Pantoprazole", "40", "mg", "PO"),
    ("Ondansetron", "4", "mg", "IV"), ("Sodium Chloride 0.9%  Flush", "3", "mL", "IV"),
    ("Oxycodone (Immediate Release)", "5-10", "mg", "PO"), ("Polyethylene Glycol", "17", "g", "PO"),
]  # fmt: skip


def random_events(n_patients: int, seed: int = 0) -> pd.DataFrame:
    """Randomised events for ``n_patients`` (ids from 1), visits log-normal around 10 per
    patient (capped at 93, as in the paper), 1-6 day stays, a realistic mix of kinds."""
    rng = np.random.default_rng(seed)
    keys = list(LAB_BY_KEY)
    rows: list[dict] = []
    lab_id = itertools.count(1)
    rx_id = itertools.count(1)
    hadm = itertools.count(10_000)
    for sid in range(1, n_patients + 1):
        n_vis = int(np.clip(round(rng.lognormal(np.log(9), 0.8)), 2, 93))
        t = pd.Timestamp("2150-01-01") + pd.Timedelta(days=int(rng.integers(0, 3000)))
        for v in range(n_vis):
            h = next(hadm)
            stay = int(rng.integers(1, 6))
            a = t + pd.Timedelta(hours=int(rng.integers(0, 23)))
            d = a.normalize() + pd.Timedelta(days=stay, hours=12)
            rows.append(adm(sid, h, v, a, str(rng.choice(["EW EMER.", "URGENT", "ELECTIVE"]))))
            for day in range(stay + 1):
                when = a.normalize() + pd.Timedelta(days=day, hours=6)
                n_lab = int(rng.integers(4, 10) if day == 0 else rng.integers(0, 5))
                for key in rng.choice(keys, size=n_lab, replace=False):
                    spec = LAB_BY_KEY[key]
                    lo = spec.ref_low if spec.ref_low is not None else spec.ref_high * 0.3
                    hi = spec.ref_high if spec.ref_high is not None else lo * 2
                    value = float(rng.uniform(lo * 0.8, hi * 1.3))
                    rows.append(lab(sid, h, v, max(when, a), key, value, lab_id=next(lab_id)))
            for drug, dose, unit, route in [RX_POOL[i] for i in
                                            rng.choice(len(RX_POOL), int(rng.integers(2, 7)),
                                                       replace=False)]:  # fmt: skip
                when = a + pd.Timedelta(hours=int(rng.integers(1, 24 * stay)))
                rows.append(med(sid, h, v, when, drug, dose, unit, route, rx_id=next(rx_id)))
            for seq, i in enumerate(rng.choice(len(DX_POOL), int(rng.integers(2, 6)),
                                               replace=False), 1):  # fmt: skip
                code, title = DX_POOL[i]
                rows.append(dx(sid, h, v, d, seq, code, title, 9 if code[0].isdigit() else 10))
            if rng.random() < 0.3:
                code, title = PX_POOL[int(rng.integers(len(PX_POOL)))]
                rows.append(px(sid, h, v, a.normalize() + pd.Timedelta(days=1), 1, code, title))
            rows.append(dis(sid, h, v, d, str(rng.choice(["HOME", "HOME HEALTH CARE", "REHAB"]))))
            t = d + pd.Timedelta(days=int(rng.integers(8, 200)))
    return frame(rows)
