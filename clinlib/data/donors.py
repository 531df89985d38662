"""Donor patients for proxy noise sessions (MedMemoryBench §4 "Noise Augmentation": each
patient's relatives have "independent health profiles, including disease history, medication
records"; ClinTraceBench §3 "Cohort" event table).

The donors are a separate SYNTHETIC population — never MIMIC rows, never cohort patients — made
by the kit's own generator (:func:`clinlib.data.sources.synthetic.generate_chunk`) at a fixed
seed and turned into events by the same SQL as the cohort (:func:`clinlib.data.events.extract_events`),
so a relative's labs and drugs carry exactly the labels, units and value formats of the
patients' own. It is in memory, deterministic and offline, so it works on every profile.
"""

from __future__ import annotations

from functools import lru_cache

import duckdb
import pandas as pd

from clinlib.data.events import extract_events
from clinlib.data.sources.synthetic import dictionary_tables, generate_chunk

DONOR_SEED = 20_260_515
DONOR_POOL_SIZE = 64
# Per-chunk id ranges start at 0, so donor ids may equal cohort ids numerically; the
# offset moves them outside any id the generator gives a profile's patients.
DONOR_ID_OFFSET = 900_000_000


@lru_cache(maxsize=4)
def _donor_events(n: int, seed: int) -> pd.DataFrame:
    tables = generate_chunk(seed, 0, n, n)
    tables.pop("manifest")
    con = duckdb.connect()
    try:
        for name, table in {**tables, **dictionary_tables()}.items():
            con.register(name, table)
        ids = tables["patients"].column("subject_id").to_pylist()
        events = extract_events(con, ids)
    finally:
        con.close()
    events["subject_id"] = events["subject_id"] + DONOR_ID_OFFSET
    return events


def donor_events(n: int = DONOR_POOL_SIZE, seed: int = DONOR_SEED) -> pd.DataFrame:
    """The donor pool's event table (events.parquet columns; ``subject_id`` offset by
    :data:`DONOR_ID_OFFSET`). Deterministic for (n, seed); cached in memory, returned as a copy.

    Args:
        n: donor patients to generate (donors without labs or drugs are still included).
        seed: generator seed (default :data:`DONOR_SEED`, fixed so relatives are stable).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"donor pool size must be a positive integer, got {n!r}")
    return _donor_events(int(n), int(seed)).copy()
