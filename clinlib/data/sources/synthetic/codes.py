"""SYNTHETIC diagnoses_icd and procedures_icd, in ICD-9 or ICD-10 by the admission's date
(paper §3 "Cohort": index-disease codes decide the cohort; Appendix C.1).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.synthetic.arrow import (
    ChunkIds,
    arrow_schema,
    date_array,
    int_array,
    take_strings,
)
from clinlib.data.sources.synthetic.design import (
    CAD,
    CKD,
    COMORBIDITIES,
    DAY_S,
    DM,
    DX_CODE,
    DX_KEYS,
    HTN,
    NO_CODE,
    ONE_CODE,
    PX_CODE,
    PX_KEYS,
    SINGLE,
)
from clinlib.data.sources.synthetic.labvalues import latent_state
from clinlib.data.sources.synthetic.numeric import choose, masked, rank_in_sorted_groups
from clinlib.data.sources.synthetic.population import first_flagged


class _DxRows:
    """Diagnosis rows (admission, code key, priority) collected in the order they are drawn."""

    def __init__(self, n_adm: int) -> None:
        self.idx_a = np.arange(n_adm)
        self.adm, self.key, self.prio = [], [], []

    def add(self, mask: np.ndarray, key, prio) -> None:
        """Code ``key`` (one or per admission) at priority ``prio`` on the admissions in mask."""
        self.adm.append(self.idx_a[mask])
        self.key.append(masked(key, mask))
        self.prio.append(masked(prio, mask))


def _dialysis_on(plan: SimpleNamespace, a: SimpleNamespace) -> np.ndarray:
    """Admissions on or after the patient's first dialysis admission."""
    start = plan.dialysis_from[a.pat]
    return (start >= 0) & (np.arange(a.n) >= start)


def icd_diagnoses(rng, p, a, plan, ext, ids: ChunkIds) -> pa.Table:
    """diagnoses_icd rows: reason for admission, index diseases, comorbidities, lab-driven
    and status codes, in ICD-9 or ICD-10 by the admission's date."""
    rows = _DxRows(a.n)
    _reason_codes(rng, rows, a)
    _index_disease_codes(rng, rows, p, a, plan)
    _other_codes(rng, rows, p, a, plan, ext)
    return _diagnoses_table(rows, a, ids)


def _reason_codes(rng: np.random.Generator, rows: _DxRows, a: SimpleNamespace) -> None:
    """Principal reason for admission (priority 0), and sepsis's source (priority 1)."""
    A, c = a.n, DX_CODE
    acs_kind = choose(rng, [0.6, 0.2, 0.2], A)
    acs_code = np.array([c["nstemi"], c["stemi_anterior"], c["stemi_inferior"]])[acs_kind]
    generic = np.array(
        [c["chest_pain"], c["chest_pain_other"], c["syncope"], c["hypotension"], c["constipation"]]
    )[choose(rng, [0.25, 0.2, 0.25, 0.15, 0.15], A)]
    reason = np.select(
        [a.acs, a.sepsis, a.pneumonia, a.infection, a.hf_exac, a.aki, a.elective_cath, a.chest_obs],
        [
            acs_code,
            c["sepsis"],
            c["pneumonia"],
            c["uti"],
            c["heart_failure"],
            c["aki"],
            c["angina"],
            c["chest_pain"],
        ],
        generic,
    )
    rows.add(np.ones(A, bool), reason, 0)
    rows.add(a.sepsis & a.pneumonia, c["pneumonia"], 1)
    rows.add(a.sepsis & ~a.pneumonia, c["uti"], 1)


def _index_disease_codes(rng: np.random.Generator, rows: _DxRows, p, a, plan) -> None:
    """Index diseases: the designated one on (almost) every stay, comorbid ones on about half,
    each coded by its severity (diabetes complications, hypertensive CKD, CKD stage)."""
    A, c, pat, idx_a, add = a.n, DX_CODE, a.pat, rows.idx_a, rows.add
    mode, des = p.mode[pat], p.designated[pat]
    lat = latent_state(p, plan, pat, a.admit)
    egfr, a1c = lat["egfr"], lat["a1c"]
    coded = np.zeros((A, 4), dtype=bool)
    for dis in range(4):
        prob = np.where(des == dis, 0.97, 0.5)
        forced = (des == dis) & (a.k <= 1)
        coded[:, dis] = p.flags[pat, dis] & ((rng.random(A) < prob) | forced)
    coded[mode == NO_CODE] = False
    # one_index_code: a single stay gets a single code of the patient's one disease.
    one = mode == ONE_CODE
    pick_k = np.floor(rng.random(p.n) * np.maximum(p.n_adm, 1)).astype(np.int64)
    one_stay = one & (a.k == pick_k[pat])
    coded[one] = False
    simple = np.array([c["dm_uncomplicated"], c["htn"], c["ckd_3"], c["cad"]])
    add(one_stay, simple[np.maximum(des, 0)], 1)

    def prio(disease: int) -> np.ndarray:
        return np.where(des == disease, 1, 2)

    dm_code = np.select(
        [p.ckd[pat] & coded[:, CKD], a1c > 9.0, p.neuro[pat], p.retino[pat]],
        [c["dm_renal"], c["dm_uncontrolled"], c["dm_neuro"], c["dm_ophthalmic"]],
        c["dm_uncomplicated"],
    )
    on_insulin = (plan.adm["insulin_glargine"][pat] >= 0) & (
        idx_a > plan.adm["insulin_glargine"][pat]
    )
    dm_code = np.where(on_insulin & (rng.random(A) < 0.06), c["dm_hypoglycemia"], dm_code)
    add(coded[:, DM], dm_code, prio(DM))
    # A second diabetes code for single-admission diabetes (neuropathy + retinopathy).
    add(coded[:, DM] & (mode == SINGLE), c["dm_ophthalmic"], 1)
    add(coded[:, DM] & (mode == SINGLE), c["dm_neuro"], 1)
    # Hypertension with CKD must be coded as hypertensive CKD (I12 / 403): counts for both.
    dialysis_on = _dialysis_on(plan, a)
    esrd = (egfr < 15) | dialysis_on
    hyp_ckd = p.htn[pat] & p.ckd[pat] & (coded[:, HTN] | coded[:, CKD])
    add(hyp_ckd, np.where(esrd, c["htn_ckd_esrd"], c["htn_ckd"]), prio(HTN))
    plain_htn = coded[:, HTN] & ~(p.ckd[pat] & p.htn[pat])
    add(plain_htn, np.where(p.hf[pat], c["htn_heart_failure"], c["htn"]), prio(HTN))
    stage = np.select(
        [dialysis_on, egfr < 15, egfr < 30, egfr < 60, egfr < 90],
        [c["esrd"], c["ckd_5"], c["ckd_4"], c["ckd_3"], c["ckd_2"]],
        c["ckd_1"],
    )
    stage = np.where(rng.random(A) < 0.08, c["ckd_unspecified"], stage)
    add(coded[:, CKD], stage, prio(CKD))
    add(coded[:, CAD], c["cad"], prio(CAD))
    after_acs = (a.k > 0) & p.cad[pat]
    first_acs = first_flagged(a, a.acs, p.n)[pat]
    add(
        after_acs & (first_acs >= 0) & (idx_a > first_acs) & coded[:, CAD] & (rng.random(A) < 0.5),
        c["old_mi"],
        2,
    )
    add(coded[:, CAD] & (mode == SINGLE), c["old_mi"], 1)


def _other_codes(rng: np.random.Generator, rows: _DxRows, p, a, plan, ext) -> None:
    """Chronic comorbidities and heart failure (priority 3), lab-driven problems from the
    values the lab reported (priority 4), status codes (priority 5)."""
    A, c, pat, idx_a, add = a.n, DX_CODE, a.pat, rows.idx_a, rows.add
    for j, (name, _, _) in enumerate(COMORBIDITIES):
        add(p.comorb[pat, j] & (rng.random(A) < 0.6), c[name], 3)
    add(p.hf[pat] & ~a.hf_exac & (rng.random(A) < 0.6), c["heart_failure"], 3)
    code_p = rng.random((A, 5)) < 0.85
    add(code_p[:, 0] & (ext.k_max > 5.5), c["hyperkalemia"], 4)
    add(code_p[:, 1] & (ext.k_min < 3.3), c["hypokalemia"], 4)
    add(code_p[:, 2] & (ext.na_min < 133), c["hyponatremia"], 4)
    add(code_p[:, 3] & (ext.hco3_min < 20), c["acidosis"], 4)
    anemia = code_p[:, 4] & (ext.hgb_min < 10)
    add(anemia, np.where(p.ckd[pat], c["anemia_ckd"], c["anemia"]), 4)

    def on_drug(name):
        s = plan.adm[name][pat]
        return (s >= 0) & (idx_a >= s)

    status = rng.random((A, 6)) < 0.7
    add(status[:, 0] & on_drug("insulin_glargine"), c["insulin_use"], 5)
    add(status[:, 1] & (on_drug("metformin") | on_drug("glipizide")), c["oral_hypoglycemic_use"], 5)
    add(status[:, 2] & on_drug("aspirin"), c["aspirin_use"], 5)
    add(status[:, 3] & on_drug("clopidogrel"), c["antiplatelet_use"], 5)
    add(status[:, 4] & _dialysis_on(plan, a), c["dialysis_status"], 5)
    first_pci = first_flagged(a, a.pci, p.n)[pat]
    add(status[:, 5] & (first_pci >= 0) & (idx_a > first_pci), c["ptca_status"], 5)


def _diagnoses_table(rows: _DxRows, a: SimpleNamespace, ids: ChunkIds) -> pa.Table:
    """One row per (stay, code), keeping its most important position; then seq_num in order."""
    r_adm = np.concatenate(rows.adm)
    r_key = np.concatenate(rows.key)
    r_prio = np.concatenate(rows.prio)
    order = np.lexsort((r_prio, r_key, r_adm))
    r_adm, r_key, r_prio = r_adm[order], r_key[order], r_prio[order]
    first = np.r_[True, (np.diff(r_adm) != 0) | (np.diff(r_key) != 0)]
    r_adm, r_key, r_prio = r_adm[first], r_key[first], r_prio[first]
    order = np.lexsort((r_key, r_prio, r_adm))
    r_adm, r_key = r_adm[order], r_key[order]
    seq = rank_in_sorted_groups(r_adm) + 1
    icd10 = a.icd10[r_adm]
    codes9 = [sv.DX_PAIRS[k][0] for k in DX_KEYS]
    codes10 = [sv.DX_PAIRS[k][1] for k in DX_KEYS]
    code_idx = np.where(icd10, r_key + len(DX_KEYS), r_key)
    return pa.Table.from_arrays(
        [
            int_array(ids.subject + a.pat[r_adm], pa.int32()),
            int_array(ids.hadm + r_adm, pa.int32()),
            int_array(seq, pa.int32()),
            take_strings(codes9 + codes10, code_idx),
            int_array(np.where(icd10, 10, 9), pa.int16()),
        ],
        schema=arrow_schema("diagnoses_icd"),
    )


def icd_procedures(rng, p, a, plan, ext, ids: ChunkIds) -> pa.Table:
    """procedures_icd rows: catheterisation / PCI, dialysis, transfusion, lines, echo."""
    A = a.n
    idx_a = np.arange(A)
    pat = a.pat
    rows_adm, rows_grp, rows_day = [], [], []

    def add(mask, key, day):
        sel = idx_a[mask]
        rows_adm.append(sel)
        rows_grp.append(np.full(sel.size, PX_CODE[key], np.int64))
        # A procedure happens during the stay: its chartdate is at most the discharge date.
        last_day = (a.disch[sel] // DAY_S) - (a.admit[sel] // DAY_S)
        rows_day.append(np.minimum(masked(day, mask), last_day))

    cath = (a.acs & (rng.random(A) < 0.9)) | a.elective_cath | a.pci
    cath_day = np.where(a.acs, rng.integers(0, 2, A), 0)
    left_only = rng.random(A) < 0.8
    add(cath & left_only, "left_heart_cath", cath_day)
    add(cath & ~left_only, "right_left_cath", cath_day)
    des_stent = rng.random(A) < 0.85
    add(a.pci & des_stent, "pci_des", cath_day)
    add(a.pci & ~des_stent, "pci_balloon", cath_day)
    dialysis_on = _dialysis_on(plan, a)
    first_dialysis = dialysis_on & (idx_a == plan.dialysis_from[pat])
    add(dialysis_on & ((rng.random(A) < 0.85) | first_dialysis), "hemodialysis", 1)
    add(first_dialysis, "dialysis_catheter", 0)
    add((ext.hgb_min < 7.5) & (rng.random(A) < 0.8), "transfusion", 1)
    add(a.sepsis & (rng.random(A) < 0.6), "central_line", 0)
    add((a.acs | a.hf_exac) & (rng.random(A) < 0.4), "echo", 1)

    r_adm = np.concatenate(rows_adm)
    r_grp = np.concatenate(rows_grp)
    r_day = np.concatenate(rows_day)
    icd10 = a.icd10[r_adm]
    # Expand each act into its codes for the stay's ICD version.
    per9 = [sv.PX_GROUPS[k][0] for k in PX_KEYS]
    per10 = [sv.PX_GROUPS[k][1] for k in PX_KEYS]
    n_codes = np.where(
        icd10, np.array([len(x) for x in per10])[r_grp], np.array([len(x) for x in per9])[r_grp]
    )
    rep = np.repeat(np.arange(r_adm.size), n_codes)
    j = rank_in_sorted_groups(rep)
    flat9 = [code for codes in per9 for code in codes]
    flat10 = [code for codes in per10 for code in codes]
    off9 = np.cumsum([0] + [len(x) for x in per9])[:-1]
    off10 = np.cumsum([0] + [len(x) for x in per10])[:-1] + len(flat9)
    code_idx = np.where(icd10[rep], off10[r_grp[rep]], off9[r_grp[rep]]) + j
    e_adm, e_day = r_adm[rep], r_day[rep]
    order = np.lexsort((np.arange(rep.size), e_day, e_adm))
    e_adm, e_day, code_idx = e_adm[order], e_day[order], code_idx[order]
    # A code appears once per stay.
    key = e_adm * 10_000 + code_idx
    _, uniq = np.unique(key, return_index=True)
    keep = np.zeros(key.size, bool)
    keep[uniq] = True
    e_adm, e_day, code_idx = e_adm[keep], e_day[keep], code_idx[keep]
    seq = rank_in_sorted_groups(e_adm) + 1
    chartdate = (a.admit[e_adm] // DAY_S + e_day) * DAY_S
    return pa.Table.from_arrays(
        [
            int_array(ids.subject + pat[e_adm], pa.int32()),
            int_array(ids.hadm + e_adm, pa.int32()),
            int_array(seq, pa.int32()),
            date_array(chartdate),
            take_strings(flat9 + flat10, code_idx),
            int_array(np.where(a.icd10[e_adm], 10, 9), pa.int16()),
        ],
        schema=arrow_schema("procedures_icd"),
    )
