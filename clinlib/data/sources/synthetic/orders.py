"""SYNTHETIC prescriptions and emar: chronic, acute and background orders, then the real
MIMIC-IV order shapes of :mod:`clinlib.data.sources.synthetic_shapes` (paper §3 "Cohort";
the prescriptions/eMAR section of docs/real-data.md).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.synthetic import hazards as hz
from clinlib.data.sources.synthetic.arrow import (
    ChunkIds,
    arrow_schema,
    int_array,
    take_strings,
    ts_array,
)
from clinlib.data.sources.synthetic.design import (
    BACKGROUND_DRUGS,
    CHRONIC_DRUGS,
    DAY_S,
    DRUG_CODE,
    FEW_RX,
    HOUR_S,
    RX_PER_PATIENT,
    SINGLE,
    T_BASE,
)
from clinlib.data.sources.synthetic.numeric import (
    providers,
    rank_in_sorted_groups,
    to_minute,
    uniform,
)


class _Orders:
    """Base orders (admission, drug, start, stop) collected in the order they are drawn."""

    def __init__(self, rng: np.random.Generator, a: SimpleNamespace) -> None:
        self.rng, self.a = rng, a
        self.adm, self.drug, self.start, self.stop = [], [], [], []

    def add(self, adm, drug_key: str, start=None, stop=None) -> None:
        """Orders of ``drug_key`` at admissions ``adm``; start hours into the stay and stop
        before discharge unless given."""
        rng, a = self.rng, self.a
        adm = np.asarray(adm, dtype=np.int64)
        if start is None:
            hi = np.minimum(20.0, a.los[adm] * 24 - 1.0)
            hours = uniform(rng, 1.5, np.maximum(hi, 1.6), adm.size)
            start = to_minute(a.admit[adm] + np.rint(hours * HOUR_S).astype(np.int64))
        if stop is None:
            stop = to_minute(
                a.disch[adm] - np.rint(uniform(rng, 0, 2, adm.size) * HOUR_S).astype(np.int64)
            )
        self.adm.append(adm)
        self.drug.append(np.full(adm.size, DRUG_CODE[drug_key], np.int16))
        self.start.append(np.asarray(start, np.int64))
        self.stop.append(
            np.maximum(np.asarray(stop, np.int64), np.asarray(start, np.int64) + HOUR_S)
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(admission, drug code, start, stop) of every order so far."""
        return tuple(np.concatenate(x) for x in (self.adm, self.drug, self.start, self.stop))


def prescription_rows(
    rng, srng, p, a, plan, ext, ids: ChunkIds, hrng=None
) -> tuple[pa.Table, pa.Table]:
    """prescriptions and emar rows: chronic drugs from their start on, acute and background
    orders (``srng``: the shape stream of :mod:`clinlib.data.sources.synthetic_shapes`;
    ``hrng``: the hazard stream of :mod:`clinlib.data.sources.synthetic.hazards`, whose
    contraindicated orders are added when given)."""
    orders = _Orders(rng, a)
    _chronic_orders(rng, orders, a, plan)
    _acute_orders(rng, orders, p, a, ext)
    r_adm, r_drug, r_start, r_stop = _few_rx_orders(
        rng, p, a, *_at_least_one_order(rng, p, a, *orders.arrays())
    )
    r_pat = a.pat[r_adm]
    order = np.argsort(
        (r_pat << 42) | ((r_start - T_BASE) << 8) | r_drug.astype(np.int64), kind="stable"
    )
    base = SimpleNamespace(
        adm=r_adm[order], drug=r_drug[order], start=r_start[order], stop=r_stop[order]
    )
    base.pat = r_pat[order]
    _order_details(rng, p, base)
    planted = (
        None if hrng is None else hz.planted_orders(hrng, a, ext.states, p.mode[a.pat] != FEW_RX)
    )
    return _order_tables(srng, p, a, ids, ext.k_max, base, planted)


def _chronic_orders(rng: np.random.Generator, orders: _Orders, a, plan: SimpleNamespace) -> None:
    """Each chronic drug from its documented start on, continued at most later stays."""
    A, idx_a = a.n, np.arange(a.n)
    for name in CHRONIC_DRUGS:
        s = plan.adm[name][a.pat]
        on = (s >= 0) & (idx_a >= s)
        initiation = on & (idx_a == s)
        cont = on & ~initiation & (rng.random(A) < 0.92)
        init_adm = idx_a[initiation]
        orders.add(init_adm, name, start=plan.start_s[name][a.pat[init_adm]])
        orders.add(idx_a[cont], name)


def _acute_orders(rng: np.random.Generator, orders: _Orders, p, a, ext: SimpleNamespace) -> None:
    """Acute orders (sliding-scale insulin, nitroglycerin, antibiotics, potassium replacement)
    and per-admission background medications."""
    A, idx_a = a.n, np.arange(a.n)
    dm = p.dm[a.pat]
    orders.add(idx_a[dm & (rng.random(A) < 0.8)], "insulin_sliding")
    orders.add(idx_a[a.acs | a.chest_obs], "nitroglycerin")
    inf = idx_a[a.infection]
    abx_days = uniform(rng, 3, 7, inf.size)
    first_abx = np.where(rng.random(inf.size) < 0.6, "ceftriaxone", "levofloxacin")
    for drug in ("ceftriaxone", "levofloxacin"):
        sel = inf[first_abx == drug]
        hrs = uniform(rng, 1.0, 6.0, sel.size)
        st = to_minute(a.admit[sel] + np.rint(hrs * HOUR_S).astype(np.int64))
        stop = np.minimum(
            st + np.rint(abx_days[first_abx == drug] * DAY_S).astype(np.int64), a.disch[sel]
        )
        orders.add(sel, drug, start=st, stop=to_minute(stop))
    # Potassium replacement one hour after the first potassium below 3.4 of a stay.
    low = np.flatnonzero(ext.low_k_time < np.iinfo(np.int64).max)
    st = to_minute(ext.low_k_time[low] + HOUR_S)
    ok = st < a.disch[low]
    orders.add(low[ok], "potassium_chloride", start=st[ok], stop=to_minute(st[ok] + 2 * HOUR_S))
    for name, prob in BACKGROUND_DRUGS:
        orders.add(idx_a[rng.random(A) < prob], name)


def _at_least_one_order(rng, p, a, r_adm, r_drug, r_start, r_stop) -> tuple[np.ndarray, ...]:
    """Every stay has at least one order (two for single-admission patients): heparin SC."""
    count = np.bincount(r_adm, minlength=a.n)
    need = np.where(p.mode[a.pat] == SINGLE, 2, 1) - count
    extra = np.repeat(np.arange(a.n), np.maximum(need, 0))
    extra_drug = np.where(
        rank_in_sorted_groups(extra) == 0, DRUG_CODE["heparin_sc"], DRUG_CODE["acetaminophen"]
    )
    hours = uniform(rng, 1.5, 3.0, extra.size)
    extra_start = to_minute(a.admit[extra] + np.rint(hours * HOUR_S).astype(np.int64))
    return (
        np.r_[r_adm, extra],
        np.r_[r_drug, extra_drug.astype(np.int16)],
        np.r_[r_start, extra_start],
        np.r_[r_stop, np.maximum(a.disch[extra], extra_start + HOUR_S)],
    )


def _few_rx_orders(rng, p, a, r_adm, r_drug, r_start, r_stop) -> tuple[np.ndarray, ...]:
    """few_rx patients: at most one order in total; no_admission patients have no stays."""
    few = p.mode[a.pat[r_adm]] == FEW_RX
    keep = ~few
    few_first = few & (a.k[r_adm] == 0) & (r_drug == DRUG_CODE["acetaminophen"])
    if few_first.any():
        first_of = np.flatnonzero(few_first)
        pats = a.pat[r_adm[first_of]]
        _, uniq = np.unique(pats, return_index=True)
        chosen = first_of[uniq]
        chosen = chosen[rng.random(chosen.size) < 0.5]
        keep[chosen] = True
    return r_adm[keep], r_drug[keep], r_start[keep], r_stop[keep]


def _order_details(rng: np.random.Generator, p: SimpleNamespace, base: SimpleNamespace) -> None:
    """Dose, route and provider of each base order, drawn from the base stream in their
    original order so that stream is unchanged."""
    r_pat, r_drug = base.pat, base.drug
    drugs = [sv.DRUGS[k] for k in sv.DRUG_KEYS]
    n_doses = np.array([len(dr.doses) for dr in drugs])
    # Dose: mostly the drug's usual dose, per patient so chronic orders repeat it.
    pat_pref = rng.random((p.n, len(drugs)))
    pref = np.minimum(np.floor(pat_pref[r_pat, r_drug] ** 2 * n_doses[r_drug]), n_doses[r_drug] - 1)
    base.dose = shp.DOSE_OFFSET[r_drug] + pref.astype(np.int64)
    route_first = np.array([shp.ROUTE_POS[dr.routes[0]] for dr in drugs])
    route_second = np.array([shp.ROUTE_POS[dr.routes[-1]] for dr in drugs])
    base.route = np.where(rng.random(r_drug.size) < 0.8, route_first[r_drug], route_second[r_drug])
    base.provider = rng.integers(0, providers().size, r_drug.size)


def _order_tables(srng, p, a, ids: ChunkIds, k_max, base: SimpleNamespace, planted=None) -> tuple:
    """prescriptions and emar tables from the base orders plus the real-data shapes of
    :mod:`clinlib.data.sources.synthetic_shapes` (IV orders, BASE / ADDITIVE rows sharing the
    order's pharmacy_id, missing doses and hadm_ids, one emar row per administration)."""
    o = _with_iv_orders(srng, p, a, k_max, base, planted)
    ids.check("pharmacy", ids.pharmacy, o.adm.size, RX_PER_PATIENT)
    rows = shp.order_rows(srng, o.drug, o.route)
    o.subject = ids.subject + o.pat
    o.poe_seq = rank_in_sorted_groups(o.pat) + 1
    o.poe_id = pc.binary_join_element_wise(
        pc.cast(pa.array(o.subject), pa.string()), pc.cast(pa.array(o.poe_seq), pa.string()), "-"
    )
    return _prescriptions_table(srng, ids, o, rows), _emar_table(srng, ids, o, rows)


def _with_iv_orders(srng, p, a, k_max, base: SimpleNamespace, planted=None) -> SimpleNamespace:
    """Base orders plus the shape stream's IV orders and the planted contraindicated orders
    (:mod:`clinlib.data.sources.synthetic.hazards`), sorted by (patient, start, drug), with
    qualified drug-name variants."""
    iv = shp.extra_orders(srng, a, allowed=p.mode[a.pat] != FEW_RX, k_max=k_max)
    n_iv = iv["adm"].size
    iv["dose"] = shp.pick_dose(srng, iv["drug"])
    iv["provider"] = srng.integers(0, providers().size, n_iv)
    parts = [iv] if planted is None else [iv, planted]

    def cat(key: str, first: np.ndarray) -> np.ndarray:
        return np.concatenate([first, *(x[key] for x in parts)])

    r_adm, r_drug = cat("adm", base.adm), cat("drug", base.drug.astype(np.int64))
    r_start, r_stop = cat("start", base.start), cat("stop", base.stop)
    dose, route, provider = (
        cat("dose", base.dose),
        cat("route", base.route),
        cat("provider", base.provider),
    )
    r_pat = a.pat[r_adm]
    order = np.argsort((r_pat << 42) | ((r_start - T_BASE) << 8) | r_drug, kind="stable")
    o = SimpleNamespace(adm=r_adm[order], start=r_start[order], stop=r_stop[order])
    o.pat, o.dose, o.route, o.provider = r_pat[order], dose[order], route[order], provider[order]
    o.drug = shp.name_variants(srng, r_drug[order])
    return o


def _prescriptions_table(srng, ids: ChunkIds, o: SimpleNamespace, rows) -> pa.Table:
    """One prescriptions row per MAIN / BASE / ADDITIVE row of each order."""
    oi, drug = rows.order, rows.drug
    main = rows.drug_type == shp.MAIN
    row_dose = np.where(main, o.dose[oi], 0)
    row_dose[~main] = shp.pick_dose(srng, drug[~main])
    row_route = np.where(main, o.route[oi], shp.ROUTE_POS["IV"])
    no_dose = shp.dose_missing(srng, rows.drug_type)
    all_drugs = shp.ALL_DRUGS
    ndc_zero = np.isin(drug, [shp.CODE["insulin_sliding"], shp.CODE["flush"]])
    form_rx_null = np.array([dr.form_rx is None for dr in all_drugs])[drug]
    return pa.Table.from_arrays(
        [
            int_array(o.subject[oi], pa.int32()),
            int_array(ids.hadm + o.adm[oi], pa.int32(), rows.no_hadm[oi]),
            int_array(ids.pharmacy + oi, pa.int32()),
            o.poe_id.take(pa.array(oi.astype(np.int32))),
            int_array(o.poe_seq[oi], pa.int32()),
            take_strings(providers(), o.provider[oi]),
            ts_array(o.start[oi]),
            ts_array(o.stop[oi]),
            take_strings(shp.DRUG_TYPES, rows.drug_type),
            take_strings([dr.drug for dr in all_drugs], drug),
            take_strings([dr.formulary_drug_cd for dr in all_drugs], drug),
            take_strings([sv.synthetic_gsn(i) for i in range(len(all_drugs))], drug),
            take_strings(
                [sv.synthetic_ndc(i) for i in range(len(all_drugs))] + ["0"],
                np.where(ndc_zero, len(all_drugs), drug),
            ),
            take_strings([dr.prod_strength for dr in all_drugs], drug),
            take_strings([dr.form_rx or "" for dr in all_drugs], drug, form_rx_null),
            take_strings(shp.DOSE_STRINGS, row_dose, no_dose),
            take_strings([dr.dose_unit for dr in all_drugs], drug, no_dose),
            take_strings([dr.form_val_disp for dr in all_drugs], drug),
            take_strings([dr.form_unit_disp for dr in all_drugs], drug),
            pa.array(np.array([dr.doses_per_24_hrs for dr in all_drugs], np.float32)[drug]),
            take_strings(shp.ROUTES, row_route),
        ],
        schema=arrow_schema("prescriptions"),
    )


def _emar_table(srng, ids: ChunkIds, o: SimpleNamespace, rows) -> pa.Table:
    """One emar row per administration of each order, in (patient, charttime) order."""
    all_drugs = shp.ALL_DRUGS
    per_day = np.array([dr.doses_per_24_hrs for dr in all_drugs])[o.drug]
    e = shp.emar_rows(srng, o.start, o.stop, per_day, o.drug)
    srt = np.argsort((o.pat[e.order] << 42) | (e.chart - T_BASE), kind="stable")
    eo = e.order[srt]
    seq = rank_in_sorted_groups(o.pat[eo]) + 1
    e_subject = pc.cast(pa.array(o.subject[eo]), pa.string())
    return pa.Table.from_arrays(
        [
            int_array(o.subject[eo], pa.int32()),
            int_array(ids.hadm + o.adm[eo], pa.int32(), rows.no_hadm[eo]),
            pc.binary_join_element_wise(e_subject, pc.cast(pa.array(seq), pa.string()), "-"),
            int_array(seq, pa.int32()),
            o.poe_id.take(pa.array(eo.astype(np.int32))),
            int_array(ids.pharmacy + eo, pa.int32()),
            pa.nulls(eo.size, pa.string()),
            ts_array(e.chart[srt]),
            take_strings([dr.drug for dr in all_drugs], o.drug[eo]),
            take_strings(shp.EMAR_EVENTS, e.event[srt]),
            ts_array(e.schedule[srt]),
            ts_array(e.store[srt]),
        ],
        schema=arrow_schema("emar"),
    )
