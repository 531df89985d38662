"""One question generator per task: T1–T9 (paper §3 "Task suite", Fig. 1) and the extended
tasks (T10, LongMedBench "Temporal reasoning"; docs/design.md "Extended question set"); see
:mod:`clinlib.tasks.generators.common` for the shared conventions.

A new extended task plugs in with a module here (``SUBTYPES`` + ``generate(inp)``), an entry
in ``_MODULES`` and ``TITLES``, its name in
:data:`clinlib.tasks.answers.formats.EXTENDED_TASK_NAMES` (+ format and token cap), its
counts in :data:`clinlib.tasks.rules.EXTENDED_COUNTS` / ``clinlib.tasks.extended``, and an L2
recomputation in :data:`clinlib.tasks.recompute.RECOMPUTERS`.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from clinlib.tasks.generators import t1, t1f, t1r, t2, t3, t4, t5, t6, t7, t7r, t8, t9, t10, t11
from clinlib.tasks.generators.inputs import TaskInputs

_MODULES = {"T1": t1, "T2": t2, "T3": t3, "T4": t4, "T5": t5, "T6": t6, "T7": t7, "T8": t8,
            "T9": t9, "T10": t10, "T1R": t1r, "T11": t11, "T1F": t1f, "T7R": t7r}  # fmt: skip

GENERATORS: dict[str, Callable[[TaskInputs], pd.DataFrame]] = {
    name: mod.generate for name, mod in _MODULES.items()
}
SUBTYPES: dict[str, tuple[str, ...]] = {name: tuple(mod.SUBTYPES) for name, mod in _MODULES.items()}
TITLES: dict[str, str] = {
    "T1": "Numeric lab retrieval",
    "T2": "Trend classification",
    "T3": "Controlled attribution detection",
    "T4": "Retrospective propagation",
    "T5": "Controlled contradiction detection",
    "T6": "Cross-patient comparison",
    "T7": "Treatment fact recall",
    "T8": "Observed treatment response",
    "T9": "Abstention",
    "T10": "Temporal ordering (extended set)",
    "T1R": "Relative-time retrieval (extended set)",
    "T11": "Long-horizon decisions (extended set)",
    "T1F": "Rejection of an absent measurement (extended set)",
    "T7R": "Medication retrieval, explicit vs relative (extended set)",
}

__all__ = ["GENERATORS", "SUBTYPES", "TITLES", "TaskInputs"]
