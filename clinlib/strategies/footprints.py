"""Representation footprints and retrieval hit rates (paper Appendix C.2 "dense-retrieval hit
rate": top-k visit-hit rate per task, T9 excluded by construction, headline hit@1 = 0.595,
hit@3 = 0.852, hit@5 = 0.926, hit@10 = 0.979 with BGE-M3; Appendix C.3 "Compression
footprints": Mem0 facts, A-Mem notes and llm-summary words per patient).

:func:`footprints` measures each artifact: how many items it holds (facts, notes, words,
visits, rows, codes), the tokens of everything it holds (``store_tokens``) and, given questions,
the mean tokens of the context a question actually receives (``context_tokens``).

:func:`retrieval_hits` ranks a patient's visits for every question with a strategy that can
rank visits (dense-retrieval, bm25, hybrid, a-mem's visit notes, mem0's memories by the visit
that last touched them) and records the rank of the question's anchor visit — the visit of an
``anchor_event_ids`` event (the turn whose ``event_ids`` lists it) or of an ``evidence_turns``
turn. A question is a hit at k when, for every patient it concerns, some anchor visit of that
patient is among the top k. T9 (its anchors are by construction absent from the dialogue) is
excluded, as are questions whose anchors cannot be located.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    check_turns,
    render,
    subject_ids_of,
    visit_order,
)
from clinlib.strategies.prep import DEFAULT_TOKEN_MODEL, count_text_tokens
from clinlib.strategies.simple import VisitSubset

HIT_KS: tuple[int, ...] = (1, 3, 5, 10)
EXCLUDED_TASKS: tuple[str, ...] = ("T9",)
# Appendix C.2 / Figure 14: BGE-M3 hit rates over the retrieval-eligible questions and the
# per-task eligible n of the caption (data/paper/figure14_hit_rates.csv holds the same).
PAPER_HIT_RATES: dict[int, float] = {1: 0.595, 3: 0.852, 5: 0.926, 10: 0.979}
PAPER_HIT_N: dict[str, int] = {
    "T1": 1500,
    "T2": 889,
    "T3": 600,
    "T4": 53,
    "T5": 495,
    "T6": 700,
    "T7": 400,
    "T8": 134,
}
FOOTPRINT_COLUMNS: tuple[str, ...] = (
    "subject_id",
    "strategy",
    "label",
    "prep_model",
    "n_items",
    "item",
    "store_tokens",
    "n_facts",
    "n_notes",
    "n_links",
    "summary_words",
    "memory_chars",
    "context_tokens",
    "n_questions",
)


def _verbatim_store(strategy: Strategy, turns: pd.DataFrame) -> str:
    """What a verbatim / retrieval strategy holds: the visits it can show (ids on)."""
    if strategy.name == "no-context-blind":
        return ""
    if isinstance(strategy, VisitSubset):
        return render(turns, visits=strategy.held_visits(turns))
    return render(turns)


def artifact_footprint(
    strategy: Strategy,
    artifact: Artifact,
    turns: pd.DataFrame | None = None,
    questions: Sequence[Mapping[str, Any]] = (),
    token_model: str = DEFAULT_TOKEN_MODEL,
) -> dict[str, Any]:
    """One footprint row (see :data:`FOOTPRINT_COLUMNS`).

    Args:
        strategy: the strategy that built ``artifact``.
        artifact: the artifact.
        turns: the patient's dialogue (needed for verbatim and retrieval strategies).
        questions: this patient's single-patient questions (for ``context_tokens``).
        token_model: tokenizer model.
    """
    fp = strategy.footprint(artifact)
    store = strategy.store_text(artifact)
    if store is None:
        if turns is None:
            raise StrategyError(f"{strategy.name}: the dialogue is needed to measure its store")
        store = _verbatim_store(strategy, check_turns(turns))
    row = {c: np.nan for c in FOOTPRINT_COLUMNS}
    row.update(
        subject_id=artifact.subject_id,
        strategy=strategy.name,
        label=strategy.label(),
        prep_model=artifact.prep_model,
        n_items=fp.get("n_items", np.nan),
        item=fp.get("item", ""),
        store_tokens=count_text_tokens(store, token_model),
        n_facts=fp.get("n_facts", np.nan) if strategy.name == "mem0" else np.nan,
        n_notes=fp.get("n_notes", np.nan),
        n_links=fp.get("n_links", np.nan),
        summary_words=fp.get("summary_words", np.nan),
        memory_chars=fp.get("memory_chars", np.nan),
        n_questions=len(questions),
    )
    if questions:
        if turns is None:
            raise StrategyError(f"{strategy.name}: the dialogue is needed for context tokens")
        lens = [
            count_text_tokens(strategy.access(artifact, q, turns), token_model) for q in questions
        ]
        row["context_tokens"] = float(np.mean(lens))
    return row


def footprints(
    strategy: Strategy,
    artifacts: Mapping[int, Artifact],
    dialogues: Mapping[int, pd.DataFrame] | None = None,
    questions: pd.DataFrame | None = None,
    token_model: str = DEFAULT_TOKEN_MODEL,
) -> pd.DataFrame:
    """Footprints of one strategy's artifacts, one row per patient.

    Args:
        strategy: the strategy.
        artifacts: subject_id -> artifact.
        dialogues: subject_id -> turns (verbatim / retrieval strategies and context tokens).
        questions: questions.parquet rows; single-patient questions give ``context_tokens``.
        token_model: tokenizer model.

    Returns:
        DataFrame with :data:`FOOTPRINT_COLUMNS`.
    """
    by_subject: dict[int, list[Mapping[str, Any]]] = {}
    if questions is not None:
        for q in questions.to_dict("records"):
            sids = subject_ids_of(q)
            if len(sids) == 1:
                by_subject.setdefault(sids[0], []).append(q)
    rows = [
        artifact_footprint(
            strategy, art, (dialogues or {}).get(sid), by_subject.get(sid, []), token_model
        )
        for sid, art in sorted(artifacts.items())
    ]
    return pd.DataFrame(rows, columns=list(FOOTPRINT_COLUMNS))


def _visit_maps(turns: pd.DataFrame) -> tuple[dict[str, int], dict[int, int]]:
    by_event: dict[str, int] = {}
    by_turn: dict[int, int] = {}
    cols = turns.columns
    for row in turns.itertuples(index=False):
        v = int(row.visit_idx)
        by_turn[int(row.turn_idx)] = v
        ids = row.event_ids if "event_ids" in cols else None
        if ids is not None and not isinstance(ids, str):
            for eid in list(ids):
                by_event.setdefault(str(eid), v)
    return by_event, by_turn


def anchor_visits(
    question: Mapping[str, Any], dialogues: Mapping[int, pd.DataFrame], maps: dict | None = None
) -> dict[int, set[int]]:
    """subject_id -> visits holding the question's anchor events or evidence turns."""
    maps = maps if maps is not None else {}
    out: dict[int, set[int]] = {}
    evidence: dict[int, set[int]] = {}
    for item in _as_list(question.get("evidence_turns")):
        try:
            sid, tid = str(item).split(":")
            evidence.setdefault(int(sid), set()).add(int(tid))
        except ValueError:
            continue
    anchors = [str(a) for a in _as_list(question.get("anchor_event_ids"))]
    for sid in subject_ids_of(question):
        if sid not in dialogues:
            continue
        if sid not in maps:
            maps[sid] = _visit_maps(dialogues[sid])
        by_event, by_turn = maps[sid]
        visits = {by_event[a] for a in anchors if a in by_event}
        visits |= {by_turn[t] for t in evidence.get(sid, ()) if t in by_turn}
        if visits:
            out[sid] = visits
    return out


def _as_list(value: Any) -> list:
    if value is None or isinstance(value, str) and not value:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def retrieval_hits(
    questions: pd.DataFrame,
    strategy: Strategy,
    artifacts: Mapping[int, Artifact],
    dialogues: Mapping[int, pd.DataFrame],
    ks: Iterable[int] = HIT_KS,
    exclude_tasks: Iterable[str] = EXCLUDED_TASKS,
) -> pd.DataFrame:
    """Rank of the anchor visit and hit@k per retrieval-eligible question.

    Args:
        questions: questions.parquet rows.
        strategy: a strategy whose :meth:`~Strategy.rank_visits` ranks visits.
        artifacts: subject_id -> artifact (built from the original dialogues).
        dialogues: subject_id -> original turns (to locate anchor visits).
        ks: the k of hit@k.
        exclude_tasks: tasks excluded by construction (T9).

    Returns:
        One row per eligible question: qid, task, n_patients, n_visits, anchor_visits (list),
        rank (1-based rank needed to cover every patient's anchor), hit@k columns.
    """
    ks = tuple(int(k) for k in ks)
    excluded = set(exclude_tasks)
    maps: dict[int, Any] = {}
    rows = []
    for q in questions.to_dict("records"):
        if q.get("task") in excluded:
            continue
        anchors = anchor_visits(q, dialogues, maps)
        sids = subject_ids_of(q)
        if not anchors or set(anchors) != set(sids):
            continue  # some patient's anchor cannot be located: not retrieval-eligible
        worst = 0
        n_visits = 0
        for sid in sids:
            if sid not in artifacts:
                raise StrategyError(f"question {q.get('qid')}: no artifact for patient {sid}")
            ranking = strategy.rank_visits(artifacts[sid], q)
            if ranking is None:
                raise StrategyError(f"strategy {strategy.name!r} does not rank visits")
            n_visits += len(visit_order(dialogues[sid]))
            ranks = [ranking.index(v) + 1 for v in anchors[sid] if v in ranking]
            worst = max(worst, min(ranks) if ranks else 10**9)
        row = {
            "qid": q.get("qid"),
            "task": q.get("task"),
            "n_patients": len(sids),
            "n_visits": n_visits,
            "anchor_visits": sorted({v for vs in anchors.values() for v in vs}),
            "rank": worst if worst < 10**9 else np.nan,
        }
        for k in ks:
            row[f"hit@{k}"] = bool(worst <= k)
        rows.append(row)
    cols = [
        "qid",
        "task",
        "n_patients",
        "n_visits",
        "anchor_visits",
        "rank",
        *(f"hit@{k}" for k in ks),
    ]
    return pd.DataFrame(rows, columns=cols)


def hit_rates(hits: pd.DataFrame) -> pd.DataFrame:
    """hit@k per task plus an ``overall`` row (columns task, n, hit@k ...)."""
    kcols = [c for c in hits.columns if c.startswith("hit@")]
    if hits.empty:
        return pd.DataFrame(columns=["task", "n", *kcols])
    per = hits.groupby("task")[kcols].mean()
    per.insert(0, "n", hits.groupby("task").size())
    overall = pd.DataFrame(
        [[len(hits), *hits[kcols].mean().tolist()]], columns=["n", *kcols], index=["overall"]
    )
    out = pd.concat([per, overall]).rename_axis("task").reset_index()
    out["n"] = out["n"].astype(int)
    return out
