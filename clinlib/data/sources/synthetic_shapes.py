"""Real MIMIC-IV hosp shapes for the SYNTHETIC generator (paper §3 "Cohort").

:mod:`clinlib.data.sources.synthetic` draws one prescriptions row per medication order. Real
MIMIC-IV (checked on the openly licensed v2.2 demo; docs/real-data.md) has more
shape than that, and the kit must survive it. This module adds, from its own random stream
(``default_rng([seed, chunk, SHAPES_STREAM])``, so the base tables keep their values):

=====================================  ==================  ===========================
shape                                  real share          here
=====================================  ==================  ===========================
one ``pharmacy_id`` carries MAIN +     80 % MAIN, 20 %     every IV order (but flushes)
BASE diluent rows (+ ADDITIVE), same   BASE, 0.1 %         gets 1-3 BASE rows
starttime, up to 4 rows per id         ADDITIVE rows;      (:data:`BASE_COUNT_P`), a
                                       16 % of ids shared  few an ADDITIVE; IV
                                                           background orders (vancomycin,
                                                           magnesium, cefepime)
``dose_val_rx`` missing                a few rows          :data:`P_DOSE_MISSING` of MAIN
                                                           rows (dose and unit NULL)
``dose_val_rx`` "0" (sliding scale)    common for insulin  every sliding-scale insulin
                                                           order ("Insulin 0 UNIT SC")
thousands separators ("25,000")        heparin drips       a heparin drip dose
double spaces inside a drug name       flushes             "Sodium Chloride 0.9%  Flush"
prescriptions without ``hadm_id``      rare                :data:`P_RX_NO_HADM` of orders
lab result only in ``comments``        rare                :data:`P_LAB_COMMENT_ONLY` of rows
(value and valuenum NULL)
``emar``: one row per administration   --                  up to :data:`EMAR_MAX_PER_ORDER`
(Administered, Flushed, Not Given...)                      per MAIN order
drug names with qualifiers, tall-man,  common              ``QUALIFIED_DRUGS`` orders
trailing / double spaces, "--"                             (opioids, insulin for
                                                           hyperkalemia, heparin drip)
                                                           and ``NAME_VARIANTS`` spellings
=====================================  ==================  ===========================

The shares actually produced are measured by tests/test_synthetic_shapes.py. The quick
profile has fewer IV orders than an ICU-heavy hospital, so its BASE share is below 20 %.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from clinlib.data.sources import synthetic_vocab as sv

SHAPES_STREAM = 7  # third word of the shape generator's seed sequence

# The combined drug table: base DRUGS first (their codes are the base generator's), then the
# IV orders, diluents and additives of this module.
_EXTRA = (sv.IV_DRUGS, sv.BASE_DRUGS, sv.ADDITIVE_DRUGS, sv.QUALIFIED_DRUGS)
ALL_KEYS: tuple[str, ...] = sv.DRUG_KEYS + tuple(k for d in _EXTRA for k in d)
ALL_DRUGS: tuple[sv.Drug, ...] = tuple(
    {**sv.DRUGS, **{k: v for d in _EXTRA for k, v in d.items()}}[k] for k in ALL_KEYS
)
CODE: dict[str, int] = {k: i for i, k in enumerate(ALL_KEYS)}
DOSE_STRINGS: tuple[str, ...] = tuple(d for dr in ALL_DRUGS for d in dr.doses)
DOSE_OFFSET = np.cumsum([0] + [len(dr.doses) for dr in ALL_DRUGS])[:-1]
N_DOSES = np.array([len(dr.doses) for dr in ALL_DRUGS])
ROUTES: tuple[str, ...] = tuple(sorted({r for dr in ALL_DRUGS for r in dr.routes}))
ROUTE_POS: dict[str, int] = {r: i for i, r in enumerate(ROUTES)}
DRUG_TYPES: tuple[str, ...] = ("MAIN", "BASE", "ADDITIVE")
MAIN, BASE, ADDITIVE = range(3)

IV_ORDER_P: dict[str, float] = {"vancomycin": 0.22, "magnesium_sulfate": 0.3, "cefepime": 0.1}
BASE_COUNT_P: tuple[float, ...] = (0.4, 0.35, 0.25)  # 1, 2 or 3 diluent rows
P_ADDITIVE = 0.01  # of orders with a diluent: ~0.1 % of all rows
P_DOSE_MISSING = 0.004
P_RX_NO_HADM = 0.01
P_LAB_COMMENT_ONLY = 0.002
COMMENT_ONLY: tuple[str, str] = (
    "RESULT ",
    " REPORTED IN COMMENTS; VERIFIED BY REPLICATE ANALYSIS.",
)
NO_DILUENT: frozenset[str] = frozenset({"flush"})  # a pre-filled syringe has no bag

EMAR_MAX_PER_ORDER = 4
EMAR_EVENTS: tuple[str, ...] = (
    "Administered",
    "Not Given",
    "Confirmed",
    "Delayed Administered",
    "Flushed",
    "Not Flushed",
    "Not Given per Sliding Scale",
)
_HOUR = 3_600


def _minute(t: np.ndarray) -> np.ndarray:
    return (np.asarray(t, dtype=np.int64) // 60) * 60


def pick_dose(rng: np.random.Generator, drug: np.ndarray) -> np.ndarray:
    """A dose index into :data:`DOSE_STRINGS` per row, the drug's first dose most often."""
    pref = np.floor(rng.random(drug.size) ** 2 * N_DOSES[drug]).astype(np.int64)
    return DOSE_OFFSET[drug] + np.minimum(pref, N_DOSES[drug] - 1)


HYPERKALEMIA_K = 5.5  # mEq/L: a stay whose potassium peaks above gets insulin for it


def extra_orders(
    rng: np.random.Generator, a: SimpleNamespace, allowed: np.ndarray, k_max: np.ndarray
) -> dict:
    """Extra orders per admission: background IV orders (antibiotics, magnesium), qualified-
    name drugs (opioids; insulin for hyperkalemia when potassium peaks above
    :data:`HYPERKALEMIA_K`; a heparin drip in ACS stays).

    Args:
        rng: the shape stream.
        a: the chunk's admissions (``n``, ``admit``, ``disch``, ``los`` in days, ``acs``).
        allowed: admissions that may get orders (not few_rx patients).
        k_max: per admission, the highest potassium reported.

    Returns:
        Per-order arrays ``adm``, ``drug`` (code in :data:`ALL_KEYS`), ``start``, ``stop``,
        ``route`` (index into :data:`ROUTES`; the drug's first route, 80 %).
    """
    adm_parts, drug_parts = [], []
    chosen = {
        k: allowed & (rng.random(a.n) < p) for k, p in {**IV_ORDER_P, **sv.QUALIFIED_P}.items()
    }
    chosen["insulin_hyperk"] = allowed & (k_max > HYPERKALEMIA_K)
    chosen["heparin_porcine"] = allowed & a.acs & (rng.random(a.n) < 0.6)
    for key, sel in chosen.items():
        sel = np.flatnonzero(sel)
        adm_parts.append(sel)
        drug_parts.append(np.full(sel.size, CODE[key]))
    adm = np.concatenate(adm_parts).astype(np.int64)
    hi = np.maximum(np.minimum(20.0, a.los[adm] * 24 - 1.0), 1.6)
    start = _minute(a.admit[adm] + np.rint((1.5 + (hi - 1.5) * rng.random(adm.size)) * _HOUR))
    stop = _minute(a.disch[adm] - np.rint(2 * rng.random(adm.size) * _HOUR))
    stop = np.maximum(stop, start + _HOUR)
    drug = np.concatenate(drug_parts).astype(np.int64)
    first = np.array([ROUTE_POS[dr.routes[0]] for dr in ALL_DRUGS])
    last = np.array([ROUTE_POS[dr.routes[-1]] for dr in ALL_DRUGS])
    route = np.where(rng.random(drug.size) < 0.8, first[drug], last[drug])
    return {"adm": adm, "drug": drug, "start": start, "stop": stop, "route": route}


def name_variants(rng: np.random.Generator, drug: np.ndarray) -> np.ndarray:
    """Per order, its drug code with some base drugs spelled as their variant
    (:data:`clinlib.data.sources.synthetic_vocab.NAME_VARIANTS`)."""
    out = drug.copy()
    u = rng.random(drug.size)
    for key, (variant, share) in sv.NAME_VARIANTS.items():
        out[(drug == CODE[key]) & (u < share)] = CODE[variant]
    return out


def order_rows(rng: np.random.Generator, drug: np.ndarray, route: np.ndarray) -> SimpleNamespace:
    """Expand sorted medication orders into prescriptions rows sharing the order's id.

    Args:
        rng: the shape stream.
        drug: per order, its MAIN drug code.
        route: per order, its route index into :data:`ROUTES`.

    Returns:
        ``order`` (per row, the order it belongs to; rows of an order are adjacent, MAIN
        first), ``drug_type`` (index into :data:`DRUG_TYPES`), ``drug`` (per row, BASE and
        ADDITIVE rows with their own drug code) and ``no_hadm`` (per order).
    """
    n = drug.size
    iv = route == ROUTE_POS["IV"]
    iv &= ~np.isin(drug, [CODE[k] for k in NO_DILUENT])
    n_base = np.where(iv, 1 + rng.choice(len(BASE_COUNT_P), n, p=BASE_COUNT_P), 0)
    n_add = (iv & (rng.random(n) < P_ADDITIVE)).astype(np.int64)
    n_base = np.minimum(n_base, 3 - n_add)  # at most 4 rows per pharmacy_id
    per = 1 + n_base + n_add
    order = np.repeat(np.arange(n), per)
    pos = np.arange(order.size) - np.repeat(np.cumsum(per) - per, per)
    kind = np.where(pos == 0, MAIN, np.where(pos <= n_base[order], BASE, ADDITIVE))
    row_drug = drug[order].copy()
    base_keys = np.array([CODE[k] for k in sv.BASE_DRUGS])
    add_keys = np.array([CODE[k] for k in sv.ADDITIVE_DRUGS])
    is_base, is_add = kind == BASE, kind == ADDITIVE
    row_drug[is_base] = base_keys[rng.choice(base_keys.size, int(is_base.sum()), p=sv.BASE_P)]
    row_drug[is_add] = add_keys[rng.integers(0, add_keys.size, int(is_add.sum()))]
    return SimpleNamespace(
        order=order, drug_type=kind, drug=row_drug, no_hadm=rng.random(n) < P_RX_NO_HADM
    )


def dose_missing(rng: np.random.Generator, drug_type: np.ndarray) -> np.ndarray:
    """Rows whose dose_val_rx and dose_unit_rx are NULL (MAIN rows only)."""
    return (drug_type == MAIN) & (rng.random(drug_type.size) < P_DOSE_MISSING)


def comment_only(rng: np.random.Generator, n: int) -> np.ndarray:
    """Lab rows whose result is only in ``comments`` (value, valuenum and flag NULL)."""
    return rng.random(n) < P_LAB_COMMENT_ONLY


def emar_rows(rng: np.random.Generator, start, stop, per_day, drug) -> SimpleNamespace:
    """Administrations of MAIN orders: every 24 / doses_per_24_hrs hours from the start,
    at most :data:`EMAR_MAX_PER_ORDER`, before the stop.

    Args:
        rng: the shape stream.
        start, stop: per order, epoch seconds.
        per_day: per order, doses_per_24_hrs.
        drug: per order, drug code (flushes are "Flushed", sliding scales may be skipped).

    Returns:
        ``order`` (per administration), ``schedule``, ``chart``, ``store`` (epoch seconds)
        and ``event`` (index into :data:`EMAR_EVENTS`).
    """
    step = np.rint(24 * _HOUR / np.maximum(np.asarray(per_day, float), 0.25)).astype(np.int64)
    count = np.clip((stop - start) // np.maximum(step, 1) + 1, 1, EMAR_MAX_PER_ORDER)
    order = np.repeat(np.arange(start.size), count)
    k = np.arange(order.size) - np.repeat(np.cumsum(count) - count, count)
    schedule = _minute(start[order] + k * step[order])
    chart = _minute(schedule + np.rint(rng.normal(0, 20, order.size) * 60).astype(np.int64))
    store = chart + 60 * rng.integers(1, 15, order.size)
    u = rng.random(order.size)
    event = np.select([u < 0.86, u < 0.93, u < 0.97], [0, 1, 2], 3)
    flush = drug[order] == CODE["flush"]
    event = np.where(flush, np.where(u < 0.9, 4, 5), event)
    sliding = drug[order] == CODE["insulin_sliding"]
    event = np.where(sliding & (u > 0.7), 6, event)
    return SimpleNamespace(order=order, schedule=schedule, chart=chart, store=store, event=event)
