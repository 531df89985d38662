"""The SYNTHETIC labevents table: values formatted as a lab reports them, reference ranges,
flags, MIMIC quirks, and per-admission extremes for lab-driven codes and orders (paper §3
"Cohort"; docs/real-data.md).
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
    str_array,
    take_strings,
    ts_array,
)
from clinlib.data.sources.synthetic.design import (
    G_A1C,
    G_CBC,
    G_LIPID,
    GROUP_ITEMS,
    GROUPS,
    ITEM_CODE,
    ITEM_KEYS,
    K_DAY0,
    K_ED,
    K_OUTPT,
    K_SERIAL,
    LAB_COMMENTS,
    LABEVENTS_PER_PATIENT,
    PRIORITIES,
    SPECIMENS_PER_PATIENT,
    T_BASE,
    SyntheticConfigError,
)
from clinlib.data.sources.synthetic.labdraws import lab_draws, lab_specimens
from clinlib.data.sources.synthetic.labvalues import group_values
from clinlib.data.sources.synthetic.numeric import choose, providers, to_minute, uniform


def _item_table(attr: str) -> np.ndarray:
    """Per-item constant from synthetic_vocab.LAB_ITEMS (None -> NaN), in ITEM_KEYS order."""
    values = [getattr(sv.LAB_ITEMS[k], attr) for k in ITEM_KEYS]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


ITEM_IDS = np.array([sv.LAB_ITEMS[k].itemid for k in ITEM_KEYS], dtype=np.int32)
ITEM_DECIMALS = _item_table("decimals").astype(np.int64)
ITEM_UNITS: tuple[str | None, ...] = tuple(sv.LAB_ITEMS[k].unit for k in ITEM_KEYS)


def _ref_table(attr: str, by_sex: int) -> np.ndarray:
    """Reference limits per item for one sex (0 = male, 1 = female)."""
    table = _item_table(attr)
    ranges = sv.SEX_SPECIFIC_REF if by_sex else sv.MALE_REF
    for key, (lo, hi) in ranges.items():
        table[ITEM_CODE[key]] = lo if attr == "ref_low" else hi
    return table


# Row index = item code * 2 + female.
REF_LOW = np.column_stack([_ref_table("ref_low", 0), _ref_table("ref_low", 1)]).ravel()
REF_HIGH = np.column_stack([_ref_table("ref_high", 0), _ref_table("ref_high", 1)]).ravel()


def format_fixed(
    values: np.ndarray,
    decimals,
    override: np.ndarray | None = None,
    override_texts: tuple[str, ...] = (),
) -> pa.Array:
    """Format numbers with a fixed number of decimals (0-3), as a lab reports them.

    Each distinct (value, decimals) is formatted once and the result gathered, so 10M values
    cost one pass.

    Args:
        values: numbers (NaN -> NULL).
        decimals: decimals per value (0..3), or one int for all.
        override: optional per-value index into ``override_texts`` (-1 = format the number).
        override_texts: replacement texts such as ``"___"``.

    Returns:
        A string array: 1.3 with 1 decimal -> "1.3", 140 with 0 -> "140", 0.5 with 2 -> "0.50"
        (halves round to even, as ``numpy.rint``).
    """
    values = np.asarray(values, dtype=float)
    decimals = np.broadcast_to(np.asarray(decimals, dtype=np.int64), values.shape)
    if values.size and not 0 <= decimals.min() <= decimals.max() <= 3:
        raise SyntheticConfigError("format_fixed supports 0 to 3 decimals")
    null = np.isnan(values)
    scaled = np.rint(np.where(null, 0.0, values) * 10.0**decimals).astype(np.int64)
    key = scaled * 4 + decimals  # decimals 0..3 are recovered as key % 4
    if key.size == 0:
        return pa.array([], pa.string())
    # Override text i gets key floor + i, below every numeric key.
    n_over = len(override_texts)
    floor = int(key.min()) - n_over
    if override is not None and n_over:
        key = np.where(override >= 0, floor + np.asarray(override, np.int64), key)
    lo = int(key.min())
    width = int(key.max()) - lo + 1
    if width <= 4 * key.size + 1_000_000:  # dense lookup: O(n), no sort
        present = np.zeros(width, dtype=bool)
        present[key - lo] = True
        uniq = np.flatnonzero(present) + lo
        inverse = (np.cumsum(present) - 1)[key - lo]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
    texts = []
    for k in uniq.tolist():
        if k < floor + n_over:
            texts.append(override_texts[k - floor])
            continue
        dec = k % 4
        number = (k - dec) // 4
        whole, frac = divmod(abs(number), 10**dec)
        sign = "-" if number < 0 else ""
        texts.append(f"{sign}{whole}.{frac:0{dec}d}" if dec else f"{sign}{whole}")
    return str_array(texts).take(pa.array(inverse.astype(np.int32), mask=null))


def labevents_rows(rng, srng, p, a, plan, ids: ChunkIds) -> tuple[pa.Table, SimpleNamespace]:
    """labevents rows of a chunk plus per-admission lab extremes used for coding (``srng``:
    the shape stream, for results reported only in ``comments``)."""
    d = lab_draws(rng, p, a, plan)
    spec_draw, spec_group = _ordered_specimens(rng, p, a, plan, d, ids)
    n_rep, r_val, r_item = _results(rng, p, a, plan, d, spec_draw, spec_group, ids)
    s = _specimen_attributes(rng, d, spec_draw, spec_group)
    s.n_rep = n_rep
    ext = _admission_extremes(a, s, r_val, r_item)
    rep_pat = np.repeat(s.pat, n_rep)
    ext.states = hz.lab_states(
        a.n,
        rep_pat,
        np.repeat(s.adm, n_rep),
        np.repeat(s.time, n_rep),
        r_val,
        r_item,
        REF_HIGH[r_item.astype(np.int64) * 2 + p.female[rep_pat].astype(np.int64)],
        {k: ITEM_CODE[k] for k in hz.ORDER_P},
    )
    del rep_pat
    # Arrow columns are built one at a time and each numpy input dropped after its last use,
    # which keeps the peak of a 10M-row chunk near the size of the finished table.
    col = _id_columns(ids, s, r_item)
    col.update(_value_columns(rng, srng, p, s, r_val, r_item))
    table = pa.Table.from_arrays(list(col.values()), schema=arrow_schema("labevents"))
    assert table.column_names == list(col)
    return table, ext


def _ordered_specimens(rng, p, a, plan, d: SimpleNamespace, ids: ChunkIds) -> tuple:
    """(draw index, group) per specimen, in id order: patient, time, group."""
    spec_draw, spec_group = lab_specimens(rng, p, a, plan, d)
    skey = (d.pat[spec_draw] << 42) | ((d.t[spec_draw] - T_BASE) << 4) | spec_group
    order = np.argsort(skey, kind="stable")
    spec_draw, spec_group = spec_draw[order], spec_group[order]
    ids.check("specimen", ids.specimen, spec_draw.size, SPECIMENS_PER_PATIENT)
    return spec_draw, spec_group


def _results(rng, p, a, plan, d, spec_draw, spec_group, ids: ChunkIds) -> tuple:
    """Reported results per specimen, value and item code per row.

    Values are made one group at a time. Rows follow specimen order, then the group's item
    order: the natural key (patient, charttime, specimen, item) without sorting 10M rows.
    """
    per_group = []
    n_rep = np.zeros(spec_draw.size, dtype=np.int64)
    for g in range(len(GROUPS)):
        si = np.flatnonzero(spec_group == g)
        if si.size:
            values = group_values(rng, g, p, a, plan, d, spec_draw[si])
            matrix = np.column_stack([values[k] for k in GROUP_ITEMS[g]])
            reported = ~np.isnan(matrix)
            n_rep[si] = reported.sum(axis=1)
            per_group.append((g, si, matrix, reported))
    R = int(n_rep.sum())
    ids.check("labevent", ids.labevent, R, LABEVENTS_PER_PATIENT)
    row_start = np.cumsum(n_rep) - n_rep
    r_val = np.empty(R)
    r_item = np.empty(R, dtype=np.int16)
    for g, si, matrix, reported in per_group:
        pos = (row_start[si][:, None] + np.cumsum(reported, axis=1) - 1)[reported]
        r_val[pos] = matrix[reported]
        codes = np.array([ITEM_CODE[k] for k in GROUP_ITEMS[g]], dtype=np.int16)
        r_item[pos] = np.broadcast_to(codes, matrix.shape)[reported]
    return n_rep, r_val, r_item


def _specimen_attributes(rng, d: SimpleNamespace, spec_draw, spec_group) -> SimpleNamespace:
    """Specimen-level attributes (repeated onto their rows later): patient, time, hadm_id,
    priority, storetime after a group-specific lag, ordering provider."""
    S = spec_draw.size
    s = SimpleNamespace(pat=d.pat[spec_draw], time=d.t[spec_draw], kind=d.kind[spec_draw])
    s.adm = d.hadm_adm[spec_draw]
    # ~1.5% of inpatient specimens lack hadm_id although drawn inside the stay (MIMIC quirk).
    s.hadm = np.where(rng.random(S) < 0.015, -1, s.adm)
    s.priority = np.where(
        np.isin(s.kind, (K_DAY0, K_ED, K_SERIAL)), np.where(rng.random(S) < 0.7, 1, 0), 0
    )
    s.priority_null = rng.random(S) < 0.08
    lag_min = np.select(
        [spec_group == G_A1C, spec_group == G_LIPID, spec_group == G_CBC],
        [uniform(rng, 900, 2800, S), uniform(rng, 120, 480, S), uniform(rng, 20, 60, S)],
        uniform(rng, 35, 120, S),
    )
    s.store = to_minute(s.time + np.rint(lag_min * 60).astype(np.int64))
    s.provider = rng.integers(0, providers().size, S)
    s.provider_null = ~((s.kind == K_OUTPT) | (rng.random(S) < 0.3))
    s.n = S
    return s


def _admission_extremes(a, s: SimpleNamespace, r_val, r_item) -> SimpleNamespace:
    """Per-admission extremes of inpatient results (lab-driven diagnoses and orders)."""
    ext = SimpleNamespace()
    r_adm = np.repeat(s.adm, s.n_rep)
    for name, key, fn, init in (
        ("k_max", "potassium", np.maximum, -np.inf),
        ("k_min", "potassium", np.minimum, np.inf),
        ("na_min", "sodium", np.minimum, np.inf),
        ("hco3_min", "bicarbonate", np.minimum, np.inf),
        ("hgb_min", "hemoglobin", np.minimum, np.inf),
    ):
        arr = np.full(a.n, init)
        sel = np.flatnonzero(r_item == ITEM_CODE[key])
        sel = sel[r_adm[sel] >= 0]
        fn.at(arr, r_adm[sel], r_val[sel])
        setattr(ext, name, arr)
    # Time of the first potassium below 3.4 in each stay (potassium replacement order).
    low_k = np.flatnonzero((r_item == ITEM_CODE["potassium"]) & (r_val < 3.4))
    low_k = low_k[r_adm[low_k] >= 0]
    ext.low_k_time = np.full(a.n, np.iinfo(np.int64).max)
    np.minimum.at(ext.low_k_time, r_adm[low_k], np.repeat(s.time, s.n_rep)[low_k])
    return ext


def _id_columns(ids: ChunkIds, s: SimpleNamespace, r_item) -> dict[str, pa.Array]:
    """labevent_id .. storetime: ids, item, provider and times."""

    def rows(x: np.ndarray) -> np.ndarray:
        return np.repeat(x, s.n_rep)

    col: dict[str, pa.Array] = {}
    col["labevent_id"] = int_array(ids.labevent + np.arange(r_item.size), pa.int32())
    col["subject_id"] = int_array(ids.subject + rows(s.pat), pa.int32())
    hadm_adm = rows(s.hadm)
    col["hadm_id"] = int_array(ids.hadm + np.maximum(hadm_adm, 0), pa.int32(), hadm_adm < 0)
    del hadm_adm
    col["specimen_id"] = int_array(rows(ids.specimen + np.arange(s.n)), pa.int32())
    col["itemid"] = int_array(ITEM_IDS[r_item], pa.int32())
    col["order_provider_id"] = take_strings(providers(), rows(s.provider), rows(s.provider_null))
    col["charttime"] = ts_array(rows(s.time))
    col["storetime"] = ts_array(rows(s.store))
    return col


def _value_columns(rng, srng, p, s: SimpleNamespace, r_val, r_item) -> dict[str, pa.Array]:
    """value .. comments: formatted values with MIMIC's quirks, ranges, flag, priority."""
    R = r_item.size
    col: dict[str, pa.Array] = {}
    ref_idx = r_item.astype(np.int64) * 2 + p.female[np.repeat(s.pat, s.n_rep)]
    ref_lo, ref_hi = REF_LOW[ref_idx], REF_HIGH[ref_idx]
    del ref_idx
    # Troponin T below the assay limit is reported as "<0.01" with no valuenum (as in MIMIC).
    below_detect = (r_item == ITEM_CODE["troponin_t"]) & (r_val < 0.01)
    # De-identification mask '___' in value while valuenum stays valid (MIMIC quirk).
    masked = rng.random(R) < 0.003
    override = np.where(below_detect, 1, np.where(masked, 0, -1))
    del masked
    value = format_fixed(r_val, ITEM_DECIMALS[r_item], override, ("___", "<0.01"))
    # Result only in comments: value, valuenum and flag NULL (synthetic_shapes).
    in_comment = shp.comment_only(srng, R) & ~below_detect
    comment_text = pc.binary_join_element_wise(shp.COMMENT_ONLY[0], value, shp.COMMENT_ONLY[1], "")
    col["value"] = pc.if_else(pa.array(in_comment), pa.nulls(R, pa.string()), value)
    del override
    valuenum = np.where(below_detect | in_comment, np.nan, r_val)
    del below_detect
    col["valuenum"] = pa.array(valuenum, type=pa.float64(), from_pandas=True)
    unit_null = np.array([u is None for u in ITEM_UNITS])[r_item]
    col["valueuom"] = take_strings([u or "" for u in ITEM_UNITS], r_item, unit_null)
    del unit_null
    col["ref_range_lower"] = pa.array(ref_lo, type=pa.float64(), from_pandas=True)
    col["ref_range_upper"] = pa.array(ref_hi, type=pa.float64(), from_pandas=True)
    with np.errstate(invalid="ignore"):
        normal = ~((valuenum < ref_lo) | (valuenum > ref_hi))
    del valuenum, ref_lo, ref_hi
    col["flag"] = take_strings(["abnormal"], np.zeros(R, np.int32), normal)
    del normal
    col["priority"] = take_strings(
        PRIORITIES, np.repeat(s.priority, s.n_rep), np.repeat(s.priority_null, s.n_rep)
    )
    has_comment = rng.random(R) < 0.005
    comment_idx = np.zeros(R, dtype=np.int64)
    comment_idx[has_comment] = choose(rng, [1] * len(LAB_COMMENTS), int(has_comment.sum()))
    comments = take_strings(LAB_COMMENTS, comment_idx, ~has_comment)
    col["comments"] = pc.if_else(pa.array(in_comment), comment_text, comments)
    return col
