"""Trap questions answered by any backbone through the kit's harness
(MedMemoryBench Appendix D.1 answer prompts, §5 "Query Design").

The six query types are harness tasks (:mod:`clinlib.tasks.traps.answers`): ``clintrace run
--tasks EEM,TLA,SUA,MQ,IG,MCD`` (or :func:`clinlib.eval.harness.runner.run` with ``tasks=``) builds contexts over
the trap dialogue under any setting (post, stream, mixed), asks each backbone with the seed's
MedMemoryBench Appendix D.1 prompt (:func:`clinlib.eval.harness.prompts.build_messages`), scores and APPENDS the
predictions to the profile's store, resumable and cached like every other task. The offline
``reference`` reader answers them by :mod:`clinlib.eval.readers.trap` (a deterministic policy,
not a language model).

:func:`ask_traps` is a thin wrapper for notebooks: one harness run, then
:func:`stored_traps`, the stored predictions joined with trap retention (a property of the
context, :func:`clinlib.eval.traps.questions.answer_contexts`, measured on the same contexts). IG and
MCD rows (free text) are asked and stored with ``correct`` NA: no deterministic scorer decides
them; :func:`clinlib.eval.judge.run.judge_traps` judges them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.data.build import load
from clinlib.eval.harness import runner
from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.harness.records import run_records
from clinlib.eval.traps.questions import RUN_COLUMNS, answer_contexts, trap_contexts
from clinlib.tasks.traps.answers import HARNESS_TRAP_TASKS, is_trap_task
from clinlib.tasks.traps.facts import trap_dialogue

COST_COLUMNS = ["error", "input_tokens", "output_tokens", "cost_usd"]
_JOIN = ["qid", "strategy", "prep_model", "setting"]


def trap_messages(question: dict, context: str) -> list[dict[str, str]]:
    """The messages the harness sends for a trap question (MedMemoryBench's Appendix D.1 prompt)."""
    return build_messages(question, context)


def trap_predictions(profile: str | None) -> pd.DataFrame:
    """The store's trap rows (every setting), read once for :func:`stored_traps` callers."""
    preds = runner.load_predictions(resolve_profile(profile), extended=True, all_settings=True)
    return preds[preds["task"].map(is_trap_task).astype(bool)].reset_index(drop=True)


def stored_traps(
    profile: str | None,
    contexts: pd.DataFrame,
    backbones: Sequence[str],
    *,
    questions: pd.DataFrame | None = None,
    preds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The stored trap predictions of ``backbones`` for the (question, strategy, setting) rows
    of ``contexts`` (:func:`clinlib.eval.traps.questions.trap_contexts`), with retention:
    :data:`RUN_COLUMNS` plus :data:`COST_COLUMNS`. A S/O row without a stored prediction keeps
    ``response`` NA and ``correct`` NA (nothing was answered). ``questions`` (the trap set)
    and ``preds`` (:func:`trap_predictions`) are read from the build unless given."""
    name = resolve_profile(profile)
    if questions is None:
        questions = load("trap_questions", name)
    # retention only: the answers come from the store, so the contexts are not read again
    measured = answer_contexts(questions, contexts, read=False)
    measured["prep_model"] = contexts["prep_model"].to_numpy()
    if preds is None:
        preds = trap_predictions(name)
    base = measured.drop(columns=["response", "correct", "backbone"])
    parts = []
    for bb in backbones:
        mine = preds.loc[preds["backbone"] == bb, [*_JOIN, "response", "correct", *COST_COLUMNS]]
        got = base.merge(mine, on=_JOIN, how="left", validate="one_to_one")
        got["backbone"] = bb
        parts.append(got)
    out = pd.concat(parts, ignore_index=True)
    return out[[*RUN_COLUMNS, *COST_COLUMNS]].astype({"correct": "boolean"})


def asked_tasks(profile: str | None) -> tuple[list[str], list[str]]:
    """(the query types that have questions in the profile's trap set, those that have none).
    A type with no question (MCD where no derived rule fires, as on a small real-data cohort)
    is skipped by :func:`ask_traps` and said in one sentence, never a crash."""
    have = set(load("trap_questions", resolve_profile(profile))["task"].astype(str))
    return (
        [t for t in HARNESS_TRAP_TASKS if t in have],
        [t for t in HARNESS_TRAP_TASKS if t not in have],
    )


def harness_traps(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
    **run_options: Any,
) -> None:
    """The harness run of :func:`ask_traps` (stored, resumable), nothing read back."""
    name = resolve_profile(profile)
    run_options.setdefault("progress", False)
    tasks, empty = asked_tasks(name)
    if empty:
        print(f"trap query type(s) {', '.join(empty)}: no question in this set, not asked")
    spec, options = run_records(
        profile=name,
        strategies=strategies,
        backbones=backbones,
        settings=settings,
        prep=prep,
        tasks=tasks,
        **run_options,
    )
    runner.run(spec, options)


def answered_traps(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
    preds: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """:func:`stored_traps` for every setting, the trap set, its dialogue and the store's
    trap rows read once (``preds``: :func:`trap_predictions`, read here unless given)."""
    name = resolve_profile(profile)
    questions = load("trap_questions", name)
    turns = trap_dialogue(load("dialogues", name), load("trap_facts", name))
    preds = trap_predictions(name) if preds is None else preds
    parts = [
        stored_traps(
            name,
            trap_contexts(name, strategies, s, prep, questions=questions, turns=turns),
            backbones,
            questions=questions,
            preds=preds,
        )
        for s in settings
    ]
    return pd.concat(parts, ignore_index=True)


def ask_traps(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
    **run_options: Any,
) -> pd.DataFrame:
    """Ask the six trap query types through the harness (stored, resumable; ``run_options`` go
    to :func:`clinlib.eval.harness.runner.run`) and return :func:`stored_traps` for every setting."""
    harness_traps(profile, strategies, backbones, settings, prep, **run_options)
    return answered_traps(profile, strategies, backbones, settings, prep)
