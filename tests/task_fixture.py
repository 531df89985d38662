"""A hand-built events / coverage / dialogue fixture for the T1–T9 generators, with the golds
worked out by hand (see tests/tasks/test_task_generators.py).

Four kept patients (+ one dropped) over 2–3 encounters each:

1001 diabetes/low   v0 2150-01-01 EW EMER.   glucose 180 H, HbA1c 8.0 H, creatinine 1.0,
                                             K 5.8 H (01-02), chloride 101 (01-02, MISSED),
                                             sodium 138 (01-03) + sodium 139 (01-03, MISSED),
                                             metformin (start 01-01 10:00), acetaminophen
                                             (MISSED), dx E119
                    v1 2150-03-01 ELECTIVE   glucose 150 H, HbA1c 7.2 H, creatinine 1.05,
                                             K 5.9 H, sodium without unit (UNUSABLE),
                                             Glargine, Heparin (MISSED), Heparin Sodium,
                                             dx E119 + E875 (hyperkalemia first coded)
                    v2 2150-06-01 EW EMER.   glucose 120 H (06-01) and 300 H (06-02),
                                             HbA1c 6.5 H, creatinine 1.15, dx E119
1002 diabetes/medium v0 2150-02-01 URGENT    glucose 100, HbA1c 6.0 H, Hb 10.0 L,
                                             Hct 55.0 H (02-02), creatinine 1.12, dx E119 + I10
                    v1 2150-04-01 ELECTIVE   glucose 95, HbA1c 6.3 H, creatinine 1.10
                                             (06:00), lisinopril (10:00), dx E119 + D649
1003 ckd/high       v0 2150-01-10 EW EMER.   creatinine 2.0 H, BUN 40 H, K 3.0 L, dx I10
                    v1 2150-05-10 ELECTIVE   creatinine 2.4 H, furosemide, epoetin,
                                             hemodialysis (ICD-9 3995), dx N183 + E875
                    v2 2150-06-10 EW EMER.   K 3.0 L, BUN 52 H, dx N183
1004 cad/low        v0 2150-02-15 DIRECT EMER. troponin 0.50 H (its turn already says it is
                                             "consistent with" the NSTEMI), LDL 160 H,
                                             aspirin, atorvastatin, clopidogrel, dx I214,
                                             px 3722 + 0066 + 0040 (adjunct)
                    v1 2150-04-15 ELECTIVE   LDL 96, metoprolol tartrate, dx I2510
1005 hypertension   dropped by the verifier (kept = False): never gets a question.
"""

from __future__ import annotations

import pandas as pd

from clinlib.data.schema import ARTIFACTS

ITEM = {
    "glucose": 50931,
    "hba1c": 50852,
    "creatinine": 50912,
    "potassium": 50971,
    "chloride": 50902,
    "sodium": 50983,
    "hemoglobin": 51222,
    "hematocrit": 51221,
    "bun": 51006,
    "troponin_t": 51003,
    "ldl": 50906,
}
LABEL = {
    "glucose": ("Glucose", "mg/dL", 70.0, 100.0),
    "hba1c": ("% Hemoglobin A1c", "%", 4.8, 5.9),
    "creatinine": ("Creatinine", "mg/dL", 0.5, 1.2),
    "potassium": ("Potassium", "mEq/L", 3.3, 5.1),
    "chloride": ("Chloride", "mEq/L", 96.0, 108.0),
    "sodium": ("Sodium", "mEq/L", 133.0, 145.0),
    "hemoglobin": ("Hemoglobin", "g/dL", 11.2, 15.7),
    "hematocrit": ("Hematocrit", "%", 34.0, 45.0),
    "bun": ("Urea Nitrogen", "mg/dL", 6.0, 20.0),
    "troponin_t": ("Troponin T", "ng/mL", None, 0.01),
    "ldl": ("Cholesterol, LDL, Measured", "mg/dL", None, 130.0),
}
DX_TITLES = {
    "E119": "Type 2 diabetes mellitus without complications",
    "E875": "Hyperkalemia",
    "I10": "Essential (primary) hypertension",
    "D649": "Anemia, unspecified",
    "N183": "Chronic kidney disease, stage 3 (moderate)",
    "I214": "Non-ST elevation (NSTEMI) myocardial infarction",
    "I2510": "Atherosclerotic heart disease of native coronary artery without angina pectoris",
}
PX_TITLES = {
    "3995": "Hemodialysis",
    "3722": "Left heart cardiac catheterization",
    "0066": "Percutaneous transluminal coronary angioplasty [PTCA]",
    "0040": "Procedure on single vessel",
}

COHORT = [
    (1001, "diabetes", "low"),
    (1002, "diabetes", "medium"),
    (1003, "ckd", "high"),
    (1004, "cad", "low"),
    (1005, "hypertension", "low"),
]

# (subject, hadm, visit_idx, admit, discharge, admission_type)
VISITS = [
    (1001, 2001, 0, "2150-01-01 08:00", "2150-01-04 12:00", "EW EMER."),
    (1001, 2002, 1, "2150-03-01 08:00", "2150-03-03 12:00", "ELECTIVE"),
    (1001, 2003, 2, "2150-06-01 08:00", "2150-06-03 12:00", "EW EMER."),
    (1002, 2101, 0, "2150-02-01 08:00", "2150-02-03 12:00", "URGENT"),
    (1002, 2102, 1, "2150-04-01 05:00", "2150-04-03 12:00", "ELECTIVE"),
    (1003, 2201, 0, "2150-01-10 08:00", "2150-01-12 12:00", "EW EMER."),
    (1003, 2202, 1, "2150-05-10 08:00", "2150-05-13 12:00", "ELECTIVE"),
    (1003, 2203, 2, "2150-06-10 08:00", "2150-06-12 12:00", "EW EMER."),
    (1004, 2301, 0, "2150-02-15 08:00", "2150-02-18 12:00", "DIRECT EMER."),
    (1004, 2302, 1, "2150-04-15 08:00", "2150-04-16 12:00", "ELECTIVE"),
    (1005, 2401, 0, "2150-01-05 08:00", "2150-01-06 12:00", "ELECTIVE"),
    (1005, 2402, 1, "2150-03-05 08:00", "2150-03-06 12:00", "ELECTIVE"),
]

# (labevent_id, subject, hadm, visit, time, lab, value_text, flag, status)
LABS = [
    (1, 1001, 2001, 0, "2150-01-01 09:00", "glucose", "180", "abnormal", "covered"),
    (2, 1001, 2001, 0, "2150-01-01 09:00", "hba1c", "8.0", "abnormal", "covered"),
    (3, 1001, 2001, 0, "2150-01-01 09:00", "creatinine", "1.0", None, "covered"),
    (4, 1001, 2001, 0, "2150-01-02 06:00", "potassium", "5.8", "abnormal", "covered"),
    (5, 1001, 2001, 0, "2150-01-02 06:00", "chloride", "101", None, "missed"),
    (14, 1001, 2001, 0, "2150-01-03 06:00", "sodium", "138", None, "covered"),
    (15, 1001, 2001, 0, "2150-01-03 07:00", "sodium", "139", None, "missed"),
    (6, 1001, 2002, 1, "2150-03-01 09:00", "glucose", "150", "abnormal", "covered"),
    (7, 1001, 2002, 1, "2150-03-01 09:00", "hba1c", "7.2", "abnormal", "covered"),
    (8, 1001, 2002, 1, "2150-03-01 09:00", "creatinine", "1.05", None, "covered"),
    (9, 1001, 2002, 1, "2150-03-01 09:00", "potassium", "5.9", "abnormal", "covered"),
    (16, 1001, 2002, 1, "2150-03-02 06:00", "sodium", "140", None, "unusable"),
    (10, 1001, 2003, 2, "2150-06-01 09:00", "glucose", "120", "abnormal", "covered"),
    (11, 1001, 2003, 2, "2150-06-01 09:00", "hba1c", "6.5", "abnormal", "covered"),
    (12, 1001, 2003, 2, "2150-06-01 09:00", "creatinine", "1.15", None, "covered"),
    (13, 1001, 2003, 2, "2150-06-02 06:00", "glucose", "300", "abnormal", "covered"),
    (21, 1002, 2101, 0, "2150-02-01 09:00", "glucose", "100", None, "covered"),
    (22, 1002, 2101, 0, "2150-02-01 09:00", "hba1c", "6.0", "abnormal", "covered"),
    (25, 1002, 2101, 0, "2150-02-01 09:00", "hemoglobin", "10.0", "abnormal", "covered"),
    (26, 1002, 2101, 0, "2150-02-02 06:00", "hematocrit", "55.0", "abnormal", "covered"),
    (27, 1002, 2101, 0, "2150-02-01 09:00", "creatinine", "1.12", None, "covered"),
    (23, 1002, 2102, 1, "2150-04-01 06:00", "glucose", "95", None, "covered"),
    (24, 1002, 2102, 1, "2150-04-01 06:00", "hba1c", "6.3", "abnormal", "covered"),
    (28, 1002, 2102, 1, "2150-04-01 06:00", "creatinine", "1.10", None, "covered"),
    (31, 1003, 2201, 0, "2150-01-10 09:00", "creatinine", "2.0", "abnormal", "covered"),
    (32, 1003, 2201, 0, "2150-01-10 09:00", "bun", "40", "abnormal", "covered"),
    (33, 1003, 2201, 0, "2150-01-10 09:00", "potassium", "3.0", "abnormal", "covered"),
    (34, 1003, 2202, 1, "2150-05-10 09:00", "creatinine", "2.4", "abnormal", "covered"),
    (35, 1003, 2203, 2, "2150-06-10 09:00", "potassium", "3.0", "abnormal", "covered"),
    (36, 1003, 2203, 2, "2150-06-10 09:00", "bun", "52", "abnormal", "covered"),
    (41, 1004, 2301, 0, "2150-02-15 09:00", "troponin_t", "0.50", "abnormal", "covered"),
    (42, 1004, 2301, 0, "2150-02-15 09:00", "ldl", "160", "abnormal", "covered"),
    (43, 1004, 2302, 1, "2150-04-15 09:00", "ldl", "96", None, "covered"),
    (51, 1005, 2401, 0, "2150-01-05 09:00", "glucose", "99", None, "covered"),
]

# (pharmacy_id, subject, hadm, visit, start, drug, dose, unit, route, status)
MEDS = [
    (1, 1001, 2001, 0, "2150-01-01 10:00", "MetFORMIN (Glucophage)", "500", "mg", "PO", "covered"),
    (2, 1001, 2001, 0, "2150-01-01 10:00", "Acetaminophen", "650", "mg", "PO", "missed"),
    (3, 1001, 2002, 1, "2150-03-01 10:00", "Glargine", "10", "UNIT", "SC", "covered"),
    (5, 1001, 2002, 1, "2150-03-01 10:00", "Heparin", "5000", "UNIT", "SC", "missed"),
    (6, 1001, 2002, 1, "2150-03-01 11:00", "Heparin Sodium", "5000", "UNIT", "SC", "covered"),
    (21, 1002, 2102, 1, "2150-04-01 10:00", "Lisinopril", "10", "mg", "PO", "covered"),
    (31, 1003, 2202, 1, "2150-05-10 10:00", "Furosemide", "40", "mg", "PO", "covered"),
    (32, 1003, 2202, 1, "2150-05-10 10:00", "Epoetin Alfa", "4000", "UNIT", "SC", "covered"),
    (41, 1004, 2301, 0, "2150-02-15 10:00", "Aspirin", "81", "mg", "PO", "covered"),
    (42, 1004, 2301, 0, "2150-02-15 10:00", "Atorvastatin", "40", "mg", "PO", "covered"),
    (43, 1004, 2301, 0, "2150-02-15 10:00", "Clopidogrel", "75", "mg", "PO", "covered"),
    (44, 1004, 2302, 1, "2150-04-15 10:00", "Metoprolol Tartrate", "25", "mg", "PO", "covered"),
]

# (subject, hadm, visit, seq, code) — ICD-10-CM diagnoses, stamped at discharge
DXS = [
    (1001, 2001, 0, 1, "E119"),
    (1001, 2002, 1, 1, "E119"),
    (1001, 2002, 1, 2, "E875"),
    (1001, 2003, 2, 1, "E119"),
    (1002, 2101, 0, 1, "E119"),
    (1002, 2101, 0, 2, "I10"),
    (1002, 2102, 1, 1, "E119"),
    (1002, 2102, 1, 2, "D649"),
    (1003, 2201, 0, 1, "I10"),
    (1003, 2202, 1, 1, "N183"),
    (1003, 2202, 1, 2, "E875"),
    (1003, 2203, 2, 1, "N183"),
    (1004, 2301, 0, 1, "I214"),
    (1004, 2302, 1, 1, "I2510"),
    (1005, 2401, 0, 1, "I10"),
    (1005, 2402, 1, 1, "I10"),
]

# (subject, hadm, visit, seq, chartdate, ICD-9-PCS code)
PXS = [
    (1003, 2202, 1, 1, "2150-05-11", "3995"),
    (1004, 2301, 0, 1, "2150-02-16", "3722"),
    (1004, 2301, 0, 2, "2150-02-16", "0066"),
    (1004, 2301, 0, 3, "2150-02-16", "0040"),
]

# A covered troponin whose own sentence already attributes it to the NSTEMI (T3 must skip it).
NATURAL_ATTRIBUTION = {
    "LAB-41": "On 2150-02-15 your Troponin T was 0.50 ng/mL, which is consistent with "
    "Non-ST elevation (NSTEMI) myocardial infarction."
}


def _event(**kw) -> dict:
    base = dict.fromkeys(ARTIFACTS["events"])
    base.update(kw)
    return base


def events() -> pd.DataFrame:
    """The events table (ARTIFACTS["events"] columns)."""
    rows = []
    for sid, hadm, v, admit, disch, atype in VISITS:
        rows.append(_event(event_id=f"ADM-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                           time=admit, kind="admission", code=atype,
                           code_system="admission_type", label="Admission", end_time=disch,
                           source="admissions"))  # fmt: skip
        rows.append(_event(event_id=f"DIS-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                           time=disch, kind="discharge", code="HOME",
                           code_system="discharge_location", label="Discharge",
                           source="admissions"))  # fmt: skip
    for lid, sid, hadm, v, t, lab, vt, flag, _ in LABS:
        label, unit, lo, hi = LABEL[lab]
        if lid == 16:
            unit = None  # the unusable row
        rows.append(_event(event_id=f"LAB-{lid}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                           time=t, kind="lab", code=str(ITEM[lab]), code_system="itemid",
                           label=label, value=float(vt), value_text=vt, unit=unit, ref_low=lo,
                           ref_high=hi, flag=flag, source="labevents"))  # fmt: skip
    for pid, sid, hadm, v, t, drug, dose, unit, route, _ in MEDS:
        rows.append(_event(event_id=f"RX-{pid}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                           time=t, kind="medication", code=drug, code_system="drug",
                           label=drug, value=float(dose), value_text=dose, unit=unit,
                           route=route, source="prescriptions"))  # fmt: skip
    disch = {h: d for _, h, _, _, d, _ in VISITS}
    for sid, hadm, v, seq, code in DXS:
        rows.append(_event(event_id=f"DX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm,
                           visit_idx=v, time=disch[hadm], kind="diagnosis", code=code,
                           code_system="ICD10-CM", label=DX_TITLES[code],
                           source="diagnoses_icd"))  # fmt: skip
    for sid, hadm, v, seq, day, code in PXS:
        rows.append(_event(event_id=f"PX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm,
                           visit_idx=v, time=day, kind="procedure", code=code,
                           code_system="ICD9-PCS", label=PX_TITLES[code],
                           source="procedures_icd"))  # fmt: skip
    df = pd.DataFrame(rows, columns=list(ARTIFACTS["events"]))
    for col in ("time", "end_time"):
        df[col] = pd.to_datetime(df[col], format="ISO8601")
    return df


def status_of() -> dict[str, str]:
    """event_id -> coverage status (everything not listed otherwise is covered)."""
    out = {}
    for lid, *_, status in LABS:
        out[f"LAB-{lid}"] = status
    for pid, *_, status in MEDS:
        out[f"RX-{pid}"] = status
    return out


def _sentence(e: dict) -> str:
    kind, date = e["kind"], pd.Timestamp(e["time"]).strftime("%Y-%m-%d")
    if e["event_id"] in NATURAL_ATTRIBUTION:
        return NATURAL_ATTRIBUTION[e["event_id"]]
    if kind == "admission":
        return f"You were admitted on {date}, and the admission type was {e['code']}."
    if kind == "discharge":
        return f"You were discharged on {date} to {e['code']}."
    if kind == "lab":
        return f"On {date}, your {e['label']} was {e['value_text']} {e['unit']}."
    if kind == "medication":
        return f"On {date} we started {e['label']} {e['value_text']} {e['unit']} {e['route']}."
    if kind == "procedure":
        return f"On {date} we performed {e['label']} (procedure code {e['code']})."
    return f"At discharge on {date} we documented {e['label']} ({e['code']})."


def dialogue_and_coverage() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Turns (a patient turn opening each visit, then one clinician turn per covered event)
    and event_coverage for every event."""
    ev = events().sort_values(["subject_id", "visit_idx", "time", "event_id"])
    status = status_of()
    turns, cov = [], []
    for sid, pev in ev.groupby("subject_id", sort=True):
        t = 0
        for v, vev in pev.groupby("visit_idx", sort=True):
            date = pd.Timestamp(vev["time"].min()).strftime("%Y-%m-%d")
            turns.append(dict(subject_id=sid, visit_idx=v, turn_idx=t, speaker="patient",
                              text="Hello, doctor.", text_tagged="Hello, doctor.", event_ids=[],
                              visit_date=date))  # fmt: skip
            t += 1
            for e in vev.to_dict("records"):
                st = status.get(e["event_id"], "covered")
                turn = None
                if st == "covered":
                    text = _sentence(e)
                    turns.append(dict(subject_id=sid, visit_idx=v, turn_idx=t,
                                      speaker="clinician", text=text,
                                      text_tagged=f"{text} [{e['event_id']}]",
                                      event_ids=[e["event_id"]], visit_date=date))  # fmt: skip
                    turn = t
                    t += 1
                cov.append(dict(subject_id=sid, event_id=e["event_id"], kind=e["kind"],
                                visit_idx=v, status=st, reason="", turn_idx=turn))  # fmt: skip
    turns_df = pd.DataFrame(turns)
    cov_df = pd.DataFrame(cov)
    cov_df["turn_idx"] = cov_df["turn_idx"].astype("Int64")
    return turns_df, cov_df


def cohort() -> pd.DataFrame:
    return pd.DataFrame(COHORT, columns=["subject_id", "disease", "tertile"])


def summary() -> pd.DataFrame:
    return pd.DataFrame(
        {"subject_id": [c[0] for c in COHORT], "kept": [c[0] != 1005 for c in COHORT]}
    )


def artifacts() -> dict[str, pd.DataFrame]:
    """Everything make_inputs needs: events, coverage, dialogues, cohort, summary."""
    turns, cov = dialogue_and_coverage()
    return {
        "events": events(),
        "coverage": cov,
        "dialogues": turns,
        "cohort": cohort(),
        "summary": summary(),
    }


def inputs(raw_lab_days=None, shuffle_seed: int | None = None):
    """TaskInputs of the fixture (rows optionally shuffled to test order independence)."""
    from clinlib.tasks.generators.inputs import make_inputs

    a = artifacts()
    if shuffle_seed is not None:
        a = {k: v.sample(frac=1.0, random_state=shuffle_seed) for k, v in a.items()}
    return make_inputs(
        a["events"], a["coverage"], a["dialogues"], a["cohort"], a["summary"],
        raw_lab_days=raw_lab_days,
    )  # fmt: skip
