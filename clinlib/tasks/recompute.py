"""Independent gold recomputation for validation gate L2 (paper Appendix A: "The gold is
independently regenerated from the spec and the raw structured fields, and must equal the
candidate gold; threshold < 0.5%").

Nothing here imports the question generators or :mod:`clinlib.data.events`: the raw MIMIC-IV-shaped
hosp tables (``labevents``, ``prescriptions``, ``diagnoses_icd``, ``procedures_icd``,
``admissions``, ``d_icd_procedures``) are queried through DuckDB with this module's own SQL, and
every gold is recomputed from a question's ``meta`` JSON with this module's own arithmetic
(exact :class:`decimal.Decimal`, comparing ``|last - first|`` against ``threshold * |first|`` so
that no division is needed). The spec is :mod:`clinlib.tasks.rules` (its docstring and
constants) and the documented event-extraction rules of the kit (clinlib/data/events.py docstring),
re-implemented here in SQL:

* panel labs: an itemid of :data:`clinlib.data.vocab.LAB_PANEL`, a numeric ``valuenum``, and the
  panel's canonical unit (a blank unit is kept);
* visit attachment: a row's own ``hadm_id`` when that admission belongs to the patient; a row
  without ``hadm_id`` joins the earliest admission whose window ``[admittime - 1 day,
  dischtime]`` contains its time, else it belongs to no visit and is left out;
* one lab value per (visit, lab, calendar day): preferred itemid, then an abnormal flag, then
  the earliest ``charttime``, then the lowest ``labevent_id``;
* ``value_text`` = the reported ``value`` (trimmed), or the number at the lab's panel precision
  when MIMIC stores only the number (``value`` NULL, blank or ``'___'``);
* event ids ``LAB-<labevent_id>``, ``RX-<pharmacy_id>[-<k>]`` (order rows only, no BASE
  diluent), ``DX-<hadm_id>-<seq_num>``,
  ``PX-<hadm_id>-<seq_num>``; visits numbered by (admittime, hadm_id).

Meta keys read per task (written by the generators; a missing key is a recorded L2 failure).
Anchors are recomputed and compared where the rule fixes them (T1, T2, T4, T8, T9-lab):

* T1: subject_id, lab, date -> the single kept value of that lab on that day; gold
  ``"<value_text> <unit>"``; anchor its event id.
* T2: subject_id, lab, hadm_ids (2–5, in visit order) -> each admission's earliest kept value;
  rules.py trend label of the first and the last.
* T3: subject_id, hadm_id, lab_event_id, dx_code, dx_version -> the finding is an abnormal lab
  of that admission and the code is coded there; gold ``yes`` iff a T3 injection stating the
  finding is attached; subtype ``<Y|N>-<er|admit>`` from the raw admission_type.
* T4: subject_id, family, dx_hadm_id -> the family's first coded visit must be that admission
  (visit >= 1); evidence = the family's labs in earlier visits flagged abnormal on the family's
  side of the range (rules.T4_DIRECTION); anchors = the first stated family code row there +
  the evidence.
* T5: subject_id, hadm_id, kind (diagnosis / procedure: code, icd_version; lab: lab, lab_date,
  stated_value), statement -> ``yes`` iff an injected statement contradicts the raw record (it
  denies a coded diagnosis / procedure, or states a lab value different from the raw one);
  the natural subtype needs a non-glucose lab whose value differs at another visit.
* T6: subject_ids (A, B), subtype a_/b_/c_, lab -> distinct (version, code) diagnoses / max
  value / |last - first|, compared with SIMILAR_REL (counts: equal).
* T7: subject_id, hadm_id + the options -> exactly one option documented in that admission
  (drug ordered / procedure coded, matched as whole normalised words: drugs in the SQL drug key
  or the name's words, see :func:`drug_key_sql`); an option documented anywhere else in the
  record is an ambiguity failure.
* T8: subject_id, rx_event_id, lab -> the lab is a T8 target of the drug (longest key of
  T8_TREATMENT_TARGETS found as whole words in the SQL drug key; the order's MAIN row);
  before/after by the T8 windows; subtype = the magnitude bin.
* T9: subject_id + lab, date (lab / lab-unmeasured) or drug, hadm_id (other) -> no covered
  event states the asked fact (for drugs: any order of the same head word in the admission)
  -> gold ``insufficient information``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

import duckdb
import pandas as pd

from clinlib.data.schema import RX_ORDER_SQL
from clinlib.data.vocab import INDEX_DISEASE_ICD, LAB_BY_KEY, LAB_PANEL
from clinlib.tasks import rules
from clinlib.tasks.base import ABSTAIN

ATTACH_DAYS_BEFORE_ADMIT = 1  # clinlib/data/events.py: window [admittime - 1 day, dischtime]
EMERGENCY_TYPES = ("EW EMER.", "DIRECT EMER.", "URGENT", "EU OBSERVATION")


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
    SELECT l.labevent_id, l.subject_id, l.hadm_id AS own_hadm, l.itemid, l.charttime,
           l.value, l.valuenum, trim(l.valueuom) AS uom, l.ref_range_lower AS ref_low,
           l.ref_range_upper AS ref_high, l.flag, p.lab_key, p.item_rank, p.decimals
    FROM l2_panel_rows l
    JOIN l2_panel p ON p.itemid = l.itemid
    WHERE l.valuenum IS NOT NULL
      AND coalesce(trim(l.valueuom), '') IN ('', p.unit)
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
# tests/test_drugnames.py holds the two equal on real MIMIC-IV names): the words of the whole
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
# rows (../shared/reference/mimic-iv.md). Like clinlib.data.events, BASE diluents are not orders of
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
        for view in ("l2_panel", "l2_subjects", "l2_visits", "l2_rx"):
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


# --------------------------------------------------------------------------- arithmetic


def _dec(x: Any) -> Decimal:
    """The reported decimal of a float (shortest repr: 1.3 -> Decimal('1.3'))."""
    return Decimal(repr(float(x)))


_STABLE = Decimal(str(rules.STABLE_REL))
_MODERATE = Decimal(str(rules.MODERATE_REL))
_STRONG = Decimal(str(rules.STRONG_REL))
_SIMILAR = Decimal(str(rules.SIMILAR_REL))


def change_bin(first: Any, last: Any) -> tuple[int, str]:
    """(sign, magnitude) of ``(last - first) / |first|`` per rules.py, without dividing.

    Returns:
        sign in {-1, 0, 1} (0 for the stable band) and one of none / weak / moderate / strong.
    """
    f, la = _dec(first), _dec(last)
    if f == 0:
        raise ZeroDivisionError("first value is 0: the relative change is undefined")
    delta, base = abs(la - f), abs(f)
    if delta < _STABLE * base:
        return 0, "none"
    sign = 1 if la > f else -1
    if delta < _MODERATE * base:
        return sign, "weak"
    if delta < _STRONG * base:
        return sign, "moderate"
    return sign, "strong"


def trend_gold(first: Any, last: Any) -> str:
    """T2 gold of a first and a last value."""
    sign, mag = change_bin(first, last)
    if sign == 0:
        return "stable;none"
    return f"{'increased' if sign > 0 else 'decreased'};{mag}"


def t8_gold(before: Any, after: Any) -> tuple[str, str]:
    """T8 gold direction and bin (L-, M-, S-, 0, S+, M+, L+)."""
    sign, mag = change_bin(before, after)
    if sign == 0:
        return "similar", "0"
    letter = {"weak": "S", "moderate": "M", "strong": "L"}[mag]
    return ("increased" if sign > 0 else "decreased"), letter + ("+" if sign > 0 else "-")


def compare_values(a: Any, b: Any) -> str:
    """T6 gold of patient A's and B's values (rules.py SIMILAR_REL of the larger magnitude)."""
    da = a if isinstance(a, Decimal) else _dec(a)
    db = b if isinstance(b, Decimal) else _dec(b)
    if abs(da - db) <= _SIMILAR * max(abs(da), abs(db)):
        return "similar"
    return "A" if da > db else "B"


# --------------------------------------------------------------------------- per task


@dataclass(frozen=True)
class Recomputed:
    """One question's recomputation.

    Attributes:
        gold: the recomputed gold (None when it could not be recomputed).
        anchors: the recomputed anchor event ids (None when the task does not fix them).
        problem: why the recomputation failed or disagrees beyond the gold (None when fine).
    """

    gold: str | None
    anchors: tuple[str, ...] | None = None
    problem: str | None = None


class _Missing(Exception):
    """A meta key the recomputation needs is absent."""


def _get(meta: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in meta and meta[k] is not None:
            return meta[k]
    raise _Missing(f"meta lacks {' / '.join(repr(k) for k in keys)}")


def _lab_key(meta: Mapping[str, Any]) -> str:
    key = _get(meta, "lab")
    if key not in LAB_BY_KEY:
        raise _Missing(f"meta lab {key!r} is not a panel lab")
    return str(key)


def _on(rows: list[dict], date: str) -> list[dict]:
    return [r for r in rows if r["date"] == date]


def _t1(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab, date = int(_get(meta, "subject_id")), _lab_key(meta), str(_get(meta, "date"))
    rows = _on(raw.lab_series(sid, lab), date)
    if len(rows) != 1:
        return Recomputed(None, problem=f"{len(rows)} {lab} values on {date} in the raw record")
    r = rows[0]
    if not isinstance(r["unit"], str) or not r["unit"]:
        return Recomputed(None, problem=f"{r['event_id']} has no unit in the raw record")
    return Recomputed(f"{r['value_text']} {r['unit']}", (r["event_id"],))


def _t2(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab = int(_get(meta, "subject_id")), _lab_key(meta)
    hadm_ids = [int(h) for h in _get(meta, "hadm_ids")]
    if not rules.T2_MIN_VISITS <= len(hadm_ids) <= rules.T2_MAX_VISITS:
        return Recomputed(None, problem=f"{len(hadm_ids)} visits outside 2..5")
    visits = raw.visit_of(sid)
    idx = [int(visits[h]["visit_idx"]) if h in visits else -1 for h in hadm_ids]
    if -1 in idx or idx != sorted(set(idx)):
        return Recomputed(None, problem=f"admissions {hadm_ids} are not visits in order")
    series = raw.lab_series(sid, lab)
    firsts = []
    for h in hadm_ids:
        # the visit's value = its earliest (kept) measurement; the series is time-ordered
        first = next((r for r in series if int(r["hadm_id"]) == h), None)
        if first is None:
            return Recomputed(None, problem=f"no {lab} value in admission {h}")
        firsts.append(first)
    try:
        gold = trend_gold(firsts[0]["valuenum"], firsts[-1]["valuenum"])
    except ZeroDivisionError as exc:
        return Recomputed(None, problem=str(exc))
    return Recomputed(gold, tuple(f["event_id"] for f in firsts))


def _family_prefixes(family: str) -> dict[int, tuple[str, ...]]:
    if family in INDEX_DISEASE_ICD:
        return INDEX_DISEASE_ICD[family]
    if family in rules.T4_EXTRA_FAMILIES:
        return rules.T4_EXTRA_FAMILIES[family]
    raise _Missing(f"meta family {family!r} is not a T4 family")


def _in_family(rec: Mapping[str, Any], prefixes: Mapping[int, tuple[str, ...]]) -> bool:
    code = str(rec["icd_code"]).replace(".", "")
    return code.startswith(tuple(prefixes.get(int(rec["icd_version"]), ())) or ("\0",))


def _side_ok(row: Mapping[str, Any], side: str) -> bool:
    lab = LAB_BY_KEY[str(row["lab_key"])]
    v = float(row["valuenum"])
    if side == "high":
        hi = row["ref_high"] if pd.notna(row["ref_high"]) else lab.ref_high
        return hi is not None and v > float(hi)
    lo = row["ref_low"] if pd.notna(row["ref_low"]) else lab.ref_low
    return lo is not None and v < float(lo)


def _t4(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, family = int(_get(meta, "subject_id")), str(_get(meta, "family"))
    hadm = int(_get(meta, "hadm_id", "dx_hadm_id"))
    prefixes = _family_prefixes(family)
    if family not in rules.T4_EVIDENCE:
        return Recomputed(None, problem=f"family {family!r} has no T4 evidence labs")
    visits = raw.visit_of(sid)
    coded = [d for d in raw.records("dx", sid) if _in_family(d, prefixes)]
    if not coded:
        return Recomputed(None, problem=f"{family} is never coded for subject {sid}")
    first_v = min(int(visits[int(d["hadm_id"])]["visit_idx"]) for d in coded)
    if hadm not in visits or int(visits[hadm]["visit_idx"]) != first_v:
        return Recomputed(None, problem=f"{family} is first coded at visit {first_v}, not {hadm}")
    if first_v < 1:
        return Recomputed(None, problem=f"{family} is coded at the first visit")
    side = rules.T4_DIRECTION[family]
    ids = sorted(
        r["event_id"]
        for lab in rules.T4_EVIDENCE[family]
        for r in raw.lab_series(sid, lab)
        if int(visits[int(r["hadm_id"])]["visit_idx"]) < first_v
        and r["flag"] == "abnormal"
        and _side_ok(r, side)
    )
    if not rules.T4_MIN_EVIDENCE <= len(ids) <= rules.T4_MAX_EVIDENCE:
        return Recomputed(None, problem=f"{len(ids)} evidence events outside the T4 range")
    # the question's diagnosis anchor: the family's first stated code row of that admission
    at_v = sorted((d for d in coded if int(d["hadm_id"]) == hadm), key=lambda d: d["seq_num"])
    stated = [d["event_id"] for d in at_v if status.get(d["event_id"]) == "covered"]
    if not stated:
        return Recomputed(";".join(ids), problem=f"no stated {family} diagnosis in visit {hadm}")
    return Recomputed(";".join(ids), (stated[0], *ids))


def _t6_quantity(raw: RawRecord, sid: int, kind: str, lab: str | None) -> Decimal:
    """a: distinct (version, code) diagnoses; b: max lab value; c: |last - first| of a lab."""
    if kind == "a":
        return Decimal(len({(d["icd_version"], d["icd_code"]) for d in raw.records("dx", sid)}))
    values = [_dec(r["valuenum"]) for r in raw.lab_series(sid, str(lab))]
    if not values:
        raise _Missing(f"subject {sid} has no {lab} value")
    return max(values) if kind == "b" else abs(values[-1] - values[0])


def _t6(meta, q, raw: RawRecord, status) -> Recomputed:
    sids = [int(s) for s in _get(meta, "subject_ids")]
    kind = str(q["subtype"]).lower()[:1]  # a_n_diagnoses / b_max_value / c_delta_value
    if len(sids) != 2 or kind not in ("a", "b", "c"):
        return Recomputed(None, problem=f"T6 needs two patients and subtype a/b/c ({kind!r})")
    lab = None if kind == "a" else _lab_key(meta)
    a, b = (_t6_quantity(raw, s, kind, lab) for s in sids)
    if kind == "a":
        return Recomputed("similar" if a == b else ("A" if a > b else "B"))
    return Recomputed(compare_values(a, b))


@lru_cache(maxsize=65536)
def _norm(s: str) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in s.lower()).split())


def _mentions(hay: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {hay} "


def _t7(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, hadm = int(_get(meta, "subject_id")), int(_get(meta, "hadm_id"))
    options = [str(o) for o in _as_list(q["options"])]
    if len(options) != 4:
        return Recomputed(None, problem=f"{len(options)} options")
    if str(q["subtype"]).lower().startswith("med"):
        # a drug option is documented by an order whose SQL key or words contain it
        names = [
            (int(r["hadm_id"]), str(t))
            for r in raw.records("rx", sid)
            for t in (r["drug_key"], r["drug_words"])
            if isinstance(t, str) and t
        ]
    else:
        names = [
            (int(r["hadm_id"]), str(t))
            for r in raw.records("px", sid)
            for t in (r["long_title"], r["icd_code"])
            if isinstance(t, str) and t
        ]
    normed = [(h, _norm(n)) for h, n in names]
    opts = [_norm(o) for o in options]
    found = [i for i, o in enumerate(opts) if any(h == hadm and _mentions(n, o) for h, n in normed)]
    if len(found) != 1:
        return Recomputed(None, problem=f"{len(found)} options documented in admission {hadm}")
    others = [
        options[i]
        for i, o in enumerate(opts)
        if i != found[0] and any(_mentions(n, o) for _, n in normed)
    ]
    if others:
        return Recomputed(None, problem=f"distractor(s) {others} appear in the record")
    return Recomputed(rules.OPTION_LETTERS[found[0]])


def _t8(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab = int(_get(meta, "subject_id")), _lab_key(meta)
    rx_id = str(_get(meta, "rx_event_id"))
    rx = next((r for r in raw.records("rx", sid) if r["event_id"] == rx_id), None)
    if rx is None:
        return Recomputed(None, problem=f"prescription {rx_id} not in the raw record")
    drug = str(rx["drug_key"])
    keys = sorted((k for k in rules.T8_TREATMENT_TARGETS if _mentions(drug, k)), key=len)
    if not keys or lab not in rules.T8_TREATMENT_TARGETS[keys[-1]]:
        return Recomputed(None, problem=f"{lab} is not a T8 target of {drug!r}")
    start = pd.Timestamp(rx["starttime"])
    lo = start - pd.Timedelta(days=rules.T8_MAX_BEFORE_DAYS)
    a_lo = start + pd.Timedelta(days=rules.T8_MIN_AFTER_DAYS)
    a_hi = start + pd.Timedelta(days=rules.T8_MAX_AFTER_DAYS)
    series = raw.lab_series(sid, lab)
    before = [r for r in series if lo <= r["charttime"] <= start]
    after = [r for r in series if a_lo <= r["charttime"] <= a_hi]
    if not before or not after:
        return Recomputed(None, problem="no before or no after value in the T8 windows")
    b, a = before[-1], after[0]
    try:
        direction, bin_ = t8_gold(b["valuenum"], a["valuenum"])
    except ZeroDivisionError as exc:
        return Recomputed(None, problem=str(exc))
    anchors = (rx_id, b["event_id"], a["event_id"])
    if str(q.get("subtype")) != bin_:
        return Recomputed(direction, anchors, f"subtype {q.get('subtype')!r} but bin {bin_!r}")
    return Recomputed(direction, anchors)


def _head(drug: Any) -> str:
    words = [w for w in _norm(str(drug)).split() if w.isalpha()]
    return words[0] if words else ""


def _t9(meta, q, raw: RawRecord, status) -> Recomputed:
    """ABSTAIN iff the dialogue states nothing that answers the question."""
    sid = int(_get(meta, "subject_id"))
    if meta.get("lab") is not None:
        lab, date = _lab_key(meta), str(_get(meta, "date"))
        rows = _on(raw.lab_series(sid, lab), date)
        stated = [r["event_id"] for r in rows if status.get(r["event_id"]) == "covered"]
        if stated:
            return Recomputed(None, problem=f"{lab} on {date} is stated in the dialogue ({stated})")
        # a missed lab is the day's only value; a never-measured lab has none
        return Recomputed(ABSTAIN, tuple(r["event_id"] for r in rows))
    drug, hadm = _get(meta, "drug"), int(_get(meta, "hadm_id"))
    # any order of the same drug (same head word: "Heparin" ~ "Heparin Sodium") counts
    same = [
        r
        for r in raw.records("rx", sid)
        if int(r["hadm_id"]) == hadm and _head(r["drug"]) == _head(drug)
    ]
    if not same:
        return Recomputed(None, problem=f"{drug!r} is not prescribed in admission {hadm}")
    stated = [r["event_id"] for r in same if status.get(r["event_id"]) == "covered"]
    if stated:
        return Recomputed(None, problem=f"{drug!r} orders {stated} are stated in the dialogue")
    return Recomputed(ABSTAIN)


def _t3(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, hadm = int(_get(meta, "subject_id")), int(_get(meta, "hadm_id"))
    finding = str(_get(meta, "lab_event_id"))
    lab = next((r for r in raw.records("labs", sid) if r["event_id"] == finding), None)
    if lab is None or int(lab["hadm_id"]) != hadm or lab["flag"] != "abnormal":
        return Recomputed(None, problem=f"{finding} is not an abnormal lab of admission {hadm}")
    code, version = str(_get(meta, "dx_code")), int(_get(meta, "dx_version"))
    if not _coded(raw.records("dx", sid), code, version, hadm):
        return Recomputed(None, problem=f"ICD-{version} {code} is not coded in admission {hadm}")
    visit = raw.visit_of(sid)[hadm]
    encounter = "er" if str(visit["admission_type"]) in EMERGENCY_TYPES else "admit"
    injection = _injection(q)
    positive = bool(injection) and injection.get("kind") == "t3"
    if positive and str(lab["value_text"]) not in str(injection.get("text", "")):
        return Recomputed(None, problem="the injected sentence does not state the finding")
    gold = "yes" if positive else "no"
    subtype = f"{'Y' if positive else 'N'}-{encounter}"
    if str(q.get("subtype")) != subtype:
        return Recomputed(gold, problem=f"subtype {q.get('subtype')!r} but raw class {subtype!r}")
    return Recomputed(gold)


def _coded(rows: list[dict], code: str, version: int, hadm: int | None) -> bool:
    """Whether one patient's dx / px rows hold the ICD code (in admission ``hadm``)."""
    code = code.strip().upper()
    return any(
        r["icd_code"] == code
        and int(r["icd_version"]) == int(version)
        and (hadm is None or int(r["hadm_id"]) == hadm)
        for r in rows
    )


def _t5(meta, q, raw: RawRecord, status) -> Recomputed:
    """yes iff an injected statement contradicts the raw record; the topic fact must exist."""
    sid, hadm = int(_get(meta, "subject_id")), int(_get(meta, "hadm_id"))
    kind = str(_get(meta, "kind"))
    injection = _injection(q)
    subtype = str(q.get("subtype"))
    if kind in ("diagnosis", "procedure"):
        rows = raw.records("dx" if kind == "diagnosis" else "px", sid)
        code, version = str(_get(meta, "code")), int(_get(meta, "icd_version"))
        if not _coded(rows, code, version, hadm):
            return Recomputed(None, problem=f"{kind} {code} is not in admission {hadm}")
        # the injected statement denies the coded fact: a contradiction
        gold = "yes" if injection else "no"
    else:
        lab, date = _lab_key(meta), str(_get(meta, "lab_date", "date"))
        series = raw.lab_series(sid, lab)
        day = _on(series, date)
        if not day:
            return Recomputed(None, problem=f"no {lab} on {date} in the raw record")
        if subtype.startswith("natural"):
            if lab == "glucose":
                return Recomputed(None, problem="the natural subtype excludes glucose")
            visits = raw.visit_of(sid)
            here = {int(visits[int(r["hadm_id"])]["visit_idx"]) for r in day}
            mine = {_dec(r["valuenum"]) for r in day}
            other = [r for r in series if int(visits[int(r["hadm_id"])]["visit_idx"]) not in here]
            if not any(_dec(r["valuenum"]) not in mine for r in other):
                return Recomputed(None, problem=f"{lab} does not vary across visits")
        if injection:
            stated = Decimal(str(_get(meta, "stated_value")))
            gold = "yes" if all(_dec(r["valuenum"]) != stated for r in day) else "no"
        else:
            gold = "no"
    if injection and str(injection.get("text", "")) != str(meta.get("statement", "")):
        return Recomputed(gold, problem="the injection text differs from meta statement")
    return Recomputed(gold)


def _as_list(x: Any) -> list:
    if isinstance(x, list | tuple):
        return list(x)
    return x.tolist() if hasattr(x, "tolist") else []


def _injection(q: Mapping[str, Any]) -> dict | None:
    text = q.get("injection")
    if text is None or (isinstance(text, float) and pd.isna(text)) or not str(text).strip():
        return None
    data = json.loads(str(text))
    return data if isinstance(data, dict) else (data[0] if data else None)


RECOMPUTERS = {
    "T1": _t1,
    "T2": _t2,
    "T3": _t3,
    "T4": _t4,
    "T5": _t5,
    "T6": _t6,
    "T7": _t7,
    "T8": _t8,
    "T9": _t9,
}


def recompute_question(
    question: Mapping[str, Any], raw: RawRecord, status: Mapping[str, str]
) -> Recomputed:
    """Recompute one question's gold from its meta and the raw record.

    Args:
        question: a questions.parquet row (task, subtype, options, injection, meta, ...).
        raw: :func:`load_raw` of (at least) the question's patients.
        status: event_id -> event_coverage status (T4 / T9 need what the dialogue states).

    Returns:
        A :class:`Recomputed`; ``gold`` None with a ``problem`` when it cannot be recomputed.
    """
    try:
        meta = json.loads(str(question["meta"]))
    except (TypeError, ValueError):
        return Recomputed(None, problem="meta is not valid JSON")
    if not isinstance(meta, dict):
        return Recomputed(None, problem="meta is not a JSON object")
    fn = RECOMPUTERS.get(str(question["task"]))
    if fn is None:
        return Recomputed(None, problem=f"unknown task {question['task']!r}")
    try:
        return fn(meta, question, raw, status)
    except _Missing as exc:
        return Recomputed(None, problem=str(exc))
    except (ValueError, TypeError, KeyError) as exc:
        return Recomputed(None, problem=f"{type(exc).__name__}: {exc}")
