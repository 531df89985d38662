"""MIMIC-shaped DuckDB views over a MEDS dataset, so the cohort builder runs unchanged on it
(paper §3 "Cohort", Fig. 2 stages 1–2): ``meds_data`` with an event kind per row,
``meds_codes``, the per-kind profile, and :func:`open_meds`.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from clinlib.data.sources.meds.families import unnamed_sql
from clinlib.data.sources.meds.format import EVENT_ID_PATTERN, EXTRA_COLUMNS
from clinlib.data.sources.meds.hosp_sql import (
    CONFLICTING_HADM_SQL,
    admission_spans_sql,
    views_sql,
)
from clinlib.data.sources.meds.ranges import check_id_ranges
from clinlib.data.sources.meds.read import (
    check_data,
    check_schemas,
    is_text,
    meds_shards,
    read_schema,
    scan_sql,
    sql_literal,
)
from clinlib.data.sources.mimic import SourceSchemaError


def _kind_sql(has_starts: bool = False) -> str:
    # STOP rows (MEDS-transforms' MEDICATION//STOP//<drug>) mark an order's end, not a new order.
    # With START rows (orders, from MIMIC's pharmacy table) every other MEDICATION row is an
    # eMAR administration (MEDICATION//<drug>//<event_txt>), not a new order.
    medication = (
        "starts_with(code, 'MEDICATION//START//')"
        if has_starts
        else "starts_with(code, 'MEDICATION//') AND NOT starts_with(code, 'MEDICATION//STOP//')"
    )
    return f"""CASE
        WHEN starts_with(code, 'HOSPITAL_ADMISSION//') THEN 'admission'
        WHEN starts_with(code, 'HOSPITAL_DISCHARGE//') THEN 'discharge'
        WHEN starts_with(code, 'LAB//') THEN 'lab'
        WHEN {medication} THEN 'medication'
        WHEN starts_with(code, 'DIAGNOSIS//ICD//') THEN 'diagnosis'
        WHEN starts_with(code, 'PROCEDURE//ICD//') THEN 'procedure'
    END"""


def _data_view_sql(shards: list[Path], names: set[str], has_starts: bool = False) -> str:
    select = [
        "CAST(subject_id AS BIGINT) AS subject_id",
        "CAST(time AS TIMESTAMP) AS time",
        "CAST(code AS VARCHAR) AS code",
        "CAST(numeric_value AS FLOAT) AS numeric_value"
        if "numeric_value" in names
        else "CAST(NULL AS FLOAT) AS numeric_value",
        "CAST(text_value AS VARCHAR) AS text_value"
        if "text_value" in names
        else "CAST(NULL AS VARCHAR) AS text_value",
    ]
    for column, dtype in EXTRA_COLUMNS.items():
        # TRY_CAST: a third-party extra column of an odd type must not break the core views.
        source = f'TRY_CAST("{column}" AS {dtype})' if column in names else f"CAST(NULL AS {dtype})"
        select.append(f"{source} AS {column}")
    kind = _kind_sql(has_starts)
    select += ["filename AS meds_shard", "file_row_number AS meds_row", f"{kind} AS kind"]
    inner = f"SELECT {', '.join(select)} FROM {scan_sql(shards)}"
    return f"SELECT *, {unnamed_sql()} AS unnamed FROM ({inner})"


def _codes_view_sql(meds_dir: Path) -> str:
    path = Path(meds_dir) / "metadata" / "codes.parquet"
    if not path.exists():
        return "SELECT CAST(NULL AS VARCHAR) AS code, CAST(NULL AS VARCHAR) AS description LIMIT 0"
    schema = read_schema(path)
    if "code" not in schema.names:
        raise SourceSchemaError(path, column="code", expected="string", found="no such column")
    for column in ("code", "description"):
        if column in schema.names and not (
            is_text(schema.field(column).type) or pa.types.is_null(schema.field(column).type)
        ):
            raise SourceSchemaError(
                path, column=column, expected="string", found=str(schema.field(column).type)
            )
    description = "CAST(description AS VARCHAR)" if "description" in schema.names else "NULL"
    return (
        f"SELECT CAST(code AS VARCHAR) AS code, {description} AS description "
        f"FROM read_parquet({sql_literal(path)})"
    )


def _profile(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    """Per kind: rows, whether hadm_id is present, whether every event_id yields an id."""
    cases = " ".join(
        f"WHEN {sql_literal(k)} THEN TRY_CAST(regexp_extract(event_id, {sql_literal(p)}, 1) AS INTEGER)"
        for k, p in EVENT_ID_PATTERN.items()
    )
    rows = con.execute(
        f"""
        SELECT kind, count(*), count(hadm_id),
               count(CASE kind {cases} END), max(hadm_id), min(hadm_id)
        FROM meds_data WHERE kind IS NOT NULL GROUP BY kind
        """
    ).fetchall()
    return {
        kind: {
            "rows": n,
            "hadm": n_hadm > 0,
            "ids": kind in EVENT_ID_PATTERN and n_ids == n,
            "hadm_range": (lo, hi),
        }
        for kind, n, n_hadm, n_ids, hi, lo in rows
    }


def open_meds(
    meds_dir: Path, con: duckdb.DuckDBPyConnection | None = None, validate: bool = True
) -> duckdb.DuckDBPyConnection:
    """Register MIMIC-shaped hosp VIEWS derived from a MEDS dataset's codes.

    Args:
        meds_dir: MEDS dataset root (data/**/*.parquet, optional metadata/codes.parquet).
        con: connection to register the views in (default: a new in-memory one).
        validate: also check sort order, non-null subject/code and one shard per subject
            (a scan of three columns); the shard schemas are always checked.

    Returns:
        The connection, with the nine ``HOSP_TABLES`` views (all their columns, MIMIC types;
        NULL where MEDS has no counterpart) plus ``meds_data`` (all rows, with ``kind``,
        ``meds_shard``, ``meds_row`` and ``unnamed``: the row's name is unknown, families
        module), ``meds_codes`` and ``meds_admission_spans``. Ids are BIGINT
        (:data:`~clinlib.data.sources.meds.format.ID_TYPES`).

    Raises:
        SourceSchemaError: naming the shard and column on a schema or data violation.
    """
    meds_dir = Path(meds_dir)
    shards = meds_shards(meds_dir)
    names = check_schemas(shards)
    codes_sql = _codes_view_sql(meds_dir)
    con = duckdb.connect() if con is None else con
    if validate:
        check_data(con, shards)
    starts = con.execute(
        f"SELECT count(*) FROM {scan_sql(shards, 'code')} "
        "WHERE starts_with(code, 'MEDICATION//START//')"
    ).fetchone()[0]
    view = _data_view_sql(shards, names, has_starts=starts > 0)
    con.execute(f"CREATE OR REPLACE VIEW meds_data AS {view}")
    con.execute(f"CREATE OR REPLACE VIEW meds_codes AS {codes_sql}")
    profile = _profile(con)
    check_id_ranges(con, profile, shards)
    conflict = con.execute(CONFLICTING_HADM_SQL).fetchone()
    if conflict:
        hadm, shard, rows = conflict
        raise SourceSchemaError(
            shard,
            column="hadm_id",
            expected="one HOSPITAL_ADMISSION row per hadm_id (exact copies are de-duplicated)",
            found=f"hadm_id {hadm} on {len(rows)} different rows: {'; '.join(rows[:2])}",
        )
    con.execute(f"CREATE OR REPLACE VIEW meds_admission_spans AS {admission_spans_sql(profile)}")
    ranges_given = bool(names & {"ref_low", "ref_high", "flag"})
    for table, sql in views_sql(profile, ranges_given).items():
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {sql}")
    return con
