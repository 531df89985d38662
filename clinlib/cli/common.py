"""What the ``clintrace`` commands share: the app and its top-level options, profile and run
options, one-line errors (:func:`run_stage`), the profile's writer lock (:func:`writer_lock`), and
:func:`add_command`, which registers a command with its docstring as plain help text.

The helpers keep their underscore names (they are the command modules' plumbing, not the kit's
API); ``__all__`` lists what the other modules of :mod:`clinlib.cli` import from here.
"""

from __future__ import annotations

import inspect
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from clinlib.core.config import resolve_profile

# What a command needs is imported when it runs (clinlib.cli's module docstring): duckdb, the
# lock, the backbones and the strategies are imported inside the helpers below.

__all__ = [
    "AcceptErrorsOpt",
    "AllowDropsOpt",
    "BackbonesOpt",
    "BudgetOpt",
    "ConfigOpt",
    "LimitOpt",
    "ProfileOpt",
    "SeedOpt",
    "SettingsOpt",
    "StrategiesOpt",
    "TasksOpt",
    "csv_list",
    "fail",
    "interrupt",
    "local_note",
    "pending_as_value",
    "prep_from",
    "profile_name",
    "run_stage",
    "strategy_list",
    "writer_lock",
    "add_command",
    "new_app",
    "plain_help",
]

HELP = """clintrace: one command per pipeline stage (docs/design.md, artifact contract).

Every command takes --profile (else $CLINTRACE_PROFILE, else quick). Errors from bad input are
printed as one clear line (file, column, value) and exit with status 2. A command that writes
into a profile's build folder holds that profile's writer lock: a second writer refuses with
one line naming the holder, or waits (clintrace --wait-for-lock SECONDS <command>).
"""
# An RST role such as :mod:`clinlib.core.lock` or :func:`~x.y`: its target stays, as plain text.
_RST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain_help(doc: str | None) -> str | None:
    """A docstring as ``--help`` text: RST roles and double backticks dropped, each paragraph
    on one line (typer's rich output keeps a paragraph's line breaks after the first), and
    square brackets escaped so rich prints them rather than reading them as markup."""
    if not doc:
        return doc
    text = _RST_ROLE.sub(r"\1", inspect.cleandoc(doc)).replace("``", "")
    paragraphs = [" ".join(ln.strip() for ln in p.splitlines()) for p in text.split("\n\n")]
    return escape("\n\n".join(paragraphs))


def add_command(app: typer.Typer, fn: Callable, name: str | None = None) -> None:
    """Register ``fn`` on ``app`` as command ``name`` (default: its own name, ``_`` as ``-``),
    its docstring shown as plain help."""
    app.command(name, help=plain_help(fn.__doc__))(fn)


def new_app(cls: type | None = None) -> typer.Typer:
    """The bare ``clintrace`` app with its top-level options; :mod:`clinlib.cli` adds the
    command groups (``cls``: the click group class, :class:`clinlib.cli.LazyGroup`)."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP, cls=cls)
    app.callback()(main)
    return app


ProfileOpt = Annotated[
    str | None, typer.Option("--profile", "-p", help="build profile (quick|paper|mimic|...)")
]
SeedOpt = Annotated[int | None, typer.Option(help="seed (default: the profile's)")]
AllowDropsOpt = Annotated[
    bool,
    typer.Option("--allow-drops", help="accept dropping more than 20% of the stage's input"),
]
BudgetOpt = Annotated[
    float | None, typer.Option("--budget", help="stop before new spend could exceed this (USD)")
]
AcceptErrorsOpt = Annotated[
    bool,
    typer.Option(
        "--accept-errors",
        help="exit 0 even when more than 20% of this run's rows are errors or none is an "
        "answer (the rows are recorded either way)",
    ),
]


def fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


def run_stage(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        # SourceSchemaError, StageError, GateError, RunnerError ... are ValueErrors.
        fail(exc)
    except OSError as exc:  # a read-only build folder (or file) mid-stage: one line, not 90
        from clinlib.core.lock import NOT_WRITABLE, not_writable

        if exc.errno not in NOT_WRITABLE:
            raise
        fail(not_writable(Path(exc.filename or "."), exc))
    except Exception as exc:
        duckdb = sys.modules.get("duckdb")  # a duckdb error needs duckdb imported
        if duckdb is None or not isinstance(exc, duckdb.Error):
            raise
        from clinlib.data.sources.mimic import source_error

        fail(source_error(exc))  # a read error a stage did not translate: still one line


def local_note(names: list[str] | None, config: Path | None) -> None:
    """Say that a local backbone's $0 is a fact, not a missing price."""
    from clinlib.llm import get_backbone
    from clinlib.llm.local_server import is_local_name
    from clinlib.llm.presets import LOCAL_COST_NOTE

    local = [
        n
        for n in names or []
        if run_stage(is_local_name, n, config)
        and run_stage(get_backbone, n, config).cost(1e6, 1e6, 1e6) == 0.0
    ]
    if local:
        typer.echo(f"local: $0 for {', '.join(local)} ({LOCAL_COST_NOTE})")


def prep_from(prep: str, profile: str, config: Path | None):
    """The prep model named ``prep`` (``rule-based`` or a backbone, the user's ``--config`` /
    ``$CLINTRACE_CONFIG`` endpoints included), resolved before any work starts."""
    from clinlib.strategies import get_prep

    return get_prep(prep, profile=profile, config=config)


def pending_as_value(fn):
    """``fn`` returning (not raising) a :class:`BatchPending`, which `run_stage` would make an error."""

    from clinlib.llm.batch import BatchPending

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BatchPending as exc:
            return exc

    return call


# Seconds a writing command waits for another writer of its profile (--wait-for-lock; 0: refuse)
LOCK_WAIT: dict[str, float] = {"seconds": 0.0}


@contextmanager
def writer_lock(profile: str) -> Iterator[None]:
    """Hold the profile's writer lock (another holder or a read-only folder: one line, exit 2)."""
    from clinlib.core.lock import profile_lock

    with ExitStack() as stack:
        run_stage(stack.enter_context, profile_lock(profile, wait=LOCK_WAIT["seconds"]))
        if threading.current_thread() is threading.main_thread():
            # SIGTERM (`kill`) stops a writer like Ctrl-C: the stage replaces nothing
            stack.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, interrupt))
        yield


def profile_name(profile: str | None) -> str:
    """The resolved profile name, or a one-line error (e.g. CLINTRACE_PROFILE=../x)."""
    return run_stage(resolve_profile, profile)


def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    wait_for_lock: Annotated[
        float,
        typer.Option(
            help="seconds a writing command waits while another process writes its profile "
            "(default: refuse at once, naming that process)"
        ),
    ] = 0.0,
) -> None:
    """ClinTrace Kit: longitudinal clinical reasoning over EHR-derived dialogues."""
    if threading.current_thread() is threading.main_thread():
        # the command starts: Ctrl-C is Python's again (the commands' one-line handling)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    LOCK_WAIT["seconds"] = max(float(wait_for_lock), 0.0)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )


def csv_list(value: str | None) -> list[str] | None:
    # Commas inside parentheses belong to a strategy label: "dense-retrieval(k=3, ...)".
    return [v.strip() for v in re.split(r",(?![^()]*\))", value) if v.strip()] if value else None


def strategy_sets() -> dict[str, tuple[str, ...]]:
    """``paper`` and ``evaluation``: the strategy names each stands for."""
    from clinlib.strategies import EVALUATION_STRATEGIES, PAPER_STRATEGIES

    return {"paper": PAPER_STRATEGIES, "evaluation": EVALUATION_STRATEGIES}


def strategy_list(value: str | None) -> list[str] | None:
    """Names with ``paper`` expanded to the paper's eight and ``evaluation`` to the default
    evaluation set (the eight + event-table + oracle; :mod:`clinlib.strategies.names`)."""
    names = csv_list(value)
    if names is None:
        return None
    sets = strategy_sets()
    out = [n for name in names for n in sets.get(name, (name,))]
    return list(dict.fromkeys(out))


StrategiesOpt = Annotated[
    str,
    typer.Option(
        "--strategies",
        help="comma-separated strategy names or labels, e.g. "
        "'dense-retrieval(k=3)'; 'paper' = the paper's eight, 'evaluation' = the eight + "
        "event-table + oracle",
    ),
]
BackbonesOpt = Annotated[
    str, typer.Option("--backbones", help="comma-separated backbone names (see `backbones`)")
]
SettingsOpt = Annotated[
    str,
    typer.Option(
        "--settings",
        help="comma-separated settings: post, pre (T3 injection), "
        "stream (checkpoints), mixed (noisy dialogues); '+' combines, e.g. "
        "'stream,stream+mixed,mixed(ratio=0.5, seed=123)' (clinlib.tasks.settings)",
    ),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML with user backbones ($CLINTRACE_CONFIG)")
]
TasksOpt = Annotated[str | None, typer.Option("--tasks", help="restrict to tasks, e.g. T1,T9")]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        help="the first N questions of each task (questions.parquet order), e.g. "
        "--limit 2 asks 2 T1, 2 T2, ... under every strategy and setting"
    ),
]


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt
