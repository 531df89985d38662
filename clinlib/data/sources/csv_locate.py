"""Where in a CSV a read error sits: the line, the column and the cause.

DuckDB names the line of some CSV errors but not of others: a value that fails the typed
sample check of :mod:`clinlib.data.sources.mimic` comes from an aggregate (no line), and a
non-UTF-8 byte gives "CSV Error on Line: N" with no column and an unrelated "Original Line".
These helpers find what DuckDB left out by reading the file itself, only on the error path.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
from pathlib import Path

_CHUNK = 1 << 20


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def locate_bad_encoding(path: str | Path) -> tuple[int, str | None, str] | None:
    """(line, column, cause) of the first byte sequence that is not UTF-8, or None.

    The line is the physical line (1 = the header); the column is the header name of the
    field holding the byte (None when the line does not split into the header's fields);
    the cause names the byte and how to fix it.
    """
    path = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8")()
    newlines = 0  # lines fully decoded before the current chunk
    line_start = b""  # bytes of the current line so far, from earlier chunks
    header: bytes | None = None
    try:
        with _open_binary(path) as fh:
            while chunk := fh.read(_CHUNK):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    return _describe(chunk, err, newlines, line_start, header)
                if header is None and b"\n" in line_start + chunk:
                    header = (line_start + chunk).split(b"\n", 1)[0]
                newlines += chunk.count(b"\n")
                tail = chunk.rsplit(b"\n", 1)
                line_start = tail[-1] if len(tail) > 1 else line_start + chunk
    except (OSError, EOFError):
        return None
    return None


def _describe(
    chunk: bytes, err: UnicodeDecodeError, newlines: int, line_start: bytes, header: bytes | None
) -> tuple[int, str | None, str]:
    before = chunk[: err.start]
    line = newlines + before.count(b"\n") + 1
    cut = before.rfind(b"\n")
    prefix = (line_start + before) if cut < 0 else before[cut + 1 :]
    rest = chunk[err.start :].split(b"\n", 1)[0]
    text = (prefix + rest).decode("latin-1")
    bad = chunk[err.start : err.end]
    if header is None:
        header = (line_start + chunk).split(b"\n", 1)[0]
    column = _field_at(text, len(prefix), header.decode("utf-8", "replace"))
    cause = (
        f"byte 0x{bad.hex()} ({text[len(prefix)]!r} in Latin-1) is not UTF-8; "
        "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )
    return line, column, cause


def _field_at(line: str, offset: int, header: str) -> str | None:
    """The header name of the field of ``line`` holding character ``offset``."""
    names = next(csv.reader([header.lstrip("\ufeff")]), [])
    marker = "\x00"
    marked = line[:offset] + marker + line[offset:]
    try:
        fields = next(csv.reader(io.StringIO(marked)))
    except (csv.Error, StopIteration):
        return None
    for i, field in enumerate(fields):
        if marker in field:
            return names[i].strip().lower() if i < len(names) else None
    return None


def value_line(path: str | Path, column: str, value: str, max_rows: int) -> int | None:
    """The line (1 = the header) of the first of ``max_rows`` rows whose ``column`` is
    ``value`` (the raw text DuckDB reported), or None."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            names = [n.strip().lstrip("\ufeff").strip().lower() for n in next(reader)]
            if column not in names:
                return None
            i = names.index(column)
            start = reader.line_num + 1
            for n, row in enumerate(reader):
                if i < len(row) and row[i] == value:
                    return start
                if n >= max_rows:
                    return None
                start = reader.line_num + 1
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, StopIteration):
        return None
    return None
