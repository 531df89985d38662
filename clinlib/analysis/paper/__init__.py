"""The paper's own numbers: ClinTraceBench's published Tables 1–14 as tidy data.

Each numbered table of the paper is shipped as one long-format CSV under ``data/paper/``
(see ``data/paper/README.md``), transcribed exactly as printed — percent or fraction as the
paper prints it (``unit`` column), a printed dash as an empty value:

- Table 1 (§3/§5.1) main results, per-task accuracy (%) + Pool./Macro/Δblind rows;
- Table 2 (§5.1) context lift over no-context-blind (pp);
- Table 3 (§5.5, SP4) equal-input T3 preservation probe, positive-class recall;
- Table 4 (Appendix D) per-cell cost, tokens and cache-hit rate;
- Tables 5–6 (Appendix G.1) T5 / T8 macro-F1;  Table 7 (G.2) per-task MDE;
- Tables 8–9 (G.3) T9 / T7 strict vs lenient parser;  Table 10 (G.5) backbone-matched prep;
- Tables 11–12 (G.6) dense top-K and summary-budget ablations;  Table 13 (G.7) macro ablation;
- Table 14 (Appendix I) the complete 288-cell accuracy matrix with n.

:mod:`.specs` holds the canonical names and what each CSV must look like, :mod:`.tables`
loads and validates the files, and :mod:`.recompute` recomputes the summary rows of Table 1
from per-task cells and lists every printed number that differs from its recomputation.
"""

from clinlib.analysis.paper.recompute import compare_reported, recompute_pooled_macro
from clinlib.analysis.paper.specs import (
    BACKBONE_LABELS,
    BACKBONES,
    BLIND,
    CORPUS_DISTRIBUTIONS,
    CORPUS_FIGURE_FILE,
    CORPUS_STATISTICS,
    FIGURES,
    HIT_TASKS,
    MEM_AVG,
    N_QUESTIONS,
    STRATEGIES,
    STRATEGY_LABELS,
    SUMMARY_TASKS,
    TABLES,
    TASK_N,
    TASK_SUBSETS,
    TASKS,
    UNIT_SCALE,
    PaperTableError,
    TableSpec,
    canonical_order,
)
from clinlib.analysis.paper.tables import (
    PAPER_DATA_DIR,
    list_tables,
    load_corpus_figure,
    load_figure,
    load_table,
)

__all__ = [
    "BACKBONES",
    "BACKBONE_LABELS",
    "BLIND",
    "CORPUS_DISTRIBUTIONS",
    "CORPUS_FIGURE_FILE",
    "CORPUS_STATISTICS",
    "FIGURES",
    "HIT_TASKS",
    "MEM_AVG",
    "N_QUESTIONS",
    "PAPER_DATA_DIR",
    "STRATEGIES",
    "STRATEGY_LABELS",
    "SUMMARY_TASKS",
    "TABLES",
    "TASKS",
    "TASK_N",
    "TASK_SUBSETS",
    "UNIT_SCALE",
    "PaperTableError",
    "TableSpec",
    "canonical_order",
    "compare_reported",
    "list_tables",
    "load_corpus_figure",
    "load_figure",
    "load_table",
    "recompute_pooled_macro",
]
