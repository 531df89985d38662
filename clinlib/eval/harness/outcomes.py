"""What a run recorded, by failure class, and whether its exit status says it worked.

Paper §4 ("Backbones") and Appendices D-E: every question asked gets a prediction
row; a request that failed after its retries is a row with ``error`` set (Appendix E.1), an
empty completion a row scored wrong (D1). Nothing is dropped: the rows are recorded, and a
re-run with ``--retry-errors`` / ``--retry-empty`` asks them again. This module names each
failure class with its count and its remedy, and judges a run by ITS OWN rows only (a re-run
that sends nothing is not failed for rows stored by earlier runs).

Exit-code contract of ``clintrace run`` (README "Real endpoints"): 0 the run finished (a
budget stop included: the summary's ``stopped`` says why); 2 bad input or a refusal (one
line), no prediction at all, more than :data:`MAX_DROP_SHARE` of this run's rows are errors,
or none of them is an answer (``--accept-errors`` accepts the rows and exits 0); 3 provider
batch jobs still running (a re-run collects them); 130 interrupted (Ctrl-C), after one line
saying what was saved and how to resume.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.core.guards import MAX_DROP_SHARE, StageError
from clinlib.eval.harness.store import CELL_COLUMNS
from clinlib.llm.retry import CONTEXT_OVERFLOW, CONTEXT_OVERFLOW_KIND

CONTEXT_OVERFLOW_CLASS = "context overflow"
TRANSPORT_CLASS = "transport error"
EMPTY_CLASS = "empty completion"
# error_kind (clinlib.llm.retry, clinlib.llm.batch, the client's offline path) -> class.
KIND_CLASS: dict[str, str] = {
    CONTEXT_OVERFLOW_KIND: CONTEXT_OVERFLOW_CLASS,
    "timeout": TRANSPORT_CLASS,
    "connection": TRANSPORT_CLASS,
    "server_error": TRANSPORT_CLASS,
    "rate_limit": TRANSPORT_CLASS,
    "bad_response": TRANSPORT_CLASS,
    "client_error": "request refused",
    "batch_expired": "batch expiry",
    "policy_error": "offline reader failure",
}
BATCH_CLASS = "batch job failure"  # batch_failed, batch_error, batch_missing, batch_<status>
# class -> what to do about it (printed after the count).
REMEDIES: dict[str, str] = {
    CONTEXT_OVERFLOW_CLASS: "the prompt plus the output cap exceeds the backbone's context "
    "window, so it was not sent (or the server refused it): use a backbone with a larger "
    "window (context_window in its TOML) or a shorter strategy, e.g. last-visit-only",
    TRANSPORT_CLASS: "answers already received are cached; re-run the same command with "
    "--retry-errors to ask these again",
    "request refused": "the endpoint refused the request (key, model name or parameters: see "
    "the error column); fix that, then re-run with --retry-errors",
    "batch expiry": "the provider did not answer within its batch window; re-run with "
    "--retry-errors (with --batch they go in a new job)",
    BATCH_CLASS: "re-run with --retry-errors (the error column says what the job reported)",
    "offline reader failure": "an offline reader raised (a bug: see the error column)",
    EMPTY_CLASS: "kept and scored wrong (Appendix D1); re-ask them with --retry-empty",
}
_KIND_PREFIX = re.compile(r"^([a-z_]+) after \d+ attempt")


def failure_class(kind: Any, message: Any = None) -> str:
    """The class of one error: by its ``error_kind``, or, for rows written before that column
    existed, by the kind the client's message starts with (or its wording)."""
    if not isinstance(kind, str) or not kind:
        text = str(message or "")
        found = _KIND_PREFIX.match(text)
        kind = found.group(1) if found else ""
        if kind in ("", "client_error") and CONTEXT_OVERFLOW.search(text):
            kind = CONTEXT_OVERFLOW_KIND
    if kind in KIND_CLASS:
        return KIND_CLASS[kind]
    return BATCH_CLASS if kind.startswith("batch_") else TRANSPORT_CLASS


def failure_classes(preds: pd.DataFrame) -> pd.Series:
    """Each row's failure class (None for rows without an error)."""
    if preds.empty:
        return pd.Series([], dtype=object, index=preds.index)
    kinds = preds["error_kind"] if "error_kind" in preds else pd.Series(None, index=preds.index)
    err = preds["error"]
    return pd.Series(
        [
            failure_class(k, m) if pd.notna(m) else None
            for k, m in zip(kinds.astype(object), err.astype(object), strict=True)
        ],
        index=preds.index,
        dtype=object,
    )


def new_outcomes(preds: pd.DataFrame, mine: pd.Series) -> pd.DataFrame:
    """Per cell, this run's rows (``mine``): errors, empty completions, errors by class.

    Returns:
        CELL_COLUMNS + new_errors, new_empty, new_failures (dict class -> count).
    """
    rows = preds[mine.astype(bool)] if len(preds) else preds
    cols = [*CELL_COLUMNS, "new_errors", "new_empty", "new_failures"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    df = rows.assign(
        _class=failure_classes(rows),
        _empty=rows["empty"].fillna(False).astype(bool) & rows["error"].isna(),
    )
    out = []
    for cell, g in df.groupby(list(CELL_COLUMNS), sort=False, dropna=False):
        counts = g["_class"].dropna().value_counts()
        out.append(
            (
                *cell,
                int(g["_class"].notna().sum()),
                int(g["_empty"].sum()),
                {str(k): int(v) for k, v in counts.items()},
            )
        )
    return pd.DataFrame(out, columns=cols)


def own_outcome(new: pd.DataFrame, cell: tuple[str, ...]) -> dict[str, Any]:
    """One cell's new_errors / new_empty / new_failures from :func:`new_outcomes`' table."""
    hit = new[(new[list(CELL_COLUMNS)] == pd.Series(cell, index=list(CELL_COLUMNS))).all(axis=1)]
    if hit.empty:
        return {"new_errors": 0, "new_empty": 0, "new_failures": {}}
    row = hit.iloc[0]
    return {
        "new_errors": int(row["new_errors"]),
        "new_empty": int(row["new_empty"]),
        "new_failures": dict(row["new_failures"]),
    }


def failures_text(classes: Mapping[str, int]) -> str:
    """``context overflow x3 (remedy); transport error x1 (remedy)``, largest first."""
    ordered = sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(
        f"{cls} x{n} ({REMEDIES.get(cls, 'see the error column')})" for cls, n in ordered if n
    )


def _summed(summary: pd.DataFrame) -> Counter[str]:
    total: Counter[str] = Counter()
    for value in summary.get("new_failures", pd.Series(dtype=object)):
        if isinstance(value, Mapping):
            total.update({str(k): int(v) for k, v in value.items()})
    return total


def check_run(stage: str, summary: pd.DataFrame, allow_drops: bool = False) -> list[str]:
    """Judge a run by the rows it recorded itself (see the module's exit-code contract).

    Args:
        stage: the command name, for the message.
        summary: the runner's cell summary (n_predicted, errors, new_predictions, new_errors,
            new_empty, new_failures per cell).
        allow_drops: accept a run whose rows are mostly errors or empty.

    Returns:
        Lines to print (what failed, by class, with the remedy), empty when nothing did.

    Raises:
        StageError: no prediction at all, or (without ``allow_drops``) more than
            :data:`MAX_DROP_SHARE` of this run's rows are errors, or none is an answer.
    """
    cells = len(summary)
    predicted = int(summary["n_predicted"].sum()) if cells else 0
    if predicted == 0:
        asked = f" ({int(summary['n'].sum())} questions asked)" if "n" in summary else ""
        raise StageError(f"{stage}: 0 predictions in {cells} cell(s){asked}")
    new = int(summary["new_predictions"].sum()) if "new_predictions" in summary else 0
    if new == 0:
        stored = int(summary["errors"].sum())
        return (
            [
                f"{stage}: nothing new was asked; {stored} stored row(s) of earlier runs hold "
                "errors: re-run with --retry-errors to ask them again"
            ]
            if stored
            else []
        )
    classes = _summed(summary)
    errors = int(summary["new_errors"].sum())
    empty = int(summary["new_empty"].sum())
    if empty:
        classes[EMPTY_CLASS] = empty
    if not classes:
        return []
    head = (
        f"{stage}: of the {new} prediction(s) this run recorded, {errors} ended in an "
        f"error and {empty} are empty completions: {failures_text(classes)}"
    )
    share = errors / new
    unusable = errors + empty == new
    if (share > MAX_DROP_SHARE or unusable) and not allow_drops:
        why = (
            f"{share:.0%} errors > {MAX_DROP_SHARE:.0%} allowed"
            if share > MAX_DROP_SHARE
            else "no usable answer"
        )
        raise StageError(
            f"{head}. The rows are recorded ({why}); pass --accept-errors to accept them and exit 0"
        )
    return [head]


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C, after writing every answer it had received.

    Attributes:
        saved: prediction rows this run wrote.
        cache: the response cache holding every answer received.
    """

    def __init__(self, saved: int, cache: str) -> None:
        super().__init__(f"interrupted after {saved} prediction(s)")
        self.saved = saved
        self.cache = cache


def interrupted_line(exc: KeyboardInterrupt, command: str) -> str:
    """The one line a Ctrl-C ends a run with: what was saved, the cache, how to resume."""
    if not isinstance(exc, RunInterrupted):  # still building contexts: nothing was asked
        return (
            f"interrupted before any question was asked; nothing was saved (prep answers "
            f"received are cached); run again: {command}"
        )
    return (
        f"interrupted: {exc.saved} prediction(s) of this run are saved; every answer "
        f"received is in the response cache ({exc.cache}), so nothing is paid twice; "
        f"resume with: {command}"
    )
