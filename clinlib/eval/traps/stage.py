"""The trap-answers stage: every trap question asked through the harness and its free-text
answers judged, once per build, cached with a manifest (MedMemoryBench §5 "Query Design",
§5 "Evaluation Protocol"; MedMemoryBench Appendix D.1 answer and judge prompts).

``clintrace trap-answers`` (and ``clintrace pipeline`` after the questions) runs
:func:`build_trap_answers`: the ``reference`` offline reader (a deterministic policy, not a
language model) answers the six query types under :data:`TRAP_STRATEGIES` at ``post`` and
``mixed`` and under :data:`STREAM_STRATEGIES` at ``stream(delta=5)`` (kept at the checkpoint
where each trap matters, :func:`clinlib.eval.traps.questions.at_matters`); the predictions go
to the profile's store like every task's (resumable), and the lexical judge (a token-F1
policy, not an LLM) judges every stored free-text answer. It writes

* ``trap_answers.parquet``: :data:`clinlib.eval.traps.questions.RUN_COLUMNS` plus the cost
  columns, one row per (question, strategy, setting[, checkpoint]);
* ``trap_judged.parquet``: the judge's verdicts (:data:`JUDGED_COLUMNS`) on the free-text rows;
* ``trap_core_retention.parquet``: core memory's pinned block with the tags stripped
  (:func:`clinlib.eval.traps.core_check.core_retention`, one row per injected constraint).

Notebook 18 loads all three (:func:`load_trap_answers`) instead of asking and judging in a cell; on
a build made before this stage existed it says in one line which command to run
(:data:`RUN_HINT`).
"""

from __future__ import annotations

import pandas as pd

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import StageError, check_artifact, stage_run
from clinlib.data.build import load
from clinlib.eval.judge.run import judge_traps
from clinlib.eval.judge.scoring import LEXICAL_JUDGE
from clinlib.eval.traps.ask import answered_traps, harness_traps, trap_predictions
from clinlib.eval.traps.core_check import core_retention
from clinlib.eval.traps.questions import at_matters
from clinlib.tasks.traps.facts import trap_dialogue

TRAP_ANSWERS_STAGE = "trap-answers"
TRAP_ANSWER_OUTPUTS = ("trap_answers", "trap_judged", "trap_core_retention")
TRAP_ANSWER_KEYS = ("answers", "judged", "core")  # load_trap_answers' keys, in that order
TRAP_READER = "reference"
TRAP_STRATEGIES: tuple[str, ...] = (
    "no-context-blind",
    "last-visit-only",
    "full-context",
    "dense-retrieval",
    "structured-timeline",
    "llm-summary",
    "core-memory",
    "oracle",
)
TRAP_SETTINGS: tuple[str, ...] = ("post", "mixed")
STREAM_STRATEGIES: tuple[str, ...] = ("full-context", "last-visit-only")
STREAM_SETTING = "stream(delta=5)"
JUDGED_COLUMNS = [
    "qid",
    "task",
    "strategy",
    "backbone",
    "setting",
    "judge_backbone",
    "verdict",
    "verdict_lenient",
    "parse_failed",
    "error",
]
RUN_HINT = "run `clintrace trap-answers --profile {profile}` first"


class MissingTrapAnswers(StageError):
    """The build has no trap-answers artifacts; shown as its one line in a notebook."""

    def _render_traceback_(self) -> list[str]:  # IPython: the message, not a traceback
        return [str(self)]


def ask_and_judge(profile: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(answers, verdicts) of the stage (module docstring), nothing written but the store.

    Raises:
        StageError: no answer, or a stored free-text answer left unjudged.
    """
    harness_traps(profile, TRAP_STRATEGIES, [TRAP_READER], TRAP_SETTINGS)
    harness_traps(profile, STREAM_STRATEGIES, [TRAP_READER], [STREAM_SETTING])
    preds = trap_predictions(profile)  # the store read once, for the tables and the judge
    run = answered_traps(profile, TRAP_STRATEGIES, [TRAP_READER], TRAP_SETTINGS, preds=preds)
    stream = at_matters(
        answered_traps(profile, STREAM_STRATEGIES, [TRAP_READER], [STREAM_SETTING], preds=preds)
    )
    answers = pd.concat([run, stream], ignore_index=True)
    if answers.empty:
        raise StageError("trap_answers: 0 answers (is trap_questions.parquet empty?)")
    unanswered = int(((answers["answer_format"] != "L") & answers["correct"].isna()).sum())
    if unanswered:
        raise StageError(f"trap_answers: {unanswered} S/O answer(s) missing from the store")
    n_free = int((run["answer_format"] == "L").sum())
    if not n_free:
        return answers, pd.DataFrame(columns=JUDGED_COLUMNS)
    judged = judge_traps(
        profile,
        LEXICAL_JUDGE,
        stored=preds,
        strategies=list(TRAP_STRATEGIES),
        backbones=[TRAP_READER],
        settings=list(TRAP_SETTINGS),
    )
    if len(judged) < n_free:
        raise StageError(f"trap_judged: {len(judged)} verdicts for {n_free} free-text answers")
    return answers, judged[JUDGED_COLUMNS].astype({"error": "string"})


def build_trap_answers(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Run the stage and write its three artifacts (module docstring):
    ``{"answers", "judged", "core"}``."""
    name = resolve_profile(profile)
    with stage_run(TRAP_ANSWERS_STAGE, name, remove_on_failure=TRAP_ANSWER_OUTPUTS) as staging:
        answers, judged = ask_and_judge(name)
        facts = load("trap_facts", name)
        core = core_retention(trap_dialogue(load("dialogues", name), facts), facts)
        out = dict(zip(TRAP_ANSWER_KEYS, (answers, judged, core), strict=True))
        for key, artifact in zip(TRAP_ANSWER_KEYS, TRAP_ANSWER_OUTPUTS, strict=True):
            out[key].to_parquet(staging.path(f"{artifact}.parquet"), index=False)
    return out


def trap_answers_current(profile: str | None = None) -> bool:
    """Whether the stage's artifacts exist and are current (their inputs unchanged since)."""
    name = resolve_profile(profile)
    if not all(artifact_path(f"{a}.parquet", name).exists() for a in TRAP_ANSWER_OUTPUTS):
        return False
    try:
        for a in TRAP_ANSWER_OUTPUTS:
            check_artifact(a, name)
    except StageError:
        return False
    return True


def require_trap_answers(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """:func:`load_trap_answers`, or :class:`MissingTrapAnswers` naming the command to run."""
    name = resolve_profile(profile)
    out = load_trap_answers(name)
    if out is None:
        raise MissingTrapAnswers(
            "this build lacks the trap-answers stage's artifacts (made before the stage, or "
            "before it measured core memory): " + RUN_HINT.format(profile=name)
        )
    return out


def load_trap_answers(profile: str | None = None) -> dict[str, pd.DataFrame] | None:
    """The stage's artifacts ``{"answers", "judged", "core"}``, None when the build has none (made
    before the stage existed, or the stage never ran): the caller says :data:`RUN_HINT`."""
    name = resolve_profile(profile)
    if not all(artifact_path(f"{a}.parquet", name).exists() for a in TRAP_ANSWER_OUTPUTS):
        return None
    out = {k: load(a, name) for k, a in zip(TRAP_ANSWER_KEYS, TRAP_ANSWER_OUTPUTS, strict=True)}
    out["answers"] = out["answers"].astype({"correct": "boolean", "trap_in_context": "boolean"})
    return out
