"""``clintrace score`` and ``clintrace export``: predictions made elsewhere, scored and stored
like the kit's own (:mod:`clinlib.eval.interop.external`), and the question set written out for other
harnesses (:mod:`clinlib.eval.interop.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli.common import (
    ConfigOpt,
    ProfileOpt,
    add_command,
    csv_list,
    profile_name,
    run_stage,
    writer_lock,
)
from clinlib.eval.harness.store import cell_summary
from clinlib.eval.interop.export import FORMATS, export_records, export_table, write_export
from clinlib.eval.interop.inspect_log import score_any


def score(
    file: Annotated[
        Path,
        typer.Argument(help="JSON lines (.jsonl) / parquet predictions, or an inspect log (.eval)"),
    ],
    profile: ProfileOpt = None,
    replace: Annotated[
        bool, typer.Option(help="supersede stored predictions with the same keys")
    ] = False,
    allow_wrong_task: Annotated[
        bool,
        typer.Option(
            "--allow-wrong-task/--refuse-wrong-task",
            help="score an answer of another task's shape as a parse failure, as the kit's "
            "own run does (default), or refuse the file",
        ),
    ] = True,
) -> None:
    """Score outside predictions with the kit's parsers and store them (backbone `ext:<label>`)."""
    name = profile_name(profile)
    with writer_lock(name):
        rows = run_stage(score_any, file, name, replace=replace, allow_wrong_task=allow_wrong_task)
    summary = cell_summary(rows)
    typer.echo(f"scored {len(rows)} outside prediction(s) from {file} into profile {name}:")
    cols = ["strategy", "backbone", "prep_model", "setting", "n_predicted", "accuracy"]
    typer.echo(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))


def export(
    out: Annotated[Path, typer.Argument(help="folder to write (replaced whole)")],
    profile: ProfileOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl or inspect")] = "inspect",
    strategies: Annotated[
        str, typer.Option(help="comma-separated strategy labels")
    ] = "no-context-blind,full-context",
    settings: Annotated[str, typer.Option(help="comma-separated settings (post, pre)")] = "post",
    prep: Annotated[str, typer.Option(help="prep model of derived representations")] = "rule-based",
    tasks: Annotated[str | None, typer.Option(help="comma-separated tasks (default T1-T9)")] = None,
    limit: Annotated[int | None, typer.Option(help="first N questions per task")] = None,
    config: ConfigOpt = None,
) -> None:
    """Write the question set with each strategy's context as a dataset (+ an inspect_ai task)."""
    name = profile_name(profile)
    if fmt not in FORMATS:
        run_stage(write_export, out, [], fmt)  # refuses with one line
    records = run_stage(
        export_records,
        name,
        csv_list(strategies),
        csv_list(settings),
        prep,
        csv_list(tasks),
        limit,
        config=config,
    )
    run_stage(write_export, out, records, fmt)
    typer.echo(f"{len(records)} samples -> {out} ({fmt})")
    typer.echo(export_table(records).to_string(index=False))


def register(app: typer.Typer) -> None:
    """Add ``score`` and ``export`` to the ``clintrace`` app."""
    add_command(app, score, "score")
    add_command(app, export, "export")
