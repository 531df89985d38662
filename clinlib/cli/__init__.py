"""The ``clintrace`` command line (``clintrace = "clinlib.cli:app"``), one module per command
group, each adding its commands to the app in its own ``register(app)``:

    stages      synth, cohort, export-meds, dialogues, questions, strategies,
                evaluate-offline, audit (one pipeline stage each; docs/design.md)
    population  population, population-run, population-estimate, population-spec
    neopatient  neopatient (synthetic records from a cohort recipe, written as MEDS)
    pipeline    pipeline, notebooks, reproduce, info
    endpoints   backbones, estimate, run, serve-local (paper §4, App. D)
    judge       judge
    memory      memory-serve (docs/memory-protocol.md)
    score       score, export
    site        site

:mod:`clinlib.cli.common` holds what they share (options, one-line errors, the profile's
writer lock); :mod:`clinlib.cli.rewrite` the ``--rewrite`` / ``--paraphrase`` bodies of
``dialogues`` and ``questions``; :mod:`clinlib.cli.notebooks` runs the numbered notebooks. The
package sits on top of the layering: it may import every stage package, and none imports it.

Startup imports what a command needs when it runs: ``app`` lists the commands from the group
modules' source (their ``register`` calls and the commands' docstrings, read with :mod:`ast`)
and imports a group module only when one of its commands is invoked or asked for its own
help, so ``clintrace --help`` imports none of the stage packages. :func:`build_app` registers
every group at once (the same commands; tests compare the two). Ctrl-C before a command
starts ends in one line (:func:`_quiet_interrupt`).
"""

from __future__ import annotations

import ast
import importlib
import os
import signal
import sys
from functools import cache
from pathlib import Path

INTERRUPTED = "clintrace: interrupted (Ctrl-C) before the command started; nothing was written"


def _quiet_interrupt(*_: object) -> None:
    """SIGINT while the command line is still starting (imports): one line, exit 130."""
    os.write(2, (INTERRUPTED + "\n").encode())
    os._exit(130)


def _started_as_command() -> bool:
    """Imported by the ``clintrace`` script or ``python -m clinlib.cli`` (not by a library)."""
    first = os.path.basename(sys.argv[0]) if sys.argv else ""
    return (
        first in ("clintrace", "-m") or first.endswith("__main__.py") and "clinlib" in sys.argv[0]
    )


if _started_as_command():  # common.main puts Python's handler back when the command starts
    signal.signal(signal.SIGINT, _quiet_interrupt)

import typer  # noqa: E402  (after the handler: Ctrl-C while importing is one line too)
from typer.core import TyperCommand, TyperGroup  # noqa: E402

from clinlib.cli.common import new_app, plain_help  # noqa: E402

# The order of `clintrace --help`'s command list: the pipeline's stages first.
GROUP_NAMES = (
    "stages",
    "population",
    "neopatient",
    "analysis_stages",
    "pipeline",
    "endpoints",
    "judge",
    "memory",
    "score",
    "site",
)


@cache
def command_index() -> dict[str, tuple[str, str]]:
    """command name -> (group module, first paragraph of its help), from the group modules'
    source: the ``add_command(app, fn[, name])`` calls of ``register`` and ``fn``'s
    docstring (as :func:`clinlib.cli.common.add_command` shows it), in group order."""
    index: dict[str, tuple[str, str]] = {}
    for group in GROUP_NAMES:
        tree = ast.parse((Path(__file__).parent / f"{group}.py").read_text(encoding="utf-8"))
        docs = {f.name: ast.get_docstring(f) for f in tree.body if isinstance(f, ast.FunctionDef)}
        register = next(f for f in tree.body if getattr(f, "name", "") == "register")
        for call in ast.walk(register):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "add_command"):
                continue
            fn = call.args[1].id  # type: ignore[attr-defined]
            name = call.args[2].value if len(call.args) > 2 else fn.replace("_", "-")  # type: ignore[attr-defined]
            index[name] = (group, (plain_help(docs.get(fn)) or "").split("\n\n")[0])
    return index


@cache
def _group_command(group: str):
    """The click command (or group) of one group module, registered on its own app."""
    sub = new_app()
    importlib.import_module(f"clinlib.cli.{group}").register(sub)
    return typer.main.get_command(sub)


class LazyGroup(TyperGroup):
    """The top-level ``clintrace`` group: its command list from :func:`command_index`, a
    command's module imported when the command is resolved (to run, or for its own help)."""

    listing = False

    def list_commands(self, ctx) -> list[str]:
        return list(command_index())

    def get_command(self, ctx, cmd_name: str):
        index = command_index()
        if cmd_name not in index:
            return None
        group, short = index[cmd_name]
        if self.listing:  # the command list of `clintrace --help`: name and help only
            return TyperCommand(cmd_name, help=short)
        cmd = _group_command(group)  # a group, or the one command of a one-command module
        return cmd.get_command(ctx, cmd_name) if isinstance(cmd, TyperGroup) else cmd

    def format_help(self, ctx, formatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def resolve_command(self, ctx, args: list[str]):
        self.commands = dict.fromkeys(command_index())  # typer's "did you mean" reads these
        try:
            return super().resolve_command(ctx, args)
        finally:
            self.commands = {}


def build_app() -> typer.Typer:
    """A ``clintrace`` app with every command group registered at once."""
    cli = new_app()
    for group in GROUP_NAMES:
        importlib.import_module(f"clinlib.cli.{group}").register(cli)
    return cli


app = new_app(cls=LazyGroup)

__all__ = ["GROUP_NAMES", "LazyGroup", "app", "build_app", "command_index"]
