"""Per-task gold recomputation from a question's ``meta`` and the raw record (paper
Appendix A gate L2; the meta keys each task reads are listed in
:mod:`clinlib.tasks.recompute`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import pandas as pd

from clinlib.data.vocab import INDEX_DISEASE_ICD, LAB_BY_KEY
from clinlib.tasks import rules
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.recompute.arithmetic import as_decimal, compare_values, t8_gold, trend_gold
from clinlib.tasks.recompute.order import recompute_t10
from clinlib.tasks.recompute.raw import RawRecord
from clinlib.tasks.registry import TASKS
from clinlib.tasks.spec import resolve

EMERGENCY_TYPES = ("EW EMER.", "DIRECT EMER.", "URGENT", "EU OBSERVATION")


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


def meta_get(meta: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in meta and meta[k] is not None:
            return meta[k]
    raise _Missing(f"meta lacks {' / '.join(repr(k) for k in keys)}")


def panel_lab_key(meta: Mapping[str, Any]) -> str:
    key = meta_get(meta, "lab")
    if key not in LAB_BY_KEY:
        raise _Missing(f"meta lab {key!r} is not a panel lab")
    return str(key)


def rows_on(rows: list[dict], date: str) -> list[dict]:
    return [r for r in rows if r["date"] == date]


def gold_t1(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab, date = (
        int(meta_get(meta, "subject_id")),
        panel_lab_key(meta),
        str(meta_get(meta, "date")),
    )
    rows = rows_on(raw.lab_series(sid, lab), date)
    if len(rows) != 1:
        return Recomputed(None, problem=f"{len(rows)} {lab} values on {date} in the raw record")
    r = rows[0]
    if not isinstance(r["unit"], str) or not r["unit"]:
        return Recomputed(None, problem=f"{r['event_id']} has no unit in the raw record")
    return Recomputed(f"{r['value_text']} {r['unit']}", (r["event_id"],))


def gold_t2(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab = int(meta_get(meta, "subject_id")), panel_lab_key(meta)
    hadm_ids = [int(h) for h in meta_get(meta, "hadm_ids")]
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


def gold_t4(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, family = int(meta_get(meta, "subject_id")), str(meta_get(meta, "family"))
    hadm = int(meta_get(meta, "hadm_id", "dx_hadm_id"))
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
    values = [as_decimal(r["valuenum"]) for r in raw.lab_series(sid, str(lab))]
    if not values:
        raise _Missing(f"subject {sid} has no {lab} value")
    return max(values) if kind == "b" else abs(values[-1] - values[0])


def gold_t6(meta, q, raw: RawRecord, status) -> Recomputed:
    sids = [int(s) for s in meta_get(meta, "subject_ids")]
    kind = str(q["subtype"]).lower()[:1]  # a_n_diagnoses / b_max_value / c_delta_value
    if len(sids) != 2 or kind not in ("a", "b", "c"):
        return Recomputed(None, problem=f"T6 needs two patients and subtype a/b/c ({kind!r})")
    lab = None if kind == "a" else panel_lab_key(meta)
    a, b = (_t6_quantity(raw, s, kind, lab) for s in sids)
    if kind == "a":
        return Recomputed("similar" if a == b else ("A" if a > b else "B"))
    return Recomputed(compare_values(a, b))


@lru_cache(maxsize=65536)
def _norm(s: str) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in s.lower()).split())


def _mentions(hay: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {hay} "


def gold_t7(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, hadm = int(meta_get(meta, "subject_id")), int(meta_get(meta, "hadm_id"))
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


def gold_t8(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, lab = int(meta_get(meta, "subject_id")), panel_lab_key(meta)
    rx_id = str(meta_get(meta, "rx_event_id"))
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


def gold_t9(meta, q, raw: RawRecord, status) -> Recomputed:
    """ABSTAIN iff the dialogue states nothing that answers the question."""
    sid = int(meta_get(meta, "subject_id"))
    if meta.get("lab") is not None:
        lab, date = panel_lab_key(meta), str(meta_get(meta, "date"))
        rows = rows_on(raw.lab_series(sid, lab), date)
        stated = [r["event_id"] for r in rows if status.get(r["event_id"]) == "covered"]
        if stated:
            return Recomputed(None, problem=f"{lab} on {date} is stated in the dialogue ({stated})")
        # a missed lab is the day's only value; a never-measured lab has none
        return Recomputed(ABSTAIN, tuple(r["event_id"] for r in rows))
    drug, hadm = meta_get(meta, "drug"), int(meta_get(meta, "hadm_id"))
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


def gold_t3(meta, q, raw: RawRecord, status) -> Recomputed:
    sid, hadm = int(meta_get(meta, "subject_id")), int(meta_get(meta, "hadm_id"))
    finding = str(meta_get(meta, "lab_event_id"))
    lab = next((r for r in raw.records("labs", sid) if r["event_id"] == finding), None)
    if lab is None or int(lab["hadm_id"]) != hadm or lab["flag"] != "abnormal":
        return Recomputed(None, problem=f"{finding} is not an abnormal lab of admission {hadm}")
    code, version = str(meta_get(meta, "dx_code")), int(meta_get(meta, "dx_version"))
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


def gold_t5(meta, q, raw: RawRecord, status) -> Recomputed:
    """yes iff an injected statement contradicts the raw record; the topic fact must exist."""
    sid, hadm = int(meta_get(meta, "subject_id")), int(meta_get(meta, "hadm_id"))
    kind = str(meta_get(meta, "kind"))
    injection = _injection(q)
    subtype = str(q.get("subtype"))
    if kind in ("diagnosis", "procedure"):
        rows = raw.records("dx" if kind == "diagnosis" else "px", sid)
        code, version = str(meta_get(meta, "code")), int(meta_get(meta, "icd_version"))
        if not _coded(rows, code, version, hadm):
            return Recomputed(None, problem=f"{kind} {code} is not in admission {hadm}")
        # the injected statement denies the coded fact: a contradiction
        gold = "yes" if injection else "no"
    else:
        lab, date = panel_lab_key(meta), str(meta_get(meta, "lab_date", "date"))
        series = raw.lab_series(sid, lab)
        day = rows_on(series, date)
        if not day:
            return Recomputed(None, problem=f"no {lab} on {date} in the raw record")
        if subtype.startswith("natural"):
            if lab == "glucose":
                return Recomputed(None, problem="the natural subtype excludes glucose")
            visits = raw.visit_of(sid)
            here = {int(visits[int(r["hadm_id"])]["visit_idx"]) for r in day}
            mine = {as_decimal(r["valuenum"]) for r in day}
            other = [r for r in series if int(visits[int(r["hadm_id"])]["visit_idx"]) not in here]
            if not any(as_decimal(r["valuenum"]) not in mine for r in other):
                return Recomputed(None, problem=f"{lab} does not vary across visits")
        if injection:
            stated = Decimal(str(meta_get(meta, "stated_value")))
            gold = "yes" if all(as_decimal(r["valuenum"]) != stated for r in day) else "no"
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


def gold_t10(meta, q, raw: RawRecord, status) -> Recomputed:
    meta_get(meta, "subject_id")
    gold, anchors, problem = recompute_t10(meta, str(q.get("subtype")), raw)
    return Recomputed(gold, anchors if gold is not None else None, problem)


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
    spec = TASKS.get(str(question["task"]))
    fn = resolve(spec.recompute) if spec is not None else None
    if fn is None:
        return Recomputed(None, problem=f"unknown task {question['task']!r}")
    try:
        return fn(meta, question, raw, status)
    except _Missing as exc:
        return Recomputed(None, problem=str(exc))
    except (ValueError, TypeError, KeyError) as exc:
        return Recomputed(None, problem=f"{type(exc).__name__}: {exc}")
