"""SYNTHETIC blood draws and the specimen groups each carries (paper §3 "Cohort"): admission
days, serial troponins, emergency-department, outpatient and few-labs draws.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources.synthetic.design import (
    DAY_S,
    FEW_LABS,
    G_A1C,
    G_BNP,
    G_CBC,
    G_CHEM,
    G_COAG,
    G_LACT,
    G_LIPID,
    G_MINI,
    G_TROP,
    GROUPS,
    HOUR_S,
    INDEX,
    K_COAG,
    K_DAILY,
    K_DAY0,
    K_ED,
    K_MINI,
    K_OUTPT,
    K_SERIAL,
    NO_ADM,
    YEAR_DAYS,
)
from clinlib.data.sources.synthetic.numeric import rank_in_sorted_groups, to_minute, uniform


def _part(pat, adm, hadm_adm, t, kind: int, forced=None) -> tuple[np.ndarray, ...]:
    """One batch of draws as (patient, admission, hadm admission, time, kind, forced chem)."""
    return (
        np.asarray(pat, np.int64),
        np.asarray(adm, np.int64),
        np.asarray(hadm_adm, np.int64),
        to_minute(t),
        np.full(len(pat), kind, np.int8),
        np.zeros(len(pat), bool) if forced is None else np.asarray(forced, bool),
    )


def lab_draws(
    rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace, plan
) -> SimpleNamespace:
    """Blood-draw times: admission days, serial troponins, ED, outpatient, few-labs draws."""
    parts = _inpatient_draws(rng, a, regular=p.mode[a.pat] != FEW_LABS)
    parts.append(_outpatient_draws(rng, p, a))
    parts += _few_labs_draws(rng, p, a)
    d = SimpleNamespace()
    d.pat, d.adm, d.hadm_adm, d.t, d.kind, d.forced_chem = (
        np.concatenate(c) for c in zip(*parts, strict=True)
    )
    d.n = d.pat.size
    return d


def _inpatient_draws(rng: np.random.Generator, a: SimpleNamespace, regular: np.ndarray) -> list:
    """(a) admission-day draw 15-75 min after admittime, then early-morning draws; (b) serial
    troponins 6 and 12 hours into an ACS admission; (c) emergency-department draws before
    admission, with no hadm_id (as in MIMIC)."""
    parts = []
    n_days = np.where(regular, np.ceil(a.los).astype(np.int64), 0)
    da = np.repeat(np.arange(a.n), n_days)
    dd = rank_in_sorted_groups(da)
    midnight = (a.admit[da] // DAY_S) * DAY_S
    t = np.where(
        dd == 0,
        a.admit[da] + np.rint(uniform(rng, 0.25, 1.25, da.size) * HOUR_S).astype(np.int64),
        midnight + dd * DAY_S + np.rint(uniform(rng, 4.0, 7.0, da.size) * HOUR_S).astype(np.int64),
    )
    keep = (dd == 0) | ((t < a.disch[da] - HOUR_S // 2) & (rng.random(da.size) < 0.72))
    da, dd, t = da[keep], dd[keep], t[keep]
    parts.append(_part(a.pat[da], da, da, t, K_DAY0))
    parts[-1][4][dd > 0] = K_DAILY
    acs = np.flatnonzero(a.acs & regular)
    for hours in (6.0, 12.0):
        ts = a.admit[acs] + np.rint((hours + uniform(rng, -0.5, 0.5, acs.size)) * HOUR_S).astype(
            np.int64
        )
        ok = ts < a.disch[acs]
        parts.append(_part(a.pat[acs][ok], acs[ok], acs[ok], ts[ok], K_SERIAL))
    ed = np.flatnonzero(a.ed & regular & (rng.random(a.n) < 0.5))
    ts = a.edreg[ed] + np.rint(uniform(rng, 0.3, 1.0, ed.size) * HOUR_S).astype(np.int64)
    parts.append(_part(a.pat[ed], ed, np.full(ed.size, -1), ts, K_ED))
    return parts


def _outpatient_draws(rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace) -> tuple:
    """(d) outpatient draws across the history, moved out of any stay they fall into."""
    lam = np.where(p.mode == INDEX, 0.5 * p.n_adm + 1.0, 0.4 * p.n_adm + 1.0)
    n_out = np.where(p.mode == FEW_LABS, 0, rng.poisson(lam))
    n_out = np.where(p.mode == NO_ADM, 1 + rng.poisson(3.0, p.n), n_out)
    op = np.repeat(np.arange(p.n), n_out)
    has_adm = p.n_adm[op] > 0
    lo = np.where(has_adm, p.t0[op] - 180 * DAY_S, p.t0[op])
    span = np.where(
        has_adm,
        (p.last_disch[op] - p.t0[op]) + 545 * DAY_S,
        np.rint(uniform(rng, 0.5, 5.0, op.size) * YEAR_DAYS * DAY_S),
    )
    day = (lo + np.floor(rng.random(op.size) * span).astype(np.int64)) // DAY_S
    ts = day * DAY_S + np.rint(uniform(rng, 8.0, 16.5, op.size) * HOUR_S).astype(np.int64)
    if a.n and op.size:
        j = np.searchsorted(a.key, op * 1e6 + (ts - p.t0[op]) / DAY_S, side="right") - 1
        js = np.maximum(j, 0)
        inside = (j >= 0) & (a.pat[js] == op) & (ts < a.disch[js] + DAY_S)
        push = np.ceil((a.disch[js] - ts) / DAY_S + uniform(rng, 2.0, 20.0, op.size)) * DAY_S
        ts = np.where(inside, ts + push.astype(np.int64), ts)
    alive = ts < p.death_s[op] - DAY_S
    # no_admission patients always keep their first draw (it carries a forced chemistry).
    first_out = rank_in_sorted_groups(op) == 0
    alive |= first_out & (p.mode[op] == NO_ADM)
    forced = first_out[alive] & (p.mode[op[alive]] == NO_ADM)
    none = np.full(int(alive.sum()), -1)
    return _part(op[alive], none, none, ts[alive], K_OUTPT, forced)


def _few_labs_draws(rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace) -> list:
    """(e) few_labs patients: one small chemistry (0-4 panel items) and coagulation per stay."""
    fl = np.flatnonzero(p.mode[a.pat] == FEW_LABS)
    t_fl = a.admit[fl] + np.rint(uniform(rng, 0.25, 1.25, fl.size) * HOUR_S).astype(np.int64)
    first_fl = fl[a.k[fl] == 0]
    return [
        _part(a.pat[first_fl], first_fl, first_fl, t_fl[a.k[fl] == 0] + 60, K_MINI),
        _part(a.pat[fl], fl, fl, t_fl, K_COAG),
    ]


def lab_specimens(
    rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace, plan, d: SimpleNamespace
) -> tuple[np.ndarray, np.ndarray]:
    """Which specimen groups each draw carries: returns (draw index, group) per specimen."""
    kind, pat = d.kind, d.pat
    j = np.maximum(d.adm, 0)

    def at(x: np.ndarray) -> np.ndarray:
        """Admission flag of each draw's admission (False for outpatient draws)."""
        return np.where(d.adm >= 0, x[j], False) if a.n else np.zeros(d.n, bool)

    def u() -> np.ndarray:
        return rng.random(d.n)

    dm, cad, hf = p.dm[pat], p.cad[pat], p.hf[pat]
    acs, ed_type = at(a.acs), at(a.ed)
    day0, daily, serial, edk, outpt = (
        kind == k for k in (K_DAY0, K_DAILY, K_SERIAL, K_ED, K_OUTPT)
    )
    # The admission whose day-0 draw must carry A1c / lipids: a drug starts at that admission.

    def starts_at(name: str) -> np.ndarray:
        return at(np.isin(np.arange(a.n), plan.adm[name][plan.adm[name] >= 0]))

    a1c_start = starts_at("metformin") | starts_at("glipizide") | starts_at("insulin_glargine")
    statin_start = starts_at("atorvastatin")
    sel = {
        G_CHEM: (day0 | edk | d.forced_chem) | (daily & (u() < 0.93)) | (outpt & (u() < 0.9)),
        G_CBC: ((day0 | edk) & (u() < 0.96)) | (daily & (u() < 0.5)) | (outpt & (u() < 0.6)),
        G_COAG: (kind == K_COAG)
        | (day0 & (u() < 0.4))
        | (edk & (u() < 0.4))
        | (daily & (u() < 0.1))
        | (outpt & (u() < 0.04)),
        G_A1C: (day0 & ((u() < np.where(dm, 0.45, 0.06)) | a1c_start))
        | (outpt & (u() < np.where(dm, 0.5, 0.06))),
        G_LIPID: (day0 & ((u() < np.where(cad, 0.3, np.where(dm, 0.2, 0.05))) | statin_start | acs))
        | (outpt & (u() < np.where(cad, 0.4, np.where(dm, 0.35, 0.1)))),
        G_TROP: (
            (day0 | edk) & (acs | at(a.chest_obs) | (u() < np.where(cad & ed_type, 0.6, 0.12)))
        )
        | serial
        | (daily & acs & (u() < 0.7)),
        G_BNP: (day0 | edk) & (u() < np.where(at(a.hf_exac), 0.7, np.where(hf, 0.2, 0.04))),
        G_LACT: (day0 | edk)
        & (u() < np.where(at(a.sepsis), 0.9, np.where(at(a.infection), 0.4, 0.04))),
        G_MINI: kind == K_MINI,
    }
    # Serial / coagulation-only / mini draws carry only their own group.
    only = {K_SERIAL: G_TROP, K_COAG: G_COAG, K_MINI: G_MINI}
    for k, g in only.items():
        for other in sel:
            if other != g:
                sel[other] = sel[other] & (kind != k)
    draw_idx = np.concatenate([np.flatnonzero(sel[g]) for g in range(len(GROUPS))])
    group = np.concatenate([np.full(int(sel[g].sum()), g, np.int8) for g in range(len(GROUPS))])
    return draw_idx, group
