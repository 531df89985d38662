"""The harness's batch mode: a run's uncached requests as provider batch jobs (paper §4: the
200,672 calls; Appendix D: priced at the backbone's batch prices, about half the live ones).

:func:`answer_provider_batch` sends every pending item of one backbone's cells through one
:class:`~clinlib.llm.batch.BatchClient` job (split only by the provider's limits), then writes
the cells' part files exactly as the live loop does: same rows, same response cache. The
job records live in ``data/build/<profile>/batches/`` (:data:`BATCHES_DIR`), so a rerun
collects a running job by its id and submits nothing twice. Requests a job did not answer
(per-line errors, expired / failed jobs, malformed or missing lines) become rows with
``error`` set; ``run(retry_errors=True)`` sends them again. Options of
:class:`~clinlib.llm.batch.BatchClient` (``poll_interval_s``, ``max_wait_s``,
``max_requests``, ``max_bytes``) and ``api`` (``openai`` / ``anthropic``: Message Batches,
:mod:`clinlib.llm.anthropic_batch`; default by the endpoint's host) come through
``run(batch_options=...)``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from clinlib.core.config import build_dir
from clinlib.eval.harness.cells import prediction_row
from clinlib.eval.harness.records import Item, PlanEntry
from clinlib.eval.harness.store import write_part
from clinlib.llm import Backbone, ResponseCache, cache_key, count_tokens
from clinlib.llm.anthropic_batch import make_batch_client
from clinlib.llm.batch import BatchPending

# The runner's session (clinlib.eval.harness.runner imports this module: importing it back would be a
# cycle, so it is typed loosely here).
Session = Any

log = logging.getLogger("clinlib.eval.harness.runner")

BATCHES_DIR = "batches"


def upper_cost(
    items: list[Item], bb: Backbone, cache: ResponseCache, batch_price: bool = False
) -> list[float]:
    """Upper-bound new spend of each item: 0 if cached or offline, else input + output cap
    (at the batch prices in batch mode)."""
    if bb.kind != "openai":
        return [0.0] * len(items)
    price = bb.batch_cost if batch_price else bb.cost
    out = []
    for it in items:
        key = cache_key(
            bb.base_url or "", bb.model, it.request.messages, it.request.params.to_dict()
        )
        if key in cache:
            out.append(0.0)
        else:
            n_in = count_tokens(it.request.messages, bb.model)
            out.append(price(n_in, int(it.request.params.max_tokens or 0)))
    return out


def _within_budget(
    session: Session, bb: Backbone, entries: list[PlanEntry], cache: ResponseCache
) -> list[tuple[tuple[str, ...], list[Item]]]:
    """Each cell's items that fit the budget left (reserved as they are kept); after a cell
    is cut, the later cells keep nothing (they are reported as not started)."""
    cells = []
    for _bb, cell, _n, todo in entries:
        kept = [] if session.stopped else session.within_budget(todo, bb, cell, cache)
        session.reserved_usd += sum(upper_cost(kept, bb, cache, batch_price=True))
        cells.append((cell, kept))
    return cells


async def answer_provider_batch(
    session: Session, bb: Backbone, entries: list[PlanEntry], cache: ResponseCache
) -> None:
    """Answer every pending item of ``bb``'s cells through provider batch jobs, then append
    the cells' part files (``session.batch_size`` rows each)."""
    cells = _within_budget(session, bb, entries, cache)
    items = [(cell, it) for cell, kept in cells for it in kept]
    if not items:
        return
    notes = {cell: session.on_result(cell, bb) for cell, _ in cells}
    by_id = {it.request.request_id: cell for cell, it in items}
    async with session.client_for(bb, cache) as client:
        job = make_batch_client(
            client,
            build_dir(session.name) / BATCHES_DIR,
            on_status=status_writer(session.bar),
            **session.batch_options,
        )
        results = await job.complete_many(
            [it.request for _, it in items], on_result=lambda r: notes[by_id[r.request_id]](r)
        )
    session.reserved_usd = 0.0
    for cell, kept in cells:
        mine = [r for (c, _), r in zip(items, results, strict=True) if c == cell]
        for start in range(0, len(kept), session.batch_size):
            chunk = kept[start : start + session.batch_size]
            rows = [
                prediction_row(it, r, session.run_id)
                for it, r in zip(chunk, mine[start : start + len(chunk)], strict=True)
            ]
            write_part(rows, session.name, session.run_id, session.seq)
            session.seq += 1
        tally = session.tally.cell(cell)
        tally["new_predictions"] += len(kept)
        tally["api_calls"] += sum(not r.from_cache for r in mine)


async def answer_provider_batches(
    session: Session, groups: list[list[PlanEntry]], cache: ResponseCache
) -> None:
    """Each backbone's cells (one group per backbone) as concurrent jobs: every backbone's
    batches are submitted before any is waited for, so they run side by side at the
    providers. Budget reservations are taken in plan order (each job reserves before its
    first await); a pending job does not stop the others from being submitted."""
    outcomes = await asyncio.gather(
        *(answer_provider_batch(session, group[0].backbone, group, cache) for group in groups),
        return_exceptions=True,
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    pending = [o for o in failures if isinstance(o, BatchPending)]
    if len(pending) < len(failures):
        raise next(o for o in failures if not isinstance(o, BatchPending))
    if pending:
        raise pending[0] if len(pending) == 1 else BatchPending("; ".join(map(str, pending)))


def status_writer(bar: Any) -> Any:
    """Where a batch job's progress lines go: above a tqdm bar, into a line-progress stream,
    or (progress off) the log."""
    write = getattr(bar, "write", None)
    stream = getattr(bar, "stream", None)

    def say(message: str) -> None:
        if callable(write):
            write(message, file=stream or sys.stderr)
        elif stream is not None:
            print(message, file=stream, flush=True)
        else:
            log.info("%s", message)

    return say
