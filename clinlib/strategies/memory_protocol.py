"""The memory protocol: how the kit talks to an outside memory service
(docs/memory-protocol.md is the reader's copy of the schemas below, checked equal by a test).

Three calls, per memory (one patient's dialogue as one construction saw it):

* ``reset(memory_id, subject_id)`` — forget everything held under ``memory_id``;
* ``ingest(memory_id, subject_id, seq, session)`` — add one session (one visit's turns), in
  chronological order, ``seq`` = 1, 2, ... (a repeat of the last ``seq`` with the same
  session is a no-op, so a retried ingest never stores a session twice); the reply may report
  ``usage`` (requests, tokens, cost) that the service spent;
* ``query(memory_id, subject_id, question) -> context`` — the text the answering model sees
  (``answer`` may ride along; the kit records the context, see the README recipe).

Two transports implement :class:`MemoryService`: :class:`HttpMemoryService` (JSON over HTTP,
``POST /reset``, ``/ingest``, ``/query``; retries follow the chat client's rules,
:mod:`clinlib.llm.retry`: 408 / 409 / 425 / 429 / 5xx, timeouts, dropped connections and
unreadable JSON are retried with backoff honouring ``Retry-After``; any other status, or a
reply that breaks its schema, is refused at once with one line) and any Python object with
the three methods, registered with :func:`register_memory_service` and named ``py:NAME``.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from clinlib.llm.retry import RETRY_STATUSES, http_failure_kind, parse_retry_after
from clinlib.strategies.base import StrategyError

log = logging.getLogger("clinlib.strategies")

PROTOCOL_VERSION = "clintrace-memory/1"
_STR = {"type": "string", "minLength": 1}
_INT = {"type": "integer"}
_USAGE = {
    "type": "object",
    "properties": {
        k: {"type": "number", "minimum": 0}
        for k in ("requests", "input_tokens", "output_tokens", "cached_tokens", "cost_usd")
    },
    "additionalProperties": False,
}
TURN_SCHEMA = {
    "type": "object",
    "required": ["turn_idx", "speaker", "text"],
    "properties": {
        "turn_idx": _INT,
        "speaker": {"type": "string"},
        "text": {"type": "string"},
        "text_tagged": {"type": "string"},
        "event_ids": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": True,
}
SESSION_SCHEMA = {
    "type": "object",
    "required": ["visit_idx", "turns"],
    "properties": {
        "visit_idx": _INT,
        "visit_date": {"type": ["string", "null"]},
        "turns": {"type": "array", "minItems": 1, "items": TURN_SCHEMA},
    },
    "additionalProperties": False,
}
QUESTION_SCHEMA = {
    "type": "object",
    "required": ["qid", "question"],
    "properties": {
        "qid": {"type": "string"},
        "task": {"type": "string"},
        "question": {"type": "string"},
        "options": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}
_BASE = {"protocol": {"const": PROTOCOL_VERSION}, "memory_id": _STR, "subject_id": _INT}
SCHEMAS: dict[str, dict[str, Any]] = {
    "reset_request": {
        "type": "object",
        "required": ["protocol", "memory_id", "subject_id"],
        "properties": dict(_BASE),
        "additionalProperties": False,
    },
    "ingest_request": {
        "type": "object",
        "required": ["protocol", "memory_id", "subject_id", "seq", "session"],
        "properties": {
            **_BASE,
            "seq": {"type": "integer", "minimum": 1},
            "session": SESSION_SCHEMA,
        },
        "additionalProperties": False,
    },
    "query_request": {
        "type": "object",
        "required": ["protocol", "memory_id", "subject_id", "question"],
        "properties": {**_BASE, "question": QUESTION_SCHEMA},
        "additionalProperties": False,
    },
    "reset_response": {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"const": True}},
        "additionalProperties": True,
    },
    "ingest_response": {
        "type": "object",
        "required": ["ok", "seq"],
        "properties": {
            "ok": {"const": True},
            "seq": {"type": "integer", "minimum": 1},
            "usage": _USAGE,
        },
        "additionalProperties": True,
    },
    "query_response": {
        "type": "object",
        "required": ["context"],
        "properties": {
            "context": {"type": "string"},
            "answer": {"type": ["string", "null"]},
            "n_items": {"type": ["integer", "null"], "minimum": 0},
        },
        "additionalProperties": True,
    },
    "error_response": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
        "additionalProperties": True,
    },
}
CALLS: tuple[str, ...] = ("reset", "ingest", "query")
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class MemoryServiceError(StrategyError):
    """A memory service failed for good (retries spent, or a reply it must not send)."""


def schema_problem(value: Any, schema: Mapping[str, Any], where: str = "$") -> str | None:
    """The first way ``value`` breaks ``schema`` (the JSON Schema subset used by
    :data:`SCHEMAS`: type, const, required, properties, additionalProperties, items,
    minItems, minLength, minimum), or None when it conforms."""
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_TYPES[t](value) for t in names):
            return f"{where} must be {' or '.join(names)}, got {type(value).__name__}"
    if "const" in schema and value != schema["const"]:
        return f"{where} must be {schema['const']!r}, got {value!r}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{where} must not be empty"
    if _TYPES["number"](value) and value < schema.get("minimum", float("-inf")):
        return f"{where} must be >= {schema['minimum']}, got {value!r}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where} needs at least {schema['minItems']} item(s)"
        for i, item in enumerate(value):
            problem = schema_problem(item, schema.get("items", {}), f"{where}[{i}]")
            if problem:
                return problem
    if isinstance(value, dict):
        return _object_problem(value, schema, where)
    return None


def _object_problem(value: dict, schema: Mapping[str, Any], where: str) -> str | None:
    props = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            return f"{where} lacks required field {key!r}"
    for key, item in value.items():
        if key in props:
            problem = schema_problem(item, props[key], f"{where}.{key}")
            if problem:
                return problem
        elif schema.get("additionalProperties", True) is False:
            return f"{where} has unknown field {key!r}"
    return None


def check_message(kind: str, message: Any) -> None:
    """Raise :class:`MemoryServiceError` naming the first schema break of a ``kind`` message."""
    problem = schema_problem(message, SCHEMAS[kind])
    if problem:
        raise MemoryServiceError(f"{kind}: {problem}")


@runtime_checkable
class MemoryService(Protocol):
    """What a memory service does (the in-process transport; HTTP maps each call to a POST).

    ``ingest`` returns the service's usage for that session (may be empty); ``query`` returns
    the ``query_response`` object (``context`` required)."""

    def reset(self, memory_id: str, subject_id: int) -> None: ...

    def ingest(
        self, memory_id: str, subject_id: int, seq: int, session: Mapping[str, Any]
    ) -> Mapping[str, float]: ...

    def query(
        self, memory_id: str, subject_id: int, question: Mapping[str, Any]
    ) -> Mapping[str, Any]: ...


_SERVICES: dict[str, MemoryService] = {}


def register_memory_service(name: str, service: MemoryService) -> str:
    """Make a Python object reachable as ``remote-memory(endpoint='py:NAME')``; returns that
    endpoint. The object must have ``reset``, ``ingest`` and ``query`` (:class:`MemoryService`)."""
    if not isinstance(service, MemoryService):
        raise StrategyError(f"memory service {name!r}: needs reset, ingest and query methods")
    _SERVICES[str(name)] = service
    return f"py:{name}"


def unregister_memory_service(name: str) -> None:
    """Forget an in-process service (tests)."""
    _SERVICES.pop(str(name), None)


def resolve_service(endpoint: str, timeout_s: float = 30.0, max_retries: int = 4) -> MemoryService:
    """The service behind an endpoint: ``py:NAME`` (registered object) or ``http(s)://...``."""
    text = str(endpoint)
    if text.startswith("py:"):
        try:
            return _SERVICES[text[3:]]
        except KeyError:
            raise StrategyError(
                f"no in-process memory service {text!r} is registered (register_memory_service)"
            ) from None
    if text.startswith(("http://", "https://")):
        return HttpMemoryService(text, timeout_s=timeout_s, max_retries=max_retries)
    raise StrategyError(f"memory endpoint {text!r}: expected http(s)://host:port or py:NAME")


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HttpMemoryService:
    """The HTTP transport: one POST per call, retried like a chat request (module docstring).

    Args:
        base_url: ``http://host:port`` (a path prefix is kept: ``/prefix/reset`` ...).
        timeout_s: seconds one attempt may take.
        max_retries: retries after the first attempt.
        backoff_base_s / backoff_max_s: backoff ``base * 2**k`` capped, with full jitter.
        sleep: the wait function (tests pass a recorder).
    """

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 30.0,
        max_retries: int = 4,
        backoff_base_s: float = 0.25,
        backoff_max_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StrategyError(f"memory endpoint {base_url!r}: expected http(s)://host:port")
        if timeout_s <= 0 or max_retries < 0:
            raise StrategyError("memory endpoint: timeout_s must be > 0, max_retries >= 0")
        self.base_url, self.url = base_url.rstrip("/"), url
        self.timeout_s, self.max_retries = float(timeout_s), int(max_retries)
        self.backoff_base_s, self.backoff_max_s = float(backoff_base_s), float(backoff_max_s)
        self.sleep, self.retries = sleep, 0
        self._rng = random.Random(0)

    def reset(self, memory_id: str, subject_id: int) -> None:
        self.call("reset", {"memory_id": memory_id, "subject_id": int(subject_id)})

    def ingest(
        self, memory_id: str, subject_id: int, seq: int, session: Mapping[str, Any]
    ) -> Mapping[str, float]:
        reply = self.call(
            "ingest",
            {
                "memory_id": memory_id,
                "subject_id": int(subject_id),
                "seq": int(seq),
                "session": dict(session),
            },
        )
        if reply["seq"] != int(seq):
            raise MemoryServiceError(
                f"{self.base_url}/ingest: acknowledged seq {reply['seq']}, sent {seq}"
            )
        return dict(reply.get("usage", {}))

    def query(
        self, memory_id: str, subject_id: int, question: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        return self.call(
            "query",
            {"memory_id": memory_id, "subject_id": int(subject_id), "question": dict(question)},
        )

    def call(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``/name`` with the request (checked against its schema first), retrying
        transient failures; returns the reply checked against ``<name>_response``."""
        payload = {"protocol": PROTOCOL_VERSION, **body}
        check_message(f"{name}_request", payload)
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        for attempt in range(self.max_retries + 1):
            try:
                reply = self._post(name, data)
                break
            except _Retryable as exc:
                if attempt == self.max_retries:
                    raise MemoryServiceError(
                        f"{self.base_url}/{name} failed after {attempt + 1} attempt(s): {exc}"
                    ) from None
                cap = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
                self.retries += 1
                wait = exc.retry_after if exc.retry_after is not None else self._rng.uniform(0, cap)
                log.warning(
                    "%s/%s: %s; retry %d of %d in %.2f s",
                    self.base_url,
                    name,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    wait,
                )
                self.sleep(wait)
        problem = schema_problem(reply, SCHEMAS[f"{name}_response"])
        if problem:
            raise MemoryServiceError(
                f"{self.base_url}/{name} replied outside the protocol: {problem}"
            )
        return reply

    def _post(self, name: str, data: bytes) -> Any:
        cls = (
            http.client.HTTPSConnection
            if self.url.scheme == "https"
            else http.client.HTTPConnection
        )
        conn = cls(self.url.hostname, self.url.port, timeout=self.timeout_s)
        path = f"{self.url.path.rstrip('/')}/{name}"
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        except TimeoutError:
            raise _Retryable(f"timed out after {self.timeout_s:g} s") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retryable(f"connection: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        return self._reply(name, resp, raw)

    def _reply(self, name: str, resp: http.client.HTTPResponse, raw: bytes) -> Any:
        text = raw.decode("utf-8", errors="replace")
        if resp.status != 200:
            try:
                message = str(json.loads(text).get("error", text))
            except (json.JSONDecodeError, AttributeError):
                message = text
            line = (
                f"HTTP {resp.status} ({http_failure_kind(resp.status, message)}): {message[:200]}"
            )
            if resp.status in RETRY_STATUSES or resp.status >= 500:
                raise _Retryable(
                    line, parse_retry_after({k.lower(): v for k, v in resp.getheaders()})
                )
            raise MemoryServiceError(f"{self.base_url}/{name} refused: {line}")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Retryable(f"malformed JSON reply: {exc}") from None
