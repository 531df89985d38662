"""Encoder comparison: how long an encoder takes to embed every visit, and how often dense
retrieval with it ranks the question's anchor visit in the top k (paper Appendix C.2 hit
rates; the static vs transformer MiniLM table of docs/benchmarks.md).

Each encoder gets its own fresh embedding store (so the encode is cold and timed, model load
included) and its own dense-retrieval artifacts built in memory; hit@k comes from
:func:`clinlib.strategies.footprints.retrieval_hits`, the kit's one implementation.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from clinlib.strategies.construction import split_dialogues
from clinlib.strategies.embed import (
    DEFAULT_EMBEDDING_MODEL,
    TRANSFORMER_MODEL,
    Embedder,
    forget_models,
    model_slug,
)
from clinlib.strategies.footprints import HIT_KS, hit_rates, retrieval_hits
from clinlib.strategies.retrieval import DenseRetrieval, visit_chunks

ENCODERS: tuple[str, ...] = (DEFAULT_EMBEDDING_MODEL, TRANSFORMER_MODEL)
COMPARISON_COLUMNS: tuple[str, ...] = (
    "encoder",
    "patients",
    "visits",
    "load_s",
    "encode_s",
    "visits_per_s",
    "questions",
    *(f"hit@{k}" for k in HIT_KS),
)


def time_visit_encoding(
    groups: Mapping[int, pd.DataFrame], model: str, store_dir: str | Path
) -> dict[str, float]:
    """Embed every visit chunk of ``groups`` with a fresh embedder into ``store_dir``.

    Returns:
        visits (distinct texts encoded), load_s (model load), encode_s (encoding only).
    """
    forget_models()  # cold: the model load is timed too
    emb = Embedder(model, store_dir)
    texts = [t for turns in groups.values() for _, t in visit_chunks(turns)]
    t0 = time.perf_counter()
    emb.model  # noqa: B018 - load outside the encode timing
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    n = emb.ensure(texts)
    encode_s = time.perf_counter() - t1
    emb.store.close()
    return {"visits": n, "load_s": load_s, "encode_s": encode_s}


def dense_hits(
    questions: pd.DataFrame,
    groups: Mapping[int, pd.DataFrame],
    model: str,
    store_dir: str | Path,
    ks: Iterable[int] = HIT_KS,
) -> pd.DataFrame:
    """Per-question anchor-visit hits of dense-retrieval with ``model`` over the questions
    whose patients are all in ``groups`` (artifacts built in memory, embeddings via
    ``store_dir``)."""
    strat = DenseRetrieval(embedding_model=model, embedding_dir=str(store_dir))
    jobs = sorted(groups.items())
    arts = dict(zip([s for s, _ in jobs], strat.construct_many(jobs), strict=True))
    keep = questions["subject_ids"].apply(lambda ids: all(int(s) in groups for s in ids))
    qs = questions[keep.to_numpy()]
    strat.warm_queries(qs.to_dict("records"))
    return retrieval_hits(qs, strat, arts, groups, ks)


def compare_encoders(
    questions: pd.DataFrame,
    dialogues: pd.DataFrame,
    store_root: str | Path,
    encoders: Sequence[str] = ENCODERS,
    subjects: Mapping[str, Sequence[int] | None] | None = None,
    ks: Iterable[int] = HIT_KS,
) -> pd.DataFrame:
    """One row per encoder (see :data:`COMPARISON_COLUMNS`): cold encode of every visit of
    its patients and overall dense hit@k on their retrieval-eligible questions.

    Args:
        questions: questions.parquet rows.
        dialogues: dialogues.parquet rows.
        store_root: scratch folder; each encoder writes ``<store_root>/<model slug>/``
            (should not exist yet, or the encode is not cold).
        encoders: model names (default static, then transformer MiniLM).
        subjects: encoder -> patients to use (None or absent: every patient), e.g. a
            50-patient slice for the slow transformer.
        ks: the k of hit@k.
    """
    ks = tuple(ks)
    rows = []
    for model in encoders:
        chosen = (subjects or {}).get(model)
        groups = split_dialogues(dialogues, chosen)
        store = Path(store_root) / model_slug(model)
        timing = time_visit_encoding(groups, model, store)
        hits = dense_hits(questions, groups, model, store, ks)
        overall = hit_rates(hits).set_index("task")
        row = {
            "encoder": model,
            "patients": len(groups),
            "visits": int(sum(t["visit_idx"].nunique() for t in groups.values())),
            "load_s": round(timing["load_s"], 2),
            "encode_s": round(timing["encode_s"], 2),
            "visits_per_s": round(timing["visits"] / max(timing["encode_s"], 1e-9), 1),
            "questions": int(len(hits)),
        }
        for k in ks:
            row[f"hit@{k}"] = (
                float(overall.loc["overall", f"hit@{k}"]) if len(hits) else float("nan")
            )
        rows.append(row)
    cols = [c for c in COMPARISON_COLUMNS if not c.startswith("hit@")] + [f"hit@{k}" for k in ks]
    return pd.DataFrame(rows, columns=cols)
