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

**A run keeps what it read.** Every context a query returned is kept in the read log
(``log_dir``/reads, by default ``data/build/<profile>/constructions/remote-memory/reads/``): one
JSON file per (endpoint, memory, question) holding the question sent, the context and its
sha256 (the prediction's ``context_sha``). Asking the same question of the same memory again
(evidence recall, the failure explorer, ``make site``) reads the log and never calls the
service, so analysis works with the service stopped; only construction and questions not yet
asked need it.

Every setting works through the kit's usual paths: ``pre`` and ``mixed`` change the
dialogue ingested; ``stream`` builds each checkpoint's prefix as its own memory (the protocol
has no snapshot call, so a stream costs sum-over-checkpoints ingests). A failed call
(retries spent, a refusal, a reply outside the schema) raises :class:`MemoryServiceError`
(one line, exit 2 on the command line); artifacts already written stay, nothing is written
for the failed dialogue, and a rerun resumes from the cache.

**Construction resumes per session.** Each acknowledged ingest is journalled
(``log_dir``/ingests/, the session's sha256 and the usage it reported), and every finished
dialogue's artifact is written at once (:func:`clinlib.strategies.construction.build_strategy`
commits an outside memory per dialogue). A rerun after a failure skips the finished dialogues
and continues the interrupted one at the first session not acknowledged, without a reset; if
the service no longer holds that memory (404, a restarted service) it resets and ingests the
dialogue from its first session, with one line saying so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.io import atomic_path
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

_log = logging.getLogger("clinlib.strategies")

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


def read_key(endpoint: str, memory: str, question: Mapping[str, Any]) -> str:
    """The read log's key of one query: sha256 of the endpoint, the memory and the question."""
    blob = json.dumps([endpoint, memory, dict(question)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def context_sha(text: str) -> str:
    """The content address of a context (sha256 of its UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReadLog:
    """Contexts a memory service returned, on disk (see the module docstring).

    Args:
        root: the folder (one sub-folder per memory).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, memory: str, key: str) -> Path:
        """Where the read of ``key`` lives."""
        return self.root / memory / f"{key[:32]}.json"

    def get(self, memory: str, key: str) -> str | None:
        """The recorded context, or None (never asked, or an unreadable entry)."""
        path = self.path(memory, key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        text = entry.get("context") if isinstance(entry, dict) else None
        if not isinstance(text, str) or entry.get("key") != key:
            return None
        return text if entry.get("context_sha") == context_sha(text) else None

    def put(self, memory: str, key: str, question: Mapping[str, Any], text: str) -> None:
        """Record one read atomically."""
        entry = {
            "key": key,
            "memory_id": memory,
            "question": dict(question),
            "context": text,
            "context_sha": context_sha(text),
        }
        path = self.path(memory, key)
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")


class IngestJournal:
    """The sessions of one memory a service acknowledged (``log_dir``/ingests/): their sha256
    and the usage each reported, so an interrupted construction resumes where it stopped."""

    def __init__(self, log_dir: str | None, endpoint: str, memory: str) -> None:
        tag = hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:12]
        self.path = Path(log_dir) / "ingests" / f"{tag}-{memory}.json" if log_dir else None

    def acknowledged(self, shas: list[str]) -> list[dict[str, float]]:
        """The usage replies of the acknowledged sessions when they are a prefix of ``shas``
        (the same dialogue); [] otherwise (nothing to resume)."""
        if self.path is None:
            return []
        try:
            entry = json.loads(self.path.read_text(encoding="utf-8"))
            done, replies = list(entry["sessions"]), [dict(r) for r in entry["replies"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        ok = len(done) == len(replies) and 0 < len(done) <= len(shas)
        return replies if ok and done == shas[: len(done)] else []

    def write(self, shas: list[str], replies: list[dict[str, float]]) -> None:
        """Record the acknowledged prefix atomically."""
        if self.path is None:
            return
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps({"sessions": shas, "replies": replies}), encoding="utf-8")

    def clear(self) -> None:
        """Forget the journal (the artifact now records the memory)."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)


class RemoteMemory(Strategy):
    """An outside memory service over the memory protocol (see module docstring)."""

    name = "remote-memory"
    family = "outside memory"
    derived = True
    defaults = {
        "endpoint": "http://127.0.0.1:8790",
        "timeout_s": 30.0,
        "max_retries": 4,
        "log_dir": None,
    }
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
        shas = [context_sha(json.dumps(x, sort_keys=True, ensure_ascii=False)) for x in sessions]
        journal = IngestJournal(self.params["log_dir"], str(self.params["endpoint"]), mid)
        replies = journal.acknowledged(shas)
        try:
            self._ingest_from(mid, int(subject_id), sessions, shas, replies, journal)
        except MemoryServiceError as exc:
            if not replies or "HTTP 404" not in str(exc):
                raise MemoryServiceError(f"{exc}{self._build_remedy(exc)}") from None
            _log.warning(
                "%s: %s no longer holds memory %s (restarted?): ingesting it again from session 1",
                self.name,
                self.params["endpoint"],
                mid,
            )
            replies = []
            self._ingest_from(mid, int(subject_id), sessions, shas, replies, journal)
        journal.clear()
        return {
            "endpoint": str(self.params["endpoint"]),
            "memory_id": mid,
            "n_sessions": len(sessions),
            "n_turns": int(len(turns)),
            "usage": sum_usage(replies),
        }

    def _ingest_from(
        self,
        mid: str,
        subject_id: int,
        sessions: list[dict[str, Any]],
        shas: list[str],
        replies: list[dict[str, float]],
        journal: IngestJournal,
    ) -> None:
        """Ingest ``sessions`` after the ``len(replies)`` already acknowledged (a reset first
        when none are), journalling each acknowledgement."""
        if not replies:
            self.service.reset(mid, subject_id)
            journal.write([], [])
        for i in range(len(replies), len(sessions)):
            replies.append(dict(self.service.ingest(mid, subject_id, i + 1, sessions[i]) or {}))
            journal.write(shas[: i + 1], replies)

    def _build_remedy(self, exc: MemoryServiceError) -> str:
        if "HTTP 404" in str(exc):
            return self._remedy(exc)
        return (
            "; fix the service and rerun: dialogues already built are kept and the "
            "interrupted one resumes at its first unacknowledged session"
        )

    def _artifact(self, subject_id, turns, prep, data, seconds, sha=None) -> Artifact:  # noqa: ANN001
        art = super()._artifact(subject_id, turns, prep, data, seconds, sha)
        art.prep_usage = dict(data["usage"])
        return art

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        memory, payload = str(artifact.data["memory_id"]), question_payload(question)
        log = ReadLog(Path(self.params["log_dir"]) / "reads") if self.params["log_dir"] else None
        key = read_key(str(self.params["endpoint"]), memory, payload)
        recorded = log.get(memory, key) if log is not None else None
        if recorded is not None:
            return recorded
        try:
            reply = self.service.query(memory, int(artifact.subject_id), payload)
        except MemoryServiceError as exc:
            raise MemoryServiceError(f"{exc}{self._remedy(exc)}") from None
        context = reply.get("context") if isinstance(reply, Mapping) else None
        if not isinstance(context, str):
            raise MemoryServiceError(
                f"{self.params['endpoint']}: query of {question_id(question)} "
                "returned no 'context' string"
            )
        if log is not None:
            log.put(memory, key, payload, context)
        return context

    def _remedy(self, exc: MemoryServiceError) -> str:
        """What to do about a failed query, for the error line."""
        where = self.params["log_dir"] or "data/build/<profile>/constructions/remote-memory"
        if "HTTP 404" in str(exc):
            return (
                f"; the service no longer holds this memory (restarted?): delete {where}/ "
                "and rerun to rebuild it"
            )
        return (
            f"; this question was never read from {self.params['endpoint']}: start the "
            "service (`clintrace memory-serve`, or your own) and rerun; questions already "
            "asked are read from the run's read log without it"
        )

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_sessions": int(artifact.data.get("n_sessions", 0)),
            "n_turns": int(artifact.data.get("n_turns", 0)),
        }
