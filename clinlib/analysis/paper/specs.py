"""The paper's canonical names and the specification of each published table (§3, §4,
Table 1 caption, Appendices C–I): what every CSV under ``data/paper/`` must look like.

Each numbered table of the paper is shipped as one long-format CSV (see
``data/paper/README.md``), transcribed exactly as printed — percent or fraction as the paper
prints it (``unit`` column), a printed dash as an empty value. :mod:`.tables` loads and
validates them against :data:`TABLES` / :data:`FIGURES`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clinlib.strategies.names import PAPER_STRATEGIES
from clinlib.tasks.rules import PAPER_COUNTS


class PaperTableError(ValueError):
    """A published-table CSV, or a frame passed to a consistency helper, is missing or bad."""


# --- canonical names (paper §4 and Table 1 caption) ----------------------------------------

STRATEGIES: tuple[str, ...] = PAPER_STRATEGIES  # one list: clinlib.strategies.names
BACKBONES: tuple[str, ...] = (
    "deepseek-chat-v3.1",
    "gpt-4o-mini",
    "claude-haiku-4.5",
    "claude-sonnet-4.6",
)
TASKS: tuple[str, ...] = tuple(PAPER_COUNTS)  # the paper's nine tasks, T1..T9

# Evaluation-set sizes (§3 "Evaluation set"; Table 14 caption). They sum to 6,271.
TASK_N: dict[str, int] = dict(PAPER_COUNTS)
N_QUESTIONS: int = sum(TASK_N.values())

# Short display names the paper prints in Table 1's header.
STRATEGY_LABELS: dict[str, str] = {
    "no-context-blind": "blind",
    "last-visit-only": "last-vis",
    "full-context": "full",
    "dense-retrieval": "dense",
    "structured-timeline": "struct.",
    "llm-summary": "summ.",
    "mem0": "Mem0",
    "a-mem": "A-MEM",
}
BACKBONE_LABELS: dict[str, str] = {
    "deepseek-chat-v3.1": "DS",
    "gpt-4o-mini": "GPT",
    "claude-haiku-4.5": "Hk",
    "claude-sonnet-4.6": "Sn",
}

# Table 1's bottom rows, stored as task values.
SUMMARY_TASKS: tuple[str, ...] = ("pooled", "macro", "delta_blind")
BLIND = "no-context-blind"
# Table 2's third regime: the mean of Mem0 and A-MEM.
MEM_AVG = "mem-avg"

# Task subsets named by Tables 12 and 13 (usable as ``recompute_pooled_macro(tasks=...)``).
TASK_SUBSETS: dict[str, tuple[str, ...]] = {
    "all": TASKS,
    "aggregation": ("T2", "T6", "T8"),
    "without_T5_T8_T9": tuple(t for t in TASKS if t not in ("T5", "T8", "T9")),
    "without_T3": tuple(t for t in TASKS if t != "T3"),
}

# How many of a unit make one "fraction" unit; used to compare percent with fraction tables.
UNIT_SCALE: dict[str, float] = {"fraction": 1.0, "percent": 100.0, "pp": 100.0}

# --- table specifications -------------------------------------------------------------------

_S = STRATEGIES
_B = BACKBONES


@dataclass(frozen=True)
class TableSpec:
    """What one published-table CSV must look like.

    Attributes:
        number: table number in the paper (1–14).
        name: file stem under data/paper/.
        source: paper section holding the table.
        title: short description.
        columns: column -> kind ("str", "float", "int", "bool"), in file order.
        keys: columns that identify a row (unique per file).
        n_rows: rows the paper prints (after the tidy reshape).
        allowed: column -> allowed values (str/int columns).
        nullable: columns that may be empty (a printed dash, or not applicable).
        kind: "Table", or "Figure" for numbers a figure's caption or text prints.
    """

    number: int
    name: str
    source: str
    title: str
    columns: dict[str, str]
    keys: tuple[str, ...]
    n_rows: int
    allowed: dict[str, tuple] = field(default_factory=dict)
    nullable: frozenset[str] = frozenset()
    kind: str = "Table"

    @property
    def file(self) -> str:
        return f"{self.name}.csv"


_VAL = {"metric": "str", "value": "float", "unit": "str"}

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            1,
            "table01_accuracy",
            "§3 / §5.1",
            "main results: per-task accuracy (%) and Pool./Macro/Δblind rows",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL},
            ("strategy", "backbone", "task"),
            len(_S) * len(_B) * (len(TASKS) + len(SUMMARY_TASKS)),
            {
                "strategy": _S,
                "backbone": _B,
                "task": TASKS + SUMMARY_TASKS,
                "metric": ("accuracy", "delta_blind"),
                "unit": ("percent", "pp"),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            2,
            "table02_context_lift",
            "§5.1",
            "context lift over same-backbone no-context-blind (pp)",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL},
            ("strategy", "backbone", "task"),
            3 * len(_B) * (len(TASKS) + 1),
            {
                "strategy": ("full-context", "dense-retrieval", MEM_AVG),
                "backbone": _B,
                "task": TASKS + ("macro",),
                "metric": ("lift_vs_blind",),
                "unit": ("pp",),
            },
        ),
        TableSpec(
            3,
            "table03_t3_preservation",
            "§5.5 (SP4)",
            "equal-input T3 probe: positive-class recall on 19 injected positives",
            {
                "prep": "str",
                "prep_model": "str",
                "strategy": "str",
                "backbone": "str",
                "task": "str",
                **_VAL,
                "n": "int",
            },
            ("prep", "strategy", "backbone"),
            3 * len(_B) + 2 * len(_B),
            {
                "prep": ("deepseek-prepared", "backbone-matched"),
                "prep_model": _B,
                "strategy": ("mem0", "a-mem", "llm-summary"),
                "backbone": _B,
                "task": ("T3",),
                "metric": ("positive_recall",),
                "unit": ("fraction",),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            4,
            "table04_cost",
            "Appendix D",
            "per-cell cost (USD), $/question, input (M) / output (K) tokens, cache hit (%)",
            {"strategy": "str", "backbone": "str", **_VAL},
            ("strategy", "backbone", "metric"),
            (len(_S) * len(_B) + 1) * 5,
            {
                "strategy": _S + ("total",),
                "backbone": _B + ("total",),
                "metric": (
                    "cost_usd",
                    "cost_per_question",
                    "input_tokens",
                    "output_tokens",
                    "cache_hit_rate",
                ),
                "unit": ("USD", "million_tokens", "thousand_tokens", "percent"),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            5,
            "table05_t5_macro_f1",
            "Appendix G.1",
            "T5 macro-F1 per backbone and pooled",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL, "n": "int"},
            ("strategy", "backbone"),
            len(_S) * (len(_B) + 1),
            {
                "strategy": _S,
                "backbone": _B + ("pooled",),
                "task": ("T5",),
                "metric": ("macro_f1",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            6,
            "table06_t8_macro_f1",
            "Appendix G.1",
            "T8 macro-F1 per backbone and pooled",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL, "n": "int"},
            ("strategy", "backbone"),
            len(_S) * (len(_B) + 1),
            {
                "strategy": _S,
                "backbone": _B + ("pooled",),
                "task": ("T8",),
                "metric": ("macro_f1",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            7,
            "table07_power",
            "Appendix G.2",
            "per-task minimum detectable effect (pp)",
            {"task": "str", **_VAL, "n": "int", "assessment": "str"},
            ("task",),
            len(TASKS),
            {
                "task": TASKS,
                "metric": ("mde",),
                "unit": ("pp",),
                "assessment": ("well-powered", "weak", "under-powered"),
            },
        ),
        TableSpec(
            8,
            "table08_t9_parser",
            "Appendix G.3",
            "T9 abstention accuracy, strict vs lenient parser (pooled over backbones)",
            {"strategy": "str", "backbone": "str", "task": "str", "parser": "str", **_VAL},
            ("strategy", "parser"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("pooled",),
                "task": ("T9",),
                "parser": ("strict", "lenient", "delta"),
                "metric": ("accuracy", "delta_lenient_minus_strict"),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            9,
            "table09_t7_parser",
            "Appendix G.3",
            "T7 accuracy, strict vs lenient matcher (pooled over backbones)",
            {"strategy": "str", "backbone": "str", "task": "str", "parser": "str", **_VAL},
            ("strategy", "parser"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("pooled",),
                "task": ("T7",),
                "parser": ("strict", "lenient", "delta"),
                "metric": ("accuracy", "delta_lenient_minus_strict"),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            10,
            "table10_matched_prep",
            "Appendix G.5",
            "DeepSeek-prepared vs backbone-matched agentic memory (20-patient subset)",
            {"backbone": "str", "strategy": "str", "prep": "str", "prep_model": "str", **_VAL},
            ("backbone", "strategy", "metric", "prep"),
            3 * 2 * 3,
            {
                "backbone": _B[1:],
                "strategy": ("mem0", "a-mem"),
                "prep": ("deepseek-prepared", "backbone-matched"),
                "prep_model": _B,
                "metric": ("accuracy", "delta_matched_minus_deepseek"),
                "unit": ("fraction",),
            },
            frozenset({"prep", "prep_model"}),
        ),
        TableSpec(
            11,
            "table11_dense_k",
            "Appendix G.6",
            "dense-retrieval accuracy by top-K (20-patient subset)",
            {
                "strategy": "str",
                "backbone": "str",
                "k": "int",
                "task_subset": "str",
                **_VAL,
            },
            ("backbone", "k"),
            len(_B) * 3,
            {
                "strategy": ("dense-retrieval",),
                "backbone": _B,
                "k": (3, 5, 10),
                "task_subset": ("all",),
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            12,
            "table12_summary_budget",
            "Appendix G.6",
            "llm-summary accuracy at 500 vs 1,000 tokens, all tasks and aggregation",
            {
                "strategy": "str",
                "backbone": "str",
                "budget_tokens": "int",
                "task_subset": "str",
                **_VAL,
            },
            ("backbone", "budget_tokens", "task_subset"),
            len(_B) * 4,
            {
                "strategy": ("llm-summary",),
                "backbone": _B,
                "budget_tokens": (500, 1000),
                "task_subset": ("all", "aggregation"),
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            13,
            "table13_macro_ablation",
            "Appendix G.7",
            "macro accuracy (mean over backbones) under task-subset ablation",
            {"strategy": "str", "backbone": "str", "task_subset": "str", **_VAL},
            ("strategy", "task_subset"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("mean",),
                "task_subset": ("all", "without_T5_T8_T9", "without_T3"),
                "metric": ("macro_accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            14,
            "table14_full_matrix",
            "Appendix I",
            "complete per-task accuracy matrix (288 cells) with n",
            {
                "task": "str",
                "strategy": "str",
                "backbone": "str",
                **_VAL,
                "n": "int",
                "subset": "bool",
            },
            ("task", "strategy", "backbone"),
            len(TASKS) * len(_S) * len(_B),
            {
                "task": TASKS,
                "strategy": _S,
                "backbone": _B,
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
    )
}
TABLES_BY_NUMBER: dict[int, TableSpec] = {spec.number: spec for spec in TABLES.values()}

# Numbers printed with a figure (not a numbered table): Figure 14 / Appendix C.2 BGE-M3
# hit rates (overall only: the per-task bars are not printed as numbers) and the per-task
# retrieval-eligible n of its caption.
HIT_TASKS: tuple[str, ...] = tuple(f"T{i}" for i in range(1, 9))
CORPUS_FIGURE_FILE = "figure13_corpus.csv"
CORPUS_DISTRIBUTIONS: tuple[str, ...] = (
    "visits_per_patient",
    "dialogue_kchars",
    "questions_per_patient",
)
CORPUS_STATISTICS: tuple[str, ...] = ("median", "mean", "max")

FIGURES: dict[str, TableSpec] = {
    "figure13_corpus": TableSpec(
        13,
        "figure13_corpus",
        "Appendix C.1 (Figure 13)",
        "visits, dialogue length (k chars) and questions per patient: median / mean / max",
        {"distribution": "str", "statistic": "str", "value": "float", "unit": "str"},
        ("distribution", "statistic"),
        len(CORPUS_DISTRIBUTIONS) * len(CORPUS_STATISTICS),
        {
            "distribution": CORPUS_DISTRIBUTIONS,
            "statistic": CORPUS_STATISTICS,
            "unit": ("visits", "thousand_characters", "questions"),
        },
        frozenset(),
        kind="Figure",
    ),
    "figure14_hit_rates": TableSpec(
        14,
        "figure14_hit_rates",
        "Appendix C.2 (Figure 14, §5.6)",
        "BGE-M3 dense-retrieval hit@k of the anchor visit; per-task eligible n",
        {"task": "str", "k": "int", **_VAL},
        ("task", "k", "metric"),
        4 + len(HIT_TASKS) + 1,
        {
            "task": HIT_TASKS + ("all",),
            "k": (1, 3, 5, 10),
            "metric": ("hit_rate", "eligible_n"),
            "unit": ("fraction", "count"),
        },
        frozenset({"k"}),
        kind="Figure",
    ),
}


def canonical_order(values: Iterable[object], canonical: Sequence[str]) -> list[str]:
    """The distinct ``values`` (as str): those in ``canonical`` in its order, then the rest
    in order of first appearance (how the paper's tables order strategies and backbones)."""
    seen = list(dict.fromkeys(map(str, values)))
    return [v for v in canonical if v in seen] + [v for v in seen if v not in canonical]
