"""A pool of answering slots: every slot takes the next request as soon as its last one returns.

Paper §4 ("Backbones"): the harness sends up to a backbone's ``max_concurrency``
requests at once. Sending them in batches that are each gathered whole (batch-gather) lets one
slow or hung request hold back its whole batch until its timeout, with every other slot idle
(measured under 90 s hangs: the server idle ~290 of 356 s). Here each slot is a worker that
pulls items one by one, so a hung request holds one slot and the others keep answering;
``make bench-harness`` measures both (bench/llm_harness.py, the hang scenario).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def run_pool(
    items: Iterable[T],
    work: Callable[[T], Awaitable[R]],
    slots: int,
    done: Callable[[T, R], None],
    admit: Callable[[T], bool] | None = None,
) -> int:
    """Run ``work`` over ``items`` with ``slots`` calls in flight, in item order of start.

    Args:
        items: what to work on (taken lazily, in order).
        work: the call per item (it must not raise for an expected failure).
        slots: calls in flight at once.
        done: called with each item and its result as the call returns (e.g. write a row).
        admit: called before an item is started; False stops the pool from starting more
            (calls in flight still finish), e.g. a budget.

    Returns:
        How many items were started.

    A call that raises cancels the others and the error propagates; so does a cancellation
    (Ctrl-C), after which ``done`` has been called for every call that returned before it.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    source = iter(items)
    state = {"stop": False, "started": 0}

    async def slot() -> None:
        while not state["stop"]:
            item = next(source, _END)
            if item is _END:
                return
            if admit is not None and not admit(item):  # type: ignore[arg-type]
                state["stop"] = True
                return
            state["started"] += 1
            result = await work(item)  # type: ignore[arg-type]
            done(item, result)  # type: ignore[arg-type]

    tasks = [asyncio.ensure_future(slot()) for _ in range(slots)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return state["started"]


_END = object()
