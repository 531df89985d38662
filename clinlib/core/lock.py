"""One writer per profile (docs/design.md "The artifact contract").

Every command that writes into ``data/build/<profile>/`` (synth, cohort, dialogues,
questions, strategies, run, evaluate-offline, notebooks, and pipeline / reproduce around
them) holds the profile's lock, a ``filelock.FileLock`` (an OS advisory lock: released by the
kernel when its process dies, so a killed writer never leaves a stale lock). A second writer
on the same profile refuses at once (or waits up to ``wait`` seconds) with one line naming
the holder: its pid, its command line and since when. Readers (notebooks, the apps,
``clintrace info``) take no lock: every stage replaces its outputs as one unit
(:class:`clinlib.core.io.Staging`), so a reader sees the old set or the new one.

The lock and its holder record sit beside the profile's folder, in ``data/build/`` (
``.<profile>.writer.lock``, ``.<profile>.writer.json``: the record written after the lock is
taken, removed before it is released), so taking the lock creates no profile folder: a
command refused for a bad argument leaves nothing behind. The lock is re-entrant within a
process, so ``pipeline`` can call each stage's command under its own lock.

A writer's child processes share its lock: a notebook's kernel, started by
``clintrace notebooks`` while that command holds the lock, calls
:func:`clinlib.eval.harness.runner.run`, which takes the lock too. The holder lists the lock file and
its pid in ``$CLINTRACE_WRITER_LOCKS`` (inherited by children only); a process that finds its
profile's lock file there, with that pid the recorded, living holder, proceeds as part of the
holder's work instead of refusing. Any other process is refused as before.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from clinlib.core import config
from clinlib.core.config import build_dir, resolve_profile
from clinlib.core.io import atomic_path

LOCK_SUFFIX = ".writer.lock"
HOLDER_SUFFIX = ".writer.json"
# errno values that mean "this folder cannot be written", reported as one line
NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)

# build folder -> [the FileLock this process holds, nesting depth]
_HELD: dict[str, list] = {}
# "<lock file>=<pid>" entries (os.pathsep-separated) of the locks this process's ancestors
# and this process hold: children inherit the environment, other processes do not
HELD_ENV = "CLINTRACE_WRITER_LOCKS"
# How long a Python caller (runner.run from a notebook) waits for another writer of its
# profile: notebooks run side by side (make test runs two at a time) wait their turn rather
# than fail; the CLI refuses at once unless given --wait-for-lock.
LIBRARY_LOCK_WAIT_S = 1800.0


class ProfileBusy(ValueError):
    """Another process holds the profile's writer lock; the message names it (one line)."""


class BuildNotWritable(ValueError):
    """The build folder cannot be written (read-only, no permission); one line."""


def command_line(argv: list[str] | None = None) -> str:
    """The running command as the user typed it: ``clintrace run --profile quick``."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return "python"
    return " ".join([Path(argv[0]).name, *argv[1:]])


def lock_paths(profile: str | None = None) -> tuple[Path, Path]:
    """(lock file, holder record) of a profile: ``data/build/.<profile>.writer.{lock,json}``."""
    name = resolve_profile(profile)
    return (
        config.BUILD_DIR / f".{name}{LOCK_SUFFIX}",
        config.BUILD_DIR / f".{name}{HOLDER_SUFFIX}",
    )


def holder(profile: str | None = None) -> dict | None:
    """The recorded holder of a profile's lock (pid, command, since), or None."""
    try:
        return json.loads(lock_paths(profile)[1].read_text())
    except (OSError, json.JSONDecodeError):
        return None


def holder_text(record: dict | None) -> str:
    """``pid 4242 (`clintrace run --profile quick`, since 2026-12-02 07:50:01 UTC)``."""
    if not record:
        return "another process (it has not recorded itself yet)"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(record.get("since", 0))))
    return f"pid {record.get('pid')} (`{record.get('command')}`, since {since})"


def not_writable(path: Path, err: OSError) -> BuildNotWritable:
    """The one-line error for a folder or file that cannot be written."""
    why = err.strerror or type(err).__name__
    return BuildNotWritable(
        f"{err.filename or path}: cannot write ({why}); a writing stage needs this build "
        "folder writable: fix its permissions, or pick another --profile"
    )


@contextmanager
def profile_lock(
    profile: str | None, command: str | None = None, wait: float = 0.0
) -> Iterator[Path]:
    """Hold ``profile``'s writer lock for the body (re-entrant within this process).

    Args:
        profile: build profile.
        command: what to record as the holder's command (default: this process's argv).
        wait: seconds to wait for another writer to finish (0: refuse at once).

    Yields:
        The profile's build folder.

    Raises:
        ProfileBusy: another process holds the lock (after ``wait`` seconds).
        BuildNotWritable: the build folder cannot be created or written.
    """
    name = resolve_profile(profile)
    root = build_dir(name)
    key = str(root.absolute())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield root
        finally:
            _HELD[key][1] -= 1
        return
    lock_file, holder_file = lock_paths(name)
    if _held_by_ancestor(lock_file, name):
        yield root  # part of the holder's work (a notebook kernel of `clintrace notebooks`)
        return
    lock = _acquire(lock_file, name, wait)
    _HELD[key] = [lock, 1]
    entry = f"{lock_file.absolute()}={os.getpid()}"
    _set_env_entries([*_env_entries(), entry])
    try:
        _record(holder_file, command)
        yield root
    finally:
        del _HELD[key]
        _set_env_entries([e for e in _env_entries() if e != entry])
        holder_file.unlink(missing_ok=True)
        lock.release()


def _env_entries() -> list[str]:
    return [e for e in os.environ.get(HELD_ENV, "").split(os.pathsep) if e]


def _set_env_entries(entries: list[str]) -> None:
    if entries:
        os.environ[HELD_ENV] = os.pathsep.join(entries)
    else:
        os.environ.pop(HELD_ENV, None)


def _held_by_ancestor(lock_file: Path, name: str) -> bool:
    """Whether an ancestor of this process holds ``lock_file`` (see the module docstring)."""
    want = str(lock_file.absolute())
    for entry in _env_entries():
        path, _, pid = entry.rpartition("=")
        if path != want or not pid.isdigit() or int(pid) == os.getpid():
            continue
        record = holder(name)
        if record and record.get("pid") == int(pid) and pid_alive(int(pid)):
            return True
    return False


def pid_alive(pid: int) -> bool:
    """Whether a process of that id exists (signal 0 probes without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _acquire(lock_file: Path, name: str, wait: float) -> FileLock:
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lock_file)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if wait <= 0:
                raise
            print(
                f"profile {name!r} is being written by {holder_text(holder(name))}; "
                f"waiting up to {wait:g} s",
                file=sys.stderr,
            )
            lock.acquire(timeout=float(wait))
    except Timeout:
        waited = f" (waited {wait:g} s)" if wait > 0 else ""
        raise ProfileBusy(
            f"profile {name!r} is being written by {holder_text(holder(name))}{waited}; "
            "one writer per profile: wait for it to finish (or pass --wait-for-lock SECONDS)"
        ) from None
    except OSError as err:
        if err.errno in NOT_WRITABLE:
            raise not_writable(lock_file.parent, err) from None
        raise
    return lock


def _record(path: Path, command: str | None) -> None:
    body = {"pid": os.getpid(), "command": command or command_line(), "since": time.time()}
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(body))
    except OSError as err:
        if err.errno in NOT_WRITABLE:
            raise not_writable(path.parent, err) from None
        raise
