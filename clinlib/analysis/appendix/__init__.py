"""The paper's appendix diagnostics over the kit's predictions (ClinTraceBench Appendices
B–G; notebook 16).

- :mod:`.subtypes` — Figs 7–12: per-task subtype accuracy, T3's four classes, T5 controlled
  vs natural, T4 set-F1, T8 bins, T9 by anchor kind;
- :mod:`.memory_size` — Fig. 15D: memory size vs accuracy per patient, Pearson r with CI;
- :mod:`.cost` — Table 4 measured, Fig. 16, construction cost, the two Pareto views;
- :mod:`.diagnostics` — D1–D8 (Figs 17–24): empty responses, parse failures, output
  lengths, truncation, per-patient spread, disease / tertile strata, bootstrap CI widths;
- :mod:`.sensitivity` — G.4 over-answer makeup, Table 13 recomputed, empty-response
  sensitivity;
- :mod:`.from_paper` — Fig. 16, Fig. 10B–C and a Fig. 24 stand-in from the printed tables;
- :mod:`.charts` — their altair charts.
"""

from clinlib.analysis.appendix import (
    charts,
    cost,
    diagnostics,
    from_paper,
    memory_size,
    sensitivity,
    subtypes,
)
from clinlib.analysis.metrics import parse_failure_rate

__all__ = [
    "charts",
    "cost",
    "diagnostics",
    "from_paper",
    "memory_size",
    "parse_failure_rate",
    "sensitivity",
    "subtypes",
]
