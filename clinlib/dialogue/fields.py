"""What a source event must say and where it sits, for the dialogue verifier and synthesis
(paper §3 "Cohort": structured fields preserved "inside narrative turns"; docs/design.md
"Layout").

Which fields of an event must appear verbatim in the turn that cites it
(:func:`required_fields`), which strings a citing turn may contain (:func:`traceable_strings`),
the visits' start times and lab days, and which key labs may be left unstated
(:func:`key_lab_missable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.dialogue.matching import DIGIT_RE, DrugMatcher, is_noise_id

# The kind of an injected statement event (the trap constraints of clinlib.tasks.traps):
# not a record event; a turn citing it must hold its ``label`` (the statement) verbatim, and may
# then name what the statement names (an allergen, a sum of money).
STATEMENT_KIND = "statement"
# The columns of a turn record and their dtypes: the stored ``dialogues`` columns plus the
# tagged text and the visit's date the verifier and the noise sessions read.
TURN_COLUMNS: dict[str, str] = {
    **ARTIFACTS["dialogues"],
    "text_tagged": "string",
    "visit_date": "string",
}
# Who wrote a visit's final text (paper Fig. 2 stage 3: LLM synthesis, rescued by other
# models): ``writer`` is the backbone's name or "template"; ``writer_role`` is "template" (no
# rewriter asked), "backbone" (the first backbone's verified rewrite), "rescue" (a later
# backbone's) or "fallback" (every backbone's rewrite was refused: template text kept).
WRITER_COLUMNS: dict[str, str] = {"writer": "string", "writer_role": "string"}
WRITER_ROLES: tuple[str, ...] = ("template", "backbone", "rescue", "fallback")
# The stored dialogues: turn records plus their visit's writer.
DIALOGUE_COLUMNS: dict[str, str] = {**TURN_COLUMNS, **WRITER_COLUMNS}

# Labs always verbalised (the labs the index diseases and the tasks lean on); other panel
# labs and medications may be left unstated by the synthesis rule (clinlib.dialogue.selection).
KEY_LABS: frozenset[str] = frozenset(
    {
        "creatinine",
        "potassium",
        "sodium",
        "glucose",
        "hba1c",
        "ldl",
        "troponin_t",
        "hemoglobin",
        "bun",
    }
)

# --- values and fields ---------------------------------------------------------------------


def present(value: Any) -> bool:
    """True for a real value (not None/NaN/NaT/NA, not an empty string)."""
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, float):
        return value == value  # NaN is the only float unequal to itself
    if value is None or value is pd.NA or value is pd.NaT:
        return False
    if isinstance(value, int | pd.Timestamp):
        return True
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):
        return True


def fmt_number(value: float) -> str:
    """Plain decimal text for a float (``133.0`` -> ``133``, ``0.01`` -> ``0.01``)."""
    return np.format_float_positional(float(value), trim="-")


@lru_cache(maxsize=1 << 16)
def _iso_date(ts: pd.Timestamp) -> str:
    return f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}"


def fmt_date(value: Any) -> str:
    """ISO calendar date of a timestamp (``2150-03-02``)."""
    return _iso_date(value if isinstance(value, pd.Timestamp) else pd.Timestamp(value))


def required_fields(event: Mapping[str, Any]) -> dict[str, str]:
    """Fields of ``event`` that must appear verbatim in the turn citing it.

    Args:
        event: one events-table row (mapping with the events columns).

    Returns:
        ``{field name: verbatim string}``; absent optional fields (route, discharge location)
        are left out.
    """
    kind = event.get("kind")
    out: dict[str, str] = {}
    if present(event.get("time")):
        out["date"] = fmt_date(event["time"])
    if kind == "lab":
        out |= {"label": event.get("label"), "value": event.get("value_text")}
        out["unit"] = event.get("unit")
    elif kind == "medication":
        out["drug"] = event.get("label")
        # Without a dose the turn names the drug only (no unit either); no_untraced_numbers
        # then refuses any number, so a dose can never be invented.
        if present(event.get("value_text")):
            out |= {"dose": event.get("value_text"), "unit": event.get("unit")}
        if present(event.get("route")):
            out["route"] = event["route"]
    elif kind in ("diagnosis", "procedure"):
        out |= {"code": event.get("code"), "title": event.get("label")}
    elif kind == "admission":
        out["admission_type"] = event.get("code")
    elif kind == "discharge" and present(event.get("code")):
        out["discharge_location"] = event["code"]
    elif kind == STATEMENT_KIND:  # an injected patient statement: its text, verbatim
        out["statement"] = event.get("label")
    return {k: str(v).strip() for k, v in out.items() if present(v)}


def traceable_strings(
    event: Mapping[str, Any], required: Mapping[str, str] | None = None
) -> set[str]:
    """Strings a turn that cites ``event`` may contain: its required fields (``required`` if
    already computed), reference-range bounds and end date (numbers inside them trace to the
    event)."""
    out = set((required if required is not None else required_fields(event)).values())
    for col in ("ref_low", "ref_high"):
        if present(event.get(col)):
            out.add(fmt_number(event[col]))
    if present(event.get("end_time")):
        out.add(fmt_date(event["end_time"]))
    return out


def records(df: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows as dicts, fast (column ``tolist`` instead of ``DataFrame.to_dict``, which is slow
    on Arrow-backed string columns)."""
    if not isinstance(df, pd.DataFrame):
        return [dict(r) for r in df]
    cols = list(df.columns)
    lists = []
    for c in cols:
        vals = df[c].tolist()
        if isinstance(df[c].dtype, pd.api.extensions.ExtensionDtype):
            # pd.NA refuses bool(); plain None keeps comparisons and `present` simple.
            vals = [None if v is pd.NA else v for v in vals]
        lists.append(vals)
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*lists, strict=True)]


class EventIndex:
    """A patient's events by id, with their required and traceable strings memoised.

    Args:
        events: event records, or an existing ``{event_id: record}`` mapping.
    """

    def __init__(self, events: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]]):
        if isinstance(events, Mapping):
            self.by_id = dict(events)
        else:
            self.by_id = {str(e["event_id"]): e for e in events}
        self._req: dict[str, dict[str, str]] = {}
        self._trace: dict[str, set[str]] = {}
        self._maskable: dict[str, set[str]] = {}

    def __contains__(self, eid: object) -> bool:
        return eid in self.by_id

    def get(self, eid: str) -> Mapping[str, Any] | None:
        """The event record, or None."""
        return self.by_id.get(eid)

    def required(self, eid: str) -> dict[str, str]:
        """:func:`required_fields` of an event (memoised)."""
        if eid not in self._req:
            self._req[eid] = required_fields(self.by_id[eid])
        return self._req[eid]

    def traceable(self, eid: str) -> set[str]:
        """:func:`traceable_strings` of an event (memoised)."""
        if eid not in self._trace:
            self._trace[eid] = traceable_strings(self.by_id[eid], self.required(eid))
        return self._trace[eid]

    def maskable(self, eid: str, drugs: DrugMatcher) -> set[str]:
        """The traceable strings that can hide a finding of :func:`untraced_tokens`: those
        with a digit or a known drug name (memoised; labels and units without either
        cannot, so masking them is wasted work)."""
        if eid not in self._maskable:
            self._maskable[eid] = {
                s for s in self.traceable(eid) if DIGIT_RE.search(s) or drugs.find(s)
            }
        return self._maskable[eid]


def group_records(df: pd.DataFrame, key: str = "subject_id") -> dict[int, list[dict[str, Any]]]:
    """:func:`records` grouped by an integer key column, in first-appearance order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in records(df):
        out.setdefault(int(r[key]), []).append(r)
    return out


def lab_day_bounds(events: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, str]]:
    """First and last calendar day (``YYYY-MM-DD``) with a lab result in each visit.

    Args:
        events: event records (visit_idx, time, kind).

    Returns:
        ``{visit_idx: (first_day, last_day)}``.
    """
    days: dict[int, list[str]] = {}
    for e in events:
        if e.get("kind") == "lab" and present(e.get("visit_idx")) and present(e.get("time")):
            days.setdefault(int(e["visit_idx"]), []).append(fmt_date(e["time"]))
    return {v: (min(d), max(d)) for v, d in days.items()}


def key_lab_missable(e: Mapping[str, Any], bounds: Mapping[int, tuple[str, str]]) -> bool:
    """Whether a key lab may be left unstated: only a normal result (not flagged, inside its
    reference range) on a middle day of its visit — neither the visit's first nor its last lab
    day. Admission and discharge labs and every abnormal key result are always told, as a
    clinician's visit summary would (this keeps dialogue length near the paper's).
    """
    if e.get("flag") == "abnormal" or not present(e.get("visit_idx")):
        return False
    val, lo, hi = e.get("value"), e.get("ref_low"), e.get("ref_high")
    if present(val) and (
        (present(lo) and float(val) < float(lo)) or (present(hi) and float(val) > float(hi))
    ):
        return False
    first, last = bounds.get(int(e["visit_idx"]), ("", ""))
    return fmt_date(e["time"]) not in (first, last)


def visit_starts(events: Iterable[Mapping[str, Any]]) -> dict[int, pd.Timestamp]:
    """Start of each visit: its admission time, else its earliest event time.

    Args:
        events: event records (visit_idx, time, kind).

    Returns:
        ``{visit_idx: start timestamp}``.
    """
    starts: dict[int, pd.Timestamp] = {}
    adm: dict[int, pd.Timestamp] = {}
    for e in events:
        v, t = e.get("visit_idx"), e.get("time")
        if not (present(v) and present(t)):
            continue
        v, t = int(v), t if isinstance(t, pd.Timestamp) else pd.Timestamp(t)
        if e.get("kind") == "admission" and (v not in adm or t < adm[v]):
            adm[v] = t
        if v not in starts or t < starts[v]:
            starts[v] = t
    return starts | adm


# --- noise sessions (clinlib.dialogue.noise; MedMemoryBench §4 "Noise Augmentation") ----------


def is_noise_turn(turn: Mapping[str, Any]) -> bool:
    """A turn of an inserted session: ``is_noise`` set, or any of its ids a noise tag."""
    flag = turn.get("is_noise")
    if present(flag) and bool(flag):
        return True
    ids = turn.get("event_ids")
    return ids is not None and not isinstance(ids, str) and any(is_noise_id(i) for i in ids)


def real_turns(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The real turns of a noisy dialogue with their original numbering restored
    (``visit_idx`` from ``source_visit_idx``, ``turn_idx`` consecutive from the first), so
    checks written for the stored dialogue apply unchanged."""
    recs = sorted(
        (dict(t) for t in turns if not is_noise_turn(t)), key=lambda r: int(r["turn_idx"])
    )
    first = int(recs[0]["turn_idx"]) if recs else 0
    for i, r in enumerate(recs):
        if present(r.get("source_visit_idx")) and int(r["source_visit_idx"]) >= 0:
            r["visit_idx"] = int(r["source_visit_idx"])
        r["turn_idx"] = first + i
    return recs
