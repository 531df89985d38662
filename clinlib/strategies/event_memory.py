"""LongMedBench's memories as strategies: event memory flattened without visit boundaries, and
retrieval and Mem0 bounded to the history before the current visit (its Table 5's RAG and Mem0
rows, which a decision question may be asked under).

* ``flat-window(m=...)`` / ``flat-history(m=...)`` — the event memory M_E "flattened into a
  single chronological sequence, discarding visit-level boundaries": the visits
  ``window-visits`` / ``history-visits`` select, rendered without their ``Visit N (date)``
  headers and without the blank line between visits, and without the greeting sentences that
  state a stay's rank ("this is your third hospital stay with us"), so a question about "the
  third stay" is answered by reading the admission sentences' dates and order. Deviation: the
  kit's record is the dialogue, so M_E is the dialogue's turns of those visits (their
  sentences state the events), not the event table.
* ``history-dense-retrieval(k=...)`` — dense retrieval (the paper's RAG) whose candidates are
  only the visits BEFORE the question's target visit (the target as ``history-visits`` finds
  it: the question's ``meta.visit_idx``, else the last visit).
* ``history-mem0(k=...)`` — the Mem0-style store as it stood after the visits before the
  target (the builtin engine's visit-by-visit snapshots), top-k by similarity to the question.

All four are ``history_only`` except ``flat-window`` (it centres on the target, as
``window-visits`` does), so the decision questions (T11) may be asked under the history ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pandas as pd

from clinlib.dialogue.render import SPEAKER_PREFIX
from clinlib.dialogue.templates import GREETINGS_LATER
from clinlib.strategies.base import Artifact, StrategyError, question_text, render, visit_order
from clinlib.strategies.mem0 import MEMORY_HEADER, Mem0Memory
from clinlib.strategies.retrieval import DenseRetrieval
from clinlib.strategies.window import HistoryVisits, WindowVisits, history, target_visit

_RANK_GREETING_RE = re.compile(
    "(?:"
    + "|".join(
        re.escape(g).replace(re.escape("{ordinal}"), r"[a-z]+(?:-[a-z]+)?") for g in GREETINGS_LATER
    )
    + r")\s*"
)
_HEADER_RE = re.compile(r"^Visit \d+(?: \([^)]*\))?$")


def flatten(text: str) -> str:
    """A rendered dialogue as one chronological sequence: no visit header, no blank line
    between visits, no greeting that states a stay's rank (a turn left empty is dropped)."""
    out = []
    for line in text.split("\n"):
        if not line.strip() or _HEADER_RE.match(line):
            continue
        kept = _RANK_GREETING_RE.sub("", line).rstrip()
        if kept.rstrip(":") in {p for p in SPEAKER_PREFIX.values()}:
            continue
        out.append(kept)
    return "\n".join(out)


class FlatWindow(WindowVisits):
    """``window-visits`` rendered flat (module docstring)."""

    name = "flat-window"
    family = "event memory"

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return flatten(super().access(artifact, question, turns_now))


class FlatHistory(HistoryVisits):
    """``history-visits`` rendered flat (module docstring)."""

    name = "flat-history"
    family = "event memory"

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return flatten(super().access(artifact, question, turns_now))


def before_target(question: Mapping[str, Any], turns_now: pd.DataFrame) -> list[int]:
    """The visits strictly before the question's target visit (``meta.visit_idx``, else the
    last visit)."""
    visits = visit_order(turns_now)
    return history(visits, target_visit({}, question, visits), float("inf"))


class HistoryDenseRetrieval(DenseRetrieval):
    """Dense retrieval over the visits before the target only (module docstring)."""

    name = "history-dense-retrieval"
    history_only = True

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        allowed = set(before_target(question, turns_now))
        ranked = [v for v in self.rank_visits(artifact, question) if v in allowed]
        chosen = sorted(ranked[: int(self.params["k"])])
        return render(turns_now, with_ids=True, visits=chosen) if chosen else ""


class HistoryMem0(Mem0Memory):
    """The Mem0-style store after the visits before the target (module docstring); the
    builtin engine only (its snapshots)."""

    name = "history-mem0"
    history_only = True

    def validate_params(self) -> None:
        super().validate_params()
        if self.params["engine"] != "builtin":
            raise StrategyError(f"{self.name}: needs engine='builtin' (its visit snapshots)")

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        data = super().build(subject_id, turns, prep)
        n = len(visit_order(turns))
        snaps = self.build_snapshots(subject_id, turns, prep, at=range(1, n + 1)) or {}
        data["snapshots"] = {str(t): s["memories"] for t, s in snaps.items()}
        return data

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        seen = len(before_target(question, turns_now))
        memories = artifact.data.get("snapshots", {}).get(str(seen), [])
        view = SimpleNamespace(data={"memories": memories})
        top = self.ranked_memories(view, question_text(question))[: int(self.params["k"])]
        if not top:
            return MEMORY_HEADER + "\n(none)"
        return MEMORY_HEADER + "\n" + "\n".join(f"- {m['text']}" for m in top)
