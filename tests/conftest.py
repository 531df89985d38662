"""Shared fixtures: the quick profile's artifacts, built once per session if missing.

`make test` builds them before pytest runs (``clintrace pipeline --profile quick``); the
fixture makes single test files runnable on their own.
"""

from __future__ import annotations

import os

import pytest

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
