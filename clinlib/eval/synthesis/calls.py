"""The LLM calls behind corpus synthesis: rewrites of dialogues and paraphrases of questions
(paper Fig. 2 stages 3-4; Appendix D: cost), through the harness's machinery.

:class:`Calls` sends one backbone's requests and returns one result per request, with:

* the response cache of the (variant) profile, so a rerun, or a run killed half-way and
  started again, asks nothing it already has (answers are cached as they arrive);
* a budget cap: before sending, each uncached request is priced at its upper bound (input
  tokens + the output cap, at the batch price in batch mode); the leading requests that fit
  are sent, and if any did not fit :class:`BudgetStop` is raised after they were answered
  (they are cached: a rerun with a larger budget continues);
* the credentialed-data egress guard (:func:`clinlib.llm.check_egress`): a record is never
  sent to an endpoint not approved for its source;
* live or provider batch mode (:class:`clinlib.llm.batch.BatchClient`, records in the
  profile's ``batches/`` folder, so a rerun collects a running job instead of resubmitting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import build_dir
from clinlib.eval.harness.batchmode import BATCHES_DIR
from clinlib.eval.harness.session import run_coro
from clinlib.eval.harness.store import RunnerError
from clinlib.llm import (
    Backbone,
    ChatRequest,
    ChatResult,
    LLMClient,
    ResponseCache,
    check_egress,
    count_tokens,
    default_cache_path,
)
from clinlib.llm.batch import BatchClient
from clinlib.llm.context import counter_name

MODES: tuple[str, ...] = ("live", "batch")
PRICE_COLUMNS: tuple[str, ...] = (
    "backbone",
    "requests",
    "cached",
    "input_tokens",
    "output_tokens_max",
    "output_tokens_typical",
    "cost_usd_max",
    "cost_usd_typical",
    "batch_cost_usd_max",
    "batch_cost_usd_typical",
    "pending_cost_usd_max",
    "counter",
)


class BudgetStop(RunnerError):
    """The budget cap stopped a synthesis run before every request was sent."""


def price_requests(
    bb: Backbone, requests: Sequence[ChatRequest], typical: Sequence[int], cache: ResponseCache
) -> dict[str, Any]:
    """What ``requests`` cost ``bb`` (one :data:`PRICE_COLUMNS` row): input tokens counted with
    the backbone's tokenizer (``counter`` says which, and when it approximates), output at its cap (max) or ``typical`` tokens; ``cached`` and
    ``pending_cost_usd_max`` say what a run would still send."""
    n_in = [count_tokens(r.messages, bb.model) for r in requests]
    n_max = [int(r.params.max_tokens or 0) for r in requests]
    client = LLMClient(bb)
    hit = [bb.kind == "openai" and client.key_for(r) in cache for r in requests]
    pend_in = sum(i for i, h in zip(n_in, hit, strict=True) if not h)
    pend_out = sum(m for m, h in zip(n_max, hit, strict=True) if not h)
    return {
        "backbone": bb.name,
        "requests": len(requests),
        "cached": int(sum(hit)),
        "input_tokens": int(sum(n_in)),
        "output_tokens_max": int(sum(n_max)),
        "output_tokens_typical": int(sum(typical)),
        "cost_usd_max": bb.cost(sum(n_in), sum(n_max)),
        "cost_usd_typical": bb.cost(sum(n_in), sum(typical)),
        "batch_cost_usd_max": bb.batch_cost(sum(n_in), sum(n_max)),
        "batch_cost_usd_typical": bb.batch_cost(sum(n_in), sum(typical)),
        "pending_cost_usd_max": bb.cost(pend_in, pend_out),
        # what counted the tokens: the backbone's own tokenizer, or an approximation
        "counter": counter_name(bb.model),
    }


@dataclass
class Calls:
    """Sends synthesis requests for one profile (cache, budget, egress guard, mode).

    Args:
        profile: the (variant) profile whose response cache and batch records are used.
        credentialed: the records come from credentialed data (``source.json``).
        allow_unapproved: explicit override of the egress guard.
        budget_usd: cap on new spend over this object's life (None: no cap).
        mode: ``live`` or ``batch`` (provider batch jobs at the batch price).
        config: TOML config with user backbones.
        concurrency: requests in flight (default: the backbone's).
        batch_options: options of :class:`~clinlib.llm.batch.BatchClient`.
        on_result: called with every result as it arrives (progress; tests).
        cache: use the profile's response cache (False: none, e.g. in-memory notebook runs).
    """

    profile: str
    credentialed: bool = False
    allow_unapproved: bool = False
    budget_usd: float | None = None
    mode: str = "live"
    config: str | Path | None = None
    concurrency: int | None = None
    batch_options: dict[str, Any] = field(default_factory=dict)
    on_result: Callable[[ChatResult], None] | None = None
    cache: bool = True
    spent_usd: float = 0.0
    api_calls: dict[str, int] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RunnerError(f"mode must be one of {list(MODES)}, got {self.mode!r}")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise RunnerError(f"budget must be >= 0, got {self.budget_usd!r}")

    def guard(self, backbones: Sequence[Backbone]) -> None:
        """Refuse, before anything is sent, a backbone the records may not go to."""
        for bb in backbones:
            check_egress(bb, self.credentialed, self.allow_unapproved)

    def _fits(self, bb: Backbone, requests: list[ChatRequest], cache: ResponseCache) -> int:
        """How many leading requests fit the budget left (cached ones cost nothing)."""
        if self.budget_usd is None or bb.kind != "openai":
            return len(requests)
        client, price = LLMClient(bb), bb.batch_cost if self.mode == "batch" else bb.cost
        left = self.budget_usd - self.spent_usd
        for i, r in enumerate(requests):
            if client.key_for(r) in cache:
                continue
            cost = price(count_tokens(r.messages, bb.model), int(r.params.max_tokens or 0))
            if cost > left:
                return i
            left -= cost
        return len(requests)

    def send(self, bb: Backbone, requests: Sequence[ChatRequest]) -> dict[str, ChatResult]:
        """Answer ``requests`` with ``bb``; ``{request_id: result}`` (failures carry
        ``error``). Raises :class:`BudgetStop` after answering the part that fit."""
        self.guard([bb])
        requests = list(requests)
        with self._cache() as cache:
            n = self._fits(bb, requests, cache if cache is not None else {})
            results = run_coro(lambda: self._send(bb, requests[:n], cache)) if n else []
        fresh = [r for r in results if not r.from_cache]
        self.spent_usd += sum(r.cost_usd for r in fresh)
        self.api_calls[bb.name] = self.api_calls.get(bb.name, 0) + len(fresh)
        self.cache_hits[bb.name] = self.cache_hits.get(bb.name, 0) + len(results) - len(fresh)
        if n < len(requests):
            raise BudgetStop(
                f"budget: ${self.spent_usd:.4f} of ${self.budget_usd:.4f} spent; "
                f"{len(requests) - n} of {len(requests)} {bb.name} request(s) not sent (the "
                "answers so far are cached: rerun with a larger --budget to continue)"
            )
        return {r.request_id: r for r in results}

    def _cache(self) -> AbstractContextManager[ResponseCache | None]:
        if not self.cache:
            return nullcontext(None)
        path = default_cache_path(self.profile)
        path.parent.mkdir(parents=True, exist_ok=True)
        return ResponseCache(path)

    async def _send(
        self, bb: Backbone, requests: list[ChatRequest], cache: ResponseCache | None
    ) -> list[ChatResult]:
        async with LLMClient(
            bb,
            cache=cache,
            credentialed=self.credentialed,
            allow_unapproved=self.allow_unapproved,
            concurrency=self.concurrency,
        ) as client:
            if self.mode == "batch" and bb.kind == "openai":
                job = BatchClient(
                    client, build_dir(self.profile) / BATCHES_DIR, **self.batch_options
                )
                return await job.complete_many(requests, on_result=self.on_result)
            return await client.complete_many(requests, on_result=self.on_result)


def calls_frame(calls: Calls) -> pd.DataFrame:
    """Per backbone: API calls made and cache hits, and the run's spend."""
    names = sorted(set(calls.api_calls) | set(calls.cache_hits))
    return pd.DataFrame(
        {
            "backbone": names,
            "api_calls": [calls.api_calls.get(n, 0) for n in names],
            "cache_hits": [calls.cache_hits.get(n, 0) for n in names],
        }
    )
