"""T10 temporal ordering, an extended task (LongMedBench "Temporal reasoning", Table 3:
visit cloze, visit sorting, joint sorting, scored by Kendall's tau; docs/design.md "T10").

Subtypes (rules in :mod:`clinlib.tasks.rules`, text in :mod:`.t10_text`):

* ``visit_cloze``: T10_CLOZE_MIN..MAX intervention events (medication / procedure, each at a
  minute no other event of the visit shares, covered or missed by the dialogue) are removed
  from the visit's timestamped event stream and listed shuffled WITH their timestamps; the
  remaining lines are numbered ``[1]``, ``[2]``, ... and the answer inserts each event back
  after a line (the seed's "insert each event back to its original position"). gold = their
  letters by time (the order, scored as Kendall's tau in ``score``); ``meta.insertion`` = each
  letter with the number of remaining lines before it (scored by
  :mod:`clinlib.tasks.answers.insertion`). The minute being the event's own makes the gap
  readable from the timestamps. One candidate per visit (k by a stable hash); visits above
  T10_MAX_VISIT_EVENTS events are skipped.
* ``visit_sorting``: T10_WINDOW consecutive visits rendered as clips without dates or visit
  numbers, shuffled; gold = their letters by admission time.
* ``joint_sorting``: the same window split into admission / discharge halves (ten clips);
  gold = by admission time, each visit's admission half before its discharge half.
* ``visit_sorting_notes`` (a labelled variant of visit sorting): the same windows, each visit
  as its SYNTHETIC discharge note without dates (:func:`.t10_text.note_clip`; the seed sorts
  note summaries, the ``visit_sorting`` clips are built from structured events).

Sorting windows whose clips repeat or state a date / ordinal
(:func:`clinlib.tasks.order_leaks.clip_leak`) are dropped; candidates are thinned to
MAX_PER_PATIENT per (patient, subtype): the first that qualify in a stable-hash order of the
patient's visits / windows (only those are rendered). The qid also hashes the question's
whole content, so a changed rendering makes new questions (docs/design.md). The shown order is a stable-hash
shuffle that is never the gold order. The question carries every item (``options`` = the item
texts in letter order), so any history representation can be the context; the seed's own
setting (items only) is the ``no-context-blind`` strategy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.insertion import gold_insertion
from clinlib.tasks.answers.kinds import ORDER
from clinlib.tasks.answers.order import ORDER_LETTERS, canonical_order
from clinlib.tasks.gates.ordering import t10_leak
from clinlib.tasks.generators.common import TaskInputs, question_row, stable_hash, to_frame
from clinlib.tasks.generators.t10_text import (
    event_line,
    note_clip,
    numbered,
    options_block,
    stamp,
    visit_halves,
    visit_stream,
)
from clinlib.tasks.order_leaks import clip_leak
from clinlib.tasks.recompute.per_task import gold_t10
from clinlib.tasks.source_text import Assembled
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T10_TEMPLATES

TASK = "T10"
# LongMedBench "temporal reasoning": the letters of the listed items in time order.
FORMAT = (
    "Reply with the letters only, in chronological order (earliest first), separated by "
    "commas (for example: C, A, B); when the visit's lines are numbered, write after each "
    "letter a colon and the number of the line it goes after, 0 for before the first line "
    "(for example: C:0, A:3, B:3). " + ABSTAIN_CLAUSE
)
SUBTYPES = rules.T10_SUBTYPES
MAX_PER_PATIENT = 6
ANCHOR_STATUSES = ("covered", "missed")


def shuffled(keys: Sequence[Any], salt: str) -> list[int]:
    """A stable-hash permutation of ``range(len(keys))`` that is not the identity; ``keys``
    (distinct) come in time order, so the shown order is never the answer."""
    order = sorted(range(len(keys)), key=lambda i: stable_hash(salt, keys[i]))
    if order == sorted(order):
        order = order[1:] + order[:1]
    return order


def _row(
    inp: TaskInputs,
    subtype: str,
    sid: int,
    anchors: list[str],
    items: list[str],
    gold_rank: list[int],
    meta: dict,
    fields: dict,
) -> dict:
    """One candidate: ``items`` in shown order, ``gold_rank[i]`` = time rank of item i."""
    letters = ORDER_LETTERS[: len(items)]
    gold = canonical_order(
        [letters[i] for i in sorted(range(len(items)), key=gold_rank.__getitem__)]
    )
    # The qid hashes the whole question (items, text fields, meta, wording): a re-rendered
    # question is a new question, so its old answers are orphaned, never taken as done.
    content = json.dumps(
        [items, fields, meta, T10_TEMPLATES[subtype], FORMAT], sort_keys=True, default=str
    )
    return question_row(
        inp,
        task=TASK,
        subtype=subtype,
        subject_ids=[sid],
        anchors=anchors,
        templates=T10_TEMPLATES[subtype],
        fields=fields,
        gold=gold,
        meta=meta,
        options=items,
        suffix=options_block(items),
        extra_key=[hashlib.sha1(content.encode()).hexdigest()[:12]],
    )


# --------------------------------------------------------------------------- visit cloze


def _cloze_events(recs: list[dict], k: int) -> list[dict] | None:
    """k interventions of a visit, each alone at its minute (no other event of the visit
    shares it, so its gap is readable from the timestamps), chosen by a stable hash."""
    inter = [r for r in recs if r["kind"] in rules.T10_INTERVENTION_KINDS]
    per_minute: dict[str, int] = {}
    for r in recs:
        per_minute[stamp(r)] = per_minute.get(stamp(r), 0) + 1
    ok = [r for r in inter if per_minute[stamp(r)] == 1 and r["status"] in ANCHOR_STATUSES]
    if len(ok) < rules.T10_CLOZE_MIN:
        return None
    ok.sort(key=lambda r: stable_hash("T10-cloze-pick", r["event_id"]))
    return ok[: min(k, len(ok))]


def _cloze(inp: TaskInputs, sid: int, v: int, recs: list[dict]) -> dict | None:
    if len(recs) > rules.T10_MAX_VISIT_EVENTS:
        return None
    span = rules.T10_CLOZE_MAX - rules.T10_CLOZE_MIN + 1
    k = rules.T10_CLOZE_MIN + stable_hash("T10-cloze-k", sid, v) % span
    chosen = _cloze_events(recs, k)
    if chosen is None:
        return None
    chosen.sort(key=lambda r: r["t"])  # time order first: the shuffle must move it
    ids = [r["event_id"] for r in chosen]
    shown = [chosen[i] for i in shuffled(ids, f"T10-cloze|{sid}|{v}")]
    by_time = sorted(range(len(shown)), key=lambda i: shown[i]["t"])
    rank = [by_time.index(i) for i in range(len(shown))]
    masked = set(ids)
    lines = visit_stream([r for r in recs if r["event_id"] not in masked]).split("\n")
    letters = ORDER_LETTERS[: len(shown)]
    # the gap of each removed event: how many remaining lines precede it (its minute is its own)
    gaps = [(letters[i], sum(line[:16] < stamp(shown[i]) for line in lines)) for i in by_time]
    return _row(
        inp,
        "visit_cloze",
        sid,
        ids,
        [event_line(r) for r in shown],
        rank,
        meta={
            "subject_id": sid,
            "hadm_id": int(recs[0]["hadm_id"]),
            "visit_idx": v,
            "event_ids": [r["event_id"] for r in shown],
            "insertion": gold_insertion(gaps),
            "n_lines": len(lines),
        },
        fields={"visit": Assembled(numbered(lines))},
    )


# --------------------------------------------------------------------------- sorting


def _windows(visits: list[int]) -> list[list[int]]:
    """Every run of T10_WINDOW consecutive visit indices among a patient's ``visits``."""
    w = rules.T10_WINDOW
    have = sorted(visits)
    return [have[i : i + w] for i in range(len(have) - w + 1) if have[i + w - 1] - have[i] == w - 1]


def _first(items: list, make, salt: str, classified) -> list[dict]:
    """Up to MAX_PER_PATIENT rows: ``make(item)`` over ``items`` in a stable-hash order,
    skipping None and rows with an anchor outside ANCHOR_STATUSES (documented thinning; only
    what is kept gets rendered)."""
    rows: list[dict] = []
    for item in sorted(items, key=lambda x: stable_hash(salt, x)):
        row = make(item)
        if row is not None and classified(row["anchor_event_ids"]):
            rows.append(row)
            if len(rows) == MAX_PER_PATIENT:
                break
    return rows


SORTING = {"visit": "visit_sorting", "joint": "joint_sorting", "notes": "visit_sorting_notes"}


def _clips(inp: TaskInputs, sid: int, window: list[int], mode: str, built: dict) -> tuple:
    """(keys, texts) of a window's clips (``built`` caches each visit's halves / note)."""
    for v in window:
        if (v, mode == "notes") not in built:
            recs = inp.by_visit.get((sid, v), [])
            built[(v, mode == "notes")] = note_clip(recs) if mode == "notes" else visit_halves(recs)
    if mode == "joint":
        halves = [built[(v, False)] for v in window]
        return [(v, h) for v in window for h in rules.T10_HALVES], [
            part for pair in halves for part in pair
        ]
    if mode == "notes":
        return [(v, "visit") for v in window], [built[(v, True)] for v in window]
    return [(v, "visit") for v in window], [" ".join(built[(v, False)]) for v in window]


def _sorting(inp: TaskInputs, sid: int, window: list[int], mode: str, built: dict) -> dict | None:
    joint = mode == "joint"
    keys, texts = _clips(inp, sid, window, mode, built)
    if len(set(texts)) != len(texts) or any(clip_leak(t) for t in texts):
        return None
    subtype = SORTING[mode]
    order = shuffled([f"{v}|{h}" for v, h in keys], f"T10-{subtype}|{sid}|{window[0]}")
    hadm = {v: int(inp.visit_info[(sid, v)]["hadm_id"]) for v in window}
    shown = [keys[i] for i in order]
    # time rank: visit order, then the admission half before the discharge half
    time_order = sorted(keys, key=lambda k: (k[0], rules.T10_HALVES.index(k[1]) if joint else 0))
    rank = [time_order.index(k) for k in shown]
    anchors = [f"ADM-{hadm[v]}" for v in window]
    if joint:
        anchors += [f"DIS-{hadm[v]}" for v in window]
        meta_items: dict[str, Any] = {"clips": [[hadm[v], h] for v, h in shown]}
    else:
        meta_items = {"hadm_ids": [hadm[v] for v, _ in shown]}
    return _row(
        inp,
        subtype,
        sid,
        anchors,
        [texts[i] for i in order],
        rank,
        meta={"subject_id": sid, **meta_items},
        fields={},
    )


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T10 candidates (QUESTION_COLUMNS + conflicts)."""
    visits: dict[int, list[int]] = {}
    for s, v in inp.visit_info:
        visits.setdefault(s, []).append(v)
    status = inp.status_of

    def classified(anchors: list[str]) -> bool:
        return all(status.get(a) in ANCHOR_STATUSES for a in anchors)

    rows: list[dict] = []
    for sid in sorted(visits):
        rows += _first(
            visits[sid],
            lambda v, sid=sid: _cloze(inp, sid, v, inp.by_visit[(sid, v)]),
            f"T10-cloze|{sid}",
            classified,
        )
        built: dict = {}  # each visit's clips, built once
        windows = _windows(visits[sid])
        for mode in SORTING:
            rows += _first(
                windows,
                lambda w, sid=sid, m=mode, b=built: _sorting(inp, sid, w, m, b),
                # the event clips keep their original salts (their selection is unchanged)
                {"visit": f"T10-sorting|False|{sid}", "joint": f"T10-sorting|True|{sid}"}.get(
                    mode, f"T10-sorting|{mode}|{sid}"
                ),
                classified,
            )
    return to_frame(rows)


SPEC = TaskSpec(
    name=TASK,
    title="Temporal ordering (extended set)",
    answer_format=FORMAT,
    max_tokens=80,
    answer=ORDER,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t10,
    leak=t10_leak,
    counts={"paper": 1200, "quick": 32},
    options="items",
    anchor_status=("covered", "missed"),
)
