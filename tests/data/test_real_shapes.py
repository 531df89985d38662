"""Real MIMIC-IV shapes end to end: the synthetic generator's real-data shapes
(clinlib.data.sources.synthetic_shapes) at their documented shares, and cohort -> events ->
dialogues on a small MIMIC-shaped directory and on the MIMIC-derived MEDS dataset built from
it (clinlib.data.sources.meds_fixture): same cohort, unique event ids, >= 90 % of dialogues kept."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from clinlib.data.cohort import select_cohort
from clinlib.data.events import extract_events
from clinlib.data.sources import synthetic as syn
from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.sources.meds import open_meds
from clinlib.data.sources.meds_fixture import mimic_to_meds
from clinlib.data.sources.mimic import open_hosp
from clinlib.dialogue import synth as D

MIN_KEPT = 0.9


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    out = tmp_path_factory.mktemp("real_shapes")
    syn.generate_hosp(out, n_patients=240, seed=21, fmt="csv.gz", chunk_patients=240)
    return out


@pytest.fixture(scope="module")
def tables(raw):
    con = open_hosp(raw)
    emar = f"read_csv('{raw / 'hosp' / 'emar.csv.gz'}', all_varchar=true)"
    return {
        "rx": con.execute("SELECT * FROM prescriptions").df(),
        "lab": con.execute("SELECT * FROM labevents").df(),
        "emar": duckdb.sql(f"SELECT * FROM {emar}").df(),
    }


def test_prescription_rows_share_pharmacy_ids_like_mimic(tables):
    rx = tables["rx"]
    share = rx["drug_type"].value_counts(normalize=True)
    assert 0.12 < share["BASE"] < 0.25  # real: ~20 %
    assert share.get("ADDITIVE", 0) < 0.005  # real: ~0.1 %
    per_id = rx.groupby("pharmacy_id")
    assert per_id.size().max() == 4
    assert (per_id["starttime"].nunique() == 1).all()
    assert ((rx["drug_type"] == "MAIN").groupby(rx["pharmacy_id"]).sum() == 1).all()
    # BASE rows are diluents of IV orders, in mL or bags.
    base = rx[rx["drug_type"] == "BASE"]
    assert base["drug"].isin([d.drug for d in sv.BASE_DRUGS.values()]).all()
    assert (base["route"] == "IV").all()


def test_doses_ranges_and_missing_ids_like_mimic(tables):
    rx, lab = tables["rx"], tables["lab"]
    dose = rx["dose_val_rx"]
    assert 0.03 < dose.str.fullmatch(r"\d+(\.\d+)?-\d+(\.\d+)?").mean() < 0.10
    assert 0 < dose.isna().mean() < 0.01
    assert 0 < rx["hadm_id"].isna().mean() < 0.03
    only_comment = lab["value"].isna() & lab["valuenum"].isna() & lab["comments"].notna()
    assert 0 < only_comment.mean() < 0.01
    assert 0.2 < lab["hadm_id"].isna().mean() < 0.35


def test_emar_rows_are_administrations_of_main_orders(tables):
    rx, emar = tables["rx"], tables["emar"]
    main = rx[rx["drug_type"] == "MAIN"].set_index("pharmacy_id")
    pid = emar["pharmacy_id"].astype("int64")
    assert pid.isin(main.index).all()
    assert (emar["medication"].to_numpy() == main.loc[pid, "drug"].to_numpy()).all()
    assert set(emar["event_txt"]) <= set(shp.EMAR_EVENTS)
    assert emar["emar_id"].is_unique
    assert (emar.groupby("pharmacy_id").size() <= shp.EMAR_MAX_PER_ORDER).all()


def _cohort_and_dialogues(con):
    cohort = select_cohort(con, per_disease=6, seed=0).cohort
    events = extract_events(con, cohort["subject_id"])
    corpus = D.synthesize_corpus(events, cohort, seed=0)
    return cohort, events, corpus["dialogue_summary"]


@pytest.fixture(scope="module")
def both(raw, tmp_path_factory):
    meds = mimic_to_meds(raw, tmp_path_factory.mktemp("meds") / "meds")
    return {"csv": _cohort_and_dialogues(open_hosp(raw)), "meds": _cohort_and_dialogues(open_meds(meds))}  # fmt: skip


@pytest.mark.parametrize("source", ["csv", "meds"])
def test_cohort_to_dialogues_keeps_unique_ids_and_dialogues(both, source):
    cohort, events, summary = both[source]
    assert len(cohort) >= 20
    assert events["event_id"].is_unique
    assert summary["kept"].mean() >= MIN_KEPT, summary.loc[~summary["kept"], "drop_reason"]


def test_meds_path_selects_the_csv_cohort_and_says_started(both):
    pd.testing.assert_frame_equal(both["csv"][0], both["meds"][0])
    meds_events = both["meds"][1]
    med = meds_events[meds_events["kind"] == "medication"]
    # MIMIC-derived MEDS orders carry no dose: every medication is an event without one.
    assert len(med) > 0 and med["value_text"].isna().all()
    assert (med["route"].notna()).all()


def test_meds_labs_take_the_panel_range_and_flag_outside_it(both):
    # MIMIC-derived MEDS drops reference ranges and flags; the panel's typical range stands in
    # (clinlib.data.sources.meds, "Lab reference ranges"), so abnormal-value tasks keep anchors.
    key = ["subject_id", "code", "time", "value"]
    csv, meds = (both[s][1].query("kind == 'lab'").set_index(key) for s in ("csv", "meds"))
    assert (meds["ref_low"].notna() | meds["ref_high"].notna()).all()  # one-sided: troponin
    value = meds.index.get_level_values("value")
    outside = (value < meds["ref_low"]) | (value > meds["ref_high"])
    assert (meds["flag"].eq("abnormal").fillna(False) == outside).all()
    assert outside.sum() > 0
    # The CSV source's own flags differ only where its range does (sex-specific Hb / Hct).
    joined = csv[["flag"]].join(meds[["flag"]].add_suffix("_meds"), how="inner")
    agree = joined["flag"].fillna("") == joined["flag_meds"].fillna("")
    assert len(joined) > 0.99 * len(csv) and agree.mean() > 0.95


def test_dose_text_shapes_are_told_as_the_prescription_screen_says(raw, tables):
    """Issue 26 §3 shapes the quick profile exercises: sliding-scale insulin with dose "0"
    (told without a dose), a heparin drip's "25,000" (read as 25000), and the double-spaced
    "Sodium Chloride 0.9%  Flush" (told with one space)."""
    rx = tables["rx"]
    assert (rx["dose_val_rx"] == "0").any() and (rx["dose_val_rx"] == "25,000").any()
    assert rx["drug"].str.contains("  ", regex=False).any()
    con = open_hosp(raw)
    meds = extract_events(con, sorted(rx["subject_id"].unique()))
    meds = meds[meds["kind"] == "medication"]
    zero = meds[meds["code"] == "Insulin"]
    assert len(zero) and zero["value_text"].isna().all() and zero["unit"].isna().all()
    drip = meds[meds["value_text"] == "25,000"]
    assert len(drip) and (drip["value"] == 25000.0).all()
    assert not meds["label"].str.contains("  ", regex=False).any()
    assert (meds["label"] == "Sodium Chloride 0.9% Flush").any()
