"""Gate L2 for T10 (LongMedBench "Temporal reasoning"; docs/design.md "T10"): the order of a
question's items recomputed from the raw hosp tables (this package's own SQL,
:mod:`clinlib.tasks.recompute.raw`), not from the events table or the generator.

Meta keys read (items in the shown letter order):

* ``visit_cloze``: subject_id, hadm_id, event_ids -> each id's raw time (``RX-``: the
  order's starttime, else the admission time; ``PX-``: the procedure's chartdate at
  midnight); every item must belong to that admission and sit at its own minute; gold = the
  letters by time; anchors = the event ids.
* ``visit_sorting`` and ``visit_sorting_notes``: subject_id, hadm_ids -> raw admittime; the admissions must be
  consecutive visits of the patient; gold = the letters by admittime; anchors = ``ADM-<hadm>``.
* ``joint_sorting``: subject_id, clips ``[hadm_id, admission|discharge]`` -> by admittime,
  the admission half first; each admission must appear once per half; anchors = ``ADM-`` and
  ``DIS-<hadm>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.tasks.recompute.raw import RawRecord

_LETTERS = "ABCDEFGHIJ"
_HALVES = ("admission", "discharge")


def _order(keys: list[Any]) -> str:
    """Letters of ``keys`` (in shown order) sorted by key."""
    ranked = sorted(range(len(keys)), key=lambda i: keys[i])
    return ",".join(_LETTERS[i] for i in ranked)


def _minute(ts: Any) -> pd.Timestamp:
    return pd.Timestamp(ts).floor("min")


def _cloze(meta: Mapping[str, Any], raw: RawRecord) -> tuple[str | None, tuple, str | None]:
    sid, hadm = int(meta["subject_id"]), int(meta["hadm_id"])
    ids = [str(e) for e in meta["event_ids"]]
    rx = {r["event_id"]: r for r in raw.records("rx", sid)}
    px = {r["event_id"]: r for r in raw.records("px", sid)}
    times = []
    for eid in ids:
        row = rx.get(eid) or px.get(eid)
        if row is None:
            return None, (), f"{eid} is no order / procedure of subject {sid} in the raw record"
        if int(row["hadm_id"]) != hadm:
            return None, (), f"{eid} belongs to admission {row['hadm_id']}, not {hadm}"
        t = row["starttime"] if eid in rx else pd.Timestamp(str(row["date"]))
        times.append(_minute(t))
    if len(set(times)) != len(times):
        return None, (), "two removed events share a minute in the raw record"
    return _order(times), tuple(sorted(ids)), None


def _visits(meta: Mapping[str, Any], raw: RawRecord, hadms: list[int]) -> dict[int, dict] | str:
    sid = int(meta["subject_id"])
    visits = raw.visit_of(sid)
    missing = [h for h in hadms if h not in visits]
    if missing:
        return f"admission(s) {missing} of subject {sid} are not in the raw record"
    idx = sorted({int(visits[h]["visit_idx"]) for h in hadms})
    if idx != list(range(idx[0], idx[0] + len(idx))):
        return f"admissions {sorted(set(hadms))} are not consecutive visits (visit_idx {idx})"
    return visits


def _sorting(meta: Mapping[str, Any], raw: RawRecord) -> tuple[str | None, tuple, str | None]:
    hadms = [int(h) for h in meta["hadm_ids"]]
    visits = _visits(meta, raw, hadms)
    if isinstance(visits, str):
        return None, (), visits
    keys = [(pd.Timestamp(visits[h]["admittime"]), h) for h in hadms]
    return _order(keys), tuple(sorted(f"ADM-{h}" for h in hadms)), None


def _joint(meta: Mapping[str, Any], raw: RawRecord) -> tuple[str | None, tuple, str | None]:
    clips = [(int(h), str(half)) for h, half in meta["clips"]]
    hadms = sorted({h for h, _ in clips})
    if sorted(clips) != sorted((h, half) for h in hadms for half in _HALVES):
        return None, (), "the clips are not one admission and one discharge half per visit"
    visits = _visits(meta, raw, hadms)
    if isinstance(visits, str):
        return None, (), visits
    keys = [(pd.Timestamp(visits[h]["admittime"]), h, _HALVES.index(half)) for h, half in clips]
    anchors = tuple(sorted([f"ADM-{h}" for h in hadms] + [f"DIS-{h}" for h in hadms]))
    return _order(keys), anchors, None


RECOMPUTE_T10 = {
    "visit_cloze": _cloze,
    "visit_sorting": _sorting,
    "joint_sorting": _joint,
    "visit_sorting_notes": _sorting,  # the same windows and gold; only the clips differ
}


def recompute_t10(meta: Mapping[str, Any], subtype: str, raw: RawRecord):
    """(gold, anchors, problem) of one T10 question; gold None when not recomputable."""
    fn = RECOMPUTE_T10.get(subtype)
    if fn is None:
        return None, (), f"unknown T10 subtype {subtype!r}"
    return fn(meta, raw)
