"""``clintrace pipeline`` (every stage in order), ``reproduce`` (the pipeline and every
notebook, with a time table per stage), ``notebooks`` and ``info``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from clinlib.cli.analysis_stages import ablations, evidence
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
from clinlib.cli.population import population, population_eval
from clinlib.cli.stages import (
    CohortRuleOpt,
    cohort,
    dialogues,
    evaluate_longmed,
    evaluate_offline,
    questions,
    strategies,
    synth,
    trap_answers,
)
from clinlib.core.config import NOTEBOOKS_DIR, build_dir, figures_dir
from clinlib.core.io import atomic_path
from clinlib.strategies import EVALUATION_STRATEGIES

# (stage, wall seconds, CPU seconds) of the stages run by this process, for reproduce's
# closing time table.
STAGE_TIMES: list[tuple[str, float, float]] = []


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (stage worker processes,
    notebook kernels): unlike wall time, it does not grow when other jobs share the cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def _stage(label: str) -> Iterator[None]:
    """Announce a stage and record its wall and CPU time in :data:`STAGE_TIMES` (also on
    failure)."""
    typer.secho(f"== {label}", bold=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        yield
    finally:
        STAGE_TIMES.append((label, time.perf_counter() - t0, _cpu_seconds() - c0))


TIMES_FILE = "reproduce_times.csv"


def write_stage_times(path: Path, times: list[tuple[str, float, float]]) -> Path:
    """The per-stage table as CSV (stage, seconds, cpu_seconds), written whole or not at all,
    so a user can see afterwards where a `reproduce` spent its time."""
    frame = pd.DataFrame(times, columns=["stage", "seconds", "cpu_seconds"]).round(3)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


def stage_table(times: list[tuple]) -> str:
    """A per-stage wall-time table with shares and a total line; with (stage, wall, cpu)
    entries also each stage's CPU seconds (stage processes and kernels included)."""
    total = sum(t[1] for t in times) or 1.0
    width = max([len(t[0]) for t in times] + [len("total")])
    cpu = bool(times) and all(len(t) > 2 for t in times)

    def row(label: str, sec: float, share: str, c: float | None) -> str:
        return f"  {label:<{width}} {sec:8.1f}s{share}" + (f"  cpu {c:8.1f}s" if cpu else "")

    lines = [row(t[0], t[1], f" {100 * t[1] / total:5.1f}%", t[2] if cpu else None) for t in times]
    total_cpu = sum(t[2] for t in times) if cpu else None
    lines.append(row("total", sum(t[1] for t in times), "       " if cpu else "", total_cpu))
    return "\n".join(lines)


def pipeline(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    skip_existing: Annotated[
        bool, typer.Option(help="skip synth when its tables already exist")
    ] = True,
    allow_drops: AllowDropsOpt = False,
    cohort_rule: CohortRuleOpt = None,
) -> None:
    """Run every stage in order on the embedded synthetic default. --allow-drops reaches every
    stage; in evaluate-offline it accepts a run whose rows are mostly errors."""
    name = profile_name(profile)
    with writer_lock(name):
        _pipeline(name, seed, skip_existing, allow_drops, cohort_rule)


def _pipeline(
    name: str,
    seed: int | None,
    skip_existing: bool,
    allow_drops: bool,
    cohort_rule: str | None = None,
) -> None:
    if not (skip_existing and (build_dir(name) / "raw" / "hosp").exists()):
        with _stage("synth"):
            synth(profile=name, seed=seed)
    with _stage("cohort"):
        cohort(profile=name, seed=seed, allow_drops=allow_drops, cohort_rule=cohort_rule)
    with _stage("dialogues"):
        dialogues(profile=name, seed=seed, allow_drops=allow_drops)
    with _stage("questions"):
        questions(profile=name, seed=seed, allow_drops=allow_drops)
    with _stage("population"):  # PopMedQA group questions: cohort + events only
        population(profile=name, seed=seed)
    with _stage("population-eval"):  # every population scoreboard, cached (notebook 17 loads)
        population_eval(profile=name)
    with _stage("strategies (post)"):
        strategies(profile=name, setting="post")  # the original dialogues
    with _stage("strategies (pre, T3-injected)"):
        # The equal-input probe. Only the harness reads `pre` constructions, and only the
        # paper's eight + the diagnostic controls (evaluate-offline: EVALUATION_STRATEGIES),
        # so the extras are not built on injected dialogues
        # (`strategies --setting pre` builds them all); nor are T5-injected constructions
        # (the harness's `pre` setting is the T3 probe): `strategies --setting pre --task T5`.
        strategies(profile=name, names=",".join(EVALUATION_STRATEGIES), setting="pre")
    with _stage("evaluate-offline"):
        evaluate_offline(profile=name, accept_errors=allow_drops)
    with _stage("evaluate-longmed"):  # notebook 15's cells (LongMedBench), after the post run
        evaluate_longmed(profile=name)
    with _stage("ablations"):  # notebook 11's variant builds, encoder hit rates; core-memory
        ablations(profile=name)
    with _stage("evidence"):  # recall, loss labels and split, read by notebooks 05, 13, the app
        evidence(profile=name)
    with _stage("trap-answers"):  # notebook 18's answers and verdicts (after the constructions)
        trap_answers(profile=name)


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


def reproduce(profile: ProfileOpt = "paper", seed: SeedOpt = None) -> None:
    """The main job: the whole pipeline + every notebook on a profile (default: paper)."""
    t0 = time.perf_counter()
    name = profile_name(profile)
    STAGE_TIMES.clear()
    with writer_lock(name):
        try:
            pipeline(profile=name, seed=seed)
            with _stage("notebooks"):
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
