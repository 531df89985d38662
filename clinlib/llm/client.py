"""Resilient async chat client over the official ``openai`` SDK (paper §4, Appendices D-E).

The paper's evaluation sends 200,672 chat requests to four OpenRouter backbones. At that
scale rate limits, 5xx errors, timeouts, dropped connections and empty completions are
routine (Appendix E.1: ~0.7% empty responses after the retry pass). This client:

* bounds the requests in flight per backbone (``max_concurrency``) with a semaphore and an
  httpx connection pool of the same size;
* retries 408/409/425/429/5xx, timeouts, dropped connections and malformed bodies with
  exponential backoff and jitter, honouring ``Retry-After`` / ``retry-after-ms`` (and pausing
  the whole backbone after a 429 that carries one), using the SDK with ``max_retries=0`` so
  the retry policy and the accounting are ours;
* returns exactly one :class:`ChatResult` per request: a request that still fails carries
  its error (never raised, never dropped); an empty completion is recorded as such (D1);
* reads usage (input, output and ``prompt_tokens_details.cached_tokens``) from each
  response and prices it with the backbone's prices (Appendix D);
* consults the :class:`~clinlib.llm.response_cache.ResponseCache` first, so a re-run makes zero API
  calls;
* answers ``kind="offline"`` backbones in-process through their policy, with no HTTP;
* refuses credentialed data for backbones not approved for it (:func:`check_egress`);
* reads the API key from the environment only and scrubs it from every error message.

Requests and results are :mod:`clinlib.llm.chat`; which failures are retried, and after how
long, is :mod:`clinlib.llm.retry`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import random
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from clinlib.llm import served, tokens
from clinlib.llm.backbones import check_egress, get_backbone
from clinlib.llm.chat import ChatRequest, ChatResult, validate_requests
from clinlib.llm.presets import is_local
from clinlib.llm.response_cache import ResponseCache, cache_key
from clinlib.llm.retry import KEY_PATTERN, Failure, classify_failure, httpx
from clinlib.llm.types import NO_KEY_PLACEHOLDER, Backbone, OfflineReply

log = logging.getLogger("clinlib.llm")

DEFAULT_TIMEOUT_S = 60.0
LOCAL_TIMEOUT_S = 900.0


@dataclass
class ClientStats:
    """Counters for one client (HTTP attempts, cache hits, retries by kind, failures)."""

    api_calls: int = 0
    cache_hits: int = 0
    offline_calls: int = 0
    retries: dict[str, int] = field(default_factory=dict)
    failures: int = 0
    empty: int = 0


class LLMClient:
    """Async client for one backbone; use as ``async with LLMClient(...) as client``.

    Args:
        backbone: a :class:`Backbone` or its registry name.
        cache: a :class:`ResponseCache`, a path to one, or None (no caching).
        timeout_s: per-attempt timeout (connect capped at 10 s); default
            :data:`DEFAULT_TIMEOUT_S`, or :data:`LOCAL_TIMEOUT_S` for a model served on this
            machine (its latency is the machine's compute, not a stalled network: a long
            generation on busy cores must finish, not be cut off and asked again).
        max_retries: retries after the first attempt (so at most ``max_retries + 1`` calls).
        backoff_base_s / backoff_max_s: exponential backoff ``base * 2**k`` capped at max,
            with "equal jitter" (half fixed, half uniform) so retries never synchronise.
        max_retry_after_s: a Retry-After longer than this fails the request instead.
        concurrency: requests in flight; default ``backbone.max_concurrency``.
        credentialed: the prompts carry credentialed data (checked by :func:`check_egress`).
        allow_unapproved: explicit override for an unapproved backbone.
        refresh_empty: re-ask requests whose cached completion is empty (the paper's M1 pass).
        config: TOML config used to resolve a backbone name.
        seed: seed for the backoff jitter.
    """

    def __init__(
        self,
        backbone: Backbone | str,
        *,
        cache: ResponseCache | str | Path | None = None,
        timeout_s: float | None = None,
        max_retries: int = 6,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 120.0,
        concurrency: int | None = None,
        credentialed: bool = False,
        allow_unapproved: bool = False,
        refresh_empty: bool = False,
        config: str | Path | None = None,
        seed: int | None = None,
    ) -> None:
        self.backbone = get_backbone(backbone, config) if isinstance(backbone, str) else backbone
        check_egress(self.backbone, credentialed, allow_unapproved)
        if timeout_s is None:
            timeout_s = LOCAL_TIMEOUT_S if is_local(self.backbone) else DEFAULT_TIMEOUT_S
        if timeout_s <= 0 or max_retries < 0 or backoff_base_s < 0 or backoff_max_s < 0:
            raise ValueError(
                "timeout_s must be > 0 and max_retries / backoff_base_s / backoff_max_s >= 0"
            )
        self.concurrency = int(concurrency or self.backbone.max_concurrency)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._owns_cache = isinstance(cache, str | Path)
        self.cache = ResponseCache(cache) if isinstance(cache, str | Path) else cache
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.refresh_empty = refresh_empty
        self.stats = ClientStats()
        self._rng = random.Random(seed)
        self._sdk: openai.AsyncOpenAI | None = None
        self._secret: str | None = None
        self._sem: asyncio.Semaphore | None = None
        self._pause_until = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP pool (and the cache if this client opened it)."""
        if self._sdk is not None:
            await self._sdk.close()
            self._sdk = None
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    def _ensure_sdk(self) -> openai.AsyncOpenAI:
        if self._sdk is None:
            key = self.backbone.api_key()  # raises MissingAPIKeyError naming the variable
            self._secret = key
            limits = httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            )
            timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
            http_client = openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout)
            self._sdk = openai.AsyncOpenAI(
                api_key=key,
                base_url=self.backbone.base_url,
                max_retries=0,  # our loop retries, so Retry-After and accounting are ours
                timeout=timeout,
                http_client=http_client,
            )
        return self._sdk

    # -- helpers ---------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        if self._secret and self._secret != NO_KEY_PLACEHOLDER:
            text = text.replace(self._secret, "***")
        return KEY_PATTERN.sub(lambda m: m.group(1) + "***", text)

    def key_for(self, req: ChatRequest) -> str:
        """The response-cache key of ``req`` against this backbone."""
        return cache_key(
            self.backbone.base_url or f"offline:{self.backbone.name}",
            self.backbone.model,
            req.messages,
            req.params.to_dict(),
        )

    def from_cache(self, req: ChatRequest) -> ChatResult | None:
        """The cached result of ``req`` (counted as a cache hit), or None."""
        if self.cache is None or self.backbone.kind != "openai":
            return None
        hit = self.cache.get(self.key_for(req))
        if hit is None or (self.refresh_empty and not hit.response.strip()):
            return None
        self.stats.cache_hits += 1
        return ChatResult(
            request_id=req.request_id,
            backbone=self.backbone.name,
            model=self.backbone.model,
            response=hit.response,
            finish_reason=hit.finish_reason,
            empty=not hit.response.strip(),
            input_tokens=hit.input_tokens,
            output_tokens=hit.output_tokens,
            cached_tokens=hit.cached_tokens,
            cost_usd=self.backbone.cost(hit.input_tokens, hit.output_tokens, hit.cached_tokens),
            latency_s=hit.latency_s,
            from_cache=True,
            usage_estimated=hit.usage_estimated,
        )

    def _backoff(self, retry_index: int) -> float:
        cap = min(self.backoff_max_s, self.backoff_base_s * (2.0**retry_index))
        return cap / 2 + self._rng.uniform(0.0, cap / 2)

    # -- one request -----------------------------------------------------------------------
    async def complete(self, request: ChatRequest) -> ChatResult:
        """Run one request (cache first). Never raises for request failures.

        Args:
            request: the chat request.

        Returns:
            Its result; failures carry ``error`` and ``error_kind``.
        """
        validate_requests([request])
        cached = self.from_cache(request)
        if cached is not None:
            return cached
        if self.backbone.kind == "offline":
            return await self._run_offline(request)
        self._ensure_sdk()
        return await self._run_http(request)

    async def _run_offline(self, req: ChatRequest) -> ChatResult:
        bb = self.backbone
        started = time.perf_counter()
        self.stats.offline_calls += 1
        result = ChatResult(req.request_id, bb.name, bb.model)
        try:
            assert bb.policy is not None  # validated by Backbone
            out = bb.policy(req.messages, req.params)
            if inspect.isawaitable(out):
                out = await out
            reply = out if isinstance(out, OfflineReply) else OfflineReply(text=out)
            if reply.text is not None and not isinstance(reply.text, str):
                raise TypeError(f"policy returned {type(reply.text).__name__}, expected str")
            text = reply.text or ""
            n_in = reply.input_tokens
            n_out = reply.output_tokens
            result.input_tokens = int(
                n_in if n_in is not None else tokens.count_tokens(req.messages, bb.model)
            )
            result.output_tokens = int(
                n_out if n_out is not None else tokens.count_tokens(text, bb.model)
            )
            result.usage_estimated = n_in is None or n_out is None
            result.response = text
            result.finish_reason = reply.finish_reason
            result.empty = not text.strip()
            result.cost_usd = bb.cost(result.input_tokens, result.output_tokens)
            self.stats.empty += result.empty
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a buggy policy must not abort a whole batch
            result.error = f"offline policy failed: {type(exc).__name__}: {exc}"
            result.error_kind = "policy_error"
            self.stats.failures += 1
        result.latency_s = result.elapsed_s = time.perf_counter() - started
        return result

    async def _wait_for_pause(self) -> None:
        while (delay := self._pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    async def _attempt(self, req: ChatRequest, body: dict[str, Any]) -> tuple[Any, float]:
        """One HTTP call; returns the parsed completion and its latency (queueing excluded)."""
        assert self._sdk is not None and self._sem is not None
        await self._wait_for_pause()
        extra = {k: v for k, v in body.items() if k not in _SDK_KWARGS}
        known = {k: v for k, v in body.items() if k in _SDK_KWARGS}
        async with self._sem:
            self.stats.api_calls += 1
            t0 = time.perf_counter()
            resp = await self._sdk.chat.completions.create(
                model=self.backbone.model,
                messages=list(req.messages),
                extra_body=extra or None,
                **known,
            )
            return resp, time.perf_counter() - t0

    async def _run_http(self, req: ChatRequest) -> ChatResult:
        bb = self.backbone
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        body = req.params.to_dict()
        result = ChatResult(req.request_id, bb.name, bb.model)
        started = time.perf_counter()
        failure: Failure | None = None
        for attempt in range(self.max_retries + 1):
            result.attempts = attempt + 1
            try:
                resp, latency = await self._attempt(req, body)
                failure = self.accept(req, resp, latency, result)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = classify_failure(exc)
            if failure is None:
                break
            if failure.kind == "connection" and is_local(bb):
                # A local server the kit started may have died: stop the run with one line
                # (how it died, its log) instead of retrying every request at a closed port.
                line = await asyncio.to_thread(served.death_report, bb.base_url)
                if line is not None:
                    raise served.LocalServerDied(line)
            failure = Failure(
                failure.kind, self._scrub(failure.message), failure.retryable, failure.retry_after
            )
            if not failure.retryable or attempt == self.max_retries:
                break
            if failure.retry_after is not None:
                if failure.retry_after > self.max_retry_after_s:
                    failure = Failure(
                        failure.kind,
                        f"{failure.message} (Retry-After {failure.retry_after:.0f}s exceeds "
                        f"max_retry_after_s={self.max_retry_after_s:.0f})",
                        False,
                    )
                    break
                delay = failure.retry_after
                if failure.kind == "rate_limit":
                    # The provider asked us to slow down: pause every request to it.
                    self._pause_until = max(self._pause_until, time.monotonic() + delay)
            else:
                delay = self._backoff(attempt)
            self.stats.retries[failure.kind] = self.stats.retries.get(failure.kind, 0) + 1
            log.info(
                "%s request %s attempt %d/%d failed (%s: %s); retrying in %.2fs",
                bb.name,
                req.request_id,
                attempt + 1,
                self.max_retries + 1,
                failure.kind,
                failure.message,
                delay,
            )
            await asyncio.sleep(delay)
        result.elapsed_s = time.perf_counter() - started
        if failure is None:
            self._store(req, body, result)
        else:
            result.response = None
            result.error = f"{failure.kind} after {result.attempts} attempt(s): {failure.message}"
            result.error_kind = failure.kind
            self.stats.failures += 1
            log.warning("%s request %s failed: %s", bb.name, req.request_id, result.error)
        return result

    def accept(
        self,
        req: ChatRequest,
        resp: Any,
        latency: float,
        result: ChatResult,
    ) -> Failure | None:
        """Fill ``result`` from a parsed completion (live, or a batch output line's body), or
        describe why it is unusable."""
        bb = self.backbone
        choices = getattr(resp, "choices", None)
        if not choices:
            extra = getattr(resp, "model_extra", None) or {}
            detail = f": {extra['error']}" if "error" in extra else ""
            return Failure("bad_response", f"completion has no choices{detail}", True)
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(resp, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            n_in = int(usage.prompt_tokens)
            n_out = int(usage.completion_tokens or 0)
            details = getattr(usage, "prompt_tokens_details", None)
            n_cached = int(getattr(details, "cached_tokens", None) or 0)
            estimated = False
        else:  # some local servers omit usage: count it ourselves, and say so
            n_in = tokens.count_tokens(req.messages, bb.model)
            n_out = tokens.count_tokens(text, bb.model)
            n_cached = 0
            estimated = True
        n_cached = min(n_cached, n_in)
        result.response = text
        result.finish_reason = choice.finish_reason
        result.empty = not text.strip()
        result.input_tokens, result.output_tokens, result.cached_tokens = n_in, n_out, n_cached
        result.cost_usd = bb.cost(n_in, n_out, n_cached)
        result.latency_s = latency
        result.usage_estimated = estimated
        result.error = result.error_kind = None
        self.stats.empty += result.empty
        return None

    def _store(self, req: ChatRequest, body: Mapping[str, Any], result: ChatResult) -> None:
        """Write a successful result to the cache; a cache failure never loses the result."""
        self.store_result(self.key_for(req), req.messages, body, result)

    def store_result(
        self,
        key: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any],
        result: ChatResult,
    ) -> None:
        """Cache a successful result under ``key`` (also for answers obtained outside this
        client, e.g. a provider batch); a cache failure is logged, never raised."""
        if self.cache is None:
            return
        bb = self.backbone
        req_id = result.request_id
        try:
            self.cache.put(
                key,
                backbone=bb.name,
                base_url=bb.base_url or "",
                model=bb.model,
                request={"messages": list(messages), "params": dict(params)},
                response=result.response or "",
                finish_reason=result.finish_reason,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                cached_tokens=result.cached_tokens,
                latency_s=result.latency_s,
                usage_estimated=result.usage_estimated,
            )
        except (sqlite3.Error, OSError, ValueError) as exc:
            log.error("could not cache %s request %s: %s", bb.name, req_id, exc)

    # -- batches ---------------------------------------------------------------------------
    async def complete_many(
        self,
        requests: Sequence[ChatRequest],
        on_result: Callable[[ChatResult], None] | None = None,
    ) -> list[ChatResult]:
        """Run a batch; exactly one result per request, in request order.

        Cache hits return at once; the rest run with at most ``concurrency`` in flight.

        Args:
            requests: the batch (request ids must be unique).
            on_result: called with each result as it completes (e.g. a progress bar).

        Returns:
            Results aligned with ``requests``.
        """
        requests = list(requests)
        validate_requests(requests)
        results: list[ChatResult | None] = [None] * len(requests)
        todo: list[int] = []
        for i, req in enumerate(requests):
            hit = self.from_cache(req)
            if hit is None:
                todo.append(i)
                continue
            results[i] = hit
            if on_result:
                on_result(hit)
        if todo and self.backbone.kind == "openai":
            self._ensure_sdk()  # a missing key fails here, before any request is sent
        runner = self._run_offline if self.backbone.kind == "offline" else self._run_http

        # Bounded task window: the semaphore bounds HTTP calls; this bounds memory (tasks
        # alive) for very large batches while leaving room for requests sleeping in backoff.
        window = asyncio.Semaphore(max(4 * self.concurrency, 64))
        tasks: set[asyncio.Task[None]] = set()

        async def run(i: int) -> None:
            try:
                res = await runner(requests[i])
            finally:
                window.release()
            results[i] = res
            if on_result:
                on_result(res)

        crashed: list[BaseException] = []

        def finished(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                crashed.append(task.exception())  # a bug (e.g. in on_result), not a failure

        try:
            for i in todo:
                await window.acquire()
                if crashed:
                    break
                task = asyncio.ensure_future(run(i))
                tasks.add(task)
                task.add_done_callback(finished)
            while tasks:
                await asyncio.wait(set(tasks))
        finally:
            for task in tasks:
                task.cancel()
        if crashed:
            raise crashed[0]
        missing = [requests[i].request_id for i, r in enumerate(results) if r is None]
        if missing:  # cannot happen unless a runner swallowed a task; never hide it
            raise RuntimeError(f"no result for request(s) {missing[:5]}")
        return [r for r in results if r is not None]


# Body fields the SDK's create() accepts by name; anything else goes through extra_body.
_SDK_KWARGS: frozenset[str] = frozenset({"temperature", "max_tokens", "top_p", "seed", "stop"})


def run_batch(
    backbone: Backbone | str,
    requests: Sequence[ChatRequest],
    on_result: Callable[[ChatResult], None] | None = None,
    **client_kwargs: Any,
) -> list[ChatResult]:
    """Synchronous wrapper: run a batch and return its results (works inside Jupyter too).

    Args:
        backbone: backbone or its name.
        requests: the batch.
        on_result: per-result callback.
        **client_kwargs: passed to :class:`LLMClient` (cache, concurrency, credentialed, ...).

    Returns:
        One result per request, in order.
    """

    async def _go() -> list[ChatResult]:
        async with LLMClient(backbone, **client_kwargs) as client:
            return await client.complete_many(requests, on_result=on_result)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_go())
    # A notebook already runs an event loop in this thread: use a private one in a worker.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _go()).result()
