"""The harness's records: what a run asks (:class:`RunSpec`), how it asks it
(:class:`RunOptions`), and the cells, plan entries and prediction keys passed between its
layers (paper §4 "Backbones": one cell per strategy x backbone x setting; Appendix D budgets).

A run is ``runner.run(RunSpec(...), RunOptions(...))``; the command line builds the same two
records from its options, so a notebook and ``clintrace run`` name a run the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from clinlib.core.lock import LIBRARY_LOCK_WAIT_S
from clinlib.llm import Backbone, ChatRequest

DEFAULT_BATCH_SIZE = 32


def listed(value: Any) -> list[Any]:
    """A bare string (or a single strategy / backbone object) as a one-name list: iterating
    "full-context" would otherwise ask for strategies 'f', 'u' and so on."""
    if isinstance(value, str | Backbone) or not isinstance(value, Iterable):
        return [value]
    return list(value)


class PredictionKey(NamedTuple):
    """The key of one prediction: a re-run skips the keys already predicted."""

    qid: str
    strategy: str
    backbone: str
    prep_model: str
    setting: str


class CellKey(NamedTuple):
    """The key of one cell (the summary's row): strategy label, backbone, prep model, setting."""

    strategy: str
    backbone: str
    prep_model: str
    setting: str

    @property
    def basis(self) -> tuple[str, str, str]:
        """(strategy, prep model, setting): what the backbones of one context share."""
        return (self.strategy, self.prep_model, self.setting)


@dataclass
class Item:
    """One question to answer in one cell: its request and what the prediction row needs."""

    key: PredictionKey
    request: ChatRequest
    question: dict[str, Any]
    context_tokens: int
    checkpoint: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Cell:
    """One prepared cell: its backbone, setting value, questions and contexts. A cell whose
    every key is already predicted is ``finished``: its contexts are not built (None)."""

    backbone: Backbone
    setting: str
    questions: pd.DataFrame
    strategy: str
    prep_model: str
    contexts: pd.DataFrame | None = None

    @property
    def finished(self) -> bool:
        return self.contexts is None

    @property
    def key(self) -> CellKey:
        return CellKey(self.strategy, self.backbone.name, self.prep_model, self.setting)


class PlanEntry(NamedTuple):
    """One planned cell: its backbone, key, question count and the items still to answer."""

    backbone: Backbone
    cell: CellKey
    n: int
    todo: list[Item]


@dataclass(frozen=True, eq=False)
class RunSpec:
    """What a run asks: the cells (strategies x backbones x settings, with a prep model) over
    the profile's questions, or a subset of them.

    Attributes:
        profile: build profile (None: the current one).
        strategies: strategy names (or instances) from :mod:`clinlib.strategies`.
        backbones: backbone names (presets, config file, or offline readers) or objects.
        settings: :mod:`clinlib.tasks.settings` specs (post, pre, stream, mixed, stream+mixed).
        prep: the prep model of derived strategies (``"matched"``: each backbone its own).
        tasks: restrict to these tasks (None: the paper's set).
        limit: the first ``limit`` questions of each task (in questions.parquet order).
        questions: use these rows instead of the profile's questions.parquet.
    """

    profile: str | None = None
    strategies: Sequence[Any] = ("no-context-blind",)
    backbones: Sequence[str | Backbone] = ("reference",)
    settings: Sequence[str] = ("post",)
    prep: Any = "rule-based"
    tasks: Sequence[str] | None = None
    limit: int | None = None
    questions: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        # a bare name is one name (see listed); tuples keep the record immutable
        for name in ("strategies", "backbones", "settings"):
            object.__setattr__(self, name, tuple(listed(getattr(self, name))))
        if self.tasks is not None:
            object.__setattr__(self, "tasks", tuple(listed(self.tasks)))

    @property
    def own_questions(self) -> bool:
        """Whether the profile's own question set is asked (not ``questions`` given)."""
        return self.questions is None


@dataclass(frozen=True)
class RunOptions:
    """How a run asks: budget, answering mode, part-file size, retries, clients, progress.

    Attributes:
        budget_usd: stop before new spend (uncached API calls) could exceed this; checked
            per request against its upper-bound cost plus that of the requests in flight.
        retry_errors: re-run keys whose latest row has an error (the new row supersedes it).
        retry_empty: re-ask keys whose latest completion was empty, past the response cache
            (``LLMClient(refresh_empty=True)``, the paper's M1 pass); the new row supersedes.
        allow_unapproved: send credentialed data to backbones not approved for it.
        config: TOML config with user endpoints (and prep backbones).
        progress: show progress (a tqdm bar on a terminal, a line every few seconds in a log).
        progress_position: this run's bar row among parallel runs' (eval.harness.parallel).
        batch_size: answers per part file (a crash loses at most this many, all cached).
        client_options: extra :class:`LLMClient` arguments (timeout_s, max_retries, ...).
        mode / batch_options: ``"batch"`` = provider jobs (:mod:`clinlib.eval.harness.batchmode`).
        wait_for_lock: seconds to wait while another process writes this profile.
    """

    budget_usd: float | None = None
    retry_errors: bool = False
    retry_empty: bool = False
    allow_unapproved: bool = False
    config: str | Path | None = None
    progress: bool = True
    progress_position: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    client_options: Mapping[str, Any] | None = None
    mode: str = "live"
    batch_options: Mapping[str, Any] | None = None
    wait_for_lock: float = LIBRARY_LOCK_WAIT_S

    def client_kwargs(self) -> dict[str, Any]:
        """The :class:`LLMClient` arguments: ``retry_empty`` re-asks past the cache unless
        ``client_options`` say otherwise."""
        return ({"refresh_empty": True} if self.retry_empty else {}) | dict(
            self.client_options or {}
        )


def run_records(**kwargs: Any) -> tuple[RunSpec, RunOptions]:
    """A :class:`RunSpec` and :class:`RunOptions` from one set of keyword arguments, each
    field to its record (for callers that pass run settings through, e.g. ``ask_traps``)."""
    spec_names = {f.name for f in fields(RunSpec)}
    option_names = {f.name for f in fields(RunOptions)}
    unknown = sorted(set(kwargs) - spec_names - option_names)
    if unknown:
        raise TypeError(f"unknown run argument(s) {unknown}")
    spec = RunSpec(**{k: v for k, v in kwargs.items() if k in spec_names})
    return spec, RunOptions(**{k: v for k, v in kwargs.items() if k in option_names})


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Cell",
    "CellKey",
    "Item",
    "PlanEntry",
    "PredictionKey",
    "RunOptions",
    "RunSpec",
    "listed",
    "run_records",
]
