"""Orchestration of the SYNTHETIC hosp generator: one chunk of every table, the chunked
write, and the profile entry point (paper §3 "Cohort", Fig. 2 stage 1).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from clinlib.core.config import profile_sizes, raw_hosp_dir, resolve_profile
from clinlib.core.io import atomic_path
from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources.synthetic import hazards as hz
from clinlib.data.sources.synthetic.arrow import WRITTEN_TABLES, ChunkIds
from clinlib.data.sources.synthetic.codes import icd_diagnoses, icd_procedures
from clinlib.data.sources.synthetic.design import (
    FORMATS,
    MANIFEST_NAME,
    MAX_PATIENTS,
    SyntheticConfigError,
)
from clinlib.data.sources.synthetic.labevents import labevents_rows
from clinlib.data.sources.synthetic.orders import prescription_rows
from clinlib.data.sources.synthetic.population import admission_timeline, draw_population
from clinlib.data.sources.synthetic.tables import (
    MANIFEST_SCHEMA,
    admissions_table,
    dictionary_tables,
    manifest_table,
    patients_table,
)
from clinlib.data.sources.synthetic.treatment import treatment_plan
from clinlib.data.sources.synthetic.writer import Sink

log = logging.getLogger(__name__)


def generate_chunk(seed: int, chunk_idx: int, n: int, chunk_patients: int) -> dict[str, pa.Table]:
    """All per-patient hosp tables (and the manifest) for one chunk.

    Args:
        seed: dataset seed.
        chunk_idx: chunk number; patients ``chunk_idx * chunk_patients`` onwards.
        n: patients in this chunk (<= chunk_patients).
        chunk_patients: patients per chunk (fixes the chunk's id ranges).

    Returns:
        table name -> arrow table (schemas of :func:`arrow_schema`), plus ``"manifest"``.
    """
    rng = np.random.default_rng([seed, chunk_idx])
    ids = ChunkIds(chunk_idx * chunk_patients, chunk_patients)
    p = draw_population(rng, n)
    a = admission_timeline(rng, p)
    plan = treatment_plan(rng, p, a)
    srng = np.random.default_rng([seed, chunk_idx, shp.SHAPES_STREAM])
    hrng = np.random.default_rng([seed, chunk_idx, hz.HAZARD_STREAM])
    hz.plant_admissions(hrng, a)
    labevents, ext = labevents_rows(rng, srng, p, a, plan, ids)
    prescriptions, emar = prescription_rows(rng, srng, p, a, plan, ext, ids, hrng)
    return {
        "patients": patients_table(p, ids),
        "admissions": admissions_table(p, a, ids),
        "labevents": labevents,
        "prescriptions": prescriptions,
        "emar": emar,
        "diagnoses_icd": icd_diagnoses(rng, p, a, plan, ext, ids),
        "procedures_icd": icd_procedures(rng, p, a, plan, ext, ids),
        "manifest": manifest_table(p, ids),
    }


def _validate(n_patients, seed, fmt, chunk_patients) -> None:
    for name, value in (
        ("n_patients", n_patients),
        ("seed", seed),
        ("chunk_patients", chunk_patients),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise SyntheticConfigError(f"{name} must be an integer, got {value!r}")
    if not 1 <= n_patients <= MAX_PATIENTS:
        raise SyntheticConfigError(
            f"n_patients must be between 1 and {MAX_PATIENTS:,}, got {n_patients}"
        )
    if seed < 0:
        raise SyntheticConfigError(f"seed must be >= 0, got {seed}")
    if chunk_patients < 1:
        raise SyntheticConfigError(f"chunk_patients must be >= 1, got {chunk_patients}")
    if fmt not in FORMATS:
        raise SyntheticConfigError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")


def generate_hosp(
    out_dir: Path,
    n_patients: int,
    seed: int = 0,
    fmt: str = "csv.gz",
    chunk_patients: int = 20_000,
    progress: bool = False,
) -> dict[str, Path]:
    """Write a SYNTHETIC MIMIC-IV-shaped hosp module under ``out_dir/hosp/``.

    Args:
        out_dir: folder that receives ``hosp/`` (and ``synthetic_manifest.parquet``).
        n_patients: patients to generate (1 .. 500,000).
        seed: dataset seed; with ``n_patients`` and ``chunk_patients`` it fixes every byte.
        fmt: ``"csv.gz"`` (PhysioNet layout) or ``"parquet"``.
        chunk_patients: patients generated (and held in memory) at a time.
        progress: show a progress bar over chunks.

    Returns:
        table name -> written file path, plus ``"manifest"``.

    Raises:
        SyntheticConfigError: an argument is out of range.
    """
    _validate(n_patients, seed, fmt, chunk_patients)
    out_dir = Path(out_dir)
    hosp = out_dir / "hosp"
    manifest_path = out_dir / MANIFEST_NAME
    # A manifest from an earlier run must never sit next to tables it does not describe.
    manifest_path.unlink(missing_ok=True)
    n_chunks = -(-n_patients // chunk_patients)
    chunks = range(n_chunks)
    if progress:
        chunks = tqdm(chunks, desc="synthetic hosp", unit="chunk")
    # Nesting order: hosp/ is renamed into place first, then the manifest that describes it.
    with atomic_path(manifest_path) as tmp_manifest, atomic_path(hosp) as tmp_hosp:
        tmp_hosp.mkdir(parents=True)
        sinks = {name: Sink(tmp_hosp / f"{name}.{fmt}", name, fmt) for name in WRITTEN_TABLES}
        manifest = pq.ParquetWriter(tmp_manifest, MANIFEST_SCHEMA)
        try:
            for name, table in dictionary_tables().items():
                sinks[name].write(table)
            for chunk_idx in chunks:
                n = min(chunk_patients, n_patients - chunk_idx * chunk_patients)
                tables = generate_chunk(seed, chunk_idx, n, chunk_patients)
                manifest.write_table(tables.pop("manifest"))
                for name, table in tables.items():
                    sinks[name].write(table)
                # Hand the chunk's buffers back so RSS stays at one chunk's worth.
                del tables, table
                pa.default_memory_pool().release_unused()
        finally:
            for sink in sinks.values():
                sink.close()
            manifest.close()
        log.info("synthetic hosp: %s", {k: s.rows for k, s in sinks.items()})
    paths = {name: hosp / f"{name}.{fmt}" for name in WRITTEN_TABLES}
    paths["manifest"] = manifest_path
    return paths


def synthesize(profile: str | None = None, seed: int | None = None, fmt: str = "csv.gz") -> Path:
    """Write the synthetic hosp tables of a profile to ``data/build/<profile>/raw/hosp/``.

    Args:
        profile: ``quick``, ``paper`` or ``mimic-scale`` (default: the active profile).
        seed: dataset seed (default: the profile's).
        fmt: ``"csv.gz"`` or ``"parquet"``.

    Returns:
        The hosp directory written.
    """
    name = resolve_profile(profile)
    sizes = profile_sizes(name)
    hosp = raw_hosp_dir(name)
    generate_hosp(
        hosp.parent,
        n_patients=sizes.n_patients,
        seed=sizes.seed if seed is None else seed,
        fmt=fmt,
    )
    return hosp
