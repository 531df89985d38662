"""The paper's figures regenerated from its published tables alone, and an audit of the
paper's internal consistency (notebook 12; docs/design.md "The paper's own numbers").

Figures rebuilt from ``data/paper`` (no predictions needed; data in :mod:`.cells`, charts
in :mod:`.charts`):

- Table 1 (§3/§5.1) as the 8 x 4 x 9 accuracy heatmap (cells from Table 14, Appendix I);
- Table 2 (§5.1) context lift as a diverging heatmap;
- Fig. 3 (§5.2) T2 / T6 bottleneck bars;
- Fig. 4 (§5.4) T9 abstention, as far as Tables 8 and 14 support it (:data:`T9_UNSUPPORTED`);
- Fig. 6 (§5.6) cost-accuracy Pareto plot with its frontier (cost from Table 4, Appendix D);
- §5.3 (SP2) blind-to-full gaps per backbone, as printed and as recomputed.

The audit recomputes every printed number that other printed numbers determine — Table 1's
Pool. / Macro / Δblind rows, Table 2's lifts, Table 4's totals, Tables 5–13 (:mod:`.audit`)
— and checks the numbers quoted in the text against the tables (:mod:`.claims`, a table of
claims checked by one loop). Each check is one row of a frame with :data:`AUDIT_COLUMNS`;
nothing is corrected or hidden: a row is ``flagged`` when the printed number misses its
recomputation by more than the printing precision explains (``tol``). :mod:`.report` runs
them all and writes notebook 12's JSON summary.

Conventions: accuracies are fractions in [0, 1]; differences in percentage points carry unit
"pp"; ``diff`` is always reported minus recomputed.
"""

from clinlib.analysis.paper import BACKBONES
from clinlib.analysis.paper_figures.audit import (
    AUDIT_COLUMNS,
    audit_appendix_tables,
    audit_cost,
    audit_frontier,
    audit_lift,
    audit_overview,
    audit_table1,
    check_rows,
    discrepancies,
)
from clinlib.analysis.paper_figures.cells import (
    FAMILIES,
    SP2_TEXT,
    SP2_VERSIONS,
    STRATEGY_FAMILY,
    SUMMARY_COLUMNS,
    T9_OUTCOMES,
    T9_UNSUPPORTED,
    PaperFiguresError,
    accuracy_cube,
    cell_summary,
    frontier_report,
    implied_pool_weights,
    lift_table,
    load_paper_tables,
    sp2_gaps,
    summary_comparison,
    t9_breakdown,
)
from clinlib.analysis.paper_figures.charts import (
    ACCURACY_BINS,
    ACCURACY_COLOURS,
    LIFT_BINS,
    LIFT_COLOURS,
    bottleneck_bars_chart,
    compose,
    heatmap_chart,
    lift_chart,
    pareto_chart,
    pool_diff_chart,
    sp2_chart,
    t9_chart,
)
from clinlib.analysis.paper_figures.claims import (
    CLAIMS,
    T5_MAJORITY_F1,
    TEXT_FULL_POOLED_PP,
    TEXT_POOLED_RANGES,
    TEXT_T9,
    TEXT_TASK_RANGES,
    Claim,
    audit_text_claims,
)
from clinlib.analysis.paper_figures.report import (
    SUMMARY_KEYS,
    audit_all,
    build_summary,
    write_summary,
)
from clinlib.analysis.probe_terms import UPSTREAM_BUILT

__all__ = [
    "ACCURACY_BINS",
    "ACCURACY_COLOURS",
    "AUDIT_COLUMNS",
    "BACKBONES",
    "CLAIMS",
    "FAMILIES",
    "LIFT_BINS",
    "LIFT_COLOURS",
    "SP2_TEXT",
    "SP2_VERSIONS",
    "STRATEGY_FAMILY",
    "SUMMARY_COLUMNS",
    "SUMMARY_KEYS",
    "T5_MAJORITY_F1",
    "T9_OUTCOMES",
    "T9_UNSUPPORTED",
    "TEXT_FULL_POOLED_PP",
    "TEXT_POOLED_RANGES",
    "TEXT_T9",
    "TEXT_TASK_RANGES",
    "UPSTREAM_BUILT",
    "Claim",
    "PaperFiguresError",
    "accuracy_cube",
    "audit_all",
    "audit_appendix_tables",
    "audit_cost",
    "audit_frontier",
    "audit_lift",
    "audit_overview",
    "audit_table1",
    "audit_text_claims",
    "bottleneck_bars_chart",
    "build_summary",
    "cell_summary",
    "check_rows",
    "compose",
    "discrepancies",
    "frontier_report",
    "heatmap_chart",
    "implied_pool_weights",
    "lift_chart",
    "lift_table",
    "load_paper_tables",
    "pareto_chart",
    "pool_diff_chart",
    "sp2_chart",
    "sp2_gaps",
    "summary_comparison",
    "t9_breakdown",
    "t9_chart",
    "write_summary",
]
