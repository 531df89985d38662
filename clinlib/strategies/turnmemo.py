"""Turn records converted once per dialogue frame while a batch of contexts is built (paper §4
"History representation strategies": every question's context is read from the dialogue as it
is at question time).

A harness run builds the contexts of every question under every strategy from the same checked
answer-time dialogue frames (one per dialogue variant and patient). Rendering one of them, or
finding a question's evidence visits in it, starts from the frame's rows as records
(:func:`clinlib.dialogue.fields.records`), a conversion that costs more than the rendering
itself. Inside :func:`frozen_turns` the records of each frame declared read-only
(:func:`freeze`: the checked answer-time frames) are converted once and reused; any other
frame, and every frame outside the block, is converted afresh on every call, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import pandas as pd

from clinlib.dialogue.fields import records

T = TypeVar("T")


class _Frozen:
    """A frozen frame (held, so its id cannot be reused meanwhile), its records once asked,
    and what was derived from them (:func:`derived`)."""

    __slots__ = ("derived", "frame", "recs")

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self.recs: list[dict[str, Any]] | None = None
        self.derived: dict[str, Any] = {}


# id(frame) -> its entry; only frames passed to freeze() are memoised.
_MEMO: ContextVar[dict[int, _Frozen] | None] = ContextVar("clinlib_turn_records", default=None)


@contextmanager
def frozen_turns() -> Iterator[None]:
    """Within the block, :func:`turn_records` converts each frame given to :func:`freeze`
    once; the memo is dropped when the block ends."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def freeze(turns: pd.DataFrame) -> pd.DataFrame:
    """Declare a dialogue frame read-only for the rest of the :func:`frozen_turns` block (its
    records are then converted once); a no-op outside one. Returns the frame."""
    memo = _MEMO.get()
    if memo is not None and id(turns) not in memo:
        memo[id(turns)] = _Frozen(turns)
    return turns


def _entry(turns: pd.DataFrame) -> _Frozen | None:
    memo = _MEMO.get()
    hit = None if memo is None else memo.get(id(turns))
    return hit if hit is not None and hit.frame is turns else None


def turn_records(turns: pd.DataFrame) -> list[dict[str, Any]]:
    """``records(turns)``, converted once for a frozen frame (:func:`freeze`). The dicts
    returned for a frozen frame are shared: callers read them and never modify them."""
    hit = _entry(turns)
    if hit is None:
        return records(turns)
    if hit.recs is None:
        hit.recs = records(turns)
    return hit.recs


def derived(turns: pd.DataFrame, name: str, build: Callable[[pd.DataFrame], T]) -> T:
    """``build(turns)``, computed once per frozen frame and ``name`` (every call for another
    frame). What it returns is shared: callers never modify it."""
    hit = _entry(turns)
    if hit is None:
        return build(turns)
    if name not in hit.derived:
        hit.derived[name] = build(turns)
    return hit.derived[name]
