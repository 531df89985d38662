"""The paper's eight history representations, in its tables' order (paper §4; Table 1).

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
