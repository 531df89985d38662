"""Chat requests, their validation and their results: exactly one :class:`ChatResult` per
:class:`ChatRequest`, success or failure (paper §4; Appendix E.1: failed and empty
completions are recorded, never dropped).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from clinlib.llm.types import GenerationParams, InvalidRequestError

MESSAGE_ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})

RESULT_COLUMNS: tuple[str, ...] = (
    "request_id",
    "backbone",
    "model",
    "response",
    "finish_reason",
    "empty",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
    "latency_s",
    "elapsed_s",
    "attempts",
    "from_cache",
    "usage_estimated",
    "error",
    "error_kind",
)


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to run.

    Attributes:
        request_id: caller's id, unique within a batch (e.g. ``qid|strategy|backbone``).
        messages: OpenAI chat messages (role + content).
        params: generation settings.
    """

    request_id: str
    messages: Sequence[Mapping[str, Any]]
    params: GenerationParams = field(default_factory=GenerationParams)


@dataclass
class ChatResult:
    """The outcome of one request (exactly one per request, success or not).

    Attributes:
        request_id / backbone / model: what was asked of whom.
        response: completion text (``""`` for an empty completion); None on error.
        finish_reason: ``stop``, ``length``, ... as reported.
        empty: the completion is empty or whitespace (the paper's D1).
        input_tokens / output_tokens / cached_tokens: usage of the successful call.
        cost_usd: usage priced at the backbone's prices (also for cache hits: what the
            response cost when it was made).
        latency_s: duration of the successful call; elapsed_s: wall time incl. retries.
        attempts: HTTP attempts made now (0 for cache hits and offline backbones).
        from_cache: served from the response cache.
        usage_estimated: usage counted offline (endpoint reported none, or offline policy).
        error / error_kind: why the request failed after all retries (None on success).
    """

    request_id: str
    backbone: str
    model: str
    response: str | None = None
    finish_reason: str | None = None
    empty: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    elapsed_s: float = 0.0
    attempts: int = 0
    from_cache: bool = False
    usage_estimated: bool = False
    error: str | None = None
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        """True when a completion (possibly empty) was obtained."""
        return self.error is None


def request_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a chat completion as sent for ``request``: the model, the messages and
    the generation parameters (``extra`` merged). The live client's SDK call serialises to
    exactly this body, and a provider batch line carries it verbatim, so the two paths hit
    the same response-cache key."""
    return {"model": model, "messages": list(request.messages), **request.params.to_dict()}


def results_frame(results: Iterable[ChatResult]) -> pd.DataFrame:
    """Results as a DataFrame with columns :data:`RESULT_COLUMNS` (one row per request)."""
    return pd.DataFrame([asdict(r) for r in results], columns=list(RESULT_COLUMNS))


def validate_requests(requests: Sequence[ChatRequest]) -> None:
    """Raise :class:`InvalidRequestError` naming the first malformed request."""
    seen: set[str] = set()
    for req in requests:
        if not isinstance(req, ChatRequest):
            raise InvalidRequestError(f"expected ChatRequest, got {type(req).__name__}")
        rid = req.request_id
        if not isinstance(rid, str) or not rid:
            raise InvalidRequestError(f"request_id must be a non-empty string, got {rid!r}")
        if rid in seen:
            raise InvalidRequestError(f"duplicate request_id {rid!r} in one batch")
        seen.add(rid)
        if isinstance(req.messages, str | bytes) or not req.messages:
            raise InvalidRequestError(f"request {rid!r}: messages must be a non-empty list")
        for i, msg in enumerate(req.messages):
            if not isinstance(msg, Mapping):
                raise InvalidRequestError(f"request {rid!r}: message {i} is not a dict")
            role = msg.get("role")
            if role not in MESSAGE_ROLES:
                raise InvalidRequestError(
                    f"request {rid!r}: message {i} has role {role!r}; "
                    f"expected one of {sorted(MESSAGE_ROLES)}"
                )
            content = msg.get("content")
            if not (content is None or isinstance(content, str | list)):
                raise InvalidRequestError(
                    f"request {rid!r}: message {i} content must be a string or a list of "
                    f"parts, got {type(content).__name__}"
                )
        try:
            json.dumps([list(req.messages), req.params.to_dict()])
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"request {rid!r} is not JSON-serialisable: {exc}") from None
