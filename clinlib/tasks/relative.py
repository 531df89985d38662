"""Selection and leak check of the extended T1R set (relative-time retrieval; LongMedBench
retrieval task of its Table 2, explicit vs relative questions; the generator's spec is
:mod:`clinlib.tasks.generators.t1r`). Nothing here touches T1–T9.

Selection works on PAIRS: the relative rows are selected like any task's questions
(:func:`clinlib.tasks.build.select_task`: stratified by disease and complexity tertile, the
per-patient cap, a seeded order), then every selected relative question brings its explicit
twin, so each selected event is asked both ways. The extended-set build
(:mod:`clinlib.tasks.extended`) calls :func:`select_t1r` with the task's question count
(rules.EXTENDED_COUNTS: 600 on the paper profile = 300 events; 24 on quick).

L3 (no leak) for T1R: T1's rule on both subtypes (the stem must not state the gold value,
dates excluded), and a relative stem must state no number (:data:`clinlib.tasks.base.
STATED_NUMBER`) — no date, no time, no visit number: the position is the only cue, written in
words (a lab name such as "% Hemoglobin A1c" is not a number).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.build import per_patient_cap, select_task
from clinlib.tasks.gates.leaks import leak
from clinlib.tasks.generators.t1r import TASK


def _pair_key(row: Mapping[str, Any]) -> str:
    return str(json.loads(str(row["meta"]))["pair"])


def select_t1r(
    cands: pd.DataFrame, task: str, count: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """Select ``count`` T1R questions (``count // 2`` events asked both ways; module
    docstring), with :func:`clinlib.tasks.build.select_task`'s return shape.

    Returns:
        (selected rows with the candidates' columns, by qid; availability per subtype;
        shortfall dict or None, counted in questions).

    Raises:
        ValueError: a relative candidate without its explicit twin.
    """
    rel = cands[cands["subtype"] == "relative"].reset_index(drop=True)
    # each chosen event brings its explicit twin, so a patient's pairs are capped at half the
    # whole task's per-patient cap (L4's patient share counts both questions of a pair)
    cap = max(1, per_patient_cap(int(count)) // 2)
    chosen, avail, short = select_task(rel, task, int(count) // 2, seed, cap=cap)
    keys = {_pair_key(r) for r in chosen.to_dict("records")}
    is_twin = (cands["subtype"] == "explicit") & cands["meta"].map(
        lambda m: _pair_key({"meta": m}) in keys
    )
    twins = cands[is_twin]
    if len(twins) != len(chosen):
        raise ValueError(f"T1R: {len(chosen)} relative questions but {len(twins)} twins")
    out = pd.concat([chosen, twins], ignore_index=True).sort_values("qid", kind="stable")
    n_explicit = int((cands["subtype"] == "explicit").sum())
    twin_row = pd.DataFrame(
        [(task, "explicit", n_explicit, int(avail["quota"].sum()), len(twins))],
        columns=avail.columns,
    )
    if short is not None:
        short = {
            **short,
            "target": int(count),
            "available": int(len(cands)),
            "selected": int(len(out)),
            "missing": int(count) - int(len(out)),
        }
    return out.reset_index(drop=True), pd.concat([twin_row, avail], ignore_index=True), short


def select_pairs(cands: pd.DataFrame, n_pairs: int, seed: int) -> pd.DataFrame:
    """``n_pairs`` events asked both ways (:func:`select_t1r`); QUESTION_COLUMNS, by qid."""
    out = select_t1r(cands, TASK, 2 * int(n_pairs), seed)[0]
    return out[list(QUESTION_COLUMNS)].reset_index(drop=True)


def t1r_leak(row: Mapping[str, Any]) -> str | None:
    """Why a T1R question leaks (module docstring; the rule lives with every task's L3 rule
    in :mod:`clinlib.tasks.gates.content`), or None."""
    return leak(row)


def subset_pairs(questions: pd.DataFrame, n_pairs: int, seed: int = 0) -> pd.DataFrame:
    """A stratified subset of ``n_pairs`` pairs of a T1R set (both twins of each), selected
    as the set itself was (disease and tertile balance kept); the whole set when it holds
    fewer pairs."""
    n = min(int(n_pairs), int((questions["subtype"] == "relative").sum()))
    return select_pairs(questions.assign(conflicts=[[] for _ in range(len(questions))]), n, seed)
