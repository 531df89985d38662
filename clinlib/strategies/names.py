"""The paper's eight history representations, in its tables' order (paper §4; Table 1), and
the default evaluation set (the eight plus the diagnostic controls).

A leaf with no imports, so that the paper's tables (:mod:`clinlib.analysis.paper`), the
registry (:mod:`clinlib.strategies.registry`) and the command line share one list.
"""

PAPER_STRATEGIES: tuple[str, ...] = (
    "no-context-blind",
    "last-visit-only",
    "full-context",
    "dense-retrieval",
    "structured-timeline",
    "llm-summary",
    "mem0",
    "a-mem",
)

# Controls evaluated beside the paper's eight, never ranked with them: the bare event table of
# App. G.8 and the evidence-only ``oracle`` (the reading ceiling).
DIAGNOSTIC_STRATEGIES: tuple[str, ...] = ("event-table", "oracle")
# What the default offline evaluation runs (`clintrace evaluate-offline`, `make run`).
EVALUATION_STRATEGIES: tuple[str, ...] = PAPER_STRATEGIES + DIAGNOSTIC_STRATEGIES
# Strategies that talk to a service outside the kit (``remote-memory``): registered,
# but never built by a default "every strategy" loop, which must run offline.
SERVICE_STRATEGIES: tuple[str, ...] = ("remote-memory",)
