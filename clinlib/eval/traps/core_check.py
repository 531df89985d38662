"""Core memory's pinned block read with the provenance tags stripped (the memory systems of
MedMemoryBench §6 "Overall Performance and Main Findings"; a memory policy must pin a
constraint by what the text says, never by the tag the generator wrote).

:func:`core_retention` builds core-memory's block per patient from the trap dialogue as
tagged and with every tag stripped (:func:`strip_tags`) and looks for each injected
constraint's statement as text in both. The ``trap-answers`` stage measures it once per build
(``trap_core_retention.parquet``, :mod:`clinlib.eval.traps.stage`); notebook 18 loads it.
"""

from __future__ import annotations

import re

import pandas as pd

from clinlib.strategies import get_strategy
from clinlib.strategies.prep import RuleBasedPrep

__all__ = ["CORE_COLUMNS", "TAG_RE", "core_retention", "strip_tags"]

CORE_COLUMNS = ["subject_id", "kind", "tagged", "stripped"]

TAG_RE = re.compile(r" ?\[[A-Z]+-[0-9-]+(?:, [A-Z]+-[0-9-]+)*\]")


def strip_tags(turns: pd.DataFrame) -> pd.DataFrame:
    """``turns`` with every provenance tag removed from ``text_tagged`` and no ``event_ids``:
    what a memory sees when nothing says which sentence is a trap."""
    return turns.assign(
        text_tagged=[TAG_RE.sub("", str(t)) for t in turns["text_tagged"]],
        event_ids=[[] for _ in range(len(turns))],
    )


def core_retention(trap_turns: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """Whether core-memory's pinned block holds each injected constraint's statement, built
    from the trap dialogue as tagged and with every tag stripped (:func:`strip_tags`); the
    statement is looked for as text, so the measure does not read a tag either.

    Returns:
        One row per injected constraint: subject_id, kind, tagged, stripped (bools).
    """
    inj = facts[facts["origin"] == "injected"]
    strategy, prep = get_strategy("core-memory"), RuleBasedPrep()
    rows = []
    for sid, g in inj.groupby("subject_id", sort=True):
        turns = trap_turns[trap_turns["subject_id"] == sid]
        blocks = {
            name: "\n".join(strategy.construct(int(sid), t, prep).data["core"])
            for name, t in (("tagged", turns), ("stripped", strip_tags(turns)))
        }
        for fact in g.to_dict("records"):
            said = str(fact["statement"])
            rows.append(
                {
                    "subject_id": int(sid),
                    "kind": fact["kind"],
                    "tagged": said in blocks["tagged"],
                    "stripped": said in blocks["stripped"],
                }
            )
    return pd.DataFrame(rows, columns=CORE_COLUMNS)
