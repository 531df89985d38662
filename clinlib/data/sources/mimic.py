"""Real MIMIC-IV hosp tables as lazy DuckDB views (paper §3 "Cohort"; Fig. 2 stage 1).

The paper samples its cohort from the MIMIC-IV hospital module (364,627 patients). This
module lets the kit's cohort and event builders run unchanged on a real, credentialed
MIMIC-IV directory: :func:`open_hosp` registers one DuckDB VIEW per hosp table, named like the
table, over ``<table>.parquet``, ``<table>.csv.gz`` or ``<table>.csv`` (v2.x and v3.x; extra
columns are kept). Nothing is loaded into pandas: a 100M-row ``labevents`` is scanned only by
the queries that use it.

CSVs are read with explicit column types (``clinlib.data.schema.HOSP_TABLES``) and MIMIC's quoting
(``quote='"', escape='"'``, MIT-LCP/mimic-code#1881): DuckDB's dialect auto-detection fails on
labevents, and codes such as ``icd_code`` "0066" or ``ndc`` "00904516561" must stay text.

Opening validates each table cheaply and fails with :class:`SourceSchemaError` naming the file,
the column, the expected type and what was found: the header (CSV) or the physical schema
(parquet) must hold every ``clinlib.data.schema.REQUIRED`` column, and for CSV a bounded sample of
rows, read as text, must convert with ``TRY_CAST``. A bad value beyond the sample still fails,
but only when a query reaches it (the price of not scanning 100M rows on open).
"""

from __future__ import annotations

import csv
import gzip
import re
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from clinlib.data.schema import HOSP_TABLES, REQUIRED
from clinlib.data.sources.csv_locate import locate_bad_encoding, value_line

# Preference order when several copies of a table exist: parquet is the fastest to scan.
SUFFIXES: tuple[str, ...] = (".parquet", ".csv.gz", ".csv")

# Rows read (as text) per CSV table on open to check that values convert to their types.
DEFAULT_SAMPLE_ROWS = 10_000

# MIMIC-IV's CSV dialect (mimic-code buildmimic/duckdb: HEADER, DELIM ',', QUOTE '"', ESCAPE '"').
CSV_OPTIONS = "header=true, delim=',', quote='\"', escape='\"'"


class SourceSchemaError(ValueError):
    """A source table or MEDS shard does not match the schema the kit needs.

    Attributes:
        file: the offending file (or table) path.
        column: the offending column, if any.
        expected: the expected type (or file / property).
        found: what was found instead (a type, a value, the columns present).
    """

    def __init__(
        self,
        file: str | Path,
        column: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = str(file)
        self.column = column
        self.expected = expected
        self.found = found
        what = ", ".join(
            f"{label} {value}"
            for label, value in (("expected", expected), ("found", found))
            if value is not None
        )
        parts = [self.file, f"column {column!r}" if column is not None else None, what or None]
        message = ": ".join(p for p in parts if p)
        if hint:
            message += f" ({hint})"
        super().__init__(message)


# --------------------------------------------------------------------------- locating files


def _hosp_dir(root: Path) -> Path:
    """``root/hosp`` if it exists, else ``root`` itself (the hosp folder was given)."""
    root = Path(root)
    if not root.exists():
        raise SourceSchemaError(root, expected="a MIMIC-IV directory (holding hosp/)", found="none")
    return root / "hosp" if (root / "hosp").is_dir() else root


def _check_tables(tables: Iterable[str] | None) -> list[str]:
    names = list(HOSP_TABLES) if tables is None else list(tables)
    unknown = [t for t in names if t not in HOSP_TABLES]
    if unknown:
        raise ValueError(f"unknown hosp table(s) {unknown}; known: {', '.join(HOSP_TABLES)}")
    return names


def hosp_table_paths(root: Path, tables: Iterable[str] | None = None) -> dict[str, Path]:
    """Locate each hosp table file under a MIMIC-IV directory.

    Args:
        root: MIMIC-IV directory holding ``hosp/``, or the ``hosp`` folder itself.
        tables: table names to locate (default: every table in ``HOSP_TABLES``).

    Returns:
        table name -> path of ``<table>.parquet`` (file or folder of parts), else
        ``<table>.csv.gz``, else ``<table>.csv``.

    Raises:
        SourceSchemaError: a table has none of these files.
    """
    hosp = _hosp_dir(Path(root))
    paths: dict[str, Path] = {}
    for table in _check_tables(tables):
        candidates = [hosp / f"{table}{suffix}" for suffix in SUFFIXES]
        found = next((p for p in candidates if p.exists()), None)
        if found is None:
            raise SourceSchemaError(
                hosp / f"{table}.csv.gz",
                expected=f"table file {' or '.join(p.name for p in candidates)}",
                found="no such file",
                hint=f"needs columns {', '.join(REQUIRED[table])}",
            )
        paths[table] = found
    return paths


# --------------------------------------------------------------------------- SQL helpers


def _lit(text: str | Path) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + str(text).replace("'", "''") + "'"


def _ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _struct(columns: dict[str, str]) -> str:
    """DuckDB struct literal for read_csv's ``columns=`` argument."""
    return "{" + ", ".join(f"{_lit(c)}: {_lit(t)}" for c, t in columns.items()) + "}"


# --------------------------------------------------------------------------- CSV tables


def _csv_header(path: Path) -> list[str]:
    """Column names from a (possibly gzipped) CSV's first line, lower-cased."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:  # the first line only: a bad byte later is DuckDB's
            first = handle.readline().decode("utf-8")
        header = next(csv.reader([first]), None)
    except UnicodeDecodeError:
        line, column, cause = locate_bad_encoding(path) or (1, None, "not UTF-8")
        raise SourceSchemaError(
            path, column=column, expected="UTF-8 text", found=cause, hint=f"line {line}"
        ) from None
    except (OSError, EOFError) as err:
        raise SourceSchemaError(path, expected="a readable CSV file", found=str(err)) from None
    if not header:
        raise SourceSchemaError(path, expected="a header line", found="an empty file")
    # A UTF-8 BOM (Excel's "CSV UTF-8") sticks to the first name; DuckDB skips it in the data.
    return [name.strip().lstrip("\ufeff").strip().lower() for name in header]


def _check_required(table: str, path: Path, present: Iterable[str]) -> None:
    """Raise on the first REQUIRED column of ``table`` missing from ``present``."""
    present = set(present)
    for column in REQUIRED[table]:
        if column not in present:
            raise SourceSchemaError(
                path,
                column=column,
                expected=HOSP_TABLES[table][column],
                found="no such column",
                hint=f"columns present: {', '.join(sorted(present))}",
            )


def _check_csv_sample(
    con: duckdb.DuckDBPyConnection, table: str, path: Path, header: list[str], sample_rows: int
) -> None:
    """TRY_CAST a bounded sample, read as text, to every typed column; raise on the first miss."""
    typed = {
        c: HOSP_TABLES[table][c]
        for c in header
        if HOSP_TABLES[table].get(c, "VARCHAR") != "VARCHAR"
    }
    as_text = dict.fromkeys(header, "VARCHAR")
    aggregates = ", ".join(
        f"first({_ident(c)}) FILTER (WHERE {_ident(c)} IS NOT NULL "
        f"AND (TRY_CAST({_ident(c)} AS {t}) IS NULL{_offset_sql(c, t)})) AS {_ident(c)}"
        for c, t in typed.items()
    )
    # count(*) keeps the query valid when no column is typed, and proves the sample parses.
    sql = (
        f"SELECT count(*) AS _n{', ' + aggregates if aggregates else ''} FROM ("
        f"SELECT * FROM read_csv({_lit(path)}, {CSV_OPTIONS}, columns={_struct(as_text)}) "
        f"LIMIT {int(sample_rows)})"
    )
    try:
        row = con.execute(sql).fetchone()
    except duckdb.Error as err:
        raise source_error(err, path) from None
    if row[0] == 0:
        # A header-only table otherwise yields an empty cohort with no word about why.
        raise SourceSchemaError(
            path,
            expected="at least one data row",
            found="a header only",
            hint=f"{table} needs columns {', '.join(REQUIRED[table])}",
        )
    for (column, expected), bad in zip(typed.items(), row[1:], strict=True):
        if bad is not None:
            line = value_line(path, column, bad, sample_rows)  # the aggregate names no row
            offset = expected == "TIMESTAMP" and re.search(UTC_OFFSET_RE, bad.strip())
            raise SourceSchemaError(
                path,
                column=column,
                expected="TIMESTAMP without a UTC offset (DuckDB would drop it)"
                if offset
                else expected,
                found=f"value {bad!r}",
                hint=f"line {line}" if line else f"first {sample_rows} rows checked",
            )


# A time with a UTC offset or a Z: DuckDB's TIMESTAMP cast drops the offset without a word,
# shifting the time; MIMIC's times are local (and date-shifted), so such a value is refused.
UTC_OFFSET_RE = r"\d:\d\d(:\d\d(\.\d+)?)?\s*(Z|[+-]\d\d(:?\d\d)?)$"


def _offset_sql(column: str, sql_type: str) -> str:
    if sql_type != "TIMESTAMP":
        return ""
    return f" OR regexp_matches(trim({_ident(column)}), '{UTC_OFFSET_RE}')"


_CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")
_CSV_FILE = re.compile(r"^\s*file = (.+)$", re.M)
_CONVERT = re.compile(r'converting column "([^"]+)"\. Could not convert string "(.*)" to \'(\w+)\'')
_COLUMNS = re.compile(r"Expected Number of Columns: (\d+) Found: (\d+)")


def source_error(err: duckdb.Error, path: str | Path | None = None) -> SourceSchemaError:
    """A one-line :class:`SourceSchemaError` for a DuckDB read error.

    DuckDB's CSV errors span ~40 lines; this keeps the file, the line, and the column and
    value (a conversion), the field counts (a ragged row) or the unterminated quote.
    """
    text = str(err)
    if (refused := _refused_timestamp(text)) is not None:
        return refused
    file = _CSV_FILE.search(text)
    where = file.group(1).strip() if file else (path or "source table")
    line = _CSV_LINE.search(text)
    at = f"line {line.group(1)}" if line else None
    if m := _CONVERT.search(text):
        return SourceSchemaError(
            where, column=m.group(1), expected=m.group(3), found=f"value {m.group(2)!r}", hint=at
        )
    if m := _COLUMNS.search(text):
        return SourceSchemaError(
            where, expected=f"{m.group(1)} fields", found=f"{m.group(2)} (a ragged row)", hint=at
        )
    if "unterminated quote" in text:
        return SourceSchemaError(
            where, expected='a closing quote (")', found="an unterminated quote", hint=at
        )
    if "Invalid unicode" in text and Path(where).is_file():
        # DuckDB names a line (its "Original Line" is another one) but no column or byte.
        found = locate_bad_encoding(where)
        if found is not None:
            line, column, cause = found
            return SourceSchemaError(
                where, column=column, expected="UTF-8 text", found=cause, hint=f"line {line}"
            )
    if path is not None and not str(path).endswith(".parquet") and Path(path).is_file():
        # DuckDB's sniffer reports no line on a small file: find it with the csv module.
        problem = _locate_csv_problem(Path(path))
        if problem is not None:
            line, expected, found = problem
            return SourceSchemaError(where, expected=expected, found=found, hint=f"line {line}")
    first = (text.strip().splitlines() or [type(err).__name__])[0]
    return SourceSchemaError(
        where, expected="MIMIC-IV CSV (comma, double-quote escaped)", found=first, hint=at
    )


def _locate_csv_problem(path: Path, max_rows: int = DEFAULT_SAMPLE_ROWS):
    """(line, expected, found) of the first ragged row or unterminated quote, or None."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, strict=True)
        try:
            width = len(next(reader))
            start = reader.line_num + 1
            for n, row in enumerate(reader):
                if len(row) != width and row:
                    return start, f"{width} fields", f"{len(row)} (a ragged row)"
                if n >= max_rows:
                    return None
                start = reader.line_num + 1
        except csv.Error:
            return start, 'a closing quote (")', "an unterminated quote"
        except (StopIteration, UnicodeDecodeError, OSError):
            return None
    return None


def _csv_view_sql(table: str, path: Path, header: list[str]) -> str:
    # Every column gets an explicit type (unknown v3.x extras stay text), so nothing is guessed.
    # TIMESTAMP columns are read as text and cast in the view, so that a value past the
    # open-time sample with a UTC offset (which DuckDB's cast would drop without a word) or that
    # is no timestamp at all stops the query with the file, column and value
    # (:func:`source_error` adds the line).
    types = {c: HOSP_TABLES[table].get(c, "VARCHAR") for c in header}
    stamps = [c for c, t in types.items() if t == "TIMESTAMP"]
    read = {c: ("VARCHAR" if c in stamps else t) for c, t in types.items()}
    source = f"read_csv({_lit(path)}, {CSV_OPTIONS}, columns={_struct(read)})"
    if not stamps:
        return f"SELECT * FROM {source}"
    cast = ", ".join(f"{_timestamp_sql(path, c)} AS {_ident(c)}" for c in stamps)
    return f"SELECT * REPLACE ({cast}) FROM {source}"


# The message a view raises on a timestamp it refuses: marker, kind, file, column, value.
_STAMP_MARK = "ct_timestamp_refused"
_SEP = "\x1f"


def _timestamp_sql(path: Path, column: str) -> str:
    """SQL: ``column`` (text) as a TIMESTAMP, or an error naming file, column and value."""
    col = _ident(column)

    def refuse(kind: str) -> str:
        parts = " || chr(31) || ".join([_lit(_STAMP_MARK), _lit(kind), _lit(path), _lit(column)])
        return f"error({parts} || chr(31) || {col})"

    return (
        f"CASE WHEN {col} IS NULL THEN NULL "
        f"WHEN length({col}) > 16 AND regexp_matches(trim({col}), '{UTC_OFFSET_RE}') "
        f"THEN {refuse('offset')} "
        f"WHEN TRY_CAST({col} AS TIMESTAMP) IS NULL THEN {refuse('value')} "
        f"ELSE CAST({col} AS TIMESTAMP) END"
    )


def _refused_timestamp(text: str) -> SourceSchemaError | None:
    """The one-line error for a timestamp a CSV view refused (:func:`_timestamp_sql`)."""
    at = text.find(_STAMP_MARK + _SEP)
    if at < 0:
        return None
    _, kind, file, column, value = text[at:].split(_SEP, 4)
    value = value.splitlines()[0] if value else value
    line = value_line(file, column, value, max_rows=10**12)  # only on this error path
    return SourceSchemaError(
        file,
        column=column,
        expected="TIMESTAMP without a UTC offset (DuckDB would drop it)"
        if kind == "offset"
        else "TIMESTAMP",
        found=f"value {value!r}",
        hint=f"line {line}" if line else None,
    )


# --------------------------------------------------------------------------- parquet tables


def _parquet_source(path: Path) -> str:
    return str(path / "**" / "*.parquet") if path.is_dir() else str(path)


def _arrow_schema(path: Path) -> pa.Schema:
    try:
        if path.is_dir():
            return pads.dataset(path, format="parquet").schema
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise SourceSchemaError(path, expected="a readable parquet file", found=str(err)) from None


def _family_ok(expected: str, arrow_type: pa.DataType) -> bool:
    """Whether a physical parquet type converts without loss of meaning to ``expected``."""
    t = arrow_type
    if pa.types.is_null(t):  # an all-null column converts to anything
        return True
    if pa.types.is_dictionary(t):
        t = t.value_type
    if expected in ("INTEGER", "SMALLINT", "BIGINT"):
        # pandas writes an integer column with nulls (labevents.hadm_id) as float64.
        return pa.types.is_integer(t) or pa.types.is_floating(t)
    if expected in ("DOUBLE", "REAL"):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    if expected == "VARCHAR":
        # Codes stored as numbers have lost their leading zeros ("0066" -> 66): refuse them.
        return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
    if expected in ("TIMESTAMP", "DATE"):
        naive_ts = pa.types.is_timestamp(t) and t.tz is None
        return naive_ts or pa.types.is_date(t)
    raise ValueError(f"no type family for {expected}")


def _parquet_view_sql(table: str, path: Path, schema: pa.Schema) -> str:
    known = HOSP_TABLES[table]
    select = []
    for name in schema.names:
        low = name.lower()
        if low in known:
            select.append(f"CAST({_ident(name)} AS {known[low]}) AS {_ident(low)}")
        else:
            select.append(_ident(name))
    return f"SELECT {', '.join(select)} FROM read_parquet({_lit(_parquet_source(path))})"


def _check_parquet(table: str, path: Path, schema: pa.Schema) -> None:
    by_lower = {name.lower(): schema.field(name).type for name in schema.names}
    _check_required(table, path, by_lower)
    for column, expected in HOSP_TABLES[table].items():
        if column in by_lower and not _family_ok(expected, by_lower[column]):
            raise SourceSchemaError(
                path, column=column, expected=expected, found=f"parquet type {by_lower[column]}"
            )


# --------------------------------------------------------------------------- primary keys

# Keys whose duplicates would silently multiply events (a repeated admissions row
# doubles every event of that admission). Both tables are small, so a full scan is cheap;
# labevents' labevent_id is checked over the cohort's rows only (clinlib.data.build.build_cohort).
PRIMARY_KEYS: dict[str, str] = {"patients": "subject_id", "admissions": "hadm_id"}


def check_unique(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key: str,
    path: str | Path,
    subjects: Iterable[int] | None = None,
) -> None:
    """Raise :class:`SourceSchemaError` naming the first duplicated ``key`` value of ``table``.

    Args:
        con: a connection with the hosp views.
        table: the view name.
        key: its primary-key column.
        path: the table's file (for the message).
        subjects: check only these patients' rows (a big table); the message then gives the
            count instead of the rows, which would need a numbered scan of the whole file.
    """
    col, view = _ident(key), _ident(table)
    if subjects is None:
        sql = (
            f"SELECT {col}, list(rn ORDER BY rn)[1:2], count(*) FROM (SELECT {col}, "
            f"row_number() OVER () AS rn FROM {view}) WHERE {col} IS NOT NULL GROUP BY 1 "
            f"HAVING count(*) > 1 ORDER BY min(rn) LIMIT 1"
        )
    else:
        ids = ", ".join(str(int(s)) for s in subjects) or "NULL"
        sql = (
            f"SELECT {col}, NULL, count(*) FROM {view} WHERE {col} IS NOT NULL "
            f"AND subject_id IN ({ids}) GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 1"
        )
    try:
        row = con.execute(sql).fetchone()
    except duckdb.Error as err:
        raise source_error(err, path) from None
    if row is None:
        return
    value, rows, n = row
    where = f"{n} rows"
    if rows:
        # row_number counts data rows; a CSV's line adds the header.
        unit, off = ("line", 1) if not str(path).endswith(".parquet") else ("row", 0)
        where = f"{unit}s " + " and ".join(str(r + off) for r in rows)
    raise SourceSchemaError(
        path,
        column=key,
        expected="unique values (a primary key)",
        found=f"value {value} on {where}",
    )


# --------------------------------------------------------------------------- public API


def open_hosp(
    root: Path,
    con: duckdb.DuckDBPyConnection | None = None,
    tables: Iterable[str] | None = None,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
) -> duckdb.DuckDBPyConnection:
    """Register one lazy DuckDB VIEW per MIMIC-IV hosp table, after a schema check.

    Args:
        root: MIMIC-IV directory holding ``hosp/``, or the ``hosp`` folder itself.
        con: connection to register the views in (default: a new in-memory one).
        tables: tables to open (default: all of ``clinlib.data.schema.HOSP_TABLES``).
        sample_rows: CSV rows per table whose values are type-checked on open.

    Returns:
        The connection, with views ``patients``, ``admissions``, ``labevents``, ... whose
        known columns have the ``HOSP_TABLES`` types (extra columns kept, CSV extras as text).

    Raises:
        SourceSchemaError: a missing file, a missing required column, or a value / parquet
            type that does not convert to the expected type; the message names file, column,
            expected type and what was found.
    """
    con = duckdb.connect() if con is None else con
    paths = hosp_table_paths(root, tables)
    views: dict[str, str] = {}
    for table, path in paths.items():
        if path.name.endswith(".parquet"):
            schema = _arrow_schema(path)
            _check_parquet(table, path, schema)
            views[table] = _parquet_view_sql(table, path, schema)
        else:
            header = _csv_header(path)
            _check_required(table, path, header)
            _check_csv_sample(con, table, path, header, sample_rows)
            views[table] = _csv_view_sql(table, path, header)
    # Register only after every table passed, so a failed open leaves no half-set connection.
    for table, sql in views.items():
        con.execute(f"CREATE OR REPLACE VIEW {_ident(table)} AS {sql}")
    return con


def describe_source(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Row counts of the hosp views present in ``con`` (a full scan of each; for notebooks).

    Args:
        con: a connection from :func:`open_hosp` or ``clinlib.data.sources.meds.open_meds``.

    Returns:
        DataFrame with columns ``table`` (str) and ``rows`` (int64), in ``HOSP_TABLES`` order.
    """
    present = {
        name
        for (name,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal "
            "UNION SELECT table_name FROM duckdb_tables()"
        ).fetchall()
    }
    rows = [
        (table, con.execute(f"SELECT count(*) FROM {_ident(table)}").fetchone()[0])
        for table in HOSP_TABLES
        if table in present
    ]
    return pd.DataFrame(
        {
            "table": pd.Series([t for t, _ in rows], dtype="string"),
            "rows": pd.Series([n for _, n in rows], dtype="int64"),
        }
    )
