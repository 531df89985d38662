"""The ``evidence`` stage: evidence recall and loss labels computed once per build (the
compression-loss reading of §5; App. C.2's hit@k generalised to every representation).

Notebooks 05 (representations) and 13 (failure explorer) and the failure-explorer app all read
the recall of the same contexts; building every context of every question once more per reader
cost minutes on the paper profile. This stage measures it once, after ``evaluate-offline``,
and writes two artifacts under the stage-manifest contract (:mod:`clinlib.core.guards`):

* ``evidence_recall.parquet`` — :func:`clinlib.analysis.evidence.evidence_recall` rows
  (:data:`~clinlib.analysis.evidence.RECALL_COLUMNS`) of the evaluated strategies under ``post``
  and ``pre`` and of core-memory under ``post`` (notebook 05's extra representation);
* ``loss_labels.parquet`` — where each offline prediction's answer was lost
  (:func:`clinlib.analysis.evidence.lost_in`), one row per prediction key;
* ``loss_split.parquet`` — :func:`clinlib.analysis.evidence.loss_split` of those predictions
  (its bootstrap intervals were most of notebook 13's slowest cell).

Readers call :func:`load_recall`, :func:`stage_losses` and :func:`stage_split`; a build made
before this stage existed gets one line naming the command to run.
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis.evidence import (
    ORACLE,
    RECALL_COLUMNS,
    evidence_recall,
    label_losses,
    loss_split,
)
from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import StageError, check_artifact, stage_run
from clinlib.data.build import load
from clinlib.eval.harness.store import load_predictions
from clinlib.strategies import EVALUATION_STRATEGIES

EVIDENCE_STAGE = "evidence"
RECALL_ARTIFACT, LABELS_ARTIFACT, SPLIT_ARTIFACT = "evidence_recall", "loss_labels", "loss_split"
OUTPUTS: tuple[str, ...] = (RECALL_ARTIFACT, LABELS_ARTIFACT, SPLIT_ARTIFACT)
SPLIT_CELL: tuple[str, ...] = ("strategy", "backbone", "setting")
# (strategies, settings) measured: the harness's evaluated cells, and core-memory beside them
# (built by `strategies` under post only).
RECALL_SETS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (tuple(EVALUATION_STRATEGIES), ("post", "pre")),
    (("core-memory",), ("post",)),
)
LABEL_KEY: tuple[str, ...] = ("qid", "strategy", "backbone", "prep_model", "setting")
LABEL_COLUMNS: tuple[str, ...] = (*LABEL_KEY, "lost_in", "recall", "all_present")


def build_evidence(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Measure and write the stage's two artifacts (module docstring).

    Raises:
        StageError: no context could be measured (0 recall rows), or no prediction to label.
    """
    name = resolve_profile(profile)
    with stage_run(EVIDENCE_STAGE, name, remove_on_failure=OUTPUTS) as staging:
        questions = load("questions", name)
        frames = [evidence_recall(questions, list(s), name, st) for s, st in RECALL_SETS]
        recall = pd.concat([f for f in frames if not f.empty], ignore_index=True)
        if recall.empty or not recall["measurable"].any():
            raise StageError(
                f"evidence_recall: 0 measurable contexts for {len(questions)} questions"
            )
        preds = load_predictions(name)
        if preds.empty:
            raise StageError(
                f"loss_labels: no predictions to label; run `clintrace evaluate-offline "
                f"--profile {name}` first"
            )
        labelled, _ = label_losses(preds, questions, name, known=recall)
        labels = labelled.reindex(columns=list(LABEL_COLUMNS))
        split = loss_split(labelled, recall, questions)
        recall.to_parquet(staging.path(f"{RECALL_ARTIFACT}.parquet"), index=False)
        labels.to_parquet(staging.path(f"{LABELS_ARTIFACT}.parquet"), index=False)
        split.to_parquet(staging.path(f"{SPLIT_ARTIFACT}.parquet"), index=False)
    return {RECALL_ARTIFACT: recall, LABELS_ARTIFACT: labels, SPLIT_ARTIFACT: split}


def _read(artifact: str, profile: str) -> pd.DataFrame:
    path = artifact_path(f"{artifact}.parquet", profile)
    if not path.exists():
        raise StageError(
            f"{path.name} does not exist (a build made before the evidence stage); "
            f"run `clintrace evidence --profile {profile}`"
        )
    check_artifact(artifact, profile)
    return pd.read_parquet(path)


def load_recall(profile: str | None = None, strategies=None, settings=None) -> pd.DataFrame:
    """The stage's per-question evidence recall, optionally of some strategies / settings.

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    recall = _read(RECALL_ARTIFACT, resolve_profile(profile))
    if strategies is not None:
        recall = recall[recall["strategy"].isin(list(strategies))]
    if settings is not None:
        recall = recall[recall["setting"].isin(list(settings))]
    return recall.reset_index(drop=True).reindex(columns=list(RECALL_COLUMNS))


def stage_losses(
    preds: pd.DataFrame, questions: pd.DataFrame, profile: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`clinlib.analysis.evidence.label_losses` from the stage's recall: the predictions
    with ``lost_in``, and the recall used. Only strategies the stage did not measure (a
    notebook's ablation variant) have their contexts built here, on their own questions.

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    name = resolve_profile(profile)
    return label_losses(preds, questions, name, known=load_recall(name))


def stage_split(
    preds: pd.DataFrame,
    per_question: pd.DataFrame,
    questions: pd.DataFrame,
    profile: str | None = None,
) -> pd.DataFrame:
    """:func:`clinlib.analysis.evidence.loss_split` of ``preds`` (labelled or not), its cells
    (strategy x backbone x setting) the stage measured read from ``loss_split.parquet`` and
    only the others (a notebook's ablation variant) computed here, with the same oracle rows.
    A cell depends only on its own rows and the oracle's, and each cell's bootstrap has its own
    fixed seed, so the table equals ``loss_split(preds, per_question, questions)``.

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    stored = _read(SPLIT_ARTIFACT, resolve_profile(profile))
    cells = preds[list(SPLIT_CELL)].drop_duplicates()
    have = cells.merge(stored[list(SPLIT_CELL)].drop_duplicates(), how="inner")
    keep = stored.merge(have, on=list(SPLIT_CELL), how="inner")
    known = set(map(tuple, have.to_numpy().tolist()))
    cell_of = list(zip(*(preds[c] for c in SPLIT_CELL), strict=True))
    missing = preds[[c not in known for c in cell_of]]
    if missing.empty:
        out = keep
    else:
        oracle = preds[preds["strategy"] == ORACLE]
        extra = loss_split(pd.concat([missing, oracle]), per_question, questions)
        extra = extra.merge(
            missing[list(SPLIT_CELL)].drop_duplicates(), on=list(SPLIT_CELL), how="inner"
        )
        out = pd.concat([keep, extra], ignore_index=True)
    by = [*SPLIT_CELL, "task"]
    return out.sort_values(by, kind="stable").reset_index(drop=True).reindex(columns=stored.columns)
