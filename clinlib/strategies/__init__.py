"""History-representation strategies: ONE registry keyed by name (paper §4 "History
representation strategies" — the eight, grouped into six families — plus the kit's extras;
docs/design.md principle 4: an ablation is a one-string change).

The paper's eight: ``no-context-blind``, ``last-visit-only``, ``full-context``,
``dense-retrieval``, ``structured-timeline``, ``llm-summary``, ``mem0``, ``a-mem``.
Extras: ``last-n-visits``, ``bm25``, ``hybrid``, ``codebook``, ``window-visits(m=...)``.
Diagnostic controls (evaluated by default, never ranked with the eight): ``event-table`` (App.
G.8's bare event table) and ``oracle`` (the question's evidence visits only).

Usage::

    from clinlib.strategies import get_strategy, build_all, context_for
    dense = get_strategy("dense-retrieval", k=3)
    summary = build_all("quick", ["llm-summary", "mem0"], setting="post", prep="rule-based")
"""

from __future__ import annotations

from clinlib.strategies.base import Artifact, Strategy, StrategyError, context_for
from clinlib.strategies.cache import ConstructionCache, constructions_dir
from clinlib.strategies.construction import (
    build_all,
    construction_turns,
    load_artifacts,
    question_contexts,
    question_contexts_many,
    setting_plan,
    split_dialogues,
)
from clinlib.strategies.prep import (
    MATCHED,
    RULE_BASED,
    LLMPrep,
    PrepError,
    PrepModel,
    RuleBasedPrep,
    get_prep,
    resolve_prep,
)
from clinlib.strategies.registry import (
    DIAGNOSTIC_STRATEGIES,
    EVALUATION_STRATEGIES,
    EXTRA_STRATEGIES,
    PAPER_STRATEGIES,
    STRATEGIES,
    embeddings_dir,
    get_strategy,
    list_strategies,
    parse_label,
)

__all__ = [
    "DIAGNOSTIC_STRATEGIES",
    "EVALUATION_STRATEGIES",
    "EXTRA_STRATEGIES",
    "MATCHED",
    "PAPER_STRATEGIES",
    "RULE_BASED",
    "STRATEGIES",
    "Artifact",
    "ConstructionCache",
    "LLMPrep",
    "PrepError",
    "PrepModel",
    "RuleBasedPrep",
    "Strategy",
    "StrategyError",
    "build_all",
    "construction_turns",
    "constructions_dir",
    "context_for",
    "embeddings_dir",
    "get_prep",
    "get_strategy",
    "list_strategies",
    "load_artifacts",
    "parse_label",
    "question_contexts",
    "question_contexts_many",
    "setting_plan",
    "resolve_prep",
    "split_dialogues",
]
