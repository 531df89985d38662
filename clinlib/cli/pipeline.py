"""``clintrace pipeline`` (every stage, independent ones side by side: the graph of
:data:`clinlib.core.guards.PIPELINE_STEPS` run by :mod:`clinlib.cli.schedule`), ``reproduce``
(the pipeline and every notebook, with a time table per stage), ``notebooks`` and ``info``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from clinlib.cli.common import (
    AllowDropsOpt,
    ProfileOpt,
    SeedOpt,
    add_command,
    profile_name,
    run_stage,
    writer_lock,
)
from clinlib.cli.notebooks import execute_all
from clinlib.cli.schedule import (
    Job,
    child_env,
    critical_path,
    default_jobs,
    exit_code,
    failure_line,
    remaining_path,
    run_jobs,
    stage_command,
)
from clinlib.cli.stages import CohortRuleOpt
from clinlib.core import config
from clinlib.core.config import NOTEBOOKS_DIR, REPO_ROOT, build_dir, figures_dir
from clinlib.core.guards import PIPELINE_STEPS, pipeline_needs
from clinlib.core.io import atomic_path
from clinlib.strategies import EVALUATION_STRATEGIES

# (stage, wall seconds, CPU seconds, start, end) of the stages run by this process, for
# reproduce's closing time table (start / end: seconds from the run's start).
STAGE_TIMES: list[tuple[str, float, float, float, float]] = []
TIMES_FILE = "reproduce_times.csv"
# the last `clintrace pipeline`'s table: with reproduce's, what the next run orders its stages by
PIPELINE_TIMES_FILE = "pipeline_times.csv"
TIMES_COLUMNS = ["stage", "seconds", "cpu_seconds", "start", "end"]

# the command of each pipeline step (clinlib.core.guards.PIPELINE_STEPS) and the options it takes
STEP_COMMANDS: dict[str, tuple[str, ...]] = {
    "synth": ("synth",),
    "cohort": ("cohort",),
    "dialogues": ("dialogues",),
    "questions": ("questions",),
    "population": ("population",),  # PopMedQA group questions: cohort + events only
    "population-eval": ("population-eval",),  # every population scoreboard (notebook 17)
    "strategies (post)": ("strategies", "--setting", "post"),  # the original dialogues
    # The equal-input probe. Only the harness reads `pre` constructions, and only the paper's
    # eight + the diagnostic controls (evaluate-offline: EVALUATION_STRATEGIES), so the extras
    # are not built on injected dialogues (`strategies --setting pre` builds them all); nor are
    # T5-injected constructions (the harness's `pre` setting is the T3 probe).
    "strategies (pre, T3-injected)": (
        "strategies",
        "--strategies",
        ",".join(EVALUATION_STRATEGIES),
        "--setting",
        "pre",
    ),
    "evaluate-offline": ("evaluate-offline",),
    "ablations": ("ablations",),  # notebook 11's variant builds, encoder hit rates; core-memory
    "evaluate-longmed": ("evaluate-longmed",),  # notebook 15's cells (LongMedBench)
    "evidence": ("evidence",),  # recall, loss labels and split: notebooks 05, 13, the app
    "trap-answers": ("trap-answers",),  # notebook 18's answers and verdicts
}
SEEDED = frozenset({"synth", "cohort", "dialogues", "questions", "population"})
DROPPING = frozenset({"cohort", "dialogues", "questions"})  # the stages with --allow-drops

JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        help="stages run at once, each in its own process (default: 2 on 2+ cores; 1: one "
        "after another in the pipeline's order)",
    ),
]


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (stage worker processes,
    notebook kernels): unlike wall time, it does not grow when other jobs share the cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def _stage(label: str, t_run: float) -> Iterator[None]:
    """Announce an in-process stage and record its times in :data:`STAGE_TIMES` (also on
    failure); ``t_run``: the run's start (perf_counter)."""
    typer.secho(f"== {label}", bold=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        yield
    finally:
        t1 = time.perf_counter()
        STAGE_TIMES.append((label, t1 - t0, _cpu_seconds() - c0, t0 - t_run, t1 - t_run))


def write_stage_times(path: Path, times: list[tuple]) -> Path:
    """The per-stage table as CSV (stage, seconds, cpu_seconds, and start, end when known),
    written whole or not at all, so a user can see afterwards where a `reproduce` spent its
    time."""
    columns = TIMES_COLUMNS[: max((len(t) for t in times), default=3)]
    frame = pd.DataFrame([tuple(t) for t in times], columns=columns).round(3)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


def stage_table(times: list[tuple]) -> str:
    """A per-stage wall-time table with shares and a total line; with (stage, wall, cpu)
    entries also each stage's CPU seconds (stage processes and kernels included); with start
    and end offsets too, the wall time of the whole run beside the sum (stages overlap)."""
    total = sum(t[1] for t in times) or 1.0
    width = max([len(t[0]) for t in times] + [len("total")])
    cpu = bool(times) and all(len(t) > 2 for t in times)

    def row(label: str, sec: float, share: str, c: float | None) -> str:
        return f"  {label:<{width}} {sec:8.1f}s{share}" + (f"  cpu {c:8.1f}s" if cpu else "")

    lines = [row(t[0], t[1], f" {100 * t[1] / total:5.1f}%", t[2] if cpu else None) for t in times]
    total_cpu = sum(t[2] for t in times) if cpu else None
    lines.append(row("total", sum(t[1] for t in times), "       " if cpu else "", total_cpu))
    if cpu and times and all(len(t) > 4 for t in times):  # stages overlapped: the run's wall
        wall = max(t[4] for t in times) - min(t[3] for t in times)
        busy = f"  ({total_cpu / wall:.2f} cores busy)" if wall > 0 else ""
        lines.append(f"  {'wall':<{width}} {wall:8.1f}s{busy}")
    return "\n".join(lines)


def pipeline(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    skip_existing: Annotated[
        bool, typer.Option(help="skip synth when its tables already exist")
    ] = True,
    allow_drops: AllowDropsOpt = False,
    cohort_rule: CohortRuleOpt = None,
    jobs: JobsOpt = None,
) -> None:
    """Run every stage on the embedded synthetic default, independent stages side by side
    (each in its own process; the graph: clinlib.core.guards.PIPELINE_STEPS). --allow-drops
    reaches every stage; in evaluate-offline it accepts a run whose rows are mostly errors."""
    name = profile_name(profile)
    with writer_lock(name):
        times = _pipeline(name, seed, skip_existing, allow_drops, cohort_rule, jobs)
        write_stage_times(build_dir(name) / PIPELINE_TIMES_FILE, times)
    typer.echo(f"pipeline ({name}): time per stage\n{stage_table(times)}")


def step_args(
    step: str, name: str, seed: int | None, allow_drops: bool, cohort_rule: str | None
) -> list[str]:
    """The ``clintrace`` arguments that run one pipeline step with the pipeline's options."""
    args = [*STEP_COMMANDS[step], "--profile", name]
    if seed is not None and step in SEEDED:
        args += ["--seed", str(seed)]
    if allow_drops and step in DROPPING:
        args.append("--allow-drops")
    if allow_drops and step == "evaluate-offline":
        args.append("--accept-errors")
    if cohort_rule and step == "cohort":
        args += ["--cohort-rule", cohort_rule]
    return args


def pipeline_jobs(
    name: str,
    seed: int | None = None,
    skip_existing: bool = True,
    allow_drops: bool = False,
    cohort_rule: str | None = None,
) -> list[Job]:
    """The pipeline's steps as scheduler jobs (synth left out when its tables exist and
    ``skip_existing``), each needing the earlier steps that write what it reads."""
    steps = [s for s in PIPELINE_STEPS if s in STEP_COMMANDS]
    if skip_existing and (build_dir(name) / "raw" / "hosp").exists():
        steps.remove("synth")
    verbose = ["-v"] if logging.getLogger().getEffectiveLevel() <= logging.INFO else []
    return [
        Job(
            step,
            stage_command(
                config.BUILD_DIR, [*verbose, *step_args(step, name, seed, allow_drops, cohort_rule)]
            ),
            needs,
        )
        for step, needs in pipeline_needs(steps).items()
    ]


def stage_priority(graph: list[Job], root: Path, jobs: int | None) -> dict[str, float] | None:
    """Critical path first: with more than one job and the CPU seconds of a previous run (the
    newer of ``root``'s reproduce and pipeline tables), the ready stage with the most work
    behind it starts first (one job: the sequential order, always)."""
    tables = [p for p in (root / TIMES_FILE, root / PIPELINE_TIMES_FILE) if p.exists()]
    if (jobs or default_jobs()) <= 1 or not tables:
        return None
    times = max(tables, key=lambda p: p.stat().st_mtime_ns)
    try:
        cpu = pd.read_csv(times).set_index("stage")["cpu_seconds"].to_dict()
    except (ValueError, KeyError, OSError):  # an unreadable table: declared order
        return None
    return remaining_path(graph, cpu)


def _pipeline(
    name: str,
    seed: int | None,
    skip_existing: bool,
    allow_drops: bool,
    cohort_rule: str | None = None,
    jobs: int | None = None,
    t_run: float | None = None,
) -> list[tuple[str, float, float, float, float]]:
    """Run the steps (:func:`pipeline_jobs`) and record their times in :data:`STAGE_TIMES`
    (offsets from ``t_run``); a failed step: its stderr tail, one line naming it, exit code."""
    graph = pipeline_jobs(name, seed, skip_existing, allow_drops, cohort_rule)
    t_run = time.perf_counter() if t_run is None else t_run
    shift = time.perf_counter() - t_run
    env, first = child_env(REPO_ROOT), stage_priority(graph, build_dir(name), jobs)
    outcomes = run_jobs(graph, jobs, out=typer.echo, env=env, cwd=REPO_ROOT, priority=first)
    order = {j.name: i for i, j in enumerate(graph)}
    times = [
        (o.name, o.seconds, o.cpu_seconds, o.start + shift, o.end + shift)
        for o in sorted(outcomes, key=lambda o: order[o.name])
    ]
    STAGE_TIMES.extend(times)
    chain, longest = critical_path(graph, {o.name: o for o in outcomes})
    if outcomes:
        typer.echo(f"critical path {longest:.1f}s: {' -> '.join(chain)}")
    line = failure_line(outcomes)
    if line:
        bad = next(o for o in outcomes if o.rc != 0)
        for text in bad.tail:
            typer.echo(f"  {bad.name}: {text}", err=True)
        typer.secho(f"error: pipeline: {line}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=exit_code(outcomes))
    return times


def notebooks(
    profile: ProfileOpt = None,
    timeout: Annotated[int, typer.Option(help="seconds per notebook")] = 1200,
    workers: Annotated[
        int | None, typer.Option(help="notebooks run at once (default: 2 on 2+ cores)")
    ] = None,
) -> None:
    """Execute every numbered notebook on a profile (outputs under data/build/<p>/notebooks/)."""
    name = profile_name(profile)

    def line(r: dict) -> None:  # as each notebook finishes: the stage's progress
        mark = "ok " if r["ok"] else "FAIL"
        typer.echo(f"  {mark} {r['notebook']:<40} {r['seconds']:6.1f}s {r.get('error', '')}")

    with writer_lock(name):  # the notebooks append predictions (04, 06, 11) and write figures
        results = run_stage(execute_all, name, timeout=timeout, workers=workers, on_done=line)
    failed = [r for r in results if not r["ok"]]
    if failed:
        raise typer.Exit(code=1)
    typer.echo(f"figures -> {figures_dir(name)}")


def reproduce(profile: ProfileOpt = "paper", seed: SeedOpt = None, jobs: JobsOpt = None) -> None:
    """The main job: the whole pipeline (independent stages side by side) + every notebook on
    a profile (default: paper)."""
    t0 = time.perf_counter()
    name = profile_name(profile)
    STAGE_TIMES.clear()
    with writer_lock(name):
        try:
            _pipeline(name, seed, True, False, None, jobs, t_run=t0)
            with _stage("notebooks", t0):
                notebooks(profile=name, workers=None)
        finally:
            typer.echo(f"reproduce ({name}): time per stage\n{stage_table(STAGE_TIMES)}")
            out = write_stage_times(build_dir(name) / TIMES_FILE, STAGE_TIMES)
            typer.echo(f"per-stage times -> {out}")
    typer.echo(
        f"reproduce ({name}) done in {time.perf_counter() - t0:.0f}s; "
        f"figures in {figures_dir(name)}"
    )


def info(profile: ProfileOpt = None) -> None:
    """Show which artifacts exist for a profile and where the notebooks are."""
    name = profile_name(profile)
    root = build_dir(name)
    typer.echo(f"profile {name}: {root}")
    for path in sorted(root.glob("*.parquet")):
        typer.echo(f"  {path.name}")
    src = root / "source.json"
    if src.exists():
        typer.echo(json.dumps(json.loads(src.read_text()), indent=2))
    typer.echo(f"notebooks: {NOTEBOOKS_DIR}")


def register(app: typer.Typer) -> None:
    """Add ``pipeline``, ``notebooks``, ``reproduce`` and ``info`` to the ``clintrace`` app."""
    add_command(app, pipeline)
    add_command(app, notebooks)
    add_command(app, reproduce)
    add_command(app, info)
