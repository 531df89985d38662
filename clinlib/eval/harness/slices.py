"""A small slice of a profile as a build folder of its own (paper §4 "Backbones").

A slow backbone (a local model on a laptop's cores) is answered on a few patients' questions,
not on the whole set. Answering them in the profile itself would add that backbone's rows to
the predictions every analysis notebook reads; a slice folder keeps them apart. It holds the
dialogues, questions and ``source.json`` of the chosen patients only, so ``runner.run``,
``runner.estimate`` and the constructions treat it as any profile (its own predictions,
response cache and construction cache).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence

import pandas as pd

from clinlib.core.config import artifact_path, build_dir, resolve_profile
from clinlib.core.io import write_parquet
from clinlib.data.build import SOURCE_FILE, load
from clinlib.eval.harness.store import RunnerError

# The slice a local model answers in the notebooks (04 beside the readers, 06 as the T3
# probe's prep model, 11 as the matched prep model): one patient's questions of these tasks.
LOCAL_SLICE_TASKS = ("T1", "T3", "T9")


def smallest_patients(
    profile: str | None, tasks: Sequence[str], n: int = 2, positive: str | None = None
) -> list[int]:
    """The ``n`` patients with the shortest dialogues among those asked a single-patient
    question of ``tasks`` (ties by subject id): the cheapest slice covering those tasks.

    ``positive="T3"`` keeps only patients asked a T3 question whose gold is ``yes`` (an
    injected positive, paper §5.5), so a slice can probe recall.
    """
    qs = load("questions", profile)
    single = qs[qs["subject_ids"].map(len).eq(1)]
    asked = {int(ids[0]) for ids in single.loc[single["task"].isin(list(tasks)), "subject_ids"]}
    if positive is not None:
        pos = single[(single["task"] == positive) & (single["gold"] == "yes")]
        asked &= {int(ids[0]) for ids in pos["subject_ids"]}
    turns = load("dialogues", profile).groupby("subject_id").size()
    ranked = sorted((int(n_turns), int(sid)) for sid, n_turns in turns.items() if sid in asked)
    return [sid for _, sid in ranked[:n]]


def slice_profile(
    profile: str | None,
    name: str,
    subjects: Iterable[int],
    tasks: Sequence[str] | None = None,
) -> str:
    """Write ``data/build/<name>/`` with the given patients' dialogues, single-patient
    questions (of ``tasks``, if given) and source.

    Args:
        profile: the source profile (built through the questions stage).
        name: the slice's profile name (must differ from ``profile``).
        subjects: the patients to keep.
        tasks: keep only these tasks' questions (None = all).

    Returns:
        ``name``, to pass as the profile of ``runner.run``. Re-writing the same slice keeps
        the folder's predictions and caches (its questions and dialogues are unchanged).
    """
    src = resolve_profile(profile)
    if resolve_profile(name) == src:
        raise RunnerError(f"a slice needs its own name, not the source profile's ({src!r})")
    keep = {int(s) for s in subjects}
    if not keep:
        raise RunnerError("a slice needs at least one patient")
    dialogues = load("dialogues", src)
    dialogues = dialogues[dialogues["subject_id"].isin(keep)].reset_index(drop=True)
    missing = sorted(keep - set(dialogues["subject_id"].astype(int)))
    if missing:
        raise RunnerError(f"profile {src!r} has no dialogue for patient(s) {missing}")
    qs = load("questions", src)
    mask = qs["subject_ids"].map(lambda ids: len(ids) == 1 and int(ids[0]) in keep)
    if tasks is not None:
        mask &= qs["task"].isin(list(tasks))
    build_dir(name).mkdir(parents=True, exist_ok=True)
    _write_if_changed(dialogues, artifact_path("dialogues.parquet", name))
    _write_if_changed(qs[mask].reset_index(drop=True), artifact_path("questions.parquet", name))
    shutil.copyfile(artifact_path(SOURCE_FILE, src), artifact_path(SOURCE_FILE, name))
    return name


def local_slice(profile: str | None) -> str:
    """``<profile>-local``: the patient with the shortest dialogue asked an injected T3
    positive, with that patient's :data:`LOCAL_SLICE_TASKS` questions — small enough for a
    135M model on two cores, and one slice (one response and construction cache) for every
    notebook that uses the local model."""
    src = resolve_profile(profile)
    chosen = smallest_patients(src, LOCAL_SLICE_TASKS, n=1, positive="T3")
    if not chosen:
        raise RunnerError(f"profile {src!r} has no patient asked an injected T3 positive")
    return slice_profile(src, f"{src}-local", chosen, LOCAL_SLICE_TASKS)


def _write_if_changed(df: pd.DataFrame, path) -> None:
    # An unchanged file keeps its bytes, so the slice's predictions basis stays the same and
    # a re-run resumes instead of starting over.
    if path.exists() and pd.read_parquet(path).equals(df):
        return
    write_parquet(df, path)
