"""MEDS (Medical Event Data Standard) export and import (paper §3 "Cohort", Fig. 2 stages 1–2).

:func:`write_meds` writes the kit's event table as a MEDS 0.4 dataset (MEDS-transforms' MIMIC-IV
codes; the kit's provenance in extra columns), and :func:`open_meds` registers MIMIC-shaped
DuckDB views derived from a MEDS dataset's codes, so the cohort builder runs on it unchanged.
Real exports' shapes (orders without dose, no reference ranges, unknown drug names, unused code
families) are handled as docs/real-data.md describes.
"""

from clinlib.data.sources.meds.export import write_meds
from clinlib.data.sources.meds.format import (
    CODES_SCHEMA,
    DATA_SCHEMA,
    DEFAULT_SPLIT,
    MEDS_VERSION,
    SPLITS_SCHEMA,
)
from clinlib.data.sources.meds.read import meds_shards, read_meds
from clinlib.data.sources.meds.views import open_meds

__all__ = [
    "CODES_SCHEMA",
    "DATA_SCHEMA",
    "DEFAULT_SPLIT",
    "MEDS_VERSION",
    "SPLITS_SCHEMA",
    "meds_shards",
    "open_meds",
    "read_meds",
    "write_meds",
]
