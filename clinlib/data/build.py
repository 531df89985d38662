"""Stage orchestration: each stage reads the previous stage's artifacts under
``data/build/<profile>/`` and writes its own atomically (docs/design.md "The artifact contract").

Stages so far: ``synth`` (synthetic MIMIC-IV-shaped hosp tables) -> ``cohort`` (cohort,
attrition, eligible and events parquet) -> ``dialogues``. The data source of a build is
recorded in ``source.json`` so that later stages (the LLM harness) know whether the data is
credentialed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pandas as pd

from clinlib.core.config import (
    CTB_RULE,
    LONG_RULE,
    PROFILES,
    artifact_path,
    build_dir,
    cohort_rule,
    resolve_profile,
)
from clinlib.core.guards import StageError, check_artifact, check_kept, stage_run
from clinlib.data.cohort import select_cohort
from clinlib.data.cohort_rules import restrict_labs
from clinlib.data.events import extract_events
from clinlib.data.plausibility import (
    check_excluded,
    lab_conversions,
    lab_exclusions,
    screen_admissions,
    stay_exclusions,
    summary_lines,
)
from clinlib.data.plausibility_rx import rx_exclusions, zero_dose_count
from clinlib.data.schema import ARTIFACTS
from clinlib.data.sources.meds import meds_shards, open_meds
from clinlib.data.sources.meds.families import (
    FAMILY_COLUMNS,
    UNNAMED_RULE,
    code_families,
    family_lines,
    require_codes,
    unnamed_exclusions,
    unnamed_lines,
)
from clinlib.data.sources.meds.hosp_sql import DUPLICATE_ADMISSIONS_SQL
from clinlib.data.sources.meds.read import split_coverage
from clinlib.data.sources.mimic import (
    PRIMARY_KEYS,
    SourceSchemaError,
    check_unique,
    hosp_table_paths,
    open_hosp,
    source_error,
)
from clinlib.data.units import conversion_lines

log = logging.getLogger(__name__)

SOURCE_FILE = "source.json"
# Above this size a labevents CSV is not scanned a second time for duplicated labevent_ids.
LABEVENTS_RESCAN_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True)
class SourceSpec:
    """Where a build's data comes from.

    Attributes:
        kind: ``synthetic``, ``mimic`` or ``meds``.
        path: the MIMIC-IV root (holding hosp/), the MEDS root, or the synthetic raw dir.
        credentialed: True for real MIMIC-IV / MEDS data (PhysioNet DUA applies).
        cohort_rule: the build's cohort rule (clinlib.core.config.COHORT_RULES); under
            LongMedBench's the source shows abnormal labs only (clinlib.data.cohort_rules).
    """

    kind: str
    path: Path
    credentialed: bool
    cohort_rule: str = CTB_RULE


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
        name = resolve_profile("mimic" if profile is None else profile)
        return name, SourceSpec("mimic", Path(mimic_dir), True)
    if meds_dir:
        return resolve_profile("meds" if profile is None else profile), SourceSpec(
            "meds", Path(meds_dir), True
        )
    name = resolve_profile(profile)
    return name, SourceSpec("synthetic", build_dir(name) / "raw", False)


def open_source(spec: SourceSpec, con: duckdb.DuckDBPyConnection | None = None):
    """A DuckDB connection with MIMIC-shaped hosp views over ``spec`` (abnormal labs only
    under LongMedBench's cohort rule)."""
    if spec.kind == "meds":
        require_codes(spec.path)  # no fallback vocabulary: refuse (docs/real-data.md)
        con = open_meds(spec.path, con=con)
    elif spec.kind == "synthetic" and not (spec.path / "hosp").exists():
        raise FileNotFoundError(
            f"no synthetic hosp tables in {spec.path}/hosp; run `clintrace synth --profile "
            f"{spec.path.parent.name}` first"
        )
    else:
        con = open_hosp(spec.path, con=con)
    if spec.cohort_rule == LONG_RULE:
        restrict_labs(con)
    return con


def read_source_info(profile: str | None = None) -> dict:
    """The recorded source of a build (kind, path, credentialed)."""
    path = artifact_path(SOURCE_FILE, profile)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run `clintrace cohort` first")
    return json.loads(path.read_text())


def source_spec(profile: str | None = None) -> SourceSpec:
    """The recorded source of a build as a :class:`SourceSpec` (a build from before cohort
    rules were recorded used the paper's)."""
    info = read_source_info(profile)
    return SourceSpec(
        info["kind"],
        Path(info["path"]),
        bool(info["credentialed"]),
        info.get("cohort_rule", CTB_RULE),
    )


def build_cohort(
    profile: str | None = None,
    mimic_dir: Path | None = None,
    meds_dir: Path | None = None,
    seed: int | None = None,
    per_disease: int | None = None,
    threads: int | None = None,
    allow_drops: bool = False,
    rule: str | None = None,
) -> dict[str, pd.DataFrame]:
    """Build cohort, attrition, eligible and events artifacts for a profile.

    Args:
        profile: build profile (default from $CLINTRACE_PROFILE, or mimic/meds for real data).
        mimic_dir: a real MIMIC-IV directory holding hosp/ (credentialed).
        meds_dir: a MEDS dataset root (credentialed unless you know otherwise).
        seed: sampling seed (default: the profile's).
        per_disease: patients per index disease (default: the profile's, else 100).
        threads: DuckDB threads (default: DuckDB's choice).
        allow_drops: accept a cohort where more than guards.MAX_DROP_SHARE of the patients
            yield no event (0 patients is always an error).
        rule: the cohort rule (``clintracebench`` or ``longmedbench``; default: the
            profile's, else the paper's), recorded in source.json for the later stages.

    Returns:
        ``{"cohort", "attrition", "eligible", "events"}`` DataFrames (also written to disk).

    Raises:
        SourceSchemaError: bad input (a duplicated key, a value or row DuckDB cannot read).
        StageError: 0 patients, or too many without events; the stage manifest says failed.
    """
    name, spec = resolve_source(profile, mimic_dir, meds_dir)
    spec = replace(spec, cohort_rule=cohort_rule(name, rule))
    sizes = PROFILES.get(name)
    seed = seed if seed is not None else (sizes.seed if sizes else 0)
    if per_disease is None:
        per_disease = sizes.per_disease if sizes else 100
    if isinstance(per_disease, bool) or not isinstance(per_disease, int) or per_disease < 1:
        raise ValueError(f"--per-disease must be a positive integer, got {per_disease!r}")
    t0 = time.perf_counter()
    with stage_run("cohort", name) as staging:
        result, events, exclusions, families, conversions, dups = _select_and_extract(
            spec, per_disease, seed, threads, allow_drops
        )
        _check_cohort(result, events, allow_drops)
        out = _write_cohort(staging, spec, result, events, seed, per_disease)
        exclusions.to_parquet(staging.path("exclusions.parquet"), index=False)
        families.to_parquet(staging.path("code_families.parquet"), index=False)
        conversions.to_parquet(staging.path("conversions.parquet"), index=False)
        out["exclusions"], out["code_families"] = exclusions, families
        out["conversions"], out["deduplicated"] = conversions, dups
    for line in report_lines(out):
        log.info("cohort: %s", line)
    log.info(
        "cohort %s: %d patients, %d events in %.1fs",
        name,
        len(out["cohort"]),
        len(events),
        time.perf_counter() - t0,
    )
    return out


def report_lines(out: dict[str, pd.DataFrame]) -> list[str]:
    """What the cohort stage left out and why: rows excluded as implausible, rows whose name
    is unknown (MEDS), lab values converted from a known alternative unit, and the MEDS code
    families read, used and ignored."""
    ex = out["exclusions"]
    plausibility = ex[ex["rule"] != UNNAMED_RULE]
    lines = [f"excluded: {line}" for line in summary_lines(plausibility) + unnamed_lines(ex)]
    lines += [f"converted: {line}" for line in conversion_lines(out.get("conversions"))]
    for table, n in out.get("deduplicated", {}).items():
        if table.startswith("split "):  # subjects a split lists but its shards lack
            lines.append(f"missing: {table}: {n}")
        elif n:
            lines.append(f"de-duplicated: {table}: {n} exact copies of a row dropped (one kept)")
    return lines + family_lines(out.get("code_families", pd.DataFrame()))


def _select_and_extract(
    spec: SourceSpec, per_disease: int, seed: int, threads: int | None, allow_drops: bool = False
):
    """Plausibility screen + cohort selection + event extraction, with DuckDB read errors as
    one-line errors. Returns (selection result, events, exclusions, code families: what a
    MEDS source held and what the kit made of it, empty for other sources; lab values
    converted per lab and unit; exact copies of MEDS admission rows dropped, by table)."""
    con = duckdb.connect()
    try:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        open_source(spec, con=con)
        keyed = _key_files(spec)
        for table, key in PRIMARY_KEYS.items():
            if table in keyed:
                check_unique(con, table, key, keyed[table])
        bad_adm, n_adm = screen_admissions(con)  # before selection: no eligibility from them
        check_excluded("admissions", n_adm, bad_adm, allow_drops)
        result = select_cohort(con, per_disease=per_disease, seed=seed, rule=spec.cohort_rule)
        subjects = result.cohort["subject_id"].tolist()
        if _cheap_to_rescan(keyed.get("labevents")) and subjects:
            check_unique(con, "labevents", "labevent_id", keyed["labevents"], subjects)
        events = extract_events(con, subjects)
        bad_lab, n_lab = lab_exclusions(con)
        conversions = lab_conversions(con)
        check_excluded("panel lab rows", n_lab, bad_lab, allow_drops)
        bad_rx, n_rx = rx_exclusions(con)
        check_excluded("medication order rows", n_rx, bad_rx, allow_drops)
        bad_rx = pd.concat([bad_rx, stay_exclusions(con)], ignore_index=True)  # no threshold
        n_zero = zero_dose_count(con)
        if n_zero:
            log.info(
                "cohort: prescriptions: %d orders with dose 0 (sliding scale) are told "
                "without a dose",
                n_zero,
            )
        families, unnamed = pd.DataFrame(columns=list(FAMILY_COLUMNS)), bad_lab.iloc[:0]
        dups: dict[str, int | str] = {}
        if spec.kind == "meds":  # codes read / used / ignored; unnamed codes (no threshold)
            families, unnamed = code_families(con), unnamed_exclusions(con, subjects)
            dups["admissions"] = int(con.execute(DUPLICATE_ADMISSIONS_SQL).fetchone()[0])
            dups.update(check_splits(spec.path, allow_drops))
    except duckdb.Error as err:  # a bad value or row past the open-time sample
        raise source_error(err, spec.path) from None
    finally:
        con.close()
    exclusions = pd.concat([bad_adm, bad_lab, bad_rx, unnamed], ignore_index=True)
    exclusions = exclusions.astype({"subject_id": "int64"})
    return result, events, exclusions, families, conversions, dups


def check_splits(meds_dir: Path, allow_drops: bool) -> dict[str, str]:
    """Subjects ``metadata/subject_splits.parquet`` lists for a split that its shards do not
    hold: none of them is a one-line error (an empty or wrong shard), unless ``allow_drops``;
    any is counted in the cohort report (``{"split 'x'": "3 of 10 listed subjects ..."}``)."""
    notes = {}
    for split, listed, present, folder in split_coverage(meds_dir, meds_shards(meds_dir)):
        if present == listed:
            continue
        if present == 0 and not allow_drops:
            raise SourceSchemaError(
                folder,
                column="subject_id",
                expected=f"the {listed} subjects metadata/subject_splits.parquet lists for "
                f"split {split!r}",
                found="none of them in its shards (pass --allow-drops to accept)",
            )
        notes[f"split {split!r}"] = (
            f"{listed - present} of {listed} subjects metadata/subject_splits.parquet lists "
            f"are in no shard of {folder.name}/"
        )
        log.warning("cohort: MEDS split %r: %s", split, notes[f"split {split!r}"])
    return notes


def _key_files(spec: SourceSpec) -> dict[str, Path]:
    """Table files whose primary keys are checked (MIMIC-shaped CSV / parquet sources)."""
    if spec.kind == "meds":
        return {}
    return hosp_table_paths(spec.path, [*PRIMARY_KEYS, "labevents"])


def _cheap_to_rescan(path: Path | None) -> bool:
    """Whether labevents' key check (one more scan) is cheap: parquet (two columns read), or
    a CSV under LABEVENTS_RESCAN_MAX_BYTES (not real MIMIC-IV's 2.5 GB labevents.csv.gz)."""
    if path is None:
        return False
    if path.name.endswith(".parquet"):
        return True
    if path.stat().st_size <= LABEVENTS_RESCAN_MAX_BYTES:
        return True
    log.info("labevent_id uniqueness not checked: %s is too large to scan twice", path)
    return False


def _check_cohort(result, events: pd.DataFrame, allow_drops: bool) -> None:
    """0 patients is an error naming the funnel step that emptied it; so is a cohort whose
    patients mostly yield no event (more than MAX_DROP_SHARE), unless ``allow_drops``."""
    att = result.attrition
    if not len(result.cohort):
        empty = att[att["n_patients"] == 0]
        step = empty["step"].iloc[0] if len(empty) else "sampling"
        start = int(att["n_patients"].iloc[0]) if len(att) else 0
        raise StageError(f"cohort: 0 of {start} patients selected; none left after {step!r}")
    with_events = set(events["subject_id"].astype(int)) if len(events) else set()
    n = len(result.cohort)
    kept = sum(int(s) in with_events for s in result.cohort["subject_id"])
    check_kept(
        "cohort",
        "patients with events",
        kept,
        n,
        {"no events extracted": n - kept} if kept < n else None,
        allow_drops=allow_drops,
    )


def _write_cohort(staging, spec, result, events, seed, per_disease) -> dict[str, pd.DataFrame]:
    """Write the cohort stage's files into ``staging`` (swapped in together by stage_run)."""
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
        df.to_parquet(staging.path(f"{key}.parquet"), index=False)
    info = {
        "kind": spec.kind,
        "path": str(spec.path),
        "credentialed": spec.credentialed,
        "cohort_rule": spec.cohort_rule,
        "seed": seed,
        "per_disease": per_disease,
        "shortfalls": result.shortfalls,
    }
    staging.path(SOURCE_FILE).write_text(json.dumps(info, indent=2))
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
        "exclusions": "clintrace cohort",
        "code_families": "clintrace cohort",
        "conversions": "clintrace cohort",
        "dialogues": "clintrace dialogues",
        "dialogue_checks": "clintrace dialogues",
        "event_coverage": "clintrace dialogues",
        "dialogue_summary": "clintrace dialogues",
        "dialogue_rewrites": "clintrace dialogues",
        "questions": "clintrace questions",
        "gates": "clintrace questions",
        "question_availability": "clintrace questions",
        "temporal_questions": "clintrace questions",
        "temporal_gates": "clintrace questions",
        "temporal_availability": "clintrace questions",
    }
    path = artifact_path(f"{artifact}.parquet", profile)
    if not path.exists():
        hint = producers.get(artifact, "the stage that writes it")
        raise FileNotFoundError(
            f"{path} does not exist; run `{hint} --profile {resolve_profile(profile)}` first"
        )
    check_artifact(artifact, profile)  # refuse a failed, unfinished or stale stage's output
    return pd.read_parquet(path)
