"""The raw record of the questions' patients, read with this package's own SQL for gate L2
(paper Appendix A: "the gold is independently regenerated from the spec and the raw
structured fields").

The extraction rules (panel labs, visit attachment, one value per visit, lab and day, event
ids) are listed in :mod:`clinlib.tasks.recompute`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from clinlib.data.schema import RX_ORDER_SQL
from clinlib.data.units import UNIT_FACTORS, convert_sql
from clinlib.data.vocab import LAB_PANEL

ATTACH_DAYS_BEFORE_ADMIT = 1  # clinlib/data/events.py: window [admittime - 1 day, dischtime]


class RecomputeError(ValueError):
    """The raw source cannot support the recomputation (a missing table or column)."""


# --------------------------------------------------------------------------- raw record

VISITS_SQL = """
SELECT subject_id, hadm_id, admittime, dischtime, admission_type,
       rank() OVER (PARTITION BY subject_id ORDER BY admittime, hadm_id) - 1 AS visit_idx
FROM admissions
WHERE subject_id IN (SELECT subject_id FROM l2_subjects)
"""

# The patients' panel rows (any unit), read once: labevents is by far the largest table.
PANEL_ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE l2_panel_rows AS
SELECT l.labevent_id, l.subject_id, l.hadm_id, l.itemid, l.charttime, l.value, l.valuenum,
       l.valueuom, l.ref_range_lower, l.ref_range_upper, l.flag
FROM labevents l
WHERE l.subject_id IN (SELECT subject_id FROM l2_subjects)
  AND l.itemid IN (SELECT itemid FROM l2_panel)
"""

# Panel rows -> one visit each -> one value per (visit, lab, day). Written independently of
# clinlib.data.events (QUALIFY + arg_min instead of window-joins + UNIONs).
LABS_SQL = f"""
WITH cand AS (
    -- the panel's unit or none as reported; a known alternative unit in the panel's unit
    -- (l2_units: the factors of docs/real-data.md, applied here by this module's own SQL,
    -- rounded to the source's significant digits: clinlib.data.units.convert_sql)
    SELECT l.labevent_id, l.subject_id, l.hadm_id AS own_hadm, l.itemid, l.charttime,
           CASE WHEN coalesce(u.factor, 1) = 1 THEN l.value END AS value,
           {convert_sql("l.valuenum", "u.factor")} AS valuenum,
           CASE WHEN u.factor IS NULL THEN trim(l.valueuom) ELSE p.unit END AS uom,
           {convert_sql("l.ref_range_lower", "u.factor")} AS ref_low,
           {convert_sql("l.ref_range_upper", "u.factor")} AS ref_high,
           l.flag, p.lab_key, p.item_rank, p.decimals
    FROM l2_panel_rows l
    JOIN l2_panel p ON p.itemid = l.itemid
    LEFT JOIN l2_units u ON u.lab_key = p.lab_key AND u.unit = trim(l.valueuom)
    WHERE l.valuenum IS NOT NULL
      AND (coalesce(trim(l.valueuom), '') IN ('', p.unit) OR u.factor IS NOT NULL)
),
own AS (
    SELECT c.labevent_id, c.own_hadm AS hadm_id FROM cand c
    WHERE c.own_hadm IS NOT NULL AND EXISTS (
        SELECT 1 FROM l2_visits v WHERE v.subject_id = c.subject_id AND v.hadm_id = c.own_hadm)
),
win AS (
    SELECT c.labevent_id, arg_min(v.hadm_id, v.admittime) AS hadm_id
    FROM cand c JOIN l2_visits v ON v.subject_id = c.subject_id
     AND c.charttime BETWEEN v.admittime - INTERVAL {ATTACH_DAYS_BEFORE_ADMIT} DAY AND v.dischtime
    WHERE c.own_hadm IS NULL
    GROUP BY c.labevent_id
),
placed AS (
    SELECT c.*, a.hadm_id FROM cand c
    JOIN (SELECT * FROM own UNION ALL SELECT * FROM win) a USING (labevent_id)
)
SELECT 'LAB-' || labevent_id AS event_id, labevent_id, subject_id, hadm_id, itemid, lab_key,
       charttime, strftime(charttime, '%Y-%m-%d') AS date, value, valuenum, uom AS unit,
       ref_low, ref_high, flag, decimals
FROM placed
QUALIFY row_number() OVER (
    PARTITION BY subject_id, hadm_id, lab_key, CAST(charttime AS DATE)
    ORDER BY item_rank, CASE WHEN flag = 'abnormal' THEN 0 ELSE 1 END, charttime, labevent_id
) = 1
"""

# Every panel row of any unit, attached or not: "was this lab measured on that date at all".
LAB_DAYS_SQL = """
SELECT DISTINCT l.subject_id, p.lab_key, strftime(l.charttime, '%Y-%m-%d') AS date
FROM l2_panel_rows l JOIN l2_panel p ON p.itemid = l.itemid
"""

# Drug names, normalised in SQL (independently of clinlib.data.drugnames, which states the rules;
# tests/data/test_drugnames.py holds the two equal on real MIMIC-IV names): the words of the whole
# name (A-Z folded to lower case, every run of other characters one space), and the key:
# qualifiers in parentheses / brackets dropped, then the words, then strength tokens (a number
# with or without a glued unit, and unit words right after it) dropped. Tokens are spaced out
# to two spaces so that each strength token is matched with its own surrounding spaces.
STRENGTH_UNITS_SQL = "mg|mcg|g|gm|kg|ml|l|meq|mmol|unit|units|u|iu|hr|h"


def drug_words_sql(col: str) -> str:
    """SQL expression: the lower-case words of drug name ``col``."""
    upper, lower = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"
    return f"trim(regexp_replace(translate({col}, '{upper}', '{lower}'), '[^a-z0-9]+', ' ', 'g'))"


def drug_key_sql(col: str) -> str:
    """SQL expression: the matching key of drug name ``col`` (see the comment above)."""
    bare = f"regexp_replace({col}, '[(\\[][^)\\]]*([)\\]]|$)', ' ', 'g')"
    spaced = f"' ' || replace({drug_words_sql(bare)}, ' ', '  ') || ' '"
    u = STRENGTH_UNITS_SQL
    stripped = f"regexp_replace({spaced}, ' [0-9]+({u})?(  ({u}))* ', ' ', 'g')"
    return f"trim(regexp_replace({stripped}, ' +', ' ', 'g'))"


# One pharmacy order (pharmacy_id) may carry its MAIN drug row plus BASE diluent and ADDITIVE
# rows (docs/real-data.md). Like clinlib.data.events, BASE diluents are not orders of
# their own: MAIN and ADDITIVE rows are kept and keyed RX-<pharmacy_id>[-<k>] by content rank.
RX_SQL = f"""
WITH ranked AS (
    -- Medication-order rows only (a BASE diluent shares its MAIN's pharmacy_id); the k-th
    -- order row of a pharmacy_id, ranked by content, is RX-<pharmacy_id>-<k> (clinlib.data.events).
    SELECT r.*, row_number() OVER (
        PARTITION BY r.pharmacy_id
        ORDER BY coalesce(upper(trim(r.drug_type)), 'MAIN') <> 'MAIN', r.drug, r.dose_val_rx,
                 r.dose_unit_rx, r.route, r.starttime, r.stoptime, r.subject_id, r.hadm_id
    ) AS k
    FROM prescriptions r
    WHERE r.subject_id IN (SELECT subject_id FROM l2_subjects) AND r.pharmacy_id IS NOT NULL
      AND {RX_ORDER_SQL}
),
cand AS (
    SELECT *, 'RX-' || pharmacy_id || CASE WHEN k = 1 THEN '' ELSE '-' || k END AS rx_id
    FROM ranked
),
own AS (
    SELECT c.rx_id, c.hadm_id FROM cand c
    WHERE c.hadm_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM l2_visits v WHERE v.subject_id = c.subject_id AND v.hadm_id = c.hadm_id)
),
win AS (
    SELECT c.rx_id, arg_min(v.hadm_id, v.admittime) AS hadm_id
    FROM cand c JOIN l2_visits v ON v.subject_id = c.subject_id
     AND c.starttime BETWEEN v.admittime - INTERVAL {ATTACH_DAYS_BEFORE_ADMIT} DAY AND v.dischtime
    WHERE c.hadm_id IS NULL
    GROUP BY c.rx_id
)
SELECT c.rx_id AS event_id, c.pharmacy_id, c.subject_id, a.hadm_id,
       coalesce(c.starttime, v.admittime) AS starttime, c.stoptime, trim(c.drug) AS drug,
       c.dose_val_rx, c.dose_unit_rx, c.route
FROM cand c
JOIN (SELECT * FROM own UNION ALL SELECT * FROM win) a USING (rx_id)
JOIN l2_visits v ON v.subject_id = c.subject_id AND v.hadm_id = a.hadm_id
"""
# The extracted orders (registered as l2_rx) with their normalised drug names.
RX_NAMES_SQL = f"""
SELECT *, {drug_key_sql("drug")} AS drug_key, {drug_words_sql("drug")} AS drug_words FROM l2_rx
"""


DX_SQL = """
SELECT 'DX-' || d.hadm_id || '-' || d.seq_num AS event_id, d.subject_id, d.hadm_id, d.seq_num,
       upper(trim(d.icd_code)) AS icd_code, CAST(d.icd_version AS INTEGER) AS icd_version
FROM diagnoses_icd d
JOIN l2_visits v ON v.subject_id = d.subject_id AND v.hadm_id = d.hadm_id
"""

PX_SQL = """
SELECT 'PX-' || p.hadm_id || '-' || p.seq_num AS event_id, p.subject_id, p.hadm_id, p.seq_num,
       strftime(p.chartdate, '%Y-%m-%d') AS date, upper(trim(p.icd_code)) AS icd_code,
       CAST(p.icd_version AS INTEGER) AS icd_version, t.long_title
FROM procedures_icd p
JOIN l2_visits v ON v.subject_id = p.subject_id AND v.hadm_id = p.hadm_id
LEFT JOIN d_icd_procedures t
  ON upper(trim(t.icd_code)) = upper(trim(p.icd_code)) AND t.icd_version = p.icd_version
"""


@dataclass(frozen=True)
class RawRecord:
    """The raw facts of the questions' patients, extracted by this module's own SQL.

    Attributes:
        visits: subject_id, hadm_id, admittime, dischtime, admission_type, visit_idx.
        labs: one value per (visit, lab, day): event_id, subject_id, hadm_id, itemid, lab_key,
            charttime, date, value, valuenum, value_text, unit, ref_low, ref_high, flag.
        rx: event_id, pharmacy_id, subject_id, hadm_id, starttime, drug, dose_val_rx, ...
        dx: event_id, subject_id, hadm_id, seq_num, icd_code, icd_version.
        px: event_id, subject_id, hadm_id, seq_num, date, icd_code, icd_version, long_title.
        lab_days: ``(subject_id, lab_key, date)`` of every panel row (any unit, any visit).
    """

    visits: pd.DataFrame
    labs: pd.DataFrame
    rx: pd.DataFrame
    dx: pd.DataFrame
    px: pd.DataFrame
    lab_days: frozenset
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    def records(self, table: str, subject_id: int) -> list[dict]:
        """One patient's rows of ``table`` (visits, labs, rx, dx, px) as dicts, in table order.

        Built once per table (plain dicts: thousands of questions query the same patients).
        """
        if table not in self._index:
            grouped: dict[int, list[dict]] = {}
            for rec in getattr(self, table).to_dict("records"):
                grouped.setdefault(int(rec["subject_id"]), []).append(rec)
            self._index[table] = grouped
        return self._index[table].get(int(subject_id), [])

    def lab_series(self, subject_id: int, lab: str) -> list[dict]:
        """One patient's values of one panel lab, ordered by (charttime, labevent_id)."""
        key = ("lab_series", int(subject_id))
        if key not in self._index:
            by_lab: dict[str, list[dict]] = {}
            for rec in self.records("labs", subject_id):
                by_lab.setdefault(str(rec["lab_key"]), []).append(rec)
            self._index[key] = by_lab
        return self._index[key].get(lab, [])

    def visit_of(self, subject_id: int) -> dict[int, dict]:
        """hadm_id -> visit row of one patient."""
        return {int(v["hadm_id"]): v for v in self.records("visits", subject_id)}


def load_raw(con: duckdb.DuckDBPyConnection, subject_ids: Iterable[int]) -> RawRecord:
    """Extract the raw record of ``subject_ids`` from MIMIC-shaped hosp views.

    Args:
        con: DuckDB connection with views admissions, labevents, prescriptions, diagnoses_icd,
            procedures_icd, d_icd_procedures (clinlib.data.sources.mimic.open_hosp).
        subject_ids: the patients the questions are about.

    Returns:
        A :class:`RawRecord`.

    Raises:
        RecomputeError: a table or column the recomputation needs is missing.
    """
    panel = pd.DataFrame(
        [
            (itemid, lab.key, rank, lab.unit, lab.decimals)
            for lab in LAB_PANEL
            for rank, itemid in enumerate(lab.itemids)
        ],
        columns=["itemid", "lab_key", "item_rank", "unit", "decimals"],
    )
    ids = sorted({int(s) for s in subject_ids})
    con.register("l2_panel", panel)
    con.register(
        "l2_units",
        pd.DataFrame(
            [(k, unit, f) for k, alts in UNIT_FACTORS.items() for unit, f in alts.items()],
            columns=["lab_key", "unit", "factor"],
        ),
    )
    con.register("l2_subjects", pd.DataFrame({"subject_id": pd.Series(ids, dtype="int64")}))
    try:
        visits = con.execute(VISITS_SQL).df()
        con.register("l2_visits", visits)
        con.execute(PANEL_ROWS_SQL)
        labs = con.execute(LABS_SQL).df()
        lab_days = con.execute(LAB_DAYS_SQL).df()
        rx = con.execute(RX_SQL).df()
        con.register("l2_rx", rx)
        rx = con.execute(RX_NAMES_SQL).df()
        dx = con.execute(DX_SQL).df()
        px = con.execute(PX_SQL).df()
    except duckdb.Error as exc:  # a missing view / column in a user-supplied source
        raise RecomputeError(f"L2 recompute cannot read the raw hosp tables: {exc}") from None
    finally:
        con.execute("DROP TABLE IF EXISTS l2_panel_rows")
        for view in ("l2_panel", "l2_units", "l2_subjects", "l2_visits", "l2_rx"):
            try:
                con.unregister(view)
            except duckdb.Error:  # pragma: no cover - not registered after an early failure
                pass
    # .tolist() first: iterating Arrow-backed columns element by element is slow
    labs["value_text"] = [
        _reported_text(v, n, d)
        for v, n, d in zip(
            labs["value"].tolist(),
            labs["valuenum"].tolist(),
            labs["decimals"].tolist(),
            strict=True,
        )
    ]
    return RawRecord(
        visits=visits.sort_values(["subject_id", "visit_idx"]).reset_index(drop=True),
        labs=labs.sort_values(["subject_id", "charttime", "labevent_id"]).reset_index(drop=True),
        rx=rx.sort_values(["subject_id", "starttime", "pharmacy_id", "event_id"]).reset_index(
            drop=True
        ),
        dx=dx,
        px=px,
        lab_days=frozenset(
            (int(s), str(k), str(d))
            for s, k, d in zip(
                lab_days["subject_id"].tolist(),
                lab_days["lab_key"].tolist(),
                lab_days["date"].tolist(),
                strict=True,
            )
        ),
    )


def _reported_text(value: Any, valuenum: float, decimals: int) -> str:
    if value is None or pd.isna(value) or str(value).strip() in ("", "___"):
        return f"{float(valuenum):.{int(decimals)}f}"
    return str(value).strip()
