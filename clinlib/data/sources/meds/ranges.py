"""Ranges in the MEDS views (paper §3 "Cohort"; T3/T4 abnormal-value anchors): subject ids
held as INTEGER, and lab reference ranges — the dataset's own, else the panel's typical range.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from clinlib.data.sources.meds.format import INT32_MAX
from clinlib.data.sources.meds.read import sql_literal
from clinlib.data.sources.mimic import SourceSchemaError
from clinlib.data.units import units_frame
from clinlib.data.vocab import LAB_PANEL


def check_id_ranges(con: duckdb.DuckDBPyConnection, profile: dict, shards: list[Path]) -> None:
    """MIMIC-shaped views hold subject ids as INTEGER: refuse ids that would overflow
    (hadm_id, labevent_id and pharmacy_id are BIGINT there: format.ID_TYPES)."""
    lo, hi = con.execute("SELECT min(subject_id), max(subject_id) FROM meds_data").fetchone()
    for column, (a, b) in [("subject_id", (lo, hi))]:
        for v in (a, b):
            if v is not None and not -INT32_MAX - 1 <= v <= INT32_MAX:
                raise SourceSchemaError(
                    shards[0].parent,
                    column=column,
                    expected="ids within INTEGER range (MIMIC-shaped views)",
                    found=str(v),
                )


# float32 -> its shortest decimal text -> DOUBLE: 1.2f reads back as 1.2.
VALUE_AS_DOUBLE = "CAST(CAST(numeric_value AS VARCHAR) AS DOUBLE)"


def panel_ranges_sql(ranges_given: bool) -> tuple[str, dict[str, str]]:
    """A JOIN clause and the labevents range/flag columns (package docstring, "Lab reference
    ranges"): the dataset's own when it has any, else the panel's typical range — in the
    row's own unit. A code that carries a known alternative unit (``LAB//50912//umol/L``) gets
    the panel's range divided by the unit's factor (:mod:`clinlib.data.units`; the cohort
    stage converts value and range back together), so it is flagged against the range of
    its own unit; a unit the table does not know gets no range (the cohort stage excludes
    the row: ``unit_not_convertible``). An empty unit is given the panel's range here, but the
    cohort stage excludes the row (``unit_missing``): a number without a unit is never stated."""
    own = {"ref_range_lower": "ref_low", "ref_range_upper": "ref_high", "flag": "flag"}
    if ranges_given:
        return "", own
    units = units_frame()
    rows = []
    for lab in LAB_PANEL:
        pairs = units.loc[units["lab_key"] == lab.key, ["unit", "factor"]].values.tolist()
        for unit, factor in [("", 1.0), *pairs]:  # no unit: the panel's
            lo = "NULL" if lab.ref_low is None else repr(lab.ref_low / factor)
            hi = "NULL" if lab.ref_high is None else repr(lab.ref_high / factor)
            rows += [f"({itemid}, {sql_literal(unit)}, {lo}, {hi})" for itemid in lab.itemids]
    join = (
        f"LEFT JOIN (SELECT * FROM (VALUES {', '.join(rows)}) AS p(p_itemid, p_unit, p_low, "
        "p_high)) p ON p.p_itemid = itemid AND p.p_unit = coalesce(trim(valueuom), '')"
    )
    flag = f"CASE WHEN {VALUE_AS_DOUBLE} < p_low OR {VALUE_AS_DOUBLE} > p_high THEN 'abnormal' END"
    return join, {
        "ref_range_lower": "CAST(p_low AS DOUBLE)",
        "ref_range_upper": "CAST(p_high AS DOUBLE)",
        "flag": flag,
    }
