"""``clintrace`` commands that talk to backbones: ``backbones``, ``estimate``, ``run`` and
``serve-local`` (paper §4, App. D; README "Real endpoints")."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli.common import (
    AcceptErrorsOpt,
    BackbonesOpt,
    BudgetOpt,
    ConfigOpt,
    LimitOpt,
    ProfileOpt,
    SettingsOpt,
    StrategiesOpt,
    TasksOpt,
    add_command,
    csv_list,
    interrupt,
    local_note,
    pending_as_value,
    profile_name,
    run_stage,
    strategy_list,
    writer_lock,
)
from clinlib.cli.population import (
    PopQuestionsOpt,
    PopTokensOpt,
    RenderingsOpt,
    estimate_population_cmd,
    run_population,
)
from clinlib.eval.harness.estimate import counter_notes
from clinlib.eval.harness.estimate import estimate as estimate_run
from clinlib.eval.harness.outcomes import check_run, interrupted_line
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import run
from clinlib.eval.population.answer import population_tasks
from clinlib.eval.readers.policies import register_offline_backbones
from clinlib.llm import list_backbones
from clinlib.llm.batch import BatchPending
from clinlib.llm.local_server import LocalServer, check_local_reachable, is_local_name
from clinlib.llm.presets import LOCAL_HOST, LOCAL_N_CTX, LOCAL_PORT


def backbones(config: ConfigOpt = None) -> None:
    """List the registered backbones (presets, offline readers, your config's endpoints)."""
    register_offline_backbones()
    typer.echo(run_stage(list_backbones, config).to_string(index=False))


def estimate(
    profile: ProfileOpt = None,
    strategies_: StrategiesOpt = "full-context",
    backbones_: BackbonesOpt = "gpt-4o-mini",
    settings: SettingsOpt = "post",
    prep: Annotated[str, typer.Option(help="prep model")] = "rule-based",
    config: ConfigOpt = None,
    tasks: TasksOpt = None,
    limit: LimitOpt = None,
    renderings: RenderingsOpt = None,
    population_tokens: PopTokensOpt = 256_000,
    population_questions: PopQuestionsOpt = None,
) -> None:
    """Print the expected cost of a planned run per cell, before anything is sent.

    With population tasks (``--tasks population`` or ``P-...`` ids) the cells are
    (backbone, rendering, length bin) of the built population set, then a set of
    ``--population-questions`` prompts of ``--population-tokens`` tokens (default 256K)."""
    pop = run_stage(population_tasks, csv_list(tasks))
    if pop:
        estimate_population_cmd(
            profile_name(profile),
            csv_list(backbones_),
            csv_list(renderings),
            pop,
            limit,
            config,
            population_questions,
            population_tokens,
        )
        return
    table = run_stage(
        estimate_run,
        profile,
        strategy_list(strategies_),
        csv_list(backbones_),
        csv_list(settings),
        prep,
        config=config,
        tasks=csv_list(tasks),
        limit=limit,
    )
    typer.echo(table.to_string(index=False))
    if "cost_usd_max" in table:
        typer.echo(
            f"total (upper bound): ${table['cost_usd_max'].sum():,.2f} live, "
            f"${table['batch_cost_usd_max'].sum():,.2f} as provider batch jobs (run --batch)"
        )
    for line in counter_notes(table, lambda name: run_stage(is_local_name, name, config)):
        typer.echo(line)
    local_note(csv_list(backbones_), config)


# run's own options, declared once here so its signature reads as a list of knobs
RetryEmptyOpt = Annotated[
    bool,
    typer.Option(
        help="re-ask predictions whose completion was empty (bypasses the response cache for them)"
    ),
]
AllowUnapprovedOpt = Annotated[
    bool, typer.Option(help="send credentialed data to an unapproved backbone")
]
BatchOpt = Annotated[
    bool,
    typer.Option(
        "--batch",
        help="send uncached requests as provider batch jobs (OpenAI files + batches API, "
        "batch price, answered within 24 h; rerun to resume a job)",
    ),
]
PollOpt = Annotated[float, typer.Option(help="--batch: seconds between two polls of a running job")]
BatchWaitOpt = Annotated[
    float | None,
    typer.Option(help="--batch: stop waiting after this many seconds (rerun to collect)"),
]


def run_cmd(
    profile: ProfileOpt = None,
    strategies_: StrategiesOpt = "no-context-blind,full-context",
    backbones_: BackbonesOpt = "reference",
    settings: SettingsOpt = "post",
    prep: Annotated[str, typer.Option(help="prep model")] = "rule-based",
    budget: BudgetOpt = None,
    retry_errors: Annotated[bool, typer.Option(help="re-run predictions that failed")] = False,
    retry_empty: RetryEmptyOpt = False,
    accept_errors: AcceptErrorsOpt = False,
    allow_unapproved: AllowUnapprovedOpt = False,
    config: ConfigOpt = None,
    tasks: TasksOpt = None,
    limit: LimitOpt = None,
    batch: BatchOpt = False,
    poll_interval: PollOpt = 30.0,
    batch_wait: BatchWaitOpt = None,
    batch_api: Annotated[
        str | None,
        typer.Option(
            help="batch API: openai or anthropic (Message Batches; default: by the endpoint, "
            "anthropic for api.anthropic.com); `python -m clinlib.llm.anthropic_fake` fakes it"
        ),
    ] = None,
    renderings: RenderingsOpt = None,
) -> None:
    """Evaluate every (strategy, backbone, setting) cell; append to predictions/ (resumable).

    Every question asked gets a row: a request that failed is recorded with its error class
    (context overflow, transport error, batch expiry, ...), an empty completion as empty.

    Exit status: 0 the run finished (a budget stop too: see the `stopped` column); 2 bad
    input or a refusal (one line), no prediction at all, or more than 20% of THIS run's rows
    are errors or none is an answer (each class named with its count and remedy;
    --accept-errors accepts them); 3 provider batch jobs still running (re-run to collect);
    130 interrupted by Ctrl-C (one line: what was saved and the command that resumes).

    ``--tasks population`` / ``P-...``: population questions per ``--renderings``
    (clinlib.cli.population.run_population), with the same cache, budget, guard and --batch.
    """
    _check_local(profile, backbones_, config)  # a stopped server: one line, not retries
    name = profile_name(profile)
    options = RunOptions(
        budget_usd=budget,
        retry_errors=retry_errors,
        retry_empty=retry_empty,
        allow_unapproved=allow_unapproved,
        config=config,
        mode="batch" if batch else "live",
        batch_options={"poll_interval_s": poll_interval, "max_wait_s": batch_wait}
        | ({"api": batch_api} if batch_api else {}),
    )
    pop = run_stage(population_tasks, csv_list(tasks))
    if pop:
        run_population(
            name,
            csv_list(backbones_),
            csv_list(renderings),
            pop,
            limit,
            **_population_options(options),
            allow_drops=accept_errors,
        )
        return
    spec = RunSpec(
        name,
        strategy_list(strategies_),
        csv_list(backbones_),
        csv_list(settings),
        prep,
        csv_list(tasks),
        limit,
    )
    _run_and_report(name, spec, options, accept_errors)


def _population_options(options: RunOptions) -> dict:
    """The run options population questions take (clinlib.cli.population.run_population)."""
    return {
        "mode": options.mode,
        "batch_options": options.batch_options,
        "budget": options.budget_usd,
        "config": options.config,
        "allow_unapproved": options.allow_unapproved,
    }


def _run_and_report(name: str, spec: RunSpec, options: RunOptions, accept_errors: bool) -> None:
    """`run`'s evaluation under the profile's writer lock, then its summary and exit status."""
    try:
        with writer_lock(name):  # two runs on one profile would ask every question twice
            summary = run_stage(pending_as_value(run), spec, options)
    except KeyboardInterrupt as exc:  # one line: saved rows, the cache, the resuming command
        typer.echo(interrupted_line(exc, "clintrace " + shlex.join(sys.argv[1:])), err=True)
        raise typer.Exit(code=130) from None
    if isinstance(summary, BatchPending):  # not an error: the jobs run on; a rerun collects
        typer.echo(f"pending: {summary}", err=True)
        raise typer.Exit(code=3)
    scope = f"tasks {', '.join(spec.tasks)}" if spec.tasks else "the paper's tasks T1-T9"
    typer.echo(f"summary over {scope} (every row: its cell's predictions on these tasks)")
    typer.echo(summary.to_string(index=False))
    local_note(list(spec.backbones), options.config)
    for line in run_stage(check_run, "run", summary, accept_errors) or []:
        typer.echo(line, err=True)


def _hints() -> str:
    """Where messages are read: under `make serve-local` (PORT=...) or the plain CLI."""
    return "make" if os.environ.get("CLINTRACE_VIA_MAKE") else "cli"


def _check_local(profile: str | None, backbones_: str, config: Path | None) -> None:
    """Follow a `serve-local` record and refuse a local backbone nobody serves (one line)."""
    notes = run_stage(
        check_local_reachable, csv_list(backbones_), config, profile_name(profile), _hints()
    )
    for note in notes:
        typer.echo(f"local: {note}")


def serve_local_cmd(
    port: Annotated[int, typer.Option(help="TCP port")] = LOCAL_PORT,
    host: Annotated[
        str, typer.Option(help="interface (loopback: nothing leaves the machine)")
    ] = LOCAL_HOST,
    threads: Annotated[int | None, typer.Option(help="llama.cpp threads (default: cores)")] = None,
    n_ctx: Annotated[int, typer.Option("--n-ctx", help="context window (tokens)")] = LOCAL_N_CTX,
    extra_bufts: Annotated[
        str,
        typer.Option(
            help="llama.cpp's extra buffer types (weight repacking, AMX): auto = on only if "
            "the CPU's AMX is advertised and runs and llama.cpp runs a prompt with them; on; off"
        ),
    ] = "auto",
    profile: ProfileOpt = None,
) -> None:
    """Serve the local model (SmolLM2-135M, shipped GGUF) as `local-smollm2` until Ctrl-C.

    Its log and its address (which `run --backbones local-smollm2 --profile P` follows) go
    under data/build/<profile>/local-server/."""
    server = run_stage(
        LocalServer,
        port=port,
        host=host,
        threads=threads,
        n_ctx=n_ctx,
        extra_bufts=extra_bufts,
        profile=profile_name(profile),
        record=True,
        hints=_hints(),
    )
    # SIGTERM (e.g. `kill`) stops the server like Ctrl-C does: the finally below runs.
    signal.signal(signal.SIGTERM, interrupt)
    run_stage(server.start)
    try:
        typer.echo(
            f"local-smollm2 at {server.base_url} (model {server.backbone.model}, "
            f"{server.threads} threads, up in {server.start_seconds:.1f}s; "
            f"{server.describe_extra_bufts()}; log {server.log_path}); Ctrl-C stops it"
        )
        while (died := server.death_report()) is None:
            time.sleep(0.5)
        typer.secho(f"error: {died}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=1)
    except KeyboardInterrupt:
        typer.echo("stopping the local server")
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    """Add the backbone commands to the ``clintrace`` app."""
    add_command(app, backbones)
    add_command(app, estimate)
    add_command(app, run_cmd, "run")
    add_command(app, serve_local_cmd, "serve-local")
