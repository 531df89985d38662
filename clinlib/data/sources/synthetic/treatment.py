"""When each chronic drug of a SYNTHETIC patient starts: threshold crossings of the latent
trajectory and acute events (paper §3 "Cohort"; the trajectories of the package docstring).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources.synthetic.design import DAY_S, FEW_RX, HOUR_S, NO_ADM, YEAR_DAYS
from clinlib.data.sources.synthetic.numeric import to_minute, uniform
from clinlib.data.sources.synthetic.population import (
    earliest_index,
    first_adm_from,
    first_flagged,
    kth_admission,
)


def treatment_plan(
    rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace
) -> SimpleNamespace:
    """When each chronic drug starts (admission index and exact documented starttime)."""
    treat = ~np.isin(p.mode, (FEW_RX, NO_ADM)) & (p.n_adm > 0)
    plan = SimpleNamespace(adm={}, start_s={}, ts_days={})
    start = _starter(rng, p, a, plan, treat)
    _diabetes_starts(start, p, a, plan)
    _cardiovascular_starts(rng, start, p, a)
    _ckd_starts(start, p, a, treat, plan)
    return plan


def _per_year(years: np.ndarray) -> np.ndarray:
    """Years as days."""
    return years * YEAR_DAYS


def _starter(rng: np.random.Generator, p, a, plan: SimpleNamespace, treat: np.ndarray):
    """``start(name, adm)``: record a drug's first admission and documented starttime."""
    n = p.n

    def start(name: str, adm: np.ndarray) -> None:
        adm = np.where(treat, adm, -1)
        ok = adm >= 0
        safe = np.maximum(adm, 0)
        # Documented starttime: hours after admission, after the admission-day labs
        # (drawn 15-75 min after admittime) and before discharge.
        hi = np.minimum(20.0, a.los[safe] * 24 - 1.0) if a.n else np.zeros(n)
        hours = uniform(rng, 1.5, np.maximum(hi, 1.6), n)
        start_s = to_minute(a.admit[safe] + np.rint(hours * HOUR_S).astype(np.int64)) if a.n else 0
        plan.adm[name] = adm
        plan.start_s[name] = np.where(ok, start_s, -1)
        plan.ts_days[name] = np.where(ok, (start_s - p.t0) / DAY_S, np.inf)

    return start


def _diabetes_starts(start, p: SimpleNamespace, a: SimpleNamespace, plan: SimpleNamespace) -> None:
    """Metformin when latent A1c crosses 7, glipizide at 8, insulin glargine at 8.5, each at
    the first admission after the crossing (and >= 90 days after the previous step)."""
    pats = np.arange(p.n)
    drift = np.maximum(p.a1c_drift, 1e-6)
    x_met = np.where(p.dm, _per_year((7.0 - p.a1c0) / drift), np.inf)
    start("metformin", first_adm_from(a, pats, x_met))
    x_gli = np.maximum(plan.ts_days["metformin"] + 90, _per_year((8.0 - p.a1c0 + p.e_met) / drift))
    start("glipizide", first_adm_from(a, pats, np.where(p.dm, x_gli, np.inf)))
    x_ins = np.maximum(
        plan.ts_days["glipizide"] + 90, _per_year((8.5 - p.a1c0 + p.e_met + p.e_gli) / drift)
    )
    start("insulin_glargine", first_adm_from(a, pats, np.where(p.dm, x_ins, np.inf)))


def _cardiovascular_starts(rng: np.random.Generator, start, p: SimpleNamespace, a) -> None:
    """Hypertension (and diabetic CKD): ACE inhibitor first, thiazide / amlodipine later. CAD:
    statin at the first admission (most) or the first ACS; antiplatelets, beta-blocker."""
    n = p.n
    first_acs = first_flagged(a, a.acs, n)
    first_pci = first_flagged(a, a.pci, n)
    first = kth_admission(a, p, np.zeros(n, dtype=np.int64))
    lis_k = np.where(rng.random(n) < 0.65, 0, 1)
    start("lisinopril", np.where(p.htn | (p.dm & p.ckd), kth_admission(a, p, lis_k), -1))
    room = p.n_adm - lis_k - 1
    hctz_k = lis_k + 1 + np.floor(rng.random(n) * np.maximum(room, 1)).astype(np.int64)
    hctz_ok = p.htn & (rng.random(n) < 0.4) & (p.egfr0 > 35) & (room > 0)
    start("hydrochlorothiazide", np.where(hctz_ok, kth_admission(a, p, hctz_k), -1))
    amlo_k = np.floor(rng.random(n) * np.maximum(p.n_adm, 1)).astype(np.int64)
    start("amlodipine", np.where(p.htn & (rng.random(n) < 0.45), kth_admission(a, p, amlo_k), -1))
    hld = p.comorb[:, 0]
    statin = earliest_index(
        np.where(p.cad & (rng.random(n) < 0.75), first, -1),
        first_acs,
        np.where(p.dm & (p.age0 > 40) & (rng.random(n) < 0.5), first, -1),
        np.where(hld & (rng.random(n) < 0.5), first, -1),
    )
    start("atorvastatin", statin)
    start("aspirin", earliest_index(np.where(p.cad & (rng.random(n) < 0.85), first, -1), first_acs))
    start("clopidogrel", earliest_index(first_acs, first_pci))
    start(
        "metoprolol",
        earliest_index(
            np.where(p.cad & (rng.random(n) < 0.6), first, -1), first_acs, np.where(p.hf, first, -1)
        ),
    )


def _ckd_starts(start, p, a, treat: np.ndarray, plan: SimpleNamespace) -> None:
    """CKD drugs and dialysis at thresholds on the latent trajectory eGFR(t) = eGFR0 - rate * t
    (furosemide also at the first heart-failure exacerbation)."""
    n, pats = p.n, np.arange(p.n)
    first_hf = first_flagged(a, a.hf_exac, n)

    def crossing(threshold: np.ndarray) -> np.ndarray:
        years = (p.egfr0 - threshold) / p.egfr_rate
        return np.where(p.ckd & (threshold > 5), _per_year(np.maximum(years, 0.0)), np.inf)

    start(
        "furosemide",
        earliest_index(
            first_adm_from(a, pats, crossing(np.full(n, 35.0))), np.where(p.hf, first_hf, -1)
        ),
    )
    # Bicarbonate falls 0.15 mEq/L per mL/min below eGFR 45: below 22 -> sodium bicarbonate.
    start("sodium_bicarbonate", first_adm_from(a, pats, crossing(45 - (p.hco3_0 - 22) / 0.15)))
    # Hemoglobin falls 0.07 g/dL per mL/min below eGFR 60: below 10 -> epoetin.
    start("epoetin", first_adm_from(a, pats, crossing(60 - (p.hb0 - 10) / 0.07)))
    dial = np.where(treat, first_adm_from(a, pats, crossing(np.full(n, 10.0))), -1)
    plan.dialysis_from = dial
