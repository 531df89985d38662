"""``clintrace population``: the PopMedQA-style population stage (issue 29): questions over
groups of patients in three renderings, gated by their solvers, plus the verbosity table
(PopMedQA App. B). Registered on the app like :mod:`clinlib.cli_endpoints`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from clinlib.analysis.population import BIN_MODEL, verbosity, verbosity_table
from clinlib.cli_common import ProfileOpt, SeedOpt, _csv, _profile, _run, _writer, app
from clinlib.eval.population import answer_population, estimate_population
from clinlib.llm.tokens import count_tokens
from clinlib.tasks.population.build import build_population


@app.command("population")
def population(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    specs: Annotated[
        Path | None, typer.Option(help="cohort spec TOML (default: data/population/specs.toml)")
    ] = None,
    per_cell: Annotated[int | None, typer.Option(help="questions per (task, length bin)")] = None,
    bins: Annotated[str | None, typer.Option(help="comma-separated target token lengths")] = None,
    tasks: Annotated[str | None, typer.Option(help="comma-separated P-... task ids")] = None,
) -> None:
    """Write population_questions.parquet and population_gates.parquet (PopMedQA tasks)."""
    t0 = time.perf_counter()
    name = _profile(profile)
    bin_list = _run(lambda: [int(b) for b in _csv(bins)]) if bins else None
    with _writer(name):
        df, gates = _run(build_population, name, count=lambda s: count_tokens(s, BIN_MODEL),
                         specs=specs, seed=seed or 0, per_cell=per_cell, bins=bin_list,
                         tasks=_csv(tasks))  # fmt: skip
    n_q = df["qid"].nunique()
    typer.echo(f"population: {n_q} questions x 3 renderings ({time.perf_counter() - t0:.1f}s)")
    for r in gates[gates["gate"] == "shortfall"].itertuples():
        typer.echo(f"  shortfall {r.task} @ {r.bin_tokens}: {r.detail}")
    table = verbosity_table(verbosity(df))
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


@app.command("population-run")
def population_run(
    profile: ProfileOpt = None,
    backbones: Annotated[
        str,
        typer.Option(
            help="comma-separated backbones (offline: population-solver, population-overlap)"
        ),
    ] = "population-solver,population-overlap",
    renderings: Annotated[str | None, typer.Option(help="descriptions,codes,codebook")] = None,
    tasks: Annotated[str | None, typer.Option(help="comma-separated P-... task ids")] = None,
    limit: Annotated[int | None, typer.Option(help="at most this many questions")] = None,
) -> None:
    """Answer population questions with any backbone -> population_predictions.parquet."""
    name = _profile(profile)
    with _writer(name):
        new = _run(answer_population, name, _csv(backbones), renderings=_csv(renderings),
                   tasks=_csv(tasks), limit=limit)  # fmt: skip
    table = new.groupby(["backbone", "rendering"]).agg(
        rows=("qid", "size"), parse_failed=("parse_failed", "mean"), score=("score", "mean")
    )
    typer.echo(table.to_string(float_format=lambda x: f"{x:.3f}"))
    if new["error"].notna().all():
        typer.secho("error: every request failed", err=True)
        raise typer.Exit(code=2)


@app.command("population-estimate")
def population_estimate(
    backbones: Annotated[str, typer.Option(help="comma-separated backbones")] = "gpt-4o-mini",
    questions: Annotated[int, typer.Option(help="questions in the set")] = 100,
    tokens: Annotated[
        int, typer.Option(help="input tokens per question (the seed's bins: 64000, 128000, 256000)")
    ] = 256_000,
) -> None:
    """Price a population set per backbone before anything is sent (upper bound, list prices)."""
    table = _run(estimate_population, _csv(backbones), questions, tokens)
    typer.echo(table.to_string(index=False))
