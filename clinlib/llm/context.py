"""A backbone's context window and whether a prompt fits it (paper §4 "Backbones"; Appendix
E.3 output caps).

A prompt whose tokens plus the request's output cap exceed the window cannot be answered: the
server refuses it (an HTTP 400 that costs a round trip and says so only in prose). The
harness checks first and records such a question as ``context_overflow`` without sending it.

The window comes from, in order: the backbone's ``context_window`` (the preset's, or
``context_window`` in the user's TOML), else the server's own report in ``GET /models``
(OpenRouter's ``context_length``, vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx`` /
``n_ctx_train``), else it is unknown and nothing is skipped. Prompt tokens are counted with
the backbone's own tokenizer where the kit has one (the local model's GGUF vocabulary,
:mod:`clinlib.llm.local_tokens`; OpenAI's encodings); other models are approximated with
cl100k, so a prompt is skipped on an approximate count only when it exceeds the window by
more than :data:`APPROX_MARGIN` (one nearer the limit is sent, and a refusal is classified as
``context_overflow`` all the same).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from clinlib.llm import tokens
from clinlib.llm.retry import httpx
from clinlib.llm.types import Backbone, BackboneError

log = logging.getLogger("clinlib.llm")

# Fields a /models entry may state its window in (top level or under "meta").
WINDOW_FIELDS: tuple[str, ...] = (
    "context_length",
    "max_model_len",
    "context_window",
    "max_context_length",
    "n_ctx",
    "n_ctx_train",
)
APPROX_MARGIN = 0.10
# Bytes allowed per message for the chat template's role markers and special tokens in the
# cheap bound of prompt_fits (a token covers at least one byte of text).
TEMPLATE_BYTES_PER_MESSAGE = 64
PROBE_TIMEOUT_S = 5.0


def reported_window(payload: Any, model: str) -> int | None:
    """The window a ``GET /models`` body states for ``model`` (or for its only entry)."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list) or not data:
        return None
    mine = [e for e in data if isinstance(e, Mapping) and e.get("id") == model]
    entries = mine or ([data[0]] if len(data) == 1 and isinstance(data[0], Mapping) else [])
    for entry in entries:
        for where in (entry, entry.get("meta"), entry.get("top_provider")):
            if not isinstance(where, Mapping):
                continue
            for name in WINDOW_FIELDS:
                value = where.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None


def server_context_window(backbone: Backbone, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """The window the backbone's server reports (None: no report, or no answer)."""
    if backbone.kind != "openai" or not backbone.base_url:
        return None
    try:
        key = backbone.api_key()
    except BackboneError:
        return None
    url = backbone.base_url.rstrip("/") + "/models"
    try:
        resp = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)
        resp.raise_for_status()
        return reported_window(resp.json(), backbone.model)
    except (httpx.HTTPError, ValueError) as exc:
        log.info("%s: no context window from %s (%s)", backbone.name, url, type(exc).__name__)
        return None


def context_window(backbone: Backbone, probe: bool = True) -> tuple[int | None, str]:
    """(window, where it came from): the backbone's field, else the server's report.

    Args:
        backbone: the backbone.
        probe: ask the server (``GET /models``) when the backbone states no window.

    Returns:
        The window in tokens (None: unknown) and its source ("preset", the config path,
        "server" or "unknown").
    """
    if backbone.context_window is not None:
        return backbone.context_window, backbone.source
    if probe:
        window = server_context_window(backbone)
        if window is not None:
            return window, "server"
    return None, "unknown"


def counter_name(model: str) -> str:
    """Which counter counts ``model``'s tokens: its own tokenizer's name, an exact OpenAI
    encoding, or ``cl100k_base (approximation)``."""
    own = tokens.model_tokenizer(model)
    if own is not None:
        return own.name
    enc = tokens.encoding_for_model(model)
    return enc if tokens.is_exact_tokenizer(model) else f"{enc} (approximation)"


def prompt_fits(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, model: str, window: int | None
) -> tuple[bool, int | None]:
    """Whether a prompt plus its output cap fits ``window``.

    Returns:
        (fits, prompt tokens); the count is None when a cheap bound (one token per byte of
        text, plus the template's markers) already shows it fits, so short prompts are never
        tokenized here.
    """
    if window is None:
        return True, None
    n_bytes = sum(
        len(str(m.get("content") or "").encode("utf-8")) + TEMPLATE_BYTES_PER_MESSAGE
        for m in messages
    )
    if n_bytes + max_tokens <= window:
        return True, None
    n = tokens.count_tokens(messages, model)
    return count_fits(n, max_tokens, model, window), n


def count_fits(n_prompt: int, max_tokens: int, model: str, window: int | None) -> bool:
    """Whether ``n_prompt`` tokens (counted for ``model``) plus the cap fit ``window``; an
    approximate count must exceed it by more than :data:`APPROX_MARGIN` to count as not."""
    if window is None:
        return True
    limit = window if tokens.is_exact_tokenizer(model) else window * (1 + APPROX_MARGIN)
    return n_prompt + max_tokens <= limit


def overflow_message(n_prompt: int, max_tokens: int, window: int, source: str, model: str) -> str:
    """The error recorded for a prompt that was not sent because it does not fit."""
    return (
        f"context_overflow: not sent: prompt {n_prompt:,} tokens ({counter_name(model)}) "
        f"+ output cap {max_tokens:,} > context window {window:,} ({source})"
    )
