"""The derived-trap rules (MedMemoryBench's introduction: "allergy histories, medication
contraindications, and economic constraints ... embedded ... as high-priority signals"): defined
once in :mod:`clinlib.data.contraindications` (the dialogue reads them to decide what it must
state) and re-exported here for the trap tasks.
"""

from clinlib.data.contraindications import (
    EGFR_LIMIT,
    KDIGO_ABS_HOURS,
    KDIGO_ABS_RISE,
    KDIGO_REL_DAYS,
    KDIGO_REL_RISE,
    PLATELET_LIMIT,
    POTASSIUM_DEFAULT_HIGH,
    RECORD_RULES,
    RULE_BY_KEY,
    RULES,
    TRAP_RULE_COLUMNS,
    Rule,
    ckd_epi_2021,
    conflict_event_ids,
    derive_traps,
    kdigo_aki,
)

__all__ = [
    "EGFR_LIMIT",
    "KDIGO_ABS_HOURS",
    "KDIGO_ABS_RISE",
    "KDIGO_REL_DAYS",
    "KDIGO_REL_RISE",
    "PLATELET_LIMIT",
    "POTASSIUM_DEFAULT_HIGH",
    "RECORD_RULES",
    "RULE_BY_KEY",
    "RULES",
    "TRAP_RULE_COLUMNS",
    "Rule",
    "ckd_epi_2021",
    "conflict_event_ids",
    "derive_traps",
    "kdigo_aki",
]
