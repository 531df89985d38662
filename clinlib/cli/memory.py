"""``clintrace memory-serve``: the reference memory service over HTTP
(docs/memory-protocol.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from clinlib.cli.common import (
    ConfigOpt,
    ProfileOpt,
    add_command,
    fail,
    prep_from,
    profile_name,
    run_stage,
)
from clinlib.strategies.memory_server import MemoryServer, ReferenceMemoryService

MEMORY_PORT = 8790  # the default endpoint of remote-memory


def memory_serve(
    profile: ProfileOpt = None,
    backend: Annotated[
        str, typer.Option(help="the kit memory behind it, e.g. mem0 or dense-retrieval(k=3)")
    ] = "mem0",
    prep: Annotated[str, typer.Option(help="the backend's prep model")] = "rule-based",
    host: Annotated[str, typer.Option(help="interface (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port)")] = MEMORY_PORT,
    config: ConfigOpt = None,
) -> None:
    """Serve the memory protocol (reset / ingest / query) backed by one of the kit's
    memories until Ctrl-C; point `remote-memory(endpoint=URL)` at the printed URL."""
    name = profile_name(profile)
    prep_model = run_stage(prep_from, prep, name, config)  # a prep backbone may be the config's
    service = run_stage(ReferenceMemoryService, backend, name, prep_model)
    try:
        server = MemoryServer(service, host, port)
    except OSError as exc:  # port taken, unknown interface: one line
        fail(ValueError(f"memory-serve: cannot listen on {host}:{port}: {exc.strerror or exc}"))
    typer.echo(f"memory-serve: {service.backend} ({prep}, profile {name}) at {server.base_url}")
    sys.stdout.flush()  # the URL reaches a pipe or a log file at once, not at exit
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        typer.echo("memory-serve: stopped")
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    """Add ``memory-serve`` to the ``clintrace`` app."""
    add_command(app, memory_serve, "memory-serve")
