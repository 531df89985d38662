"""Gate L2 for T11 (LongMedBench's decision task, T3-N / T3-A / T3-D; the spec is the docstring of
:mod:`clinlib.tasks.generators.t11` and the decay of :mod:`clinlib.tasks.answers.decision`):
the gold and its time-decay credits recomputed from the raw hosp tables (this package's own
SQL, :mod:`clinlib.tasks.recompute.raw`), never from the events table or the generator.

From ``meta`` (subject_id, hadm_id, visit_idx, cut_event_id, cut_time; next action: the
options' kinds) and the question's ``options``:

* the cut event is a raw lab value (``LAB-``: its charttime) or order (``RX-``: its
  starttime) of that admission, at ``cut_time``'s minute, strictly inside (admittime,
  dischtime), and the admission is the patient's visit of rank ``visit_idx``;
* the visit's actions: its kept lab values (panel name), its orders ("drug dose unit route"
  of the raw row's non-empty fields) and its procedures (long title, at chartdate 00:00);
* next action: the gold letter is the cut's kind; each option's credit is
  ``1 - seconds / 86,400`` of the earliest action of its kind at or after the cut (0 beyond
  24 h), in :class:`decimal.Decimal`, rounded half-up to the gold's places;
* argument: the gold letter is the option equal to the cut's argument; credits as above over
  actions of the cut's kind with that argument;
* discharge: ``A`` (yes) iff dischtime - cut <= 6 h, else ``B``.

Anchors: the cut event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pandas as pd

from clinlib.data.vocab import LAB_BY_KEY
from clinlib.tasks import rules
from clinlib.tasks.recompute.per_task import Recomputed, meta_get
from clinlib.tasks.recompute.raw import RawRecord

_LETTERS = "ABCDEFGHIJ"
_KIND_NAMES = {"lab": "lab test", "medication": "medication order", "procedure": "procedure"}
_HORIZON_S = Decimal(rules.T11_HORIZON_MIN * 60)
_Q = Decimal(1).scaleb(-rules.T11_DECAY_DECIMALS)


def _text(x: Any) -> str:
    return "" if x is None or (isinstance(x, float) and pd.isna(x)) else str(x).strip()


def _actions(raw: RawRecord, sid: int, hadm: int) -> list[tuple[pd.Timestamp, str, str, str]]:
    """(time, kind, argument, event id) of every action of one admission."""
    out = []
    for r in raw.records("labs", sid):
        if int(r["hadm_id"]) == hadm and str(r["lab_key"]) in LAB_BY_KEY:
            out.append(
                (
                    pd.Timestamp(r["charttime"]),
                    "lab",
                    LAB_BY_KEY[str(r["lab_key"])].label,
                    str(r["event_id"]),
                )
            )
    for r in raw.records("rx", sid):
        if int(r["hadm_id"]) == hadm:
            out.append(
                (pd.Timestamp(r["starttime"]), "medication", _order_text(r), str(r["event_id"]))
            )
    for r in raw.records("px", sid):
        if int(r["hadm_id"]) == hadm:
            out.append(
                (
                    pd.Timestamp(str(r["date"])),
                    "procedure",
                    _text(r["long_title"]),
                    str(r["event_id"]),
                )
            )
    return out


_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _order_text(r: Mapping[str, Any]) -> str:
    """ "drug dose unit route" as the record tells it (the prescription rules of
    :mod:`clinlib.data.plausibility_rx`, read here on their own): the drug's inner runs of
    whitespace collapsed, and a dose of 0 (a sliding-scale order, "25,000"-style separators
    allowed) is no dose, so neither dose nor unit."""
    drug = " ".join(_text(r["drug"]).split())
    dose, unit = _text(r["dose_val_rx"]), _text(r["dose_unit_rx"])
    number = dose.replace(",", "") if _THOUSANDS.fullmatch(dose) else dose
    try:
        if float(number) == 0:
            dose, unit = "", ""
    except ValueError:
        pass  # a range or other text is stated as recorded
    return " ".join(p for p in (drug, dose, unit, _text(r["route"])) if p)


def _credit(actions, cut: pd.Timestamp, match) -> Decimal:
    secs = [
        Decimal(int((t - cut).total_seconds()))
        for t, k, a, _ in actions
        if t >= cut and match(k, a)
    ]
    if not secs or min(secs) > _HORIZON_S:
        return Decimal(0)
    return ((_HORIZON_S - min(secs)) / _HORIZON_S).quantize(_Q, rounding=ROUND_HALF_UP)


def _gold(letter: str, credits: dict[str, Decimal]) -> str:
    extra = [f"{k}={v}" for k, v in sorted(credits.items()) if k != letter and v > 0]
    return "|".join([letter, *extra])


def recompute_t11(
    meta: Mapping[str, Any], q: Mapping[str, Any], raw: RawRecord, status: Mapping[str, str]
) -> Recomputed:
    """L2 recomputation of one T11 question (module docstring)."""
    sid, hadm = int(meta_get(meta, "subject_id")), int(meta_get(meta, "hadm_id"))
    visit = raw.visit_of(sid).get(hadm)
    if visit is None or int(visit["visit_idx"]) != int(meta_get(meta, "visit_idx")):
        return Recomputed(None, problem=f"admission {hadm} is not visit {meta['visit_idx']}")
    actions = _actions(raw, sid, hadm)
    cut_id = str(meta_get(meta, "cut_event_id"))
    cut = next((a for a in actions if a[3] == cut_id and a[1] != "procedure"), None)
    if cut is None:
        return Recomputed(None, problem=f"{cut_id} is no lab value or order of admission {hadm}")
    t_cut, kind, arg, _ = cut
    if t_cut.strftime("%Y-%m-%d %H:%M") != str(meta_get(meta, "cut_time")):
        return Recomputed(None, problem=f"{cut_id} is at {t_cut}, not {meta['cut_time']}")
    adm, dis = pd.Timestamp(visit["admittime"]), pd.Timestamp(visit["dischtime"])
    if not adm < t_cut < dis:
        return Recomputed(None, problem=f"the cut {t_cut} is not inside the stay {adm}..{dis}")
    options = [str(o) for o in (q.get("options") if q.get("options") is not None else [])]
    subtype = str(q.get("subtype"))
    if subtype == "discharge":
        left = Decimal(int((dis - t_cut).total_seconds()))
        return Recomputed("A" if left <= rules.T11_DISCHARGE_MIN * 60 else "B", (cut_id,))
    if subtype == "next_action":
        kinds = [str(k) for k in json.loads(json.dumps(meta_get(meta, "options")))]
        if [_KIND_NAMES.get(k) for k in kinds] != options or kind not in kinds:
            return Recomputed(None, problem=f"options {options} are not the kinds {kinds}")
        credits = {
            _LETTERS[i]: _credit(actions, t_cut, lambda k2, a2, k=k: k2 == k)
            for i, k in enumerate(kinds)
        }
        return Recomputed(_gold(_LETTERS[kinds.index(kind)], credits), (cut_id,))
    if arg not in options:
        return Recomputed(None, problem=f"the cut's argument {arg!r} is not an option")
    credits = {
        _LETTERS[i]: _credit(actions, t_cut, lambda k2, a2, o=o: k2 == kind and a2 == o)
        for i, o in enumerate(options)
    }
    return Recomputed(_gold(_LETTERS[options.index(arg)], credits), (cut_id,))


def _open_arg(kind: str, raw_row: Mapping[str, Any] | None, arg: str) -> str:
    """The open argument (clinlib.tasks.generators.t11.open_argument) from the raw row: the
    lab's panel name, the order's drug name, the procedure's title; ``|`` / ``=`` dropped."""
    text = " ".join(_text(raw_row["drug"]).split()) if kind == "medication" and raw_row else arg
    return " ".join(text.replace("|", " ").replace("=", " ").split())


def recompute_t11_open(
    meta: Mapping[str, Any], q: Mapping[str, Any], raw: RawRecord, status: Mapping[str, str]
) -> Recomputed:
    """L2 of one T11O question: the cut checks of :func:`recompute_t11`; next action: the
    cut's kind name, every other kind with its credit; argument: the cut's open argument,
    every other argument of its kind at or after the cut with its credit (0 credits left out)."""
    sid, hadm = int(meta_get(meta, "subject_id")), int(meta_get(meta, "hadm_id"))
    visit = raw.visit_of(sid).get(hadm)
    if visit is None or int(visit["visit_idx"]) != int(meta_get(meta, "visit_idx")):
        return Recomputed(None, problem=f"admission {hadm} is not visit {meta['visit_idx']}")
    rx = {str(r["event_id"]): r for r in raw.records("rx", sid) if int(r["hadm_id"]) == hadm}
    actions = [(t, k, _open_arg(k, rx.get(e), a), e) for t, k, a, e in _actions(raw, sid, hadm)]
    cut_id = str(meta_get(meta, "cut_event_id"))
    cut = next((a for a in actions if a[3] == cut_id and a[1] != "procedure"), None)
    if cut is None:
        return Recomputed(None, problem=f"{cut_id} is no lab value or order of admission {hadm}")
    t_cut, kind, arg, _ = cut
    if t_cut.strftime("%Y-%m-%d %H:%M") != str(meta_get(meta, "cut_time")):
        return Recomputed(None, problem=f"{cut_id} is at {t_cut}, not {meta['cut_time']}")
    if str(q.get("subtype")) == "next_action":
        truth = _KIND_NAMES[kind]
        credits = {
            name: _credit(actions, t_cut, lambda k2, a2, k=k: k2 == k)
            for k, name in _KIND_NAMES.items()
        }
    else:
        truth = arg
        credits = {
            a: _credit(actions, t_cut, lambda k2, a2, a=a: k2 == kind and a2 == a)
            for t, k, a, _ in actions
            if k == kind and t >= t_cut
        }
    extra = [f"{k}={v}" for k, v in sorted(credits.items()) if k != truth and v > 0]
    return Recomputed("|".join([truth, *extra]), (cut_id,))
