"""Atomic artifact writing (docs/design.md: nothing half-written may look complete).

Every stage writes to a temporary sibling and renames it into place only after the write
succeeded, so a crash leaves either the old artifact or none, never a truncated one. A stage
with several outputs writes them all into a :class:`Staging` folder and swaps them into place
together (Ctrl-C / SIGTERM deferred during the swap), so its outputs are replaced as one unit
or not at all.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place on success.

    Works for files and directories. On failure the temporary is removed and any existing
    ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
        raise


_DEFERRING: list[bool] = []


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT / SIGTERM until the body is done, then act on them (a KeyboardInterrupt).

    Only the main thread can install handlers; elsewhere the body just runs.
    """
    if threading.current_thread() is not threading.main_thread() or _DEFERRING:
        yield  # another thread, or already inside a deferral (the outer one acts)
        return
    caught: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda n, _f: caught.append(n)) for s in wanted}
    _DEFERRING.append(True)
    try:
        yield
    finally:
        _DEFERRING.pop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt(f"signal {caught[0]} during an artifact swap (deferred)")


class Staging:
    """One stage's outputs, written into a private folder and swapped in together.

    ``path(name)`` gives where to write ``name``; :meth:`commit` renames every staged file
    into the target folder (renames within one filesystem, signals deferred), in the order
    their paths were first asked for; :meth:`discard` drops what was staged. A stage that
    writes straight into the target (no ``path`` call) stages nothing.
    """

    def __init__(self, target: Path, label: str) -> None:
        self.target = Path(target)
        self.dir = self.target / f".staging-{label}-{os.getpid()}"
        self.order: list[str] = []
        self.committed: set[str] = set()

    def path(self, name: str) -> Path:
        if not self.order and self.dir.exists():  # left over by a killed run of this pid
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        if name not in self.order:
            self.order.append(name)
        return self.dir / name

    def commit(self) -> list[str]:
        """Move every staged file into place; returns the names moved."""
        moved = [n for n in self.order if (self.dir / n).exists()]
        with deferred_signals():
            for name in moved:
                os.replace(self.dir / name, self.target / name)
            self.committed.update(moved)
            self.order = [n for n in self.order if n not in moved]
        self.discard()
        return moved

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.order = []


def write_parquet(df: pd.DataFrame, path: Path) -> Path:
    """Write ``df`` to ``path`` atomically (no index). Returns the path."""
    with atomic_path(Path(path)) as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)


def read_artifact(path: Path, stage_hint: str) -> pd.DataFrame:
    """Read a parquet artifact, or fail with the command that produces it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run `{stage_hint}` first")
    return pd.read_parquet(path)
