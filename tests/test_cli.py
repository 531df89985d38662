"""The clintrace command line as a package (docs/design.md "Layout"): commands registered
explicitly, group by group; help as plain text; one meaning per flag."""

from __future__ import annotations

import importlib
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
        "evaluate-longmed",
        "trap-answers",
        "audit",
    }
    every = set()
    for name in cli.GROUP_NAMES:
        group = importlib.import_module(f"clinlib.cli.{name}")
        app = common.new_app()
        group.register(app)
        assert not every & _names(app), group.__name__  # each command in one group only
        every |= _names(app)
    assert every == set(cli.command_index()) == _names(cli.build_app())
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


def test_help_lists_the_same_commands_without_importing_them():
    """`clintrace --help` reads the command list from the group modules' source: same names,
    order and help as the eagerly built app, and no stage package imported."""
    import subprocess
    import sys

    eager = get_command(cli.build_app())
    assert list(cli.command_index()) == list(eager.commands)
    for name, (_, short) in cli.command_index().items():
        assert short == (eager.commands[name].help or "").split("\n\n")[0], name
    lazy_out = CliRunner().invoke(cli.app, ["--help"], env=WIDE).output
    eager_out = CliRunner().invoke(cli.build_app(), ["--help"], env=WIDE).output
    assert lazy_out == eager_out
    code = (
        "import sys; from clinlib.cli import app\n"
        "try:\n    app(['--help'], prog_name='clintrace')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('duckdb', 'pandas', 'openai', 'clinlib.data', 'clinlib.llm', "
        "'clinlib.eval', 'clinlib.strategies') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout, out.stdout


def test_a_command_still_resolves_through_the_lazy_group():
    out = _help("cohort")
    assert "--meds-dir" in out and "--allow-drops" in out
    bad = CliRunner().invoke(cli.app, ["cohortt"], env=WIDE)
    assert bad.exit_code == 2 and "No such command" in bad.output


# The child starts as `clintrace backbones` would; SIGINT arrives (a) once clinlib.cli is
# imported, (b) while the command's group module imports (seconds of numpy / openai), (c) from
# a thread while the command runs.
SIGINT_AT = {
    "after_import": "import clinlib.cli\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)",
    "group_import": (
        "from clinlib.cli import app\n"
        "threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "app(['backbones'], prog_name='clintrace')"
    ),
}


@pytest.mark.parametrize("moment", sorted(SIGINT_AT))
def test_ctrl_c_while_the_command_line_starts_is_one_line(moment):
    """Before: a 44-line KeyboardInterrupt traceback. (Python's own start-up, before any line
    of the kit runs, stays Python's.)"""
    import os
    import subprocess
    import sys

    code = "import os, signal, sys, threading, time\nsys.argv = ['clintrace', 'backbones']\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    proc = subprocess.run(
        [sys.executable, "-c", code + SIGINT_AT[moment]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert lines == [cli.INTERRUPTED], proc.stderr
    assert proc.returncode == 130
