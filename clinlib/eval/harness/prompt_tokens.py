"""Persisted prompt token counts per question and cell (Appendix D cost accounting).

A cost estimate (:func:`clinlib.eval.harness.runner.estimate`, notebook 10's token totals, notebook 06's
T3 costs) needs the input tokens of every question's messages under every strategy, which
used to mean rebuilding every context. The harness already builds those contexts when it
answers (``evaluate-offline``), so it records, per (qid, strategy label, prep model, setting),
the exact message token count (:func:`clinlib.llm.count_tokens`, what ``usage.prompt_tokens``
reports) under each offline encoding (:data:`ENCODINGS`). An estimate reads them back for
every cell they fully cover and builds contexts only for the rest.

Artifact: ``data/build/<profile>/prompt_tokens/part-*.parquet`` (:data:`COLUMNS`), appended
atomically like the predictions, with a ``_basis.json`` (clinlib.core.guards "predictions basis")
recording the question set and dialogues the counts were made from, plus a fingerprint of the
prompt template and the token accounting. Counts made on another basis are refused: the
folder is cleared before new counts are written, and :func:`load_counts` returns nothing for
it, so an estimate rebuilds the contexts instead of pricing stale prompts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from clinlib.core import guards
from clinlib.core.config import artifact_path, build_dir
from clinlib.core.io import write_parquet
from clinlib.eval.harness.prompts import build_messages
from clinlib.llm import count_tokens, tokens

log = logging.getLogger(__name__)

PROMPT_TOKENS_DIR = "prompt_tokens"
PART_PREFIX = "part-"
# The offline encodings (clinlib.llm.tokens): o200k for current OpenAI models, cl100k for the
# rest (exact for older OpenAI models, an approximation for others).
ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")
# A model id per encoding, to count with count_tokens (which maps a model to its encoding).
_ENCODING_MODEL = {"cl100k_base": "gpt-4", "o200k_base": "gpt-4o"}
KEY = ("qid", "strategy", "prep_model", "setting", "encoding")
COLUMNS: dict[str, str] = {
    "qid": "string",
    "strategy": "string",
    "prep_model": "string",
    "setting": "string",
    "encoding": "string",
    "input_tokens": "int64",
}


def tokens_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/prompt_tokens/`` (not created)."""
    return build_dir(profile) / PROMPT_TOKENS_DIR


def prompt_fingerprint() -> str:
    """sha256 of the messages of a probe question and of the per-message accounting: a change
    to the prompt template (clinlib.eval.harness.prompts) or to the counting makes old counts stale."""
    probe = build_messages({"question": "Q?"}, "C.")
    accounting = (tokens.TOKENS_PER_MESSAGE, tokens.TOKENS_PER_NAME, tokens.TOKENS_REPLY_PRIMING)
    blob = json.dumps([probe, accounting, _ENCODING_MODEL], sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def basis(profile: str) -> dict[str, str | None]:
    """What counts are valid for: the predictions basis plus :func:`prompt_fingerprint`."""
    return {**guards.predictions_basis(profile), "prompt": prompt_fingerprint()}


def _parts(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{PART_PREFIX}*.parquet")) if directory.is_dir() else []


def claim(profile: str) -> None:
    """Make the folder hold counts of the current basis only: counts of another basis are
    deleted (they are recomputed from contexts at no cost but time), then the basis is
    recorded. Called before counts are appended (once by the parent of parallel runs)."""
    if not artifact_path("questions.parquet", profile).exists():
        return  # nothing to count yet; create no folder for a profile never built
    directory = tokens_dir(profile)
    current = basis(profile)
    recorded = guards.read_basis(directory)
    if recorded != current and _parts(directory):
        log.warning("prompt token counts in %s were made on another basis: removed", directory)
        shutil.rmtree(directory)
    if recorded != current:
        guards.write_basis(directory, current)


def count_messages(
    messages: Sequence[Sequence[dict]], encodings: Sequence[str] = ENCODINGS
) -> dict[str, list[int]]:
    """Exact message token counts (as :func:`clinlib.llm.count_tokens`) per encoding."""
    out = {}
    for enc in encodings:
        model = _ENCODING_MODEL[enc]
        tokens.warm_message_counts(messages, model)  # the long contents, on threads
        out[enc] = [count_tokens(m, model) for m in messages]
    return out


def record(
    profile: str,
    cell: tuple[str, str, str],
    qids: Sequence[str],
    messages: Sequence[Sequence[dict]],
) -> Path | None:
    """Append the counts of one (strategy label, prep model, setting) cell's messages.

    Args:
        profile: build profile (its folder must have been :func:`claim`-ed for this basis).
        cell: (strategy label, prep model, setting).
        qids: the questions, in the order of ``messages``.
        messages: each question's chat messages (clinlib.eval.harness.prompts.build_messages).

    Returns:
        The part file written (None: nothing to write, or the basis changed meanwhile).
    """
    if not qids:
        return None
    directory = tokens_dir(profile)
    if guards.read_basis(directory) != basis(profile):
        return None  # claimed for another basis (a concurrent rebuild): write nothing stale
    counts = count_messages(messages)
    label, prep, setting = cell
    frames = [
        pd.DataFrame(
            {
                "qid": list(qids),
                "strategy": label,
                "prep_model": prep,
                "setting": setting,
                "encoding": enc,
                "input_tokens": n,
            }
        )
        for enc, n in counts.items()
    ]
    df = pd.concat(frames, ignore_index=True).astype(COLUMNS)
    name = f"{PART_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    return write_parquet(df, directory / name)


def no_counts() -> pd.DataFrame:
    """A counts table without rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def load_counts(profile: str) -> pd.DataFrame:
    """Every recorded count of the current basis, the latest per key (no rows when none were
    recorded, or when they were made on another basis: those are refused)."""
    directory = tokens_dir(profile)
    parts = _parts(directory)
    if not parts:
        return no_counts()
    if guards.read_basis(directory) != basis(profile):
        log.info("prompt token counts in %s are stale (another basis): not used", directory)
        return no_counts()
    df = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    return df.drop_duplicates(list(KEY), keep="last").reset_index(drop=True)


def encoding_of(model: str) -> str:
    """The offline encoding that counts ``model``'s tokens (a model with a tokenizer of its own,
    e.g. the local model, is named by it: no recorded OpenAI-encoding count stands for it)."""
    own = tokens.model_tokenizer(model)
    return own.name if own is not None else tokens.encoding_for_model(model)
