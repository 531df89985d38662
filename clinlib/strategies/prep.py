"""Prep models: who builds the derived representations (paper §4 "Memory prep model";
Appendix G.5 "Backbone-matched memory preparation").

The paper extracts Mem0 facts, A-Mem notes and the llm-summary once per patient with a FIXED
prep model (DeepSeek-V3) across the four answering backbones, and in G.5 rebuilds them with
each answering backbone ("matched"). Here a prep model is either

* ``rule-based`` — the offline, deterministic constructor of :mod:`clinlib.strategies.facts`
  (regexes over the verbatim structured fields the dialogue templates keep), or
* any backbone of :mod:`clinlib.llm` (OpenRouter, a local vLLM, an offline policy), called
  through the kit's client and response cache, so a re-run makes zero API calls.

Every artifact records ``prep_model`` (``rule-based`` or the backbone name), so no table can
mistake a rule-based artifact for an LLM-prepared one. :func:`resolve_prep` implements the
fixed / matched choice.

Token counts use :func:`clinlib.llm.tokens.count_tokens` (exact cl100k/o200k offline).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinlib.data.build import read_source_info
from clinlib.llm import (
    ChatRequest,
    GenerationParams,
    ResponseCache,
    UnknownBackboneError,
    default_cache_path,
    get_backbone,
    run_batch,
)
from clinlib.llm.tokens import count_texts, count_tokens
from clinlib.llm.types import OFFLINE_READER_MODEL_PREFIX

RULE_BASED = "rule-based"
RULE_BASED_VERSION = "rule-based/v1"
MATCHED = "matched"
# The paper's fixed prep model (§4): DeepSeek-V3.
PAPER_PREP_BACKBONE = "deepseek-chat-v3.1"
# Tokens are counted with the paper's prep model's encoding unless told otherwise.
DEFAULT_TOKEN_MODEL = PAPER_PREP_BACKBONE

TOKEN_COUNTER = "clinlib.llm.tokens.count_tokens"


class PrepError(ValueError):
    """A prep model is unknown, unusable, or failed to answer."""


def count_text_tokens(text: str, model: str = DEFAULT_TOKEN_MODEL) -> int:
    """Tokens of ``text`` for ``model`` (exact offline tokenizer, :mod:`clinlib.llm.tokens`)."""
    return int(count_tokens(text, model)) if text else 0


def count_text_tokens_many(texts: Sequence[str], model: str = DEFAULT_TOKEN_MODEL) -> list[int]:
    """:func:`count_text_tokens` of many texts (unseen ones encoded on parallel threads)."""
    return [int(n) for n in count_texts([t or "" for t in texts], model)]


@dataclass(frozen=True)
class PrepModel:
    """Base of the prep models.

    Attributes:
        name: what artifacts record as ``prep_model``.
        model_id: versioned id that enters the construction-cache key.
        is_llm: True for backbone-prepared artifacts.
    """

    name: str
    model_id: str
    is_llm: bool = False

    @property
    def token_model(self) -> str:
        """Model whose tokenizer measures budgets (the backbone, else the paper's prep)."""
        return DEFAULT_TOKEN_MODEL


@dataclass(frozen=True)
class RuleBasedPrep(PrepModel):
    """The offline deterministic constructor (no model at all)."""

    name: str = RULE_BASED
    model_id: str = RULE_BASED_VERSION
    is_llm: bool = False


@dataclass(frozen=True)
class PrepRequest:
    """One chat completion a constructor needs.

    Attributes:
        request_id: unique within a batch (e.g. ``mem0|123|v4|extract``).
        messages: chat messages.
        max_tokens: output cap.
    """

    request_id: str
    messages: Sequence[Mapping[str, str]]
    max_tokens: int = 1024


@dataclass(frozen=True)
class LLMPrep(PrepModel):
    """A backbone used as the prep model, through the kit's cached LLM client.

    Attributes:
        backbone: the :class:`clinlib.llm.Backbone`.
        cache: the response cache (a ResponseCache) or None.
        credentialed: the dialogues are credentialed data (checked against the backbone).
        temperature: sampling temperature (0: the paper's construction is deterministic).
        concurrency: requests in flight (default: the backbone's).
        usage: a list each completed request's (request_id, ChatResult) is appended to, or
            None (:mod:`clinlib.strategies.build_cost` meters a construction with it).
    """

    backbone: Any = None
    cache: Any = field(default=None, compare=False, repr=False)
    credentialed: bool = False
    temperature: float = 0.0
    concurrency: int | None = None
    is_llm: bool = True
    usage: list | None = field(default=None, compare=False, repr=False)

    @property
    def token_model(self) -> str:
        return str(self.backbone.model)

    def complete(self, requests: Sequence[PrepRequest]) -> list[str]:
        """Run a batch of requests; one completion text per request, in order.

        Raises:
            PrepError: a request still failed after the client's retries (naming it).
        """
        if not requests:
            return []
        chat = [
            ChatRequest(
                r.request_id,
                [dict(m) for m in r.messages],
                GenerationParams(temperature=self.temperature, max_tokens=int(r.max_tokens)),
            )
            for r in requests
        ]
        kwargs: dict[str, Any] = {"cache": self.cache, "credentialed": self.credentialed}
        if self.concurrency:
            kwargs["concurrency"] = int(self.concurrency)
        results = run_batch(self.backbone, chat, **kwargs)
        out = []
        for req, res in zip(requests, results, strict=True):
            if res.error is not None:
                raise PrepError(
                    f"prep model {self.name!r}: request {req.request_id} failed "
                    f"({res.error_kind}): {res.error}"
                )
            out.append(res.response or "")
            if self.usage is not None:
                self.usage.append((req.request_id, res))
        return out


def get_prep(
    prep: str | PrepModel | None = RULE_BASED,
    *,
    profile: str | None = None,
    cache: Any = "default",
    credentialed: bool | None = None,
    config: str | Path | None = None,
) -> PrepModel:
    """A prep model by name.

    Args:
        prep: ``"rule-based"`` (default; also None), a backbone name, or a PrepModel.
        profile: build profile (locates the response cache and the data's credential flag).
        cache: a ResponseCache, a path, None (no caching) or ``"default"`` (the profile's
            ``llm_cache.sqlite``).
        credentialed: whether the dialogues are credentialed data; default: read from the
            profile's ``source.json`` (False when absent).
        config: TOML config naming user backbones.

    Returns:
        The prep model.
    """
    if isinstance(prep, PrepModel):
        return prep
    if prep is None or prep == RULE_BASED:
        return RuleBasedPrep()
    if prep == MATCHED:
        raise PrepError("prep model 'matched' needs the answering backbone: use resolve_prep()")
    try:
        backbone = get_backbone(str(prep), config)
    except UnknownBackboneError as exc:
        raise PrepError(f"unknown prep model {prep!r}: {exc}") from None
    if str(backbone.model).startswith(OFFLINE_READER_MODEL_PREFIX):
        # An offline reader (reference / eager / replay) is a deterministic answering policy
        # over prompt text; it cannot write summaries, facts or notes, so it cannot stand in
        # for an LLM prep model. (Other in-process policies, e.g. a scripted prep in tests,
        # can.)
        raise PrepError(
            f"prep model {prep!r} is an offline reader (kind {backbone.kind!r}), not a "
            f"generative model; use {RULE_BASED!r} offline or an OpenAI-compatible backbone"
        )
    if isinstance(cache, str) and cache == "default":
        cache = ResponseCache(default_cache_path(profile))
    elif isinstance(cache, str | Path):
        cache = ResponseCache(cache)
    if credentialed is None:
        credentialed = _credentialed(profile)
    return LLMPrep(
        name=backbone.name,
        model_id=f"{backbone.name}:{backbone.model}",
        backbone=backbone,
        cache=cache,
        credentialed=bool(credentialed),
    )


def resolve_prep(prep: str | None, answer_backbone: str | None = None) -> str:
    """The prep model NAME for a cell: the fixed one, or the answering backbone if ``matched``.

    Args:
        prep: ``"rule-based"``, a backbone name, or ``"matched"``.
        answer_backbone: the answering backbone (required for ``matched``).
    """
    if prep == MATCHED:
        if not answer_backbone:
            raise PrepError("prep model 'matched' needs the answering backbone's name")
        return answer_backbone
    return prep or RULE_BASED


def _credentialed(profile: str | None) -> bool:
    try:
        return bool(read_source_info(profile).get("credentialed", False))
    except (FileNotFoundError, ValueError, json.JSONDecodeError):
        return False


_FENCE_RE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_reply(text: str | None, what: str) -> Any:
    """Parse a model's JSON reply (tolerating code fences and surrounding prose).

    Args:
        text: the completion.
        what: what was asked for (for the error message).

    Returns:
        The parsed JSON value.

    Raises:
        PrepError: no JSON object or array could be parsed.
    """
    if not text or not text.strip():
        raise PrepError(f"{what}: empty reply")
    body = _FENCE_RE.sub("", text.strip())
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    # Prose around the JSON: take the outermost {...} (or [...]) span.
    for open_c, close_c in (("{", "}"), ("[", "]")):
        start, end = body.find(open_c), body.rfind(close_c)
        if 0 <= start < end:
            try:
                return json.loads(body[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise PrepError(f"{what}: reply is not JSON: {text[:120]!r}")
