"""Where a question's evidence lives, and whether a context holds it — the ONE matcher shared
by the failure explorer's anchor highlighting (:mod:`clinlib.analysis.failures`), the
``oracle`` strategy (:mod:`clinlib.strategies.oracle`), retrieval hit@k
(:mod:`clinlib.strategies.footprints`) and evidence recall (:mod:`clinlib.analysis.evidence`).

A question's gold evidence is its ``anchor_event_ids`` (questions.parquet). Every id-carrying
representation writes the source-event ids of what it states as bracketed tag groups,
``[LAB-1, RX-2-3]`` (the dialogue renderer, the timeline, Mem0 facts, A-Mem notes, the codebook,
the event table); an anchor is PRESENT in a context when some tag group names its id. A context
that carries no tag group at all (``with_ids=False``, or an LLM prep model that dropped the ids)
cannot be measured this way: :func:`has_tags` tells the caller so, and recall reports it as
unmeasured instead of zero.

:func:`evidence_visits` locates the visits that hold a question's evidence in one patient's
dialogue: the visits whose turns list an anchor id (``event_ids``), the visits of its
``evidence_turns`` (``"subject:turn_idx"``), and the visit of its injected sentence (T3/T5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.strategies.turnmemo import derived, turn_records

# Bracketed id groups as every id-carrying representation writes them: "[LAB-1, RX-2-3]".
TAG_RE = re.compile(r"\[((?:[A-Z]+-[\d-]+)(?:\s*,\s*[A-Z]+-[\d-]+)*)\]")


def as_list(value: Any) -> list:
    """A list-valued artifact cell as a list (None / NaN / "" -> [], str -> [str])."""
    if value is None or (isinstance(value, float) and value != value):
        return []
    if isinstance(value, str):
        return [value] if value else []
    try:
        return [v for v in value if v is not None]
    except TypeError:
        return [value]


def anchor_ids(question: Mapping[str, Any]) -> list[str]:
    """The question's anchor event ids (empty for abstention questions without one)."""
    return [str(a) for a in as_list(question.get("anchor_event_ids"))]


def context_ids(context: str) -> list[str]:
    """Every event id named by a tag group of ``context``, in order, repeats kept."""
    return [s.strip() for m in TAG_RE.finditer(context or "") for s in m.group(1).split(",")]


def has_tags(context: str) -> bool:
    """Whether ``context`` carries at least one provenance tag group."""
    return TAG_RE.search(context or "") is not None


def anchor_presence(context: str, anchors: Sequence[str]) -> dict[str, int]:
    """How many tag groups of ``context`` name each anchor id.

    Returns:
        ``{anchor_id: count}`` (0 = absent from this context).
    """
    counts = dict.fromkeys(anchors, 0)
    for eid in context_ids(context):
        if eid in counts:
            counts[eid] += 1
    return counts


def present_anchors(ids_in_context: Iterable[str], anchors: Sequence[str]) -> list[str]:
    """The anchors named in a context, given the context's id set (:func:`context_ids`)."""
    held = set(ids_in_context)
    return [a for a in anchors if a in held]


def injection_of(question: Mapping[str, Any]) -> dict[str, Any] | None:
    """The question's injected sentence (T3 positives, T5 controlled) as a dict, else None."""
    raw = question.get("injection")
    if raw is None or (isinstance(raw, float) and raw != raw) or str(raw).strip() == "":
        return None
    try:
        out = json.loads(str(raw))
    except json.JSONDecodeError:
        return None
    return out if isinstance(out, dict) else None


def meta_visit(question: Mapping[str, Any]) -> int | None:
    """``meta.visit_idx`` of a question (the encounter it dates), else None."""
    try:
        meta = json.loads(str(question.get("meta") or "{}"))
        return int(meta["visit_idx"]) if isinstance(meta, dict) and "visit_idx" in meta else None
    except (ValueError, TypeError, KeyError):
        return None


def _evidence_index(
    turns: pd.DataFrame,
) -> tuple[dict[int, set[int]], dict[str, set[int]] | None] | None:
    """The visits of each turn number and of each stated event id (None for the ids when the
    dialogue has no ``event_ids``), from one pass over the turns; None when an id cell is
    neither a list nor empty."""
    by_turn: dict[int, set[int]] = {}
    by_id: dict[str, set[int]] | None = {} if "event_ids" in turns.columns else None
    for row in turn_records(turns):
        v = int(row["visit_idx"])
        by_turn.setdefault(int(row["turn_idx"]), set()).add(v)
        ids = row["event_ids"] if by_id is not None else None
        if ids is None or isinstance(ids, str):
            continue
        try:
            for e in ids:
                by_id.setdefault(str(e), set()).add(v)
        except TypeError:
            return None
    return by_turn, by_id


def evidence_visits(question: Mapping[str, Any], subject_id: int, turns: pd.DataFrame) -> set[int]:
    """The visits of ONE patient's dialogue that hold the question's evidence (module doc):
    anchor ids stated in a turn, ``evidence_turns`` of this patient, the injected sentence's
    visit. Empty when the dialogue states none of it (T9: the fact is absent by construction).
    """
    anchors = set(anchor_ids(question))
    out: set[int] = set()
    has_ids = "event_ids" in turns.columns
    refs = set()
    for item in as_list(question.get("evidence_turns")):
        sid, _, tid = str(item).partition(":")
        if sid.strip().isdigit() and tid.strip().isdigit() and int(sid) == int(subject_id):
            refs.add(int(tid))
    index = derived(turns, "evidence_index", _evidence_index)
    if index is None:  # an id cell that is not a list: the row by row scan (and its error)
        for row in turn_records(turns):
            v = int(row["visit_idx"])
            if int(row["turn_idx"]) in refs:
                out.add(v)
            ids = row["event_ids"] if has_ids else None
            if anchors and ids is not None and not isinstance(ids, str):
                if anchors.intersection(str(e) for e in ids):
                    out.add(v)
    else:
        by_turn, by_id = index
        for t in refs:
            out.update(by_turn.get(t, ()))
        for a in anchors if by_id is not None else ():
            out.update(by_id.get(a, ()))
    inj = injection_of(question)
    if inj is not None and int(inj.get("subject_id", -1)) == int(subject_id):
        if "visit_idx" in inj:
            out.add(int(inj["visit_idx"]))
    return out
