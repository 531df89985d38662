"""Meaning, not only numbers: what a compared figure is, read from the data's own labels.

A sentence comparing two figures is true only when both are the same kind of figure: the same
pooling (``macro``: the mean of per-task accuracies; ``pooled``: correct answers over all
answers, §5.1), the same population (the full cohort or a patient subset), and the same role
(one of the paper's eight strategies, or a control / a variant the kit adds, never ranked with
them). :func:`compare` refuses a comparison across any of these, and names what the two
share so the sentence can say it. :func:`clip_interval` keeps an interval inside the range of
its quantity (a difference of proportions lies in [−1, 1]); :func:`sign_word` picks "rise"
or "drop" from the sign of the change, never from the writer's expectation.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from clinlib.strategies.names import DIAGNOSTIC_STRATEGIES, PAPER_STRATEGIES

# the range of each kind of quantity an interval is stated for
RANGES: dict[str, tuple[float, float]] = {
    "proportion": (0.0, 1.0),
    "difference of proportions": (-1.0, 1.0),
    "percentage points": (-100.0, 100.0),
    "percent": (0.0, 100.0),
}
POOLINGS = ("macro", "pooled")


class Incomparable(ValueError):
    """Two figures of different pooling, population or role put in one comparison."""


def clip_interval(low: float, high: float, quantity: str) -> tuple[float, float]:
    """``(low, high)`` clipped to the range of ``quantity`` (:data:`RANGES`): a normal-theory
    interval of a difference of proportions near ±1 can spill past it; no value outside the
    range is possible, so none is stated."""
    if quantity not in RANGES:
        raise ValueError(f"quantity {quantity!r}: use one of {', '.join(RANGES)}")
    lo, hi = RANGES[quantity]
    if low > high:
        raise ValueError(f"interval ({low}, {high}): low above high")
    return min(max(low, lo), hi), max(min(high, hi), lo)


def sign_word(
    delta: float, up: str = "rise", down: str = "drop", flat: str = "no change", tol: float = 0.0
) -> str:
    """The word for a change of ``delta``: ``up`` above ``tol``, ``down`` below ``-tol``,
    else ``flat``."""
    if delta > tol:
        return up
    if delta < -tol:
        return down
    return flat


def role(strategy: str) -> str:
    """``paper strategy`` (one of the paper's eight, §4), ``control`` (event-table, oracle:
    evaluated beside them, never ranked with them) or ``variant`` (any other label: an
    ablation setting, an added memory)."""
    base = str(strategy).split("[", 1)[0]
    if base in PAPER_STRATEGIES and base == str(strategy):
        return "paper strategy"
    if base in DIAGNOSTIC_STRATEGIES:
        return "control"
    return "variant"


@dataclass(frozen=True)
class Figure:
    """A figure as a sentence states it: its value and what kind of figure it is."""

    value: float
    pooling: str  # "macro" or "pooled"
    population: str  # e.g. "full cohort", "20-patient subset"
    role: str = "paper strategy"

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling {self.pooling!r}: use one of {', '.join(POOLINGS)}")


def compare(a: Figure, b: Figure) -> str:
    """What ``a`` and ``b`` share, for the sentence comparing them ("pooled, full cohort,
    paper strategy"); :class:`Incomparable` when they differ in pooling, population or role."""
    for field in ("pooling", "population", "role"):
        x, y = getattr(a, field), getattr(b, field)
        if x != y:
            raise Incomparable(f"cannot compare a {x} figure with a {y} one ({field})")
    return f"{a.pooling}, {a.population}, {a.role}"


def populations(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.Series:
    """Per strategy, the population its answers cover, from the questions it answered:
    ``full cohort`` when its patients are every patient of ``questions``, else
    ``N-patient subset`` (an ablation variant run on a sample)."""
    patients = questions.set_index("qid")["subject_ids"].map(lambda ids: {int(i) for i in ids})
    everyone = set().union(*patients) if len(patients) else set()
    out = {}
    for strategy, qids in preds.groupby("strategy")["qid"]:
        seen = set().union(*patients.reindex(qids.unique()).dropna())
        out[strategy] = "full cohort" if seen >= everyone else f"{len(seen)}-patient subset"
    return pd.Series(out, name="population")


def label_strategies(
    table: pd.DataFrame, preds: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame:
    """``table`` (with a ``strategy`` column) with each strategy's ``role`` (:func:`role`) and
    ``population`` (:func:`populations`) beside it, so a subset-only variant or a control
    never sits unlabelled next to the paper's strategies."""
    pops = populations(preds, questions)
    return table.assign(role=table["strategy"].map(role), population=table["strategy"].map(pops))
