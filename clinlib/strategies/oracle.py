"""``oracle``: only the visits that hold the question's evidence, verbatim — the evidence-only
history that separates a representation's losses from the reader's (the reading
ceiling of :func:`clinlib.analysis.evidence.loss_split`).

Per question (so ``query_dependent``, like ``window-visits``), access renders the visits of
:func:`clinlib.strategies.evidence.evidence_visits`: the visits whose turns state an anchor
event, hold an ``evidence_turns`` turn, or carry the question's injected sentence — in the
dialogue AS IT IS at question time (``turns_now``), so a sentence injected after construction
is shown, as full-context shows it. A question whose evidence the dialogue never states (T9:
the fact is absent by construction) gets the visit its ``meta`` dates, where the fact would
have been, else no visit (an empty history). T6 shows each patient's evidence visits under
its own section.

It reads the gold anchors, so it is a DIAGNOSTIC, not a representation a system could build:
never rank it beside the paper's eight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.strategies.base import Artifact, visit_order
from clinlib.strategies.evidence import evidence_visits, meta_visit
from clinlib.strategies.simple import VisitSubset


class OracleVisits(VisitSubset):
    """The question's evidence visits only (module docstring)."""

    name = "oracle"
    family = "oracle"
    query_dependent = True
    defaults = {"with_ids": True}

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        visits = visit_order(turns)
        return {"visits": visits, "n_visits": len(visits)}

    def selected_visits(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> list[int]:
        """The evidence visits of this patient, else the visit the question dates."""
        sid = int(turns_now["subject_id"].iloc[0])
        have = set(visit_order(turns_now))
        visits = evidence_visits(question, sid, turns_now) & have
        if not visits:
            dated = meta_visit(question)
            visits = {dated} & have if dated is not None else set()
        return sorted(visits)

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {"n_items": artifact.data.get("n_visits", 0), "item": "visits"}
