"""The evaluation harness: (strategy, backbone, setting) cells over the fixed question set.

Paper §4 ("Evaluation protocol"; 200,672 predictions over 8 strategies x 4 backbones x the
T3 pre/post settings) and Appendices D-E (cost accounting from input / output / cache-read
tokens; empty completions D1 kept and scored wrong). Every question is answered with the one
fixed prompt of :mod:`clinlib.eval.prompts` and the task's output cap
(:data:`clinlib.tasks.answers.MAX_TOKENS`), at temperature 0.

Settings (:mod:`clinlib.tasks.settings`; MedMemoryBench's ``stream`` and ``mixed`` too, see
:mod:`clinlib.eval.cells`): under ``post`` every question is evaluated; under ``pre`` only T3 questions are,
because T3 (the staleness probe) is the only task whose context differs between the two
settings (T5's contradictions are built into the representation in both, and the other tasks
never see an injection), so re-asking them under ``pre`` would duplicate ``post`` exactly.

Artifacts: predictions are APPENDED to ``data/build/<profile>/predictions/`` as small parquet
part files (:mod:`clinlib.eval.store`), each written atomically, so a crash (even SIGKILL) loses
at most the batch in flight, and that batch's answers are already in the response cache
(``llm_cache.sqlite``), so a re-run neither pays for them again nor duplicates a row. On start
the harness reads the keys ``(qid, strategy, backbone, prep_model, setting)`` already predicted
and skips them; ``retry_errors=True`` re-runs the rows that ended in an error, and
:func:`load_predictions` keeps the latest row per key. Questions and requests:
:mod:`clinlib.eval.cells`; cost estimate: :mod:`clinlib.eval.estimate`; several processes:
:mod:`clinlib.eval.parallel`.

Usage::

    from clinlib.eval import runner
    runner.estimate("quick", ["full-context"], ["gpt-4o-mini"])     # USD before sending
    cells = runner.run("quick", ["no-context-blind", "full-context"], ["reference"])
    preds = runner.load_predictions("quick")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.core.progress import make_progress
from clinlib.core.progress import progress as progress_bar
from clinlib.eval import prompt_tokens
from clinlib.eval.batchmode import BATCHES_DIR, PlanEntry, answer_provider_batches, upper_cost
from clinlib.eval.cells import (
    SETTINGS,
    Item,
    build_items,
    generation_params,
    is_credentialed,
    listed,
    prediction_row,
    prepare_cells,
    record_counts,
    request_id,
    resolve_backbones,
    run_settings,
    select_questions,
    setting_questions,
)
from clinlib.eval.estimate import ESTIMATE_COLUMNS, estimate
from clinlib.eval.store import (
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
from clinlib.llm import (
    Backbone,
    ChatResult,
    LLMClient,
    ResponseCache,
    check_egress,
    default_cache_path,
    tokens,
)
from clinlib.tasks.answers import EXTENDED_TASK_NAMES
from clinlib.tasks.settings import PRE_TASKS

log = logging.getLogger("clinlib.eval.runner")

DEFAULT_BATCH_SIZE = 32
OFFLINE_BATCH_SIZE = 1024
# How network backbones are asked: one request at a time ("live"), or as provider batch jobs
# at the batch price (clinlib.llm.batch), whose records live in BATCHES_DIR of the profile.
MODES: tuple[str, ...] = ("live", "batch")
BATCH_OPTIONS: frozenset[str] = frozenset({"poll_interval_s", "max_wait_s", "max_requests",
                                           "max_bytes"})  # fmt: skip


@dataclass
class _Tally:
    """Live counters for the progress bar and the per-cell summary."""

    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    spent_usd: float = 0.0
    per_cell: dict[tuple[str, ...], dict[str, float]] = field(default_factory=dict)

    def cell(self, key: tuple[str, ...]) -> dict[str, float]:
        return self.per_cell.setdefault(
            key, {"new_predictions": 0, "api_calls": 0, "cache_hits": 0, "new_cost_usd": 0.0}
        )


def _run_coro(make: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also from inside Jupyter's running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def _answer_groups(
    plan: list[PlanEntry],
) -> list[list[PlanEntry]]:
    """Cells with something to answer, in plan order; consecutive offline-reader cells of the
    same (strategy label, prep model, setting) form one group, every other cell its own."""
    groups: list[list[PlanEntry]] = []
    for entry in plan:
        bb, cell, _n, todo = entry
        if not todo:
            continue
        prev = groups[-1][-1] if groups else None
        if (prev is not None and bb.kind != "openai" and prev[0].kind != "openai"
                and (prev[1][0], *prev[1][2:]) == (cell[0], *cell[2:])):  # fmt: skip
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


@dataclass
class _Session:
    """One run's answering loop: clients, batches, part files, the budget and the counters."""

    name: str
    run_id: str
    bar: Any
    credentialed: bool
    allow_unapproved: bool
    config: str | Path | None
    client_options: dict[str, Any]
    batch_size: int
    budget_usd: float | None
    mode: str = "live"
    batch_options: dict[str, Any] = field(default_factory=dict)
    # Upper-bound spend of batch-mode requests submitted but not yet answered.
    reserved_usd: float = 0.0
    tally: _Tally = field(default_factory=_Tally)
    stopped: dict[tuple[str, ...], str] = field(default_factory=dict)
    seq: int = 0

    def on_result(self, cell: tuple[str, ...], bb: Backbone) -> Callable[[ChatResult], None]:
        tally, bar = self.tally, self.bar

        def note(res: ChatResult) -> None:
            c = tally.cell(cell)
            tally.done += 1
            if res.from_cache:
                tally.cache_hits += 1
                c["cache_hits"] += 1
            elif res.error is None and bb.kind == "openai":
                tally.spent_usd += res.cost_usd
                c["new_cost_usd"] += res.cost_usd
            tally.errors += res.error is not None
            bar.set_postfix(done=tally.done, cache=tally.cache_hits,
                            spent=f"${tally.spent_usd:.4f}", errors=tally.errors,
                            refresh=False)  # fmt: skip
            bar.update(1)

        return note

    def client_for(self, bb: Backbone, cache: ResponseCache) -> LLMClient:
        return LLMClient(bb, cache=cache, credentialed=self.credentialed,
                         allow_unapproved=self.allow_unapproved, config=self.config,
                         **self.client_options)  # fmt: skip

    async def answer_batch(
        self, client: LLMClient, bb: Backbone, cell: tuple[str, ...], batch: list[Item]
    ) -> None:
        before = client.stats.api_calls
        results = await client.complete_many(
            [it.request for it in batch], on_result=self.on_result(cell, bb)
        )
        rows = [prediction_row(it, r, self.run_id) for it, r in zip(batch, results, strict=True)]
        write_part(rows, self.name, self.run_id, self.seq)
        self.seq += 1
        c = self.tally.cell(cell)
        c["new_predictions"] += len(rows)
        c["api_calls"] += client.stats.api_calls - before

    async def answer_offline(self, group: list[PlanEntry], cache: ResponseCache) -> None:
        # The offline readers of one (strategy, prep, setting) take turns batch by batch
        # over the same context-ordered items, so each record is parsed once for all of
        # them (see readers.SCAN_CACHE_CHARS). Offline answers cost nothing to recompute,
        # so their part files are larger (fewer files for every later load to open).
        step = max(self.batch_size, OFFLINE_BATCH_SIZE)
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(self.client_for(bb, cache))
                       for bb, *_ in group]  # fmt: skip
            for bb, _cell, _n, todo in group:
                tokens.warm_message_counts([it.request.messages for it in todo], bb.model)
            longest = max(len(todo) for *_, todo in group)
            for start in range(0, longest, step):
                for client, (bb, cell, _n, todo) in zip(clients, group, strict=True):
                    batch = todo[start : start + step]
                    if batch:
                        await self.answer_batch(client, bb, cell, batch)

    def within_budget(
        self, batch: list[Item], bb: Backbone, cell: tuple[str, ...], cache: ResponseCache
    ) -> list[Item]:
        """The leading part of ``batch`` whose upper-bound cost fits the budget left; when
        that is not all of it, the cell is marked stopped with the reason."""
        if self.budget_usd is None:
            return batch
        spent = self.tally.spent_usd + self.reserved_usd
        costs = np.cumsum(upper_cost(batch, bb, cache, self.mode == "batch"))
        fits = int(np.searchsorted(costs, self.budget_usd - spent, side="right"))
        if fits < len(batch):
            self.stopped[cell] = (
                f"budget: ${spent:.4f} spent of "
                f"${self.budget_usd:.4f}; the next {len(batch) - fits} "
                f"request(s) could cost up to "
                f"${costs[-1] - (costs[fits - 1] if fits else 0):.4f}"
            )
            batch = batch[:fits]
        return batch

    async def answer_api(
        self, bb: Backbone, cell: tuple[str, ...], todo: list[Item], cache: ResponseCache
    ) -> None:
        async with self.client_for(bb, cache) as client:
            for start in range(0, len(todo), self.batch_size):
                batch = self.within_budget(todo[start : start + self.batch_size], bb, cell, cache)
                if batch:
                    await self.answer_batch(client, bb, cell, batch)
                if cell in self.stopped:
                    break

    async def answer(self, plan: list[PlanEntry]) -> None:
        cache = ResponseCache(default_cache_path(self.name))
        batched: dict[str, list[PlanEntry]] = {}
        try:
            for group in _answer_groups(plan):
                bb, cell, _n, todo = group[0]
                if bb.kind != "openai":
                    await self.answer_offline(group, cache)
                    continue
                if self.mode == "batch":
                    batched.setdefault(bb.name, []).extend(group)
                    continue
                await self.answer_api(bb, cell, todo, cache)
                if cell in self.stopped:
                    return
            await answer_provider_batches(self, list(batched.values()), cache)
        finally:
            cache.close()

    def execute(self, plan: list[PlanEntry], counted: dict[tuple[str, ...], list[Item]]) -> None:
        """Answer the plan, then record the prompt counts of ``counted`` cells' items."""
        try:
            _run_coro(lambda: self.answer(plan))
        finally:
            self.bar.close()
        for cell_items in counted.values():
            # The contexts were built anyway: their prompt counts spare later estimates a
            # rebuild (after answering, so that recording never delays the first answers).
            record_counts(self.name, cell_items)
        self.explain_stop(plan)

    def explain_stop(self, plan: list[PlanEntry]) -> None:
        """After a stop, every cell not finished says why."""
        if not self.stopped:
            return
        reason = next(iter(self.stopped.values()))
        log.warning("run %s stopped early: %s", self.run_id, reason)
        for _bb, cell, _n, todo in plan:
            if cell not in self.stopped and self.tally.cell(cell)["new_predictions"] < len(todo):
                self.stopped[cell] = "not started: " + reason


def _check_run_args(
    budget_usd: Any,
    batch_size: Any,
    mode: Any = "live",
    batch_options: Any = None,
    settings: Any = ("post",),
) -> None:
    run_settings(settings)  # a bad spec is refused before anything is read
    if budget_usd is not None and (not isinstance(budget_usd, int | float) or budget_usd < 0):
        raise RunnerError(f"budget_usd must be a number >= 0, got {budget_usd!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise RunnerError(f"batch_size must be a positive integer, got {batch_size!r}")
    if mode not in MODES:
        raise RunnerError(f"mode must be one of {MODES}, got {mode!r}")
    unknown = sorted(set(batch_options or {}) - BATCH_OPTIONS)
    if unknown:
        raise RunnerError(f"unknown batch option(s) {unknown}; known: {sorted(BATCH_OPTIONS)}")
    for name, value in (batch_options or {}).items():
        if value is not None and (not isinstance(value, int | float) or value < 0):
            raise RunnerError(f"batch option {name} must be a number >= 0, got {value!r}")


def _claim(
    name: str, own_questions: bool, retry_errors: bool, retry_empty: bool
) -> set[tuple[str, ...]]:
    """Clear a killed writer's temporaries, claim the predictions folder (and the prompt
    counts) when the profile's own questions are asked, and return the keys already done."""
    clean_stale_temps(predictions_dir(name))
    if own_questions:  # a run on a given question subset answers the profile's set too
        claim_predictions(name)
        prompt_tokens.claim(name)
    return done_keys(name, retry_errors, retry_empty)


def _plan(
    prepared: Sequence[tuple[Backbone, str, pd.DataFrame, Any]],
    done: set[tuple[str, ...]],
    own_questions: bool,
) -> tuple[list[PlanEntry], dict[tuple[str, ...], list[Item]]]:
    """The plan (one entry per cell, with the items still to answer) and, when the profile's
    own questions are asked, one cell's items per (label, prep, setting) whose prompt counts
    are recorded after answering."""
    plan: list[PlanEntry] = []
    counted: dict[tuple[str, ...], list[Item]] = {}
    for bb, setting, sub, ctx in prepared:
        if isinstance(ctx, tuple):  # finished cell: nothing to build or send
            plan.append((bb, (ctx[0], bb.name, ctx[1], setting), len(sub), []))
            continue
        items = build_items(sub, ctx, bb)
        cell = (ctx["label"].iloc[0], bb.name, ctx["prep_model"].iloc[0], setting)
        if own_questions and (cell[0], *cell[2:]) not in counted:
            counted[(cell[0], *cell[2:])] = items
        plan.append((bb, cell, len(items), [it for it in items if it.key not in done]))
    return plan, counted


def run(
    profile: str | None = None,
    strategies: Sequence[Any] = ("no-context-blind",),
    backbones: Sequence[str | Backbone] = ("reference",),
    settings: Sequence[str] = ("post",),
    prep: Any = "rule-based",
    budget_usd: float | None = None,
    retry_errors: bool = False,
    allow_unapproved: bool = False,
    config: str | Path | None = None,
    progress: bool = True,
    limit: int | None = None,
    tasks: Iterable[str] | None = None,
    *,
    retry_empty: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    questions: pd.DataFrame | None = None,
    client_options: dict[str, Any] | None = None,
    progress_position: int | None = None,
    mode: str = "live",
    batch_options: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Evaluate every (strategy, backbone, setting) cell and append its predictions.

    Resumable: predicted keys are skipped (errors too, unless ``retry_errors``) and cached
    answers cost no API call; parts are written atomically every ``batch_size`` answers.

    Args:
        profile: build profile.
        strategies: strategy names (or instances) from :mod:`clinlib.strategies`.
        backbones: backbone names (presets, config file, or offline readers) or objects.
        settings: :mod:`clinlib.tasks.settings` specs (post, pre, stream, mixed, stream+mixed).
        prep: the prep model of derived strategies.
        budget_usd: stop before new spend (uncached API calls) could exceed this; checked
            per batch against the batch's upper-bound cost.
        retry_errors: re-run keys whose latest row has an error (the new row supersedes it).
        retry_empty: re-ask keys whose latest completion was empty, past the response cache
            (``LLMClient(refresh_empty=True)``, the paper's M1 pass); the new row supersedes.
        allow_unapproved: send credentialed data to backbones not approved for it.
        config: TOML config with user endpoints.
        progress: show progress (done, cache hits, $ spent, errors): a tqdm bar on a
            terminal, a line with counts and rate every few seconds in a log.
        limit: first ``limit`` questions per task.
        tasks: restrict to these tasks.
        batch_size: answers per part file for network backbones (a crash loses at most this
            many, all cached); offline readers write at least OFFLINE_BATCH_SIZE per file.
        questions: use these rows instead of the profile's questions.parquet.
        client_options: extra :class:`LLMClient` arguments (timeout_s, max_retries, ...).
        progress_position: this run's bar row among parallel runs' (eval.parallel).
        mode / batch_options: ``"batch"`` = provider jobs (:mod:`clinlib.eval.batchmode`).

    Returns:
        The cell summary: :data:`SUMMARY_COLUMNS` (accuracies over rows without a transport
        error; ``stopped`` says why a cell did not finish, e.g. the budget).
    """
    name = resolve_profile(profile)
    strategies, backbones, settings = listed(strategies), listed(backbones), listed(settings)
    tasks = listed(tasks) if tasks is not None else None
    _check_run_args(budget_usd, batch_size, mode, batch_options, settings)
    bbs = resolve_backbones(backbones, config)
    credentialed = is_credentialed(name)
    for bb in bbs:  # refuse before any context is built or any request is sent
        check_egress(bb, credentialed, allow_unapproved)
    done = _claim(name, questions is None, retry_errors, retry_empty)
    tag = f" [{progress_position + 1}]" if progress_position is not None else ""
    with progress_bar(None, f"contexts {name}{tag}", "context", enabled=progress,
                      position=progress_position) as ctx_bar:  # fmt: skip
        prepared = prepare_cells(name, strategies, settings, prep, tasks, limit, questions,
                                 bbs, done=done, config=config, bar=ctx_bar)  # fmt: skip
    plan, counted = _plan(prepared, done, questions is None)
    # retry_empty re-asks past the cache unless the caller's client options say otherwise
    opts = ({"refresh_empty": True} if retry_empty else {}) | dict(client_options or {})
    bar = make_progress(sum(len(todo) for *_, todo in plan), f"run {name}{tag}", "q",
                        enabled=progress, position=progress_position)  # fmt: skip
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    session = _Session(name, run_id, bar, credentialed, allow_unapproved, config, opts,
                       batch_size, budget_usd, mode, dict(batch_options or {}))  # fmt: skip
    session.execute(plan, counted)
    return summarize(summary_predictions(name, tasks), plan, session.tally, session.stopped)


def summary_predictions(name: str, tasks: Sequence[str] | None) -> pd.DataFrame:
    """The predictions a run's summary covers: the paper's tasks (as always), or, when an
    extended task is asked, only the asked tasks, so that T10's mean Kendall's tau is never
    pooled with T1–T9 accuracy in one cell."""
    extended = [t for t in (tasks or ()) if t in EXTENDED_TASK_NAMES]
    # the stream / mixed cells too
    preds = load_predictions(name, extended=bool(extended), all_settings=True)
    if extended:
        preds = preds[preds["task"].isin(list(tasks or ()))].reset_index(drop=True)
    return preds


def summarize(
    preds: pd.DataFrame,
    plan: Sequence[PlanEntry],
    tally: _Tally | None = None,
    stopped: dict[tuple[str, ...], str] | None = None,
) -> pd.DataFrame:
    """The per-cell summary of a run (see :func:`cell_summary` for any predictions)."""
    base = cell_summary(preds)
    rows = []
    for _bb, cell, n, _todo in plan:
        match = base[(base[list(CELL_COLUMNS)] == pd.Series(cell, index=list(CELL_COLUMNS)))
                     .all(axis=1)]  # fmt: skip
        row = match.iloc[0].to_dict() if len(match) else dict(zip(CELL_COLUMNS, cell, strict=True))
        row["n"] = n
        counts = tally.cell(cell) if tally is not None else {}
        for col in ("new_predictions", "api_calls", "cache_hits", "new_cost_usd"):
            row[col] = counts.get(col, 0)
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
    ):
        out[col] = out[col].fillna(0).astype("int64")  # fmt: skip
    for col in ("cost_usd", "new_cost_usd"):
        out[col] = out[col].fillna(0.0).astype("float64")
    return out


__all__ = [
    "BATCHES_DIR",
    "CELL_COLUMNS",
    "ESTIMATE_COLUMNS",
    "KEY_COLUMNS",
    "MODES",
    "PREDICTION_COLUMNS",
    "PREDICTION_DTYPES",
    "PRE_TASKS",
    "SETTINGS",
    "SUMMARY_COLUMNS",
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
