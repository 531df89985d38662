"""Failure handling of the chat client: which transport and HTTP failures are retried, how
long a ``Retry-After`` asks to wait, and the key pattern masked in every error message
(paper Appendix E.1: rate limits, 5xx, timeouts, dropped connections and malformed bodies
are routine at the paper's 200,672 requests).
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import openai

# The SDK's transport (the client's pool and timeouts, the failures classified below).
try:  # openai>=3 is built on httpx2; older releases on httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDK generation
    import httpx

# 408 timeout, 409 conflict/lock, 425 too early, 429 rate limit; every 5xx (incl. 529
# "overloaded") is retried too.
RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 425, 429})
# Anything that looks like a provider key is masked in stored / logged error messages.
KEY_PATTERN = re.compile(r"(sk-|sk_|gsk_|hf_|xai-)[A-Za-z0-9_\-*.]{6,}")
# How servers word "the prompt does not fit": OpenAI / vLLM ("maximum context length",
# "context_length_exceeded", "maximum model length"), llama-cpp-python ("exceed context
# window"), llama.cpp ("exceeds the available context size"), Anthropic via OpenRouter
# ("prompt is too long"). Such a 400 / 413 is not a transport fault and is never retried.
CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|window|size)|maximum (context|model) length|prompt is too long"
    r"|too many (input |prompt )?tokens|exceeds? (the )?(model'?s? )?(available )?context",
    re.IGNORECASE,
)
CONTEXT_OVERFLOW_KIND = "context_overflow"


@dataclass(frozen=True)
class Failure:
    """Why one attempt failed: its kind, a message, whether to retry and after how long."""

    kind: str
    message: str
    retryable: bool
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    value = headers.get("retry-after")
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return None


def http_failure_kind(status: int, message: str) -> str:
    """The failure kind of an HTTP error status and its message (live calls and batch lines):
    a 400 / 413 saying the prompt does not fit is ``context_overflow``, not a client error."""
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server_error"
    if status == 408:
        return "timeout"
    if status in (400, 413) and CONTEXT_OVERFLOW.search(message or ""):
        return CONTEXT_OVERFLOW_KIND
    return "client_error"


def classify_failure(exc: BaseException) -> Failure:
    """Map an SDK / transport exception to a failure kind and whether to retry."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        kind = http_failure_kind(status, f"{exc.message} {_body_text(exc)}")
        headers = exc.response.headers if exc.response is not None else None
        return Failure(
            kind,
            f"HTTP {status}: {exc.message}",
            status in RETRY_STATUSES or status >= 500,
            parse_retry_after(headers),
        )
    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", f"timed out: {exc}", True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return Failure("connection", f"{exc}{detail}", True)
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        # Truncated / non-JSON bodies: the transport garbled a reply; asking again is safe.
        return Failure("bad_response", f"malformed response: {type(exc).__name__}: {exc}", True)
    if isinstance(exc, httpx.TimeoutException):
        return Failure("timeout", f"timed out: {exc}", True)
    if isinstance(exc, httpx.TransportError):
        return Failure("connection", f"{type(exc).__name__}: {exc}", True)
    return Failure("client_error", f"{type(exc).__name__}: {exc}", False)


def _body_text(exc: openai.APIStatusError) -> str:
    """The error body's code and message (the SDK's message may omit the code)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error", body) if isinstance(body.get("error", body), dict) else body
    return f"{inner.get('code') or ''} {inner.get('message') or ''}"
