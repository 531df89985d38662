"""``python -m clinlib.llm.llama_serve [--no-extra-bufts] ARGS``: llama-cpp-python's server
(``python -m llama_cpp.server ARGS``), optionally loading without llama.cpp's extra buffer
types.

llama.cpp's ``llama_model_params.use_extra_bufts`` (on by default) places weights in the
CPU's extra buffer types: repacked layouts and, on a CPU with AMX, AMX tiles. llama-cpp-python
0.3.36 exposes it neither as a ``Llama`` argument nor as a server setting, so this launcher
wraps ``llama_model_default_params`` (which ``Llama.__init__`` calls for its defaults) to
turn the field off before the server loads the model (a VM that advertises AMX
without granting it dies with SIGILL on the first completion otherwise). The decision is
:mod:`clinlib.llm.amx`'s, made by :class:`clinlib.llm.local_server.LocalServer`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

NO_EXTRA_BUFTS = "--no-extra-bufts"
FIELD = "use_extra_bufts"


class LauncherError(RuntimeError):
    """The installed llama-cpp-python cannot be loaded as asked."""


def disable_extra_bufts(lib: ModuleType) -> None:
    """Make ``lib.llama_model_default_params()`` (llama_cpp.llama_cpp) return params with
    ``use_extra_bufts = False``.

    Raises:
        LauncherError: the params struct has no such field (a ctypes Structure would accept
            the attribute silently and change nothing).
    """
    default = lib.llama_model_default_params
    params = default()
    if FIELD not in {name for name, *_ in type(params)._fields_}:
        raise LauncherError(
            f"this llama-cpp-python's llama_model_params has no {FIELD} field; "
            "cannot load without the extra buffer types"
        )

    def without_extra_bufts() -> Any:
        params = default()
        setattr(params, FIELD, False)
        return params

    lib.llama_model_default_params = without_extra_bufts


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server with ``argv`` (default ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    extra = NO_EXTRA_BUFTS not in args
    args = [a for a in args if a != NO_EXTRA_BUFTS]
    import llama_cpp.llama_cpp as lib  # the optional `local` extra

    if not extra:
        try:
            disable_extra_bufts(lib)
        except LauncherError as exc:
            sys.exit(f"clintrace: {exc}")
    state = "on" if extra else "off (no weight repacking, no AMX buffers)"
    print(f"clintrace: llama.cpp extra buffer types {state}", file=sys.stderr, flush=True)
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *args]
    server_main()


if __name__ == "__main__":  # pragma: no cover - run as the server's child process
    main()
