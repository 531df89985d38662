"""Stage orchestration: each stage reads the previous stage's artifacts under
``data/build/<profile>/`` and writes its own atomically (DESIGN.md "The artifact contract").

Stages so far: ``synth`` (synthetic MIMIC-IV-shaped hosp tables) -> ``cohort`` (cohort,
attrition, eligible and events parquet) -> ``dialogues``. The data source of a build is
recorded in ``source.json`` so that later stages (the LLM harness) know whether the data is
credentialed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from clinlib.cohort import select_cohort
from clinlib.config import PROFILES, artifact_path, build_dir, resolve_profile
from clinlib.events import extract_events
from clinlib.io import atomic_path, write_parquet
from clinlib.schema import ARTIFACTS

log = logging.getLogger(__name__)

SOURCE_FILE = "source.json"


@dataclass(frozen=True)
class SourceSpec:
    """Where a build's data comes from.

    Attributes:
        kind: ``synthetic``, ``mimic`` or ``meds``.
        path: the MIMIC-IV root (holding hosp/), the MEDS root, or the synthetic raw dir.
        credentialed: True for real MIMIC-IV / MEDS data (PhysioNet DUA applies).
    """

    kind: str
    path: Path
    credentialed: bool


def resolve_source(
    profile: str | None, mimic_dir: Path | None = None, meds_dir: Path | None = None
) -> tuple[str, SourceSpec]:
    """Pick the profile name and the data source for a cohort build.

    With ``mimic_dir`` / ``meds_dir`` the profile defaults to ``mimic`` / ``meds``; otherwise
    the synthetic raw tables of the profile are used.
    """
    if mimic_dir and meds_dir:
        raise ValueError("give either --mimic-dir or --meds-dir, not both")
    if mimic_dir:
        return resolve_profile(profile or "mimic"), SourceSpec("mimic", Path(mimic_dir), True)
    if meds_dir:
        return resolve_profile(profile or "meds"), SourceSpec("meds", Path(meds_dir), True)
    name = resolve_profile(profile)
    return name, SourceSpec("synthetic", build_dir(name) / "raw", False)


def open_source(spec: SourceSpec, con: duckdb.DuckDBPyConnection | None = None):
    """A DuckDB connection with MIMIC-shaped hosp views over ``spec``."""
    if spec.kind == "meds":
        from clinlib.sources.meds import open_meds

        return open_meds(spec.path, con=con)
    from clinlib.sources.mimic import open_hosp

    if spec.kind == "synthetic" and not (spec.path / "hosp").exists():
        raise FileNotFoundError(
            f"no synthetic hosp tables in {spec.path}/hosp; run `clintrace synth --profile "
            f"{spec.path.parent.name}` first"
        )
    return open_hosp(spec.path, con=con)


def read_source_info(profile: str | None = None) -> dict:
    """The recorded source of a build (kind, path, credentialed)."""
    path = artifact_path(SOURCE_FILE, profile)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run `clintrace cohort` first")
    return json.loads(path.read_text())


def build_cohort(
    profile: str | None = None,
    mimic_dir: Path | None = None,
    meds_dir: Path | None = None,
    seed: int | None = None,
    per_disease: int | None = None,
    threads: int | None = None,
) -> dict[str, pd.DataFrame]:
    """Build cohort, attrition, eligible and events artifacts for a profile.

    Args:
        profile: build profile (default from $CLINTRACE_PROFILE, or mimic/meds for real data).
        mimic_dir: a real MIMIC-IV directory holding hosp/ (credentialed).
        meds_dir: a MEDS dataset root (credentialed unless you know otherwise).
        seed: sampling seed (default: the profile's).
        per_disease: patients per index disease (default: the profile's, else 100).
        threads: DuckDB threads (default: DuckDB's choice).

    Returns:
        ``{"cohort", "attrition", "eligible", "events"}`` DataFrames (also written to disk).
    """
    name, spec = resolve_source(profile, mimic_dir, meds_dir)
    sizes = PROFILES.get(name)
    seed = seed if seed is not None else (sizes.seed if sizes else 0)
    per_disease = per_disease or (sizes.per_disease if sizes else 100)
    t0 = time.perf_counter()
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    open_source(spec, con=con)
    result = select_cohort(con, per_disease=per_disease, seed=seed)
    events = extract_events(con, result.cohort["subject_id"].tolist())
    con.close()

    cohort = result.cohort.copy()
    cohort["n_events"] = (
        cohort["subject_id"].map(events.groupby("subject_id").size()).fillna(0).astype("int64")
    )
    cohort = cohort[list(ARTIFACTS["cohort"])]
    out = {
        "cohort": cohort,
        "attrition": result.attrition,
        "eligible": result.eligible,
        "events": events,
    }
    for key, df in out.items():
        write_parquet(df, artifact_path(f"{key}.parquet", name))
    info = {
        "kind": spec.kind,
        "path": str(spec.path),
        "credentialed": spec.credentialed,
        "seed": seed,
        "per_disease": per_disease,
        "shortfalls": result.shortfalls,
    }
    with atomic_path(artifact_path(SOURCE_FILE, name)) as tmp:
        tmp.write_text(json.dumps(info, indent=2))
    log.info(
        "cohort %s: %d patients, %d events in %.1fs",
        name,
        len(cohort),
        len(events),
        time.perf_counter() - t0,
    )
    return out


def load(artifact: str, profile: str | None = None) -> pd.DataFrame:
    """Read a stage artifact (``"cohort"``, ``"events"``, ...) of a profile.

    Raises a FileNotFoundError naming the command that produces it.
    """
    producers = {
        "cohort": "clintrace cohort",
        "attrition": "clintrace cohort",
        "eligible": "clintrace cohort",
        "events": "clintrace cohort",
        "dialogues": "clintrace dialogues",
        "dialogue_checks": "clintrace dialogues",
        "event_coverage": "clintrace dialogues",
        "dialogue_summary": "clintrace dialogues",
        "dialogue_rewrites": "clintrace dialogues",
        "questions": "clintrace questions",
        "gates": "clintrace questions",
        "question_availability": "clintrace questions",
    }
    path = artifact_path(f"{artifact}.parquet", profile)
    if not path.exists():
        hint = producers.get(artifact, "the stage that writes it")
        raise FileNotFoundError(
            f"{path} does not exist; run `{hint} --profile {resolve_profile(profile)}` first"
        )
    return pd.read_parquet(path)
