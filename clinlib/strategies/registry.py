"""The strategy registry: ONE dict keyed by name (paper §4 "History representation strategies";
docs/design.md principle 4: an ablation is a one-string change), and the paper's eight in its order.

A leaf below :mod:`clinlib.strategies.construction` (which builds what this names), so that the
package's ``__init__`` only re-exports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clinlib.core.config import build_dir
from clinlib.core.labels import CALL_RE, split_call
from clinlib.strategies.amem import AMemMemory
from clinlib.strategies.base import Strategy, StrategyError
from clinlib.strategies.codebook import Codebook
from clinlib.strategies.core_memory import CoreMemory
from clinlib.strategies.event_memory import (
    FlatHistory,
    FlatWindow,
    HistoryDenseRetrieval,
    HistoryMem0,
)
from clinlib.strategies.event_table import EventTable
from clinlib.strategies.mem0 import Mem0Memory
from clinlib.strategies.names import (
    DIAGNOSTIC_STRATEGIES,
    EVALUATION_STRATEGIES,
    PAPER_STRATEGIES,
    SERVICE_STRATEGIES,
)
from clinlib.strategies.note_memory import NoteMemory
from clinlib.strategies.oracle import OracleVisits
from clinlib.strategies.remote_memory import RemoteMemory
from clinlib.strategies.retrieval import BM25Retrieval, DenseRetrieval, HybridRetrieval
from clinlib.strategies.simple import FullContext, LastNVisits, LastVisitOnly, NoContextBlind
from clinlib.strategies.summary import LLMSummary
from clinlib.strategies.timeline import StructuredTimeline
from clinlib.strategies.window import HistoryVisits, WindowVisits

EMBEDDINGS_DIR = "embeddings"


def embeddings_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/embeddings``."""
    return build_dir(profile) / EMBEDDINGS_DIR


STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        NoContextBlind,
        LastVisitOnly,
        FullContext,
        DenseRetrieval,
        StructuredTimeline,
        LLMSummary,
        Mem0Memory,
        AMemMemory,
        LastNVisits,
        BM25Retrieval,
        HybridRetrieval,
        Codebook,
        WindowVisits,
        HistoryVisits,
        EventTable,
        OracleVisits,
        RemoteMemory,
        CoreMemory,
        FlatWindow,
        FlatHistory,
        HistoryDenseRetrieval,
        HistoryMem0,
        NoteMemory,
    )
}
EXTRA_STRATEGIES: tuple[str, ...] = tuple(n for n in STRATEGIES if n not in PAPER_STRATEGIES)
# Every registered strategy that runs offline (the default of "build every strategy").
LOCAL_STRATEGIES: tuple[str, ...] = tuple(n for n in STRATEGIES if n not in SERVICE_STRATEGIES)
__all__ = [
    "DIAGNOSTIC_STRATEGIES",
    "EVALUATION_STRATEGIES",
    "EXTRA_STRATEGIES",
    "LOCAL_STRATEGIES",
    "PAPER_STRATEGIES",
    "SERVICE_STRATEGIES",
    "STRATEGIES",
    "embeddings_dir",
    "get_strategy",
    "list_strategies",
    "parse_label",
]
# Per-profile folders a strategy writes to, filled from the profile unless given explicitly.
_PROFILE_DIRS = ("embedding_dir", "mem0ai_dir", "events_dir")


def parse_label(label: str) -> tuple[str, dict[str, Any]]:
    """Split a strategy label (:meth:`Strategy.label`, e.g. ``dense-retrieval(k=3)``) into
    its registry name and parameters, so a label round-trips to the same strategy.

    Raises:
        StrategyError: the text is not ``name`` or ``name(key=value, ...)`` with Python
            literal values.
    """
    if not CALL_RE.match(str(label)):
        raise StrategyError(f"cannot read strategy {label!r}: expected name or name(k=v, ...)")
    parsed = split_call(label)
    if parsed is None:
        if "**" in str(label):
            raise StrategyError(f"cannot read strategy {label!r}: **kwargs are not allowed")
        raise StrategyError(
            f"cannot read the parameters of strategy {label!r}: expected key=value pairs "
            "with literal values, e.g. dense-retrieval(k=3)"
        )
    return parsed


def get_strategy(name: str, profile: str | None = None, **params: Any) -> Strategy:
    """A strategy instance by registry name.

    Args:
        name: registry key (see :data:`STRATEGIES`) or a label such as
            ``dense-retrieval(k=3)`` (explicit ``params`` override the label's).
        profile: build profile whose folders hold embeddings / mem0ai stores (default: the
            active profile).
        **params: strategy parameters (k, budget_tokens, n, engine, embedding_model, ...).

    Returns:
        The strategy.

    Raises:
        StrategyError: unknown name or parameter.
    """
    name, parsed = parse_label(name)
    params = {**parsed, **params}
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
    if "embedding_dir" in cls.defaults and params.get("embedding_dir") is None:
        params["embedding_dir"] = str(embeddings_dir(profile))
    if "mem0ai_dir" in cls.defaults and params.get("mem0ai_dir") is None:
        params["mem0ai_dir"] = str(build_dir(profile) / "mem0ai")
    if "log_dir" in cls.defaults and params.get("log_dir") is None:
        params["log_dir"] = str(build_dir(profile) / "constructions" / name)
    if "events_dir" in cls.defaults and params.get("events_dir") is None:
        params["events_dir"] = str(build_dir(profile))
    return cls(**params)


def is_kit_strategy(label: str) -> bool:
    """Whether ``label`` names one of the kit's strategies (a registry name or a label with
    parameters); False for an outside system's label (``clintrace score``), whose context the
    kit cannot rebuild."""
    try:
        get_strategy(str(label))
    except StrategyError:
        return False
    return True


def list_strategies() -> list[dict[str, Any]]:
    """One dict per registered strategy: name, family, paper (bool), diagnostic (bool: a
    control such as event-table / oracle, never ranked with the paper's), derived, uses_prep,
    defaults (without folder settings)."""
    return [
        {
            "name": n,
            "family": cls.family,
            "paper": n in PAPER_STRATEGIES,
            "diagnostic": n in DIAGNOSTIC_STRATEGIES,
            "derived": cls.derived,
            "uses_prep": cls.uses_prep,
            "defaults": {k: v for k, v in cls.defaults.items() if k not in _PROFILE_DIRS},
        }
        for n, cls in STRATEGIES.items()
    ]
