"""The predictions dataset: append-only part files, reading back, resumption keys, summaries.

Paper §4 ("Backbones"): predictions are APPENDED to
``data/build/<profile>/predictions/`` as small parquet part files, each written atomically
(temp + rename), so a crash loses at most the batch in flight (already in the response cache).
A run reads the keys already predicted (:func:`done_keys`) and skips them; :func:`load_predictions`
keeps the latest row per key. Predictions made for another question set or other dialogues are
moved aside before a run appends (:func:`claim_predictions`). Design: docs/design.md.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core import guards
from clinlib.core.config import artifact_path, build_dir, resolve_profile
from clinlib.core.io import write_parquet
from clinlib.core.lock import pid_alive
from clinlib.data.build import load
from clinlib.eval.readers.version import READER_BACKBONES, policy_digest
from clinlib.tasks.answers import TASK_NAMES
from clinlib.tasks.extended import EXTENDED_ARTIFACT
from clinlib.tasks.settings import STATIC_SETTINGS
from clinlib.tasks.traps.answers import TRAP_ARTIFACT

log = logging.getLogger("clinlib.eval.harness.runner")


PREDICTIONS_DIR = "predictions"
PART_PREFIX = "part-"
KEY_COLUMNS: tuple[str, ...] = ("qid", "strategy", "backbone", "prep_model", "setting")

# Column -> pandas dtype as written; every part file has exactly these, so the dataset has
# one schema whatever a batch held (e.g. a batch of errors has no parsed answers).
PREDICTION_DTYPES: dict[str, str] = {
    "qid": "string",
    "task": "string",
    "subtype": "string",
    "strategy": "string",
    "backbone": "string",
    "prep_model": "string",
    "setting": "string",
    "response": "string",
    "parsed": "string",
    # nullable: NA for a free-text trap row (IG, MCD) no deterministic scorer decides
    # (clinlib.tasks.traps.answers.NEEDS_JUDGE); the judge's verdicts live in judge/<judge>.parquet
    "correct": "boolean",
    "parsed_lenient": "string",
    "correct_lenient": "boolean",
    # graded scores: 1.0 / 0.0 = correct / wrong; Kendall's tau for T10 (clinlib.tasks.score).
    # Parts written before these columns read back with NaN (see row_scores).
    "score": "float64",
    "score_lenient": "float64",
    "parse_failed": "bool",
    "parse_problem": "string",
    "empty": "bool",
    "finish_reason": "string",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cached_tokens": "int64",
    "cost_usd": "float64",
    "latency_s": "float64",
    "from_cache": "bool",
    "error": "string",
    # Why ``error`` is set (clinlib.eval.harness.outcomes: context_overflow, timeout, batch_expired,
    # ...); parts written before this column read back NA and are classified by message.
    "error_kind": "string",
    "context_tokens": "int64",
    # sha256 of the context the model read (NA in parts written before it was recorded); an
    # outside memory's contexts are kept by it in the read log (clinlib.strategies.remote_memory)
    "context_sha": "string",
    # The streaming protocol (clinlib.tasks.settings): sessions seen at the checkpoint, whether
    # it is the patient's final one, and the representation's item count there (NA unless
    # the setting is ``stream``).
    "checkpoint_visit": "Int64",
    "checkpoint_final": "boolean",
    "memory_items": "Int64",
    # The offline readers' policy version (clinlib.eval.readers.version; NA for any other
    # backbone): a reader row of another version is left out when read back, and re-asked.
    "reader_version": "string",
    "run_id": "string",
    "written_at": "datetime64[us, UTC]",
}
PREDICTION_COLUMNS: tuple[str, ...] = tuple(PREDICTION_DTYPES)

CELL_COLUMNS: tuple[str, ...] = ("strategy", "backbone", "prep_model", "setting")
# What :func:`summarize` computes per cell from the stored rows.
STORED_METRICS: tuple[str, ...] = (
    "n_predicted",
    "accuracy",
    "accuracy_lenient",
    "parse_failures",
    "empty",
    "errors",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
    "mean_score",
    "mean_score_lenient",
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_COLUMNS,
    "n",
    *STORED_METRICS,
    "new_predictions",
    "api_calls",
    "cache_hits",
    "new_cost_usd",
    # This run's own rows (clinlib.eval.harness.outcomes): errors, empty completions and the errors
    # by class ({"context overflow": 3, ...}), which `run`'s exit status judges.
    "new_errors",
    "new_empty",
    "new_failures",
    "stopped",
)


class RunnerError(ValueError):
    """A run is mis-specified (unknown setting / task, bad limit or budget, bad artifact)."""


def predictions_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/predictions/`` (not created)."""
    return build_dir(profile) / PREDICTIONS_DIR


def claim_predictions(name: str) -> None:
    """Before a run appends: predictions made for another question set or other dialogues
    (clinlib.core.guards, "predictions basis") are moved to ``predictions.stale-<time>/`` with one
    warning line, so no stale answer counts as done; paid answers to unchanged prompts come
    back from the response cache. A folder from before bases were recorded is moved only if
    it holds answers to questions that no longer exist."""
    directory = predictions_dir(name)
    basis = guards.predictions_basis(name)
    parts = part_files(directory)
    recorded = guards.read_basis(directory)
    changed = guards.stale_basis(recorded, basis)
    why = f"{changed} changed since they were made" if changed else None
    if parts and recorded is None:
        current = set(load("questions", name)["qid"])
        orphans = {q for p in parts for q in pd.read_parquet(p, columns=["qid"])["qid"]} - current
        why = (
            f"{len(orphans)} answered question(s) are no longer in questions.parquet"
            if orphans
            else None
        )
    if parts and why:
        aside = directory.with_name(f"{directory.name}.stale-{time.strftime('%Y%m%dT%H%M%S')}")
        directory.rename(aside)
        log.warning("stale predictions moved to %s: %s", aside, why)
    guards.write_basis(directory, basis)


def part_files(directory: Path) -> list[Path]:
    # Names embed a zero-padded nanosecond clock, so name order is write order.
    return sorted(directory.glob(f"{PART_PREFIX}*.parquet")) if directory.is_dir() else []


def load_predictions(
    profile: str | None = None,
    *,
    dedupe: bool = True,
    extended: bool = False,
    all_settings: bool = False,
) -> pd.DataFrame:
    """The predictions of a profile: the paper's tasks under the static settings (``post``,
    ``pre``) unless ``extended`` / ``all_settings`` ask for more.

    Args:
        profile: build profile.
        dedupe: keep only the latest row per (qid, strategy, backbone, prep_model, setting)
            (a ``retry_errors`` re-run supersedes the failed row); False returns every row.
        extended: also the extended tasks' predictions (T10, docs/design.md "Extended
            question set") and the trap questions' (EEM, TLA, SUA, MQ); by default they are left out, so no paper-facing metric pools
            them with T1–T9.
        all_settings: also the rows of the memory-under-accumulation settings (``stream@t``,
            ``mixed`` ...; clinlib.tasks.settings). Off by default, so that the paper's
            analyses, which compare ``post`` with ``pre``, read what they always read.

    Returns:
        DataFrame with :data:`PREDICTION_COLUMNS` (empty if nothing was predicted yet).
    """
    why = guards.stale_basis(
        guards.read_basis(predictions_dir(profile)), guards.predictions_basis(profile)
    )
    if why:
        name = resolve_profile(profile)
        raise RunnerError(
            f"predictions in {predictions_dir(profile)} are stale: {why} changed since they "
            f"were made; re-run `clintrace evaluate-offline --profile {name}` (or `run`)"
        )
    frames = []
    for path in part_files(predictions_dir(profile)):
        try:
            frames.append(pd.read_parquet(path))
        except Exception as exc:  # parts are renamed into place whole; this is corruption
            raise RunnerError(f"unreadable predictions part file {path}: {exc}") from None
    if not frames:
        return typed(pd.DataFrame(columns=list(PREDICTION_COLUMNS)))
    df = pd.concat(frames, ignore_index=True)
    missing = [c for c in KEY_COLUMNS if c not in df.columns]
    if missing:
        raise RunnerError(f"predictions in {predictions_dir(profile)} lack columns {missing}")
    if not all_settings:
        df = df[df["setting"].isin(STATIC_SETTINGS)].reset_index(drop=True)
    df = current_readers(df, predictions_dir(profile))
    if dedupe:
        df = df.drop_duplicates(list(KEY_COLUMNS), keep="last").reset_index(drop=True)
    if "task" in df.columns:
        df = _current_rows(df, profile, extended)
    return df


def current_readers(df: pd.DataFrame, where: Path | str = "predictions") -> pd.DataFrame:
    """``df`` without the offline readers' rows made by another policy version
    (:mod:`clinlib.eval.readers.version`; parts from before the version was recorded read
    back NA and count as another version), with one warning line when there are any."""
    if "backbone" not in df.columns or df.empty:
        return df
    version = df["reader_version"] if "reader_version" in df.columns else pd.Series(pd.NA, df.index)
    stale = df["backbone"].isin(READER_BACKBONES) & (version.astype("string") != policy_digest())
    stale = stale.fillna(True) & df["backbone"].isin(READER_BACKBONES)
    if not stale.any():
        return df
    log.warning(
        "%d offline-reader prediction(s) in %s were made by another reader policy version "
        "and are left out (a run asks them again)",
        int(stale.sum()),
        where,
    )
    return df[~stale].reset_index(drop=True)


def _current_rows(df: pd.DataFrame, profile: str | None, extended: bool) -> pd.DataFrame:
    """Paper tasks' rows; with ``extended``, also the extended tasks' (and the trap query
    types') rows that answer a question of the current extended (trap) set (its qids hash the whole question, so an answer to
    a re-rendered or dropped question is left out, and re-asked by a run)."""
    keep = df["task"].isin(list(TASK_NAMES))
    if extended and not keep.all():
        current: set[str] = set()
        for art in (EXTENDED_ARTIFACT, TRAP_ARTIFACT):  # the trap questions' rows too
            path = artifact_path(f"{art}.parquet", profile)
            current |= (
                set(pd.read_parquet(path, columns=["qid"])["qid"]) if path.exists() else set()
            )
        keep |= df["qid"].isin(current)
    return df if keep.all() else df[keep].reset_index(drop=True)


def row_scores(preds: pd.DataFrame, lenient: bool = False) -> pd.Series:
    """The graded score of each prediction (``score`` / ``score_lenient``), falling back to
    ``correct`` as 1.0 / 0.0 for parts written before scores were recorded (NA stays NaN:
    an unjudged free-text row has no score)."""
    col, fallback = ("score_lenient", "correct_lenient") if lenient else ("score", "correct")
    base = preds[fallback].astype("boolean").astype("Float64").astype(float)
    if col not in preds.columns:
        return base
    return pd.to_numeric(preds[col], errors="coerce").astype(float).fillna(base)


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with exactly the :data:`PREDICTION_DTYPES` columns, in order and typed (a
    missing column is all NA). The frame is assembled once from its typed columns: inserting
    them one by one re-blocks the frame per column (a third of the offline readers' writing)."""
    columns = {}
    for col, dtype in PREDICTION_DTYPES.items():
        if not len(df):
            columns[col] = pd.Series([], dtype=dtype, index=df.index)
            continue
        values = df[col] if col in df.columns else pd.Series([None] * len(df), index=df.index)
        columns[col] = values.astype(dtype)
    return pd.DataFrame(columns, index=df.index)


def clean_stale_temps(directory: Path) -> None:
    """Remove temporaries left by a killed writer (their pid is no longer running)."""
    if not directory.is_dir():
        return
    for tmp in directory.glob(f".{PART_PREFIX}*.tmp-*"):
        match = re.search(r"\.tmp-(\d+)$", tmp.name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        tmp.unlink(missing_ok=True)


def write_part(rows: list[dict[str, Any]], profile: str | None, run_id: str, seq: int) -> Path:
    """Append rows as one atomic part file of the predictions dataset.

    Args:
        rows: prediction rows (see :data:`PREDICTION_COLUMNS`).
        profile: build profile.
        run_id: id of the writing run.
        seq: the run's part counter.

    Returns:
        The part file's path.
    """
    now = time.time_ns()
    df = pd.DataFrame(rows)
    df["written_at"] = pd.Timestamp(now, unit="ns", tz=UTC)
    name = f"{PART_PREFIX}{now:020d}-{run_id}-{seq:05d}.parquet"
    return write_parquet(typed(df), predictions_dir(profile) / name)


def done_keys(profile: str, retry_errors: bool, retry_empty: bool = False) -> set[tuple[str, ...]]:
    preds = load_predictions(profile, extended=True, all_settings=True)
    if retry_errors:
        preds = preds[preds["error"].isna()]
    if retry_empty and len(preds):
        preds = preds[~preds["empty"].fillna(False).astype(bool)]
    return set(preds[list(KEY_COLUMNS)].astype(str).itertuples(index=False, name=None))


def cell_summary(preds: pd.DataFrame) -> pd.DataFrame:
    """Accuracy, graded score, failures, tokens and cost per cell of a predictions table.

    Accuracy and the mean graded score (strict and lenient) are over rows without a transport
    error (an error is not an answer; ``retry_errors`` re-asks it) and with a decided
    ``correct`` (an NA free-text trap row is left out, not counted wrong); empty completions
    count as wrong (D1). A cell of only NA rows has accuracy NaN. For the paper's tasks the mean score equals the accuracy.

    Args:
        preds: predictions (e.g. :func:`load_predictions`).

    Returns:
        One row per (strategy, backbone, prep_model, setting) with n_predicted, accuracy,
        accuracy_lenient, parse_failures, empty, errors, input / output / cached tokens,
        cost_usd, mean_score, mean_score_lenient.
    """
    cols = [*CELL_COLUMNS, *STORED_METRICS]
    if preds.empty:
        return pd.DataFrame(columns=cols)
    decided = preds["correct"].astype("boolean").notna().to_numpy(bool)
    df = preds.assign(
        ok=preds["error"].isna(),
        scored=preds["error"].isna() & decided,
        c=preds["correct"].astype("boolean").fillna(False).astype(bool) & preds["error"].isna(),
        cl=preds["correct_lenient"].astype("boolean").fillna(False).astype(bool)
        & preds["error"].isna(),
        pf=preds["parse_failed"].astype(bool) & preds["error"].isna(),
        s=row_scores(preds).where(preds["error"].isna(), 0.0),
        sl=row_scores(preds, lenient=True).where(preds["error"].isna(), 0.0),
    )
    g = df.groupby(list(CELL_COLUMNS), sort=False, dropna=False)
    out = g.agg(
        n_predicted=("qid", "size"),
        n_ok=("ok", "sum"),
        n_scored=("scored", "sum"),
        n_correct=("c", "sum"),
        n_correct_lenient=("cl", "sum"),
        parse_failures=("pf", "sum"),
        empty=("empty", "sum"),
        input_tokens=("input_tokens", "sum"),
        output_tokens=("output_tokens", "sum"),
        cached_tokens=("cached_tokens", "sum"),
        cost_usd=("cost_usd", "sum"),
        sum_score=("s", "sum"),
        sum_score_lenient=("sl", "sum"),
    ).reset_index()
    denom = out["n_scored"].where(out["n_scored"] > 0)
    out["accuracy"] = out["n_correct"] / denom
    out["accuracy_lenient"] = out["n_correct_lenient"] / denom
    # the graded mean (= accuracy for accuracy tasks; mean Kendall's tau over T10 rows)
    out["mean_score"] = out["sum_score"] / denom
    out["mean_score_lenient"] = out["sum_score_lenient"] / denom
    out["errors"] = out["n_predicted"] - out["n_ok"]
    return out[cols]
