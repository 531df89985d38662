"""Load the paper's published Tables 1–14 and the numbers printed with Figs. 13–14
(Appendices C.1–C.2) from ``data/paper/``, validated against :mod:`.specs`: a malformed file
is named with its line, column and value, never silently read.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from clinlib.analysis.paper.specs import (
    FIGURES,
    TABLES,
    TABLES_BY_NUMBER,
    PaperTableError,
    TableSpec,
)
from clinlib.core.config import PAPER_DATA_DIR


def list_tables() -> pd.DataFrame:
    """The shipped published tables.

    Returns:
        One row per table: number, name, file, source, title, n_rows.
    """
    return pd.DataFrame(
        [
            {
                "number": s.number,
                "name": s.name,
                "file": s.file,
                "source": s.source,
                "title": s.title,
                "n_rows": s.n_rows,
            }
            for s in sorted(TABLES.values(), key=lambda s: s.number)
        ]
    )


def _resolve(name: str | int) -> TableSpec:
    """Accept 14, "14", "table14" or "table14_full_matrix"."""
    key = str(name).strip()
    if key in TABLES:
        return TABLES[key]
    m = re.fullmatch(r"(?:table)?0*(\d+)", key, flags=re.IGNORECASE)
    if m and int(m.group(1)) in TABLES_BY_NUMBER:
        return TABLES_BY_NUMBER[int(m.group(1))]
    known = ", ".join(TABLES)
    raise PaperTableError(f"unknown paper table {name!r}; known: {known} (or a number 1-14)")


def _bad(path: Path, msg: str) -> PaperTableError:
    return PaperTableError(f"{path}: {msg}")


def _parse_column(raw: pd.Series, col: str, kind: str, path: Path) -> pd.Series:
    """Convert one text column to its kind; name the first bad line and value on failure."""
    empty = raw.str.strip() == ""
    if kind == "str":
        return raw.str.strip().mask(empty).astype("string")
    if kind == "float":
        out = pd.to_numeric(raw.mask(empty), errors="coerce").astype("float64")
        bad = ~np.isfinite(out) & ~empty
    elif kind == "int":
        num = pd.to_numeric(raw.mask(empty), errors="coerce")
        bad = (num.isna() | (num != np.floor(num))) & ~empty
        out = num.astype("Int64") if not bad.any() else num
    elif kind == "bool":
        low = raw.str.strip().str.lower()
        bad = ~low.isin(["true", "false"]) & ~empty
        out = low.map({"true": True, "false": False})
    else:  # pragma: no cover - spec error, not input error
        raise AssertionError(f"unknown column kind {kind!r}")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        # +2: header line, then 1-based rows.
        raise _bad(path, f"line {i + 2}: column {col!r} has {raw.iloc[i]!r}, expected {kind}")
    return out


def _validate(df_raw: pd.DataFrame, spec: TableSpec, path: Path) -> pd.DataFrame:
    cols = list(df_raw.columns)
    missing = [c for c in spec.columns if c not in cols]
    extra = [c for c in cols if c not in spec.columns]
    if missing or extra:
        raise _bad(
            path,
            f"columns do not match {spec.kind} {spec.number}: missing {missing}, unexpected {extra}",
        )
    if len(df_raw) != spec.n_rows:
        raise _bad(path, f"has {len(df_raw)} rows; {spec.kind} {spec.number} has {spec.n_rows}")
    out = pd.DataFrame(index=df_raw.index)
    for col, kind in spec.columns.items():
        series = _parse_column(df_raw[col].astype(str), col, kind, path)
        if series.isna().any() and col not in spec.nullable:
            i = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise _bad(path, f"line {i + 2}: column {col!r} is empty")
        if col in spec.allowed:
            ok = series.isna() | series.isin(spec.allowed[col])
            if not ok.all():
                i = int(np.flatnonzero(~ok.to_numpy())[0])
                raise _bad(
                    path,
                    f"line {i + 2}: column {col!r} has {series.iloc[i]!r}; "
                    f"allowed: {', '.join(map(str, spec.allowed[col]))}",
                )
        out[col] = series
    dup = out.duplicated(list(spec.keys), keep=False)
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        key = {k: out[k].iloc[i] for k in spec.keys}
        raise _bad(path, f"line {i + 2}: duplicate row for {key}")
    for col, kind in spec.columns.items():
        if kind == "int" and not out[col].isna().any():
            out[col] = out[col].astype("int64")
        elif kind == "bool" and not out[col].isna().any():
            out[col] = out[col].astype(bool)
    return out.reset_index(drop=True)


def load_table(name: str | int, data_dir: Path | None = None) -> pd.DataFrame:
    """Load one published table, validated against its specification.

    Args:
        name: file stem ("table14_full_matrix"), "table14", or the table number.
        data_dir: folder holding the CSVs (default ``data/paper/``).

    Returns:
        The table in long format with the columns of :data:`TABLES` ``[name].columns``:
        strings as pandas "string", ``value`` float64 (NaN = a printed dash), counts int64.

    Raises:
        PaperTableError: unknown name, missing file, or malformed content (names the file,
            line, column and value).
    """
    return _load_spec(_resolve(name), data_dir)


def load_figure(name: str = "figure14_hit_rates", data_dir: Path | None = None) -> pd.DataFrame:
    """Load the numbers printed with a figure (see :data:`FIGURES`), validated like a table.

    Raises:
        PaperTableError: unknown name, missing file, or malformed content.
    """
    if name not in FIGURES:
        raise PaperTableError(f"unknown paper figure {name!r}; known: {', '.join(FIGURES)}")
    return _load_spec(FIGURES[name], data_dir)


def _load_spec(spec: TableSpec, data_dir: Path | None) -> pd.DataFrame:
    """Read one published table's or figure's CSV and validate it against ``spec``."""
    path = Path(data_dir or PAPER_DATA_DIR) / spec.file
    if not path.is_file():
        what = spec.kind.lower()
        raise PaperTableError(f"published {what} {spec.number} missing: {path} does not exist")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise _bad(path, f"not a readable CSV ({exc})") from None
    return _validate(raw, spec, path)


def load_corpus_figure(data_dir: Path | None = None) -> pd.DataFrame:
    """Fig. 13's statistics (Appendix C.1, n = 385 dialogues): distribution, statistic, value,
    unit — one row per (distribution, statistic), nine in all (``load_figure``'s checks).
    """
    return load_figure("figure13_corpus", data_dir)
