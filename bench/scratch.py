"""A scratch copy of the repository for the benches that change code under test
(bench.mutation, bench.seeded): the working tree is never touched."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("conftest.py", "pyproject.toml")
# caches, and the benches' own scratch folders under data/build
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "_mutation", "_seeded", ".ipynb*")


def copy_repo(scratch: Path, dirs: tuple[str, ...]) -> Path:
    """``scratch`` (emptied first) holding ``dirs`` and the pytest configuration files."""
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for name in dirs:
        shutil.copytree(REPO / name, scratch / name, ignore=IGNORE, symlinks=True)
    for name in FILES:
        shutil.copy2(REPO / name, scratch / name)
    return scratch
