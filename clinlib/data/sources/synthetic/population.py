"""SYNTHETIC patients and admissions: modes, diseases, demographics, timelines, latent
parameters and the admission calendar (paper §3 "Cohort"; Appendix C.1 cohort statistics).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources.synthetic.design import (
    ADMISSION_LOCATION_P,
    ADMISSION_TYPE_P,
    ANCHOR_YEAR_GROUPS,
    BACKGROUND_P,
    CAD,
    CKD,
    COMORBIDITIES,
    COMORBIDITY_P,
    DAY_S,
    DISCHARGE_LOCATION_P,
    DISCHARGE_LOCATIONS,
    DM,
    ED_TYPES,
    FEW_LABS,
    FEW_RX,
    HOUR_S,
    HTN,
    INDEX,
    LANGUAGE_P,
    MARITAL_P,
    MAX_ADMISSIONS,
    MODE_SHARES,
    NO_ADM,
    NO_CODE,
    ONE_CODE,
    RACE_P,
    READMIT,
    SINGLE,
    YEAR_DAYS,
)
from clinlib.data.sources.synthetic.numeric import (
    choose,
    choose_by,
    exact_labels,
    lognoise,
    month_start_s,
    providers,
    to_minute,
    uniform,
    year_start_s,
)


def draw_population(rng: np.random.Generator, n: int) -> SimpleNamespace:
    """Patient-level design: mode, diseases, demographics, timeline and latent parameters."""
    p = SimpleNamespace(n=n)
    p.mode = exact_labels(rng, n, MODE_SHARES).astype(np.int8)
    p.female = rng.random(n) < 0.46
    _diseases(rng, p)
    _demographics(rng, p)
    _timeline(rng, p)
    _latent_parameters(rng, p)
    return p


def _diseases(rng: np.random.Generator, p: SimpleNamespace) -> None:
    """Index diseases (the designated one and comorbid ones), heart failure, diabetic
    complications and chronic non-index comorbidities."""
    n = p.n
    # Designated disease: balanced within each mode that has one.
    des = np.full(n, -1, dtype=np.int8)
    for m in (INDEX, FEW_LABS, FEW_RX, READMIT, ONE_CODE):
        idx = np.flatnonzero(p.mode == m)
        des[idx] = exact_labels(rng, idx.size, (1, 1, 1, 1))
    idx = np.flatnonzero(p.mode == SINGLE)
    # One admission can carry two codes of diabetes, CKD or CAD, not of hypertension alone.
    des[idx] = np.array([DM, CKD, CAD])[exact_labels(rng, idx.size, (1, 1, 1))]
    p.designated = des
    has = des >= 0
    flags = np.zeros((n, 4), dtype=bool)
    flags[np.flatnonzero(has), des[has]] = True
    comorbid = rng.random((n, 4)) < COMORBIDITY_P[np.maximum(des, 0)]
    flags |= comorbid & (has & (p.mode != ONE_CODE))[:, None]
    bg = rng.random((n, 4)) < BACKGROUND_P
    flags[p.mode == NO_ADM] = bg[p.mode == NO_ADM]
    flags[(p.mode == SINGLE) & (des == CKD), HTN] = True  # coded as hypertensive CKD + N18
    p.flags = flags
    p.dm, p.htn, p.ckd, p.cad = flags[:, DM], flags[:, HTN], flags[:, CKD], flags[:, CAD]
    p.hf = rng.random(n) < np.where(p.cad, 0.25, np.where(p.htn, 0.15, 0.03))
    p.neuro = p.dm & (rng.random(n) < 0.25)
    p.retino = p.dm & (rng.random(n) < 0.15)
    single_dm = (p.mode == SINGLE) & (des == DM)
    p.neuro |= single_dm
    p.retino |= single_dm
    risk = p.cad | p.dm
    p.comorb = np.column_stack(
        [rng.random(n) < base + extra * risk for _, base, extra in COMORBIDITIES]
    )


def _demographics(rng: np.random.Generator, p: SimpleNamespace) -> None:
    """Age (older with an index disease), insurance by age, language, marital status, race."""
    n, has = p.n, p.designated >= 0
    age = np.where(has, rng.normal(66, 11, n), rng.normal(55, 18, n))
    age = np.clip(np.rint(age), 18, 95).astype(np.int64)
    p.anchor_age = np.where(age > 89, 91, age)  # MIMIC top-codes ages over 89 as 91
    p.age0 = age.astype(float)
    p.insurance = choose_by(
        rng,
        np.array([[0.2, 0.25, 0.42, 0.1, 0.03], [0.78, 0.08, 0.1, 0.04, 0.0]]),
        (age >= 65).astype(np.int64),
    )
    p.language = choose(rng, LANGUAGE_P, n)
    p.marital = choose(rng, MARITAL_P, n)
    p.race = choose(rng, RACE_P, n)


def _timeline(rng: np.random.Generator, p: SimpleNamespace) -> None:
    """Admission count, history span and the shifted calendar (t0, ICD-10 switch)."""
    n, m = p.n, p.mode
    n_adm = np.zeros(n, dtype=np.int64)
    idx = np.flatnonzero(m == INDEX)
    # Heavy tail: median 10, mean ~16, max 93 as in the paper's cohort (Appendix C.1); the
    # lognormal is truncated (redrawn above the maximum) rather than clipped, so no pile-up.
    draws = rng.lognormal(np.log(10.2), 1.15, idx.size)
    while (over := draws >= MAX_ADMISSIONS + 0.5).any():
        draws[over] = rng.lognormal(np.log(10.2), 1.15, int(over.sum()))
    n_adm[idx] = np.maximum(np.rint(draws), 2)
    idx = np.flatnonzero(np.isin(m, (FEW_LABS, FEW_RX, ONE_CODE, NO_CODE)))
    n_adm[idx] = np.minimum(1 + rng.geometric(0.45, idx.size), 8)
    n_adm[m == SINGLE] = 1
    n_adm[m == READMIT] = 2
    p.n_adm = n_adm
    span_years = np.where(
        m == INDEX,
        np.clip(rng.lognormal(np.log(1.0 + 0.45 * n_adm**0.8), 0.5), 0.25, 13.0),
        np.clip(rng.lognormal(np.log(1.5), 0.7), 0.1, 8.0),
    )
    p.span_days = span_years * YEAR_DAYS

    # Shifted calendar: anchor_year in 2110-2190; the real start year (hidden, as in MIMIC)
    # fixes anchor_year_group and where the ICD-9 -> ICD-10 switch (1 Oct 2015) falls.
    room = np.maximum(np.floor(2022 - 2008 - span_years), 0) + 1
    real_start = 2008 + np.floor(rng.random(n) * room).astype(np.int64)
    p.anchor_year = rng.integers(2110, 2191, n)
    p.anchor_group = np.minimum((real_start - 2008) // 3, len(ANCHOR_YEAR_GROUPS) - 1)
    shift = p.anchor_year - real_start
    p.icd10_from = month_start_s(2015 + shift, 10)
    p.year0 = year_start_s(p.anchor_year)
    p.t0 = to_minute(p.year0 + rng.random(n) * 365 * DAY_S)


def _latent_parameters(rng: np.random.Generator, p: SimpleNamespace) -> None:
    """Latent clinical parameters: baselines, drift rates and drug effect sizes."""
    n = p.n

    def u(lo: float, hi: float) -> np.ndarray:
        return uniform(rng, lo, hi, n)

    pre = rng.random(n) < 0.15
    p.a1c0 = np.where(p.dm, u(6.3, 8.6), np.where(pre, u(5.7, 6.3), u(4.8, 5.6)))
    p.a1c_drift = np.where(p.dm, u(0.2, 0.5), u(0.0, 0.04))  # % per year
    p.e_met, p.e_gli, p.e_ins = u(0.8, 1.5), u(0.6, 1.2), u(1.0, 2.0)
    healthy = np.clip(108 - 0.75 * (p.age0 - 30) + rng.normal(0, 10, n), 55, 125)
    p.egfr0 = np.where(p.ckd, u(22, 75), healthy)
    p.egfr_rate = np.where(p.ckd, u(1.5, 6.5), u(0.3, 1.2) + 0.8 * p.dm)  # mL/min/yr
    p.bun_ratio = u(11, 18)
    p.k0 = rng.normal(4.1, 0.2, n)
    p.na0 = rng.normal(139.5, 1.5, n)
    p.hco3_0 = rng.normal(25.5, 1.1, n)
    p.ag0 = rng.normal(12.0, 1.2, n)
    p.ca0 = rng.normal(9.3, 0.25, n)
    p.alb0 = rng.normal(4.0, 0.3, n)
    p.hb0 = np.where(p.female, rng.normal(13.3, 0.9, n), rng.normal(14.8, 0.9, n))
    p.mchc0 = rng.normal(33.3, 0.7, n)
    p.mcv0 = rng.normal(90, 4, n)
    p.rdw0 = rng.normal(13.4, 0.8, n) + 0.8 * p.ckd
    p.plt0 = np.clip(rng.normal(250, 55, n), 130, 450)
    p.wbc0 = np.clip(rng.normal(7.2, 1.5, n), 3.8, 11.5)
    p.ldl0 = np.where(p.cad, u(125, 195), np.where(p.dm, u(95, 165), u(70, 160)))
    p.hdl0 = np.clip(np.where(p.female, rng.normal(55, 11, n), rng.normal(44, 9, n)), 25, 95)
    p.tg0 = np.where(p.dm, u(120, 320), u(70, 210))
    p.bnp0 = np.where(p.hf, np.exp(u(np.log(600), np.log(4000))), u(20, 200) * (1 + p.age0 / 100))
    p.alt0, p.ast0 = rng.lognormal(np.log(22), 0.3, n), rng.lognormal(np.log(24), 0.3, n)
    p.alp0, p.bili0 = rng.normal(75, 18, n), rng.lognormal(np.log(0.6), 0.3, n)
    p.pt0 = rng.normal(11.6, 0.6, n)
    p.e_lis_k, p.e_lis_cr = u(0.2, 0.4), u(0.08, 0.12)
    p.e_hctz_na, p.e_hctz_k = u(2.0, 4.0), u(0.3, 0.5)
    p.e_fur_k, p.e_bic, p.e_epo, p.e_stat = u(0.3, 0.5), u(2.0, 4.0), u(1.0, 2.0), u(0.35, 0.5)
    p.mini_k = rng.integers(0, 5, n)  # few_labs: panel items in the single small draw


def admission_timeline(rng: np.random.Generator, p: SimpleNamespace) -> SimpleNamespace:
    """Admission timeline, acute events, types, deaths (one row per admission)."""
    a = SimpleNamespace()
    n_adm = p.n_adm
    A = int(n_adm.sum())
    a.n = A
    a.pat = np.repeat(np.arange(p.n), n_adm)
    a.first = np.zeros(p.n, dtype=np.int64)
    a.first[1:] = np.cumsum(n_adm)[:-1]
    a.k = np.arange(A) - a.first[a.pat]
    mode = p.mode[a.pat]

    los = np.clip(rng.gamma(1.5, 1.8, A) + 0.6, 1.0, 10.0)
    los = np.where(mode == READMIT, uniform(rng, 1.0, 3.0, A), los)
    gap_med = p.span_days / np.maximum(n_adm - 1, 1)
    gap = gap_med[a.pat] * lognoise(rng, 0.6, A)
    gap = np.where((a.k >= 2) & (rng.random(A) < 0.08), uniform(rng, 0.5, 6.0, A), gap)
    gap = np.where(a.k == 1, np.maximum(gap, 8.0), gap)  # rule 1 holds for multi-admission modes
    gap = np.where((a.k == 1) & (mode == READMIT), uniform(rng, 0.3, 3.0, A), gap)
    prev_los = np.r_[0.0, los[:-1]]
    step = np.where(a.k == 0, 0.0, prev_los + gap)
    offset = np.cumsum(step)
    offset -= offset[a.first[a.pat]] if A else 0
    admit = p.t0[a.pat] + np.rint(offset * DAY_S).astype(np.int64)

    # Acute events.
    allow_cad = p.cad[a.pat] & ~np.isin(mode, (ONE_CODE, NO_CODE))
    a.acs = allow_cad & (rng.random(A) < np.where(a.k == 0, 0.35, 0.07))
    a.infection = rng.random(A) < 0.12
    a.pneumonia = a.infection & (rng.random(A) < 0.5)
    a.sepsis = a.infection & (rng.random(A) < 0.2)
    a.aki = rng.random(A) < np.where(p.ckd[a.pat], 0.12, 0.05)
    a.hf_exac = p.hf[a.pat] & (rng.random(A) < 0.3)
    a.elective_cath = allow_cad & ~a.acs & (rng.random(A) < 0.08)
    a.pci = (a.acs & (rng.random(A) < 0.7)) | (a.elective_cath & (rng.random(A) < 0.45))
    a.chest_obs = p.cad[a.pat] & ~a.acs & ~a.elective_cath & (rng.random(A) < 0.1)
    acute = a.infection | a.aki | a.hf_exac | a.chest_obs
    cls = np.where(a.elective_cath, 0, np.where(a.acs | a.sepsis, 1, np.where(acute, 2, 3)))
    a.type = choose_by(rng, ADMISSION_TYPE_P, cls)
    a.ed = ED_TYPES[a.type]
    a.location = choose_by(rng, ADMISSION_LOCATION_P, a.type)
    # Planned admissions start in the morning: moved earlier by less than a day, which cannot
    # touch the previous stay (gap >= 2 days) nor the next one; not applied to the readmission
    # mode, whose two admissions must stay < 7 days apart.
    planned = np.isin(a.type, (6, 7)) & ((a.k == 0) | (gap >= 2.0)) & (mode != READMIT)
    hour = np.rint(uniform(rng, 6.5, 10.5, A) * HOUR_S).astype(np.int64)
    morning = (admit // DAY_S) * DAY_S + hour
    morning = np.where(morning > admit, morning - DAY_S, morning)
    admit = np.where(planned, morning, admit)
    a.admit = to_minute(admit)
    a.disch = to_minute(a.admit + np.rint(los * DAY_S).astype(np.int64))
    a.los = (a.disch - a.admit) / DAY_S
    a.edreg = to_minute(a.admit - np.rint(uniform(rng, 2.0, 9.0, A) * HOUR_S).astype(np.int64))
    a.edout = to_minute(a.admit + np.rint(uniform(rng, 0.1, 1.5, A) * HOUR_S).astype(np.int64))
    a.day = (a.admit - p.t0[a.pat]) / DAY_S
    a.icd10 = a.admit >= p.icd10_from[a.pat]
    a.provider = rng.integers(0, providers().size, A)
    a.inf_mag = np.where(a.infection, uniform(rng, 4.0, 10.0, A), 0.0)
    a.aki_mag = np.where(a.aki, uniform(rng, 0.5, 1.5, A), 0.0)
    a.acs_peak = np.where(a.acs, np.exp(uniform(rng, np.log(0.05), np.log(2.0), A)), 0.0)

    # Deaths: in hospital on the last admission, or within a year after it (patients.dod).
    last = (a.k == n_adm[a.pat] - 1) & (A > 0)
    died = last & (rng.random(A) < 0.02 + 0.06 * a.sepsis)
    a.died = died
    a.discharge = np.where(died, len(DISCHARGE_LOCATIONS) - 1, choose(rng, DISCHARGE_LOCATION_P, A))
    p.death_s = np.full(p.n, np.iinfo(np.int64).max)
    p.death_s[a.pat[died]] = a.disch[died]
    last_disch = np.full(p.n, -1, dtype=np.int64)
    if A:
        last_disch[a.pat[last]] = a.disch[last]
    p.last_disch = last_disch
    later = (p.n_adm > 0) & (p.death_s == np.iinfo(np.int64).max) & (rng.random(p.n) < 0.06)
    later_dod = last_disch + np.rint(uniform(rng, 7, 365, p.n) * DAY_S).astype(np.int64)
    p.death_s = np.where(later, later_dod, p.death_s)
    a.key = a.pat * 1e6 + a.day  # sorted: patient-major, time within patient
    return a


def first_adm_from(a: SimpleNamespace, pats: np.ndarray, x_days: np.ndarray) -> np.ndarray:
    """Index of each patient's first admission on or after day ``x_days`` (-1 if none)."""
    finite = np.isfinite(x_days)
    q = pats * 1e6 + np.clip(np.where(finite, x_days, 0.0), 0.0, 9e5)
    idx = np.searchsorted(a.key, q, side="left")
    safe = np.minimum(idx, max(a.n - 1, 0))
    ok = finite & (idx < a.n) & (a.pat[safe] == pats) if a.n else np.zeros(pats.size, bool)
    return np.where(ok, idx, -1)


def first_flagged(a: SimpleNamespace, flag: np.ndarray, n: int) -> np.ndarray:
    """Each patient's first admission with ``flag`` set (-1 if none)."""
    out = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(out, a.pat[flag], np.flatnonzero(flag))
    return np.where(out == np.iinfo(np.int64).max, -1, out)


def kth_admission(a: SimpleNamespace, p: SimpleNamespace, k: np.ndarray) -> np.ndarray:
    """Index of each patient's k-th admission (-1 if it has fewer)."""
    k = np.asarray(k)
    return np.where((k >= 0) & (k < p.n_adm), a.first + k, -1)


def earliest_index(*candidates: np.ndarray) -> np.ndarray:
    stacked = np.stack([np.where(c >= 0, c, np.iinfo(np.int64).max) for c in candidates])
    best = stacked.min(axis=0)
    return np.where(best == np.iinfo(np.int64).max, -1, best)
