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


def classify_failure(exc: BaseException) -> Failure:
    """Map an SDK / transport exception to a failure kind and whether to retry."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            kind = "rate_limit"
        elif status >= 500:
            kind = "server_error"
        elif status == 408:
            kind = "timeout"
        else:
            kind = "client_error"
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
