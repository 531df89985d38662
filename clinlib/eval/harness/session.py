"""One run's answering loop (paper §4 "Backbones"; Appendix D budgets).

:class:`Session` answers a plan of cells (:func:`clinlib.eval.harness.runner.run` builds it): offline
readers batch by batch in-process; network backbones through a pool of slots per backbone
(:mod:`clinlib.eval.harness.pool`: a hung request holds one slot, never the others), or as provider
batch jobs (:mod:`clinlib.eval.harness.batchmode`). Rows are appended every ``batch_size`` answers
as atomic part files (:mod:`clinlib.eval.harness.store`), in the order the answers come back, and
the rows still buffered are written when the run ends, fails or is interrupted. A prompt
that cannot fit the backbone's context window (:mod:`clinlib.llm.context`) is recorded as a
``context_overflow`` row without being sent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clinlib.eval.harness.batchmode import answer_provider_batches, upper_cost
from clinlib.eval.harness.cells import prediction_row, record_counts
from clinlib.eval.harness.pool import run_pool
from clinlib.eval.harness.records import Item, PlanEntry, RunOptions
from clinlib.eval.harness.store import write_part
from clinlib.llm import Backbone, ChatResult, LLMClient, ResponseCache, default_cache_path, tokens
from clinlib.llm.context import overflow_message, prompt_fits
from clinlib.llm.retry import CONTEXT_OVERFLOW_KIND

log = logging.getLogger("clinlib.eval.harness.runner")

OFFLINE_BATCH_SIZE = 1024
# The offline readers take turns over runs this long (within a batch): no longer than the
# readers' memo of parsed records (256 entries, clinlib.eval.readers.policies), so a run's
# records, parsed by the first reader, are all still memoised for the second.
OFFLINE_SHARE_RUN = 256


@dataclass
class Tally:
    """Live counters for the progress bar and the per-cell summary."""

    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    spent_usd: float = 0.0
    written: int = 0
    per_cell: dict[tuple[str, ...], dict[str, float]] = field(default_factory=dict)

    def cell(self, key: tuple[str, ...]) -> dict[str, float]:
        return self.per_cell.setdefault(
            key, {"new_predictions": 0, "api_calls": 0, "cache_hits": 0, "new_cost_usd": 0.0}
        )


def run_coro(make: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also from inside Jupyter's running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def answer_groups(plan: list[PlanEntry]) -> list[list[PlanEntry]]:
    """Cells with something to answer, in plan order; consecutive offline-reader cells of the
    same (strategy label, prep model, setting) form one group, every other cell its own."""
    groups: list[list[PlanEntry]] = []
    for entry in plan:
        if not entry.todo:
            continue
        prev = groups[-1][-1] if groups else None
        if (
            prev is not None
            and entry.backbone.kind != "openai"
            and prev.backbone.kind != "openai"
            and prev.cell.basis == entry.cell.basis
        ):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def pool_slots(client: LLMClient) -> int:
    """Slots of a backbone's pool: twice its concurrency, so requests sleeping in a retry
    backoff (which hold no connection) leave the connections busy."""
    return max(2 * client.concurrency, 2)


@dataclass
class Session:
    """One run's answering loop: clients, pools, part files, the budget and the counters."""

    name: str
    run_id: str
    bar: Any
    options: RunOptions
    credentialed: bool
    # Context window (tokens, source) per backbone name (clinlib.llm.context).
    windows: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    # Upper-bound spend of requests sent (or submitted as batch jobs) but not yet answered.
    reserved_usd: float = 0.0
    tally: Tally = field(default_factory=Tally)
    stopped: dict[tuple[str, ...], str] = field(default_factory=dict)
    seq: int = 0

    @property
    def budget_usd(self) -> float | None:
        return self.options.budget_usd

    @property
    def batch_size(self) -> int:
        return self.options.batch_size

    @property
    def mode(self) -> str:
        return self.options.mode

    @property
    def batch_options(self) -> dict[str, Any]:
        return dict(self.options.batch_options or {})

    def on_result(self, cell: tuple[str, ...], bb: Backbone) -> Callable[[ChatResult], None]:
        tally, bar = self.tally, self.bar

        def note(res: ChatResult) -> None:
            c = tally.cell(cell)
            tally.done += 1
            if res.from_cache:
                tally.cache_hits += 1
                c["cache_hits"] += 1
            elif res.error is None and bb.kind == "openai":
                tally.spent_usd += res.cost_usd
                c["new_cost_usd"] += res.cost_usd
            tally.errors += res.error is not None
            bar.set_postfix(
                done=tally.done,
                cache=tally.cache_hits,
                spent=f"${tally.spent_usd:.4f}",
                errors=tally.errors,
                refresh=False,
            )
            bar.update(1)

        return note

    def client_for(self, bb: Backbone, cache: ResponseCache) -> LLMClient:
        return LLMClient(
            bb,
            cache=cache,
            credentialed=self.credentialed,
            allow_unapproved=self.options.allow_unapproved,
            config=self.options.config,
            **self.options.client_kwargs(),
        )

    def write(self, rows: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
        """Append rows (of any cells) as one part file and count them; empties ``rows``."""
        if not rows:
            return
        write_part([row for _, row in rows], self.name, self.run_id, self.seq)
        self.seq += 1
        for cell, _ in rows:
            self.tally.cell(cell)["new_predictions"] += 1
        self.tally.written += len(rows)
        rows.clear()

    async def answer_batch(
        self,
        client: LLMClient,
        bb: Backbone,
        cell: tuple[str, ...],
        batch: list[Item],
        rows: list[tuple[tuple[str, ...], dict[str, Any]]] | None = None,
    ) -> None:
        """Answer ``batch`` and write its rows as one part (or add them to ``rows``, which
        the caller writes)."""
        before = client.stats.api_calls
        results = await client.complete_many(
            [it.request for it in batch], on_result=self.on_result(cell, bb)
        )
        done = [
            (cell, prediction_row(it, r, self.run_id)) for it, r in zip(batch, results, strict=True)
        ]
        if rows is None:
            self.write(done)
        else:
            rows.extend(done)
        self.tally.cell(cell)["api_calls"] += client.stats.api_calls - before

    async def answer_offline(self, group: list[PlanEntry], cache: ResponseCache) -> None:
        # The offline readers of one (strategy, prep, setting) take turns batch by batch
        # over the same context-ordered items, so each record is parsed once for all of
        # them (see readers.SCAN_CACHE_CHARS). Offline answers cost nothing to recompute,
        # so their part files are larger (fewer files for every later load to open).
        step = max(self.batch_size, OFFLINE_BATCH_SIZE)
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(self.client_for(bb, cache)) for bb, *_ in group
            ]
            warmed = set()  # the readers of a group ask the same prompts: warm each encoding once
            for bb, _cell, _n, todo in group:
                enc = tokens.encoding_for_model(bb.model)
                if enc not in warmed or tokens.model_tokenizer(bb.model) is not None:
                    tokens.warm_message_counts([it.request.messages for it in todo], bb.model)
                warmed.add(enc)
            longest = max(len(todo) for *_, todo in group)
            for start in range(0, longest, step):
                # The readers alternate over short runs of the batch, so the records the
                # first parsed are still in the readers' parse memo for the next (one part
                # per reader and batch is written all the same).
                rows: list[list] = [[] for _ in group]
                for sub in range(start, start + step, OFFLINE_SHARE_RUN):
                    end = min(sub + OFFLINE_SHARE_RUN, start + step)
                    for k, (client, (bb, cell, _n, todo)) in enumerate(
                        zip(clients, group, strict=True)
                    ):
                        if todo[sub:end]:
                            await self.answer_batch(client, bb, cell, todo[sub:end], rows[k])
                for part in rows:
                    self.write(part)

    def within_budget(
        self, batch: list[Item], bb: Backbone, cell: tuple[str, ...], cache: ResponseCache
    ) -> list[Item]:
        """The leading part of ``batch`` whose upper-bound cost fits the budget left; when
        that is not all of it, the cell is marked stopped with the reason."""
        if self.budget_usd is None:
            return batch
        spent = self.tally.spent_usd + self.reserved_usd
        costs = np.cumsum(upper_cost(batch, bb, cache, self.mode == "batch"))
        fits = int(np.searchsorted(costs, self.budget_usd - spent, side="right"))
        if fits < len(batch):
            self.stopped[cell] = (
                f"budget: ${spent:.4f} spent or reserved of ${self.budget_usd:.4f}; the next "
                f"{len(batch) - fits} request(s) could cost up to "
                f"${costs[-1] - (costs[fits - 1] if fits else 0):.4f}"
            )
            batch = batch[:fits]
        return batch

    def skip_overflow(self, entry: PlanEntry) -> PlanEntry:
        """Record the entry's items that cannot fit the backbone's context window as
        ``context_overflow`` rows (no request sent); the entry keeps the others."""
        bb, cell, _n, todo = entry
        window, source = self.windows.get(bb.name, (None, "unknown"))
        if window is None or not todo:
            return entry
        keep, rows, note = [], [], self.on_result(cell, bb)
        for it in todo:
            cap = int(it.request.params.max_tokens or 0)
            fits, n_prompt = prompt_fits(it.request.messages, cap, bb.model, window)
            if fits:
                keep.append(it)
                continue
            res = ChatResult(
                it.request.request_id,
                bb.name,
                bb.model,
                input_tokens=n_prompt or 0,
                error=overflow_message(n_prompt or 0, cap, window, source, bb.model),
                error_kind=CONTEXT_OVERFLOW_KIND,
            )
            note(res)
            rows.append((cell, prediction_row(it, res, self.run_id)))
        for start in range(0, len(rows), self.batch_size):
            self.write(rows[start : start + self.batch_size])
        return entry._replace(todo=keep)

    def admit(self, bb: Backbone, cache: ResponseCache, held: dict[str, float]) -> Callable:
        """The pool's admission test: the item's upper-bound cost fits the budget left after
        what was spent and what the requests in flight could still cost."""

        def ok(pair: tuple[tuple[str, ...], Item]) -> bool:
            if self.stopped:
                return False
            if self.budget_usd is None:
                return True
            cell, it = pair
            cost = upper_cost([it], bb, cache)[0]
            spent = self.tally.spent_usd + self.reserved_usd
            if spent + cost > self.budget_usd:
                self.stopped[cell] = (
                    f"budget: ${spent:.4f} spent or reserved of "
                    f"${self.budget_usd:.4f}; the next request could cost "
                    f"up to ${cost:.4f}"
                )
                return False
            self.reserved_usd += cost
            held[it.request.request_id] = cost
            return True

        return ok

    async def answer_live(
        self, bb: Backbone, entries: list[PlanEntry], cache: ResponseCache
    ) -> None:
        """Answer every pending item of ``bb``'s cells through one pool of slots; rows are
        written ``batch_size`` at a time as answers return (the rest when the pool ends)."""
        pairs = [(cell, it) for _bb, cell, _n, todo in entries for it in todo]
        notes = {cell: self.on_result(cell, bb) for _bb, cell, _n, _t in entries}
        buffer: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        held: dict[str, float] = {}
        async with self.client_for(bb, cache) as client:

            async def work(pair: tuple[tuple[str, ...], Item]) -> ChatResult:
                return await client.complete(pair[1].request)

            def done(pair: tuple[tuple[str, ...], Item], res: ChatResult) -> None:
                cell, it = pair
                self.reserved_usd -= held.pop(it.request.request_id, 0.0)
                notes[cell](res)
                self.tally.cell(cell)["api_calls"] += 0 if res.from_cache else res.attempts
                buffer.append((cell, prediction_row(it, res, self.run_id)))
                if len(buffer) >= self.batch_size:
                    self.write(buffer)

            try:
                await run_pool(pairs, work, pool_slots(client), done, self.admit(bb, cache, held))
            finally:
                self.write(buffer)  # also on Ctrl-C: every answer received is kept
                self.reserved_usd -= sum(held.values())

    async def answer(self, plan: list[PlanEntry]) -> None:
        cache = ResponseCache(default_cache_path(self.name))
        network: dict[str, list[PlanEntry]] = {}
        try:
            for group in answer_groups(plan):
                if group[0].backbone.kind != "openai":
                    await self.answer_offline(group, cache)
                    continue
                network.setdefault(group[0].backbone.name, []).extend(
                    self.skip_overflow(entry) for entry in group
                )
            if self.mode == "batch":
                await answer_provider_batches(self, list(network.values()), cache)
                return
            for entries in network.values():
                if self.stopped:
                    return
                await self.answer_live(entries[0].backbone, entries, cache)
        finally:
            cache.close()

    def execute(self, plan: list[PlanEntry], counted: dict[tuple[str, ...], list[Item]]) -> None:
        """Answer the plan, then record the prompt counts of ``counted`` cells' items."""
        try:
            run_coro(lambda: self.answer(plan))
        finally:
            self.bar.close()
        for cell_items in counted.values():
            # The contexts were built anyway: their prompt counts spare later estimates a
            # rebuild (after answering, so that recording never delays the first answers).
            record_counts(self.name, cell_items)
        self.explain_stop(plan)

    def explain_stop(self, plan: list[PlanEntry]) -> None:
        """After a stop, every cell not finished says why."""
        if not self.stopped:
            return
        reason = next(iter(self.stopped.values()))
        log.warning("run %s stopped early: %s", self.run_id, reason)
        for _bb, cell, _n, todo in plan:
            if cell not in self.stopped and self.tally.cell(cell)["new_predictions"] < len(todo):
                self.stopped[cell] = "not started: " + reason
