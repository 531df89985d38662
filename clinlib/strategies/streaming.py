"""The streaming (evaluate-while-constructing) protocol on the strategies side (MedMemoryBench §5
"Evaluation Protocol"; settings in :mod:`clinlib.tasks.settings`).

* :func:`answerable_visit` — the visit at which a question becomes answerable: the latest
  visit holding one of its anchor events (``anchor_event_ids``, mapped to visits through the
  dialogue turns' ``event_ids``) or evidence turns; when none is in the dialogue (T9: its
  anchors are absent by construction) the visit of the question's date (``meta.date``: the
  last visit starting on or before it); with neither, the first visit (the question is
  answerable, or its absence is, from the start). Multi-patient questions (T6) get None:
  the stream does not ask them (:func:`clinlib.tasks.settings.asked_questions`).
* :func:`checkpoint_plan` — one row per (question, checkpoint t >= its answerable session):
  t counts the sessions seen in the sequence that is streamed (the extended, noisy one under
  ``stream+mixed``, where an original visit is found by ``source_visit_idx``).
* :class:`Prefixes` — a patient's dialogue truncated to its first t sessions, for the
  representation and the answer-time text alike; the construction cache keys each prefix by
  its own hash.
* :func:`fill_snapshots` — strategies that build visit by visit (Mem0, A-Mem) snapshot their
  store at every checkpoint in one pass instead of rebuilding each prefix; the snapshots are
  stored in the cache under the prefix's key, exactly where a from-scratch build would go.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.strategies.base import (
    Artifact,
    Strategy,
    check_turns,
    dialogue_hash,
    subject_ids_of,
    visit_order,
)
from clinlib.strategies.footprints import anchor_visits
from clinlib.tasks.settings import Setting, checkpoints

PLAN_COLUMNS: tuple[str, ...] = ("qid", "setting", "checkpoint_visit", "checkpoint_final")


def truncate(turns: pd.DataFrame, t: int) -> pd.DataFrame:
    """The turns of a patient's first ``t`` sessions (visits in chronological order)."""
    order = visit_order(turns)
    if int(t) >= len(order):
        return turns
    visits = turns["visit_idx"].to_numpy()
    if (np.diff(visits) >= 0).all():  # turns in visit order (as stored): a row slice
        return turns.iloc[: int(np.searchsorted(visits, order[int(t) - 1], side="right"))]
    return turns[turns["visit_idx"].isin(order[: int(t)])].reset_index(drop=True)


class Checked(Mapping):
    """subject_id -> that patient's turns passed through :func:`check_turns` once (sorted,
    ``text_tagged`` present), so that every prefix of them is checked too."""

    def __init__(self, full: Mapping[int, pd.DataFrame]) -> None:
        self.full = full
        self._done: dict[int, pd.DataFrame] = {}

    def __getitem__(self, sid: int) -> pd.DataFrame:
        if sid not in self._done:
            self._done[sid] = check_turns(self.full[sid], f"patient {sid}")
        return self._done[sid]

    def __contains__(self, sid: object) -> bool:
        return sid in self.full

    def __iter__(self) -> Iterator[int]:
        return iter(self.full)

    def __len__(self) -> int:
        return len(self.full)


class Prefixes(Checked):
    """subject_id -> that patient's checked dialogue truncated to its first ``t`` sessions, and
    its hash (each computed on first access, then kept: every strategy of a run reads the same
    prefixes)."""

    def __init__(self, full: Checked, t: int) -> None:
        super().__init__(full)
        self.t = int(t)
        self._sha: dict[int, str] = {}

    def __getitem__(self, sid: int) -> pd.DataFrame:
        if sid not in self._done:
            self._done[sid] = truncate(self.full[sid], self.t)
        return self._done[sid]

    def sha(self, sid: int) -> str:
        """:func:`dialogue_hash` of the prefix (the construction cache's key input)."""
        if sid not in self._sha:
            self._sha[sid] = dialogue_hash(self[sid])
        return self._sha[sid]


def _date_visit(question: Mapping[str, Any], turns: pd.DataFrame) -> int | None:
    try:
        date = str(json.loads(question.get("meta") or "{}").get("date") or "")
    except (json.JSONDecodeError, TypeError):
        return None
    if not date or "visit_date" not in turns.columns:
        return None
    starts = turns.groupby("visit_idx")["visit_date"].first().astype(str).sort_index()
    before = starts[starts <= date[:10]]
    return int(before.index[-1]) if len(before) else None


def answerable_visit(
    question: Mapping[str, Any], turns: pd.DataFrame, maps: dict | None = None
) -> int | None:
    """The original ``visit_idx`` from which a single-patient question is answerable (module
    docstring); None for a multi-patient question. ``maps`` memoises the event -> visit maps
    per patient across questions."""
    sids = subject_ids_of(question)
    if len(sids) != 1:
        return None
    visits = anchor_visits(question, {sids[0]: turns}, maps).get(sids[0])
    if visits:
        return max(visits)
    dated = _date_visit(question, turns)
    return dated if dated is not None else visit_order(turns)[0]


def _positions(seq: pd.DataFrame) -> tuple[dict[int, int], int]:
    """Original visit -> 1-based position in the streamed sequence, and its length."""
    order = visit_order(seq)
    pos = {v: i for i, v in enumerate(order, start=1)}
    if "source_visit_idx" not in seq.columns:
        return pos, len(order)
    real = seq if "is_noise" not in seq.columns else seq[~seq["is_noise"].astype(bool)]
    firsts = real.groupby("visit_idx")["source_visit_idx"].first()
    return {int(src): pos[int(v)] for v, src in firsts.items()}, len(order)


def checkpoint_plan(
    questions: pd.DataFrame,
    original: Mapping[int, pd.DataFrame],
    streamed: Mapping[int, pd.DataFrame],
    setting: Setting,
) -> pd.DataFrame:
    """One row per (question, checkpoint) asked: :data:`PLAN_COLUMNS` (``setting`` is the
    prediction key's value, e.g. ``stream@6``; ``checkpoint_visit`` = sessions seen).

    Args:
        questions: the single-patient questions asked under the setting.
        original: subject_id -> original dialogue (anchors are located there).
        streamed: subject_id -> the dialogue whose sessions are streamed (noisy under mixed).
        setting: a stream setting.
    """
    rows = []
    maps: dict[int, tuple[dict[int, int], int]] = {}
    anchors: dict[int, Any] = {}
    for q in questions.to_dict("records"):
        (sid,) = subject_ids_of(q)
        visit = answerable_visit(q, original[sid], anchors)
        if sid not in maps:
            maps[sid] = _positions(streamed[sid])
        pos, n = maps[sid]
        first = pos[int(visit)]
        for t in checkpoints(n, setting.delta):
            if t >= first:
                rows.append((q["qid"], setting.value(t), t, t == n))
    out = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    out["checkpoint_visit"] = out["checkpoint_visit"].astype("Int64")
    out["checkpoint_final"] = out["checkpoint_final"].astype("boolean")
    return out


# One question as asked: (question, dialogue-variant key, built dialogues, answer-time
# dialogues, plan row or None). Static settings ask each question once; ``stream`` once per
# checkpoint, with both dialogues truncated to the sessions seen.
Unit = tuple[dict[str, Any], str, Mapping[int, pd.DataFrame], Mapping[int, pd.DataFrame], Any]


def question_units(
    records: list[dict[str, Any]],
    variants: dict[str, tuple[Mapping[int, pd.DataFrame], Mapping[int, pd.DataFrame]]],
    plan: pd.DataFrame | None,
) -> list[Unit]:
    """The units asked: one per question (static), one per plan row (``stream``)."""
    if plan is None:
        return [
            (
                q,
                q["task"] if q["task"] in variants else "base",
                *variants.get(q["task"], variants["base"]),
                None,
            )
            for q in records
        ]
    by_qid = {q["qid"]: q for q in records}
    checked: dict[int, Checked] = {}  # one per distinct dialogue dict (variants share base)
    cut: dict[tuple[str, int], tuple[Prefixes, Prefixes]] = {}
    units = []
    for row in plan.itertuples(index=False):
        q = by_qid[row.qid]
        variant = q["task"] if q["task"] in variants else "base"
        t = int(row.checkpoint_visit)
        if (variant, t) not in cut:
            built, now = (checked.setdefault(id(d), Checked(d)) for d in variants[variant])
            cut[(variant, t)] = (Prefixes(built, t), Prefixes(now, t))
        units.append((q, f"{variant}@{t}", *cut[(variant, t)], row))
    return units


def snapshot_needs(units: list[Unit]) -> list[tuple[int, pd.DataFrame, dict[int, Prefixes]]]:
    """(subject_id, full built dialogue, checkpoint -> its prefixes) per built dialogue of the
    units: what :func:`fill_snapshots` snapshots."""
    needs: dict[tuple[int, int], tuple[int, pd.DataFrame, dict[int, Prefixes]]] = {}
    for q, _key, built, _now, row in units:
        if row is None or not isinstance(built, Prefixes):
            continue
        for sid in subject_ids_of(q):
            # the prefixes of one full dialogue share it: key by its identity, not by t
            need = needs.setdefault((id(built.full), sid), (sid, built.full[sid], {}))
            need[2][int(row.checkpoint_visit)] = built
    return list(needs.values())


def fill_snapshots(
    strategy: Strategy,
    needs: Sequence[tuple[int, pd.DataFrame, Mapping[int, Prefixes]]],
    prep: Any,
    cache: Any,
) -> int:
    """Snapshot an incrementally built strategy at the checkpoints it is asked at.

    Args:
        strategy: the strategy (nothing happens unless it implements ``build_snapshots``).
        needs: (subject_id, full built dialogue, checkpoint -> prefixes holding the
            truncated dialogue) (:func:`snapshot_needs`).
        prep: the prep model.
        cache: the :class:`~clinlib.strategies.cache.ConstructionCache`.

    Returns:
        The number of snapshots stored (prefixes already cached are skipped).
    """
    if type(strategy).build_snapshots is Strategy.build_snapshots:
        return 0  # not incremental: each prefix is built from scratch
    stored = 0
    for sid, turns, at in needs:
        keys = {}
        for t, prefixes in sorted(at.items()):
            key = cache.key(strategy, sid, prefixes.sha(sid), prep)
            if not cache.exists(strategy.name, sid, key):
                keys[t] = (key, prefixes[sid])
        if not keys:
            continue
        t0 = time.perf_counter()
        snaps = strategy.build_snapshots(sid, strategy._checked(sid, turns), prep, list(keys))
        if snaps is None:
            return stored  # e.g. mem0's mem0ai engine: each prefix is built from scratch
        secs = (time.perf_counter() - t0) / len(keys)
        for t, (key, cut) in keys.items():
            art: Artifact = strategy._artifact(sid, cut, prep, snaps[t], secs)
            art.key = key
            cache.put(art)
            stored += 1
    return stored
