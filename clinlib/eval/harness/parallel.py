"""The harness over several processes: strategies dealt to worker processes by weight.

Paper §4 ("Backbones"): the offline readers are CPU-bound, so one event loop uses one
core; each process here runs :func:`clinlib.eval.harness.runner.run` on its own strategies and appends
its own part files, so resumability and de-duplication are those of the single run.

Dealing: a query-dependent strategy (retrieval per question: dense retrieval, Mem0, A-Mem,
the oracle) builds a context per question, the others one per patient, so the former weigh
:data:`QUERY_DEPENDENT_WEIGHT` and each strategy goes to the lightest process so far. A plain
round-robin over the evaluated strategies put three of the four query-dependent ones in one
process; on the paper profile that process built contexts 5 min 30 s longer than the other
(9 min 45 s vs 4 min 15 s, load average ~20), and the stage lasts as long as its slowest process.
Design: docs/design.md.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing as mp
import os
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import pandas as pd

from clinlib.core import config
from clinlib.core.config import resolve_profile
from clinlib.core.lock import LIBRARY_LOCK_WAIT_S, profile_lock
from clinlib.eval.harness import prompt_tokens
from clinlib.eval.harness.cells import run_questions, select_questions
from clinlib.eval.harness.outcomes import new_outcomes
from clinlib.eval.harness.records import RunOptions, RunSpec, listed
from clinlib.eval.harness.runner import run, summary_predictions
from clinlib.eval.harness.store import CELL_COLUMNS, cell_summary, claim_predictions
from clinlib.strategies import get_strategy
from clinlib.tasks.settings import parse_settings, value_of

QUERY_DEPENDENT_WEIGHT = 2.0


def deal(names: Sequence[str], query_dependent: Sequence[bool], n: int) -> list[list[str]]:
    """``names`` split into ``n`` groups of near-equal weight (a query-dependent strategy
    weighs :data:`QUERY_DEPENDENT_WEIGHT`, another 1): heaviest first, each to the lightest
    group so far (ties: the first); each group keeps the given order."""
    weights = [QUERY_DEPENDENT_WEIGHT if qd else 1.0 for qd in query_dependent]
    order = sorted(range(len(names)), key=lambda i: -weights[i])  # stable: ties keep order
    load, members = [0.0] * n, [[] for _ in range(n)]
    for i in order:
        g = min(range(n), key=lambda k: load[k])
        load[g] += weights[i]
        members[g].append(i)
    return [[names[i] for i in sorted(m)] for m in members if m]


def _run_group(job: tuple[str, RunSpec, RunOptions]) -> None:
    # Runs in a child process (spawned: no torch / SQLite state is inherited); the parent's
    # build folder is passed explicitly, since a spawned child re-imports clinlib.core.config.
    build, spec, options = job
    config.BUILD_DIR = Path(build)
    run(spec, options)


def run_parallel(
    spec: RunSpec,
    options: RunOptions | None = None,
    workers: int | None = None,
) -> pd.DataFrame:
    """:func:`run` with the strategies dealt by weight to ``workers`` processes (:func:`deal`).

    For CPU-bound backbones (the offline readers) a single event loop uses one core; each
    process here builds its strategies' contexts and answers them on its own core. Every
    process appends its own part files (distinct run ids), so resumability and de-duplication
    are those of :func:`run`. Network backbones gain nothing: use :func:`run`.

    Args:
        spec: as for :func:`run` (strategies by name or label, so they can be sent to another
            process).
        options: as for :func:`run` (None: the defaults); ``wait_for_lock`` is this call's,
            the workers share its lock.
        workers: processes (default: the CPU count, at most one per strategy).

    Returns:
        The cell summary of every (strategy, backbone, setting) cell run.
    """
    options = RunOptions() if options is None else options
    name = resolve_profile(spec.profile)
    # one writer per profile: the workers are part of this call's work and share its lock
    # (clinlib.core.lock: a holder's child processes inherit it)
    with profile_lock(name, wait=options.wait_for_lock):
        return _run_parallel(replace(spec, profile=name), options, workers)


def _run_parallel(spec: RunSpec, options: RunOptions, workers: int | None) -> pd.DataFrame:
    """The body of :func:`run_parallel`, under the profile's writer lock."""
    since = pd.Timestamp.now(tz="UTC")  # this call's rows are the ones written from now
    name = str(spec.profile)
    # Canonical labels (``dense-retrieval(k=5)`` is ``dense-retrieval``): what the
    # predictions record, so the summary below finds every cell that was run.
    strats = [get_strategy(str(s), profile=name) for s in spec.strategies]
    names = [st.label() for st in strats]
    n = max(1, min(workers or os.cpu_count() or 1, len(names)))
    # the workers run under this call's lock (inherited), so their own wait is the default
    jobs = [
        (
            replace(spec, strategies=group),
            replace(
                options, progress_position=i if n > 1 else None, wait_for_lock=LIBRARY_LOCK_WAIT_S
            ),
        )
        for i, group in enumerate(deal(names, [st.query_dependent for st in strats], n))
    ]
    summary = partial(_parallel_summary, name, names, spec.backbones, spec.settings, spec.tasks)
    if n == 1:
        run(*jobs[0])
        return summary(since)
    # Embed every question once here (both cores) rather than once per child process.
    records = select_questions(
        run_questions(name, spec.tasks, spec.questions), spec.tasks, spec.limit
    ).to_dict("records")
    for strat in strats:
        if strat.query_dependent:
            strat.warm_queries(records)
    if spec.own_questions:
        claim_predictions(name)  # once here, before the children append
        prompt_tokens.claim(name)
    ctx = mp.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(n, mp_context=ctx) as pool:
        list(pool.map(_run_group, [(str(config.BUILD_DIR), *job) for job in jobs]))
    return summary(since)


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
