"""``clintrace score``: predictions made elsewhere, scored and stored like the kit's own
(issue 32 §2; :mod:`clinlib.eval.external`). Registered on the app like
:mod:`clinlib.cli_population`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli_common import ProfileOpt, _profile, _run, _writer, app
from clinlib.eval.external import score_any
from clinlib.eval.store import cell_summary


@app.command("score")
def score(
    file: Annotated[Path, typer.Argument(help="JSONL / parquet predictions, or an inspect log")],
    profile: ProfileOpt = None,
    replace: Annotated[
        bool, typer.Option(help="supersede stored predictions with the same keys")
    ] = False,
    allow_wrong_task: Annotated[
        bool, typer.Option(help="score an answer of another task's shape as a parse failure")
    ] = False,
) -> None:
    """Score outside predictions with the kit's parsers and store them (backbone `ext:<label>`)."""
    name = _profile(profile)
    with _writer(name):
        rows = _run(score_any, file, name, replace=replace, allow_wrong_task=allow_wrong_task)
    summary = cell_summary(rows)
    typer.echo(f"scored {len(rows)} outside prediction(s) from {file} into profile {name}:")
    cols = ["strategy", "backbone", "prep_model", "setting", "n_predicted", "accuracy"]
    typer.echo(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
