"""``clintrace population``: the PopMedQA-style population stage (issue 29): questions over
groups of patients in three renderings, gated by their solvers, plus the verbosity table
(PopMedQA App. B). Registered on the app like :mod:`clinlib.cli_endpoints`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from clinlib.analysis.population import verbosity, verbosity_table
from clinlib.cli_common import ProfileOpt, SeedOpt, _csv, _profile, _run, _writer, app
from clinlib.llm.tokens import count_tokens
from clinlib.tasks.population.build import build_population

BIN_MODEL = "gpt-4"  # bins are measured with cl100k_base


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
