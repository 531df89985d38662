"""Writers of the SYNTHETIC hosp tables: MIMIC-style gzip CSV (byte-identical on every run)
or parquet, appended one chunk at a time (paper §3 "Cohort"; docs/design.md "The artifact
contract").
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from clinlib.data.sources.synthetic.arrow import WRITTEN_TABLES, arrow_schema, str_array
from clinlib.data.sources.synthetic.design import DAY_S

_CSV_NEEDS_QUOTE = r'[",\r\n]'
_CSV_SLICE_ROWS = 500_000


@lru_cache(maxsize=1)
def _clock_strings() -> pa.Array:
    """ "HH:MM:SS" for every second of the day (index = seconds since midnight)."""
    return str_array(
        f"{h:02d}:{m:02d}:{sec:02d}" for h in range(24) for m in range(60) for sec in range(60)
    )


def _format_timestamps(col: pa.Array) -> pa.Array:
    """Timestamps as 'YYYY-MM-DD HH:MM:SS' (one formatting per distinct day, then a gather)."""
    micros = pc.fill_null(col.cast(pa.int64()), 0).to_numpy()
    seconds = micros // 1_000_000
    days, clock = np.divmod(seconds, DAY_S)
    uniq, inverse = np.unique(days, return_inverse=True)
    dates = str_array(np.datetime_as_string(uniq.astype("datetime64[D]")).tolist())
    mask = pc.is_null(col).to_numpy(zero_copy_only=False) if col.null_count else None
    date_part = dates.take(pa.array(inverse.astype(np.int32), mask=mask))
    clock_part = _clock_strings().take(pa.array(clock.astype(np.int32)))
    return pc.binary_join_element_wise(date_part, clock_part, " ")


def _csv_column(col: pa.ChunkedArray | pa.Array, sql_type: str) -> pa.Array:
    """One column as CSV text: NULL -> empty, strings quoted only when they must be."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if sql_type == "TIMESTAMP":
        return _format_timestamps(col)
    if sql_type == "VARCHAR":
        # Decide on the distinct values (few) rather than on every row.
        distinct = pc.unique(col)
        needs = pc.fill_null(pc.match_substring_regex(distinct, _CSV_NEEDS_QUOTE), False)
        if not pc.any(needs).as_py():
            return col
        rows = pc.is_in(col, value_set=distinct.filter(needs))
        quoted = pc.binary_join_element_wise('"', pc.replace_substring(col, '"', '""'), '"', "")
        return pc.if_else(rows, quoted, col)
    return pc.cast(col, pa.string())


def csv_bytes(table: pa.Table, name: str) -> Iterator[bytes]:
    """Serialise rows of a hosp table as MIMIC-style CSV lines (no header), in slices.

    Args:
        table: rows with the schema of ``name``.
        name: hosp table name (gives each column's SQL type).

    Yields:
        ``bytes`` blocks, each a whole number of ``\\n``-terminated lines.
    """
    types = list(WRITTEN_TABLES[name].values())
    for start in range(0, table.num_rows, _CSV_SLICE_ROWS):
        part = table.slice(start, _CSV_SLICE_ROWS)
        cols = [_csv_column(part.column(i), types[i]) for i in range(part.num_columns)]
        lines = pc.binary_join_element_wise(
            *cols, ",", null_handling="replace", null_replacement=""
        )
        lines = pc.binary_join_element_wise(lines, pa.scalar("\n"), "")
        lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
        lo, hi = offsets[lines.offset], offsets[lines.offset + len(lines)]
        yield memoryview(lines.buffers()[2])[lo:hi].tobytes()


class Sink:
    """Appends arrow tables to one output file (parquet row groups or a gzip CSV stream)."""

    def __init__(self, path: Path, name: str, fmt: str) -> None:
        self.name, self.fmt = name, fmt
        self.rows = 0
        if fmt == "parquet":
            self._writer = pq.ParquetWriter(path, arrow_schema(name), compression="zstd")
        else:
            self._raw = open(path, "wb")  # closed in close()
            # mtime=0 and no file name in the header: identical bytes on every run. Level 1
            # is 4x faster than the default 9 for ~25% larger files (still ~18 bytes per
            # labevents row, about what PhysioNet's own files take).
            self._gz = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=1
            )
            self._gz.write((",".join(WRITTEN_TABLES[name]) + "\n").encode())

    def write(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        if self.fmt == "parquet":
            self._writer.write_table(table, row_group_size=1_000_000)
        else:
            for block in csv_bytes(table, self.name):
                self._gz.write(block)

    def close(self) -> None:
        if self.fmt == "parquet":
            self._writer.close()
        else:
            self._gz.close()
            self._raw.close()
