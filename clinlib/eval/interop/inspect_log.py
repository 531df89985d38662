"""An inspect_ai evaluation log read back as outside predictions.

:func:`score_any` is what `clintrace score` calls: a JSONL / parquet file, or an inspect log.

``clintrace score LOG.eval`` (or inspect's ``.json`` log) turns each sample of a run of the
task ``clintrace export --format inspect`` wrote into one row for
:func:`clinlib.eval.interop.external.score_file`: qid, strategy, prep model, setting, task, question
and question-set digest from the sample's metadata; the response is the model's completion;
the backbone label is ``ext:<inspect model>`` (e.g. ``ext:openai-api/local/gpt-4o-mini``).
The kit re-scores the response with its own parsers; inspect's own score is not trusted, only
compared in the tests. inspect_ai is imported here only (an optional dependency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.eval.interop.external import ScoreFileError, score_file

METADATA_COLUMNS: tuple[str, ...] = (
    "qid",
    "strategy",
    "prep_model",
    "setting",
    "task",
    "question",
    "question_set",
)


def log_table(path: str | Path) -> pd.DataFrame:
    """One row per sample of an inspect log (``row`` = the sample's 1-based position)."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ScoreFileError(f"{path}: reading an inspect log needs inspect-ai installed") from None
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # a truncated or foreign file: one line
        raise ScoreFileError(f"{path}: not a readable inspect log ({type(exc).__name__})") from None
    if log.status != "success":
        raise ScoreFileError(f"{path}: the inspect run did not finish (status {log.status!r})")
    model = log.eval.model
    rows = []
    for n, sample in enumerate(log.samples or [], 1):
        md = sample.metadata or {}
        missing = [c for c in METADATA_COLUMNS[:4] if c not in md]
        if missing:
            raise ScoreFileError(
                f"{path}: sample {n} (id {sample.id}) lacks metadata {missing}: not a task "
                "written by `clintrace export --format inspect`"
            )
        usage = sample.output.usage if sample.output is not None else None
        rows.append(
            {
                "row": n,
                **{c: md.get(c) for c in METADATA_COLUMNS},
                "backbone": model,
                "response": sample.output.completion if sample.output is not None else None,
                "error": sample.error.message if sample.error is not None else None,
                "input_tokens": usage.input_tokens if usage is not None else None,
                "output_tokens": usage.output_tokens if usage is not None else None,
                "latency_s": sample.total_time,
            }
        )
    if not rows:
        raise ScoreFileError(f"{path}: the inspect log holds no samples")
    return pd.DataFrame(rows)


INSPECT_SUFFIXES: tuple[str, ...] = (".eval", ".json")


def score_any(path: str | Path, profile: str | None = None, **options: Any) -> pd.DataFrame:
    """:func:`score_file` for a JSONL / parquet file, or an inspect_ai log (``.eval``, or a
    ``.json`` log: a JSON object, not JSON lines) read by :mod:`clinlib.eval.interop.inspect_log`."""
    path = Path(path)
    if path.suffix in INSPECT_SUFFIXES and _is_inspect_log(path):
        return score_file(path, profile, table=log_table(path), **options)
    return score_file(path, profile, **options)


def _is_inspect_log(path: Path) -> bool:
    """An ``.eval`` file, or a ``.json`` file holding one JSON object with an ``eval`` header
    (inspect's JSON log; JSON lines parse as several values and are not one)."""
    if path.suffix == ".eval":
        return True
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "eval" in doc and "qid" not in doc
