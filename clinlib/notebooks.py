"""Execute the numbered notebooks headless on a profile (used by ``make reproduce``).

Outputs go to ``data/build/<profile>/notebooks/`` so the committed notebooks stay output-free.
"""

from __future__ import annotations

import os
import time

import nbformat
from nbclient import NotebookClient

from clinlib.core.config import NOTEBOOKS_DIR, PROFILE_ENV, REPO_ROOT, artifact_path, build_dir
from clinlib.core.guards import check_artifact
from clinlib.eval.runner import predictions_dir

# What the notebooks read: every stage's main artifact and the offline predictions.
REQUIRED_ARTIFACTS: tuple[str, ...] = ("cohort", "events", "dialogues", "questions")


def numbered_notebooks() -> list:
    """The ``NN_slug.ipynb`` notebooks in order."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def check_built(profile: str) -> None:
    """Refuse at once a profile the notebooks cannot run on (never built, a stage failed or
    is stale, no predictions), instead of failing every notebook."""
    redo = f"run `clintrace pipeline --profile {profile}` first"
    if not build_dir(profile).is_dir():
        raise FileNotFoundError(f"profile {profile!r} was never built ({build_dir(profile)}); "
                                f"{redo}")  # fmt: skip
    for artifact in REQUIRED_ARTIFACTS:
        path = artifact_path(f"{artifact}.parquet", profile)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; {redo}")
        check_artifact(artifact, profile)
    if not any(predictions_dir(profile).glob("*.parquet")):
        raise FileNotFoundError(
            f"no predictions in {predictions_dir(profile)}; run `clintrace evaluate-offline "
            f"--profile {profile}` first"
        )


def execute_all(profile: str, timeout: int = 1200) -> list[dict]:
    """Execute every numbered notebook with ``CLINTRACE_PROFILE=profile``.

    Raises:
        FileNotFoundError / StageError: the profile is not (completely, currently) built.

    Returns:
        One dict per notebook: notebook, ok, seconds, error (first line), output path.
    """
    check_built(profile)
    out_dir = build_dir(profile) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ[PROFILE_ENV] = profile
    results = []
    for path in numbered_notebooks():
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(REPO_ROOT / "notebooks")}},
        )
        row = {"notebook": path.name, "ok": True, "error": ""}
        try:
            client.execute()
        except Exception as exc:  # a failing cell: record it, keep going with the others
            row.update(ok=False, error=str(exc).strip().splitlines()[-1][:200])
        row["seconds"] = time.perf_counter() - t0
        out = out_dir / path.name
        nbformat.write(nb, out)
        row["output"] = str(out)
        results.append(row)
    return results
