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
  (its bootstrap intervals were most of notebook 13's slowest cell);
* ``build_costs.parquet`` — :func:`clinlib.analysis.appendix.cost.build_cost_table` of the
  paper's eight and core-memory (App. D's construction cost, read by notebooks 05 and 16:
  reading it from the construction cache loads every patient's artifact, seconds per
  strategy on the paper profile);
* ``prep_tokens.parquet`` — :func:`clinlib.analysis.appendix.cost.prep_token_rows` of the
  paper's eight at the paper's prep model's tokenizer (notebook 16's estimated prep bill).

Readers call :func:`load_recall`, :func:`stage_losses`, :func:`stage_split` and
:func:`stage_build_costs` and :func:`stage_prep_estimate`; a build made before this stage existed (or before one of its
artifacts did) gets one line naming the command to run.
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis.appendix.cost import build_cost_table, estimated_prep_cost, prep_token_rows
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
from clinlib.llm.backbones import get_backbone
from clinlib.strategies import EVALUATION_STRATEGIES, PAPER_STRATEGIES
from clinlib.strategies.prep import PAPER_PREP_BACKBONE
from clinlib.strategies.registry import get_strategy

EVIDENCE_STAGE = "evidence"
RECALL_ARTIFACT, LABELS_ARTIFACT, SPLIT_ARTIFACT = "evidence_recall", "loss_labels", "loss_split"
COST_ARTIFACT, PREP_ARTIFACT = "build_costs", "prep_tokens"
OUTPUTS: tuple[str, ...] = (
    RECALL_ARTIFACT,
    LABELS_ARTIFACT,
    SPLIT_ARTIFACT,
    COST_ARTIFACT,
    PREP_ARTIFACT,
)
# the strategies whose construction cost is read (rule-based prep, post): notebook 16's eight,
# and core-memory beside them in notebook 05
COST_STRATEGIES: tuple[str, ...] = (*PAPER_STRATEGIES, "core-memory")
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
    """Measure and write the stage's artifacts (module docstring).

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
        costs = build_cost_table(name, list(COST_STRATEGIES))
        prep = prep_token_rows(name, PAPER_STRATEGIES, get_backbone(PAPER_PREP_BACKBONE).model)
        recall.to_parquet(staging.path(f"{RECALL_ARTIFACT}.parquet"), index=False)
        labels.to_parquet(staging.path(f"{LABELS_ARTIFACT}.parquet"), index=False)
        split.to_parquet(staging.path(f"{SPLIT_ARTIFACT}.parquet"), index=False)
        costs.to_parquet(staging.path(f"{COST_ARTIFACT}.parquet"), index=False)
        prep.to_parquet(staging.path(f"{PREP_ARTIFACT}.parquet"), index=False)
    return {
        RECALL_ARTIFACT: recall,
        LABELS_ARTIFACT: labels,
        SPLIT_ARTIFACT: split,
        COST_ARTIFACT: costs,
    }


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


def stage_build_costs(strategies, profile: str | None = None) -> pd.DataFrame:
    """:func:`clinlib.analysis.appendix.cost.build_cost_table` of ``strategies`` (rule-based
    prep, ``post``): the stage's rows of the strategies it read, in the order asked; only a
    strategy it did not read is read from the construction cache here. Equal to
    ``build_cost_table(profile, strategies)`` (the recorded seconds and usage are the
    cache's, read once).

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    name = resolve_profile(profile)
    stored = _read(COST_ARTIFACT, name)
    have = set(stored["strategy"])
    frames = [
        stored[stored["strategy"] == s] if s in have else build_cost_table(name, [s])
        for s in strategies
    ]
    return pd.concat(frames, ignore_index=True)


def stage_prep_estimate(strategies, profile: str | None = None) -> pd.DataFrame:
    """:func:`clinlib.analysis.appendix.cost.paper_prep_estimate` of ``strategies``, its token
    counts read from the stage's ``prep_tokens`` for the strategies it counted (only another
    prep-built strategy is counted here). Equal to ``paper_prep_estimate(profile, strategies)``.

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    name = resolve_profile(profile)
    backbone = get_backbone(PAPER_PREP_BACKBONE)
    stored = _read(PREP_ARTIFACT, name)
    have = set(stored["strategy"])
    prepared = [s for s in strategies if get_strategy(s, name).uses_prep]
    if not prepared:  # the same refusal as counting them
        return estimated_prep_cost(prep_token_rows(name, strategies, backbone.model), backbone)
    frames = [
        stored[stored["strategy"] == s] if s in have else prep_token_rows(name, [s], backbone.model)
        for s in prepared
    ]
    return estimated_prep_cost(pd.concat(frames, ignore_index=True), backbone)
