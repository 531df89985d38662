"""Shared fixtures: the quick profile's artifacts, built once per session if missing.

`make test` builds them before pytest runs (``clintrace pipeline --profile quick``); the
fixture makes single test files runnable on their own.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clinlib.core import config
from clinlib.core.config import artifact_path, raw_hosp_dir

os.environ.setdefault("CLINTRACE_PROFILE", "quick")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def quick_cohort():
    """Build (if needed) the quick profile's synthetic tables and cohort artifacts."""
    from clinlib.data.build import build_cohort
    from clinlib.data.sources.synthetic import synthesize

    if not (raw_hosp_dir("quick") / "labevents.csv.gz").exists():
        synthesize("quick")
    if not artifact_path("events.parquet", "quick").exists():
        build_cohort("quick")
    return "quick"


QUICK_ARTIFACTS = ("dialogues.parquet", "event_coverage.parquet", "questions.parquet")


@pytest.fixture(scope="session")
def quick_built():
    """The quick profile through the questions stage: `make test` builds it first; a test file
    run on its own builds it here (never skipped: a missing build is built, or the test fails)."""
    if not all(artifact_path(name, "quick").exists() for name in QUICK_ARTIFACTS):
        # two xdist workers may get here at once: the second waits for the first's lock
        for stage in ("synth", "cohort", "dialogues", "questions"):
            subprocess.run([sys.executable, "-m", "clinlib.cli", "--wait-for-lock", "3600", stage,
                            "--profile", "quick"], check=True)  # fmt: skip
    return "quick"


@pytest.fixture
def quick_in_tmp_build(tmp_path, monkeypatch, quick_built):
    """A temporary BUILD_DIR holding (a link to) the quick profile: slices and the
    constructions built for them are written there, not into data/build."""
    (tmp_path / quick_built).symlink_to(config.BUILD_DIR / quick_built, target_is_directory=True)
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def quick_temporal(quick_built):
    """The quick profile's extended question set (T10, T1R): `clintrace questions` writes it
    after the paper set; built here when an older build lacks it or one of its tasks."""
    import pandas as pd

    from clinlib.tasks.extended import build_temporal_questions, extended_counts

    path = artifact_path("temporal_questions.parquet", "quick")
    if not path.exists() or set(pd.read_parquet(path, columns=["task"])["task"]) != set(
        extended_counts("quick")
    ):
        build_temporal_questions("quick")
    return "quick"
