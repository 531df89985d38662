"""``window-visits(m=...)``: the question's target visit with ``m`` visits on either side,
verbatim (LongMedBench "event retrieval": the agent reads the event memory
M_E^(i-m, i+m+1) around the target visit V_i, with V_i in the middle of the window "to
evaluate retrieval from non-recency-favored regions of long-context memory"; its
m ∈ {1, 2, 3, ∞}, windows of 3, 5, 7 visits and the full history).

Construction is the per-visit index of the dialogue: which visit states which event id
(from the turns' provenance ``event_ids``), built from the dialogue only and cached like
every other strategy; it does not depend on ``m``, so every window size shares one artifact.
Access finds the TARGET visit — the visit whose turns state the question's first anchor
event found in the index, else ``meta.visit_idx`` when the question's meta names one, else
the last visit — and renders the visits whose rank in the dialogue lies within ``m`` of the
target's, clipped at the record's ends (so an early or late target gets a shorter,
off-centre window). ``m=inf`` is the whole dialogue, exactly what full-context shows.

Like the seed's benchmark, the window is PLACED by the question's anchor: the strategy
isolates how much surrounding history hurts retrieval, not whether a system can find the
visit (that is what retrieval strategies measure). It reads the current text
(``turns_now``), so a sentence injected after construction is visible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.strategies.base import Artifact, StrategyError, visit_order
from clinlib.strategies.evidence import anchor_ids, meta_visit
from clinlib.strategies.simple import VisitSubset

INF = math.inf


def visit_index(turns: pd.DataFrame) -> dict[str, int]:
    """event_id -> visit_idx of the turn stating it (the first, in turn order); empty when
    the turns carry no ``event_ids``."""
    if "event_ids" not in turns.columns:
        return {}
    out: dict[str, int] = {}
    ordered = turns.sort_values("turn_idx", kind="stable")
    for v, ids in zip(ordered["visit_idx"].tolist(), ordered["event_ids"].tolist(), strict=True):
        for eid in [] if ids is None else list(ids):
            out.setdefault(str(eid), int(v))
    return out


def window(visits: Sequence[int], target: int, m: float) -> list[int]:
    """The visits whose rank in ``visits`` (sorted) is within ``m`` of ``target``'s rank,
    clipped at both ends; a target absent from ``visits`` is replaced by the nearest visit
    (the earlier one on a tie)."""
    ordered = sorted(int(v) for v in visits)
    if not ordered:
        return []
    centre = min(range(len(ordered)), key=lambda i: (abs(ordered[i] - int(target)), ordered[i]))
    if math.isinf(m):
        return ordered
    lo, hi = max(0, centre - int(m)), min(len(ordered), centre + int(m) + 1)
    return ordered[lo:hi]


def target_visit(index: Mapping[str, int], question: Mapping[str, Any], visits: Sequence[int]):
    """The question's target visit (module docstring): anchor, else meta, else the last."""
    for eid in anchor_ids(question):
        if eid in index:
            return int(index[eid])
    meta = meta_visit(question)
    if meta is not None:
        return meta
    return max(int(v) for v in visits)


class WindowVisits(VisitSubset):
    """The target visit and ``m`` visits either side, verbatim (module docstring)."""

    name = "window-visits"
    family = "window"
    query_dependent = True
    defaults = {"m": 2, "with_ids": True}

    def validate_params(self) -> None:
        m = self.params["m"]
        if isinstance(m, str) and m.strip().lower() in ("inf", "infinity"):
            m = INF
        ok = not isinstance(m, bool) and (
            (isinstance(m, int) and m >= 0) or (isinstance(m, float) and m == INF)
        )
        if not ok:
            raise StrategyError(
                f"strategy {self.name!r}: m must be an integer >= 0 or inf, "
                f"got {self.params['m']!r}"
            )
        self.params["m"] = m

    def label(self) -> str:
        """Always names ``m`` (``window-visits(m=1)``, ``window-visits(m=inf)``), so window
        sizes never collide in a predictions table; parses back with
        :func:`clinlib.strategies.registry.parse_label`."""
        m = self.params["m"]
        extra = "" if self.params["with_ids"] else ", with_ids=False"
        return f"{self.name}(m={'inf' if math.isinf(m) else int(m)}{extra})"

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        visits = visit_order(turns)
        return {"visits": visits, "n_visits": len(visits), "event_visit": visit_index(turns)}

    def selected_visits(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> list[int]:
        """The visits shown for a question."""
        visits = visit_order(turns_now)
        index = (artifact.data.get("event_visit") or {}) if artifact is not None else {}
        return window(visits, target_visit(index, question, visits), self.params["m"])

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        n = artifact.data.get("n_visits", 0)
        m = self.params["m"]
        return {"n_items": n if math.isinf(m) else min(n, 2 * int(m) + 1), "item": "visits"}


def history(visits: Sequence[int], target: int, m: float) -> list[int]:
    """The up to ``m`` visits strictly BEFORE ``target`` in ``visits`` (sorted), the latest
    last; ``m = inf`` is every earlier visit. A target absent from ``visits`` keeps the
    visits before it."""
    earlier = sorted(int(v) for v in visits if int(v) < int(target))
    if math.isinf(m):
        return earlier
    return earlier[len(earlier) - int(m) :] if int(m) > 0 else []


class HistoryVisits(WindowVisits):
    """``history-visits(m=...)``: the m visits BEFORE the question's target visit, verbatim —
    the memory of a decision question (LongMedBench "Task 3": the long-horizon event memory
    M_E^(j-m, j) of the visits before the current visit V_j; T11, whose working context, the
    current visit up to the cut, is in the question). It never shows the target visit or a
    later one, so nothing after the cut reaches the context; ``m = inf`` is the whole history
    before the target, ``m = 0`` none. Target and construction as for ``window-visits``."""

    name = "history-visits"
    history_only = True  # the visits before the target only

    def label(self) -> str:
        return super().label().replace(WindowVisits.name, self.name, 1)

    def selected_visits(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> list[int]:
        """The visits shown for a question (the target's history only)."""
        visits = visit_order(turns_now)
        index = (artifact.data.get("event_visit") or {}) if artifact is not None else {}
        return history(visits, target_visit(index, question, visits), self.params["m"])

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        n = artifact.data.get("n_visits", 0)
        m = self.params["m"]
        return {
            "n_items": max(0, n - 1) if math.isinf(m) else min(max(0, n - 1), int(m)),
            "item": "visits",
        }
