"""The harness over several processes: strategies dealt round-robin to worker processes.

Paper §4 ("Backbones"): the offline readers are CPU-bound, so one event loop uses one
core; each process here runs :func:`clinlib.eval.runner.run` on its own strategies and appends
its own part files, so resumability and de-duplication are those of the single run.
Design: docs/design.md.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing as mp
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core import config
from clinlib.core.config import resolve_profile
from clinlib.core.lock import LIBRARY_LOCK_WAIT_S, profile_lock
from clinlib.eval import prompt_tokens
from clinlib.eval.cells import listed, run_questions, select_questions
from clinlib.eval.outcomes import new_outcomes
from clinlib.eval.runner import run, summary_predictions
from clinlib.eval.store import CELL_COLUMNS, cell_summary, claim_predictions
from clinlib.strategies import get_strategy
from clinlib.tasks.settings import parse_settings, value_of


def _run_group(job: tuple[str, dict[str, Any]]) -> None:
    # Runs in a child process (spawned: no torch / SQLite state is inherited); the parent's
    # build folder is passed explicitly, since a spawned child re-imports clinlib.core.config.
    build, kwargs = job
    config.BUILD_DIR = Path(build)
    run(**kwargs)


def run_parallel(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
    workers: int | None = None,
    wait_for_lock: float = LIBRARY_LOCK_WAIT_S,
    **kwargs: Any,
) -> pd.DataFrame:
    """:func:`run` with the strategies dealt round-robin to ``workers`` processes.

    For CPU-bound backbones (the offline readers) a single event loop uses one core; each
    process here builds its strategies' contexts and answers them on its own core. Every
    process appends its own part files (distinct run ids), so resumability and de-duplication
    are those of :func:`run`. Network backbones gain nothing: use :func:`run`.

    Args:
        profile / strategies / backbones / settings / prep: as for :func:`run` (strategies
            by name or label, so they can be sent to another process).
        workers: processes (default: the CPU count, at most one per strategy).
        **kwargs: further :func:`run` keyword arguments (e.g. ``config``, ``tasks``).

    Returns:
        The cell summary of every (strategy, backbone, setting) cell run.
    """
    name = resolve_profile(profile)
    # one writer per profile: the workers are part of this call's work and share its lock
    # (clinlib.core.lock: a holder's child processes inherit it)
    with profile_lock(name, wait=wait_for_lock):
        return _run_parallel(name, strategies, backbones, settings, prep, workers, kwargs)


def _run_parallel(name: str, strategies: Sequence[str], backbones: Sequence[str],
                  settings: Sequence[str], prep: str, workers: int | None,
                  kwargs: dict[str, Any]) -> pd.DataFrame:  # fmt: skip
    """The body of :func:`run_parallel`, under the profile's writer lock."""
    since = pd.Timestamp.now(tz="UTC")  # this call's rows are the ones written from now
    strategies, backbones, settings = listed(strategies), listed(backbones), listed(settings)
    # Canonical labels (``dense-retrieval(k=5)`` is ``dense-retrieval``): what the
    # predictions record, so the summary below finds every cell that was run.
    strats = [get_strategy(str(s), profile=name) for s in strategies]
    names = [st.label() for st in strats]
    n = max(1, min(workers or os.cpu_count() or 1, len(names)))
    groups = [names[i::n] for i in range(n)]
    progress = kwargs.pop("progress", True)
    jobs = [dict(profile=name, strategies=g, backbones=list(backbones), settings=list(settings),
                 prep=prep, progress=progress, progress_position=i if n > 1 else None, **kwargs)
            for i, g in enumerate(groups)]  # fmt: skip
    if n == 1:
        run(**jobs[0])
        return _parallel_summary(name, names, backbones, settings, kwargs.get("tasks"), since)
    # Embed every question once here (both cores) rather than once per child process.
    given = kwargs.get("questions")
    tasks = listed(kwargs["tasks"]) if kwargs.get("tasks") is not None else None
    records = select_questions(run_questions(name, tasks, given), tasks,
                               kwargs.get("limit")).to_dict("records")  # fmt: skip
    for strat in strats:
        if strat.query_dependent:
            strat.warm_queries(records)
    if given is None:
        claim_predictions(name)  # once here, before the children append
        prompt_tokens.claim(name)
    ctx = mp.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(n, mp_context=ctx) as pool:
        list(pool.map(_run_group, [(str(config.BUILD_DIR), job) for job in jobs]))
    return _parallel_summary(name, names, backbones, settings, kwargs.get("tasks"), since)


def _parallel_summary(
    name: str,
    names: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str],
    tasks: Sequence[str] | None = None,
    since: pd.Timestamp | None = None,
) -> pd.DataFrame:
    preds = summary_predictions(name, listed(tasks) if tasks is not None else None)
    summary = cell_summary(preds)
    # This call's own rows (written since it started): what `evaluate-offline` is judged by.
    mine = (preds["written_at"] >= since) if since is not None else preds["qid"].isna()
    cols = list(CELL_COLUMNS)
    new = new_outcomes(preds, mine)
    counts = preds[mine].groupby(cols, dropna=False).size().rename("new_predictions")
    summary = summary.merge(new, on=cols, how="left").merge(
        counts.reset_index(), on=cols, how="left"
    )
    for col in ("new_predictions", "new_errors", "new_empty"):
        summary[col] = summary[col].fillna(0).astype("int64")
    summary["new_failures"] = [v if isinstance(v, dict) else {} for v in summary["new_failures"]]
    wanted = summary["strategy"].isin(names) & summary["backbone"].isin(list(backbones))
    parsed = parse_settings(settings)
    ours = summary["setting"].map(lambda v: any(value_of(v, s) for s in parsed)).astype(bool)
    return summary[wanted & ours].reset_index(drop=True)
