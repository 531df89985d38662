"""Gates L0 schema and L1 anchor source (paper Appendix A; rules in
:mod:`clinlib.tasks.gates`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clinlib.data.vocab import INDEX_DISEASES, PANEL_ITEMIDS
from clinlib.tasks.answers import gold_problem
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.gates.common import TERTILES, as_list, check_per_task, int_like, is_str, meta_of
from clinlib.tasks.registry import get_spec, task_names

# The anchor statuses a task accepts are its spec's ``anchor_status``: T10 / T11 (extended set)
# anchors are events the dialogue stage classified (an ordering question lists its items and a
# decision question states its stay, so neither needs the dialogue to state its anchor).
T10_ANCHOR_STATUSES = ("covered", "missed")

# T1–T8 subtypes whose questions legitimately have no anchor event.
ANCHORLESS_SUBTYPES: frozenset[tuple[str, str]] = frozenset({("T5", "controlled_control")})

# --------------------------------------------------------------------------- L0


def _l0_row(row: Mapping[str, Any], dup_qids: set[str]) -> str | None:
    task, qid = row.get("task"), row.get("qid")
    known = task_names("paper", "extended")
    if task not in known:
        return f"task {task!r} is not one of {', '.join(known)}"
    if not is_str(qid) or not qid.startswith(f"{task}-") or len(qid) <= len(task) + 1:
        return f"qid {qid!r} is not '{task}-<hash>'"
    if qid in dup_qids:
        return "qid is not unique"
    for col in ("subtype", "question", "gold", "disease", "tertile", "meta"):
        if not is_str(row.get(col)) or not row.get(col).strip():
            return f"column {col} is empty or not a string ({row.get(col)!r})"
    if not is_str(row.get("injection")):
        return f"column injection is not a string ({row.get('injection')!r})"
    if row["injection"].strip():
        try:
            json.loads(row["injection"])
        except ValueError:
            return "injection is neither '' nor JSON"
    try:
        meta = json.loads(row["meta"])
    except ValueError:
        return "meta is not JSON"
    if not isinstance(meta, dict):
        return "meta is not a JSON object"
    lists = {c: as_list(row.get(c)) for c, t in QUESTION_COLUMNS.items() if t == "list"}
    for col, val in lists.items():
        if val is None:
            return f"column {col} is not a list ({type(row.get(col)).__name__})"
    sids = lists["subject_ids"]
    if not all(int_like(s) for s in sids):
        return f"subject_ids {sids!r} are not integers"
    spec = get_spec(task)
    want = spec.patients
    if len(sids) != want or len({int(s) for s in sids}) != want:
        return f"subject_ids {sids!r}: {task} needs {want} distinct patient(s)"
    if not all(is_str(a) and a for a in lists["anchor_event_ids"]):
        return "anchor_event_ids holds a non-string or empty id"
    if not all(is_str(t) and re.fullmatch(r"\d+:\d+", t) for t in lists["evidence_turns"]):
        return f"evidence_turns {lists['evidence_turns'][:3]!r} are not '<subject>:<turn>'"
    tid = row.get("template_id")
    if not int_like(tid) or int(tid) < 0:
        return f"template_id {tid!r} is not a non-negative integer"
    if row["disease"] not in INDEX_DISEASES:
        return f"disease {row['disease']!r} is not an index disease"
    if row["tertile"] not in TERTILES:
        return f"tertile {row['tertile']!r} is not low/medium/high"
    options = lists["options"]
    if spec.options:
        if not all(is_str(o) and o.strip() for o in options):
            return "options hold a non-string or an empty text"
        if spec.options == "items" and len(set(options)) != len(options):
            return f"{task} items repeat"
        problem = gold_problem(task, row["gold"], options)
    else:
        if options:
            return f"{task} must have no options (found {len(options)})"
        problem = gold_problem(task, row["gold"])
    if problem:
        return f"gold {row['gold']!r}: {problem}"
    return None


def gate_l0(questions: pd.DataFrame) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L0 schema failures per task (see module docstring)."""
    counts = Counter(q for q in questions["qid"] if is_str(q))
    dup = {q for q, n in counts.items() if n > 1}
    return check_per_task(questions, lambda row: _l0_row(row, dup))


# --------------------------------------------------------------------------- L1

EXCLUDED_PREFIX = "built on an excluded source row"


def excluded_keys(exclusions: pd.DataFrame | None) -> dict[str, str]:
    """What a question may not touch, from exclusions.parquet (clinlib.data.plausibility):
    ``hadm:<id>`` for an excluded admission, ``LAB-<labevent_id>`` for an excluded lab row,
    ``RX-<pharmacy_id>`` for an excluded pharmacy order; each mapped to its rule."""
    if exclusions is None or exclusions.empty:
        return {}
    prefix = {"admissions": "hadm:", "labevents": "LAB-", "prescriptions": "RX-"}
    return {
        f"{prefix[t]}{str(k).strip()}": str(r)
        for t, k, r in zip(exclusions["table"], exclusions["key"], exclusions["rule"], strict=True)
        if t in prefix
    }


def _source_tokens(row: Mapping[str, Any]) -> set[str]:
    """The source rows a question rests on, as :func:`excluded_keys` tokens: its anchors and
    every event id / hadm_id its meta names (the gold's source rows: T4 evidence, earlier
    stays, a T6 patient's labs ...)."""
    ids = {str(a) for a in as_list(row.get("anchor_event_ids")) or []}
    hadms: set[str] = set()

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif key.endswith(("event_id", "event_ids")) and isinstance(node, str):
            ids.add(node)
        elif key.endswith(("hadm_id", "hadm_ids")) and int_like(node):
            hadms.add(str(int(node)))

    walk(meta_of(row))
    out = {f"hadm:{h}" for h in hadms}
    for eid in ids:
        parts = eid.split("-")
        if parts[0] in ("ADM", "DIS", "DX", "PX") and len(parts) > 1:
            out.add(f"hadm:{parts[1]}")
        elif parts[0] in ("LAB", "RX") and len(parts) > 1:
            out.add(f"{parts[0]}-{parts[1]}")  # RX-<pharmacy_id>-<k>: its pharmacy order
    return out


def _excluded_touch(row: Mapping[str, Any], keys: Mapping[str, str]) -> str | None:
    hit = sorted(t for t in _source_tokens(row) if t in keys)
    if not hit:
        return None
    return f"{EXCLUDED_PREFIX}: {hit[0]} ({keys[hit[0]]})" + (
        f" (+{len(hit) - 1} more)" if len(hit) > 1 else ""
    )


def _lab_events_by_day(events: pd.DataFrame) -> set[tuple[int, str, str]]:
    labs = events[events["kind"].astype(str) == "lab"]
    dates = pd.to_datetime(labs["time"]).dt.strftime("%Y-%m-%d").tolist()
    out = set()
    for s, c, d in zip(labs["subject_id"].tolist(), labs["code"].tolist(), dates, strict=True):
        key = PANEL_ITEMIDS.get(int(c), (None,))[0] if str(c).strip().isdigit() else None
        if key is not None:
            out.add((int(s), key, d))
    return out


def _l1_row(
    row: Mapping[str, Any],
    status: Mapping[str, tuple[int, str]],
    event_days: set,
    raw_days: frozenset | None,
    excluded: Mapping[str, str] | None = None,
) -> str | None:
    task = str(row["task"])
    if excluded and (why := _excluded_touch(row, excluded)):
        return why
    anchors = as_list(row.get("anchor_event_ids")) or []
    sids = {int(s) for s in (as_list(row.get("subject_ids")) or [])}
    allowed = get_spec(task).anchor_status
    if not anchors:
        if "covered" in allowed:
            if (task, str(row.get("subtype"))) in ANCHORLESS_SUBTYPES:
                return None
            return "no anchor event"
        meta = meta_of(row)
        try:
            key = (int(meta["subject_id"]), str(meta["lab"]), str(meta["date"]))
        except (KeyError, TypeError, ValueError):
            return f"{task} question without anchors lacks meta subject_id / lab / date"
        if key in event_days:
            return f"never-measured lab {key[1]} has an event on {key[2]}"
        if raw_days is not None and key in raw_days:
            return f"never-measured lab {key[1]} has a raw labevents row on {key[2]}"
        return None
    for a in anchors:
        sid, st = status.get(str(a), (None, "absent"))
        if st not in allowed:
            return f"anchor {a} is {st}, not {' or '.join(allowed)}"
        if sid not in sids:
            return f"anchor {a} belongs to subject {sid}, not {sorted(sids)}"
    return None


def gate_l1(
    questions: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    raw_days: frozenset | None = None,
    exclusions: pd.DataFrame | None = None,
) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L1 anchor-source failures per task (see module docstring); with ``exclusions``
    (exclusions.parquet) also every question built on a row the plausibility screen excluded
    (:func:`excluded_keys`), which :func:`clinlib.tasks.gates.run.run_gates` fails with zero
    tolerance."""
    status = {
        str(e): (int(s), str(st))
        for e, s, st in zip(
            coverage["event_id"].tolist(),
            coverage["subject_id"].tolist(),
            coverage["status"].tolist(),
            strict=True,
        )
    }
    days = _lab_events_by_day(events)
    keys = excluded_keys(exclusions)
    return check_per_task(questions, lambda row: _l1_row(row, status, days, raw_days, keys))
