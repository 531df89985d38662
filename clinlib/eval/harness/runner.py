"""The evaluation harness: (strategy, backbone, setting) cells over the fixed question set.

Paper §4 ("Backbones"; 200,672 predictions over 8 strategies x 4 backbones x the
T3 pre/post settings) and Appendices D-E (cost accounting from input / output / cache-read
tokens; empty completions D1 kept and scored wrong). Every question is answered with the one
fixed prompt of :mod:`clinlib.eval.harness.prompts` and the task's output cap
(:data:`clinlib.tasks.answers.MAX_TOKENS`), at temperature 0.

Settings (:mod:`clinlib.tasks.settings`; MedMemoryBench's ``stream`` and ``mixed`` too, see
:mod:`clinlib.eval.harness.cells`): under ``post`` every question is evaluated; under ``pre`` only T3 questions are,
because T3 (the staleness probe) is the only task whose context differs between the two
settings (T5's contradictions are built into the representation in both, and the other tasks
never see an injection), so re-asking them under ``pre`` would duplicate ``post`` exactly.

Artifacts: predictions are APPENDED to ``data/build/<profile>/predictions/`` as small parquet
part files (:mod:`clinlib.eval.harness.store`), each written atomically, so a crash (even SIGKILL) loses
at most the ``batch_size`` answers not yet written, and those are already in the response cache
(``llm_cache.sqlite``), so a re-run neither pays for them again nor duplicates a row. On start
the harness reads the keys ``(qid, strategy, backbone, prep_model, setting)`` already predicted
and skips them; ``retry_errors=True`` re-runs the rows that ended in an error, and
:func:`load_predictions` keeps the latest row per key. Questions and requests:
:mod:`clinlib.eval.harness.cells`; cost estimate: :mod:`clinlib.eval.harness.estimate`; several processes:
:mod:`clinlib.eval.harness.parallel`.

Usage::

    from clinlib.eval.harness import runner
    runner.estimate("quick", ["full-context"], ["gpt-4o-mini"])     # USD before sending
    spec = runner.RunSpec("quick", ["no-context-blind", "full-context"], ["reference"])
    cells = runner.run(spec, runner.RunOptions(budget_usd=1.0))
    preds = runner.load_predictions("quick")
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.core.lock import profile_lock
from clinlib.core.progress import make_progress
from clinlib.core.progress import progress as progress_bar
from clinlib.eval.harness import prompt_tokens
from clinlib.eval.harness.batchmode import BATCHES_DIR
from clinlib.eval.harness.cells import (
    SETTINGS,
    Item,
    build_items,
    generation_params,
    is_credentialed,
    prediction_row,
    prepare_cells,
    request_id,
    resolve_backbones,
    run_settings,
    select_questions,
    setting_questions,
)
from clinlib.eval.harness.estimate import ESTIMATE_COLUMNS, estimate
from clinlib.eval.harness.outcomes import RunInterrupted, new_outcomes, own_outcome
from clinlib.eval.harness.records import (
    DEFAULT_BATCH_SIZE,
    Cell,
    CellKey,
    PlanEntry,
    PredictionKey,
    RunOptions,
    RunSpec,
)
from clinlib.eval.harness.session import OFFLINE_BATCH_SIZE, Session, Tally
from clinlib.eval.harness.store import (
    CELL_COLUMNS,
    KEY_COLUMNS,
    PREDICTION_COLUMNS,
    PREDICTION_DTYPES,
    SUMMARY_COLUMNS,
    RunnerError,
    cell_summary,
    claim_predictions,
    clean_stale_temps,
    done_keys,
    load_predictions,
    predictions_dir,
    write_part,
)
from clinlib.llm import check_egress, default_cache_path
from clinlib.llm.context import context_window
from clinlib.tasks import SPECS
from clinlib.tasks.settings import PRE_TASKS

log = logging.getLogger("clinlib.eval.harness.runner")

# How network backbones are asked: one request at a time ("live"), or as provider batch jobs
# at the batch price (clinlib.llm.batch), whose records live in BATCHES_DIR of the profile.
MODES: tuple[str, ...] = ("live", "batch")
# ``api``: "openai" or "anthropic" (Message Batches; default: chosen by the endpoint's host)
BATCH_OPTIONS: frozenset[str] = frozenset(
    {"poll_interval_s", "max_wait_s", "max_requests", "max_bytes", "api"}
)


def _check_run_args(spec: RunSpec, options: RunOptions) -> None:
    run_settings(spec.settings)  # a bad spec is refused before anything is read
    budget_usd, batch_size = options.budget_usd, options.batch_size
    if budget_usd is not None and (not isinstance(budget_usd, int | float) or budget_usd < 0):
        raise RunnerError(f"budget_usd must be a number >= 0, got {budget_usd!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise RunnerError(f"batch_size must be a positive integer, got {batch_size!r}")
    if options.mode not in MODES:
        raise RunnerError(f"mode must be one of {MODES}, got {options.mode!r}")
    batch_options = options.batch_options or {}
    unknown = sorted(set(batch_options) - BATCH_OPTIONS)
    if unknown:
        raise RunnerError(f"unknown batch option(s) {unknown}; known: {sorted(BATCH_OPTIONS)}")
    for name, value in batch_options.items():
        if name == "api":
            if value not in (None, "openai", "anthropic"):
                raise RunnerError(f"batch option api must be openai or anthropic, got {value!r}")
            continue
        if value is not None and (not isinstance(value, int | float) or value < 0):
            raise RunnerError(f"batch option {name} must be a number >= 0, got {value!r}")


def _claim(name: str, spec: RunSpec, options: RunOptions) -> set[tuple[str, ...]]:
    """Clear a killed writer's temporaries, claim the predictions folder (and the prompt
    counts) when the profile's own questions are asked, and return the keys already done."""
    clean_stale_temps(predictions_dir(name))
    if spec.own_questions:  # a run on a given question subset answers the profile's set too
        claim_predictions(name)
        prompt_tokens.claim(name)
    return done_keys(name, options.retry_errors, options.retry_empty)


def _plan(
    prepared: Sequence[Cell], done: set[tuple[str, ...]], own_questions: bool
) -> tuple[list[PlanEntry], dict[tuple[str, ...], list[Item]]]:
    """The plan (one entry per cell, with the items still to answer) and, when the profile's
    own questions are asked, one cell's items per (label, prep, setting) whose prompt counts
    are recorded after answering."""
    plan: list[PlanEntry] = []
    counted: dict[tuple[str, ...], list[Item]] = {}
    frames: dict = {}  # the question and context frames every backbone's cell shares
    for cell in prepared:
        if cell.finished:  # nothing to build or send
            plan.append(PlanEntry(cell.backbone, cell.key, len(cell.questions), []))
            continue
        items = build_items(cell.questions, cell.contexts, cell.backbone, frames)
        if own_questions:
            counted.setdefault(cell.key.basis, items)
        todo = [it for it in items if it.key not in done]
        plan.append(PlanEntry(cell.backbone, cell.key, len(items), todo))
    return plan, counted


def run(spec: RunSpec, options: RunOptions | None = None) -> pd.DataFrame:
    """Evaluate every (strategy, backbone, setting) cell of ``spec`` and append its predictions.

    Resumable: predicted keys are skipped (errors too, unless ``options.retry_errors``) and
    cached answers cost no API call; parts are written atomically every
    ``options.batch_size`` answers (network backbones answer through a pool: a hung request
    holds one slot; offline readers write at least OFFLINE_BATCH_SIZE per file).

    Args:
        spec: what to run (:class:`RunSpec`: profile, strategies, backbones, settings, prep,
            tasks, limit, questions).
        options: how (:class:`RunOptions`: budget, retries, mode, batch size, clients,
            progress, and ``wait_for_lock``: seconds to wait while another process writes
            this profile; ``clintrace run`` holds the lock already). None: the defaults.

    Returns:
        The cell summary: :data:`SUMMARY_COLUMNS` (accuracies over rows without a transport
        error; ``stopped`` says why a cell did not finish, e.g. the budget).
    """
    options = RunOptions() if options is None else options
    if not isinstance(spec, RunSpec) or not isinstance(options, RunOptions):
        raise TypeError("run takes a RunSpec and RunOptions: run(RunSpec(profile, ...), ...)")
    name = resolve_profile(spec.profile)
    # a writer (predictions, prompt counts, constructions): one per profile, from a notebook
    # as from `clintrace run` (clinlib.core.lock; a kernel of `clintrace notebooks` shares it)
    with profile_lock(name, wait=options.wait_for_lock):
        return _run(name, spec, options)


def _run(name: str, spec: RunSpec, options: RunOptions) -> pd.DataFrame:
    """The body of :func:`run`, under the profile's writer lock."""
    _check_run_args(spec, options)
    bbs = resolve_backbones(spec.backbones, options.config)
    credentialed = is_credentialed(name)
    for bb in bbs:  # refuse before any context is built or any request is sent
        check_egress(bb, credentialed, options.allow_unapproved)
    done = _claim(name, spec, options)
    position = options.progress_position
    tag = f" [{position + 1}]" if position is not None else ""
    with progress_bar(
        None, f"contexts {name}{tag}", "context", enabled=options.progress, position=position
    ) as ctx_bar:
        prepared = prepare_cells(name, spec, bbs, done=done, config=options.config, bar=ctx_bar)
    plan, counted = _plan(prepared, done, spec.own_questions)
    session = _session(name, plan, tag, options, credentialed)
    _execute(session, plan, counted)
    return summarize(
        summary_predictions(name, spec.tasks), plan, session.tally, session.stopped, session.run_id
    )


def _session(
    name: str, plan: list[PlanEntry], tag: str, options: RunOptions, credentialed: bool
) -> Session:
    """The answering session of a run: its progress bar, run id and the context window of
    every network backbone with something to send (clinlib.llm.context)."""
    bar = make_progress(
        sum(len(e.todo) for e in plan),
        f"run {name}{tag}",
        "q",
        enabled=options.progress,
        position=options.progress_position,
    )
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    windows = {
        e.backbone.name: context_window(e.backbone)
        for e in plan
        if e.todo and e.backbone.kind == "openai"
    }
    return Session(name, run_id, bar, options, credentialed, windows)


def _execute(session: Session, plan: list[PlanEntry], counted: dict) -> None:
    """Answer the plan; a Ctrl-C becomes :class:`RunInterrupted` (what was saved, where)."""
    try:
        session.execute(plan, counted)
    except KeyboardInterrupt:
        raise RunInterrupted(session.tally.written, str(default_cache_path(session.name))) from None


def summary_predictions(name: str, tasks: Sequence[str] | None) -> pd.DataFrame:
    """The predictions a run's summary covers: the paper's tasks, or, when ``tasks`` are
    asked (``run --tasks``), only the asked tasks, so every row of the summary has one scope
    (a cell answered on more tasks by an earlier run is summarised over the asked ones, like
    the cells run on those tasks only) and T10's mean Kendall's tau is never pooled with
    T1–T9 accuracy in one cell."""
    extended = [t for t in (tasks or ()) if t in SPECS and not SPECS[t].paper]
    # the stream / mixed cells too
    preds = load_predictions(name, extended=bool(extended), all_settings=True)
    if tasks:
        preds = preds[preds["task"].isin(list(tasks))].reset_index(drop=True)
    return preds


def summarize(
    preds: pd.DataFrame,
    plan: Sequence[PlanEntry],
    tally: Tally | None = None,
    stopped: dict[tuple[str, ...], str] | None = None,
    run_id: str | None = None,
) -> pd.DataFrame:
    """The per-cell summary of a run (see :func:`cell_summary` for any predictions); the
    ``new_errors`` / ``new_empty`` / ``new_failures`` columns count the rows of ``run_id``."""
    base = cell_summary(preds)
    # a row with no run_id (NA: stored before run ids, or an external row) is not this run's
    mine = (
        preds["run_id"].eq(run_id).fillna(False).astype(bool)
        if run_id is not None
        else pd.Series(False, index=preds.index)
    )
    new = new_outcomes(preds, mine)
    rows = []
    for _bb, cell, n, _todo in plan:
        match = base[
            (base[list(CELL_COLUMNS)] == pd.Series(cell, index=list(CELL_COLUMNS))).all(axis=1)
        ]
        row = match.iloc[0].to_dict() if len(match) else dict(zip(CELL_COLUMNS, cell, strict=True))
        row["n"] = n
        counts = tally.cell(cell) if tally is not None else {}
        for col in ("new_predictions", "api_calls", "cache_hits", "new_cost_usd"):
            row[col] = counts.get(col, 0)
        row.update(own_outcome(new, cell))
        row["stopped"] = (stopped or {}).get(cell)
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for col in (
        "n_predicted",
        "parse_failures",
        "empty",
        "errors",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "new_predictions",
        "api_calls",
        "cache_hits",
        "new_errors",
        "new_empty",
    ):
        out[col] = out[col].fillna(0).astype("int64")
    for col in ("cost_usd", "new_cost_usd"):
        out[col] = out[col].fillna(0.0).astype("float64")
    return out


__all__ = [
    "BATCHES_DIR",
    "CELL_COLUMNS",
    "DEFAULT_BATCH_SIZE",
    "Cell",
    "CellKey",
    "PlanEntry",
    "PredictionKey",
    "RunOptions",
    "RunSpec",
    "ESTIMATE_COLUMNS",
    "KEY_COLUMNS",
    "MODES",
    "OFFLINE_BATCH_SIZE",
    "PREDICTION_COLUMNS",
    "PREDICTION_DTYPES",
    "PRE_TASKS",
    "SETTINGS",
    "SUMMARY_COLUMNS",
    "RunInterrupted",
    "RunnerError",
    "cell_summary",
    "estimate",
    "generation_params",
    "is_credentialed",
    "load_predictions",
    "prediction_row",
    "predictions_dir",
    "request_id",
    "resolve_backbones",
    "run",
    "select_questions",
    "setting_questions",
    "summarize",
    "summary_predictions",
    "write_part",
]
