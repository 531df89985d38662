"""The option that works where a local-server message is printed: ``hints="python"``
(``port=``, ``serve_local()``), ``"cli"`` (``--port``, ``clintrace serve-local``) or ``"make"``
(``PORT=``); :mod:`clinlib.llm.local_server` words its errors with these.
"""

from __future__ import annotations

from typing import Literal

from clinlib.llm.presets import LOCAL_PORT

Hints = Literal["python", "cli", "make"]


def port_hint(hints: Hints, port: int) -> str:
    """How to choose another port, in the words of where the message is printed."""
    other = port + 1 if 0 < port < 65535 else LOCAL_PORT + 1
    return {
        "cli": f"stop what uses it or pass another --port (e.g. --port {other})",
        "make": f"stop what uses it or pass another PORT (e.g. make serve-local PORT={other})",
        "python": f"stop what uses it or pass another port (e.g. serve_local(port={other}); "
        "port=0 picks a free one)",
    }[hints]


def start_hint(hints: Hints, profile: str) -> str:
    """How to start the kit's local model, in the words of where the message is printed."""
    if hints == "python":
        return (
            "start it around the run: `with clinlib.serve_local() as bb: "
            "runner.run(RunSpec(..., backbones=[bb]))`"
        )
    return (
        f"start it first in another terminal: `clintrace serve-local --profile {profile}` "
        f"(or `make serve-local PROFILE={profile}`)"
    )


def extra_bufts_hint(hints: Hints) -> str:
    """How to load without llama.cpp's extra buffer types, where the message is printed."""
    if hints == "python":
        return "serve_local(extra_bufts='off') / LocalServer(extra_bufts='off')"
    return "`clintrace serve-local --extra-bufts off`"
