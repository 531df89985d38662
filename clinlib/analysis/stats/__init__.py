"""The kit's statistics, together (paper §3 "Evaluation set", §5.4, §6, Appendix G.2).

* :mod:`.question` — question-level intervals and tests (Wilson, bootstrap, McNemar, Holm,
  Pearson, minimum detectable effect); its public names are re-exported here, so
  ``from clinlib.analysis.stats import wilson_ci`` and ``stats.holm_bonferroni`` keep working.
* :mod:`.cluster` — the patient-clustered versions (cluster bootstrap, robust CI, design effect).
* :mod:`.cluster_tables` — the notebooks' tables built from both.
"""

from clinlib.analysis.stats.question import (
    MCNEMAR_EXACT_BELOW,
    PAPER_BOOT_SEED,
    PAPER_N_BOOT,
    McNemarResult,
    PairedDiff,
    PearsonResult,
    StatsInputError,
    as_1d_float,
    as_bool_array,
    bootstrap_ci,
    check_boot_args,
    holm_bonferroni,
    mcnemar,
    minimum_detectable_effect,
    paired_bootstrap_diff,
    paired_correct,
    pairwise_mcnemar,
    pearson,
    wilson_ci,
    z_value,
)

__all__ = [
    "PAPER_N_BOOT",
    "PAPER_BOOT_SEED",
    "MCNEMAR_EXACT_BELOW",
    "StatsInputError",
    "McNemarResult",
    "PairedDiff",
    "PearsonResult",
    "z_value",
    "as_1d_float",
    "as_bool_array",
    "wilson_ci",
    "check_boot_args",
    "bootstrap_ci",
    "paired_bootstrap_diff",
    "mcnemar",
    "holm_bonferroni",
    "minimum_detectable_effect",
    "pearson",
    "pairwise_mcnemar",
    "paired_correct",
]
