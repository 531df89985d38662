"""The plausibility screen again, in pandas, for the pandas cross-check of the cohort stage
(:mod:`clinlib.data.cohort_pandas`).

The rules are the documented ones (:mod:`clinlib.data.plausibility`,
:mod:`clinlib.data.plausibility_rx`, docs/real-data.md "Plausibility rules") and so are their
constants (bounds, unit factors, dose limits: a constant lives in one place); the code is
written afresh over DataFrames, without SQL, so that a mistake in either implementation shows
as a disagreement between the two paths (tests/data/test_plausibility_pandas.py).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from clinlib.data.plausibility import BOUNDS, MAX_AGE, MAX_YEAR, MIN_YEAR
from clinlib.data.plausibility_rx import (
    DOSE_MAX,
    DOSE_MAX_ANY,
    INSTRUCTION_RE,
    MAX_DRUG_NAME_CHARS,
    MAX_STRENGTH_MULTIPLE,
    UNIT_SCALE,
)
from clinlib.data.units import UNIT_FACTORS
from clinlib.data.vocab import LAB_BY_KEY

_THOUSANDS = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")


def admission_rule(row: dict, dod) -> str | None:
    """The first admission rule a row breaks (None: plausible)."""
    admit, disch = row["admittime"], row["dischtime"]
    if pd.isna(admit) or not MIN_YEAR <= admit.year <= MAX_YEAR:
        return "admittime_out_of_range"
    age = row.get("anchor_age")
    if pd.notna(age) and not 0 <= age + admit.year - row["anchor_year"] <= MAX_AGE:
        return "age_at_admission_out_of_range"
    if pd.isna(disch) or disch < admit:
        return "discharge_before_admission"
    if pd.notna(dod) and admit.date() > pd.Timestamp(dod).date():
        return "admission_after_death"
    return None


def screen_admissions(adm: pd.DataFrame, patients: pd.DataFrame) -> pd.DataFrame:
    """``adm`` with a ``rule`` column (None = kept); ``patients`` gives anchor_age,
    anchor_year and dod (when present)."""
    cols = [c for c in ("subject_id", "anchor_age", "anchor_year", "dod") if c in patients]
    joined = adm.merge(patients[cols], on="subject_id", how="left")
    dods = joined["dod"] if "dod" in joined else pd.Series(pd.NaT, index=joined.index)
    rules = [admission_rule(r, d) for r, d in zip(joined.to_dict("records"), dods, strict=True)]
    return adm.assign(rule=pd.Series(rules, index=adm.index, dtype=object))


def _hadm_rule(subject_id, hadm_id, raw_keys: set, kept: set) -> str | None:
    if pd.isna(hadm_id):
        return None
    if (int(subject_id), int(hadm_id)) not in raw_keys:
        return "unknown_hadm_id"
    if int(hadm_id) not in kept:
        return "admission_excluded"
    return None


def _lab_rule(lab_key: str, value: float, unit, hadm: str | None) -> tuple[str | None, float]:
    """(rule, factor): factor NaN when the row has no unit (nothing to convert or rename)."""
    if not math.isfinite(value):
        return "value_not_finite", math.nan
    unit = "" if pd.isna(unit) else str(unit).strip()
    canon = LAB_BY_KEY[lab_key].unit
    if unit == "" and canon:
        return "unit_missing", math.nan  # never read as the panel's unit
    if unit == "":
        factor = math.nan
    elif unit == canon:
        factor = 1.0
    elif unit in UNIT_FACTORS.get(lab_key, {}):
        factor = UNIT_FACTORS[lab_key][unit]
    else:
        return "unit_not_convertible", math.nan
    lo, hi = BOUNDS[lab_key]
    if not lo <= value * (1.0 if math.isnan(factor) else factor) <= hi:
        return "value_out_of_bounds", factor
    return hadm, factor


def screen_labs(labs: pd.DataFrame, adm_raw: pd.DataFrame, adm_kept: pd.DataFrame) -> pd.DataFrame:
    """Panel lab rows (with ``lab_key``) and a numeric value, screened: the rows kept, in
    canonical units (value re-formatted from the converted number, reference range scaled),
    plus a ``rule`` column on the excluded ones (returned too, for counting)."""
    raw_keys = set(
        zip(adm_raw["subject_id"].astype(int), adm_raw["hadm_id"].astype(int), strict=True)
    )
    kept = set(adm_kept["hadm_id"].astype(int))
    rules, factors = [], []
    for key, v, u, s, h in zip(
        labs["lab_key"],
        labs["valuenum"],
        labs["valueuom"],
        labs["subject_id"],
        labs["hadm_id"],
        strict=True,
    ):
        rule, f = _lab_rule(key, float(v), u, _hadm_rule(s, h, raw_keys, kept))
        rules.append(rule)
        factors.append(f)
    out = labs.assign(rule=rules, _factor=factors)
    f = out["_factor"].fillna(1.0)
    conv = f != 1.0  # a converted number: its reported text no longer applies
    known = out["_factor"].notna()  # a known unit is written the panel's way
    canon = out["lab_key"].map(lambda k: LAB_BY_KEY[k].unit)
    for col in ("valuenum", "ref_range_lower", "ref_range_upper"):
        out[col] = [_converted(x, k) for x, k in zip(out[col], f, strict=True)]
    out["value"] = out["value"].astype(object).where(~conv, None)
    out["valueuom"] = out["valueuom"].astype(object).where(~known, canon)
    return out.drop(columns="_factor")


def _converted(x, factor: float):
    """``x * factor`` with as many significant digits as ``x``'s shortest text has (at least
    2; docs/real-data.md), written afresh with ``%g`` formatting; factor 1: ``x`` as is."""
    if factor == 1.0 or x is None or pd.isna(x) or not math.isfinite(x):
        return x
    text = repr(abs(float(x)))
    if "e" in text:
        n = 6
    else:
        text = text.rstrip("0").rstrip(".") if "." in text else text
        n = max(len(text.replace(".", "").lstrip("0")), 2)
    return float(f"{x * factor:.{n}g}")


def dose_number(text) -> float | None:
    """The number of a ``dose_val_rx`` text ("25,000" -> 25000.0; a range or words -> None)."""
    if text is None or pd.isna(text):
        return None
    t = str(text).strip()
    if _THOUSANDS.fullmatch(t):
        t = t.replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def _dose_rule(dose: float | None, unit, strength=None) -> str | None:
    if dose is None:
        return None
    if math.isnan(dose) or math.isinf(dose):
        return "dose_not_finite"
    if dose < 0:
        return "dose_negative"
    unit = "" if pd.isna(unit) else str(unit).strip().lower()
    if dose > DOSE_MAX.get(unit, DOSE_MAX_ANY):
        return "dose_out_of_bounds"
    cap = _strength_cap(strength, unit)
    return "dose_over_strength" if cap is not None and dose > cap else None


_STRENGTH = re.compile(r"\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d*\.?\d+)\s*([A-Za-z]+)")


def _name_rule(drug) -> str | None:
    """A drug name shaped like an instruction or markup, or too long (plausibility_rx)."""
    if drug is None or pd.isna(drug):
        return None
    if re.search(INSTRUCTION_RE, str(drug), flags=re.IGNORECASE):
        return "drug_name_instruction_shaped"
    return "drug_name_too_long" if len(str(drug)) > MAX_DRUG_NAME_CHARS else None


def _strength_cap(strength, dose_unit: str) -> float | None:
    """MAX_STRENGTH_MULTIPLE x the product strength's leading amount, in the dose's unit
    (None: no amount, or another dimension); written afresh with Python's re."""
    if strength is None or pd.isna(strength):
        return None
    m = _STRENGTH.match(str(strength))
    if not m or m.group(2).lower() not in UNIT_SCALE or dose_unit not in UNIT_SCALE:
        return None
    (s_dim, s_size), (d_dim, d_size) = UNIT_SCALE[m.group(2).lower()], UNIT_SCALE[dose_unit]
    if s_dim != d_dim:
        return None
    return float(m.group(1).replace(",", "")) * s_size / d_size * MAX_STRENGTH_MULTIPLE


def screen_prescriptions(
    rx: pd.DataFrame, adm_raw: pd.DataFrame, adm_kept: pd.DataFrame
) -> pd.DataFrame:
    """Medication-order rows with ``dose_num`` and ``rule``: a failing row's rule, its
    pharmacy order's other rows ``order_excluded`` (None = kept)."""
    raw_keys = set(
        zip(adm_raw["subject_id"].astype(int), adm_raw["hadm_id"].astype(int), strict=True)
    )
    kept = set(adm_kept["hadm_id"].astype(int))
    doses = [dose_number(t) for t in rx["dose_val_rx"]]
    own = [
        _dose_rule(d, u, p) or _name_rule(n) or _hadm_rule(s, h, raw_keys, kept)
        for d, u, p, n, s, h in zip(
            doses,
            rx["dose_unit_rx"],
            rx["prod_strength"],
            rx["drug"],
            rx["subject_id"],
            rx["hadm_id"],
            strict=True,
        )
    ]
    out = rx.assign(dose_num=pd.array(doses, dtype="Float64"), rule=own)
    failed = set(out.loc[out["rule"].notna(), "pharmacy_id"].astype(int))
    sibling = out["rule"].isna() & out["pharmacy_id"].astype(int).isin(failed)
    out.loc[sibling, "rule"] = "order_excluded"
    return out


def collapse_spaces(names: pd.Series) -> pd.Series:
    """Drug names trimmed, runs of ASCII whitespace one space (the displayed label)."""
    return names.astype("string").str.replace(r"[ \t\n\r\f\v]+", " ", regex=True).str.strip(" ")


def zero_dose(dose_num: pd.Series) -> np.ndarray:
    """Orders whose dose is 0 (sliding scale: told without a dose)."""
    return (dose_num == 0).fillna(False).to_numpy(dtype=bool)
