"""Atomic artifact writing (docs/design.md: nothing half-written may look complete).

Every stage writes to a temporary sibling and renames it into place only after the write
succeeded, so a crash leaves either the old artifact or none, never a truncated one.
"""

from __future__ import annotations

import os
import shutil
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
