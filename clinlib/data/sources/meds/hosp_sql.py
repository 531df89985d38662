"""SQL of the nine MIMIC-shaped hosp views over ``meds_data`` (paper §3 "Cohort"): admission
spans, hadm_id assignment, source or surrogate ids, one SELECT per table in
:data:`clinlib.data.schema.HOSP_TABLES` order and types.
"""

from __future__ import annotations

from clinlib.data.schema import HOSP_TABLES
from clinlib.data.sources.meds.families import CODE_ROUTE_SQL, DRUG_SQL, with_content_id
from clinlib.data.sources.meds.format import EVENT_ID_PATTERN, ID_TYPES
from clinlib.data.sources.meds.ranges import VALUE_AS_DOUBLE, panel_ranges_sql
from clinlib.data.sources.meds.read import sql_literal


def _assign_hadm_sql(kind: str, trusted: bool, by_day: bool = False) -> str:
    """Rows of ``kind`` with their admission id ``hid`` (unnamed rows left out:
    :mod:`clinlib.data.sources.meds.families`).

    Trusted: the hadm_id column as is (NULL = outside any admission, like MIMIC's outpatient
    labs). Otherwise the admission whose [admittime, dischtime] holds the row's time — by
    calendar day for date-only rows (procedure chartdate is midnight of the admission day).
    """
    if trusted:
        return f"SELECT *, hadm_id AS hid FROM meds_data WHERE kind = {sql_literal(kind)} AND NOT unnamed"
    key = "time + INTERVAL 1 DAY - INTERVAL 1 MICROSECOND" if by_day else "time"
    inside = (
        "CAST(e.time AS DATE) <= CAST(a.dischtime AS DATE)" if by_day else "e.time <= a.dischtime"
    )
    return f"""
        SELECT e.* EXCLUDE (key_time),
               CASE WHEN a.dischtime IS NULL OR {inside} THEN a.hadm_id END AS hid
        FROM (SELECT *, {key} AS key_time FROM meds_data
              WHERE kind = {sql_literal(kind)} AND NOT unnamed) e
        ASOF LEFT JOIN meds_admission_spans a
          ON e.subject_id = a.subject_id AND e.key_time >= a.admittime"""


def _surrogate(partition: str = "") -> str:
    over = f"PARTITION BY {partition} " if partition else ""
    return f"row_number() OVER ({over}ORDER BY subject_id, time, code, meds_shard, meds_row)"


def _id_sql(kind: str, profile: dict, partition: str = "") -> str:
    if profile.get(kind, {}).get("ids"):
        return f"TRY_CAST(regexp_extract(event_id, {sql_literal(EVENT_ID_PATTERN[kind])}, 1) AS INTEGER)"
    return _surrogate(partition)


def _with_id(kind: str, profile: dict, source: str, id_name: str) -> str:
    """``source`` rows with ``id_name``: the kit's own event_id when every row of the kind
    has one, else the content id (stable under other patients and splits; families module)."""
    if profile.get(kind, {}).get("ids"):
        return f"SELECT *, {_id_sql(kind, profile)} AS {id_name} FROM ({source})"
    return with_content_id(source, id_name)


def _mimic_select(table: str, provided: dict[str, str], source: str) -> str:
    """All HOSP_TABLES columns of ``table`` in order: provided expressions, else typed NULL
    (ids as :data:`~clinlib.data.sources.meds.format.ID_TYPES`)."""
    cols = [
        f"CAST({provided.get(c, 'NULL')} AS {ID_TYPES.get(c, t)}) AS {c}"
        for c, t in HOSP_TABLES[table].items()
    ]
    return f"SELECT {', '.join(cols)} FROM ({source})"


def admission_spans_sql(profile: dict) -> str:
    dis_trusted = profile.get("discharge", {}).get("hadm", False)
    # A discharge without hadm_id closes the latest admission that started before it.
    dis_hadm = (
        "SELECT dis_hadm_id AS hid, * FROM dis"
        if dis_trusted
        else """SELECT i.hid, d.* FROM dis d ASOF JOIN ids i
                ON d.subject_id = i.subject_id AND d.dischtime >= i.admittime"""
    )
    return f"""
    WITH adm AS (
        -- an exact copy of an admission row is the same admission (counted:
        -- duplicate_admissions_sql); a hadm_id on two different rows is refused (views)
        SELECT * EXCLUDE (copy_n) FROM (
            SELECT *, time AS admittime,
                   nullif(nullif(split_part(code, '//', 2), ''), 'UNK') AS admission_type,
                   nullif(nullif(split_part(code, '//', 3), ''), 'UNK') AS admission_location,
                   row_number() OVER (PARTITION BY subject_id, time, code, hadm_id
                                      ORDER BY meds_shard, meds_row) AS copy_n
            FROM meds_data WHERE kind = 'admission' AND time IS NOT NULL
        ) WHERE copy_n = 1
    ),
    ids AS (
        -- An admission without hadm_id gets its content id (stable under other patients).
        SELECT *, coalesce(hadm_id, content_hid) AS hid
        FROM ({with_content_id("SELECT * FROM adm", "content_hid")})
    ),
    dis AS (
        SELECT subject_id, time AS dischtime, hadm_id AS dis_hadm_id, code AS dis_code,
               meds_shard AS dis_shard, meds_row AS dis_row,
               nullif(nullif(substr(code, 21), ''), 'UNK') AS discharge_location
        FROM meds_data WHERE kind = 'discharge' AND time IS NOT NULL
    ),
    dis_hadm AS ({dis_hadm}),
    dis_first AS (
        SELECT * FROM (
            SELECT *, row_number() OVER (
                PARTITION BY hid ORDER BY dischtime, dis_code, dis_shard, dis_row) AS rn
            FROM dis_hadm WHERE hid IS NOT NULL
        ) WHERE rn = 1
    )
    SELECT i.subject_id, i.hid AS hadm_id, i.admittime,
           coalesce(d.dischtime, i.end_time) AS dischtime,
           i.admission_type, i.admission_location, d.discharge_location
    FROM ids i LEFT JOIN dis_first d ON d.hid = i.hid
    """


# Exact copies of admission rows (same subject, time, code and hadm_id) beyond the first.
DUPLICATE_ADMISSIONS_SQL = """
SELECT count(*) - count(DISTINCT (subject_id, time, code, hadm_id))
FROM meds_data WHERE kind = 'admission' AND time IS NOT NULL
"""
# A hadm_id that two different admission rows carry: (hadm_id, first shard, the two rows).
CONFLICTING_HADM_SQL = """
SELECT hadm_id, min(meds_shard),
       list(DISTINCT CAST(time AS VARCHAR) || ' ' || code ORDER BY CAST(time AS VARCHAR) || ' ' || code)
FROM (SELECT DISTINCT hadm_id, time, code, meds_shard FROM meds_data
      WHERE kind = 'admission' AND time IS NOT NULL AND hadm_id IS NOT NULL)
GROUP BY hadm_id HAVING count(DISTINCT (time, code)) > 1 ORDER BY hadm_id LIMIT 1
"""


def views_sql(profile: dict, ranges_given: bool = True) -> dict[str, str]:
    """SQL of the nine MIMIC-shaped hosp views, by table name (``profile``: :func:`_profile`
    of the views module; ``ranges_given``: the dataset carries its own lab ranges)."""
    views = {
        "patients": _patients_sql(),
        "admissions": _admissions_sql(),
        "labevents": _labevents_sql(profile, ranges_given),
        "prescriptions": _prescriptions_sql(profile),
    }
    views.update(_coded_sql(profile))
    views["d_labitems"] = _d_labitems_sql()
    views.update(_icd_dictionary_sql())
    return views


def _trusted(profile: dict, kind: str) -> bool:
    """Rows of ``kind`` carry hadm_id (trust it rather than joining admission spans)."""
    return profile.get(kind, {}).get("hadm", False)


def _patients_sql() -> str:
    """patients: gender, birth and death codes; anchor year = the first event's year."""
    return _mimic_select(
        "patients",
        {
            "subject_id": "subject_id",
            "gender": "gender",
            "anchor_age": "year(first_time) - year(birth)",
            "anchor_year": "year(first_time)",
            "dod": "dod",
        },
        """
        SELECT subject_id,
               min(CASE WHEN starts_with(code, 'GENDER//') THEN substr(code, 9) END) AS gender,
               min(CASE WHEN code = 'MEDS_BIRTH' THEN time END) AS birth,
               min(CASE WHEN code = 'MEDS_DEATH' THEN time END) AS dod,
               min(CASE WHEN code NOT IN ('MEDS_BIRTH', 'MEDS_DEATH') THEN time END)
                   AS first_time
        FROM meds_data GROUP BY subject_id
        """,
    )


def _admissions_sql() -> str:
    """admissions: the admission spans as they are."""
    return _mimic_select(
        "admissions",
        {
            c: c
            for c in (
                "subject_id",
                "hadm_id",
                "admittime",
                "dischtime",
                "admission_type",
                "admission_location",
                "discharge_location",
            )
        },
        "SELECT * FROM meds_admission_spans",
    )


def _labevents_sql(profile: dict, ranges_given: bool) -> str:
    """labevents: LAB//<itemid>//<unit> rows, with their own or the panel's ranges."""
    range_join, range_columns = panel_ranges_sql(ranges_given)
    return _mimic_select(
        "labevents",
        {
            "labevent_id": "labevent_id",
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "itemid": "itemid",
            "charttime": "time",
            "value": "text_value",
            "valuenum": VALUE_AS_DOUBLE,
            "valueuom": "valueuom",
            **range_columns,
        },
        f"""
        SELECT * FROM ({_with_id("lab", profile, _lab_rows_sql(profile), "labevent_id")})
        {range_join} WHERE itemid IS NOT NULL
        """,
    )


def _lab_rows_sql(profile: dict) -> str:
    return f"""
        SELECT *, TRY_CAST(split_part(code, '//', 2) AS INTEGER) AS itemid,
               nullif(nullif(regexp_extract(code, '^LAB//[^/]*//(.*)$', 1), ''), 'UNK')
                   AS valueuom
        FROM ({_assign_hadm_sql("lab", _trusted(profile, "lab"))})"""


def _prescriptions_sql(profile: dict) -> str:
    """prescriptions: medication orders, drug and route parsed from the code."""
    return _mimic_select(
        "prescriptions",
        {
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "pharmacy_id": "pharmacy_id",
            "starttime": "time",
            "stoptime": "end_time",
            "drug": "drug",
            "dose_val_rx": "coalesce(text_value, CAST(numeric_value AS VARCHAR))",
            "dose_unit_rx": "unit",
            "route": "coalesce(code_route, route)",
        },
        _with_id(
            "medication",
            profile,
            f"""SELECT *, {DRUG_SQL} AS drug, {CODE_ROUTE_SQL} AS code_route
                FROM ({_assign_hadm_sql("medication", _trusted(profile, "medication"))})""",
            "pharmacy_id",
        ),
    )


def _coded_sql(profile: dict) -> dict[str, str]:
    """diagnoses_icd and procedures_icd: ICD version and code parsed from the code;
    procedures join their admission by calendar day."""
    views = {}
    for table, kind, prefix, by_day in (
        ("diagnoses_icd", "diagnosis", "DIAGNOSIS", False),
        ("procedures_icd", "procedure", "PROCEDURE", True),
    ):
        provided = {
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "seq_num": "seq_num",
            "icd_code": "icd_code",
            "icd_version": "icd_version",
        }
        if by_day:
            provided["chartdate"] = "CAST(time AS DATE)"
        views[table] = _mimic_select(
            table,
            provided,
            f"""
            SELECT *, {_id_sql(kind, profile, partition="subject_id, hid")} AS seq_num FROM (
                SELECT *, TRY_CAST(split_part(code, '//', 3) AS SMALLINT) AS icd_version,
                       regexp_extract(code, '^{prefix}//ICD//[^/]*//(.*)$', 1) AS icd_code
                FROM ({_assign_hadm_sql(kind, _trusted(profile, kind), by_day=by_day)})
            )
            """,
        )
    return views


def _d_labitems_sql() -> str:
    """d_labitems: every lab itemid seen in the data or the code metadata, labelled."""
    return _mimic_select(
        "d_labitems",
        {"itemid": "itemid", "label": "label"},
        """
        SELECT TRY_CAST(split_part(c.code, '//', 2) AS INTEGER) AS itemid,
               min(m.description) AS label
        FROM (SELECT DISTINCT code FROM meds_data WHERE kind = 'lab'
              UNION SELECT code FROM meds_codes WHERE starts_with(code, 'LAB//')) c
        LEFT JOIN meds_codes m ON m.code = c.code
        GROUP BY 1 HAVING itemid IS NOT NULL
        """,
    )


def _icd_dictionary_sql() -> dict[str, str]:
    """d_icd_diagnoses and d_icd_procedures: every ICD code seen, with its long title."""
    views = {}
    for table, prefix, kind in (
        ("d_icd_diagnoses", "DIAGNOSIS", "diagnosis"),
        ("d_icd_procedures", "PROCEDURE", "procedure"),
    ):
        views[table] = _mimic_select(
            table,
            {"icd_code": "icd_code", "icd_version": "icd_version", "long_title": "long_title"},
            f"""
            SELECT regexp_extract(c.code, '^{prefix}//ICD//[^/]*//(.*)$', 1) AS icd_code,
                   TRY_CAST(split_part(c.code, '//', 3) AS SMALLINT) AS icd_version,
                   min(m.description) AS long_title
            FROM (SELECT DISTINCT code FROM meds_data WHERE kind = '{kind}'
                  UNION SELECT code FROM meds_codes WHERE starts_with(code, '{prefix}//ICD//')) c
            LEFT JOIN meds_codes m ON m.code = c.code
            GROUP BY 1, 2 HAVING icd_version IS NOT NULL
            """,
        )
    return views
