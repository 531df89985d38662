"""Reading and validating a MEDS dataset (paper §3 "Cohort"): shards, core-column schema
checks, non-null / sort-order / one-shard-per-subject checks, and :func:`read_meds`.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.data.sources.mimic import SourceSchemaError


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.as_posix())]


def meds_shards(meds_dir: Path) -> list[Path]:
    """The data shards of a MEDS dataset (``data/**/*.parquet``), in natural path order.

    Args:
        meds_dir: MEDS dataset root.

    Returns:
        Shard paths.

    Raises:
        SourceSchemaError: no ``data/`` folder or no parquet shard in it.
    """
    data = Path(meds_dir) / "data"
    if not data.is_dir():
        raise SourceSchemaError(data, expected="a MEDS data/ folder", found="no such folder")
    shards = sorted((p for p in data.rglob("*.parquet") if p.is_file()), key=_natural_key)
    if not shards:
        raise SourceSchemaError(data, expected="data/**/*.parquet shards", found="none")
    return shards


def is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _core_type_ok(column: str, t: pa.DataType) -> bool:
    if column == "subject_id":
        return pa.types.is_int64(t)
    if column == "time":
        return pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None
    if column == "code":
        return is_text(t)
    if column == "numeric_value":
        return pa.types.is_float32(t) or pa.types.is_null(t)
    if column == "text_value":
        return is_text(t) or pa.types.is_null(t)
    raise ValueError(column)


CORE_EXPECTED = {
    "subject_id": "int64",
    "time": "timestamp[us]",
    "code": "string",
    "numeric_value": "float32",
    "text_value": "string",
}


def read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise SourceSchemaError(path, expected="a readable parquet file", found=str(err)) from None


def check_schemas(shards: list[Path]) -> set[str]:
    """Check every shard's core columns; return the union of column names."""
    names: set[str] = set()
    for path in shards:
        schema = read_schema(path)
        for column, expected in CORE_EXPECTED.items():
            if column not in schema.names:
                if column in ("numeric_value", "text_value"):  # optional in MEDS 0.4
                    continue
                raise SourceSchemaError(
                    path, column=column, expected=expected, found="no such column"
                )
            found = schema.field(column).type
            if not _core_type_ok(column, found):
                raise SourceSchemaError(path, column=column, expected=expected, found=str(found))
        names.update(schema.names)
    return names


def sql_literal(text: str | Path) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def scan_sql(shards: list[Path], columns: str = "*") -> str:
    files = "[" + ", ".join(sql_literal(p) for p in shards) + "]"
    return (
        f"(SELECT {columns} FROM read_parquet({files}, filename=true, "
        f"file_row_number=true, union_by_name=true))"
    )


def check_data(con: duckdb.DuckDBPyConnection, shards: list[Path]) -> None:
    """Non-null subject/code, sort order within shards, one shard per subject."""
    scan = scan_sql(shards, "filename, file_row_number, subject_id, time, code")
    row = con.execute(
        f"SELECT filename, file_row_number, subject_id IS NULL FROM {scan} "
        "WHERE subject_id IS NULL OR code IS NULL ORDER BY filename, file_row_number LIMIT 1"
    ).fetchone()
    if row:
        column = "subject_id" if row[2] else "code"
        raise SourceSchemaError(
            row[0], column=column, expected="non-null", found=f"null in row {row[1]}"
        )
    row = con.execute(
        f"""
        SELECT filename, r, subject_id, time, ps, pt FROM (
            SELECT filename, file_row_number AS r, subject_id, time,
                   lag(subject_id) OVER w AS ps, lag(time) OVER w AS pt
            FROM {scan}
            WINDOW w AS (PARTITION BY filename ORDER BY file_row_number)
        )
        WHERE subject_id < ps
           OR (subject_id = ps AND ((time IS NULL AND pt IS NOT NULL) OR time < pt))
        ORDER BY filename, r LIMIT 1
        """
    ).fetchone()
    if row:
        filename, r, sid, t, ps, pt = row
        column = "subject_id" if sid < ps else "time"
        raise SourceSchemaError(
            filename,
            column=column,
            expected="rows sorted by subject_id, then time (static rows first)",
            found=f"row {r} (subject {sid}, time {t}) after (subject {ps}, time {pt})",
        )
    row = con.execute(
        f"SELECT subject_id, list(DISTINCT filename ORDER BY filename) FROM {scan} "
        "GROUP BY subject_id HAVING count(DISTINCT filename) > 1 ORDER BY subject_id LIMIT 1"
    ).fetchone()
    if row:
        raise SourceSchemaError(
            row[1][0],
            column="subject_id",
            expected="each subject in exactly one shard",
            found=f"subject {row[0]} also in {', '.join(row[1][1:])}",
        )


def read_meds(meds_dir: Path) -> pd.DataFrame:
    """Read and validate a MEDS dataset's data shards.

    Args:
        meds_dir: MEDS dataset root.

    Returns:
        All rows in shard order: subject_id int64, time datetime64[us], code string,
        numeric_value float32, text_value string, then any extra columns.

    Raises:
        SourceSchemaError: naming the shard and column on a missing column, a wrong type, a
            null subject_id / code, unsorted subject/time, or a subject split across shards.
    """
    shards = meds_shards(meds_dir)
    check_schemas(shards)
    check_data(duckdb.connect(), shards)
    tables = [pq.read_table(p) for p in shards]
    table = pa.concat_tables(tables, promote_options="permissive")
    df = table.to_pandas()
    for column in ("numeric_value", "text_value"):
        if column not in df.columns:
            df[column] = pd.NA
    df["subject_id"] = df["subject_id"].astype("int64")
    df["time"] = df["time"].astype("datetime64[us]")
    df["code"] = df["code"].astype("string")
    df["numeric_value"] = df["numeric_value"].astype("float32")
    df["text_value"] = df["text_value"].astype("string")
    core = list(CORE_EXPECTED)
    return df[core + [c for c in df.columns if c not in core]]


def split_coverage(meds_dir: Path, shards: list[Path]) -> list[tuple[str, int, int, Path]]:
    """Per split that ``metadata/subject_splits.parquet`` lists and ``data/<split>/`` holds:
    (split, subjects listed, of them present in the split's shards, the split folder).
    Nothing when the dataset has no splits file or keeps its shards directly in ``data/``."""
    path = Path(meds_dir) / "metadata" / "subject_splits.parquet"
    if not path.exists():
        return []
    names = read_schema(path).names
    if "subject_id" not in names or "split" not in names:
        raise SourceSchemaError(
            path, column="split", expected="subject_id and split columns", found=str(names)
        )
    listed = pq.read_table(path, columns=["subject_id", "split"]).to_pandas()
    data = Path(meds_dir) / "data"
    out = []
    for split, part in listed.groupby("split", sort=True):
        folder = data / str(split)
        mine = [p for p in shards if folder in p.parents]
        if not folder.is_dir():
            continue
        present: set[int] = set()
        for shard in mine:
            present |= set(pq.read_table(shard, columns=["subject_id"])["subject_id"].to_pylist())
        ids = set(part["subject_id"].astype("int64"))
        out.append((str(split), len(ids), len(ids & present), folder))
    return out
