"""Execute the numbered notebooks headless on a profile (used by ``make reproduce``).

Outputs go to ``data/build/<profile>/notebooks/`` so the committed notebooks stay output-free.
Each notebook runs in its own kernel, so up to ``workers`` of them run at once (the
notebooks were half of ``make reproduce``); :data:`AFTER` keeps the one order that
matters for their results.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from clinlib.core.config import NOTEBOOKS_DIR, PROFILE_ENV, REPO_ROOT, artifact_path, build_dir
from clinlib.core.guards import check_artifact
from clinlib.core.progress import progress_outputs
from clinlib.eval.harness.runner import predictions_dir

# What the notebooks read: every stage's main artifact and the offline predictions.
REQUIRED_ARTIFACTS: tuple[str, ...] = ("cohort", "events", "dialogues", "questions")
# Notebook -> the notebooks that must finish before it starts. Notebook 11 appends its
# ablation variants' predictions; 04 and 06-10 summarise every offline-reader prediction, so
# they run before it (as in the numbered order) and 13, which reads them all, after it.
# The other notebooks read no predictions and run whenever a worker is free; 14 reads only
# its own setting values (stream@t, mixed...) and the pipeline's post rows of paper
# strategies, which no notebook changes, and its rows are hidden from the others
# (load_predictions returns post / pre unless all_settings=True), so it has no constraint.
_READ_BEFORE_ABLATIONS = (
    "04_run_evaluation",
    "06_t3_injection_probe",
    "07_sp1_aggregation_tax",
    "08_sp2_backbone_profiles",
    "09_sp3_abstention",
    "10_pareto_cost",
)
AFTER: dict[str, tuple[str, ...]] = {
    # 04, 06 and 11 answer the same local-model slice (local_slice) when the local extra is
    # installed: one model server on one port and one slice folder, so one at a time.
    "06_t3_injection_probe": ("04_run_evaluation",),
    "11_ablations": _READ_BEFORE_ABLATIONS,
    "13_failure_explorer": ("11_ablations",),
    # 15 reads the main evaluation's post predictions (by anchor position, by length quartile)
    # from the folder 11 appends to; it adds only extended-task rows (T1R, T10), which
    # load_predictions leaves out unless asked, so no notebook has to wait for it.
    "15_temporal_reasoning": ("11_ablations",),
}


def numbered_notebooks() -> list:
    """The ``NN_slug.ipynb`` notebooks in order."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def check_built(profile: str) -> None:
    """Refuse at once a profile the notebooks cannot run on (never built, a stage failed or
    is stale, no predictions), instead of failing every notebook."""
    redo = f"run `clintrace pipeline --profile {profile}` first"
    if not build_dir(profile).is_dir():
        raise FileNotFoundError(
            f"profile {profile!r} was never built ({build_dir(profile)}); {redo}"
        )
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


def execute_one(path: Path, out_dir: Path, timeout: int) -> dict:
    """Execute one notebook (outputs saved under ``out_dir``); a failing cell is recorded.

    Returns:
        notebook, ok, seconds, error (first line), output path.
    """
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
    bars = progress_outputs(nb)
    if bars and row["ok"]:  # a saved notebook never holds a progress bar
        row.update(
            ok=False, error=f"progress bar in saved output, cell {bars[0][0]}: {bars[0][1]!r}"
        )
    out = out_dir / path.name
    nbformat.write(nb, out)
    row["output"] = str(out)
    return row


def schedule(names: list[str], after: dict[str, tuple[str, ...]] = AFTER) -> list[str]:
    """Start order preference: notebooks others wait for first, then by number."""
    waited = {d for n in names for d in after.get(n, ())}
    return sorted(names, key=lambda n: (n not in waited, n))


def execute_all(
    profile: str,
    timeout: int = 1200,
    workers: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Execute every numbered notebook with ``CLINTRACE_PROFILE=profile``, ``workers`` at a
    time (default: 2, or 1 on a one-core machine), honouring :data:`AFTER`.

    Args:
        profile: build profile.
        timeout: seconds per cell.
        workers: notebooks run at once.
        on_done: called with each notebook's row as it finishes (progress).

    Raises:
        FileNotFoundError / StageError: the profile is not (completely, currently) built.

    Returns:
        One dict per notebook, in numbered order: notebook, ok, seconds, error (first line),
        output path.
    """
    check_built(profile)
    out_dir = build_dir(profile) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ[PROFILE_ENV] = profile
    paths = {p.stem: p for p in numbered_notebooks()}
    workers = max(1, workers or min(2, os.cpu_count() or 1))
    pending, finished, running, results = schedule(list(paths)), set(), {}, {}
    with ThreadPoolExecutor(workers) as pool:
        while pending or running:
            ready = [
                n for n in pending if all(d in finished or d not in paths for d in AFTER.get(n, ()))
            ]
            if not ready and not running:
                raise RuntimeError(f"notebooks {pending} wait for each other (see AFTER)")
            for name in ready[: workers - len(running)]:
                pending.remove(name)
                running[pool.submit(execute_one, paths[name], out_dir, timeout)] = name
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                name = running.pop(fut)
                finished.add(name)
                results[name] = fut.result()
                if on_done is not None:
                    on_done(results[name])
    return [results[n] for n in sorted(results)]
