"""Lab units by what they are (paper §3 "Cohort"; docs/real-data.md "Impossible values are
excluded, counted and reported, never stated"): the one table of known alternative units per
panel lab, and how a value or reference range reported in one is converted.

A converted number keeps the precision of the number it was converted from: it is rounded to
as many significant digits as the source's shortest decimal text has (at least 2): 100 µmol/L
creatinine is 1.13 mg/dL (not 1.1309658...), a range of 44-106 µmol/L is 0.50-1.20 mg/dL,
5.5 mmol/L glucose is 99 mg/dL. A unit the table does not know is never assumed to be the
canonical one: the row is excluded (``unit_not_convertible``). A MEDS code that carries its unit
(``LAB//50912//umol/L``) goes through the same table (:mod:`clinlib.data.sources.meds.ranges`).
"""

from __future__ import annotations

import math

import pandas as pd

from clinlib.data.vocab import LAB_BY_KEY

# Known alternative units: canonical value = reported value * factor.
UNIT_FACTORS: dict[str, dict[str, float]] = {
    "creatinine": {"umol/L": 1 / 88.42, "µmol/L": 1 / 88.42, "μmol/L": 1 / 88.42},
    "potassium": {"mmol/L": 1.0},
    "sodium": {"mmol/L": 1.0},
    "glucose": {"mmol/L": 18.016},
    "bun": {"mmol/L": 2.801},
    "bicarbonate": {"mmol/L": 1.0},
    "chloride": {"mmol/L": 1.0},
    "anion_gap": {"mmol/L": 1.0},
    "calcium": {"mmol/L": 4.008},
    "hemoglobin": {"g/L": 0.1},
    "platelets": {"10^9/L": 1.0, "x10E9/L": 1.0},
    "wbc": {"10^9/L": 1.0, "x10E9/L": 1.0},
    "hba1c": {},
    "ldl": {"mmol/L": 38.67},
    "total_cholesterol": {"mmol/L": 38.67},
    "triglycerides": {"mmol/L": 88.57},
    "troponin_t": {"ng/L": 0.001},
}
MIN_SIG_DIGITS = 2
# A number written in exponent form keeps this many significant digits.
EXP_SIG_DIGITS = 6


def factor_of(lab_key: str, unit) -> float | None:
    """The factor to the lab's canonical unit: 1.0 for the canonical unit, the table's factor
    for a known alternative, None for any other (or an empty) unit."""
    unit = "" if unit is None or (isinstance(unit, float) and math.isnan(unit)) else str(unit)
    unit = unit.strip()
    if unit == LAB_BY_KEY[lab_key].unit:
        return 1.0
    return UNIT_FACTORS.get(lab_key, {}).get(unit)


def sig_digits(x: float) -> int:
    """Significant digits of ``x``'s shortest decimal text (``88.0`` -> 2, ``106.104`` -> 6,
    ``100.0`` -> 3; at least :data:`MIN_SIG_DIGITS`)."""
    text = repr(abs(float(x)))
    if "e" in text or "inf" in text or "nan" in text:
        return EXP_SIG_DIGITS
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return max(len(text.replace(".", "").lstrip("0")), MIN_SIG_DIGITS)


def convert(x: float, factor: float) -> float:
    """``x`` reported in an alternative unit, in the canonical unit, rounded to ``x``'s
    significant digits (a factor of 1 only renames the unit)."""
    if factor == 1 or x is None or not math.isfinite(x):
        return x
    y = x * factor
    if y == 0:
        return y
    return round(y, sig_digits(x) - 1 - math.floor(math.log10(abs(y))))


def sig_digits_sql(x: str) -> str:
    """SQL of :func:`sig_digits` (DuckDB's shortest DOUBLE text)."""
    t = f"CAST(abs({x}) AS VARCHAR)"
    stripped = f"CASE WHEN contains({t}, '.') THEN rtrim(rtrim({t}, '0'), '.') ELSE {t} END"
    digits = f"length(ltrim(replace({stripped}, '.', ''), '0'))"
    return (
        f"CASE WHEN contains({t}, 'e') OR contains({t}, 'n') THEN {EXP_SIG_DIGITS} "
        f"ELSE greatest({digits}, {MIN_SIG_DIGITS}) END"
    )


def convert_sql(x: str, factor: str) -> str:
    """SQL of :func:`convert` (``factor`` NULL: ``x`` as is)."""
    y = f"({x}) * ({factor})"
    places = f"CAST({sig_digits_sql(x)} - 1 - floor(log10(abs({y}))) AS INTEGER)"
    return (
        f"CASE WHEN ({factor}) IS NULL OR ({factor}) = 1 OR ({x}) IS NULL THEN ({x}) "
        f"WHEN {y} = 0 OR isnan({y}) OR isinf({y}) THEN {y} "
        f"ELSE round({y}, {places}) END"
    )


def units_frame() -> pd.DataFrame:
    """(lab_key, unit, factor): the canonical unit of every panel lab (factor 1) and the
    known alternatives."""
    rows = [(key, lab.unit, 1.0) for key, lab in LAB_BY_KEY.items()]
    rows += [(key, unit, f) for key, alts in UNIT_FACTORS.items() for unit, f in alts.items()]
    return pd.DataFrame(rows, columns=["lab_key", "unit", "factor"])


def conversion_lines(conversions: pd.DataFrame) -> list[str]:
    """``labevents: 12 values and their ranges converted to canonical units (creatinine
    umol/L -> mg/dL x12)``; nothing when none was converted."""
    if conversions is None or conversions.empty:
        return []
    n = int(conversions["rows"].sum())
    what = ", ".join(
        f"{r.lab_key} {r.from_unit} -> {r.to_unit} x{r.rows}"
        for r in conversions.itertuples(index=False)
    )
    return [f"labevents: {n} values and their ranges converted to canonical units ({what})"]
