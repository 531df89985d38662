"""MEDS (Medical Event Data Standard) export and import (paper §3 "Cohort", Fig. 2 stages 1–2).

The paper's pipeline reads MIMIC-IV hosp tables. MEDS is the community format for the same
event streams, so the kit both writes its event table as MEDS (:func:`write_meds`) and runs the
cohort builder unchanged on a MEDS dataset (:func:`open_meds` registers MIMIC-shaped DuckDB
views derived from the MEDS codes).

MEDS 0.4 layout: ``data/**/*.parquet`` with core columns ``subject_id`` int64, ``time``
timestamp[us] (null for static rows), ``code`` string, ``numeric_value`` float32 and
``text_value`` string (both nullable; extra columns allowed), sorted by subject then time, each
subject in exactly one shard; ``metadata/codes.parquet`` (code, description,
parent_codes list<string>), ``metadata/dataset.json`` and ``metadata/subject_splits.parquet``.

Codes follow the MEDS-transforms MIMIC-IV conventions (``MIMIC-IV_Example/configs/
event_configs.yaml``): ``HOSPITAL_ADMISSION//<admission_type>``,
``HOSPITAL_DISCHARGE//<discharge_location>``, ``LAB//<itemid>//<valueuom>``,
``MEDICATION//<drug>//<route>``, ``DIAGNOSIS//ICD//<9|10>//<icd_code>``,
``PROCEDURE//ICD//<9|10>//<icd_code>``, ``MEDS_BIRTH``, ``MEDS_DEATH``, ``GENDER//<F|M>``; a
missing component is ``UNK``. The kit's provenance travels in extra columns: ``hadm_id``,
``event_id`` (raw-source ids), ``unit`` (medication dose unit), ``end_time`` (discharge /
stop time), ``ref_low``, ``ref_high``, ``flag``.

Medications. A MIMIC-derived MEDS dataset (MEDS-transforms) writes orders as
``MEDICATION//START//<drug>`` / ``MEDICATION//STOP//<drug>`` (from MIMIC's pharmacy table; no
dose, no hadm_id, the route in an extra ``route`` column) and eMAR administrations as
``MEDICATION//<drug>//<event_txt>``. When a dataset has START rows, they are its orders
(medication events without a dose: the dialogue says "started") and every other MEDICATION
row is an administration, not an order; without START rows, every non-STOP MEDICATION row is
an order (the kit's own export). :mod:`clinlib.data.sources.meds_fixture` builds such a dataset
from a MIMIC-shaped hosp directory.

Lab reference ranges. MIMIC-derived MEDS datasets drop ``labevents.ref_range_lower/upper`` and
``flag`` (MEDS-transforms' MIMIC-IV config keeps code, value and unit only). Without them no lab
is abnormal and the abnormal-value tasks (T3, T4) have no anchors, so when a dataset carries
none of the ``ref_low`` / ``ref_high`` / ``flag`` columns, a panel lab takes the panel's
typical range (:data:`clinlib.data.vocab.LAB_PANEL`) and is flagged ``abnormal`` outside it, as
MIMIC's own flag is; a dataset that carries any of them keeps its own values.

Reading back, ``hadm_id`` is trusted for an event kind whenever any row of that kind carries
one; otherwise admissions come from HOSPITAL_ADMISSION / HOSPITAL_DISCHARGE pairs and each event
joins the admission whose [admittime, dischtime] interval holds it (procedures by calendar
day). Ids come from ``event_id`` when every row of a kind has a well-formed one; otherwise a
lab's, an order's and an id-less admission's id is derived from the row's own content (60 bits
of an md5, held as BIGINT), so it does not change with other patients or splits; diagnoses and
procedures are ranked by (time, code) within their admission.

Real exports (:mod:`~clinlib.data.sources.meds.families`): a code whose name is
unknown (``MEDICATION//START//UNK``) feeds no view and is excluded with a counted reason; code
families the kit does not use are counted as ignored (``code_families.parquet``); the cohort
stage refuses a dataset without ``metadata/codes.parquet``.
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
