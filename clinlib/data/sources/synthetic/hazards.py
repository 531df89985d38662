"""Contraindicated orders in the SYNTHETIC record: the shapes of the derived trap rules
(:mod:`clinlib.data.contraindications`; MedMemoryBench's introduction: "medication
contraindications ... embedded ... as high-priority signals"), planted at low rates as a real
hosp record has them — an order placed while a lab state contraindicated its drug.

Drawn from their own stream (``default_rng([seed, chunk, HAZARD_STREAM])``), so the base and
shape streams keep their draws; only the rows planted here (and the platelet values of the
thrombocytopenic stays) are new:

=======================================  ======================================================
lab state (the rule's own definition)    planted
=======================================  ======================================================
platelets below 50 K/uL                  :data:`THROMBO_P` of sepsis stays: platelets fall to
                                         ``1 - m`` of baseline over 48 h, ``m ~ U(0.75, 0.92)``
                                         (sepsis-associated thrombocytopenia); a heparin drip
                                         follows the first count below 50 in
                                         :data:`ORDER_P` ``["platelets"]`` of them
potassium above the reference range      after the first such potassium of a stay, potassium
                                         chloride in :data:`ORDER_P` ``["potassium"]`` of stays
KDIGO creatinine rise (>= 0.3 mg/dL      after the first creatinine that rose >= 0.3 mg/dL over
within 48 h)                             the previous one (<= 48 h earlier), vancomycin in
                                         :data:`ORDER_P` ``["creatinine"]`` of stays
=======================================  ======================================================

Each planted order starts 30 min to 3 h after the state's draw and before that lab's next draw
(so the state is the lab's CURRENT value when the drug is ordered), runs one to three days
within the stay, and is an ordinary order otherwise (dose, route, eMAR rows). Metformin with
eGFR < 30 needs no planting: the chronic-drug plan already continues metformin as CKD advances.
The rates are choices, not measured MIMIC-IV shares (no share is published); they are low so
the record stays a record and high enough that the quick profile (48 patients) holds each
shape.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources.synthetic.numeric import providers, to_minute, uniform

HAZARD_STREAM = 11  # third word of the hazard generator's seed sequence
THROMBO_P = 0.3
THROMBO_MAG = (0.75, 0.92)
THROMBO_HOURS = 48.0
PLATELET_STATE = 50.0  # K/uL: clinlib.data.contraindications.PLATELET_LIMIT
CREATININE_RISE = 0.3  # mg/dL within 48 h: KDIGO 2012 §2.1.1
ORDER_P: dict[str, float] = {"potassium": 0.12, "platelets": 0.6, "creatinine": 0.25}
ORDER_DRUG: dict[str, str] = {
    "potassium": "potassium_chloride",
    "platelets": "heparin_porcine",
    "creatinine": "vancomycin",
}
_HOUR = 3_600


def plant_admissions(rng: np.random.Generator, a: SimpleNamespace) -> None:
    """Set ``a.thrombo_mag`` (per admission; 0 = none): the platelet fall of the
    thrombocytopenic sepsis stays (module docstring)."""
    pick = a.sepsis & (rng.random(a.n) < THROMBO_P)
    a.thrombo_mag = np.where(pick, uniform(rng, *THROMBO_MAG, a.n), 0.0)


def thrombo_factor(mag: np.ndarray, hours: np.ndarray) -> np.ndarray:
    """Platelet multiplier ``1 - mag * min(hours / 48, 1)`` at ``hours`` into the stay."""
    return 1.0 - mag * np.minimum(np.maximum(hours, 0.0) / THROMBO_HOURS, 1.0)


def lab_states(
    n_adm: int, pat, adm, time, value, item, ref_high, codes: dict[str, int]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per admission, the time of the first inpatient draw in each planted state and the time
    of that lab's next draw of the patient (int64 max when none).

    Args:
        n_adm: admissions in the chunk.
        pat, adm, time, value, item, ref_high: per result row, in (patient, time) order.
        codes: item code of ``potassium``, ``platelets`` and ``creatinine``.
    """
    never = np.iinfo(np.int64).max
    out = {}
    for name, code in codes.items():
        sel = np.flatnonzero(item == code)
        p, t, v = pat[sel], time[sel], value[sel]
        same_next = np.r_[p[1:] == p[:-1], False]
        t_next = np.where(same_next, np.r_[t[1:], never], never)
        if name == "potassium":
            hit = v > ref_high[sel]
        elif name == "platelets":
            hit = v < PLATELET_STATE
        else:
            same_prev = np.r_[False, p[1:] == p[:-1]]
            dt = np.r_[never, t[1:] - t[:-1]]
            rise = np.r_[-np.inf, v[1:] - v[:-1]]
            hit = same_prev & (dt <= 48 * _HOUR) & (rise >= CREATININE_RISE - 1e-9)
        hit &= adm[sel] >= 0
        first = np.full(n_adm, never)
        rows = np.flatnonzero(hit)
        np.minimum.at(first, adm[sel][rows], t[rows])
        nxt = np.full(n_adm, never)
        at_first = rows[t[rows] == first[adm[sel][rows]]]
        nxt[adm[sel][at_first]] = t_next[at_first]
        out[name] = (first, nxt)
    return out


def planted_orders(
    rng: np.random.Generator, a: SimpleNamespace, states: dict, allowed: np.ndarray
) -> dict[str, np.ndarray]:
    """The planted orders (module docstring): per order ``adm``, ``drug`` (code in
    :data:`clinlib.data.sources.synthetic_shapes.ALL_KEYS`), ``start``, ``stop``, ``route``,
    ``dose`` (index into ``DOSE_STRINGS``) and ``provider``."""
    never = np.iinfo(np.int64).max
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("adm", "drug", "start", "stop")}
    for name, (first, nxt) in states.items():
        u = rng.random(a.n)
        delay = np.rint(uniform(rng, 0.5, 3.0, a.n) * _HOUR).astype(np.int64)
        days = uniform(rng, 1.0, 3.0, a.n)
        if name == "platelets":  # the drip follows the fall it ignores
            ok = a.thrombo_mag > 0
        else:
            ok = np.ones(a.n, dtype=bool)
        ok &= allowed & (first < never) & (u < ORDER_P[name])
        sel = np.flatnonzero(ok)
        gap = np.where(nxt[sel] < never, nxt[sel] - first[sel], never)
        start = first[sel] + np.maximum(np.minimum(delay[sel], gap // 2), 120)
        start = to_minute(start + 59)  # whole minutes, still after the draw
        fits = (start < a.disch[sel] - _HOUR) & (start - first[sel] < np.minimum(gap, never))
        sel, start = sel[fits], start[fits]
        stop = np.minimum(start + np.rint(days[sel] * 24 * _HOUR).astype(np.int64), a.disch[sel])
        parts["adm"].append(sel)
        parts["drug"].append(np.full(sel.size, shp.CODE[ORDER_DRUG[name]]))
        parts["start"].append(start)
        parts["stop"].append(to_minute(np.maximum(stop, start + _HOUR)))
    out = {k: np.concatenate(v).astype(np.int64) for k, v in parts.items()}
    first_route = np.array([shp.ROUTE_POS[dr.routes[0]] for dr in shp.ALL_DRUGS])
    out["route"] = first_route[out["drug"]]
    out["dose"] = shp.pick_dose(rng, out["drug"])
    out["provider"] = rng.integers(0, providers().size, out["drug"].size)
    return out
