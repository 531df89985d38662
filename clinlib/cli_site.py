"""``clintrace site``: the results site of a profile (issue 32 §4; :mod:`clinlib.site`).
Registered on the app like :mod:`clinlib.cli_population`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli_common import ProfileOpt, _profile, _run, _writer, app
from clinlib.site import build_site


@app.command("site")
def site(
    profile: ProfileOpt = None,
    out: Annotated[
        Path | None, typer.Option(help="site folder (default data/build/<p>/site)")
    ] = None,
) -> None:
    """Render the executed notebooks, figures, app snapshots and an index into one offline folder."""
    name = _profile(profile)
    with _writer(name):
        result = _run(build_site, name, out=out)
    failed = [n for n, e in result["notebooks"] if e]
    typer.echo(f"site -> {result['site']}/index.html: {len(result['notebooks'])} notebooks"
               f"{f' ({len(failed)} with errors: {failed})' if failed else ''}, "
               f"{result['figures']} figure files, app snapshots "
               f"{[a for a, ok in result['apps'] if ok] or 'none'}")  # fmt: skip
