"""Stage 6 (paper §5, Appendices C-H): metrics, statistics, the paper's tables, reports."""
