"""Predictions made elsewhere, scored and stored like the kit's own (``clintrace score``).

A researcher who ran the question set through their own harness or memory system hands over
a file of responses; this module parses and scores each one with the task's own parsers
(:func:`clinlib.eval.harness.cells.scored_fields`, paper §4 "Backbones", Appendix G.3) and
appends them to the profile's predictions dataset as ONE atomic part file
(:func:`clinlib.eval.harness.store.write_part`), so every notebook, statistic and the failure explorer
read them like a run's rows. Nothing is written unless the whole file passes.

Input (one row per answer): JSONL (``.jsonl``/``.json`` lines) or parquet with

* ``qid``, ``strategy`` (the representation's label), ``backbone`` (the model's label),
  ``response`` (the raw text; null = no answer);
* optional: ``setting`` (``post`` default, or ``pre``), ``prep_model`` (default
  :data:`EXTERNAL_PREP`), ``task``, ``question`` (the question text asked), ``question_set``
  (:func:`question_set_digest` of the set it was exported from), ``error``,
  ``input_tokens``, ``output_tokens``, ``cost_usd``, ``latency_s``, ``finish_reason``.

An inspect_ai log (``.eval`` / ``.json``) is read by :mod:`clinlib.eval.interop.inspect_log`.

Refused, with one line naming the file, line / row, column and value (:class:`ScoreFileError`):
a missing column, a non-UTF-8 or non-JSON line, an unknown qid, a duplicate key within the
file or against stored predictions of the same labels (unless ``replace``), a stale question
set (``question_set`` differs from the current set's digest, or ``question`` / ``task`` differ
from the current question's), a setting other than ``post`` / ``pre`` (or ``pre`` for a
non-T3 question), and, with ``allow_wrong_task=False`` (``--refuse-wrong-task``), an answer
for the wrong task (:func:`wrong_task`). By default an off-format answer is scored as a parse
failure, exactly as the kit's own run scores it, so an inspect log scores back whole; the
count is said in one line.

Labels: the backbone label always carries :data:`EXTERNAL_PREFIX` (added when absent), so an
outside model never shares a name with a kit backbone and is never presented as a kit run.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.eval.harness.cells import question_options, scored_fields
from clinlib.eval.harness.store import KEY_COLUMNS, claim_predictions, load_predictions, write_part
from clinlib.tasks import TASKS
from clinlib.tasks.answers import ALL_TASK_NAMES
from clinlib.tasks.answers.kinds import PROBES
from clinlib.tasks.answers.parse import read_strict
from clinlib.tasks.extended import load_questions, question_digest

log = logging.getLogger("clinlib.eval")

EXTERNAL_PREFIX = "ext:"
EXTERNAL_PREP = "external"
REQUIRED_COLUMNS: tuple[str, ...] = ("qid", "strategy", "backbone", "response")
FORMATS_TAKEN = "JSON lines (.jsonl), parquet (.parquet) or an inspect_ai log (.eval / .json)"
SCORE_SETTINGS: tuple[str, ...] = ("post", "pre")
NUMERIC_COLUMNS: tuple[str, ...] = ("input_tokens", "output_tokens", "cost_usd", "latency_s")


def answer_shape(task: str) -> str:
    """What an answer of ``task`` looks like (its spec's answer kind), the task name if unknown."""
    spec = TASKS.get(task)
    return spec.answer.shape if spec is not None and spec.answer is not None else task


class ScoreFileError(ValueError):
    """A predictions file that cannot be scored (one line: file, row, column, value)."""


def external_label(label: str) -> str:
    """``label`` with :data:`EXTERNAL_PREFIX` (kept as is when it already has it)."""
    label = str(label).strip()
    return label if label.startswith(EXTERNAL_PREFIX) else f"{EXTERNAL_PREFIX}{label}"


def question_set_digest(profile: str | None = None) -> str:
    """The digest a file records as ``question_set``: sha256 of the paper set's questions and
    golds (:func:`clinlib.tasks.extended.question_digest`; the extended set's qids hash their
    own content, so a stale extended answer shows as an unknown qid)."""
    return question_digest(load_questions(profile))


def all_questions(profile: str | None = None) -> pd.DataFrame:
    """The paper set plus the extended set when it was built (an outside file may answer both)."""
    try:
        return load_questions(profile, ALL_TASK_NAMES)
    except FileNotFoundError:
        return load_questions(profile)


def read_table(path: str | Path) -> pd.DataFrame:
    """The rows of a JSONL or parquet predictions file (``row`` = 1-based line / row)."""
    path = Path(path)
    if not path.is_file():
        raise ScoreFileError(f"{path}: no such file")
    if path.suffix.lower() in (".csv", ".tsv", ".xlsx"):
        raise ScoreFileError(
            f"{path}: {path.suffix} is not read; clintrace score takes {FORMATS_TAKEN}"
        )
    if path.suffix == ".parquet":
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # a corrupt or non-parquet file
            raise ScoreFileError(f"{path}: not a readable parquet file ({exc})") from None
        return df.assign(row=range(1, len(df) + 1))
    rows = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScoreFileError(f"{path}: line {n} is not UTF-8 (byte {exc.start})") from None
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScoreFileError(
                f"{path}: line {n} is not JSON ({exc.msg}); clintrace score takes {FORMATS_TAKEN}"
            ) from None
        if not isinstance(rec, dict):
            raise ScoreFileError(f"{path}: line {n} is not a JSON object")
        rows.append({**rec, "row": n})
    if not rows:
        raise ScoreFileError(f"{path}: no predictions in the file")
    return pd.DataFrame(rows)


def wrong_task(task: str, response: str | None, options: list[str] | None) -> str | None:
    """The answer shape of ``response`` when it is plainly an answer to another task: it does
    not parse as ``task``'s answer (strict nor lenient) but parses strictly as a bare answer of
    another shape (e.g. ``42`` or ``LAB-1;LAB-2`` for a yes/no question). None otherwise (a
    parse failure the task's own scorer judges wrong)."""
    spec = TASKS.get(task)
    if response is None or not str(response).strip() or spec is None or spec.answer is None:
        return None
    if spec.parse_strict(response, options) is not None:
        return None
    if spec.parse_lenient(response, options) is not None:
        return None
    for kind in PROBES:
        if kind.shape != spec.answer.shape and read_strict(kind, response) is not None:
            return kind.shape
    return None


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _check_columns(df: pd.DataFrame, path: Path) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ScoreFileError(
            f"{path}: missing column(s) {missing}; required: {list(REQUIRED_COLUMNS)}"
        )
    for col in ("qid", "strategy", "backbone"):
        blank = df[col].isna() | (df[col].astype(str).str.strip() == "")
        if blank.any():
            raise ScoreFileError(
                f"{path}: row {df.loc[blank, 'row'].iloc[0]}: column {col} is empty"
            )


def _check_row(
    r: Mapping[str, Any],
    q: Mapping[str, Any],
    where: str,
    current_digest: str,
    allow_wrong_task: bool,
) -> None:
    """One row against its current question: recorded set, task and text, setting, shape."""
    recorded = _text(r.get("question_set"))
    if recorded and recorded != current_digest:
        raise ScoreFileError(
            f"{where}: question_set {recorded[:12]}… is not the current question set "
            f"({current_digest[:12]}…): the file was made for another build; export again"
        )
    for col in ("task", "question"):
        given = _text(r.get(col))
        if given is not None and given != str(q[col]):
            shown = given if len(given) <= 40 else given[:40] + "…"
            raise ScoreFileError(
                f"{where}: {col} {shown!r} differs from the current question's: stale question set"
            )
    setting = _text(r.get("setting")) or "post"
    if setting not in SCORE_SETTINGS:
        raise ScoreFileError(f"{where}: setting {setting!r} not one of {list(SCORE_SETTINGS)}")
    if setting == "pre" and q["task"] != "T3":
        raise ScoreFileError(
            f"{where}: setting 'pre' is asked of T3 questions only, not {q['task']}"
        )
    shape = (
        None
        if allow_wrong_task
        else wrong_task(q["task"], _text(r.get("response")), question_options(q))
    )
    if shape is not None:
        raise ScoreFileError(
            f"{where}: response {str(r['response'])[:40]!r} is a {shape} answer, not a "
            f"{answer_shape(q['task'])} answer for {q['task']} (wrong task? without "
            "--refuse-wrong-task it is scored as a parse failure, as the kit's own run does)"
        )


def prepare_rows(
    df: pd.DataFrame,
    path: Path,
    questions: pd.DataFrame,
    current_digest: str,
    allow_wrong_task: bool = False,
) -> list[dict[str, Any]]:
    """Checked, scored prediction rows for the file's table (raises ScoreFileError)."""
    _check_columns(df, path)
    by_qid = {q["qid"]: q for q in questions.to_dict("records")}
    unknown = df.loc[~df["qid"].astype(str).isin(by_qid)]
    if len(unknown):
        first = unknown.iloc[0]
        raise ScoreFileError(
            f"{path}: row {first['row']}: qid {first['qid']!r} is not a question of this build "
            f"({len(unknown)} unknown qid(s) in the file)"
        )
    out, seen = [], {}
    for r in df.to_dict("records"):
        where = f"{path}: row {r['row']} (qid {r['qid']})"
        q = by_qid[str(r["qid"])]
        _check_row(r, q, where, current_digest, allow_wrong_task)
        error = _text(r.get("error"))
        response = None if error else _text(r.get("response"))
        row = {
            "qid": str(r["qid"]),
            "task": q["task"],
            "subtype": q.get("subtype"),
            "strategy": str(r["strategy"]).strip(),
            "backbone": external_label(r["backbone"]),
            "prep_model": _text(r.get("prep_model")) or EXTERNAL_PREP,
            "setting": _text(r.get("setting")) or "post",
            **scored_fields(q, response),
            "empty": bool(error is None and not (response or "").strip()),
            "finish_reason": _text(r.get("finish_reason")),
            "from_cache": False,
            "error": error,
            "error_kind": "external" if error else None,
            "context_tokens": 0,
            **{c: _number(r.get(c), where, c) for c in NUMERIC_COLUMNS},
            "cached_tokens": 0,
        }
        key = tuple(row[c] for c in KEY_COLUMNS)
        if key in seen:
            raise ScoreFileError(f"{where}: duplicate key {key} (first at row {seen[key]})")
        seen[key] = r["row"]
        out.append(row)
    return out


def _number(value: Any, where: str, col: str) -> float | int:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return 0
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ScoreFileError(f"{where}: column {col} value {value!r} is not a number") from None
    if number < 0:
        raise ScoreFileError(f"{where}: column {col} value {value!r} is negative")
    return int(number) if col.endswith("_tokens") else number


def score_file(
    path: str | Path,
    profile: str | None = None,
    *,
    replace: bool = False,
    allow_wrong_task: bool = True,
    table: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Score a file of outside predictions and append them to the profile's predictions.

    Args:
        path: JSONL or parquet file (see the module docstring).
        profile: build profile whose questions were answered.
        replace: supersede stored predictions with the same keys (else refused).
        allow_wrong_task: score an answer of another task's shape as a parse failure, exactly
            as the kit's own run scores an off-format answer (default); False refuses the file.
        table: the rows already read (an inspect log, :mod:`clinlib.eval.interop.inspect_log`).

    Returns:
        The stored rows (:data:`clinlib.eval.harness.store.PREDICTION_COLUMNS`).
    """
    path = Path(path)
    df = read_table(path) if table is None else table
    questions = all_questions(profile)
    rows = prepare_rows(df, path, questions, question_set_digest(profile), allow_wrong_task)
    off = [r for r in rows if r["parse_failed"] and r["response"] is not None]
    if off:
        log.warning(
            "%s: %d off-format answer(s) scored as parse failures, as the kit's own run scores "
            "them (e.g. qid %s: %r)",
            path,
            len(off),
            off[0]["qid"],
            str(off[0]["response"])[:40],
        )
    claim_predictions(profile)  # stale predictions moved aside, as a run does
    if not replace:
        stored = load_predictions(profile, extended=True, all_settings=True)
        done = set(stored[list(KEY_COLUMNS)].astype(str).itertuples(index=False, name=None))
        for r in rows:
            key = tuple(r[c] for c in KEY_COLUMNS)
            if key in done:
                raise ScoreFileError(
                    f"{path}: key {key} is already stored (same qid, strategy, backbone, prep "
                    "model and setting); --replace supersedes the stored predictions"
                )
    run_id = f"score-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    rows = [{**r, "run_id": run_id} for r in rows]  # a run's summary selects its rows by run_id
    write_part(rows, profile, run_id, 0)
    return pd.DataFrame(rows)
