"""``event-table``: the patient's events as a bare dated table, no dialogue (ClinTraceBench
App. G.8 "Substrate pilot: dialogue versus a bare event table": "the model received either the
dialogue or a bare structured-event table built from the same source events").

Construction takes the source events the dialogue states — the ids its turns list in
``event_ids`` — from the profile's ``events.parquet`` and writes one table row per event in
time order (date and time, kind, what, value, unit, reference range and flag, route / code,
and the event id tag), so the table covers exactly the dialogue's events and nothing the
dialogue leaves out (T9's absent facts stay absent). It is the one strategy that reads the
events table instead of the dialogue text: it is the substrate control of G.8, not a memory
system, and needs no prep model.

What it cannot carry, by design (G.8: "the narrative relations targeted by T3, T4 and T5 were
not explicitly represented in it, so those tasks could not be evaluated equivalently"): an
injected sentence has no source event (T3's physician attribution, T5's contradiction), and
noise sessions state no patient event, so the table is the same in ``post``, ``pre`` and
``mixed``; :data:`NOT_EQUIVALENT_TASKS` names the tasks whose scores are not comparable with
the dialogue's. Under ``stream`` a checkpoint's table holds the events of the visits seen so
far (the truncated dialogue's ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.strategies.base import Artifact, StoredTextStrategy, StrategyError
from clinlib.strategies.prep import count_text_tokens

EVENTS_FILE = "events.parquet"
EVENT_COLUMNS: tuple[str, ...] = (
    "event_id",
    "subject_id",
    "time",
    "kind",
    "code",
    "code_system",
    "label",
    "value_text",
    "unit",
    "ref_low",
    "ref_high",
    "flag",
    "route",
)
NOT_EQUIVALENT_TASKS: tuple[str, ...] = ("T3", "T4", "T5")  # App. G.8
TABLE_TITLE = "Patient events (one row per recorded event, in time order):"
TABLE_HEADER = "| date | kind | event | value | reference / flag | detail |"
TABLE_RULE = "|---|---|---|---|---|---|"


def _s(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    return str(value).strip()


def _num(value: Any) -> str:
    text = _s(value)
    return text[:-2] if text.endswith(".0") else text


def _when(value: Any) -> str:
    if value is None or pd.isna(value):
        return "date not recorded"
    ts = pd.Timestamp(value)
    return (
        ts.strftime("%Y-%m-%d") if (ts.hour, ts.minute) == (0, 0) else ts.strftime("%Y-%m-%d %H:%M")
    )


def event_row(e: Mapping[str, Any], with_ids: bool = True) -> str:
    """One table row of a source event (columns: :data:`TABLE_HEADER`)."""
    kind = _s(e.get("kind"))
    label, code = _s(e.get("label")), _s(e.get("code"))
    value = " ".join(p for p in (_s(e.get("value_text")), _s(e.get("unit"))) if p)
    ref = "-".join(p for p in (_num(e.get("ref_low")), _num(e.get("ref_high"))) if p)
    flag = _s(e.get("flag"))
    range_flag = "; ".join(p for p in (ref, flag) if p)
    if kind in ("admission", "discharge"):
        what, detail = label or kind, code  # admission type / discharge location
    elif kind in ("diagnosis", "procedure"):
        what, detail = label, f"{_s(e.get('code_system'))} {code}".strip()
    elif kind == "medication":
        what, detail = label, _s(e.get("route"))
    else:
        what, detail = label, ""
    tag = f" [{_s(e.get('event_id'))}]" if with_ids else ""
    cells = [_when(e.get("time")), kind, what + tag, value or "-", range_flag or "-", detail or "-"]
    return "| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |"


def _order(e: Mapping[str, Any]) -> tuple:
    """Time order (an undated event last), then event id."""
    t = e.get("time")
    missing = t is None or pd.isna(t)
    return (missing, pd.Timestamp(0) if missing else pd.Timestamp(t), str(e.get("event_id")))


def render_event_table(events: Sequence[Mapping[str, Any]], with_ids: bool = True) -> str:
    """The whole table (title, header, one row per event, in the order given)."""
    rows = [event_row(e, with_ids) for e in events]
    return "\n".join([TABLE_TITLE, TABLE_HEADER, TABLE_RULE, *rows])


def stated_event_ids(turns: pd.DataFrame) -> list[str]:
    """The ids the dialogue's turns list, first mention first, noise tags dropped."""
    if "event_ids" not in turns.columns:
        return []
    out: dict[str, None] = {}
    for ids in turns.sort_values("turn_idx", kind="stable")["event_ids"]:
        for eid in [] if ids is None or isinstance(ids, str) else list(ids):
            if not str(eid).startswith("NOISE-"):
                out.setdefault(str(eid), None)
    return list(out)


class EventTable(StoredTextStrategy):
    """The dialogue's source events as one dated table (module docstring)."""

    name = "event-table"
    family = "event-table"
    derived = True
    query_dependent = False
    defaults = {"with_ids": True, "events_dir": None}
    construction_keys = ("with_ids",)

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._events: dict[int, dict[str, dict[str, Any]]] = {}

    def _events_path(self) -> Path:
        where = self.params["events_dir"]
        if where is None:
            raise StrategyError(f"{self.name}: events_dir not set (get_strategy fills it)")
        path = Path(where) / EVENTS_FILE
        if not path.exists():
            raise StrategyError(f"{self.name}: {path} not found (run `clintrace cohort`)")
        return path

    def prepare(self, jobs: Sequence[tuple[int, pd.DataFrame]], prep: Any) -> None:
        """Read the events table once per instance (one scan; every later patient is a
        dictionary look-up)."""
        if self._events:
            return
        path = self._events_path()
        try:
            records = pq.read_table(path, columns=list(EVENT_COLUMNS)).to_pylist()
        except (KeyError, ValueError, OSError, pa.ArrowException) as exc:
            raise StrategyError(f"{self.name}: cannot read {path}: {exc}") from None
        for rec in records:
            self._events.setdefault(int(rec["subject_id"]), {})[str(rec["event_id"])] = rec

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        self.prepare([(subject_id, turns)], prep)
        ev = self._events.get(int(subject_id), {})
        ids = stated_event_ids(turns)
        missing = [i for i in ids if i not in ev]
        if missing:
            raise StrategyError(
                f"{self.name}: patient {subject_id}: event id(s) {missing[:3]} stated in the "
                f"dialogue are not in {self._events_path()} (rebuild the dialogues)"
            )
        rows = sorted((ev[i] for i in ids), key=_order)
        return {
            "text": render_event_table(rows, bool(self.params["with_ids"])),
            "n_events": len(rows),
        }

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_items": artifact.data.get("n_events", 0),
            "item": "events",
            "store_tokens": count_text_tokens(str(artifact.data.get("text", ""))),
        }
