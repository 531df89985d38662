"""SYNTHETIC lab values: the latent chronic state, acute perturbations and the reported
result of every specimen group (paper §3 "Cohort"; Fig. 2 stage 2 events).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources.synthetic import hazards as hz
from clinlib.data.sources.synthetic.design import (
    DAY_S,
    EFFECT_TAU_DAYS,
    G_A1C,
    G_BNP,
    G_CBC,
    G_CHEM,
    G_COAG,
    G_LACT,
    G_LIPID,
    G_MINI,
    G_TROP,
    GROUP_ITEMS,
    HOUR_S,
    K_DAILY,
    K_OUTPT,
    YEAR_DAYS,
)
from clinlib.data.sources.synthetic.numeric import lognoise, relu


def creatinine_from_egfr(egfr: np.ndarray, female: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Serum creatinine (mg/dL) that gives ``egfr`` under the CKD-EPI 2021 equation.

    eGFR = 142 * min(Scr/k, 1)^a * max(Scr/k, 1)^-1.200 * 0.9938^age * 1.012 [female],
    with k = 0.7 / 0.9 and a = -0.241 / -0.302 (female / male), solved for Scr.
    """
    kappa = np.where(female, 0.7, 0.9)
    alpha = np.where(female, -0.241, -0.302)
    base = 142.0 * 0.9938 ** np.clip(age, 18, 100) * np.where(female, 1.012, 1.0)
    ratio = egfr / base
    above = ratio <= 1.0  # Scr >= kappa
    return np.where(above, kappa * ratio ** (-1 / 1.2), kappa * ratio ** (1 / alpha))


def _effect(plan: SimpleNamespace, name: str, pat: np.ndarray, td: np.ndarray) -> np.ndarray:
    """Fraction (0..1) of a drug's full effect at day ``td``; exactly 0 until its starttime."""
    dt = np.clip(td - plan.ts_days[name][pat], 0.0, None)
    return 1.0 - np.exp(-dt / EFFECT_TAU_DAYS[name])


def latent_state(p: SimpleNamespace, plan: SimpleNamespace, pat: np.ndarray, t: np.ndarray) -> dict:
    """Chronic (noise-free) state of each patient at time ``t`` (epoch seconds)."""
    td = (t - p.t0[pat]) / DAY_S
    ty = td / YEAR_DAYS
    a1c = (
        p.a1c0[pat]
        + p.a1c_drift[pat] * ty
        - p.e_met[pat] * _effect(plan, "metformin", pat, td)
        - p.e_gli[pat] * _effect(plan, "glipizide", pat, td)
        - p.e_ins[pat] * _effect(plan, "insulin_glargine", pat, td)
    )
    egfr = np.clip(p.egfr0[pat] - p.egfr_rate[pat] * ty, 5.0, 140.0)
    age = p.age0[pat] + (t - p.year0[pat]) / (YEAR_DAYS * DAY_S)
    return {
        "td": td,
        "a1c": np.clip(a1c, 4.2, 15.0),
        "egfr": egfr,
        "creat": creatinine_from_egfr(egfr, p.female[pat], age),
    }


def _acute(a: SimpleNamespace, adm: np.ndarray, t: np.ndarray) -> dict:
    """Acute, admission-bound perturbations (decaying from admission), zero outside stays."""
    has = adm >= 0
    j = np.maximum(adm, 0)
    h = np.where(has, np.maximum((t - a.admit[j]) / HOUR_S, 0.0), 0.0) if a.n else np.zeros(t.size)

    def on(x: np.ndarray) -> np.ndarray:
        return np.where(has, x[j], 0) if a.n else np.zeros(t.size)

    inf = on(a.infection.astype(float)) * np.exp(-h / 72)
    hh = np.maximum(h, 0.5)
    return {
        "h": h,
        "inf": inf,
        "wbc_bump": on(a.inf_mag) * np.exp(-h / 72),
        "sepsis": on(a.sepsis.astype(float)) * np.exp(-h / 24),
        "aki": on(a.aki_mag) * np.exp(-h / 60),
        "acs": on(a.acs.astype(float)) * np.exp(-h / 24),
        "trop": on(a.acs_peak) * (hh / 12.0) * np.exp(1.0 - hh / 12.0),
        "hf": on(a.hf_exac.astype(float)) * np.exp(-h / 72),
        # sepsis-associated thrombocytopenia, planted (clinlib.data.sources.synthetic.hazards)
        "plt_factor": hz.thrombo_factor(on(getattr(a, "thrombo_mag", np.zeros(a.n))), h),
    }


def group_values(
    rng: np.random.Generator,
    group: int,
    p: SimpleNamespace,
    a: SimpleNamespace,
    plan: SimpleNamespace,
    d: SimpleNamespace,
    di: np.ndarray,
) -> dict[str, np.ndarray]:
    """Reported (rounded) values of every item of ``group`` at draws ``di``.

    NaN means "not reported" (optional items, LDL calculated when TG > 400, ...). The values of
    one specimen are computed together so derived results agree: anion gap = Na - Cl - HCO3,
    calculated LDL = TC - HDL - TG/5 (Friedewald), MCHC = Hgb / Hct.
    """
    pat, t = d.pat[di], d.t[di]
    s = SimpleNamespace(pat=pat, kind=d.kind[di], m=di.size, lat=latent_state(p, plan, pat, t))
    s.ac = _acute(a, d.adm[di], t)
    s.egfr, s.td = s.lat["egfr"], s.lat["td"]

    def eff(name: str) -> np.ndarray:
        return _effect(plan, name, pat, s.td)

    def norm(sd: float) -> np.ndarray:
        return rng.normal(0.0, sd, s.m)

    s.eff, s.norm = eff, norm
    return _GROUP_VALUES[group](rng, p, s)


def _chem_core(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """Creatinine, potassium, sodium and glucose (the items a mini chemistry can carry)."""
    pat, lat, ac, egfr, eff, norm, m = s.pat, s.lat, s.ac, s.egfr, s.eff, s.norm, s.m
    r = np.round
    g_lis, g_fur, g_hctz = eff("lisinopril"), eff("furosemide"), eff("hydrochlorothiazide")
    creat = (
        lat["creat"]
        * (1 + p.e_lis_cr[pat] * g_lis)
        * (1 + ac["aki"] + 0.25 * ac["sepsis"])
        * lognoise(rng, 0.05, m)
    )
    creat = np.maximum(r(creat, 1), 0.2)
    k = (
        p.k0[pat]
        + 0.025 * relu(60 - egfr)
        + p.e_lis_k[pat] * g_lis
        - p.e_fur_k[pat] * g_fur
        - p.e_hctz_k[pat] * g_hctz
        + 0.3 * ac["aki"]
        + norm(0.22)
    )
    na = r(p.na0[pat] - p.e_hctz_na[pat] * g_hctz - 2.0 * ac["hf"] + norm(1.6), 0)
    fasting = np.where(s.kind == K_OUTPT, 0.92, 1.0)
    glucose = (28.7 * lat["a1c"] - 46.7) * fasting * lognoise(rng, 0.15, m)
    glucose = np.maximum(r(glucose + 30 * ac["inf"] + 25 * ac["acs"], 0), 40)
    return dict(creatinine=creat, potassium=np.clip(r(k, 1), 2.5, 7.5), sodium=na, glucose=glucose)


def _mini_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """The few-labs mode's small chemistry: its first ``mini_k`` items only."""
    out = _chem_core(rng, p, s)
    keep = np.arange(4)[None, :] < p.mini_k[s.pat][:, None]
    for j, key in enumerate(GROUP_ITEMS[G_MINI]):
        out[key] = np.where(keep[:, j], out[key], np.nan)
    return out


def _chem_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """The full chemistry: electrolytes with a consistent anion gap, BUN, optional items."""
    out = _chem_core(rng, p, s)
    pat, ac, egfr, eff, norm, m = s.pat, s.ac, s.egfr, s.eff, s.norm, s.m
    r = np.round
    na, creat, g_fur = out["sodium"], out["creatinine"], eff("furosemide")
    hco3 = (
        p.hco3_0[pat]
        - 0.15 * relu(45 - egfr)
        + p.e_bic[pat] * eff("sodium_bicarbonate")
        + 1.0 * g_fur
        - 4.0 * ac["sepsis"]
        - 1.5 * ac["aki"]
        + norm(1.2)
    )
    hco3 = np.clip(r(hco3, 0), 10, 40)
    gap = p.ag0[pat] + 0.1 * relu(30 - egfr) + 3.0 * ac["sepsis"] + norm(1.0)
    cl = r(na - hco3 - gap + norm(0.8), 0)
    bun = p.bun_ratio[pat] * creat**0.8 * (1 + 0.25 * g_fur) * lognoise(rng, 0.12, m)
    out.update(
        bicarbonate=hco3, chloride=cl, anion_gap=na - cl - hco3, bun=np.maximum(r(bun, 0), 2)
    )
    out.update(_chem_optional(rng, p, s, g_fur))
    return out


def _chem_optional(rng: np.random.Generator, p, s: SimpleNamespace, g_fur: np.ndarray) -> dict:
    """Calcium, magnesium, phosphate, albumin and liver tests, each only on some specimens."""
    pat, ac, egfr, norm, m, kind = s.pat, s.ac, s.egfr, s.norm, s.m, s.kind
    r = np.round
    ca = p.ca0[pat] - 0.02 * relu(30 - egfr) - 0.3 * ac["sepsis"] - 0.15 * ac["inf"]
    mg = 2.0 + 0.012 * relu(30 - egfr) - 0.12 * g_fur + norm(0.15)
    phos = 3.4 + 0.07 * relu(30 - egfr) + norm(0.35)
    alb = p.alb0[pat] - 0.5 * ac["inf"] - 0.012 * relu(30 - egfr) + norm(0.2)
    outpt, daily = kind == K_OUTPT, kind == K_DAILY

    def opt(p_in: float, p_daily: float, p_out: float) -> np.ndarray:
        return rng.random(m) < np.where(outpt, p_out, np.where(daily, p_daily, p_in))

    with_ca, with_mg = opt(0.85, 0.85, 0.9), opt(0.55, 0.35, 0.15)
    with_phos, with_alb, with_lft = (
        opt(0.45, 0.25, 0.1),
        opt(0.15, 0.08, 0.2),
        opt(0.12, 0.05, 0.15),
    )
    nan = np.nan
    return dict(
        calcium=np.where(with_ca, r(ca + norm(0.2), 1), nan),
        magnesium=np.where(with_mg, np.maximum(r(mg, 1), 0.8), nan),
        phosphate=np.where(with_phos, np.maximum(r(phos, 1), 0.8), nan),
        albumin=np.where(with_alb, np.clip(r(alb, 1), 1.5, 5.5), nan),
        alt=np.where(with_lft, r(p.alt0[pat] * lognoise(rng, 0.25, m), 0), nan),
        ast=np.where(with_lft, r(p.ast0[pat] * lognoise(rng, 0.25, m), 0), nan),
        alk_phos=np.where(with_lft, r(p.alp0[pat] * lognoise(rng, 0.15, m), 0), nan),
        bilirubin=np.where(
            with_lft, np.maximum(r(p.bili0[pat] * lognoise(rng, 0.25, m), 1), 0.1), nan
        ),
    )


def _cbc_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """Blood count: hemoglobin down with CKD and stay length, indices derived from it."""
    pat, ac, egfr, eff, norm, m = s.pat, s.ac, s.egfr, s.eff, s.norm, s.m
    r = np.round
    stay_days = ac["h"] / 24.0
    hgb = (
        p.hb0[pat]
        - 0.07 * relu(60 - egfr)
        + p.e_epo[pat] * eff("epoetin")
        - 0.7 * ac["inf"]
        - np.minimum(0.15 * stay_days, 1.0)
        + norm(0.35)
    )
    hgb = np.clip(r(hgb, 1), 5.5, 19.5)
    hct = r(hgb * 100.0 / p.mchc0[pat] + norm(0.6), 1)
    mcv = r(p.mcv0[pat] + norm(1.0), 0)
    rbc = r(hct / mcv * 10.0, 2)
    wbc = p.wbc0[pat] * lognoise(rng, 0.12, m) + ac["wbc_bump"] + 2.0 * ac["acs"]
    plt = p.plt0[pat] * lognoise(rng, 0.08, m) * (1 + 0.25 * ac["inf"]) * ac["plt_factor"]
    return dict(
        wbc=r(wbc, 1),
        rbc=rbc,
        hemoglobin=hgb,
        hematocrit=hct,
        mcv=mcv,
        mch=r(hgb / rbc * 10.0, 1),
        mchc=r(hgb / hct * 100.0, 1),
        rdw=r(p.rdw0[pat] + norm(0.3), 1),
        platelets=np.maximum(r(plt, 0), 5),
    )


def _coag_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """PT (up in sepsis), INR from PT, PTT."""
    r = np.round
    pt = r(p.pt0[s.pat] * lognoise(rng, 0.05, s.m) + 1.5 * s.ac["sepsis"], 1)
    return dict(pt=pt, inr=r(pt / 11.4, 1), ptt=r(30.0 * lognoise(rng, 0.08, s.m), 1))


def _a1c_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """HbA1c: the latent value plus assay noise."""
    return {"hba1c": np.maximum(np.round(s.lat["a1c"] + s.norm(0.12), 1), 4.0)}


def _lipid_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """Lipid panel: LDL down on atorvastatin, calculated LDL by Friedewald when TG <= 400."""
    pat, lat, m = s.pat, s.lat, s.m
    r = np.round
    g_stat = s.eff("atorvastatin")
    ldl = p.ldl0[pat] * (1 - p.e_stat[pat] * g_stat) * lognoise(rng, 0.06, m)
    hdl = r(p.hdl0[pat] * lognoise(rng, 0.05, m), 0)
    tg = p.tg0[pat] * (1 + 0.12 * relu(lat["a1c"] - 6)) * (1 - 0.2 * g_stat)
    tg = r(tg * lognoise(rng, 0.18, m), 0)
    tc = r(ldl + hdl + tg / 5.0, 0)
    measured = (tg > 400) | (rng.random(m) < 0.08)
    return dict(
        total_cholesterol=tc,
        hdl=hdl,
        triglycerides=tg,
        ldl_calc=np.where(tg <= 400, tc - hdl - r(tg / 5.0, 0), np.nan),
        ldl_measured=np.where(measured, r(ldl * lognoise(rng, 0.03, m), 0), np.nan),
    )


def _trop_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """Troponin T: a CKD-raised baseline plus the ACS curve."""
    base = (0.004 + 0.0016 * relu(60 - s.egfr)) * lognoise(rng, 0.25, s.m)
    trop = (base + s.ac["trop"]) * lognoise(rng, 0.08, s.m)
    return {"troponin_t": np.round(trop, 2)}  # < 0.01 is reported as "<0.01" with no valuenum


def _bnp_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """NT-proBNP: up with CKD and in heart-failure exacerbations."""
    bnp = p.bnp0[s.pat] * np.exp(0.04 * relu(60 - s.egfr)) * (1 + 2.0 * s.ac["hf"])
    return {"ntprobnp": np.maximum(np.round(bnp * lognoise(rng, 0.3, s.m), 0), 5)}


def _lactate_values(rng: np.random.Generator, p: SimpleNamespace, s: SimpleNamespace) -> dict:
    """Lactate: up in sepsis and infection."""
    lact = 1.1 * lognoise(rng, 0.25, s.m) + 2.5 * s.ac["sepsis"] + 0.6 * s.ac["inf"]
    return {"lactate": np.round(lact, 1)}


_GROUP_VALUES = {
    G_CHEM: _chem_values,
    G_MINI: _mini_values,
    G_CBC: _cbc_values,
    G_COAG: _coag_values,
    G_A1C: _a1c_values,
    G_LIPID: _lipid_values,
    G_TROP: _trop_values,
    G_BNP: _bnp_values,
    G_LACT: _lactate_values,
}
