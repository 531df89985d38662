"""A profile's predictions judged and audited (``clintrace judge``).

:func:`judge_profile` selects predictions of a profile (strategies, answering backbones,
settings, tasks, at most ``limit`` per task), judges them with one judge backbone
(:func:`clinlib.eval.judge.scoring.judge_predictions`) and writes the verdicts to
``data/build/<profile>/judge/<judge>.parquet`` atomically (``criteria`` as JSON text).

:func:`judge_traps` does the same for the stored free-text trap answers (IG, MCD: ``correct``
NA in the store), merging its verdicts into the same file (a row of the same key replaced).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from clinlib.core.config import build_dir
from clinlib.core.io import write_parquet
from clinlib.eval.harness.store import load_predictions
from clinlib.eval.judge.scoring import KEY_COLUMNS, LEXICAL_JUDGE, JudgeError, judge_predictions
from clinlib.eval.synthesis.calls import Calls
from clinlib.tasks.extended import load_questions
from clinlib.tasks.traps.answers import JUDGED_TRAP_TASKS

JUDGE_DIR = "judge"


def judged_path(profile: str, judge_backbone: str) -> Path:
    """``data/build/<profile>/judge/<judge_backbone>.parquet``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in judge_backbone)
    return build_dir(profile) / JUDGE_DIR / f"{safe}.parquet"


def select_predictions(
    predictions: pd.DataFrame,
    *,
    strategies: Sequence[str] | None = None,
    backbones: Sequence[str] | None = None,
    settings: Sequence[str] = ("post",),
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """The rows to judge (``limit``: the first that many per task, by qid).

    Raises:
        JudgeError: nothing is selected (naming the filter values).
    """
    keep = predictions["setting"].isin(list(settings))
    for col, values in (("strategy", strategies), ("backbone", backbones), ("task", tasks)):
        if values:
            keep &= predictions[col].isin(list(values))
    out = predictions[keep].sort_values(["task", "qid", "strategy", "backbone", "setting"])
    if limit is not None:
        out = out[out.groupby("task").cumcount() < int(limit)]
    if out.empty:
        raise JudgeError(
            f"no predictions to judge for strategies={list(strategies or [])} "
            f"backbones={list(backbones or [])} settings={list(settings)} "
            f"tasks={list(tasks or [])}: run the evaluation first"
        )
    return out.reset_index(drop=True)


def judge_profile(
    profile: str,
    judge_backbone: str,
    *,
    calls: Calls | None = None,
    **selection,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, Path]:
    """Judge a profile's predictions and write the verdicts.

    Args:
        profile: build profile.
        judge_backbone: the judge (any registered backbone; ``lexical-judge`` offline).
        calls: a configured :class:`~clinlib.eval.synthesis.calls.Calls` (budget, mode).
        **selection: :func:`select_predictions` filters.

    Returns:
        (judged rows, the predictions judged, their questions, the parquet written).
    """
    preds = select_predictions(load_predictions(profile), **selection)
    questions = load_questions(profile, sorted(set(preds["task"])))
    judged = judge_predictions(
        questions, preds, judge_backbone, profile=profile, calls=calls or Calls(profile)
    )
    # merged, not overwritten: verdicts judge_traps stored (IG / MCD) must survive a re-judge
    return judged, preds, questions, store_verdicts(profile, judge_backbone, judged)


def store_verdicts(profile: str, judge_backbone: str, judged: pd.DataFrame) -> Path:
    """Merge ``judged`` into :func:`judged_path` (rows of the same key replaced), atomically."""
    path = judged_path(profile, judge_backbone)
    new = judged.assign(criteria=judged["criteria"].map(json.dumps))
    if path.exists():
        old = pd.read_parquet(path)
        keys = [c for c in (*KEY_COLUMNS, "prep_model") if c in old.columns and c in new.columns]
        ids = set(new[keys].astype(str).itertuples(index=False, name=None))
        stale = old[keys].astype(str).apply(tuple, axis=1).isin(ids)
        new = pd.concat([old[~stale], new], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_parquet(new, path)


def judge_traps(
    profile: str,
    judge_backbone: str = LEXICAL_JUDGE,
    *,
    calls: Calls | None = None,
    stored: pd.DataFrame | None = None,
    **selection,
) -> pd.DataFrame:
    """Judge the stored free-text trap answers (IG, MCD; MedMemoryBench §5 "Query Design": L types judged by an
    LLM, MCD correct only if its three criteria hold) and merge the verdicts into
    ``judge/<judge>.parquet``.

    Args:
        profile: build profile.
        judge_backbone: any registered backbone; ``lexical-judge`` (offline, token-F1 >= 0.5:
            a weak lexical proxy on free text, not an LLM judge) by default.
        calls: a configured :class:`~clinlib.eval.synthesis.calls.Calls` (budget, mode).
        stored: the store's rows (every setting, extended tasks included) when the caller
            has read them already; read here otherwise.
        **selection: :func:`select_predictions` filters (strategies, backbones, settings,
            limit); ``tasks`` is IG and MCD.

    Returns:
        :data:`clinlib.eval.judge.scoring.JUDGE_COLUMNS` rows (+ prep_model), one per stored answer.

    Raises:
        JudgeError: no stored IG / MCD answer matches the selection.
    """
    selection["tasks"] = [
        t for t in selection.get("tasks") or JUDGED_TRAP_TASKS if t in JUDGED_TRAP_TASKS
    ]
    if stored is None:
        stored = load_predictions(profile, extended=True, all_settings=True)
    preds = select_predictions(stored[stored["error"].isna()], **selection)
    questions = load_questions(profile, list(JUDGED_TRAP_TASKS))
    judged = judge_predictions(
        questions, preds, judge_backbone, profile=profile, calls=calls or Calls(profile)
    )
    store_verdicts(profile, judge_backbone, judged)
    return judged
