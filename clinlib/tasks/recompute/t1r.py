"""Independent gold recomputation of the extended T1R questions (relative-time retrieval) for
gate L2 (paper Appendix A; the spec is the docstring of :mod:`clinlib.tasks.generators.t1r`).

From the raw record only (this package's SQL, never the generator or the events table):

* ``explicit`` — T1's rule: the single kept value of ``meta.lab`` on ``meta.date``;
* ``relative`` — the raw visit whose rank is ``meta.visit_idx`` (admissions ordered by
  (admittime, hadm_id)), its kept values of ``meta.lab`` ordered by (charttime,
  labevent_id), the ``meta.position``-th of them;

and, for both subtypes, the pair must name ONE event: the date's value must be the
position's value, the visit must hold at least two values of the lab, on distinct days,
all ``covered`` in the dialogue (so the position counts what the dialogue shows). Gold
``"<value_text> <unit>"``; anchor its event id.

T1F (the Lab-F rejection twin, :func:`recompute_t1f`): the same visit and lab hold fewer
values than the asked position.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.recompute.per_task import Recomputed, meta_get, panel_lab_key, rows_on
from clinlib.tasks.recompute.raw import RawRecord


def _by_position(meta: Mapping[str, Any], raw: RawRecord, sid: int, lab: str):
    """(the position's raw row, the visit's raw rows) or (None, problem text)."""
    want = int(meta_get(meta, "visit_idx"))
    visits = [v for v in raw.records("visits", sid) if int(v["visit_idx"]) == want]
    if len(visits) != 1:
        return None, f"patient {sid} has no visit of rank {want} in the raw record"
    hadm = int(visits[0]["hadm_id"])
    rows = [r for r in raw.lab_series(sid, lab) if int(r["hadm_id"]) == hadm]
    rows.sort(key=lambda r: (r["charttime"], int(r["labevent_id"])))
    k = int(meta_get(meta, "position"))
    if not 1 <= k <= len(rows):
        return None, f"position {k} outside the visit's {len(rows)} {lab} values"
    return rows[k - 1], rows


def recompute_t1r(meta, q, raw: RawRecord, status: Mapping[str, str]) -> Recomputed:
    """L2 recomputation of one T1R question (module docstring)."""
    sid, lab, date = (
        int(meta_get(meta, "subject_id")),
        panel_lab_key(meta),
        str(meta_get(meta, "date")),
    )
    on_date = rows_on(raw.lab_series(sid, lab), date)
    if len(on_date) != 1:
        return Recomputed(None, problem=f"{len(on_date)} {lab} values on {date} in the raw record")
    at, rows = _by_position(meta, raw, sid, lab)
    if at is None:
        return Recomputed(None, problem=str(rows))
    if at["event_id"] != on_date[0]["event_id"]:
        return Recomputed(
            None, problem=f"the position names {at['event_id']}, the date {on_date[0]['event_id']}"
        )
    if len(rows) < 2 or len({r["date"] for r in rows}) != len(rows):
        return Recomputed(None, problem=f"the visit's {lab} values are not >= 2 distinct days")
    hidden = [r["event_id"] for r in rows if status.get(str(r["event_id"])) != "covered"]
    if hidden:
        return Recomputed(None, problem=f"visit values {hidden[:3]} are not covered")
    chosen = at if str(q.get("subtype")) == "relative" else on_date[0]
    if not isinstance(chosen["unit"], str) or not chosen["unit"]:
        return Recomputed(None, problem=f"{chosen['event_id']} has no unit in the raw record")
    return Recomputed(f"{chosen['value_text']} {chosen['unit']}", (chosen["event_id"],))


def recompute_t1f(meta, q, raw: RawRecord, status: Mapping[str, str]) -> Recomputed:
    """L2 recomputation of one T1F rejection question (the spec is the docstring of
    :mod:`clinlib.tasks.generators.t1f`): the raw visit of rank ``meta.visit_idx`` holds
    exactly ``meta.n_in_visit`` kept values of the lab, all covered, on distinct days, and
    ``meta.position`` lies beyond them -> gold ``insufficient information``; anchors = those
    values."""
    sid, lab = int(meta_get(meta, "subject_id")), panel_lab_key(meta)
    want = int(meta_get(meta, "visit_idx"))
    visits = [v for v in raw.records("visits", sid) if int(v["visit_idx"]) == want]
    if len(visits) != 1:
        return Recomputed(
            None, problem=f"patient {sid} has no visit of rank {want} in the raw record"
        )
    hadm = int(visits[0]["hadm_id"])
    rows = [r for r in raw.lab_series(sid, lab) if int(r["hadm_id"]) == hadm]
    n, k = int(meta_get(meta, "n_in_visit")), int(meta_get(meta, "position"))
    if len(rows) != n or k <= n:
        return Recomputed(
            None, problem=f"the visit holds {len(rows)} {lab} values; asked the {k}-th of {n}"
        )
    if len({r["date"] for r in rows}) != len(rows):
        return Recomputed(None, problem=f"the visit's {lab} values are not on distinct days")
    hidden = [r["event_id"] for r in rows if status.get(str(r["event_id"])) != "covered"]
    if hidden:
        return Recomputed(None, problem=f"visit values {hidden[:3]} are not covered")
    return Recomputed(ABSTAIN, tuple(str(r["event_id"]) for r in rows))


def _words(s: object) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in str(s).lower()).split())


def _names(row: Mapping[str, Any], option: str) -> bool:
    """Whether a raw prescription row's normalised name holds the option's words."""
    want = _words(option)
    return any(
        bool(want) and f" {want} " in f" {_words(row[c])} "
        for c in ("drug_key", "drug_words")
        if isinstance(row[c], str)
    )


def recompute_t7r(meta, q, raw: RawRecord, status: Mapping[str, str]) -> Recomputed:
    """L2 recomputation of one T7R question (the spec is the docstring of
    :mod:`clinlib.tasks.generators.t7r`), from the raw prescriptions only: the raw visit of
    rank ``meta.visit_idx``; its orders by start time; ``explicit``: the single order of that
    visit on ``meta.date``; ``relative``: the order of rank ``meta.position``, which must be
    the same order (alone on its day; every order up to it covered). Exactly one option names
    it; every other option must name an order elsewhere in the record (the distractors occur
    in the record) and none an order on that day. Gold its letter; anchor its event id."""
    sid, want = int(meta_get(meta, "subject_id")), int(meta_get(meta, "visit_idx"))
    visits = [v for v in raw.records("visits", sid) if int(v["visit_idx"]) == want]
    if len(visits) != 1:
        return Recomputed(None, problem=f"patient {sid} has no visit of rank {want}")
    hadm, date = int(visits[0]["hadm_id"]), str(meta_get(meta, "date"))
    allrx = raw.records("rx", sid)
    rows = sorted(
        (r for r in allrx if int(r["hadm_id"]) == hadm),
        key=lambda r: (pd.Timestamp(r["starttime"]), str(r["event_id"])),
    )
    day = [r for r in rows if str(pd.Timestamp(r["starttime"]).date()) == date]
    k = int(meta_get(meta, "position"))
    if len(day) != 1 or not 1 <= k <= len(rows) or rows[k - 1] is not day[0]:
        return Recomputed(None, problem=f"rank {k} and date {date} do not name one order")
    hidden = [r["event_id"] for r in rows[:k] if status.get(str(r["event_id"])) != "covered"]
    if hidden:
        return Recomputed(None, problem=f"orders {hidden[:3]} up to the rank are not covered")
    options = [str(o) for o in json.loads(json.dumps(list(q["options"])))]
    hits = [i for i, o in enumerate(options) if _names(day[0], o)]
    if len(hits) != 1:
        return Recomputed(None, problem=f"{len(hits)} options name the order")
    same_day = [r for r in allrx if str(pd.Timestamp(r["starttime"]).date()) == date]
    for i, o in enumerate(options):
        if i != hits[0] and (
            not any(_names(r, o) for r in allrx) or any(_names(r, o) for r in same_day)
        ):
            return Recomputed(None, problem=f"distractor {o!r} is absent or on {date}")
    return Recomputed(rules.OPTION_LETTERS[hits[0]], (str(day[0]["event_id"]),))
