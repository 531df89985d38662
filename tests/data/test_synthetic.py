"""Tests for the SYNTHETIC MIMIC-IV-shaped hosp generator (clinlib.data.sources.synthetic).

Every expectation is computed here independently of the generator: the cohort rules and the
primary-disease assignment in pandas, the CKD-EPI 2021 equation in its forward form, the
reference-range flags and the lab's number formatting in plain Python.
"""

from __future__ import annotations

import gzip
import re

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from clinlib.core.config import PROFILES, Profile
from clinlib.data.schema import HOSP_TABLES
from clinlib.data.sources import synthetic as syn
from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.synthetic import generate as syn_generate
from clinlib.data.sources.synthetic.arrow import ChunkIds
from clinlib.data.sources.synthetic.labvalues import creatinine_from_egfr
from clinlib.data.sources.synthetic.population import draw_population
from clinlib.data.vocab import INDEX_DISEASE_ICD, INDEX_DISEASES, LAB_BY_KEY, PANEL_ITEMIDS

QUICK = PROFILES["quick"]
DUCK_TYPES = {
    "INTEGER": "INTEGER",
    "SMALLINT": "SMALLINT",
    "VARCHAR": "VARCHAR",
    "DOUBLE": "DOUBLE",
    "REAL": "FLOAT",
    "TIMESTAMP": "TIMESTAMP",
    "DATE": "DATE",
}
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def quick_dir(tmp_path_factory):
    """The quick-profile dataset (600 patients, seed 0) in PhysioNet's csv.gz layout."""
    out = tmp_path_factory.mktemp("quick")
    syn.generate_hosp(out, n_patients=QUICK.n_patients, seed=QUICK.seed)
    return out


def _read_csv(path, **kw) -> pd.DataFrame:
    # Text columns stay text (codes keep leading zeros); empty fields are NULL.
    return pd.read_csv(path, keep_default_na=False, na_values=[""], **kw)


@pytest.fixture(scope="module")
def quick(quick_dir) -> dict[str, pd.DataFrame]:
    hosp = quick_dir / "hosp"
    text = {"icd_code": str, "value": str, "ndc": str, "gsn": str, "dose_val_rx": str}
    tables = {}
    for name, cols in syn.WRITTEN_TABLES.items():
        dates = [c for c, t in cols.items() if t in ("TIMESTAMP", "DATE")]
        dtypes = {c: t for c, t in text.items() if c in cols}
        tables[name] = _read_csv(hosp / f"{name}.csv.gz", dtype=dtypes, parse_dates=dates)
    tables["manifest"] = pd.read_parquet(quick_dir / syn.MANIFEST_NAME)
    return tables


@pytest.fixture(scope="module")
def small_chunked(tmp_path_factory):
    """120 patients in three chunks of 50 (parquet), to exercise chunking and ids."""
    out = tmp_path_factory.mktemp("small")
    syn.generate_hosp(out, n_patients=120, seed=7, fmt="parquet", chunk_patients=50)
    return out


# --------------------------------------------------------------------------- schema and format


def test_csv_headers_and_types_are_exactly_hosp_tables(quick_dir):
    con = duckdb.connect()
    for name, cols in syn.WRITTEN_TABLES.items():
        path = quick_dir / "hosp" / f"{name}.csv.gz"
        with gzip.open(path, "rt") as handle:
            assert handle.readline().rstrip("\n").split(",") == list(cols)
        # Every value of every typed column converts under MIMIC's CSV dialect.
        as_text = ", ".join(f"'{c}': 'VARCHAR'" for c in cols)
        src = f"read_csv('{path}', header=true, quote='\"', escape='\"', columns={{{as_text}}})"
        bad = [
            f"count(*) FILTER (WHERE {c} IS NOT NULL AND TRY_CAST({c} AS {DUCK_TYPES[t]}) IS NULL)"
            for c, t in cols.items()
            if t != "VARCHAR"
        ]
        n_rows, *n_bad = con.execute(
            f"SELECT count(*), {', '.join(bad) or '0'} FROM {src}"
        ).fetchone()
        assert n_rows > 0, name
        assert sum(n_bad) == 0, (name, n_bad)
        # Timestamps are 'YYYY-MM-DD HH:MM:SS', dates 'YYYY-MM-DD', as in PhysioNet's files.
        for c, t in cols.items():
            if t in ("TIMESTAMP", "DATE"):
                values = [
                    r[0]
                    for r in con.execute(
                        f"SELECT {c} FROM {src} WHERE {c} IS NOT NULL LIMIT 500"
                    ).fetchall()
                ]
                pattern = TS_RE if t == "TIMESTAMP" else DATE_RE
                assert values and all(pattern.match(v) for v in values), (name, c, values[:3])


def test_parquet_schema_is_exactly_hosp_tables(small_chunked):
    con = duckdb.connect()
    for name, cols in syn.WRITTEN_TABLES.items():
        path = small_chunked / "hosp" / f"{name}.parquet"
        assert pq.read_schema(path).names == list(cols)
        described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
        assert [(r[0], r[1]) for r in described] == [(c, DUCK_TYPES[t]) for c, t in cols.items()]


def test_codes_are_text_with_leading_zeros(quick):
    px = quick["procedures_icd"]
    assert px["icd_code"].map(type).eq(str).all()
    # ICD-9 vol. 3 PTCA is "0066", never the number 66.
    assert (px["icd_code"] == "0066").any()
    assert not px["icd_code"].isin(["66", "389"]).any()
    dx = quick["diagnoses_icd"]
    assert set(dx["icd_version"]) == {9, 10}


def test_csv_quoting_round_trips_commas_and_quotes(quick):
    lab = quick["labevents"]
    comments = lab["comments"].dropna()
    # Results reported only in comments (synthetic_shapes) have value and valuenum NULL.
    only = (lab["value"].isna() & lab["valuenum"].isna())[comments.index]
    assert only.any()
    prefix, suffix = shp.COMMENT_ONLY
    assert comments[only].str.match(f"^{re.escape(prefix)}\\S+{re.escape(suffix)}$").all()
    assert comments[~only].isin(syn.LAB_COMMENTS).all()
    assert comments.str.contains('"').any() and comments.str.contains(",").any()
    titles = quick["d_icd_diagnoses"]["long_title"]
    assert titles.str.contains(",").any()
    assert quick["d_labitems"].set_index("itemid").loc[50893, "label"] == "Calcium, Total"


# --------------------------------------------------------------------------- determinism, chunks


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    syn.generate_hosp(a, n_patients=90, seed=3, chunk_patients=40)
    syn.generate_hosp(b, n_patients=90, seed=3, chunk_patients=40)
    syn.generate_hosp(c, n_patients=90, seed=4, chunk_patients=40)
    for name in syn.WRITTEN_TABLES:
        fa = (a / "hosp" / f"{name}.csv.gz").read_bytes()
        assert fa == (b / "hosp" / f"{name}.csv.gz").read_bytes(), name
        # gzip header: mtime 0 and no file name, so the bytes cannot depend on when or where.
        assert fa[4:8] == b"\0\0\0\0" and not fa[3] & 0x08, name
    for name in ("patients", "admissions", "labevents", "prescriptions", "diagnoses_icd"):
        assert (a / "hosp" / f"{name}.csv.gz").read_bytes() != (
            c / "hosp" / f"{name}.csv.gz"
        ).read_bytes(), name


def test_parquet_is_deterministic_too(tmp_path, small_chunked):
    again = tmp_path / "again"
    syn.generate_hosp(again, n_patients=120, seed=7, fmt="parquet", chunk_patients=50)
    for name in syn.WRITTEN_TABLES:
        first = (small_chunked / "hosp" / f"{name}.parquet").read_bytes()
        assert first == (again / "hosp" / f"{name}.parquet").read_bytes(), name


def test_a_chunk_does_not_depend_on_the_chunks_before_it(small_chunked):
    alone = syn.generate_chunk(seed=7, chunk_idx=1, n=50, chunk_patients=50)
    for name in ("patients", "admissions", "labevents", "prescriptions", "diagnoses_icd"):
        full = pq.read_table(small_chunked / "hosp" / f"{name}.parquet").to_pandas()
        part = full[full["subject_id"].between(10_000_050, 10_000_099)].reset_index(drop=True)
        assert part.equals(alone[name].to_pandas()), name


def test_ids_are_unique_and_in_mimic_ranges(small_chunked):
    hosp = small_chunked / "hosp"
    pat = pd.read_parquet(hosp / "patients.parquet")
    adm = pd.read_parquet(hosp / "admissions.parquet")
    lab = pd.read_parquet(
        hosp / "labevents.parquet",
        columns=["labevent_id", "specimen_id", "subject_id", "charttime"],
    )
    rx = pd.read_parquet(
        hosp / "prescriptions.parquet", columns=["pharmacy_id", "poe_id", "drug_type"]
    )
    assert pat["subject_id"].tolist() == list(range(10_000_000, 10_000_120))
    assert adm["hadm_id"].is_unique and adm["hadm_id"].between(20_000_000, 29_999_999).all()
    assert lab["labevent_id"].is_unique
    # One order = one pharmacy_id and poe_id with exactly one MAIN row; its BASE / ADDITIVE
    # rows share both ids (real MIMIC-IV shape, synthetic_shapes), at most 4 rows per id.
    main = rx[rx["drug_type"] == "MAIN"]
    assert main["pharmacy_id"].is_unique and main["poe_id"].is_unique
    assert set(rx["pharmacy_id"]) == set(main["pharmacy_id"])
    per_id = rx.groupby("pharmacy_id")
    assert per_id.size().max() <= 4 and (per_id["poe_id"].nunique() == 1).all()
    # A specimen belongs to one patient and one draw time.
    per_spec = lab.groupby("specimen_id")[["subject_id", "charttime"]].nunique()
    assert (per_spec == 1).all().all()
    # Rows are in natural-key order: patient, then time.
    ordered = lab.sort_values(["subject_id", "charttime"], kind="stable")
    assert ordered.index.equals(lab.index)


# --------------------------------------------------------------------------- integrity


def test_referential_integrity(quick):
    adm = quick["admissions"]
    pairs = set(zip(adm["subject_id"], adm["hadm_id"], strict=True))
    assert set(adm["subject_id"]) <= set(quick["patients"]["subject_id"])
    for name in ("labevents", "prescriptions", "diagnoses_icd", "procedures_icd"):
        t = quick[name].dropna(subset=["hadm_id"])
        linked = set(zip(t["subject_id"], t["hadm_id"].astype(int), strict=True))
        assert linked <= pairs, name
    for table, titles in (
        ("diagnoses_icd", "d_icd_diagnoses"),
        ("procedures_icd", "d_icd_procedures"),
    ):
        emitted = set(zip(quick[table]["icd_code"], quick[table]["icd_version"], strict=True))
        known = quick[titles]
        known = set(zip(known["icd_code"], known["icd_version"], strict=True))
        assert emitted <= known, emitted - known
        assert quick[titles]["long_title"].str.len().gt(3).all()
    assert set(quick["labevents"]["itemid"]) <= set(quick["d_labitems"]["itemid"])
    # The panel's 18 labs (both LDL itemids) and the named non-panel labs are all described.
    items = set(quick["d_labitems"]["itemid"])
    assert set(PANEL_ITEMIDS) <= items and {50960, 50970, 50862, 50963, 50813} <= items


def test_index_disease_codes_fall_in_the_vocab_prefixes():
    for disease, keys in {
        "diabetes": [k for k in sv.DX_PAIRS if k.startswith("dm_")],
        "ckd": ["ckd_1", "ckd_2", "ckd_3", "ckd_4", "ckd_5", "esrd", "ckd_unspecified"],
        "cad": ["cad", "angina", "unstable_angina", "old_mi", "nstemi", "stemi_anterior"],
        "hypertension": ["htn", "htn_heart_failure", "htn_ckd", "htn_ckd_esrd"],
    }.items():
        for key in keys:
            code9, code10 = sv.DX_PAIRS[key]
            assert code9.startswith(INDEX_DISEASE_ICD[disease][9]), key
            assert code10.startswith(INDEX_DISEASE_ICD[disease][10]), key
    # Every paired code has its title.
    for code9, code10 in sv.DX_PAIRS.values():
        assert code9 in sv.ICD9_DX_TITLES and code10 in sv.ICD10_DX_TITLES


def test_stays_and_orders_are_coherent(quick):
    adm = quick["admissions"].sort_values(["subject_id", "admittime"])
    los = (adm["dischtime"] - adm["admittime"]).dt.total_seconds() / 86400
    assert los.between(1.0 - 1 / 1440, 10.0).all()
    # Stays of a patient never overlap.
    prev_disch = adm.groupby("subject_id")["dischtime"].shift()
    assert (adm["admittime"] > prev_disch).where(prev_disch.notna(), True).all()
    died = adm["hospital_expire_flag"] == 1
    assert (adm.loc[died, "deathtime"] == adm.loc[died, "dischtime"]).all()
    assert adm.loc[~died, "deathtime"].isna().all()
    assert (adm.loc[died, "discharge_location"] == "DIED").all()
    rx = quick["prescriptions"].merge(adm[["hadm_id", "admittime", "dischtime"]], on="hadm_id")
    assert (rx["starttime"] >= rx["admittime"]).all() and (rx["starttime"] <= rx["dischtime"]).all()
    assert (rx["stoptime"] > rx["starttime"]).all()
    # A few MAIN rows have no dose (real MIMIC-IV shape): dose and unit NULL together.
    no_dose = rx["dose_val_rx"].isna()
    assert 0 < no_dose.mean() < 0.01 and (rx.loc[no_dose, "drug_type"] == "MAIN").all()
    assert rx.loc[no_dose, "dose_unit_rx"].isna().all()
    # plain numbers, ranges, or thousands separators ("25,000", a heparin drip)
    dose_text = r"\d{1,3}(,\d{3})+|\d+(\.\d+)?(-\d+(\.\d+)?)?"
    assert rx["dose_val_rx"].dropna().str.fullmatch(dose_text).all()
    assert (rx["dose_val_rx"].str.contains("-")).any()  # MIMIC-style ranges such as "1-2"
    px = quick["procedures_icd"].merge(adm[["hadm_id", "admittime", "dischtime"]], on="hadm_id")
    assert (px["chartdate"] >= px["admittime"].dt.normalize()).all()
    assert (px["chartdate"] <= px["dischtime"].dt.normalize()).all()
    dx = quick["diagnoses_icd"]
    # seq_num runs 1..n within each stay.
    seq = dx.groupby("hadm_id")["seq_num"].agg(["min", "max", "count"])
    assert (seq["min"] == 1).all() and (seq["max"] == seq["count"]).all()


def test_icd9_before_the_switch_icd10_after(quick):
    dx = quick["diagnoses_icd"].merge(quick["admissions"][["hadm_id", "admittime"]], on="hadm_id")
    assert (dx.groupby("hadm_id")["icd_version"].nunique() == 1).all()
    # Within a patient, ICD-9 stays all precede ICD-10 stays (one cut-over date per patient).
    per = dx.groupby(["subject_id", "icd_version"])["admittime"].agg(["min", "max"]).unstack()
    both = per.dropna()
    assert len(both) > 10
    assert (both[("max", 9)] < both[("min", 10)]).all()


# --------------------------------------------------------------------------- lab values


def test_values_flags_and_reference_ranges(quick):
    lab = quick["labevents"].merge(quick["patients"][["subject_id", "gender"]], on="subject_id")
    numeric = lab["valuenum"].notna()
    # Flag "abnormal" exactly when the value is outside the row's own range.
    outside = (lab["valuenum"] < lab["ref_range_lower"]) | (
        lab["valuenum"] > lab["ref_range_upper"]
    )
    assert ((lab["flag"] == "abnormal") == outside).all()
    assert set(lab["flag"].dropna()) == {"abnormal"}
    # Hemoglobin and hematocrit ranges are sex-specific (reference doc); others from LAB_PANEL.
    for itemid, male, female in ((51222, (13.7, 17.5), (11.2, 15.7)), (51221, (40, 51), (34, 45))):
        rows = lab[lab["itemid"] == itemid]
        for sex, expected in (("M", male), ("F", female)):
            got = rows.loc[rows["gender"] == sex, ["ref_range_lower", "ref_range_upper"]]
            assert len(got) and (got == list(expected)).all().all(), (itemid, sex)
    creat = lab[lab["itemid"] == 50912]
    assert (creat["ref_range_lower"] == LAB_BY_KEY["creatinine"].ref_low).all()
    assert creat["valueuom"].eq("mg/dL").all()
    # value is the lab's text: the number with the item's decimals ('___' masks a few).
    decimals = {i.itemid: i.decimals for i in sv.LAB_ITEMS.values()}
    shown = lab[numeric & (lab["value"] != "___")]
    expected = [
        f"{v:.{decimals[i]}f}" for v, i in zip(shown["valuenum"], shown["itemid"], strict=True)
    ]
    assert (shown["value"] == expected).all()
    masked = lab[lab["value"] == "___"]
    assert len(masked) > 0 and masked["valuenum"].notna().all()
    below = lab[lab["value"] == "<0.01"]
    assert len(below) > 0 and (below["itemid"] == 51003).all() and below["valuenum"].isna().all()


def test_outpatient_draws_have_no_hadm_id(quick):
    lab = quick["labevents"]
    share = lab["hadm_id"].isna().mean()
    assert 0.18 <= share <= 0.35, share
    # Most NULL-hadm draws fall outside every stay; a few are inside one (MIMIC quirk).
    adm = quick["admissions"]
    nulls = lab[lab["hadm_id"].isna()].drop_duplicates("specimen_id")
    m = nulls.merge(adm[["subject_id", "admittime", "dischtime"]], on="subject_id")
    inside = m[(m["charttime"] >= m["admittime"]) & (m["charttime"] <= m["dischtime"])]
    frac_inside = inside["specimen_id"].nunique() / len(nulls)
    assert 0.0 < frac_inside < 0.2, frac_inside


def test_specimen_identities_hold(quick):
    lab = quick["labevents"]
    wide = lab.pivot_table(index="specimen_id", columns="itemid", values="valuenum")
    chem = wide[[50983, 50902, 50882, 50868]].dropna()
    # Anion gap = Na - (Cl + HCO3), as the lab computes it.
    assert len(chem) > 1000
    assert np.allclose(chem[50868], chem[50983] - chem[50902] - chem[50882])
    lipid = wide[[50907, 50904, 51000, 50905]].dropna()
    assert len(lipid) > 50
    # Friedewald: LDL = TC - HDL - TG/5 (integers as reported), only when TG <= 400.
    assert np.allclose(lipid[50905], lipid[50907] - lipid[50904] - np.round(lipid[51000] / 5))
    assert (lipid[51000] <= 400).all()


def _ckd_epi_2021(scr: np.ndarray, female: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Forward CKD-EPI 2021 (Inker et al., NEJM 2021), written independently."""
    k = np.where(female, 0.7, 0.9)
    a = np.where(female, -0.241, -0.302)
    return (
        142
        * np.minimum(scr / k, 1) ** a
        * np.maximum(scr / k, 1) ** -1.2
        * 0.9938**age
        * np.where(female, 1.012, 1.0)
    )


def test_creatinine_inverts_ckd_epi_2021():
    egfr = np.array([120.0, 90, 60, 45, 30, 15, 8, 100, 60, 20])
    female = np.array([0, 0, 0, 1, 1, 1, 0, 1, 0, 1], dtype=bool)
    age = np.array([30.0, 50, 60, 70, 80, 65, 55, 40, 75, 85])
    scr = creatinine_from_egfr(egfr, female, age)
    assert np.allclose(_ckd_epi_2021(scr, female, age), egfr)
    # By hand: 60-year-old man, eGFR 60 -> (Scr/0.9)^-1.2 = 60 / (142 * 0.9938^60) = 0.6136,
    # so Scr = 0.9 * 0.6136^(-1/1.2) = 1.352 mg/dL.
    assert abs(scr[2] - 1.352) < 0.001


# --------------------------------------------------------------------------- trajectories


def _first_start(rx: pd.DataFrame, drug: str) -> pd.Series:
    return rx[rx["drug"] == drug].groupby("subject_id")["starttime"].min().rename("start")


def _before_after(lab, rx, itemid, drug, after_days):
    x = lab.loc[lab["itemid"] == itemid, ["subject_id", "charttime", "valuenum"]]
    x = x.dropna().merge(_first_start(rx, drug), on="subject_id")
    before = x[x["charttime"] < x["start"]].sort_values("charttime").groupby("subject_id")
    after = x[x["charttime"] > x["start"] + pd.Timedelta(days=after_days)].groupby("subject_id")
    return pd.concat(
        [before["valuenum"].last().rename("before"), after["valuenum"].mean().rename("after")],
        axis=1,
    ).dropna()


def test_metformin_lowers_hba1c_after_its_documented_start(quick):
    both = _before_after(
        quick["labevents"], quick["prescriptions"], 50852, "MetFORMIN (Glucophage)", 90
    )
    assert len(both) >= 30
    assert both["after"].mean() < both["before"].mean() - 0.2
    # Started when HbA1c was above ~7 (measured at the starting admission, before the order).
    assert both["before"].median() >= 7.0


def test_statin_lowers_ldl_and_hctz_lowers_sodium(quick):
    lab, rx = quick["labevents"], quick["prescriptions"]
    ldl = _before_after(lab, rx, 50905, "Atorvastatin", 90)
    assert len(ldl) >= 30
    ratio = (ldl["after"] / ldl["before"]).median()
    assert 0.45 < ratio < 0.8, ratio
    na = _before_after(lab, rx, 50983, "Hydrochlorothiazide", 30)
    assert len(na) >= 10 and na["after"].mean() < na["before"].mean() - 1.0


def test_no_medication_effect_before_the_first_order(quick):
    # For patients never given a diabetes drug, HbA1c only drifts up: later values are not
    # systematically lower than earlier ones.
    lab, rx = quick["labevents"], quick["prescriptions"]
    treated = set(
        rx.loc[rx["drug"].isin(["MetFORMIN (Glucophage)", "GlipiZIDE", "Glargine"]), "subject_id"]
    )
    a1c = lab[(lab["itemid"] == 50852) & ~lab["subject_id"].isin(treated)].sort_values("charttime")
    g = a1c.groupby("subject_id")["valuenum"]
    delta = (g.last() - g.first())[g.count() >= 3]
    assert len(delta) >= 10 and delta.mean() > -0.1


def test_ckd_creatinine_rises_over_years(quick):
    lab = quick["labevents"]
    ckd = set(quick["manifest"].loc[quick["manifest"]["has_ckd"], "subject_id"])
    # Results reported only in comments have no valuenum: not part of a numeric trend.
    cr = lab[(lab["itemid"] == 50912) & lab["subject_id"].isin(ckd) & lab["valuenum"].notna()]
    slopes = []
    for _, g in cr.groupby("subject_id"):
        years = (g["charttime"] - g["charttime"].min()).dt.total_seconds() / (365.25 * 86400)
        if years.max() >= 1.0 and len(g) >= 5:
            slopes.append(np.polyfit(years, g["valuenum"], 1)[0])
    slopes = np.array(slopes)
    assert len(slopes) >= 30
    assert np.median(slopes) > 0 and (slopes > 0).mean() > 0.8


def test_acs_admissions_have_troponin_and_cath_codes(quick):
    dx, px, lab = quick["diagnoses_icd"], quick["procedures_icd"], quick["labevents"]
    acs = set(dx.loc[dx["icd_code"].str.startswith(("I21", "410")), "hadm_id"])
    assert len(acs) >= 20
    trop = lab[(lab["itemid"] == 51003) & lab["hadm_id"].isin(acs)]
    peak = trop.groupby("hadm_id")["valuenum"].max()
    assert peak.between(0.03, 3.0).all() and peak.median() >= 0.05
    cath = set(px.loc[px["icd_code"].isin(["3722", "3723", "4A023N7"]), "hadm_id"])
    assert len(acs & cath) / len(acs) > 0.6


# --------------------------------------------------------------------------- cohort headroom


def _cohort_rules(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The paper's inclusion rules, computed independently with pandas."""
    subjects = t["patients"]["subject_id"]
    adm = t["admissions"].groupby("subject_id")["admittime"].agg(["min", "max"])
    rules = pd.DataFrame(index=subjects)
    rules["admissions"] = (adm["max"] - adm["min"] > pd.Timedelta(days=7)).reindex(
        subjects, fill_value=False
    )
    lab = t["labevents"]
    panel = lab[lab["itemid"].isin(list(PANEL_ITEMIDS)) & lab["valuenum"].notna()]
    rules["panel_labs"] = panel.groupby("subject_id").size().reindex(subjects, fill_value=0) >= 5
    rules["prescriptions"] = (
        t["prescriptions"].groupby("subject_id").size().reindex(subjects, fill_value=0) >= 2
    )
    dx = t["diagnoses_icd"]
    counts = pd.DataFrame(0, index=subjects, columns=list(INDEX_DISEASES))
    for disease, by_version in INDEX_DISEASE_ICD.items():
        hit = np.zeros(len(dx), dtype=bool)
        for version, prefixes in by_version.items():
            hit |= (dx["icd_version"] == version) & dx["icd_code"].str.startswith(prefixes)
        counts[disease] = dx[hit].groupby("subject_id").size().reindex(subjects, fill_value=0)
    rules["index_codes"] = (counts >= 2).any(axis=1)
    eligible_counts = counts.where(counts >= 2, -1)
    # Primary disease: most code rows; ties in INDEX_DISEASES order (idxmax keeps the first).
    rules["primary"] = eligible_counts.idxmax(axis=1).where(rules["index_codes"])
    return rules


def test_eligibility_headroom_at_the_quick_size(quick):
    rules = _cohort_rules(quick)
    eligible = rules[list(syn.COHORT_RULES)].all(axis=1)
    per_disease = rules.loc[eligible, "primary"].value_counts()
    for disease in INDEX_DISEASES:
        assert per_disease.get(disease, 0) >= 2 * QUICK.per_disease, per_disease.to_dict()


def test_each_mode_fails_exactly_its_documented_rules(quick):
    rules = _cohort_rules(quick).join(quick["manifest"].set_index("subject_id"))
    for mode, fails in syn.MODE_FAILS.items():
        group = rules[rules["mode"] == mode]
        expected = round(syn.MODE_SHARES[syn.MODES.index(mode)] * QUICK.n_patients)
        assert len(group) == expected, mode
        for rule in syn.COHORT_RULES:
            assert (group[rule] == (rule not in fails)).all(), (mode, rule)
    # Index patients are eligible for their designated disease (comorbid codes may win).
    index = rules[rules["mode"] == "index"]
    assert (index["primary"] == index["designated_disease"]).mean() > 0.8


def test_visit_distribution_matches_the_paper_cohort():
    # Appendix C.1: visits per patient median 10, mean 16.0, max 93.
    rng = np.random.default_rng(0)
    p = draw_population(rng, 40_000)
    n = p.n_adm[p.mode == syn.MODES.index("index")]
    assert np.median(n) == 10 and 14.5 < n.mean() < 17.5 and n.max() <= 93 and n.min() >= 2


def test_complexity_varies_widely(quick):
    rules = _cohort_rules(quick)
    eligible = rules.index[rules[list(syn.COHORT_RULES)].all(axis=1)]
    adm = quick["admissions"][quick["admissions"]["subject_id"].isin(eligible)]
    stats = adm.groupby("subject_id")["admittime"].agg(["count", "min", "max"])
    span_years = (stats["max"] - stats["min"]).dt.days / 365.25
    low, high = stats["count"].quantile([1 / 3, 2 / 3])
    assert high >= 2 * low
    assert span_years.quantile(0.9) > 5 * max(span_years.quantile(0.1), 0.1)


# --------------------------------------------------------------------------- errors, atomicity


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"n_patients": 0}, "n_patients"),
        ({"n_patients": "600"}, "n_patients"),
        ({"n_patients": 10, "seed": -1}, "seed"),
        ({"n_patients": 10, "fmt": "xlsx"}, "fmt"),
        ({"n_patients": 10, "chunk_patients": 0}, "chunk_patients"),
        ({"n_patients": 10_000_000}, "n_patients"),
    ],
)
def test_bad_arguments_raise_a_clear_error(tmp_path, kwargs, needle):
    with pytest.raises(syn.SyntheticConfigError, match=needle) as err:
        syn.generate_hosp(tmp_path, **kwargs)
    assert isinstance(err.value, ValueError)
    assert not (tmp_path / "hosp").exists()


def test_failed_run_leaves_no_complete_looking_hosp(tmp_path, monkeypatch):
    real = syn.generate_chunk

    def failing(seed, chunk_idx, n, chunk_patients):
        if chunk_idx == 1:
            raise RuntimeError("disk full")
        return real(seed, chunk_idx, n, chunk_patients)

    monkeypatch.setattr(syn_generate, "generate_chunk", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        syn.generate_hosp(tmp_path, n_patients=60, chunk_patients=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # An earlier complete dataset survives a failed rebuild untouched.
    monkeypatch.setattr(syn_generate, "generate_chunk", real)
    syn.generate_hosp(tmp_path, n_patients=30, chunk_patients=30)
    before = (tmp_path / "hosp" / "labevents.csv.gz").read_bytes()
    monkeypatch.setattr(syn_generate, "generate_chunk", failing)
    with pytest.raises(RuntimeError):
        syn.generate_hosp(tmp_path, n_patients=60, chunk_patients=30)
    assert (tmp_path / "hosp" / "labevents.csv.gz").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_synthesize_writes_the_profile_raw_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(syn_generate, "raw_hosp_dir", lambda name: tmp_path / name / "raw" / "hosp")
    monkeypatch.setattr(
        syn_generate,
        "profile_sizes",
        lambda name: Profile(name, n_patients=40, per_disease=2, seed=5),
    )
    out = syn.synthesize("quick")
    assert out == tmp_path / "quick" / "raw" / "hosp"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{t}.csv.gz" for t in syn.WRITTEN_TABLES
    )
    assert set(syn.WRITTEN_TABLES) == set(HOSP_TABLES) | {"emar"}
    assert (tmp_path / "quick" / "raw" / syn.MANIFEST_NAME).exists()
    monkeypatch.undo()
    with pytest.raises(ValueError, match="unknown synthetic profile"):
        syn.synthesize("mimic")


def test_format_fixed_by_hand():
    got = syn.format_fixed(
        np.array([1.3, 140.0, 0.5, np.nan, 0.04, 12.25, 0.0]), np.array([1, 0, 2, 1, 2, 1, 1])
    )
    assert got.to_pylist() == ["1.3", "140", "0.50", None, "0.04", "12.2", "0.0"]
    masked = syn.format_fixed(
        np.array([1.3, 2.0, 0.004]), 1, np.array([0, -1, 1]), ("___", "<0.01")
    )
    assert masked.to_pylist() == ["___", "2.0", "<0.01"]
    with pytest.raises(syn.SyntheticConfigError):
        syn.format_fixed(np.array([1.0]), 5)


def test_id_ranges_are_guarded():
    ids = ChunkIds(first_patient=100, chunk_patients=10)
    assert ids.subject == 10_000_100 and ids.hadm == 20_000_000 + 100 * syn.HADM_PER_PATIENT
    ids.check("labevent", ids.labevent, 10 * syn.LABEVENTS_PER_PATIENT, syn.LABEVENTS_PER_PATIENT)
    with pytest.raises(syn.SyntheticConfigError, match="chunk_patients"):
        ids.check(
            "labevent", ids.labevent, 10 * syn.LABEVENTS_PER_PATIENT + 1, syn.LABEVENTS_PER_PATIENT
        )
    with pytest.raises(syn.SyntheticConfigError, match="labevent"):
        ids.check("labevent", 2**31 - 10, 20, syn.LABEVENTS_PER_PATIENT)
