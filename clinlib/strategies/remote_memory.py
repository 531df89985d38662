"""``remote-memory(endpoint=...)``: any memory system behind the memory protocol
(:mod:`clinlib.strategies.memory_protocol`, docs/memory-protocol.md).

Construction resets a memory named after the patient and the dialogue it reads
(``<subject_id>-<sha of the rendered dialogue>``, so the ``pre`` variant, each streaming
prefix and each noisy dialogue is its own memory) and ingests the sessions one by one in
chronological order; the artifact records the memory's name, its session count, the wall
time (``build_seconds``) and the tokens / cost the service reported (``prep_usage``; NaN
when it reported none: unknown, not free). Access asks the service for the question's
context. The service holds only what was ingested, so the strategy is ``derived``: a
sentence injected after construction (the ``post`` T3 setting) is not seen.

Every setting works through the kit's usual paths: ``pre`` and ``mixed`` change the
dialogue ingested; ``stream`` builds each checkpoint's prefix as its own memory (the protocol
has no snapshot call, so a stream costs sum-over-checkpoints ingests). A failed call
(retries spent, a refusal, a reply outside the schema) raises :class:`MemoryServiceError`
(one line, exit 2 on the command line); artifacts already written stay, nothing is written
for the failed batch, and a rerun resumes from the cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    dialogue_hash,
    question_id,
    question_text,
    visit_order,
)
from clinlib.strategies.build_cost import USAGE_FIELDS
from clinlib.strategies.memory_protocol import MemoryService, MemoryServiceError, resolve_service

# What a session's turns carry to a service; ``is_noise`` / ``source_visit_idx`` stay home
# (no method sees which sessions are noise, MedMemoryBench §4 "Noise Augmentation").
TURN_FIELDS: tuple[str, ...] = ("turn_idx", "speaker", "text", "text_tagged", "event_ids")


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray | list | tuple):
        return [str(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    return value


def sessions_of(turns: pd.DataFrame) -> list[dict[str, Any]]:
    """One protocol ``session`` per visit, in chronological order (docs/memory-protocol.md)."""
    out = []
    for v in visit_order(turns):
        g = turns[turns["visit_idx"] == v].sort_values("turn_idx", kind="stable")
        date = g["visit_date"].iloc[0] if "visit_date" in g.columns else None
        rows = []
        for rec in g.to_dict("records"):
            row = {k: _plain(rec[k]) for k in TURN_FIELDS if k in rec and rec[k] is not None}
            row["turn_idx"] = int(row["turn_idx"])
            rows.append(row)
        out.append(
            {"visit_idx": int(v), "visit_date": None if pd.isna(date) else str(date), "turns": rows}
        )
    return out


def question_payload(question: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol ``question`` object of a questions.parquet row."""
    out: dict[str, Any] = {"qid": question_id(question), "question": question_text(question)}
    if question.get("task") is not None:
        out["task"] = str(question["task"])
    options = question.get("options")
    if options is not None and len(options):
        out["options"] = [str(o) for o in options]
    return out


def memory_id(subject_id: int, turns: pd.DataFrame) -> str:
    """The memory's name: the patient and the dialogue it was built from."""
    return f"{int(subject_id)}-{dialogue_hash(turns)[:24]}"


def sum_usage(replies: list[Mapping[str, float]]) -> dict[str, float]:
    """Sum the usage the service reported per session; NaN per field when none reported it."""
    out = {}
    for f in USAGE_FIELDS:
        vals = [float(r[f]) for r in replies if f in r]
        out[f] = float(sum(vals)) if vals else math.nan
    return out


class RemoteMemory(Strategy):
    """An outside memory service over the memory protocol (see module docstring)."""

    name = "remote-memory"
    family = "outside memory"
    derived = True
    defaults = {"endpoint": "http://127.0.0.1:8790", "timeout_s": 30.0, "max_retries": 4}
    construction_keys = ("endpoint",)

    def validate_params(self) -> None:
        ep = str(self.params["endpoint"])
        if not ep.startswith(("http://", "https://", "py:")):
            raise StrategyError(
                f"{self.name}: endpoint must be http(s)://host:port or py:NAME, got {ep!r}"
            )
        if not float(self.params["timeout_s"]) > 0:
            raise StrategyError(f"{self.name}: timeout_s must be > 0")
        if int(self.params["max_retries"]) < 0:
            raise StrategyError(f"{self.name}: max_retries must be >= 0")
        self._service: MemoryService | None = None

    @property
    def service(self) -> MemoryService:
        """The transport (resolved once)."""
        if self._service is None:
            self._service = resolve_service(
                str(self.params["endpoint"]),
                float(self.params["timeout_s"]),
                int(self.params["max_retries"]),
            )
        return self._service

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        mid = memory_id(subject_id, turns)
        sessions = sessions_of(turns)
        self.service.reset(mid, int(subject_id))
        replies = [
            dict(self.service.ingest(mid, int(subject_id), i, s) or {})
            for i, s in enumerate(sessions, start=1)
        ]
        return {
            "endpoint": str(self.params["endpoint"]),
            "memory_id": mid,
            "n_sessions": len(sessions),
            "n_turns": int(len(turns)),
            "usage": sum_usage(replies),
        }

    def _artifact(self, subject_id, turns, prep, data, seconds) -> Artifact:  # noqa: ANN001
        art = super()._artifact(subject_id, turns, prep, data, seconds)
        art.prep_usage = dict(data["usage"])
        return art

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        reply = self.service.query(
            str(artifact.data["memory_id"]), int(artifact.subject_id), question_payload(question)
        )
        context = reply.get("context") if isinstance(reply, Mapping) else None
        if not isinstance(context, str):
            raise MemoryServiceError(
                f"{self.params['endpoint']}: query of {question_id(question)} "
                "returned no 'context' string"
            )
        return context

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_sessions": int(artifact.data.get("n_sessions", 0)),
            "n_turns": int(artifact.data.get("n_turns", 0)),
        }
