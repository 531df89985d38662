"""The population tasks (PopMedQA App. A answer schemas, App. C metrics) as task specs of the
``population`` family: each names its answer schema, its metric and whether lower scores are
better, so the harness, the solver check and the analysis ask the spec, not the task's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clinlib.tasks.population import metrics
from clinlib.tasks.spec import TaskSpec

MAX_TOKENS = 2048  # PopMedQA §4: temperature 0, 2,048 answer tokens (reasoning models uncapped)


@dataclass(frozen=True)
class PopulationAnswer:
    """How a population task's JSON answer is checked and scored.

    Attributes:
        schema: ``value -> bool``, the answer has the task's JSON shape (App. A).
        metric: ``(answer, gold) -> float`` (App. C, :mod:`clinlib.tasks.population.metrics`).
        lower_is_better: an error metric (ATE's absolute error): best 0, unscored NaN.
    """

    schema: Callable[[Any], bool]
    metric: Callable[[Any, Any], float]
    lower_is_better: bool = False

    @property
    def best(self) -> float:
        return 0.0 if self.lower_is_better else 1.0


def _ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str | int) for x in value)


def _groups(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(c, list) for c in value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _mapping(value: Any) -> bool:
    return isinstance(value, dict)


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _precision(answer, gold) -> float:
    return metrics.precision_at_k([str(a) for a in answer], gold)


def _accuracy(answer, gold) -> float:
    return metrics.accuracy({str(k): v for k, v in dict(answer).items()}, gold)


def _rand(answer, gold) -> float:
    return metrics.rand_index([[str(x) for x in c] for c in answer], gold)


def _error(answer, gold) -> float:
    return metrics.absolute_error(float(answer), float(gold))


def _f1(answer, gold) -> float:
    return metrics.f1([str(a) for a in answer], gold)


def _same(answer, gold) -> float:
    return float(bool(answer) == bool(gold))


def _tau(answer, gold) -> float:
    return metrics.kendall_tau_between([str(a) for a in answer], gold)


IDS = PopulationAnswer(_ids, _precision)
# (task, title, answer, offline overlap baseline in clinlib.eval.population.readers)
_TASKS = (
    ("P-CLQ", "Clique", IDS, "overlap_clique"),
    ("P-ICC", "In-context classification", PopulationAnswer(_mapping, _accuracy), "overlap_icc"),
    ("P-CLU", "Clustering", PopulationAnswer(_groups, _rand), "overlap_clusters"),
    (
        "P-IPW",
        "Average treatment effect (IPW)",
        PopulationAnswer(_number, _error, True),
        "overlap_ate",
    ),
    ("P-OUT", "Outliers", PopulationAnswer(_ids, _f1), "overlap_outliers"),
    ("P-TST", "Two-sample test", PopulationAnswer(_bool, _same), "overlap_two_sample"),
    ("P-SIM", "Similarity", IDS, "overlap_similar"),
    ("P-TOP", "Top-k", IDS, "overlap_top"),
    ("P-SRT", "Sorting", PopulationAnswer(_ids, _tau), "overlap_sort"),
    ("P-CLS", "Classification", PopulationAnswer(_mapping, _accuracy), "overlap_classes"),
)


def _spec(task: str, title: str, answer: PopulationAnswer, baseline: str) -> TaskSpec:
    return TaskSpec(
        name=task,
        title=f"{title} (PopMedQA)",
        answer_format="a JSON value of the task's schema, stated in each question",
        max_tokens=MAX_TOKENS,
        answer=answer,
        family="population",
        reader_policy=f"clinlib.eval.population.readers:{baseline}",
    )


SPECS: tuple[TaskSpec, ...] = tuple(_spec(*t) for t in _TASKS)
