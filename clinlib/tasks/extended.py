"""The extended question set: tasks beyond the paper's nine, kept apart from them
(docs/design.md "Extended question set"; LongMedBench "Temporal reasoning" for T10).

The paper's 6,271 questions (questions.parquet, :mod:`clinlib.tasks.build`) are untouched.
Extended tasks (:data:`clinlib.tasks.answers.EXTENDED_TASK_NAMES`) are generated, selected
(the same stratified selection, :func:`clinlib.tasks.build.select_task`) and gated (L0–L4 on
their own rows) into ``temporal_questions.parquet`` (same QUESTION_COLUMNS),
``temporal_gates.parquet`` and ``temporal_availability.parquet`` by their own stage
(``temporal_questions``, run by ``clintrace questions`` after the paper set). The harness asks
them only when named (``run(..., tasks=["T10"])``): :func:`load_questions` is the one loader
the eval layer uses, and it returns the paper set alone unless an extended task is named.

Adding an extended task: a module with its ``SPEC`` (``family="extended"``, counts per
profile) and one line in :mod:`clinlib.tasks.registry` (docs/extending.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

import pandas as pd

from clinlib.core.config import PROFILES, base_profile, question_counts, resolve_profile
from clinlib.core.guards import StageError, stage_run
from clinlib.data.build import load
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.build import GATE_COLUMNS, select_task, shortfall_gate_rows, write_gated
from clinlib.tasks.gates import run_gates
from clinlib.tasks.generate import generate_candidates, load_inputs
from clinlib.tasks.generators.common import INTERNAL_COLUMNS
from clinlib.tasks.registry import get_spec, specs, task_names
from clinlib.tasks.source_text import source_text_gate_rows
from clinlib.tasks.spec import resolve
from clinlib.tasks.traps.answers import HARNESS_TRAP_TASKS, TRAP_ARTIFACT

EXTENDED_STAGE = "temporal_questions"
EXTENDED_ARTIFACT = "temporal_questions"


def __getattr__(name: str):
    # QUICK_EXTENDED_COUNTS: a few per subtype on the quick profile, so unit tests stay fast
    # (declared in each spec's counts["quick"]; the paper profile: rules.EXTENDED_COUNTS).
    if name == "QUICK_EXTENDED_COUNTS":
        return {s.name: s.counts["quick"] for s in specs("extended")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _selector(task: str):
    """The task's own selection rule (its spec's ``select``; T1R picks events asked both ways,
    T11 balances its discharge answers), else :func:`select_task`."""
    return resolve(get_spec(task).select) or select_task


def extended_counts(profile: str | None = None) -> dict[str, int]:
    """Per-task counts of the extended set: QUICK_EXTENDED_COUNTS on ``quick``, else
    rules.EXTENDED_COUNTS (300 per T10 subtype)."""
    name = resolve_profile(profile)
    profile = "quick" if question_counts(name) == "quick" else "paper"
    return {s.name: s.counts[profile] for s in specs("extended")}


def build_extended_set(inp, counts: Mapping[str, int], seed: int = 0):
    """Generate and select the extended set (no gates, nothing written).

    Returns:
        (questions with QUESTION_COLUMNS sorted by task then qid, availability, shortfalls).
    """
    tasks = [t for t in task_names("extended") if t in counts]
    cands = generate_candidates(inp, tasks)
    parts, avails, shortfalls = [], [], []
    for t in tasks:
        sel, avail, short = _selector(t)(cands[t], t, int(counts[t]), seed)
        parts.append(sel)
        avails.append(avail)
        if short:
            shortfalls.append(short)
    questions = pd.concat(parts, ignore_index=True).drop(columns=list(INTERNAL_COLUMNS))
    return questions[list(QUESTION_COLUMNS)].reset_index(drop=True), pd.concat(avails), shortfalls


def build_temporal_questions(
    profile: str | None = None, seed: int | None = None, counts: Mapping[str, int] | None = None
) -> dict[str, pd.DataFrame]:
    """Build, gate and write a profile's extended set (module docstring).

    Args:
        profile: build profile (default $CLINTRACE_PROFILE, else quick).
        seed: selection seed (default: the profile's seed, else 0).
        counts: per-task targets (default :func:`extended_counts`).

    Returns:
        ``{"questions", "gates", "availability"}``.

    Raises:
        GateError (a ValueError): a hard gate failed; temporal_gates.parquet and
            temporal_questions_rejected.parquet are written, temporal_questions.parquet removed.
        StageError: no extended question at all.
    """
    name = resolve_profile(profile)
    counts = dict(counts) if counts is not None else extended_counts(name)
    unknown = sorted(set(counts) - set(task_names("extended")))
    if unknown:
        raise ValueError(
            f"counts: unknown extended task(s) {unknown}; known: {task_names('extended')}"
        )
    if seed is None:
        seed = PROFILES[base].seed if (base := base_profile(name)) in PROFILES else 0
    outputs = (EXTENDED_ARTIFACT, "temporal_gates", "temporal_availability")
    with stage_run(EXTENDED_STAGE, name, remove_on_failure=outputs) as staging:
        inp = load_inputs(name, seed=seed, with_raw=False)  # no extended task reads raw lab days
        questions, availability, shortfalls = build_extended_set(inp, counts, seed)
        if questions.empty:
            raise StageError(
                f"{EXTENDED_ARTIFACT}: 0 of {sum(counts.values())} questions generated"
            )
        gates = pd.concat(
            [
                run_gates(questions, name, tasks=list(counts)),
                shortfall_gate_rows(counts, shortfalls),
                source_text_gate_rows(questions, GATE_COLUMNS),
            ],
            ignore_index=True,
        )
        write_gated(
            staging, questions, gates, availability, (*outputs, "temporal_questions_rejected")
        )
    return {"questions": questions, "gates": gates, "availability": availability}


def load_questions(profile: str | None = None, tasks: Iterable[str] | None = None) -> pd.DataFrame:
    """The questions a run asks: the paper's set, plus the extended set when one of ``tasks``
    is an extended task, plus the trap questions (all six types, trap_questions.parquet) when one
    is a trap type (the harness's one loader; docs/design.md "Extended question set").

    Args:
        profile: build profile.
        tasks: task names (None: the paper's T1–T9 only).

    Returns:
        QUESTION_COLUMNS rows (paper rows first), not yet restricted to ``tasks``.

    Raises:
        ValueError: a task name that is neither a paper, an extended nor a trap task.
        FileNotFoundError: a needed artifact is missing (names the command to run).
    """
    wanted = None if tasks is None else [str(t) for t in tasks]
    known = (*task_names("paper", "extended"), *HARNESS_TRAP_TASKS)
    unknown = sorted(set(wanted or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {', '.join(known)}")
    frames = []
    if wanted is None or any(t in task_names("paper") for t in wanted):
        frames.append(load("questions", profile))
    if wanted is not None and any(t in task_names("extended") for t in wanted):
        frames.append(load(EXTENDED_ARTIFACT, profile))
    if wanted is not None and any(t in HARNESS_TRAP_TASKS for t in wanted):
        traps = load(TRAP_ARTIFACT, profile)  # L (IG, MCD) too: stored NA-correct, judged later
        frames.append(traps[traps["task"].isin(list(HARNESS_TRAP_TASKS))])
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True)


def question_digest(questions: pd.DataFrame) -> str:
    """sha256 of a deterministic projection of a question set: every QUESTION_COLUMNS value
    as JSON text (lists as lists of strings), rows in qid order. Equal digests = the same
    questions and golds, whatever the parquet encoding (the paper set's invariance check)."""
    cols = list(QUESTION_COLUMNS)
    rows = []
    for rec in questions.sort_values("qid", kind="stable")[cols].to_dict("records"):
        rows.append([_plain(rec[c], QUESTION_COLUMNS[c]) for c in cols])
    blob = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _plain(value, kind: str):
    if kind == "list":
        return [str(x) for x in (list(value) if value is not None else [])]
    if kind == "int64":
        return int(value)
    return None if value is None or value is pd.NA else str(value)
