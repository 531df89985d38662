"""The reference memory service: the memory protocol served by one of the kit's own memories
(issue 32 §1; docs/memory-protocol.md; ``clintrace memory-serve``).

:class:`ReferenceMemoryService` implements :class:`~clinlib.strategies.memory_protocol.MemoryService`
in process: it keeps each memory's ingested sessions and, at the first query after an ingest,
builds the backend strategy's artifact from them (e.g. rule-based ``mem0``, ``dense-retrieval``)
and answers with the backend's own ``access``. So ``remote-memory`` pointed at it yields the
contexts the backend gives in process (tested), and any difference a real service shows is
that service's, not the transport's. Rule-based prep spends no tokens, so ingest reports
zero usage; with an LLM prep model the building happens at query time and is not reported.

:class:`MemoryServer` serves a service over HTTP (stdlib ``http.server``, one write per
reply on a TCP_NODELAY socket) and can inject faults by a script, for tests: ``500`` / ``503``
/ ``429`` (with ``Retry-After: 0``), ``hang`` (reply after ``hang_s``), ``disconnect`` (close
without a reply), ``malformed`` (200 with a body that is not JSON), ``schema`` (200 with JSON
outside the protocol) and ``400``; ``latency_s`` delays every reply (a slow service).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pandas as pd

from clinlib.strategies.base import Artifact, StrategyError
from clinlib.strategies.memory_protocol import CALLS, MemoryServiceError, check_message
from clinlib.strategies.prep import get_prep
from clinlib.strategies.registry import get_strategy

MEMORY_FAULT_KINDS: tuple[str, ...] = ("400", "429", "500", "503", "hang", "disconnect",
                                       "malformed", "schema")  # fmt: skip
# (arrival index, call name, request payload) -> fault kind or None
FaultScript = Callable[[int, str, Mapping[str, Any]], "str | None"]


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

    def __init__(self, backend: str = "mem0", profile: str | None = None,
                 prep: str = "rule-based") -> None:  # fmt: skip
        if str(backend).startswith("remote-memory"):
            raise StrategyError("memory-serve: the backend must be one of the kit's own memories")
        self.strategy = get_strategy(backend, profile=profile)
        self.prep = get_prep(prep, profile=profile)
        self.backend = self.strategy.label()
        self._memories: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def reset(self, memory_id: str, subject_id: int) -> None:
        with self._lock:
            self._memories[memory_id] = {"subject_id": int(subject_id), "sessions": [],
                                         "artifact": None}  # fmt: skip

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
            raise UnknownMemory(f"unknown memory_id {memory_id!r} (reset it first; a restarted "
                                "service forgets: rebuild the remote-memory constructions)")  # fmt: skip
        if mem["subject_id"] != int(subject_id):
            raise UnknownMemory(f"memory {memory_id} belongs to patient {mem['subject_id']}")
        return mem

    def _usage(self) -> dict[str, float]:
        if getattr(self.prep, "is_llm", False):
            return {}  # built at query time; not reported
        return {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0}


def turns_of(subject_id: int, sessions: list[Mapping[str, Any]]) -> pd.DataFrame:
    """The dialogues.parquet-shaped turns of a memory's ingested sessions."""
    rows = [{"subject_id": int(subject_id), "visit_idx": int(s["visit_idx"]),
             "visit_date": s.get("visit_date"), **t}
            for s in sessions for t in s["turns"]]  # fmt: skip
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


class MemoryServer:
    """HTTP front of a memory service, with scripted faults (module docstring).

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
        self.service, self.script = service, script
        self.latency_s, self.hang_s = float(latency_s), float(hang_s)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.faults: list[str] = []
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._count = threading.Lock()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> MemoryServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

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


def _handler(server: MemoryServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            return

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            name = self.path.rstrip("/").rsplit("/", 1)[-1]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if name not in CALLS:
                return self._send(404, {"error": f"unknown call {self.path!r}; calls: {CALLS}"})
            try:
                payload = json.loads(raw)
                check_message(f"{name}_request", payload)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return self._send(400, {"error": f"request is not JSON: {exc}"})
            except MemoryServiceError as exc:
                return self._send(400, {"error": str(exc)})
            if server.latency_s:
                time.sleep(server.latency_s)
            fault = server.fault_for(name, payload)
            if fault is not None and self._fault(fault):
                return None
            try:
                reply = dispatch(server.service, name, payload)
            except UnknownMemory as exc:
                return self._send(404, {"error": str(exc)})
            except OutOfOrder as exc:
                return self._send(422, {"error": str(exc)})
            except (StrategyError, ValueError, KeyError) as exc:
                return self._send(400, {"error": f"{type(exc).__name__}: {exc}"})
            return self._send(200, reply)

        def _fault(self, kind: str) -> bool:
            """Act out a fault; True when the reply was replaced (else answer normally)."""
            if kind == "hang":
                time.sleep(server.hang_s)
                return False
            if kind == "disconnect":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return True
            if kind == "malformed":
                self._send(200, None, b'{"context": "cut in hal')
            elif kind == "schema":
                self._send(200, {"contexts": ["not the protocol"], "ok": "yes"})
            elif kind == "429":
                self._send(429, {"error": "rate limited"}, headers={"Retry-After": "0"})
            else:
                self._send(int(kind), {"error": f"injected {kind}"})
            return True

        def _send(self, status: int, obj: Any, raw: bytes | None = None,
                  headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
            body = raw if raw is not None else json.dumps(obj, ensure_ascii=False).encode()
            head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}",
                    "Content-Type: application/json", f"Content-Length: {len(body)}",
                    *(f"{k}: {v}" for k, v in (headers or {}).items()), "", ""]  # fmt: skip
            self.wfile.write("\r\n".join(head).encode("latin-1") + body)
            self.wfile.flush()

    return Handler
