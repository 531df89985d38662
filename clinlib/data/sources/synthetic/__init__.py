"""SYNTHETIC, MIMIC-IV-shaped hosp tables so the kit runs offline end to end (paper §3
"Cohort"; Appendix C.1 cohort statistics). NOT MIMIC-IV data: no record of any real person.

The tables have MIMIC-IV's names, columns, codes and quirks (:data:`clinlib.data.schema.HOSP_TABLES`),
written as ``<out_dir>/hosp/<table>.csv.gz`` or ``.parquet`` plus a design manifest. Every patient
gets one mode (:data:`MODE_SHARES`, :data:`MODE_FAILS`) so the cohort funnel removes countable
numbers; chunks are generated independently and byte-identically per (n_patients, seed,
chunk_patients). One module per table family (:mod:`.population`, :mod:`.labevents`,
:mod:`.orders`, :mod:`.codes`, ...), each drawing in a fixed order from one chunk generator.
"""

from clinlib.data.sources.synthetic.arrow import WRITTEN_TABLES, arrow_schema
from clinlib.data.sources.synthetic.design import (
    COHORT_RULES,
    FORMATS,
    HADM_PER_PATIENT,
    LAB_COMMENTS,
    LABEVENTS_PER_PATIENT,
    MANIFEST_NAME,
    MODE_FAILS,
    MODE_SHARES,
    MODES,
    SyntheticConfigError,
)
from clinlib.data.sources.synthetic.generate import generate_chunk, generate_hosp, synthesize
from clinlib.data.sources.synthetic.labevents import format_fixed
from clinlib.data.sources.synthetic.tables import MANIFEST_SCHEMA, dictionary_tables
from clinlib.data.sources.synthetic.writer import csv_bytes

__all__ = [
    "COHORT_RULES",
    "FORMATS",
    "HADM_PER_PATIENT",
    "LAB_COMMENTS",
    "LABEVENTS_PER_PATIENT",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MODE_FAILS",
    "MODE_SHARES",
    "MODES",
    "WRITTEN_TABLES",
    "SyntheticConfigError",
    "arrow_schema",
    "csv_bytes",
    "dictionary_tables",
    "format_fixed",
    "generate_chunk",
    "generate_hosp",
    "synthesize",
]
