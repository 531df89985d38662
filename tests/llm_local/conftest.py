"""The real local model server (llama.cpp + SmolLM2-135M), started once for these tests.

Skipped with the reason when the ``local`` extra or the model package is missing, except under
``CLINTRACE_REQUIRE_LOCAL_MODEL=1`` (``make test-local``, CI), where that absence fails.
"""

from __future__ import annotations

import os

import pytest

from clinlib.core import config
from clinlib.eval.harness.slices import slice_profile, smallest_patients
from clinlib.llm import local_server

REQUIRE_ENV = "CLINTRACE_REQUIRE_LOCAL_MODEL"
# The two quick-profile patients with the shortest dialogues asked T1 / T3 / T9 questions (two
# visits each; 3 + 3 questions): small enough for a 135M model on 2 cores.
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
    # The log is kept in the quick profile's build folder, so a failed `make test-local` (CI)
    # leaves the server's own account of it.
    log = config.build_dir("quick") / "local-server" / "test-local.log"
    with local_server.LocalServer(port=0, log_path=log) as server:
        yield server


@pytest.fixture(scope="module")
def local_profile(tmp_path_factory, quick_built):
    """A slice ``local`` of the quick profile (:data:`PATIENTS`' questions of :data:`TASKS`)
    in a temporary BUILD_DIR: nothing is written into data/build/quick."""
    root = tmp_path_factory.mktemp("build")
    (root / quick_built).symlink_to(config.BUILD_DIR / quick_built, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", root)
        assert smallest_patients(quick_built, TASKS) == list(PATIENTS)
        yield slice_profile(quick_built, "local", PATIENTS, TASKS)
