"""Gate L3 for the ordering task T10 (LongMedBench "Temporal reasoning"; docs/design.md
"T10") and the decision task T11 (LongMedBench "Task 3"; :mod:`clinlib.tasks.decisions`):
what a T10 / T11 question must not give away.

* every subtype: the items are not shown in their gold order (a reader that keeps the shown
  order would score tau = 1);
* visit / joint sorting: no item states a date, a time or a visit ordinal
  (:func:`clinlib.tasks.order_leaks.clip_leak`) — the clips must be ordered from the clinical
  course alone;
* visit cloze: no removed event's line is still in the shown visit text;
* T11: every timestamped line of the stated stay lies before the cut (``meta.cut_time``), none
  is the discharge, and "It is now" states the cut's minute (:func:`t11_leak`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from clinlib.tasks.answers.order import ORDER_LETTERS, canonical_order
from clinlib.tasks.gates.common import as_list
from clinlib.tasks.order_leaks import clip_leak

_ITEM_LINE = re.compile(r"^[A-J]\. .*$", re.MULTILINE)
_LINE_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) (\S+?):", re.MULTILINE)
_NOW = re.compile(r"It is now (\d{4}-\d{2}-\d{2} \d{2}:\d{2})")


def order_stem(question: str) -> str:
    """The question without its item lines (``A. ...``)."""
    return _ITEM_LINE.sub(" ", question)


def t10_leak(row: Mapping[str, Any]) -> str | None:
    """Why a T10 question leaks its order (None when it does not)."""
    items = [str(o) for o in (as_list(row.get("options")) or [])]
    if str(row["gold"]) == canonical_order(ORDER_LETTERS[: len(items)]):
        return "the items are shown in their gold order"
    if str(row.get("subtype")) == "visit_cloze":
        stem = order_stem(str(row.get("question") or ""))
        for letter, item in zip(ORDER_LETTERS, items, strict=False):
            if item.strip() and item.strip() in stem:
                return f"removed event {letter} is still in the visit text"
        return None
    for letter, item in zip(ORDER_LETTERS, items, strict=False):
        why = clip_leak(item)
        if why:
            return f"clip {letter} states a {why}"
    return None


def t11_leak(row: Mapping[str, Any]) -> str | None:
    """Why a T11 question leaks what happens at or after its cut (module docstring), or None."""
    try:
        cut = str(json.loads(str(row.get("meta") or "{}"))["cut_time"])
    except (ValueError, KeyError, TypeError):
        return "meta lacks cut_time"
    text = str(row.get("question") or "")
    now = _NOW.search(text)
    if now is None or now.group(1) != cut:
        return f"the stem does not state the cut's minute {cut} as now"
    for stamp, kind in _LINE_STAMP.findall(text):
        if stamp >= cut:
            return f"the stated stay holds a {kind} line at {stamp}, not before the cut {cut}"
        if kind == "discharge":
            return "the stated stay holds the discharge"
    return None
