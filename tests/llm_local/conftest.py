"""The real local model server (llama.cpp + SmolLM2-135M), started once for these tests.

Skipped with the reason when the ``local`` extra or the model package is missing, except under
``CLINTRACE_REQUIRE_LOCAL_MODEL=1`` (``make test-local``, CI), where that absence fails.
"""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.llm import local_server

REQUIRE_ENV = "CLINTRACE_REQUIRE_LOCAL_MODEL"
# Two quick-profile patients with two visits each and T1, T3 and T9 questions between them:
# small enough for a 135M model on 2 cores, and every answer format of the slice appears.
PATIENTS = (10000413, 10000237)
TASKS = ("T1", "T3", "T9")


@pytest.fixture(scope="session")
def local_server_running():
    """A running :class:`LocalServer` on a free port (its backbone registered meanwhile)."""
    ok, why = local_server.local_available()
    if not ok:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but the local model is unavailable: {why}")
        pytest.skip(why)
    with local_server.LocalServer(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def local_profile(tmp_path_factory, quick_built):
    """A build folder ``local`` in a temporary BUILD_DIR holding the quick profile's dialogues,
    questions and source of :data:`PATIENTS` only (nothing is written into data/build/quick)."""
    quick = config.BUILD_DIR / quick_built
    root = tmp_path_factory.mktemp("build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", root)
        yield _copy_slice(quick, root / "local")


def _copy_slice(quick, out) -> str:
    out.mkdir()
    dialogues = pd.read_parquet(quick / "dialogues.parquet")
    dialogues[dialogues["subject_id"].isin(PATIENTS)].to_parquet(out / "dialogues.parquet")
    qs = pd.read_parquet(quick / "questions.parquet")
    first = qs["subject_ids"].map(lambda ids: int(ids[0]))
    keep = qs[first.isin(PATIENTS) & qs["subject_ids"].map(len).eq(1) & qs["task"].isin(TASKS)]
    keep.reset_index(drop=True).to_parquet(out / "questions.parquet")
    shutil.copy(quick / "source.json", out / "source.json")
    assert json.loads((out / "source.json").read_text())["credentialed"] is False
    return out.name
