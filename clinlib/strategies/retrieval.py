"""Retrieval strategies: dense, BM25 and hybrid over one chunk per visit (paper §4 "Retrieval.
dense-retrieval — BGE-M3 chunk embeddings per patient, top-K=5, the chunk unit being one
complete clinical visit"; Appendix G.6 / Table 11 K in {3, 5, 10}; Appendix C.2 hit rates).

Construction indexes each visit of the dialogue (the visit rendered with its header, without
provenance tags, which are noise for a retriever): dense embeddings cached by text hash
(:mod:`clinlib.strategies.embed`), BM25 term lists (``rank_bm25.BM25Okapi``, k1 = 1.5,
b = 0.75), or both fused by reciprocal-rank fusion (RRF, score = sum 1 / (60 + rank), Cormack
et al. 2009) — the paper evaluates dense only; bm25 and hybrid are the kit's extras.

Access ranks the visits against the question, keeps the top K, and returns the CURRENT text of
those visits (ids on) in chronological order: the index was built at construction, the text is
read at question time, so a sentence injected after construction into a retrieved visit is
visible (§5.5: dense retrieval stays intact post-construction). K acts only at access, so a K
ablation rebuilds nothing.

Chunking: ``truncate`` (default) embeds each visit as one chunk: the default static encoder
embeds it whole; a transformer truncates it to its window (256 word pieces for MiniLM; BGE-M3's
8192 covers any visit). ``max`` splits a visit at turn boundaries into window-sized segments and
scores the visit by its best segment; a static model has no window, so there ``max`` equals
``truncate`` (windows made the static model worse).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from rank_bm25 import BM25Okapi

from clinlib.dialogue.fields import records
from clinlib.dialogue.render import render_visit
from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    question_text,
    render,
    text_hash,
    visit_order,
)
from clinlib.strategies.embed import DEFAULT_EMBEDDING_MODEL, EmbedsQueries

RRF_K = 60
BM25_K1 = 1.5
BM25_B = 0.75
CHUNKING = ("truncate", "max")
TOKEN_RE = re.compile(r"\d{4}-\d{2}-\d{2}|\d+(?:\.\d+)?|[a-z]+(?:/[a-z]+)?")
# A small English stop list: function words only (clinical words and numbers are kept).
STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be been but by did do does for from had has have i if in into is it its "
    "me my of on or our so that the their then there these this to was we were what when which "
    "who will with you your".split()
)


def tokenize(text: str) -> list[str]:
    """BM25 terms: lower-cased words, numbers and ISO dates, stop words dropped."""
    return [t for t in TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


def visit_chunks(turns: pd.DataFrame) -> list[tuple[int, str]]:
    """(visit_idx, text) per visit: the visit with its dated header, no provenance tags.

    The turns are read as records once and split by visit in Python (a DataFrame per visit
    made every visit pay the column-by-column conversion again: most of bm25's, hybrid's and
    dense retrieval's construction time)."""
    by_visit: dict[int, list[dict[str, Any]]] = {}
    for rec in records(turns):
        v = rec["visit_idx"]
        if v is not None and v == v:  # NA visits are left out, as a groupby leaves them
            by_visit.setdefault(int(v), []).append(rec)
    return [(v, render_visit(by_visit[v], with_ids=False, header=True)) for v in sorted(by_visit)]


def visit_terms(turns: pd.DataFrame) -> list[tuple[int, list[str]]]:
    """(visit_idx, BM25 terms) per visit, in time order (the lexical index of a patient)."""
    return [(v, tokenize(text)) for v, text in visit_chunks(turns)]


def bm25_ranking(data: Mapping[str, Any], query: str) -> list[int]:
    """Visits by descending BM25 score of ``data``'s ``visits`` / ``terms`` (ties:
    chronological); the lexical ranking of bm25, hybrid and core-memory's archival tier."""
    visits, terms = list(data.get("visits", [])), list(data.get("terms", []))
    if not visits:
        return []
    q = tokenize(query)
    scores = BM25Okapi(terms, k1=BM25_K1, b=BM25_B).get_scores(q) if q else np.zeros(len(visits))
    return [v for _, v in sorted(zip((-s for s in scores), visits, strict=True))]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of several rankings (ties by first appearance)."""
    score: dict[int, float] = {}
    order: dict[int, int] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
            order.setdefault(item, len(order))
    return sorted(score, key=lambda i: (-score[i], order[i]))


def retrieved_visits_text(
    strategy: Strategy,
    artifact: Artifact | None,
    question: Mapping[str, Any],
    turns_now: pd.DataFrame,
) -> str:
    """The top ``k`` visits of ``strategy.rank_visits`` that are present now, as their CURRENT
    text (ids on), in time order; "" when none is (shared by retrieval and core-memory's
    archival tier)."""
    if artifact is None:
        raise StrategyError(f"{strategy.name}: no artifact for this patient")
    top = strategy.rank_visits(artifact, question)[: int(strategy.params["k"])]
    present = set(visit_order(turns_now))
    chosen = sorted(v for v in top if v in present)
    return render(turns_now, with_ids=True, visits=chosen) if chosen else ""


class _Retrieval(Strategy):
    """Shared access: top-K visits by :meth:`rank_visits`, current text, chronological."""

    family = "retrieval"

    def validate_params(self) -> None:
        self._positive_int("k")

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        return retrieved_visits_text(self, artifact, question, turns_now)

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {"n_items": len(artifact.data.get("visits", [])), "item": "visits indexed"}


class DenseRetrieval(EmbedsQueries, _Retrieval):
    """Sentence-embedding retrieval of whole visits (the paper's dense baseline)."""

    name = "dense-retrieval"
    defaults = {
        "k": 5,
        "embedding_model": DEFAULT_EMBEDDING_MODEL,
        "chunking": "truncate",
        "embedding_dir": None,
    }
    construction_keys = ("embedding_model", "chunking")

    def validate_params(self) -> None:
        super().validate_params()
        if self.params["chunking"] not in CHUNKING:
            raise StrategyError(
                f"{self.name}: chunking must be one of {CHUNKING}, got {self.params['chunking']!r}"
            )

    def _segments(self, turns: pd.DataFrame) -> list[tuple[int, str]]:
        """(visit_idx, text) segments to embed (one per visit unless chunking='max')."""
        chunks = visit_chunks(turns)
        window = None if self.params["chunking"] == "truncate" else self.embedder.max_seq_length
        if window is None:  # one chunk per visit (a static model has no window)
            return chunks
        limit = max(16, window - 8)
        out: list[tuple[int, str]] = []
        for v, text in chunks:
            lines = text.split("\n")
            header, body = lines[0], lines[1:] or [""]
            lengths = self.embedder.token_lengths([header + "\n" + ln for ln in body])
            current: list[str] = []
            used = 0
            for line, n in zip(body, lengths, strict=True):
                if current and used + n > limit:
                    out.append((v, header + "\n" + "\n".join(current)))
                    current, used = [], 0
                current.append(line)
                used += n
            out.append((v, header + "\n" + "\n".join(current)))
        return out

    def prepare(self, jobs: Sequence[tuple[int, pd.DataFrame]], prep: Any) -> None:
        self._pending = {sid: self._segments(turns) for sid, turns in jobs}
        self.embedder.ensure([t for segs in self._pending.values() for _, t in segs])

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        pending = getattr(self, "_pending", {})
        segs = pending.pop(subject_id, None) or self._segments(turns)
        self.embedder.ensure([t for _, t in segs])
        return self._dense_data(segs)

    def _dense_data(self, segs: list[tuple[int, str]]) -> dict:
        return {
            "visits": sorted({v for v, _ in segs}),
            "chunks": [{"visit_idx": v, "hash": text_hash(t), "chars": len(t)} for v, t in segs],
            "embedding_model": self.params["embedding_model"],
        }

    def dense_ranking(self, data: Mapping[str, Any], query: str) -> list[int]:
        """Visits by descending best-chunk cosine to the query (ties: chronological)."""
        chunks = data.get("chunks", [])
        if not chunks:
            return []
        store = self.embedder.store.get_many([c["hash"] for c in chunks])
        missing = [c["hash"] for c in chunks if c["hash"] not in store]
        if missing:
            raise StrategyError(
                f"{self.name}: {len(missing)} chunk embedding(s) are missing from "
                f"{self.embedder.store.path}; rebuild the construction"
            )
        q = self.embedder.encode([query])[0]
        best: dict[int, float] = {}
        for c in chunks:
            s = float(np.dot(store[c["hash"]], q))
            v = int(c["visit_idx"])
            best[v] = max(best.get(v, -2.0), s)
        return sorted(best, key=lambda v: (-best[v], v))

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        return self.dense_ranking(artifact.data, question_text(question))


class BM25Retrieval(_Retrieval):
    """Lexical BM25 (Okapi) retrieval of whole visits (kit extra)."""

    name = "bm25"
    defaults = {"k": 5}

    bm25_ranking = staticmethod(bm25_ranking)

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        terms = visit_terms(turns)
        return {"visits": [v for v, _ in terms], "terms": [t for _, t in terms]}

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        return bm25_ranking(artifact.data, question_text(question))


class HybridRetrieval(DenseRetrieval):
    """BM25 + dense fused by reciprocal-rank fusion (kit extra)."""

    name = "hybrid"
    defaults = {**DenseRetrieval.defaults, "rrf_k": RRF_K}

    def validate_params(self) -> None:
        super().validate_params()
        self._positive_int("rrf_k")

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        data = super().build(subject_id, turns, prep)
        terms = visit_terms(turns)
        data["terms"] = [t for _, t in terms]
        data["term_visits"] = [v for v, _ in terms]
        return data

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        query = question_text(question)
        dense = self.dense_ranking(artifact.data, query)
        lexical = bm25_ranking(
            {"visits": artifact.data["term_visits"], "terms": artifact.data["terms"]}, query
        )
        return rrf([dense, lexical], k=int(self.params["rrf_k"]))
