"""A fault-injecting OpenAI-compatible chat server for tests and benchmarks.

The paper's runs met every transport fault a hosted API produces (Appendix E.1: empty
completions that survived the retry pass). This server reproduces them deterministically
over real loopback HTTP, so the client's retry, accounting and caching are tested against
the real ``openai`` SDK and httpx stack rather than mocks.

It runs on the kit's loopback HTTP engine (:mod:`clinlib.core.http_server`: asyncio streams
in a background thread, one write per reply). ``POST /v1/chat/completions``
answers with a deterministic ``answer(messages)`` (default: an echo of the last user
message), realistic ``usage`` (prompt tokens counted with the kit's tokenizer, a simulated
prompt-prefix cache reported as ``prompt_tokens_details.cached_tokens``) and
``finish_reason="length"`` when ``max_tokens`` cuts the answer.

Fault kinds (:data:`FAULT_KINDS`), injected by rate (drawn from ``seed``, the request
payload and how often that payload was seen, so the same batch gets the same faults whatever
the arrival order) or by a per-request script:

=============  ==============================================================
``401``        authentication error whose message echoes the bearer token (as some
               providers do, partly masked): the client must scrub it
``429``        rate limited, with ``Retry-After: <retry_after_s>``
``500``        internal server error (JSON error body)
``503``        service unavailable (JSON error body)
``hang``       no response until the client gives up (or ``hang_s``)
``empty``      200 with an empty completion (``content: ""``, 0 output tokens)
``drop``       headers and half the body, then the connection is closed
``disconnect`` the connection is closed without any response
``truncated``  200 whose JSON body is cut in half (Content-Length matches)
``overflow``   400 "maximum context length" (OpenAI's wording for a prompt that does
               not fit the model's window; never retried)
=============  ==============================================================

``release_hangs()`` ends every hang at once (the hung requests are then answered): a test
can hold a request hung until the others have been answered, with no timing involved.
``busy_s`` is the time at least one request that is not hung was being answered, so
``1 - busy_s / wall`` is the server's idle share (the hang scenario of bench/llm_harness.py).
``models`` is what ``GET /models`` lists (e.g. ``[{"id": ..., "context_length": 8192}]``).

From a shell (prints the base URL, serves until stdin closes or Ctrl-C)::

    python -m clinlib.llm.testserver                     # echo the last user message
    python -m clinlib.llm.testserver --reader reference  # answer as an offline reader
    python -m clinlib.llm.testserver --port 8799 --latency 0.05

Usage::

    with FaultServer(faults={"429": 0.1, "500": 0.05}, seed=0, latency_s=0.01) as srv:
        backbone = Backbone(name="t", model="gpt-4o-mini", base_url=srv.base_url)
        ...
        srv.n_requests, srv.max_in_flight, srv.fault_counts
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clinlib.core.http_server import LoopbackServer, Request
from clinlib.llm import tokens
from clinlib.llm.faults import (
    FaultConfigError,
    ScriptFn,
    check_fault_config,
    choose_fault,
)

AnswerFn = Callable[[Sequence[Mapping[str, Any]]], "str | None"]


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Text of the last user message ("" if none)."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            return str(content or "")
    return ""


def echo_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """Default answer: ``"echo: "`` + the last user message's text."""
    return f"echo: {last_user_text(messages)}"


@dataclass(frozen=True)
class RequestRecord:
    """What the server saw for one chat request.

    Attributes:
        index: arrival order (0-based).
        key: SHA-256 of the request payload (identifies retries of the same request).
        attempt: how many times this payload had been seen before.
        fault: injected fault kind, or None.
        model: requested model id.
        user_text: last user message text (to match records to requests in tests).
        arrived_at: ``time.monotonic()`` when the request was read.
    """

    index: int
    key: str
    attempt: int
    fault: str | None
    model: str
    user_text: str
    arrived_at: float


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class FaultServer(LoopbackServer):
    """OpenAI-compatible chat server with injectable faults, on 127.0.0.1 in a thread.

    Args:
        faults: fault kind -> probability per request (sum <= 1).
        seed: seed for fault draws and latency jitter.
        latency_s: fixed delay before every answer (and before every fault response).
        latency_jitter_s: extra uniform delay in [0, latency_jitter_s].
        script: per-request faults overriding ``faults``: a sequence indexed by arrival order
            (None = no fault; past its end the rates apply), or a function
            ``(index, payload, attempt) -> kind | None`` that decides every request.
        answer: ``answer(messages) -> str | None`` (None = empty content); default echo.
        retry_after_s: the ``Retry-After`` value sent with 429s.
        hang_s: how long a ``hang`` waits if the client never gives up.
        cache_min_tokens / cache_block: prompt-prefix cache simulation (OpenAI caches
            prefixes of >= 1024 tokens in 128-token blocks).
        host / port: where to listen (default: loopback, a free port).
    """

    def __init__(
        self,
        faults: Mapping[str, float] | None = None,
        *,
        seed: int = 0,
        latency_s: float = 0.0,
        latency_jitter_s: float = 0.0,
        script: Sequence[str | None] | ScriptFn | None = None,
        answer: AnswerFn | None = None,
        retry_after_s: float = 1.0,
        hang_s: float = 300.0,
        cache_min_tokens: int = 1024,
        cache_block: int = 128,
        models: Sequence[Mapping[str, Any]] = (),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.faults = dict(faults or {})
        super().__init__(host, port)
        check_fault_config(self.faults, script)
        if cache_block < 1 or cache_min_tokens < 0:
            raise FaultConfigError("cache_block must be >= 1 and cache_min_tokens >= 0")
        self.seed = seed
        self.latency_s = latency_s
        self.latency_jitter_s = latency_jitter_s
        self.script = script
        self.answer = answer or echo_answer
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.cache_min_tokens = cache_min_tokens
        self.cache_block = cache_block
        self.models = [dict(m) for m in models]
        self._release: asyncio.Event | None = None
        self.reset_stats()

    # -- statistics --------------------------------------------------------------------------
    def reset_stats(self) -> None:
        """Forget counts, records, seen payloads and the simulated prompt cache."""
        self.n_requests = 0
        self.n_connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.fault_counts: Counter[str] = Counter()
        self.records: list[RequestRecord] = []
        self.authorization_headers: list[str] = []
        self._attempts: Counter[str] = Counter()
        self._seen_prefixes: set[bytes] = set()
        self.busy_s = 0.0
        self._answering = 0
        self._busy_since = 0.0

    def _answering_step(self, delta: int) -> None:
        """Count a request that is not hung in (+1) or out (-1), timing the busy spans."""
        now = time.monotonic()
        if self._answering == 0 and delta > 0:
            self._busy_since = now
        self._answering += delta
        if self._answering == 0:
            self.busy_s += now - self._busy_since

    def release_hangs(self) -> None:
        """End every hang now and from now on: hung requests are answered normally."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    @property
    def base_url(self) -> str:
        """``http://<host>:<port>/v1`` (only while running)."""
        if self.port is None:
            raise RuntimeError("FaultServer is not running; use it as a context manager")
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the port, then serve in a daemon thread; returns once connections are taken."""
        self.listen()
        # Load both vocabularies now: building one takes ~1 s, which inside the server loop
        # would stall the first answer past a short client timeout.
        for name in tokens.BUNDLED_HASHES:
            tokens.get_encoding(name)
        super().start()

    def loop_started(self) -> None:
        self._release = asyncio.Event()

    # -- HTTP --------------------------------------------------------------------------------
    @staticmethod
    def _error_body(status: int, message: str, kind: str) -> bytes:
        return _canonical({"error": {"message": message, "type": kind, "code": status}})

    async def respond(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        method, path, headers, body = request.method, request.path, request.headers, request.body
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            self.send(writer, 200, _canonical({"object": "list", "data": self.models}))
            return True
        if method != "POST" or not route.endswith("/chat/completions"):
            reply = self._route(method, path, headers, body)
            if reply is None:
                reply = (404, self._error_body(404, f"no route {method} {path}", "not_found"))
            self.send(writer, *reply)
            await writer.drain()
            return True
        try:
            payload = json.loads(body)
            messages = payload["messages"]
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages must be a non-empty list")
        except (ValueError, KeyError, TypeError) as exc:
            self.send(writer, 400, self._error_body(400, f"bad request: {exc}", "invalid_request"))
            return True
        if "authorization" in headers:
            self.authorization_headers.append(headers["authorization"])
        return await self._chat(payload, headers.get("authorization", ""), reader, writer)

    def _route(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes] | None:
        """(status, body) of a route other than chat completions, or None for a 404; a
        subclass serves more of the API here (:mod:`clinlib.llm.batchserver`)."""
        return None

    def _prompt_cache(self, messages: list[Any], model: str) -> int:
        """Tokens of the longest previously seen message prefix, in cache blocks."""
        prefixes = [
            hashlib.sha256(_canonical([model, messages[:j]])).digest()
            for j in range(1, len(messages) + 1)
        ]
        hit = 0
        for j in range(len(prefixes), 0, -1):
            if prefixes[j - 1] in self._seen_prefixes:
                hit = j
                break
        self._seen_prefixes.update(prefixes)
        if hit == 0:
            return 0
        # Prefix tokens without the reply-priming tokens, which belong to the full prompt only.
        raw = tokens.count_tokens(messages[:hit], model) - tokens.TOKENS_REPLY_PRIMING
        return 0 if raw < self.cache_min_tokens else (raw // self.cache_block) * self.cache_block

    async def _chat(
        self,
        payload: Mapping[str, Any],
        authorization: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        key = hashlib.sha256(_canonical(payload)).hexdigest()
        attempt = self._attempts[key]
        self._attempts[key] += 1
        index = self.n_requests
        self.n_requests += 1
        messages = list(payload["messages"])
        model = str(payload.get("model", ""))
        fault = choose_fault(self.faults, self.script, self.seed, index, payload, key, attempt)
        self.fault_counts[fault or "ok"] += 1
        self.records.append(
            RequestRecord(
                index, key, attempt, fault, model, last_user_text(messages), time.monotonic()
            )
        )
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        answering = fault != "hang"
        if answering:
            self._answering_step(1)
        try:
            delay = self.latency_s
            if self.latency_jitter_s:
                rng = random.Random(f"{self.seed}|{key}|{attempt}|latency")
                delay += rng.uniform(0.0, self.latency_jitter_s)
            if delay > 0:
                await asyncio.sleep(delay)
            if fault == "hang":
                if not await self._hang(reader):
                    return False
                answering = True  # released: answered like any other request
                self._answering_step(1)
            if fault == "disconnect":
                return False
            reply = self._error_reply(fault, authorization, messages, model)
            if reply is not None:
                self.send(writer, reply[0], reply[1], headers=reply[2])
                await writer.drain()
                return True
            body = self._completion(payload, messages, model, empty=fault == "empty")
            if fault == "truncated":
                cut = body[: len(body) // 2]
                self.send(writer, 200, cut)
                await writer.drain()
                return True
            if fault == "drop":
                self.send(writer, 200, body[: len(body) // 2], content_length=len(body), close=True)
                await writer.drain()
                return False
            self.send(writer, 200, body)
            await writer.drain()
            return True
        finally:
            self.in_flight -= 1
            if answering:
                self._answering_step(-1)

    def _error_reply(
        self, fault: str | None, authorization: str, messages: list[Any], model: str
    ) -> tuple[int, bytes, dict[str, str]] | None:
        """(status, body, headers) of an injected HTTP error, or None for other faults."""
        if fault == "401":
            token = authorization.removeprefix("Bearer ").strip()
            message = f"Incorrect API key provided: {token}. Check your key."
            return 401, self._error_body(401, message, "invalid_api_key"), {}
        if fault == "429":
            body = self._error_body(429, "Rate limit reached; slow down", "rate_limit_exceeded")
            return 429, body, {"Retry-After": f"{self.retry_after_s:g}"}
        if fault in ("500", "503"):
            status = int(fault)
            return status, self._error_body(status, f"injected {status}", "server_error"), {}
        if fault == "overflow":
            n = tokens.count_tokens(messages, model)
            error = {
                "message": f"This model's maximum context length is {max(n // 2, 1)} "
                f"tokens. However, your messages resulted in {n} tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
            return 400, _canonical({"error": error}), {}
        return None

    async def _hang(self, reader: asyncio.StreamReader) -> bool:
        """Hang until the client gives up (EOF; False), hang_s passes (False) or
        :meth:`release_hangs` is called (True: answer after all)."""
        assert self._release is not None
        eof = asyncio.ensure_future(reader.read(65536))
        released = asyncio.ensure_future(self._release.wait())
        try:
            await asyncio.wait(
                {eof, released}, timeout=self.hang_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for fut in (eof, released):
                fut.cancel()
            # let the cancellations land: a pending read would make the connection's next
            # readuntil() fail ("another coroutine is already waiting for incoming data")
            await asyncio.gather(eof, released, return_exceptions=True)
        return released.done() and not released.cancelled()

    def _completion(
        self, payload: Mapping[str, Any], messages: list[Any], model: str, *, empty: bool
    ) -> bytes:
        text = "" if empty else self.answer(messages)
        enc = tokens.get_encoding(tokens.encoding_for_model(model))
        out_ids = enc.encode(text or "", disallowed_special=())
        finish = "stop"
        cap = payload.get("max_completion_tokens") or payload.get("max_tokens")
        if isinstance(cap, int) and len(out_ids) > cap:
            out_ids = out_ids[:cap]
            text = enc.decode(out_ids)
            finish = "length"
        prompt_tokens = tokens.count_tokens(messages, model)
        cached = min(self._prompt_cache(messages, model), prompt_tokens)
        n = self.n_requests
        return _canonical(
            {
                "id": f"chatcmpl-fault-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(out_ids),
                    "total_tokens": prompt_tokens + len(out_ids),
                    "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
                },
            }
        )


# ``--reader NAME``: the offline readers' policies (clinlib.eval.readers), loaded by name at
# start-up like any ``--answer MODULE:FUNCTION`` (the llm layer never imports eval).
READER_ANSWERS: dict[str, str] = {
    "reference": "clinlib.eval.readers.policies:reference_policy",
    "eager": "clinlib.eval.readers.policies:eager_policy",
}


def load_answer(spec: str) -> AnswerFn:
    """The answer function named ``MODULE:FUNCTION`` (or a :data:`READER_ANSWERS` name)."""
    spec = READER_ANSWERS.get(spec, spec)
    module, _, func = spec.partition(":")
    if not module or not func:
        raise FaultConfigError(
            f"answer {spec!r}: expected MODULE:FUNCTION or one of {sorted(READER_ANSWERS)}"
        )
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise FaultConfigError(f"answer {spec!r}: {exc}") from None
    return lambda messages: fn(messages)


def serve_cli(server_cls: type[FaultServer], argv: Sequence[str] | None = None, **kw: Any) -> int:
    """Parse the launcher's flags, print the base URL and serve until stdin closes or Ctrl-C
    (``python -m clinlib.llm.testserver`` / ``python -m clinlib.llm.anthropic_fake``)."""
    parser = argparse.ArgumentParser(description=(server_cls.__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--reader",
        choices=sorted(READER_ANSWERS),
        help="answer as this offline reader (a deterministic policy, not an LLM); default: echo",
    )
    group.add_argument("--answer", help="answer with MODULE:FUNCTION(messages) -> str")
    args = parser.parse_args(argv)
    try:
        answer = load_answer(args.reader or args.answer) if (args.reader or args.answer) else None
        srv = server_cls(
            latency_s=args.latency, seed=args.seed, port=args.port, answer=answer, **kw
        )
    except (FaultConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with srv:
        print(srv.base_url, flush=True)
        try:
            sys.stdin.read()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_cli(FaultServer))
