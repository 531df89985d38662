"""Metrics over the predictions table (paper §3 "Headline metric", §5.1–§5.6, Appendices B,
D, E.2, F and G.1–G.4).

Pure functions: each takes the predictions DataFrame (docs/design.md contract: qid, task,
strategy, backbone, prep_model, setting, response, parsed, correct, input_tokens,
output_tokens, cached_tokens, cost_usd, latency_s, error, plus ``correct_lenient`` and
``parse_failed`` from the harness) and returns a DataFrame whose id columns come first.
Columns that live in questions.parquet (subtype, disease, tertile, subject_ids, gold) are
joined on ``qid`` when a function needs them and ``questions=`` is given.

Conventions and the ambiguities resolved here:

- Accuracies, lifts and rates are proportions in [0, 1]; the paper prints pp (x 100).
- Pooled accuracy weights each task by its size (sum of correct / sum of n); macro accuracy
  is the unweighted mean of per-task accuracies (§3 "Headline metric"). Table 1's Macro and
  Delta_blind rows follow from Table 14's per-task accuracies; its Pool. row (and the §5.1
  pooled figures, e.g. full-context x DeepSeek 0.672) do not — Table 14 with the stated task
  sizes gives 0.703 — so the paper's pooled row cannot be re-derived from its own cube.
  (Of the 60 Macro / Delta_blind values, only full-context x Sonnet's macro differs: 66.5
  from Table 14, printed 67.) Table 2 lifts follow from Table 14 to within 1 pp (116/120
  exact; the rest are 3-decimal rounding).
- T9: the paper's over-answer rate is 1 - abstention and so includes empty responses;
  :func:`t9_decomposition` reports empty responses separately from genuine over-answers.
- Empty responses count as wrong (Limitations: "retained in headline numbers").
- T3 runs in two settings; filter ``setting`` (or add it to ``by``) before pooling T3.

Families (one module each, all names re-exported here): :mod:`.accuracy` (accuracy tables
with CIs, pooled/macro/Delta_blind, lifts, strata), :mod:`.skewed` (macro-F1, majority
baseline, positive recall), :mod:`.abstention` (T9 outcomes and the parsers), :mod:`.cost`
(Table 4 and the Pareto frontier), :mod:`.scores` (mean graded score, e.g. T10's Kendall's
tau, beside accuracy); :mod:`.common` holds the shared input checks.
"""

from clinlib.analysis.metrics.abstention import (
    ABSTENTION_PATTERNS,
    T9_CATEGORIES,
    VALUE_PATTERN,
    looks_like_abstention,
    parse_failure_rate,
    strict_vs_lenient,
    t9_decomposition,
    t9_outcomes,
)
from clinlib.analysis.metrics.accuracy import (
    BLIND_STRATEGY,
    GROUP_COLUMNS,
    MEM_AVG,
    MEM_AVG_MEMBERS,
    TABLE2_REGIMES,
    accuracy_table,
    by_group,
    context_lift,
    summary_rows,
)
from clinlib.analysis.metrics.common import CELL, MetricsInputError
from clinlib.analysis.metrics.cost import PRED_COST_COLUMNS, cost_table, pareto_frontier
from clinlib.analysis.metrics.scores import SCORE_COLUMNS, graded_scores, score_table
from clinlib.analysis.metrics.skewed import macro_f1, majority_baseline, positive_recall

__all__ = [
    "ABSTENTION_PATTERNS",
    "BLIND_STRATEGY",
    "CELL",
    "GROUP_COLUMNS",
    "MEM_AVG",
    "MEM_AVG_MEMBERS",
    "PRED_COST_COLUMNS",
    "SCORE_COLUMNS",
    "T9_CATEGORIES",
    "TABLE2_REGIMES",
    "VALUE_PATTERN",
    "MetricsInputError",
    "accuracy_table",
    "by_group",
    "context_lift",
    "cost_table",
    "graded_scores",
    "looks_like_abstention",
    "macro_f1",
    "majority_baseline",
    "parse_failure_rate",
    "pareto_frontier",
    "positive_recall",
    "score_table",
    "strict_vs_lenient",
    "summary_rows",
    "t9_decomposition",
    "t9_outcomes",
]
