"""Curated vocabularies for the SYNTHETIC MIMIC-IV-shaped hosp generator (paper §3 "Cohort",
Fig. 2 stages 1–2; docs/real-data.md), one module per domain: lab items
(:mod:`.labs`), diagnosis and procedure codes (:mod:`.codes`), drugs (:mod:`.drugs`).

Everything here is a real-world code or name, so the synthetic tables join and read like
MIMIC-IV's own.
"""

from clinlib.data.sources.synthetic_vocab.codes import (
    DX_PAIRS,
    ICD9_DX_TITLES,
    ICD9_PX_TITLES,
    ICD10_DX_TITLES,
    ICD10_PX_TITLES,
    PX_GROUPS,
)
from clinlib.data.sources.synthetic_vocab.drugs import (
    ADDITIVE_DRUGS,
    BASE_DRUGS,
    BASE_P,
    DRUG_KEYS,
    DRUGS,
    IV_DRUGS,
    NAME_VARIANTS,
    QUALIFIED_DRUGS,
    QUALIFIED_P,
    Drug,
    synthetic_gsn,
    synthetic_ndc,
)
from clinlib.data.sources.synthetic_vocab.labs import (
    LAB_ITEMS,
    MALE_REF,
    SEX_SPECIFIC_REF,
    LabItem,
)

__all__ = [
    "ADDITIVE_DRUGS",
    "BASE_DRUGS",
    "BASE_P",
    "DRUG_KEYS",
    "DRUGS",
    "DX_PAIRS",
    "ICD10_DX_TITLES",
    "ICD10_PX_TITLES",
    "ICD9_DX_TITLES",
    "ICD9_PX_TITLES",
    "IV_DRUGS",
    "LAB_ITEMS",
    "MALE_REF",
    "NAME_VARIANTS",
    "PX_GROUPS",
    "QUALIFIED_DRUGS",
    "QUALIFIED_P",
    "SEX_SPECIFIC_REF",
    "Drug",
    "LabItem",
    "synthetic_gsn",
    "synthetic_ndc",
]
