"""The fault model of the test server: the fault kinds a hosted chat API produces, how rates
and scripts are validated, and which fault a request gets (paper Appendix E.1: transport
faults and empty completions at the paper's scale; the kinds are described in
:mod:`clinlib.llm.testserver`).

A fault is drawn from ``seed``, the request payload's hash and how often that payload was
seen, so the same batch gets the same faults whatever the arrival order; a script (a sequence
by arrival order, or a function) overrides the rates.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

FAULT_KINDS: tuple[str, ...] = (
    "401",
    "429",
    "500",
    "503",
    "hang",
    "empty",
    "drop",
    "disconnect",
    "truncated",
    "overflow",
)
# (index of the request in arrival order, parsed JSON payload, times this payload was seen
# before) -> fault kind or None.
ScriptFn = Callable[[int, Mapping[str, Any], int], "str | None"]


class FaultConfigError(ValueError):
    """Unknown fault kind, or rates that do not form a probability distribution."""


def check_fault_config(
    faults: Mapping[str, float], script: Sequence[str | None] | ScriptFn | None
) -> None:
    """Raise :class:`FaultConfigError` for an unknown kind or rates that are not a distribution."""
    for kind, rate in faults.items():
        if kind not in FAULT_KINDS:
            raise FaultConfigError(f"unknown fault kind {kind!r}; known: {FAULT_KINDS}")
        if not 0.0 <= rate <= 1.0:
            raise FaultConfigError(f"fault rate for {kind!r} must be in [0, 1], got {rate}")
    if sum(faults.values()) > 1.0 + 1e-9:
        raise FaultConfigError(f"fault rates sum to {sum(faults.values())} > 1")
    if script is not None and not callable(script):
        bad = [k for k in script if k is not None and k not in FAULT_KINDS]
        if bad:
            raise FaultConfigError(f"unknown fault kind(s) in script: {bad}")


def choose_fault(
    faults: Mapping[str, float],
    script: Sequence[str | None] | ScriptFn | None,
    seed: int,
    index: int,
    payload: Mapping[str, Any],
    key: str,
    attempt: int,
) -> str | None:
    """The fault kind of one request (None: answer normally).

    Args:
        faults: fault kind -> probability per request.
        script: per-request faults overriding ``faults`` (see :class:`FaultServer`).
        seed: the server's seed.
        index: the request's arrival order.
        payload: the parsed JSON payload.
        key: SHA-256 of the payload.
        attempt: how many times this payload had been seen before.
    """
    if script is not None:
        if callable(script):
            kind = script(index, payload, attempt)
            if kind is not None and kind not in FAULT_KINDS:
                raise FaultConfigError(f"script returned unknown fault kind {kind!r}")
            return kind
        if index < len(script):
            return script[index]
    if not faults:
        return None
    draw = random.Random(f"{seed}|{key}|{attempt}|fault").random()
    cumulative = 0.0
    for kind in FAULT_KINDS:
        cumulative += faults.get(kind, 0.0)
        if draw < cumulative:
            return kind
    return None
