"""The reference memory service: the memory protocol served by one of the kit's own memories
(docs/memory-protocol.md; ``clintrace memory-serve``).

:class:`ReferenceMemoryService` implements :class:`~clinlib.strategies.memory_protocol.MemoryService`
in process: it keeps each memory's ingested sessions and, at the first query after an ingest,
builds the backend strategy's artifact from them (e.g. rule-based ``mem0``, ``dense-retrieval``)
and answers with the backend's own ``access``. So ``remote-memory`` pointed at it yields the
contexts the backend gives in process (tested), and any difference a real service shows is
that service's, not the transport's. Rule-based prep spends no tokens, so ingest reports
zero usage; with an LLM prep model the building happens at query time and is not reported.

:class:`MemoryServer` serves a service over HTTP (the kit's loopback engine,
:mod:`clinlib.core.http_server`; a slow service call runs off its event loop) and can inject faults by a script, for tests: ``500`` / ``503``
/ ``429`` (with ``Retry-After: 0``), ``hang`` (reply after ``hang_s``), ``disconnect`` (close
without a reply), ``malformed`` (200 with a body that is not JSON), ``schema`` (200 with JSON
outside the protocol) and ``400``; ``latency_s`` delays every reply (a slow service).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from clinlib.core.http_server import LoopbackServer, Request
from clinlib.strategies.base import Artifact, StrategyError
from clinlib.strategies.memory_protocol import CALLS, MemoryServiceError, check_message
from clinlib.strategies.prep import get_prep
from clinlib.strategies.registry import get_strategy

MEMORY_FAULT_KINDS: tuple[str, ...] = (
    "400",
    "429",
    "500",
    "503",
    "hang",
    "disconnect",
    "malformed",
    "schema",
)
# (arrival index, call name, request payload) -> fault kind or None
FaultScript = Callable[[int, str, Mapping[str, Any]], "str | None"]


# Fault kind -> the reply that replaces the service's (status 0: close without a reply);
# "hang" is not here: it delays the normal reply.
FAULT_REPLIES: dict[str, tuple[int, Any, dict[str, str]]] = {
    "disconnect": (0, None, {}),
    "malformed": (200, b'{"context": "cut in hal', {}),
    "schema": (200, {"contexts": ["not the protocol"], "ok": "yes"}, {}),
    "429": (429, {"error": "rate limited"}, {"Retry-After": "0"}),
    **{k: (int(k), {"error": f"injected {k}"}, {}) for k in ("400", "500", "503")},
}


class UnknownMemory(MemoryServiceError):
    """A call named a memory the service does not hold (HTTP 404)."""


class OutOfOrder(MemoryServiceError):
    """An ingest whose ``seq`` is not the next one (HTTP 422)."""


class ReferenceMemoryService:
    """The protocol over a kit strategy (module docstring).

    Args:
        backend: a registry name or label, e.g. ``mem0`` or ``dense-retrieval(k=3)``.
        profile: whose embedding folders the backend uses.
        prep: the backend's prep model (default rule-based).
    """

    def __init__(
        self, backend: str = "mem0", profile: str | None = None, prep: str = "rule-based"
    ) -> None:
        if str(backend).startswith("remote-memory"):
            raise StrategyError("memory-serve: the backend must be one of the kit's own memories")
        self.strategy = get_strategy(backend, profile=profile)
        self.prep = get_prep(prep, profile=profile)
        self.backend = self.strategy.label()
        self._memories: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def reset(self, memory_id: str, subject_id: int) -> None:
        with self._lock:
            self._memories[memory_id] = {
                "subject_id": int(subject_id),
                "sessions": [],
                "artifact": None,
            }

    def ingest(
        self, memory_id: str, subject_id: int, seq: int, session: Mapping[str, Any]
    ) -> Mapping[str, float]:
        with self._lock:
            mem = self._memory(memory_id, subject_id)
            held = mem["sessions"]
            if seq == len(held) and held and held[-1] == dict(session):
                return self._usage()  # a retried ingest: already stored
            if seq != len(held) + 1:
                raise OutOfOrder(f"memory {memory_id}: expected seq {len(held) + 1}, got {seq}")
            held.append(dict(session))
            mem["artifact"] = None
            return self._usage()

    def query(
        self, memory_id: str, subject_id: int, question: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        with self._lock:
            mem = self._memory(memory_id, subject_id)
            if not mem["sessions"]:
                raise UnknownMemory(f"memory {memory_id} holds no session")
            turns = turns_of(int(subject_id), mem["sessions"])
            if mem["artifact"] is None:
                mem["artifact"] = self.strategy.construct(int(subject_id), turns, self.prep)
            art: Artifact = mem["artifact"]
            q = {**dict(question), "subject_ids": [int(subject_id)]}
            context = self.strategy.access(art, q, turns)
            n_items = self.strategy.footprint(art).get("n_items")
            return {"context": context, "n_items": None if n_items is None else int(n_items)}

    def _memory(self, memory_id: str, subject_id: int) -> dict[str, Any]:
        mem = self._memories.get(memory_id)
        if mem is None:
            raise UnknownMemory(
                f"unknown memory_id {memory_id!r} (reset it first; a restarted "
                "service forgets: rebuild the remote-memory constructions)"
            )
        if mem["subject_id"] != int(subject_id):
            raise UnknownMemory(f"memory {memory_id} belongs to patient {mem['subject_id']}")
        return mem

    def _usage(self) -> dict[str, float]:
        if getattr(self.prep, "is_llm", False):
            return {}  # built at query time; not reported
        return {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0}


def turns_of(subject_id: int, sessions: list[Mapping[str, Any]]) -> pd.DataFrame:
    """The dialogues.parquet-shaped turns of a memory's ingested sessions."""
    rows = [
        {
            "subject_id": int(subject_id),
            "visit_idx": int(s["visit_idx"]),
            "visit_date": s.get("visit_date"),
            **t,
        }
        for s in sessions
        for t in s["turns"]
    ]
    out = pd.DataFrame(rows)
    if "event_ids" in out.columns:
        out["event_ids"] = [list(x) if isinstance(x, list) else [] for x in out["event_ids"]]
    return out


def dispatch(service: Any, name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Apply one checked request to a service; returns the reply object."""
    mid, sid = str(payload["memory_id"]), int(payload["subject_id"])
    if name == "reset":
        service.reset(mid, sid)
        return {"ok": True}
    if name == "ingest":
        usage = dict(service.ingest(mid, sid, int(payload["seq"]), payload["session"]) or {})
        return {"ok": True, "seq": int(payload["seq"]), **({"usage": usage} if usage else {})}
    return dict(service.query(mid, sid, payload["question"]))


class MemoryServer(LoopbackServer):
    """HTTP front of a memory service, with scripted faults (module docstring). The port is
    bound at construction, so a taken port fails at once and :attr:`base_url` is known
    before serving.

    Usage::

        with MemoryServer(ReferenceMemoryService("mem0", "quick")) as srv:
            strategy = get_strategy("remote-memory", endpoint=srv.base_url)
    """

    def __init__(
        self,
        service: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        script: FaultScript | None = None,
        latency_s: float = 0.0,
        hang_s: float = 5.0,
    ) -> None:
        super().__init__(host, port)
        self.service, self.script = service, script
        self.latency_s, self.hang_s = float(latency_s), float(hang_s)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.faults: list[str] = []
        self._count = threading.Lock()
        self.listen()
        self.bind_port = self.port  # a restart listens where base_url points
        self.base_url = f"http://{self.host}:{self.port}"

    def fault_for(self, name: str, payload: Mapping[str, Any]) -> str | None:
        """Record the call; the fault the script gives it (None: answer normally)."""
        with self._count:
            index = len(self.calls)
            self.calls.append((name, dict(payload)))
        kind = self.script(index, name, payload) if self.script else None
        if kind is not None:
            if kind not in MEMORY_FAULT_KINDS:
                raise StrategyError(f"unknown memory fault {kind!r}; known: {MEMORY_FAULT_KINDS}")
            with self._count:
                self.faults.append(kind)
        return kind

    async def respond(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Check the request, act out its scripted fault, else answer from the service."""
        status, reply, headers = await self._reply(request)
        if status == 0:  # a disconnect: close without a reply
            return False
        body = reply if isinstance(reply, bytes) else json.dumps(reply, ensure_ascii=False).encode()
        self.send(writer, status, body, headers=headers)
        await writer.drain()
        return True

    async def _reply(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        """(status, reply object or raw bytes, extra headers); status 0: disconnect."""
        name = request.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method != "POST" or name not in CALLS:
            return 404, {"error": f"unknown call {request.path!r}; calls: {CALLS}"}, {}
        try:
            payload = json.loads(request.body)
            check_message(f"{name}_request", payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return 400, {"error": f"request is not JSON: {exc}"}, {}
        except MemoryServiceError as exc:
            return 400, {"error": str(exc)}, {}
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        fault = self.fault_for(name, payload)
        if fault == "hang":  # reply late (after the client may have given up)
            await asyncio.sleep(self.hang_s)
        elif fault is not None:
            return FAULT_REPLIES[fault]
        try:
            # the service may take long (a backend's construction): off the event loop
            return 200, await asyncio.to_thread(dispatch, self.service, name, payload), {}
        except UnknownMemory as exc:
            return 404, {"error": str(exc)}, {}
        except OutOfOrder as exc:
            return 422, {"error": str(exc)}, {}
        except (StrategyError, ValueError, KeyError) as exc:
            return 400, {"error": f"{type(exc).__name__}: {exc}"}, {}
