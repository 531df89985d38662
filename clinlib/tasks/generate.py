"""Candidate generation for the evaluation set (paper §3 "Task suite" and "Evaluation set";
Fig. 2 stage 4 "Python-generated anchor+gold").

:func:`load_inputs` reads a profile's stage artifacts (cohort, events, dialogues,
event_coverage, dialogue_summary — plus the raw source's lab days, used by T9 to confirm a lab
was never measured), and :func:`generate_candidates` runs the per-task generators of
:mod:`clinlib.tasks.generators`. Selection and writing live in :mod:`clinlib.tasks.build`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import pandas as pd

from clinlib.core.progress import progress
from clinlib.data.build import load, open_source, source_spec
from clinlib.data.vocab import PANEL_ITEMIDS
from clinlib.tasks.generators.inputs import TaskInputError, TaskInputs, lab_key_of, make_inputs
from clinlib.tasks.registry import derived, get_spec, task_names

log = logging.getLogger(__name__)

# Read-only views of the task specs (clinlib.tasks.registry), taken once: SUBTYPES is what the
# selection plans from (clinlib.tasks.build.subtype_plan; a task registered later is looked
# up in the registry).
GENERATORS = derived("GENERATORS")
SUBTYPES = derived("SUBTYPES")
TITLES = derived("TITLES")

__all__ = [
    "GENERATORS",
    "SUBTYPES",
    "TITLES",
    "TaskInputError",
    "TaskInputs",
    "generate_candidates",
    "load_inputs",
    "make_inputs",
    "raw_lab_days",
]


def raw_lab_days(profile: str | None, subject_ids: Iterable[int]) -> set | None:
    """``(subject_id, lab_key, date)`` of every panel lab row in the profile's raw source (any
    unit, with or without hadm_id), or None when the raw source cannot be opened."""
    try:
        con = open_source(source_spec(profile))
    except (FileNotFoundError, KeyError, ValueError, OSError, ImportError) as exc:
        log.warning("raw source not available (%s); T9 'never measured' uses events only", exc)
        return None
    try:
        con.register("t9_subjects", pd.DataFrame({"subject_id": list(subject_ids)}))
        itemids = ",".join(str(i) for i in PANEL_ITEMIDS)
        df = con.execute(
            f"""SELECT DISTINCT l.subject_id, l.itemid,
                       strftime(CAST(l.charttime AS DATE), '%Y-%m-%d') AS date
                FROM labevents l JOIN t9_subjects s USING (subject_id)
                WHERE l.itemid IN ({itemids})"""
        ).df()
    finally:
        con.close()
    return {
        (int(s), lab_key_of(i), str(d))
        for s, i, d in zip(df["subject_id"], df["itemid"], df["date"], strict=True)
    }


def load_inputs(profile: str | None = None, seed: int = 0, with_raw: bool = True) -> TaskInputs:
    """Read a profile's artifacts into :class:`TaskInputs`.

    Args:
        profile: build profile (default: $CLINTRACE_PROFILE, else quick).
        seed: selection seed carried in the inputs.
        with_raw: also read the raw source's lab days (T9 never-measured check).

    Raises:
        FileNotFoundError: an artifact is missing (names the command that writes it).
        TaskInputError: an artifact is malformed.
    """
    cohort = load("cohort", profile)
    events = load("events", profile)
    dialogues = load("dialogues", profile)
    coverage = load("event_coverage", profile)
    summary = load("dialogue_summary", profile)
    kept = summary.loc[summary["kept"].astype(bool), "subject_id"].astype(int).tolist()
    raw = raw_lab_days(profile, kept) if with_raw else None
    return make_inputs(events, coverage, dialogues, cohort, summary, seed=seed, raw_lab_days=raw)


def generate_candidates(
    inp: TaskInputs, tasks: Iterable[str] | None = None
) -> dict[str, pd.DataFrame]:
    """Every candidate question per task.

    Args:
        inp: generator inputs.
        tasks: task names (default the paper's T1..T9; extended tasks only when named).

    Returns:
        ``{task: DataFrame}`` (QUESTION_COLUMNS + ``conflicts``), each sorted by qid.
    """
    out = {}
    names = list(tasks or task_names("paper"))
    with progress(len(names), "questions: candidates", "task") as bar:
        for task in names:
            known = derived("GENERATORS")
            if task not in known:
                raise ValueError(f"unknown task {task!r}; known: {', '.join(known)}")
            t0 = time.perf_counter()
            bar.set_postfix(task=task)
            out[task] = get_spec(task).generate(inp)
            log.info("%s: %d candidates in %.1fs", task, len(out[task]), time.perf_counter() - t0)
            bar.update(1)
    return out
