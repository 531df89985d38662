"""Anthropic's Message Batches through the batch seam of :class:`~clinlib.llm.batch.BatchClient`
(README "Beyond one machine"; Appendix D: batches bill half the live price).

The kit keeps one batch machinery: the same local records (written durably before each step),
the same response cache and keys, the same per-line outcomes and resume. Only the provider
calls differ, and this subclass replaces them:

* submit: ``POST {base}/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``,
  each ``params`` the chat body translated (system messages to ``system``; ``stop`` to
  ``stop_sequences``; ``seed`` and fields Anthropic does not take dropped);
* poll: ``GET {base}/messages/batches/{id}`` (``processing_status`` ``in_progress`` /
  ``canceling`` / ``ended``, ``request_counts``), read as OpenAI's batch status;
* results: ``GET results_url`` (JSONL), each line turned into an OpenAI batch line, so the
  parser, the failure kinds and the cache are the shared ones: ``succeeded`` -> a chat
  completion (``input_tokens`` + cache reads + cache writes = prompt tokens, cache reads =
  cached tokens); ``errored`` -> its HTTP status by error type (``overloaded_error`` 529 ...);
  ``expired`` / ``canceled`` -> ``batch_expired`` / ``batch_cancelled``.

Headers: ``x-api-key`` (the backbone's key) and ``anthropic-version``. ``base_url`` is the
backbone's (``https://api.anthropic.com/v1``, whose OpenAI-compatible chat endpoint serves the
live calls). Unlike OpenAI's, a Message Batch carries no metadata to find it by, so a create
whose reply was lost cannot be adopted: create is retried only when it surely did not land
(429, refused connection); otherwise the run stops with one line saying so.
Tested against :class:`clinlib.llm.anthropic_fake.AnthropicBatchServer`, a local fake; never
against Anthropic itself here.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import openai

from clinlib.llm.batch import MAX_CALL_FAILURES, BatchClient, BatchJobError
from clinlib.llm.batchfiles import read_input_bodies, save_entry
from clinlib.llm.retry import classify_failure

try:  # the SDK's transport generation (clinlib.llm.retry classifies its exceptions)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDK generation
    import httpx

ANTHROPIC_VERSION = "2023-06-01"
BATCH_APIS: tuple[str, ...] = ("openai", "anthropic")
# Anthropic error type -> HTTP status (docs.anthropic.com "Errors").
ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
STOP_REASON = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
_PARAMS = ("max_tokens", "temperature", "top_p")


def anthropic_params(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body as Message Batches ``params``."""
    system = [str(m["content"]) for m in body["messages"] if m.get("role") == "system"]
    out: dict[str, Any] = {
        "model": body["model"],
        "messages": [
            {"role": m["role"], "content": m["content"]}
            for m in body["messages"]
            if m.get("role") != "system"
        ],
        "max_tokens": int(body.get("max_tokens") or 1024),
    }
    if system:
        out["system"] = "\n\n".join(system)
    out.update({k: body[k] for k in _PARAMS[1:] if body.get(k) is not None})
    if body.get("stop"):
        out["stop_sequences"] = list(body["stop"])
    return out


def openai_line(raw: str) -> str:
    """One Message Batches result line as an OpenAI batch output / error line (a line that is
    not such a result is returned as is, for the shared parser to report)."""
    try:
        line = json.loads(raw)
        cid, result = line["custom_id"], line["result"]
        kind = result["type"]
    except (ValueError, KeyError, TypeError):
        return raw
    if kind == "succeeded":
        return json.dumps(
            {
                "custom_id": cid,
                "error": None,
                "response": {"status_code": 200, "body": completion_of(result["message"])},
            }
        )
    if kind == "errored":
        inner = (result.get("error") or {}).get("error") or {}
        status = ERROR_STATUS.get(str(inner.get("type")), 500)
        return json.dumps(
            {
                "custom_id": cid,
                "error": None,
                "response": {
                    "status_code": status,
                    "body": {"error": {"message": inner.get("message"), "type": inner.get("type")}},
                },
            }
        )
    code = {"expired": "batch_expired", "canceled": "batch_cancelled"}.get(kind, f"batch_{kind}")
    return json.dumps(
        {
            "custom_id": cid,
            "response": None,
            "error": {"code": code, "message": f"request {kind} in the batch"},
        }
    )


def completion_of(message: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic message as a chat completion (text blocks joined; usage summed so that
    prompt tokens include the cache reads and writes, as OpenAI counts them)."""
    usage = message.get("usage") or {}
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + read + written
    out_tokens = int(usage.get("output_tokens") or 0)
    text = "".join(
        b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text"
    )
    return {
        "id": message.get("id", ""),
        "object": "chat.completion",
        "created": 0,
        "model": message.get("model", ""),
        "choices": [
            {
                "index": 0,
                "finish_reason": STOP_REASON.get(message.get("stop_reason"), "stop"),
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": out_tokens,
            "total_tokens": prompt + out_tokens,
            "prompt_tokens_details": {"cached_tokens": read},
        },
    }


def batch_status(obj: dict[str, Any]) -> SimpleNamespace:
    """A Message Batch read as OpenAI's batch object (what the shared loop reads)."""
    counts = obj.get("request_counts") or {}
    state = obj.get("processing_status")
    status = {"in_progress": "in_progress", "canceling": "cancelling"}.get(state, "completed")
    if state == "ended" and counts.get("expired"):
        status = "expired"  # OpenAI's meaning: the window closed, finished lines are kept
    elif state == "ended" and counts.get("canceled") and not counts.get("succeeded"):
        status = "cancelled"
    failed = sum(int(counts.get(k) or 0) for k in ("errored", "expired", "canceled"))
    return SimpleNamespace(
        id=obj["id"],
        status=status,
        errors=None,
        error_file_id=None,
        output_file_id=obj.get("results_url") if state == "ended" else None,
        request_counts=SimpleNamespace(completed=int(counts.get("succeeded") or 0), failed=failed),
    )


class AnthropicBatchClient(BatchClient):
    """:class:`BatchClient` over Message Batches (module docstring)."""

    async def _http(self, method: str, url: str, body: Any = None) -> dict[str, Any] | str:
        sdk = self.client._ensure_sdk()
        headers = {
            "x-api-key": str(sdk.api_key),
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        async with httpx.AsyncClient(timeout=self.client.timeout_s) as http:
            resp = await http.request(
                method, url, headers=headers, content=None if body is None else json.dumps(body)
            )
        if resp.status_code >= 400:
            try:
                payload = resp.json()
                message = (payload.get("error") or {}).get("message") or resp.text
            except ValueError:
                payload, message = None, resp.text
            raise openai.APIStatusError(str(message)[:300], response=resp, body=payload)
        return resp.text if url.rstrip("/").endswith("/results") else resp.json()

    def _url(self, *parts: str) -> str:
        return "/".join([str(self.backbone.base_url).rstrip("/"), "messages", "batches", *parts])

    async def _submit(self, entry: Any) -> None:
        if entry.batch_id is not None:
            self.stats.batches_resumed += 1
            return
        bodies = read_input_bodies(self.state_dir, entry)
        payload = {
            "requests": [
                {"custom_id": cid, "params": anthropic_params(bodies[cid])}
                for cid, _key in entry.lines
            ]
        }

        made = await self._create(entry, payload)
        batch = batch_status(made)
        entry.batch_id, entry.status = batch.id, batch.status
        self._latest[entry.local_id] = batch
        save_entry(self.state_dir, entry)
        self.stats.batches_created += 1
        self.stats.lines_submitted += len(entry.lines)
        self.client.stats.api_calls += len(entry.lines)
        self._say(f"{self.backbone.name}: submitted {entry.label()}")

    async def _create(self, entry: Any, payload: dict[str, Any]) -> dict[str, Any]:
        """POST the batch; retried only when it surely did not land (module docstring)."""
        for attempt in range(MAX_CALL_FAILURES):
            try:
                return await self._http("POST", self._url(), payload)
            except (openai.APIStatusError, httpx.TransportError, ValueError) as exc:
                failure = classify_failure(exc)
                unsent = (
                    isinstance(exc, httpx.ConnectError) or getattr(exc, "status_code", 0) == 429
                )
                if not unsent or attempt == MAX_CALL_FAILURES - 1:
                    where = "may have reached the provider" if failure.retryable else "was refused"
                    raise BatchJobError(
                        f"{self.backbone.name} ({self.backbone.base_url}): creating the Message "
                        f"Batch of {entry.label()} failed and {where} ({failure.kind}: "
                        f"{self.client._scrub(failure.message)}); "
                        + (
                            "check the provider's console for a batch of "
                            f"{len(entry.lines)} requests before rerunning"
                            if failure.retryable
                            else "fix the cause, then rerun the same command"
                        )
                    ) from None
                await asyncio.sleep(failure.retry_after or min(30.0, 0.05 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _retrieve(self, batch_id: str) -> Any:
        obj = await self._call(
            f"polling {batch_id}", lambda: self._http("GET", self._url(batch_id))
        )
        return batch_status(obj)

    async def _download(self, file_id: str, kind: str, batch_id: str) -> str:
        text = await self._call(
            f"downloading the results of {batch_id}", lambda: self._http("GET", file_id)
        )
        return "\n".join(openai_line(raw) for raw in str(text).splitlines() if raw.strip())


def batch_api_of(base_url: str | None, api: str | None = None) -> str:
    """``anthropic`` for Anthropic's API host (or when asked), else ``openai``."""
    if api is not None:
        if api not in BATCH_APIS:
            raise BatchJobError(f"batch api {api!r} unknown; known: {BATCH_APIS}")
        return api
    return (
        "anthropic" if urlsplit(str(base_url or "")).hostname == "api.anthropic.com" else "openai"
    )


def make_batch_client(
    client: Any, state_dir: Any, api: str | None = None, **options: Any
) -> BatchClient:
    """The batch client of a backbone: Message Batches for Anthropic (by host, or
    ``api="anthropic"``, e.g. ``run(batch_options={"api": "anthropic"})``), else OpenAI's."""
    cls = (
        AnthropicBatchClient
        if batch_api_of(client.backbone.base_url, api) == "anthropic"
        else BatchClient
    )
    return cls(client, state_dir, **options)
