"""``clintrace population`` and its aliases: the PopMedQA-style population stage, questions
over groups of patients in three renderings, gated by their solvers, plus the verbosity table
(PopMedQA App. B); ``run`` and ``estimate`` hand population tasks to :func:`run_population`
and :func:`estimate_population_cmd`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from clinlib.analysis.population import BIN_MODEL, verbosity_table
from clinlib.analysis.population_stage import evaluate_population
from clinlib.cli.common import (
    ConfigOpt,
    ProfileOpt,
    SeedOpt,
    add_command,
    csv_list,
    fail,
    local_note,
    pending_as_value,
    profile_name,
    run_stage,
    writer_lock,
)
from clinlib.core.config import build_dir
from clinlib.eval.population.answer import (
    answer_population,
    estimate_population,
    price_population,
    select_population,
)
from clinlib.eval.population.counts import line_counter
from clinlib.eval.population.spec import sentence_to_spec, write_spec
from clinlib.llm import get_backbone
from clinlib.llm.batch import BatchPending
from clinlib.tasks.population.build import QUESTIONS_FILE, build_population, population_status
from clinlib.tasks.population.spec import SpecError


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
    name = profile_name(profile)
    bin_list = run_stage(lambda: [int(b) for b in csv_list(bins)]) if bins else None
    with writer_lock(name):
        df, gates = run_stage(
            build_population,
            name,
            count=line_counter(BIN_MODEL),  # = count_tokens, each distinct line encoded once
            specs=specs,
            seed=seed or 0,
            per_cell=per_cell,
            bins=bin_list,
            tasks=csv_list(tasks),
        )
    if df.empty:  # the stage does not apply to this source (manifests/population.json)
        typer.echo(
            f"population: not built on profile {name!r}: {population_status(name)['reason']}"
        )
        return
    n_q = df["qid"].nunique()
    typer.echo(f"population: {n_q} questions x 3 renderings ({time.perf_counter() - t0:.1f}s)")
    for r in gates[gates["gate"] == "shortfall"].itertuples():
        typer.echo(f"  shortfall {r.task} @ {r.bin_tokens}: {r.detail}")
    per_bin = df.drop_duplicates("qid").groupby("bin_tokens").size()
    typer.echo("questions per bin: " + ", ".join(f"{b:,}: {n}" for b, n in per_bin.items()))
    typer.echo(f"verbosity (N, M, tokens per code): `clintrace population-eval --profile {name}`")


def population_eval(
    profile: ProfileOpt = None,
    force: Annotated[bool, typer.Option("--force", help="recompute even when cached")] = False,
) -> None:
    """Every population scoreboard (verbosity, decomposition, Figs 3, 5, 6) over the built set
    and the predictions, cached; notebook 17 loads them."""
    name = profile_name(profile)
    with writer_lock(name):
        basis = run_stage(evaluate_population, name, force=force)
    if basis["status"] == "not_applicable":
        typer.echo(f"population-eval: not built on profile {name!r}: {basis['reason']}")
        return
    typer.echo(
        f"population-eval ({basis['status']}): {basis['n_questions']} questions, "
        f"{basis['n_predictions']} answers of {basis['backbones']} ({basis['seconds']}s)"
    )
    table = verbosity_table(pd.read_parquet(build_dir(name) / "population_verbosity.parquet"))
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


RenderingsOpt = Annotated[
    str | None,
    typer.Option(
        help="population tasks: renderings to ask (descriptions,codes,codebook; default: all three)"
    ),
]
PopTokensOpt = Annotated[
    int,
    typer.Option(
        "--population-tokens",
        help="population tasks: also price a set of prompts of this many input tokens "
        "(the seed's bins: 64000, 128000, 256000)",
    ),
]
PopQuestionsOpt = Annotated[
    int | None,
    typer.Option(
        "--population-questions", help="questions in that set (default: the built set's, else 100)"
    ),
]
MAX_ERROR_SHARE = 0.2  # as `run`: more than this share of errors fails the command


def run_population(
    name: str,
    backbones: list[str],
    renderings: list[str] | None,
    tasks: list[str] | None,
    limit: int | None,
    *,
    mode: str = "live",
    batch_options: dict | None = None,
    budget: float | None = None,
    config: Path | None = None,
    allow_unapproved: bool = False,
    allow_drops: bool = False,
    prompts: list[str] | None = None,
) -> None:
    """`run --tasks P-...` and its alias `population-run`: answer, print, judge the exit."""
    with writer_lock(name):
        new = run_stage(
            pending_as_value(answer_population),
            name,
            backbones,
            renderings=renderings,
            tasks=tasks,
            limit=limit,
            mode=mode,
            batch_options=batch_options,
            budget_usd=budget,
            config=config,
            allow_unapproved=allow_unapproved,
            prompts=prompts or ("direct",),
        )
    if isinstance(new, BatchPending):  # the finished backbones' rows are saved; rerun collects
        typer.echo(f"pending: {new}", err=True)
        raise typer.Exit(code=3)
    table = new.groupby(["backbone", "rendering", "prompt"]).agg(
        rows=("qid", "size"),
        errors=("error", lambda e: int(e.notna().sum())),
        parse_failed=("parse_failed", "mean"),
        score=("score", "mean"),
    )
    typer.echo(table.to_string(float_format=lambda x: f"{x:.3f}"))
    share = float(new["error"].notna().mean())
    if share == 1.0 or (share > MAX_ERROR_SHARE and not allow_drops):
        typer.secho(
            f"error: {share:.0%} of {len(new)} population requests failed "
            f"(first: {new['error'].dropna().iloc[0]}); --accept-errors accepts them",
            err=True,
        )
        raise typer.Exit(code=2)
    local_note(backbones, config)


def estimate_population_cmd(
    name: str,
    backbones: list[str],
    renderings: list[str] | None,
    tasks: list[str] | None,
    limit: int | None,
    config: Path | None,
    questions: int | None,
    tokens: int,
) -> None:
    """`estimate --tasks P-...` and its alias `population-estimate`: the built set per
    (backbone, rendering, bin), then a set of ``questions`` prompts of ``tokens`` tokens."""
    if (build_dir(name) / QUESTIONS_FILE).exists():
        table = run_stage(estimate_population, name, backbones, renderings, tasks, limit, config)
        typer.echo(f"population set of profile {name} (exact prompt tokens):")
        typer.echo(table.to_string(index=False))
        n_built = int(run_stage(select_population, name, renderings, tasks, limit)["qid"].nunique())
    else:
        typer.echo(f"profile {name} has no population set yet (clintrace population)")
        n_built = 0
    n = questions or n_built or 100
    price = run_stage(price_population, backbones, n, tokens, config=config)
    typer.echo(f"a set of {n} population questions of {tokens:,} input tokens each (upper bound):")
    typer.echo(price.to_string(index=False))
    local_note(backbones, config)


def population_run(
    profile: ProfileOpt = None,
    backbones: Annotated[
        str,
        typer.Option(
            help="comma-separated backbones (offline: population-solver, population-overlap)"
        ),
    ] = "population-solver,population-overlap",
    renderings: RenderingsOpt = None,
    tasks: Annotated[str | None, typer.Option(help="comma-separated P-... task ids")] = None,
    limit: Annotated[int | None, typer.Option(help="the first N questions of each task")] = None,
    batch: Annotated[bool, typer.Option("--batch", help="provider batch jobs")] = False,
    budget: Annotated[float | None, typer.Option(help="stop before spending more (USD)")] = None,
    config: ConfigOpt = None,
    prompts: Annotated[
        str,
        typer.Option(help="direct and/or cot (chain of thought, Fig. 5's Reasoning family)"),
    ] = "direct",
) -> None:
    """Alias of `run --tasks population`: answer population questions with any backbone
    -> population_predictions.parquet (then `clintrace population-eval`)."""
    run_population(
        profile_name(profile),
        csv_list(backbones),
        csv_list(renderings),
        csv_list(tasks),
        limit,
        mode="batch" if batch else "live",
        budget=budget,
        config=config,
        prompts=csv_list(prompts),
    )


def population_estimate(
    profile: ProfileOpt = None,
    backbones: Annotated[str, typer.Option(help="comma-separated backbones")] = "gpt-4o-mini",
    questions: PopQuestionsOpt = None,
    tokens: PopTokensOpt = 256_000,
    renderings: RenderingsOpt = None,
    tasks: Annotated[str | None, typer.Option(help="comma-separated P-... task ids")] = None,
    config: ConfigOpt = None,
) -> None:
    """Alias of `estimate --tasks population`: price population questions per backbone before
    anything is sent."""
    estimate_population_cmd(
        profile_name(profile),
        csv_list(backbones),
        csv_list(renderings),
        csv_list(tasks),
        None,
        config,
        questions,
        tokens,
    )


def population_spec(
    sentence: Annotated[str, typer.Argument(help="the question idea and its cohorts, in words")],
    task: Annotated[str, typer.Option(help="the P-... task it is for")],
    out: Annotated[Path, typer.Option(help="the spec TOML to write (only if it validates)")],
    backbone: Annotated[str, typer.Option(help="the backbone that writes it")] = "gpt-4o-mini",
    config: ConfigOpt = None,
) -> None:
    """neopatient's optional first step: a sentence -> one validated [[task]] spec, written
    atomically; a reply that does not validate exits 2 with one line and writes nothing."""
    try:
        text, spec = sentence_to_spec(sentence, task, run_stage(get_backbone, backbone, config))
    except SpecError as exc:  # a TOML error can span lines: one line, always
        fail(SpecError(" ".join(str(exc).split())))
    run_stage(write_spec, text, out)
    typer.echo(f"spec {spec.name} ({spec.task}, {len(spec.cohorts)} cohorts) -> {out}")


def register(app: typer.Typer) -> None:
    """Add ``population`` and its run / estimate / spec commands to the ``clintrace`` app."""
    add_command(app, population, "population")
    add_command(app, population_eval, "population-eval")
    add_command(app, population_run, "population-run")
    add_command(app, population_estimate, "population-estimate")
    add_command(app, population_spec, "population-spec")
