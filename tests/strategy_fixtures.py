"""Hand-built patients for the strategy tests: events -> the kit's template dialogue.

Patient 7001, three encounters (only key labs and disease drugs, so the missed-events rule
leaves nothing unstated):

====  ==========  =========  ======================================================
visit date        type       facts
====  ==========  =========  ======================================================
0     2150-01-10  EW EMER.   Creatinine 1.3 (high), Potassium 4.1, Glucose 212 (high);
                             Metformin 500 mg PO; E119, I10; discharged 2150-01-13 HOME
1     2150-03-02  URGENT     Creatinine 1.5 (high), Troponin T 0.08 (high);
                             Lisinopril 10 mg PO; procedure 02703ZZ (2150-03-03);
                             I214, E119; discharged 2150-03-05 HOME
2     2150-06-20  ELECTIVE   Creatinine 1.7 (high), Hemoglobin 10.9 (low);
                             Lisinopril 20 mg PO; N183, E119; discharged 2150-06-22 HOME
====  ==========  =========  ======================================================

Patient 7002 (for T6): two encounters, E119 and I10 only.
"""

from __future__ import annotations

import json

import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import LAB_BY_KEY
from clinlib.dialogue.synth import synthesize_dialogue

COLUMNS = list(ARTIFACTS["events"])
DX_TITLES = {
    "E119": "Type 2 diabetes mellitus without complications",
    "I10": "Essential (primary) hypertension",
    "I214": "Non-ST elevation (NSTEMI) myocardial infarction",
    "N183": "Chronic kidney disease, stage 3 (moderate)",
}
PX_TITLE = "Dilation of Coronary Artery, One Artery, Percutaneous Approach"


def _row(**kw) -> dict:
    row = {c: None for c in COLUMNS}
    row.update(kw)
    return row


def _adm(sid, hadm, v, when, atype):
    return _row(event_id=f"ADM-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="admission", code=atype,
                code_system="admission_type", label="Admission", source="admissions")  # fmt: skip


def _dis(sid, hadm, v, when, loc="HOME"):
    return _row(event_id=f"DIS-{hadm}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="discharge", code=loc,
                code_system="discharge_location", label="Discharge", source="admissions")  # fmt: skip


def _lab(sid, hadm, v, when, key, value, lab_id):
    spec = LAB_BY_KEY[key]
    vt = f"{value:.{spec.decimals}f}"
    hi, lo = spec.ref_high, spec.ref_low
    abnormal = (hi is not None and value > hi) or (lo is not None and value < lo)
    return _row(event_id=f"LAB-{lab_id}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="lab", code=str(spec.itemids[0]),
                code_system="itemid", label=spec.label, value=float(value), value_text=vt,
                unit=spec.unit, ref_low=lo, ref_high=hi,
                flag="abnormal" if abnormal else None, source="labevents")  # fmt: skip


def _med(sid, hadm, v, when, drug, dose, rx_id, unit="mg", route="PO"):
    return _row(event_id=f"RX-{rx_id}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="medication", code=drug, code_system="drug",
                label=drug, value=float(dose), value_text=dose, unit=unit, route=route,
                source="prescriptions")  # fmt: skip


def _dx(sid, hadm, v, when, seq, code):
    return _row(event_id=f"DX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="diagnosis", code=code, code_system="ICD10-CM",
                label=DX_TITLES[code], source="diagnoses_icd")  # fmt: skip


def _px(sid, hadm, v, when, seq, code, title):
    return _row(event_id=f"PX-{hadm}-{seq}", subject_id=sid, hadm_id=hadm, visit_idx=v,
                time=pd.Timestamp(when), kind="procedure", code=code, code_system="ICD10-PCS",
                label=title, source="procedures_icd")  # fmt: skip


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col, dtype in ARTIFACTS["events"].items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col]).astype("datetime64[us]")
        elif dtype == "int64" and col != "hadm_id":
            df[col] = df[col].astype("int64")
        elif dtype in ("string", "float64"):
            df[col] = df[col].astype(dtype)
    df["hadm_id"] = df["hadm_id"].astype("Int64")
    return df


def events_7001() -> pd.DataFrame:
    s = 7001
    return _frame([
        _adm(s, 801, 0, "2150-01-10 08:00", "EW EMER."),
        _lab(s, 801, 0, "2150-01-10 09:00", "creatinine", 1.3, 11),
        _lab(s, 801, 0, "2150-01-10 09:00", "potassium", 4.1, 12),
        _lab(s, 801, 0, "2150-01-10 09:00", "glucose", 212, 13),
        _med(s, 801, 0, "2150-01-10 10:00", "Metformin", "500", 31),
        _dx(s, 801, 0, "2150-01-13 14:00", 1, "E119"),
        _dx(s, 801, 0, "2150-01-13 14:00", 2, "I10"),
        _dis(s, 801, 0, "2150-01-13 14:00"),
        _adm(s, 802, 1, "2150-03-02 11:00", "URGENT"),
        _lab(s, 802, 1, "2150-03-02 12:00", "creatinine", 1.5, 21),
        _lab(s, 802, 1, "2150-03-02 12:00", "troponin_t", 0.08, 22),
        _med(s, 802, 1, "2150-03-02 13:00", "Lisinopril", "10", 41),
        _px(s, 802, 1, "2150-03-03", 1, "02703ZZ", PX_TITLE),
        _dx(s, 802, 1, "2150-03-05 10:00", 1, "I214"),
        _dx(s, 802, 1, "2150-03-05 10:00", 2, "E119"),
        _dis(s, 802, 1, "2150-03-05 10:00"),
        _adm(s, 803, 2, "2150-06-20 07:30", "ELECTIVE"),
        _lab(s, 803, 2, "2150-06-20 08:00", "creatinine", 1.7, 51),
        _lab(s, 803, 2, "2150-06-20 08:00", "hemoglobin", 10.9, 52),
        _med(s, 803, 2, "2150-06-20 09:00", "Lisinopril", "20", 61),
        _dx(s, 803, 2, "2150-06-22 12:00", 1, "N183"),
        _dx(s, 803, 2, "2150-06-22 12:00", 2, "E119"),
        _dis(s, 803, 2, "2150-06-22 12:00"),
    ])  # fmt: skip


def events_7002() -> pd.DataFrame:
    s = 7002
    return _frame([
        _adm(s, 901, 0, "2160-02-01 08:00", "URGENT"),
        _lab(s, 901, 0, "2160-02-01 09:00", "glucose", 180, 71),
        _dx(s, 901, 0, "2160-02-03 10:00", 1, "E119"),
        _dis(s, 901, 0, "2160-02-03 10:00"),
        _adm(s, 902, 1, "2160-05-01 08:00", "ELECTIVE"),
        _lab(s, 902, 1, "2160-05-01 09:00", "creatinine", 0.9, 72),
        _dx(s, 902, 1, "2160-05-02 10:00", 1, "I10"),
        _dis(s, 902, 1, "2160-05-02 10:00"),
    ])  # fmt: skip


def dialogue(events: pd.DataFrame) -> pd.DataFrame:
    """The kit's template dialogue of one patient's events (nothing missed, all covered)."""
    result = synthesize_dialogue(events, seed=0)
    cov = result.coverage
    assert (cov["status"] == "covered").all(), cov[cov["status"] != "covered"]
    return result.turns


def static_reference_encode(texts: list[str], max_pieces: int | None = None):
    """The shipped static encoder by hand (an implementation independent of model2vec): each
    text is the mean of its word pieces' rows of the shipped table — every piece (or the first
    ``max_pieces``), unknown pieces dropped, no special tokens — L2-normalised; float64, shape
    (len(texts), dim)."""
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from clinlib.strategies.encoders import STATIC_MODEL_DIR

    table = load_file(str(STATIC_MODEL_DIR / "model.safetensors"))["embeddings"]
    tok = Tokenizer.from_file(str(STATIC_MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    unk = tok.token_to_id("[UNK]")
    out = []
    for text in texts:
        ids = [i for i in tok.encode(text, add_special_tokens=False).ids if i != unk]
        ids = ids[:max_pieces] if max_pieces else ids
        vec = table[ids].astype(np.float64).mean(axis=0)
        out.append(vec / np.linalg.norm(vec))
    return np.stack(out)


def assert_snapshots_equal_truncated_builds(strat, sid: int, turns: pd.DataFrame, prep, at) -> dict:
    """A streaming strategy's snapshot after each visit prefix in ``at`` equals a scratch build
    of the dialogue truncated there (compared through JSON, as the cache stores them); returns
    the snapshots."""
    from clinlib.strategies.streaming import truncate

    snaps = strat.build_snapshots(sid, turns, prep, at)
    for t in at:
        scratch = strat.construct(sid, truncate(turns, t), prep).data
        assert json.loads(json.dumps(snaps[t])) == json.loads(json.dumps(scratch)), t
    return snaps
