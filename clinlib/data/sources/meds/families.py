"""What a MEDS dataset holds and what the kit makes of it (paper §3 "Cohort"):
code families, codes whose name is unknown, content-derived ids, the required code metadata.

Code families. A family is a code's leading component (``LAB``, ``HOSPITAL_ADMISSION``,
``INFUSION_START``, an OMR result name such as ``Blood Pressure``), or its first two for the
families that split by the second (``MEDICATION//START``, ``MEDICATION//STOP``,
``DIAGNOSIS//ICD``, ``PROCEDURE//ICD``, ``PROCEDURE//START`` ...); MEDS-transforms' eMAR rows
``MEDICATION//<drug>//<event_txt>`` are the family ``MEDICATION//<drug>//<event>``. Each row is
*used* (it feeds a MIMIC-shaped view), *excluded* (its name is unknown, below) or *ignored*
(the kit has no use for it: ICU stays, infusions, transfers, DRG, HCPCS, OMR values, an order's
STOP row, eMAR administrations beside START orders). :func:`code_families` counts them.

Unnamed codes. A code whose naming component is missing (``UNK`` or empty; MEDS-transforms
writes ``UNK`` for a NULL column) names nothing a clinician could tell: a medication without a
drug (``MEDICATION//START//UNK``), a lab without an itemid, a diagnosis or procedure without
an ICD code or version. Such a row is no event and no evidence for the cohort rules (a
prescription that cannot be named does not count towards ">= 2 prescriptions"); it is
excluded with the rule :data:`UNNAMED_RULE`, counted per family and, for the cohort's patients,
written to ``exclusions.parquet``. No drop threshold applies to it: an unnamed code is how the
export was made, not damage, and the kept-patient guard of the cohort stage still holds.

Content ids. Without the kit's own ``event_id`` column, a lab's ``labevent_id`` and an order's
``pharmacy_id`` (and an admission's ``hadm_id`` when the dataset has none) are the first 60
bits of the md5 of the row's content (:data:`CONTENT_COLUMNS`, as JSON), so the same record
gets the same id whatever else the dataset holds (other patients, other splits, shard order).
Exact duplicates (every content column equal) get the md5 of the content plus ``#k`` for the
k-th copy (k >= 2); copies are interchangeable, so which one is k does not change any event.
Two different records share an id with probability about n² / 2⁶¹ (n = 10⁸ rows: 0.4 %).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from clinlib.data.sources.meds.read import sql_literal
from clinlib.data.sources.mimic import SourceSchemaError

UNNAMED_RULE = "name_unknown"
CODES_FILE = Path("metadata") / "codes.parquet"
FAMILY_COLUMNS = (
    "family",
    "example_code",
    "rows",
    "subjects",
    "used",
    "excluded",
    "ignored",
    "text_only",
    "use",
)

# The row's content for its id: every core column and every extra column but event_id.
CONTENT_COLUMNS = (
    "subject_id",
    "time",
    "code",
    "numeric_value",
    "text_value",
    "hadm_id",
    "unit",
    "end_time",
    "ref_low",
    "ref_high",
    "flag",
    "route",
)

# A code component that names nothing: MEDS-transforms' UNK, or empty.
_MISSING = "('', 'UNK')"


def component_sql(expr: str) -> str:
    """A code component as text, NULL when it is ``UNK`` or empty."""
    return f"nullif(nullif(trim({expr}), ''), 'UNK')"


# The drug of a medication row: MEDICATION//START//<drug>, MEDICATION//<drug>//<route or event>,
# or MEDICATION//<drug>; NULL when unknown.
DRUG_SQL = component_sql(
    "CASE WHEN starts_with(code, 'MEDICATION//START//') THEN substr(code, 20) "
    "WHEN contains(substr(code, 13), '//') THEN regexp_extract(substr(code, 13), '^(.*)//', 1) "
    "ELSE substr(code, 13) END"
)
CODE_ROUTE_SQL = (
    "CASE WHEN starts_with(code, 'MEDICATION//START//') OR NOT contains(substr(code, 13), '//') "
    "THEN NULL ELSE " + component_sql("regexp_extract(substr(code, 13), '^.*//(.*)$', 1)") + " END"
)


def unnamed_sql() -> str:
    """True for a row of an event kind whose naming component is unknown (module docstring)."""
    icd = "split_part(code, '//', 4)"
    return f"""coalesce(CASE kind
        WHEN 'medication' THEN {DRUG_SQL} IS NULL
        WHEN 'lab' THEN TRY_CAST(split_part(code, '//', 2) AS INTEGER) IS NULL
        WHEN 'diagnosis' THEN trim({icd}) IN {_MISSING}
             OR TRY_CAST(split_part(code, '//', 3) AS SMALLINT) IS NULL
        WHEN 'procedure' THEN trim({icd}) IN {_MISSING}
             OR TRY_CAST(split_part(code, '//', 3) AS SMALLINT) IS NULL
    END, FALSE)"""


FAMILY_SQL = """CASE
    WHEN split_part(code, '//', 1) IN ('MEDICATION', 'PROCEDURE', 'DIAGNOSIS')
         AND split_part(code, '//', 2) IN ('START', 'STOP', 'END', 'ICD')
         THEN split_part(code, '//', 1) || '//' || split_part(code, '//', 2)
    WHEN starts_with(code, 'MEDICATION//') AND contains(substr(code, 13), '//')
         THEN 'MEDICATION//<drug>//<event>'
    ELSE split_part(code, '//', 1)
END"""

# What a used row becomes, by the kind the views give it (or the static code).
_USE = {
    "admission": "admissions (admittime, type, location)",
    "discharge": "admissions (dischtime, discharge location)",
    "lab": "labevents (panel labs become events)",
    "medication": "prescriptions (orders become events)",
    "diagnosis": "diagnoses_icd (events; index-disease rules)",
    "procedure": "procedures_icd (events)",
    "GENDER": "patients (gender)",
    "MEDS_BIRTH": "patients (age)",
    "MEDS_DEATH": "patients (date of death)",
}
_PATIENT_FAMILIES = ("GENDER", "MEDS_BIRTH", "MEDS_DEATH")
_IGNORED_WHY = {
    "MEDICATION//STOP": "ignored: an order's stop row (not joined to its start)",
    "MEDICATION//<drug>//<event>": "ignored: eMAR administrations (the START rows are the orders)",
}


def content_id_sql(key: str = "content_key", rank: str = "copy_k") -> str:
    """A BIGINT id from ``key`` (the row's content as JSON) and ``rank`` (its copy number)."""
    hashed = f"md5(CASE WHEN {rank} = 1 THEN {key} ELSE {key} || '#' || {rank} END)"
    return f"CAST('0x' || substr({hashed}, 1, 15) AS BIGINT)"


def content_key_sql() -> str:
    """The row's content (:data:`CONTENT_COLUMNS`) as one JSON text."""
    return (
        "CAST(to_json(list_value("
        + ", ".join(f"CAST({c} AS VARCHAR)" for c in CONTENT_COLUMNS)
        + ")) AS VARCHAR)"
    )


def with_content_id(source: str, id_name: str, partition: str = "") -> str:
    """``source`` rows with ``id_name``: the content id (module docstring, "Content ids")."""
    return f"""
        SELECT * EXCLUDE (content_key, copy_k), {content_id_sql()} AS {id_name} FROM (
            SELECT *, row_number() OVER (
                PARTITION BY {partition + ", " if partition else ""}content_key
                ORDER BY meds_shard, meds_row) AS copy_k
            FROM (SELECT *, {content_key_sql()} AS content_key FROM ({source}))
        )"""


def code_families(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Rows read, used, excluded (name unknown) and ignored per code family (module docstring).

    Args:
        con: a connection :func:`clinlib.data.sources.meds.open_meds` registered views in.

    Returns:
        One row per family (:data:`FAMILY_COLUMNS`): a sample code, rows, subjects, the
        three counts (they add up to rows), text-only rows (a text value, no number) and what
        the kit makes of the family; largest first.
    """
    df = con.execute(f"""
        SELECT family, min(code) AS example_code, count(*) AS rows,
               count(DISTINCT subject_id) AS subjects,
               count(*) FILTER (WHERE status = 'used') AS used,
               count(*) FILTER (WHERE status = 'excluded') AS excluded,
               count(*) FILTER (WHERE status = 'ignored') AS ignored,
               count(*) FILTER (WHERE numeric_value IS NULL AND text_value IS NOT NULL)
                   AS text_only,
               mode(kind) AS kind
        FROM (
            SELECT subject_id, code, numeric_value, text_value, kind, family,
                   CASE WHEN unnamed THEN 'excluded'
                        WHEN kind IS NOT NULL OR family IN {tuple(_PATIENT_FAMILIES)}
                             THEN 'used' ELSE 'ignored' END AS status
            FROM (SELECT *, {FAMILY_SQL} AS family FROM meds_data)
        )
        GROUP BY family ORDER BY rows DESC, family
    """).df()
    df["use"] = [
        _use(f, k, u, x)
        for f, k, u, x in zip(df["family"], df["kind"], df["used"], df["excluded"], strict=True)
    ]
    for col in ("rows", "subjects", "used", "excluded", "ignored", "text_only"):
        df[col] = df[col].astype("int64")
    return df[list(FAMILY_COLUMNS)].reset_index(drop=True)


def _use(family: str, kind, used: int, excluded: int) -> str:
    if used:
        text = _USE.get(kind if isinstance(kind, str) else family, "used")
        return text + (f"; {excluded} rows excluded ({UNNAMED_RULE})" if excluded else "")
    if excluded:
        return f"excluded: {UNNAMED_RULE}"
    return _IGNORED_WHY.get(family, "ignored: not used by the kit")


def family_lines(families: pd.DataFrame, limit: int = 12) -> list[str]:
    """Log lines: totals, then the excluded and the ignored families with their counts."""
    if families.empty:
        return []
    total = int(families["rows"].sum())
    used, excluded = int(families["used"].sum()), int(families["excluded"].sum())
    lines = [
        f"MEDS codes: {total} rows read in {len(families)} families; {used} used, "
        f"{excluded} excluded ({UNNAMED_RULE}), {total - used - excluded} ignored"
    ]
    for what in ("excluded", "ignored"):
        part = families[families[what] > 0].sort_values(what, ascending=False, kind="stable")
        shown = [f"{f} x{n}" for f, n in zip(part["family"], part[what], strict=True)]
        if shown:
            more = f", ... ({len(shown) - limit} more)" if len(shown) > limit else ""
            lines.append(f"MEDS codes {what}: " + ", ".join(shown[:limit]) + more)
    return lines


def unnamed_lines(exclusions: pd.DataFrame) -> list[str]:
    """``prescriptions: 12 rows excluded, name unknown ('name_unknown', e.g. MEDICATION//START//UNK)``
    per table, from the :data:`UNNAMED_RULE` rows of an exclusions table."""
    part = exclusions[exclusions["rule"] == UNNAMED_RULE]
    return [
        f"{table}: {len(rows)} rows excluded, name unknown ({UNNAMED_RULE!r}, "
        f"e.g. {rows['value'].iloc[0]})"
        for table, rows in part.groupby("table", sort=True)
    ]


_TABLE_OF_KIND = {
    "medication": ("prescriptions", "pharmacy_id"),
    "lab": ("labevents", "labevent_id"),
    "diagnosis": ("diagnoses_icd", None),
    "procedure": ("procedures_icd", None),
}


def unnamed_exclusions(con: duckdb.DuckDBPyConnection, subject_ids) -> pd.DataFrame:
    """The unnamed rows of ``subject_ids`` as exclusion rows (table, rule, key, subject_id,
    field, value; :data:`clinlib.data.plausibility.EXCLUSION_COLUMNS`): the MIMIC-shaped table
    the row would have fed, :data:`UNNAMED_RULE`, its content id, field ``code``, the code."""
    ids = pd.DataFrame({"subject_id": pd.Series(list(subject_ids), dtype="int64")})
    con.register("ct_unnamed_subjects", ids)
    cases = " ".join(
        f"WHEN {sql_literal(k)} THEN {sql_literal(t)}" for k, (t, _) in _TABLE_OF_KIND.items()
    )
    source = """SELECT d.* FROM meds_data d JOIN ct_unnamed_subjects s USING (subject_id)
                WHERE d.unnamed"""
    return (
        con.execute(f"""
        SELECT CASE kind {cases} END AS "table", {sql_literal(UNNAMED_RULE)} AS rule,
               CAST(content_id AS VARCHAR) AS key, subject_id, 'code' AS field, code AS value
        FROM ({with_content_id(source, "content_id")})
        ORDER BY subject_id, time, code, key
    """)
        .df()
        .astype({"subject_id": "int64"})
    )


def require_codes(meds_dir: Path) -> Path:
    """The cohort stage's refusal of a MEDS dataset without ``metadata/codes.parquet``.

    Without it every diagnosis and procedure is an ICD code with no title: nothing a
    dialogue could tell, so no patient would keep a dialogue. The kit ships no ICD
    vocabulary to fall back on (docs/real-data.md), so it refuses, naming the file.

    Raises:
        SourceSchemaError: one line naming the missing file and how to make it.
    """
    path = Path(meds_dir) / CODES_FILE
    if not path.is_file():
        raise SourceSchemaError(
            path,
            expected="the dataset's code descriptions (diagnosis and procedure titles)",
            found="no such file",
            hint="refused: the kit has no ICD vocabulary to fall back on; MEDS-transforms "
            "writes this file in its metadata stage",
        )
    return path
