"""Verbatim strategies: the floor, recency and full-context families (paper §4: "Floor.
no-context-blind — the model sees only the question"; "Recency. last-visit-only — only the most
recent encounter"; "Full. full-context — entire multi-visit dialogue fed verbatim"; plus the
kit's ``last-n-visits`` extra).

They build nothing but an inventory of visits; at question time they render the dialogue AS
IT IS THEN (``turns_now``) with the kit's renderer, so a sentence injected after construction is
visible (the paper's post-construction T3 setting: full-context and last-visit-only stay
intact, §5.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.strategies.base import Artifact, Strategy, render, visit_order


def _inventory(turns: pd.DataFrame) -> dict[str, Any]:
    visits = visit_order(turns)
    return {"visits": visits, "n_visits": len(visits), "n_turns": int(len(turns))}


class NoContextBlind(Strategy):
    """The model sees only the question (the floor)."""

    name = "no-context-blind"
    query_dependent = False
    family = "floor"
    history_only = True  # no context at all

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        return {}

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return ""

    def combine(self, question: Mapping[str, Any], parts: Any) -> str:
        return ""

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {"n_items": 0, "item": "none"}


class FullContext(Strategy):
    """The whole dialogue, verbatim, provenance ids on (the context-coverage upper bound)."""

    name = "full-context"
    query_dependent = False
    family = "full"
    defaults = {"with_ids": True}

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        return _inventory(turns)

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return render(turns_now, with_ids=bool(self.params["with_ids"]))

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {"n_items": artifact.data.get("n_visits", 0), "item": "visits"}


class VisitSubset(Strategy):
    """A raw-text strategy that shows some of the visits verbatim: :meth:`access` renders
    :meth:`selected_visits` (per question); :meth:`held_visits` is every visit it can show
    at all, the store its footprint measures (every visit unless a subclass says fewer)."""

    def selected_visits(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> list[int]:
        """The visits shown for a question."""
        raise NotImplementedError

    def held_visits(self, turns: pd.DataFrame) -> list[int]:
        """The visits the strategy can show for some question."""
        return visit_order(turns)

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return render(
            turns_now,
            with_ids=bool(self.params["with_ids"]),
            visits=self.selected_visits(artifact, question, turns_now),
        )


class LastNVisits(VisitSubset):
    """The ``n`` most recent encounters at question time, verbatim."""

    name = "last-n-visits"
    query_dependent = False
    family = "recency"
    defaults = {"n": 3, "with_ids": True}

    def validate_params(self) -> None:
        self._positive_int("n")

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        return _inventory(turns)

    def held_visits(self, turns: pd.DataFrame) -> list[int]:
        """The last ``n`` visits of the dialogue."""
        return visit_order(turns)[-int(self.params["n"]) :]

    def selected_visits(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> list[int]:
        """The last ``n`` visits of the dialogue at question time, whatever the question."""
        return self.held_visits(turns_now)

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_items": min(int(self.params["n"]), artifact.data.get("n_visits", 0)),
            "item": "visits",
        }


class LastVisitOnly(LastNVisits):
    """Only the most recent encounter (the paper's recency baseline)."""

    name = "last-visit-only"
    defaults = {"with_ids": True}

    def validate_params(self) -> None:
        self.params["n"] = 1

    @property
    def construction_params(self) -> dict[str, Any]:
        return {}

    def label(self) -> str:
        return self.name if self.params["with_ids"] else f"{self.name}(with_ids=False)"
