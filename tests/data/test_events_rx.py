"""Medication event ids on real MIMIC-IV prescription shapes: one pharmacy_id with
MAIN + BASE + ADDITIVE rows, two MAIN rows on one id, a NULL pharmacy_id, dose ranges and
missing doses. Expected ids are worked out by hand from clinlib.data.events' rule; the DuckDB path,
the independent pandas path and a row-shuffled copy must all agree."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from clinlib.data.cohort_pandas import extract_events_pandas
from clinlib.data.events import extract_events
from clinlib.data.sources import synthetic as syn
from tests import hosp_fixture


def _rx(pid, drug, drug_type, dose="1", unit="g", start="2150-01-02 12:00", hadm=101):
    return dict(subject_id=1, hadm_id=hadm, pharmacy_id=pid, drug_type=drug_type, drug=drug,
                starttime=pd.Timestamp(start), stoptime=pd.Timestamp(start) + pd.Timedelta("1D"),
                dose_val_rx=dose, dose_unit_rx=unit, route="IV")  # fmt: skip


QUIRKS = [
    # one order: MAIN drug, two BASE diluents, one ADDITIVE -> RX-9001 and RX-9001-2
    _rx(9001, "Vancomycin", "MAIN", "1000", "mg"),
    _rx(9001, "0.9% Sodium Chloride", "BASE", "250", "mL"),
    _rx(9001, "Bag", "BASE", "1", "BAG"),
    _rx(9001, "Thiamine", "ADDITIVE", "100", "mg"),
    # two MAIN rows on one id, ranked by drug name: "Albumin 25% (12.5g / 50mL)" sorts
    # before "Cefepime", so Albumin is RX-9002 and Cefepime RX-9002-2 (in any row order)
    _rx(9002, "Cefepime", "MAIN", "2", "g"),
    _rx(9002, "Albumin 25% (12.5g / 50mL)", "MAIN", "12.5", "g"),
    # no pharmacy_id: no natural key, no event
    _rx(None, "Ondansetron", "MAIN", "4", "mg"),
    # a range and a missing dose; no hadm_id but inside stay 101 -> joins it by time
    _rx(9003, "OxyCODONE (Immediate Release) ", "MAIN", "5-10", "mg"),
    _rx(9004, "Heparin (Porcine)", "MAIN", None, None, hadm=None),
]
EXPECTED = {
    "RX-9001": ("Vancomycin", "1000", 1000.0),
    "RX-9001-2": ("Thiamine", "100", 100.0),
    "RX-9002": ("Albumin 25% (12.5g / 50mL)", "12.5", 12.5),
    "RX-9002-2": ("Cefepime", "2", 2.0),
    "RX-9003": ("OxyCODONE (Immediate Release)", "5-10", None),  # the label is trimmed
    "RX-9004": ("Heparin (Porcine)", None, None),
}


def _tables(shuffle_seed: int | None = None) -> dict[str, pd.DataFrame]:
    tables = {k: v for k, v in hosp_fixture.build().items() if not k.startswith("_")}
    rx = pd.concat([tables["prescriptions"], pd.DataFrame(QUIRKS)], ignore_index=True)
    rx = hosp_fixture._complete("prescriptions", rx)
    if shuffle_seed is not None:
        rx = rx.sample(frac=1.0, random_state=shuffle_seed).reset_index(drop=True)
    tables["prescriptions"] = rx
    return tables


def _con(tables) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, df in tables.items():
        con.register(name, df)
    return con


def _events(tables) -> pd.DataFrame:
    return extract_events(_con(tables), [1])


def test_quirk_rows_get_the_hand_worked_ids():
    ev = _events(_tables())
    assert ev["event_id"].is_unique
    med = ev[ev["event_id"].str.startswith("RX-900")].set_index("event_id")
    assert set(med.index) == set(EXPECTED)
    for eid, (drug, text, value) in EXPECTED.items():
        assert med.loc[eid, "label"] == drug
        assert (pd.isna(med.loc[eid, "value_text"]) and text is None) or (
            med.loc[eid, "value_text"] == text
        )
        assert (pd.isna(med.loc[eid, "value"]) and value is None) or med.loc[eid, "value"] == value
    # Diluents yield no event; the NULL pharmacy_id row neither.
    assert not ev["label"].isin(["0.9% Sodium Chloride", "Bag", "Ondansetron"]).any()
    assert med.loc["RX-9004", "hadm_id"] == 101


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ids_are_stable_under_row_shuffling(seed):
    base = _events(_tables())
    shuffled = _events(_tables(shuffle_seed=seed))
    pd.testing.assert_frame_equal(base, shuffled)


def test_pandas_implementation_agrees(tmp_path):
    hosp = tmp_path / "hosp"
    hosp.mkdir()
    for name, df in _tables(shuffle_seed=5).items():
        df.to_parquet(hosp / f"{name}.parquet", index=False)
    pd.testing.assert_frame_equal(_events(_tables()), extract_events_pandas(hosp, [1]))


def test_synthetic_shapes_give_unique_stable_ids(tmp_path):
    syn.generate_hosp(tmp_path, n_patients=80, seed=11, fmt="parquet", chunk_patients=80)
    hosp = tmp_path / "hosp"
    tables = {p.stem: pd.read_parquet(p) for p in hosp.glob("*.parquet")}
    rx = tables["prescriptions"]
    assert (rx.groupby("pharmacy_id").size() > 1).any()  # the real shape is there
    subjects = sorted(rx["subject_id"].unique())
    ev = extract_events(_con(tables), subjects)
    assert ev["event_id"].is_unique
    # One event per order row: MAIN + ADDITIVE rows of the subjects' stays.
    orders = rx[rx["drug_type"] != "BASE"]
    assert (ev["kind"] == "medication").sum() == len(orders)
    perm = np.random.default_rng(3).permutation(len(rx))
    shuffled = dict(tables, prescriptions=rx.iloc[perm].reset_index(drop=True))
    pd.testing.assert_frame_equal(ev, extract_events(_con(shuffled), subjects))
