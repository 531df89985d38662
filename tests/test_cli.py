"""The clintrace command line as a package (docs/design.md "Layout"): commands registered
explicitly, group by group; help as plain text; one meaning per flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

import clinlib
from clinlib import cli
from clinlib.cli import common, stages

ROOT = Path(clinlib.__file__).resolve().parent
WIDE = {"COLUMNS": "200"}


def _help(*args: str) -> str:
    result = CliRunner().invoke(cli.app, [*args, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def _names(app) -> set[str]:
    return set(get_command(app).commands) if app.registered_commands else set()


def test_the_package_root_holds_no_cli_modules():
    assert sorted(p.name for p in ROOT.glob("cli_*.py")) == []
    assert not (ROOT / "cli.py").exists()
    assert not (ROOT / "site.py").exists() and not (ROOT / "notebooks.py").exists()


def test_commands_are_registered_by_their_group_not_by_import():
    # importing a group module adds nothing: a bare app has no command until register()
    bare = common.new_app()
    assert bare.registered_commands == []
    stages.register(bare)
    assert _names(bare) == {
        "synth",
        "cohort",
        "export-meds",
        "dialogues",
        "questions",
        "strategies",
        "evaluate-offline",
        "audit",
    }
    every = set()
    for group in cli.GROUPS:
        app = common.new_app()
        group.register(app)
        assert not every & _names(app), group.__name__  # each command in one group only
        every |= _names(app)
    assert every == _names(cli.app) == _names(cli.build_app())
    assert {"run", "estimate", "pipeline", "reproduce", "site", "judge", "score"} <= every


@pytest.mark.parametrize(
    "args",
    [(), ("run",), ("estimate",), ("questions",), ("evaluate-offline",), ("site",), ("judge",)],
)
def test_help_prints_no_rst_markup(args):
    out = _help(*args)
    assert "``" not in out
    assert ":mod:" not in out and ":func:" not in out


def test_help_keeps_square_brackets_and_joins_paragraph_lines():
    # rich would read [[task]] as markup and print "[]"
    assert "[[task]]" in _help("population-spec")
    assert common.plain_help("A ``b``\n:mod:`c.d` e.\n\nF [x].") == "A b c.d e.\n\nF \\[x]."


def test_allow_drops_and_accept_errors_are_two_flags():
    for stage in ("cohort", "dialogues", "questions", "pipeline"):
        out = _help(stage)
        assert "--allow-drops" in out and "--accept-errors" not in out, stage
    for command in ("run", "evaluate-offline"):
        out = _help(command)
        assert "--accept-errors" in out and "--allow-drops" not in out, command
