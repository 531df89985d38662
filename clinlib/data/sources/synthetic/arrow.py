"""Arrow schemas, per-chunk id ranges and column builders of the SYNTHETIC hosp tables
(paper §3 "Cohort"; column order and types of :data:`clinlib.data.schema.HOSP_TABLES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from clinlib.data.schema import HOSP_TABLES, OPTIONAL_HOSP_TABLES
from clinlib.data.sources.synthetic.design import (
    DAY_S,
    HADM_ID_BASE,
    HADM_PER_PATIENT,
    LABEVENTS_PER_PATIENT,
    RX_PER_PATIENT,
    SPECIMENS_PER_PATIENT,
    SUBJECT_ID_BASE,
    SyntheticConfigError,
)

ARROW_TYPES: dict[str, pa.DataType] = {
    "INTEGER": pa.int32(),
    "SMALLINT": pa.int16(),
    "VARCHAR": pa.string(),
    "DOUBLE": pa.float64(),
    "REAL": pa.float32(),
    "TIMESTAMP": pa.timestamp("us"),
    "DATE": pa.date32(),
}


# Tables the generator writes: the kit's hosp tables plus emar (read only by the MEDS fixture).
WRITTEN_TABLES: dict[str, dict[str, str]] = {**HOSP_TABLES, **OPTIONAL_HOSP_TABLES}


def arrow_schema(table: str) -> pa.Schema:
    """The arrow schema of a hosp table (column order and types of ``HOSP_TABLES``).

    Args:
        table: hosp table name, e.g. ``"labevents"``.

    Returns:
        A ``pyarrow.Schema``.
    """
    if table not in WRITTEN_TABLES:
        raise SyntheticConfigError(
            f"unknown hosp table {table!r}; known: {', '.join(WRITTEN_TABLES)}"
        )
    return pa.schema([(c, ARROW_TYPES[t]) for c, t in WRITTEN_TABLES[table].items()])


@dataclass
class ChunkIds:
    """Id bases of one chunk (disjoint ranges; see the module docstring)."""

    first_patient: int
    chunk_patients: int
    subject: int = field(init=False)
    hadm: int = field(init=False)
    labevent: int = field(init=False)
    specimen: int = field(init=False)
    pharmacy: int = field(init=False)

    def __post_init__(self) -> None:
        f = self.first_patient
        self.subject = SUBJECT_ID_BASE + f
        self.hadm = HADM_ID_BASE + f * HADM_PER_PATIENT
        self.labevent = 1 + f * LABEVENTS_PER_PATIENT
        self.specimen = 1 + f * SPECIMENS_PER_PATIENT
        self.pharmacy = 1 + f * RX_PER_PATIENT

    def check(self, what: str, base: int, used: int, per_patient: int) -> None:
        """Raise if ``used`` ids from ``base`` leave the chunk's range or INTEGER (int32)."""
        if used > self.chunk_patients * per_patient or base + used > np.iinfo(np.int32).max:
            raise SyntheticConfigError(
                f"chunk starting at patient {self.first_patient} needs {used} {what} ids, more "
                f"than its range of {self.chunk_patients * per_patient}; use a larger "
                "chunk_patients"
            )


def str_array(values) -> pa.Array:
    return pa.array(list(values), type=pa.string())


def take_strings(values, idx: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """Strings ``values[idx]`` as an arrow array (NULL where ``null``)."""
    table = values if isinstance(values, pa.Array) else str_array(values)
    return table.take(pa.array(np.asarray(idx, dtype=np.int32), mask=null))


def ts_array(seconds: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(np.asarray(seconds, np.int64) * 1_000_000, type=pa.timestamp("us"), mask=null)


def date_array(seconds: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    days = (np.asarray(seconds, np.int64) // DAY_S).astype(np.int32)
    return pa.array(days, type=pa.date32(), mask=null)


def int_array(values: np.ndarray, typ: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(np.asarray(values), type=typ, mask=null)
