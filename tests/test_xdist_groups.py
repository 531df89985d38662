"""``make test``'s grouping works: under ``-n 2 --dist loadgroup`` every test of one
``xdist_group`` runs on one worker, so a module fixture is set up once and the notebooks run
in order on one worker (conftest.py). pytest 9.2 with xdist 3.8 broke this silently (xdist
rewrites a node-id attribute pytest 9.2 no longer reads); this runs a small suite the way
``make test`` does and counts the workers each group used."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    with open(os.environ["WHERE"], "a") as fh:
        fh.write(f"grouped {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""
OTHERS = """
import time
import pytest


@pytest.mark.parametrize("i", range(12))
def test_other(i):
    time.sleep(0.05)
"""


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(GROUPED), encoding="utf-8")
    (tmp_path / "test_others.py").write_text(textwrap.dedent(OTHERS), encoding="utf-8")
    where = tmp_path / "where.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "test_grouped.py", "test_others.py"],
        cwd=tmp_path, env={**os.environ, "WHERE": str(where)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = where.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6
    assert len(set(lines)) == 1, f"the group ran on {sorted(set(lines))}"
