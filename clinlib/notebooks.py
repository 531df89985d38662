"""Execute the numbered notebooks headless on a profile (used by ``make reproduce``).

Outputs go to ``data/build/<profile>/notebooks/`` so the committed notebooks stay output-free.
"""

from __future__ import annotations

import os
import time

import nbformat
from nbclient import NotebookClient

from clinlib.config import NOTEBOOKS_DIR, PROFILE_ENV, REPO_ROOT, build_dir


def numbered_notebooks() -> list:
    """The ``NN_slug.ipynb`` notebooks in order."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def execute_all(profile: str, timeout: int = 1200) -> list[dict]:
    """Execute every numbered notebook with ``CLINTRACE_PROFILE=profile``.

    Returns:
        One dict per notebook: notebook, ok, seconds, error (first line), output path.
    """
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
