"""Local model servers the kit started: where they are, whether they still run, how they died.

A server started by ``clintrace serve-local`` runs in another process than the ``clintrace
run`` that uses it, so it leaves a record in its profile's build folder
(``data/build/<profile>/local-server/server.json``: address, process ids, log) that the run
follows (``run --backbones local-smollm2`` after ``serve-local --port 8766`` asks port 8766),
and marks the record dead with its exit code or signal and its log's last lines when the
server dies. A record whose processes are gone, or whose address no longer serves the model,
is stale and never trusted.

While a run asks a local backbone, a failed connection is checked against the server that
serves it (:func:`death_report`: an in-process :class:`clinlib.llm.local_server.LocalServer`
registered with :func:`watch`, or a record): a dead server stops the run with one line
(:class:`LocalServerDied`) instead of retrying every request against a closed port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from clinlib.core.config import build_dir
from clinlib.llm.types import BackboneError

RECORD_DIR = "local-server"
RECORD_FILE = "server.json"
TAIL_LINES = 3


class LocalModelError(BackboneError):
    """The local model cannot be served: extra or model missing, port taken, server died."""


class LocalServerDied(LocalModelError):
    """The local server a run was asking died (one line: how, and its log's last lines)."""


def describe_exit(returncode: int) -> str:
    """``"exit code 3"`` or ``"signal SIGILL (Illegal instruction)"`` for a child's status."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"signal {-returncode}"
    return f"signal {sig.name} ({signal.strsignal(sig) or sig.name})"


def log_tail(path: Path | str | None, lines: int = TAIL_LINES) -> str:
    """The last non-blank lines of a log, joined with `` / `` (one line)."""
    if path is None:
        return "(no log)"
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " / ".join(kept) or "(empty log)"


def died_line(
    name: str, base_url: str, returncode: int, log: Path | str | None, hint: str = ""
) -> str:
    """The one line that reports a dead server: how it ended and its log's last lines."""
    how = describe_exit(returncode)
    line = f"the local server of {name!r} at {base_url} died ({how}); its log {log} ends: "
    line += log_tail(log)
    return f"{line}{hint}"


# -- the record a `clintrace serve-local` keeps in its profile's build folder --------------
@dataclass(frozen=True)
class ServerRecord:
    """What a running ``serve-local`` leaves for runs in other processes.

    Attributes:
        base_url: the server's ``http://host:port/v1``.
        model: the id it serves.
        pid: the ``serve-local`` process (the watcher); server_pid: the model server itself.
        log: the server's log file.
        threads: its llama.cpp threads (the backbone's concurrency).
        started: UNIX time it answered first.
        state: ``"running"`` or ``"dead"``; death: the one-line report once dead.
    """

    base_url: str
    model: str
    pid: int
    server_pid: int
    log: str
    threads: int
    started: float
    state: str = "running"
    death: str | None = None


def record_path(profile: str | None = None) -> Path:
    """``data/build/<profile>/local-server/server.json``."""
    return build_dir(profile) / RECORD_DIR / RECORD_FILE


def write_record(record: ServerRecord, path: Path) -> None:
    """Write ``record`` atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(record), indent=1))
    os.replace(tmp, path)


def read_record(path: Path) -> ServerRecord | None:
    """The record at ``path``, or None when there is none or it is unreadable."""
    try:
        data = json.loads(path.read_text())
        return ServerRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process of that id runs (signal 0 probes without sending anything; a zombie,
    exited but not yet reaped by its parent, does not run)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def record_death(record: ServerRecord) -> str | None:
    """The record's death line: as its watcher wrote it, or because its processes are gone."""
    if record.state == "dead":
        return record.death or f"the local server at {record.base_url} died"
    if not pid_alive(record.server_pid) and not pid_alive(record.pid):
        return (
            f"the local server at {record.base_url} is gone (process {record.server_pid} "
            f"and its watcher {record.pid} no longer run); its log {record.log} ends: "
            f"{log_tail(record.log)}"
        )
    return None


def live_record(path: Path, answers: Callable[[str], list[str] | None]) -> ServerRecord | None:
    """The record at ``path`` if its server runs and serves its model, else None (stale).

    Args:
        path: the record file.
        answers: ``answers(base_url)`` -> the model ids served there, None if nothing answers
            (:func:`clinlib.llm.local_server.models_answer`).
    """
    record = read_record(path)
    if record is None or record_death(record) is not None:
        return None
    if record.model not in (answers(record.base_url) or []):
        return None  # another server took the port, or it hangs: not the one recorded
    return record


# -- liveness of the servers a run asks -----------------------------------------------------
# base_url -> a callable returning the one-line death report, or None while alive.
_WATCHED: dict[str, Callable[[], str | None]] = {}
_LOCK = threading.Lock()


def watch(base_url: str, report: Callable[[], str | None]) -> None:
    """Have :func:`death_report` ask ``report()`` about the server at ``base_url``."""
    with _LOCK:
        _WATCHED[base_url.rstrip("/")] = report


def unwatch(base_url: str, report: Callable[[], str | None] | None = None) -> None:
    """Stop watching ``base_url`` (only if still watched by ``report``, when given)."""
    with _LOCK:
        key = base_url.rstrip("/")
        if report is None or _WATCHED.get(key) is report:
            _WATCHED.pop(key, None)


def watch_record(path: Path) -> ServerRecord | None:
    """Watch the server of the record at ``path`` (followed by a run in another process)."""
    record = read_record(path)
    if record is None:
        return None

    def report() -> str | None:
        current = read_record(path)
        return record_death(current) if current is not None else record_death(record)

    watch(record.base_url, report)
    return record


def death_report(base_url: str | None, grace_s: float = 0.5) -> str | None:
    """Why the watched server at ``base_url`` is dead, or None (alive, or not watched).

    A server killed mid-request closes its socket a moment before its parent can see its
    exit status, so an alive answer is asked again for up to ``grace_s``.
    """
    with _LOCK:
        report = _WATCHED.get((base_url or "").rstrip("/"))
    if report is None:
        return None
    deadline = time.monotonic() + grace_s
    while (line := report()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return line


def raise_if_dead(base_url: str | None) -> None:
    """Raise :class:`LocalServerDied` if the watched server at ``base_url`` is dead."""
    line = death_report(base_url)
    if line is not None:
        raise LocalServerDied(line)


def remove_record(path: Path, pid: int | None = None) -> None:
    """Delete the record (only if it is still this ``pid``'s, when given)."""
    record = read_record(path)
    if record is not None and (pid is None or record.pid == pid):
        with contextlib.suppress(OSError):
            path.unlink()
