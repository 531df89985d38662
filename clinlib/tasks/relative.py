"""Selection and leak check of the extended T1R set (relative-time retrieval; LongMedBench
"event retrieval", explicit vs relative questions; the generator's spec is
:mod:`clinlib.tasks.generators.t1r`). Nothing here touches T1–T9.

Selection works on PAIRS: the relative rows are selected like any task's questions
(:func:`clinlib.tasks.build.select_task`: stratified by disease and complexity tertile, the
per-patient cap, a seeded order), then every selected relative question brings its explicit
twin, so each selected event is asked both ways.

L3 (no leak) for T1R: T1's rule on both subtypes (the stem must not state the gold value,
dates excluded), and a relative stem must hold no digit at all — no date, no time, no visit
number: the position is the only cue, written in words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.core.config import PROFILES, resolve_profile
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.build import select_task
from clinlib.tasks.gates.content import _leak
from clinlib.tasks.generate import load_inputs
from clinlib.tasks.generators.common import INTERNAL_COLUMNS
from clinlib.tasks.generators.t1r import TASK, generate

# Pairs (events) per profile: the paper profile asks 300 events both ways (600 questions),
# the quick profile a handful that still covers every disease.
T1R_PAIRS: dict[str, int] = {"quick": 12, "paper": 300}


def t1r_pairs(profile: str) -> int:
    """Pairs of a profile (the paper's count for any profile but ``quick``)."""
    return T1R_PAIRS.get(profile, T1R_PAIRS["paper"])


def _pair_key(row: Mapping[str, Any]) -> str:
    return str(json.loads(str(row["meta"]))["pair"])


def select_pairs(cands: pd.DataFrame, n_pairs: int, seed: int) -> pd.DataFrame:
    """``n_pairs`` events asked both ways (module docstring); QUESTION_COLUMNS, by qid.

    Raises:
        ValueError: a relative candidate without its explicit twin.
    """
    rel = cands[cands["subtype"] == "relative"].reset_index(drop=True)
    chosen, _avail, _short = select_task(rel, TASK, int(n_pairs), seed)
    keys = {_pair_key(r) for r in chosen.to_dict("records")}
    twins = cands[
        (cands["subtype"] == "explicit")
        & cands["meta"].map(lambda m: str(json.loads(str(m))["pair"]) in keys)
    ]
    if len(twins) != len(chosen):
        raise ValueError(f"T1R: {len(chosen)} relative questions but {len(twins)} twins")
    out = pd.concat([chosen, twins], ignore_index=True)
    out = out.drop(columns=[c for c in INTERNAL_COLUMNS if c in out.columns])
    return out[list(QUESTION_COLUMNS)].sort_values("qid", kind="stable").reset_index(drop=True)


def t1r_leak(row: Mapping[str, Any]) -> str | None:
    """Why a T1R question leaks (module docstring; the rule lives with every task's L3 rule
    in :mod:`clinlib.tasks.gates.content`), or None."""
    return _leak(row)


def t1r_questions(profile: str | None = None, n_pairs: int | None = None, seed: int | None = None):
    """A profile's T1R set, generated from its stage artifacts and selected in pairs
    (:data:`T1R_PAIRS` by default; the profile's seed, else 0). Deterministic.

    Raises:
        FileNotFoundError: a stage artifact is missing (names the command that writes it).
    """
    name = resolve_profile(profile)
    if seed is None:
        seed = PROFILES[name].seed if name in PROFILES else 0
    inp = load_inputs(name, seed=seed, with_raw=False)
    pairs = t1r_pairs(name) if n_pairs is None else int(n_pairs)
    return select_pairs(generate(inp), pairs, seed)


def subset_pairs(questions: pd.DataFrame, n_pairs: int, seed: int = 0) -> pd.DataFrame:
    """A stratified subset of ``n_pairs`` pairs of a T1R set (both twins of each), selected
    as the set itself was (disease and tertile balance kept); the whole set when it holds
    fewer pairs."""
    n = min(int(n_pairs), int((questions["subtype"] == "relative").sum()))
    return select_pairs(questions.assign(conflicts=[[] for _ in range(len(questions))]), n,
                        seed)  # fmt: skip
