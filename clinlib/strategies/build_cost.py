"""What building each memory cost (paper Appendix D): prep tokens and seconds.

A construction records its wall time (``Artifact.build_seconds``) and, when an LLM prep model
built it, what the endpoint reported for that patient's requests (``Artifact.prep_usage``:
requests, input / output / cached tokens, cost in USD). :func:`metered` gives the construction
a prep model that collects each request's usage, :func:`usage_by_subject` sums it per patient
(request ids are ``<strategy>|<subject_id>|...``), and :func:`build_cost_table` reads the
recorded values as one row per (strategy, patient)
(:func:`clinlib.analysis.appendix.cost.build_cost_table` reads them from the cache). Rule-based
prep sends nothing, so its usage is zero and only the seconds are real.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from clinlib.strategies.base import Artifact, StrategyError

USAGE_FIELDS: tuple[str, ...] = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
)
BUILD_COST_COLUMNS: tuple[str, ...] = (
    "strategy",
    "subject_id",
    "prep_model",
    "build_seconds",
    *(f"prep_{f}" for f in USAGE_FIELDS),
)


def metered(prep: Any) -> tuple[Any, list | None]:
    """``(prep, sink)``: an LLM prep model that appends each request's usage to ``sink``;
    any other prep model is returned as is with no sink."""
    if not getattr(prep, "is_llm", False) or not dataclasses.is_dataclass(prep):
        return prep, None
    if "usage" not in {f.name for f in dataclasses.fields(prep)}:
        return prep, None  # a prep model that cannot report its usage
    sink: list = []
    return dataclasses.replace(prep, usage=sink), sink


def _subject_of(request_id: str) -> int:
    parts = str(request_id).split("|")
    try:
        return int(parts[1])
    except (IndexError, ValueError):
        raise StrategyError(
            f"prep request id {request_id!r} does not name a patient (<strategy>|<subject_id>|...)"
        ) from None


def usage_by_subject(sink: Iterable[tuple[str, Any]]) -> dict[int, dict[str, float]]:
    """Sum the metered requests per patient: subject_id -> :data:`USAGE_FIELDS`.

    A request whose cost is unknown (None) makes that patient's ``cost_usd`` NaN, not low.
    """
    out: dict[int, dict[str, float]] = {}
    for request_id, res in sink:
        row = out.setdefault(_subject_of(request_id), dict.fromkeys(USAGE_FIELDS, 0.0))
        row["requests"] += 1
        for f in ("input_tokens", "output_tokens", "cached_tokens"):
            row[f] += float(getattr(res, f, 0) or 0)
        cost = getattr(res, "cost_usd", None)
        row["cost_usd"] += float("nan") if cost is None else float(cost)
    return out


def attach_usage(artifacts: Sequence[Artifact], sink: list | None) -> None:
    """Set each artifact's ``prep_usage`` from the sink (zeros for a patient with no request),
    then empty the sink for the next batch."""
    if sink is None:
        return
    usage = usage_by_subject(sink)
    for art in artifacts:
        art.prep_usage = usage.get(int(art.subject_id), dict.fromkeys(USAGE_FIELDS, 0.0))
    sink.clear()


def build_cost_rows(artifacts: Iterable[Artifact]) -> pd.DataFrame:
    """One row per artifact: :data:`BUILD_COST_COLUMNS` (usage zero when none was recorded)."""
    rows = []
    for art in artifacts:
        usage = {f: float(art.prep_usage.get(f, 0.0)) for f in USAGE_FIELDS}
        rows.append(
            {
                "strategy": art.strategy,
                "subject_id": int(art.subject_id),
                "prep_model": art.prep_model,
                "build_seconds": float(art.build_seconds),
                **{f"prep_{k}": v for k, v in usage.items()},
            }
        )
    return pd.DataFrame(rows, columns=list(BUILD_COST_COLUMNS))
