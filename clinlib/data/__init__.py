"""Stage 1 (paper §3 'Cohort'): data sources, the cohort, the event table."""
