"""A straightforward pandas implementation of the cohort rules and event extraction.

It exists for two reasons: as an independent second implementation that tests compare the
DuckDB path against (same cohort, same event ids), and as the baseline of
``make bench-cohort`` (DuckDB vs pandas wall time and peak RSS). It reads each hosp table
from disk with only the columns it needs; it does hold those columns in memory, which is
exactly the cost the benchmark measures. Rules: see :mod:`clinlib.data.cohort`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from clinlib.data import plausibility_pandas as screen
from clinlib.data.cohort import (
    ATTRITION_STEPS,
    MIN_ADMISSION_GAP_DAYS,
    MIN_INDEX_CODES,
    MIN_PANEL_LABS,
    MIN_PRESCRIPTIONS,
    TERTILES,
    CohortResult,
    stratum_targets,
)
from clinlib.data.events import normalize_events
from clinlib.data.schema import HOSP_TABLES, REQUIRED, RX_DILUENT_TYPES
from clinlib.data.vocab import INDEX_DISEASE_ICD, INDEX_DISEASES, LAB_PANEL, PANEL_ITEMIDS


def _table_path(hosp_dir: Path, table: str) -> Path:
    for suffix in (".parquet", ".csv.gz", ".csv"):
        path = Path(hosp_dir) / f"{table}{suffix}"
        if path.exists():
            return path
    raise FileNotFoundError(f"no {table}.parquet/.csv.gz/.csv in {hosp_dir}")


def read_table(hosp_dir: Path, table: str, columns: list[str]) -> pd.DataFrame:
    """Read ``columns`` of one hosp table (parquet or CSV) with MIMIC's types."""
    path = _table_path(hosp_dir, table)
    types = HOSP_TABLES[table]
    if path.suffix == ".parquet":
        df = pd.read_parquet(path, columns=columns)
    else:
        dtypes, dates = {}, []
        for col in columns:
            t = types[col]
            if t in ("TIMESTAMP", "DATE"):
                dates.append(col)
            elif t in ("INTEGER", "SMALLINT"):
                dtypes[col] = "Int64"
            elif t in ("DOUBLE", "REAL"):
                dtypes[col] = "float64"
            else:
                dtypes[col] = "string"
        df = pd.read_csv(path, usecols=columns, dtype=dtypes, keep_default_na=False, na_values=[""])
        for col in dates:
            df[col] = pd.to_datetime(df[col])
    return df


def _is_order(drug_type: pd.Series) -> pd.Series:
    """A prescriptions row that is a medication order, not a BASE diluent (NULL = MAIN)."""
    return ~drug_type.astype("string").str.strip().str.upper().isin(RX_DILUENT_TYPES)


def _rx_ids(rx: pd.DataFrame) -> pd.Series:
    """RX-<pharmacy_id>[-<k>]: k ranks an id's order rows by content (clinlib.data.events)."""
    ranked = rx.assign(
        _not_main=rx["drug_type"].astype("string").str.strip().str.upper().fillna("MAIN") != "MAIN"
    ).sort_values(
        [
            "pharmacy_id",
            "_not_main",
            "drug",
            "dose_val_rx",
            "dose_unit_rx",
            "route",
            "starttime",
            "stoptime",
            "subject_id",
            "hadm_id",
        ],
        na_position="last",
        kind="stable",
    )
    k = ranked.groupby("pharmacy_id").cumcount() + 1
    pid = "RX-" + ranked["pharmacy_id"].astype("int64").astype(str)
    return (pid + k.map(lambda i: "" if i == 1 else f"-{i}")).reindex(rx.index)


def _index_code_counts(dx: pd.DataFrame) -> pd.DataFrame:
    code = dx["icd_code"].astype("string").str.strip().str.upper()
    parts = []
    for disease, by_version in INDEX_DISEASE_ICD.items():
        hit = pd.Series(False, index=dx.index)
        for version, prefixes in by_version.items():
            hit |= (dx["icd_version"] == version) & code.str.startswith(prefixes).fillna(False)
        sub = dx.loc[hit, ["subject_id", "hadm_id", "seq_num"]].drop_duplicates()
        parts.append(sub.groupby("subject_id").size().rename(disease))
    return pd.concat(parts, axis=1).fillna(0).astype(int)


def _ntile3(n: int) -> np.ndarray:
    sizes = [n // 3 + (1 if i < n % 3 else 0) for i in range(3)]
    return np.repeat(np.arange(3), sizes)


COHORT_COLUMNS: list[str] = [
    "subject_id",
    "disease",
    "n_index_codes",
    "n_admissions",
    "n_labs",
    "n_meds",
    "n_dx",
    "n_px",
    "span_days",
    "n_events_raw",
    "complexity",
    "tertile",
]


def select_cohort_pandas(hosp_dir: Path, per_disease: int = 100, seed: int = 0) -> CohortResult:
    """The cohort rules of :func:`clinlib.data.cohort.select_cohort`, in pandas."""
    stats = _subject_stats(hosp_dir)
    funnel, eligible = _funnel(stats)
    e = _complexity_tertiles(stats[eligible].reset_index(), seed)
    picked, shortfalls = _sample(e, per_disease)
    keep = COHORT_COLUMNS
    cohort = pd.concat(picked)[keep].sort_values("subject_id").reset_index(drop=True)
    attrition = pd.DataFrame(
        {
            "step_idx": range(len(ATTRITION_STEPS)),
            "step": ATTRITION_STEPS,
            "n_patients": funnel + [len(cohort)],
        }
    )
    return CohortResult(cohort, attrition, e[keep].reset_index(drop=True), shortfalls)


def _subject_stats(hosp_dir: Path) -> pd.DataFrame:
    """Per patient: index-code counts and primary disease, admissions and their span, panel
    labs with a value, medication orders, diagnosis and procedure rows."""
    patients = read_table(hosp_dir, "patients", ["subject_id"])
    adm = screened_admissions(hosp_dir)[1]
    labs = read_table(hosp_dir, "labevents", ["subject_id", "itemid", "valuenum"])
    rx = read_table(hosp_dir, "prescriptions", ["subject_id", "drug_type"])
    rx = rx[_is_order(rx["drug_type"])]
    dx = read_table(
        hosp_dir, "diagnoses_icd", ["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"]
    )
    px = read_table(hosp_dir, "procedures_icd", ["subject_id"])

    codes = _index_code_counts(dx)
    order = list(INDEX_DISEASES)
    codes = codes.reindex(columns=order, fill_value=0)
    stats = pd.DataFrame(index=pd.Index(patients["subject_id"].astype("int64"), name="subject_id"))
    stats["max_index_codes"] = codes.max(axis=1).reindex(stats.index).fillna(0).astype(int)
    # Primary disease: most code rows among diseases with >= MIN_INDEX_CODES; ties by order.
    masked = codes.where(codes >= MIN_INDEX_CODES, -1)
    stats["disease"] = masked.idxmax(axis=1).where(masked.max(axis=1) >= MIN_INDEX_CODES)
    stats["n_index_codes"] = masked.max(axis=1).clip(lower=0)
    ag = adm.groupby("subject_id").agg(
        n_admissions=("admittime", "size"),
        first_admit=("admittime", "min"),
        last_admit=("admittime", "max"),
        last_disch=("dischtime", "max"),
    )
    stats = stats.join(ag)
    panel_labs = labs[labs["itemid"].isin(list(PANEL_ITEMIDS)) & labs["valuenum"].notna()]
    stats["n_labs"] = panel_labs.groupby("subject_id").size()
    stats["n_meds"] = rx.groupby("subject_id").size()
    stats["n_dx"] = dx.groupby("subject_id").size()
    stats["n_px"] = px.groupby("subject_id").size()
    for col in ("n_index_codes", "n_admissions", "n_labs", "n_meds", "n_dx", "n_px"):
        stats[col] = stats[col].fillna(0).astype("int64")
    return stats


def _funnel(stats: pd.DataFrame) -> tuple[list[int], pd.Series]:
    """Patients left after each cohort rule, and who passes them all."""
    gap = (stats["last_admit"] - stats["first_admit"]).dt.total_seconds()
    r2 = stats["max_index_codes"] >= MIN_INDEX_CODES
    r3 = r2 & (gap > MIN_ADMISSION_GAP_DAYS * 86400)
    r4 = r3 & (stats["n_labs"] >= MIN_PANEL_LABS)
    r5 = r4 & (stats["n_meds"] >= MIN_PRESCRIPTIONS)
    funnel = [
        len(stats),
        int((stats["max_index_codes"] >= 1).sum()),
        int(r2.sum()),
        int(r3.sum()),
        int(r4.sum()),
        int(r5.sum()),
    ]
    return funnel, r5


def _complexity_tertiles(e: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Complexity (mean within-disease rank of four size measures), its tertile within the
    disease, and the seeded sample key."""
    e["span_days"] = (e["last_disch"] - e["first_admit"]).dt.total_seconds() / 86400.0
    e["n_events_raw"] = e["n_labs"] + e["n_meds"] + e["n_dx"] + e["n_px"] + 2 * e["n_admissions"]
    ranks = [
        e.groupby("disease")[c].transform(
            lambda s: (s.rank(method="min") - 1) / max(len(s) - 1, 1) if len(s) > 1 else s * 0.0
        )
        for c in ("n_events_raw", "n_admissions", "span_days", "n_meds")
    ]
    e["complexity"] = sum(ranks) / 4.0
    e = e.sort_values(["disease", "complexity", "subject_id"], kind="stable")
    e["tertile"] = ""
    for _disease, idx in e.groupby("disease", sort=False).groups.items():
        e.loc[idx, "tertile"] = np.array(TERTILES)[_ntile3(len(idx))]
    e["sample_key"] = [hashlib.md5(f"{seed}:{sid}".encode()).hexdigest() for sid in e["subject_id"]]
    return e


def _sample(e: pd.DataFrame, per_disease: int) -> tuple[list[pd.DataFrame], list[str]]:
    """The first patients by sample key of every (disease, tertile) stratum, up to its target."""
    targets = stratum_targets(per_disease)
    picked, shortfalls = [], []
    for disease in INDEX_DISEASES:
        for tertile in TERTILES:
            pool = e[(e["disease"] == disease) & (e["tertile"] == tertile)]
            pool = pool.sort_values("sample_key", kind="stable")
            if len(pool) < targets[tertile]:
                shortfalls.append(
                    f"{disease}/{tertile}: {len(pool)} eligible < target "
                    f"{targets[tertile]}; took all"
                )
            picked.append(pool.head(targets[tertile]))
    return picked, shortfalls


def _fmt(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def extract_events_pandas(hosp_dir: Path, subject_ids) -> pd.DataFrame:
    """The event extraction of :func:`clinlib.data.events.extract_events`, in pandas."""
    subjects = set(int(s) for s in subject_ids)
    adm, visits = _visits(hosp_dir, subjects)
    raw_adm = read_table(hosp_dir, "admissions", ["subject_id", "hadm_id"])
    lab_ev = _lab_events(hosp_dir, subjects, visits, raw_adm, adm)
    rx_ev = _rx_events(hosp_dir, subjects, visits, raw_adm, adm)
    dx_ev = _coded_events(hosp_dir, subjects, visits, _DIAGNOSES)
    px_ev = _coded_events(hosp_dir, subjects, visits, _PROCEDURES)
    adm_ev, dis_ev = _admission_events(adm)
    frames = [f for f in (adm_ev, dis_ev, lab_ev, rx_ev, dx_ev, px_ev) if len(f)]
    return normalize_events(pd.concat(frames, ignore_index=True))


def screened_admissions(hosp_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every admission with its plausibility ``rule``, the plausible ones)."""
    cols = [
        "subject_id",
        "hadm_id",
        "admittime",
        "dischtime",
        "admission_type",
        "discharge_location",
    ]
    adm = read_table(hosp_dir, "admissions", cols)
    pcols = [
        c
        for c in ("subject_id", "anchor_age", "anchor_year", "dod")
        if c in _columns(hosp_dir, "patients")
    ]
    ruled = screen.screen_admissions(adm, read_table(hosp_dir, "patients", pcols))
    return ruled, ruled[ruled["rule"].isna()].drop(columns="rule")


def _columns(hosp_dir: Path, table: str) -> list[str]:
    path = _table_path(hosp_dir, table)
    if path.suffix == ".parquet":
        return list(pq.read_schema(path).names)
    return list(pd.read_csv(path, nrows=0).columns)


def _visits(hosp_dir: Path, subjects: set[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The subjects' plausible admissions with visit_idx, and their visit keys and spans."""
    _, adm = screened_admissions(hosp_dir)
    adm = adm[adm["subject_id"].isin(subjects)].sort_values(["subject_id", "admittime", "hadm_id"])
    adm["visit_idx"] = adm.groupby("subject_id").cumcount()
    visits = adm[["subject_id", "hadm_id", "visit_idx", "admittime", "dischtime"]]
    return adm, visits


def _attach(df: pd.DataFrame, visits: pd.DataFrame, time_col: str, key: str) -> pd.DataFrame:
    """Rows joined to their visit: by hadm_id, else the earliest visit whose
    [admittime - 1 day, dischtime] holds ``time_col``."""
    direct = df[df["hadm_id"].notna()].merge(visits, on=["subject_id", "hadm_id"])
    loose = df[df["hadm_id"].isna()].drop(columns="hadm_id").merge(visits, on="subject_id")
    loose = loose[
        (loose[time_col] >= loose["admittime"] - pd.Timedelta(days=1))
        & (loose[time_col] <= loose["dischtime"])
    ]
    loose = loose.sort_values([key, "admittime"]).drop_duplicates(key)
    return pd.concat([direct, loose], ignore_index=True)


def _lab_events(
    hosp_dir: Path,
    subjects: set[int],
    visits: pd.DataFrame,
    raw_adm: pd.DataFrame,
    adm: pd.DataFrame,
) -> pd.DataFrame:
    """Plausible panel labs with a value, in the panel's unit (a known alternative converted)
    or none, one per (stay, lab, day): abnormal first, then earliest."""
    panel = {lab.key: lab for lab in LAB_PANEL}
    labs = read_table(hosp_dir, "labevents", list(REQUIRED["labevents"]))
    labs = labs[labs["subject_id"].isin(subjects) & labs["itemid"].isin(list(PANEL_ITEMIDS))]
    labs = labs[labs["valuenum"].notna()].copy()
    labs["lab_key"] = labs["itemid"].map(lambda i: PANEL_ITEMIDS[int(i)][0])
    labs["item_rank"] = labs["itemid"].map(lambda i: PANEL_ITEMIDS[int(i)][1])
    labs = screen.screen_labs(labs, raw_adm, adm)
    labs = labs[labs["rule"].isna()].drop(columns="rule")
    labs = _attach(labs, visits, "charttime", "labevent_id")
    labs["day"] = labs["charttime"].dt.normalize()
    labs["not_abnormal"] = (labs["flag"] != "abnormal").fillna(True)
    labs = labs.sort_values(["item_rank", "not_abnormal", "charttime", "labevent_id"])
    labs = labs.drop_duplicates(["subject_id", "hadm_id", "lab_key", "day"])
    raw = labs["value"].astype("string").str.strip()
    formatted = [
        _fmt(v, panel[k].decimals) for v, k in zip(labs["valuenum"], labs["lab_key"], strict=True)
    ]
    use_num = raw.isna() | raw.isin(["", "___"])
    value_text = np.where(use_num.to_numpy(), formatted, raw.fillna("").to_numpy())
    unit = labs["valueuom"].astype("string").str.strip().replace("", pd.NA)
    return pd.DataFrame(
        {
            "event_id": "LAB-" + labs["labevent_id"].astype("int64").astype(str),
            "subject_id": labs["subject_id"],
            "hadm_id": labs["hadm_id"],
            "visit_idx": labs["visit_idx"],
            "time": labs["charttime"],
            "kind": "lab",
            "code": labs["itemid"].astype("int64").astype(str),
            "code_system": "itemid",
            "label": labs["lab_key"].map(lambda k: panel[k].label),
            "value": labs["valuenum"],
            "value_text": value_text,
            "unit": unit,
            "ref_low": labs["ref_range_lower"],
            "ref_high": labs["ref_range_upper"],
            "flag": labs["flag"].where(labs["flag"] == "abnormal"),
            "route": pd.NA,
            "end_time": pd.NaT,
            "source": "labevents",
        }
    )


_RX_COLUMNS: list[str] = [
    "subject_id",
    "hadm_id",
    "pharmacy_id",
    "drug_type",
    "starttime",
    "stoptime",
    "drug",
    "dose_val_rx",
    "dose_unit_rx",
    "route",
]


def _rx_events(
    hosp_dir: Path,
    subjects: set[int],
    visits: pd.DataFrame,
    raw_adm: pd.DataFrame,
    adm: pd.DataFrame,
) -> pd.DataFrame:
    """Plausible medication orders (not BASE diluents) with their RX-<pharmacy_id>[-<k>] ids;
    a dose of 0 is no dose, a name's inner spaces are collapsed (clinlib.data.events)."""
    strength = ["prod_strength"] if "prod_strength" in _columns(hosp_dir, "prescriptions") else []
    rx = read_table(hosp_dir, "prescriptions", _RX_COLUMNS + strength)
    if not strength:
        rx["prod_strength"] = None
    rx = rx[rx["subject_id"].isin(subjects) & rx["pharmacy_id"].notna()]
    rx = rx[_is_order(rx["drug_type"])].copy()
    rx["rx_id"] = _rx_ids(rx)
    rx = screen.screen_prescriptions(rx, raw_adm, adm)
    rx = rx[rx["rule"].isna()].drop(columns="rule")
    rx = _attach(rx, visits, "starttime", "rx_id")
    zero = screen.zero_dose(rx["dose_num"])
    return pd.DataFrame(
        {
            "event_id": rx["rx_id"],
            "subject_id": rx["subject_id"],
            "hadm_id": rx["hadm_id"],
            "visit_idx": rx["visit_idx"],
            "time": rx["starttime"].fillna(rx["admittime"]),
            "kind": "medication",
            "code": rx["drug"],
            "code_system": "drug",
            "label": screen.collapse_spaces(rx["drug"]),
            "value": rx["dose_num"].astype("float64").where(~zero),
            "value_text": rx["dose_val_rx"].astype(object).where(~zero, None),
            "unit": rx["dose_unit_rx"].astype(object).where(~zero, None),
            "ref_low": np.nan,
            "ref_high": np.nan,
            "flag": pd.NA,
            "route": rx["route"],
            "end_time": rx["stoptime"],
            "source": "prescriptions",
        }
    )


# How each coded table becomes events: (table, title dictionary, event time, event_id
# prefix, code systems for ICD-9 / ICD-10, kind, extra columns read).
_DIAGNOSES = (
    "diagnoses_icd",
    "d_icd_diagnoses",
    lambda d: d["dischtime"],
    "DX-",
    ("ICD9-CM", "ICD10-CM"),
    "diagnosis",
    [],
)
_PROCEDURES = (
    "procedures_icd",
    "d_icd_procedures",
    lambda d: pd.to_datetime(d["chartdate"]),
    "PX-",
    ("ICD9-PCS", "ICD10-PCS"),
    "procedure",
    ["chartdate"],
)


def _coded_events(
    hosp_dir: Path, subjects: set[int], visits: pd.DataFrame, spec: tuple
) -> pd.DataFrame:
    """Diagnosis or procedure rows of the subjects' stays, titled from the ICD dictionary."""
    table, dict_table, time_of, prefix, systems, kind, extra_cols = spec
    df = read_table(
        hosp_dir,
        table,
        ["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version", *extra_cols],
    )
    df = df[df["subject_id"].isin(subjects)].merge(visits, on=["subject_id", "hadm_id"])
    titles = read_table(hosp_dir, dict_table, ["icd_code", "icd_version", "long_title"])
    df = df.merge(titles, on=["icd_code", "icd_version"], how="left")
    return pd.DataFrame(
        {
            "event_id": prefix
            + df["hadm_id"].astype("int64").astype(str)
            + "-"
            + df["seq_num"].astype("int64").astype(str),
            "subject_id": df["subject_id"],
            "hadm_id": df["hadm_id"],
            "visit_idx": df["visit_idx"],
            "time": time_of(df),
            "kind": kind,
            "code": df["icd_code"].astype("string").str.strip(),
            "code_system": np.where(df["icd_version"] == 9, systems[0], systems[1]),
            "label": df["long_title"],
            "value": np.nan,
            "value_text": pd.NA,
            "unit": pd.NA,
            "ref_low": np.nan,
            "ref_high": np.nan,
            "flag": pd.NA,
            "route": pd.NA,
            "end_time": pd.NaT,
            "source": table,
        }
    )


def _admission_events(adm: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One admission and one discharge event per stay."""
    adm_ev = pd.DataFrame(
        {
            "event_id": "ADM-" + adm["hadm_id"].astype("int64").astype(str),
            "subject_id": adm["subject_id"],
            "hadm_id": adm["hadm_id"],
            "visit_idx": adm["visit_idx"],
            "time": adm["admittime"],
            "kind": "admission",
            "code": adm["admission_type"],
            "code_system": "admission_type",
            "label": "Admission",
            "value": np.nan,
            "value_text": pd.NA,
            "unit": pd.NA,
            "ref_low": np.nan,
            "ref_high": np.nan,
            "flag": pd.NA,
            "route": pd.NA,
            "end_time": adm["dischtime"],
            "source": "admissions",
        }
    )
    dis_ev = adm_ev.assign(
        event_id="DIS-" + adm["hadm_id"].astype("int64").astype(str),
        time=adm["dischtime"],
        kind="discharge",
        code=adm["discharge_location"],
        code_system="discharge_location",
        label="Discharge",
        end_time=pd.NaT,
    )
    return adm_ev, dis_ev
