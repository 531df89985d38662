"""Table 4 measured (clinlib.analysis.appendix.cost; paper Appendix D, issue 27) against the
local test server (clinlib.llm.testserver: real HTTP, the openai SDK, realistic usage with a
simulated prompt-prefix cache), and construction cost recorded by a real LLM prep build."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.analysis.appendix import cost as co
from clinlib.analysis.appendix import diagnostics as dg
from clinlib.analysis.metrics import MetricsInputError
from clinlib.llm.chat import ChatRequest
from clinlib.llm.client import run_batch
from clinlib.llm.testserver import FaultServer
from clinlib.llm.tokens import count_tokens
from clinlib.llm.types import Backbone, GenerationParams
from clinlib.strategies.base import Artifact
from clinlib.strategies.build_cost import build_cost_rows, usage_by_subject
from clinlib.strategies.construction import ConstructionCache, build_strategy
from clinlib.strategies.prep import LLMPrep
from clinlib.strategies.registry import get_strategy
from tests.strategy_fixtures import dialogue, events_7001

MODEL = "gpt-4o-mini"
FAST = dict(timeout_s=2.0, backoff_base_s=0.01, backoff_max_s=0.05, seed=0)
# USD per million tokens: one input token = 1 cent, a cache read half that, an output 2 cents.
PRICES = dict(price_input=10_000.0, price_cache_read=5_000.0, price_output=20_000.0)
BLOCK = 64  # the server caches whole 64-token blocks of a seen prefix
SYSTEM = "You answer questions about one patient's record. " * 16


def _preds(results, strategy="full-context"):
    return pd.DataFrame([{
        "qid": r.request_id, "task": "T1", "strategy": strategy, "backbone": "test",
        "response": r.response, "error": r.error, "finish_reason": r.finish_reason,
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
        "cached_tokens": r.cached_tokens, "cost_usd": r.cost_usd, "latency_s": r.latency_s,
    } for r in results])  # fmt: skip


def test_measured_cost_against_the_test_server_to_the_cent():
    users = ["What was the creatinine on the first visit?", "Any potassium?", "Glucose trend?",
             "List every medication started, with its dose and the date of each change."]  # fmt: skip
    msgs = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}] for u in users]
    system_tokens = count_tokens(msgs[0][:1], MODEL) - 3  # the prefix, without reply priming
    assert 2 * BLOCK <= system_tokens < 3 * BLOCK  # so each repeat reads exactly 2 blocks
    reqs = [ChatRequest(f"q{i}", m, GenerationParams(max_tokens=6)) for i, m in enumerate(msgs)]
    with FaultServer(cache_min_tokens=0, cache_block=BLOCK) as srv:
        bb = Backbone(name="test", model=MODEL, base_url=srv.base_url, max_concurrency=1, **PRICES)
        first = run_batch(bb, reqs[:1], cache=None, **FAST)  # seen first: no cache hit
        rest = run_batch(bb, reqs[1:], cache=None, **FAST)  # each reuses the system prefix
    preds = _preds(first + rest)
    inputs = [count_tokens(m, MODEL) for m in msgs]
    outputs = preds["output_tokens"].tolist()
    cached = 3 * 2 * BLOCK
    row = co.measured_cost(preds).iloc[0]
    assert row["input_tokens"] == sum(inputs) and row["cached_tokens"] == cached
    assert row["cache_hit_rate"] == pytest.approx(cached / sum(inputs))
    # By hand: uncached input 1 cent, cache reads 0.5 cent, output 2 cents per token.
    expected = (sum(inputs) - cached) * 0.01 + cached * 0.005 + sum(outputs) * 0.02
    assert round(row["cost_usd"], 2) == round(expected, 2)
    assert row["cost_per_question"] == pytest.approx(expected / 4)
    lat = preds["latency_s"]
    assert row["latency_p50_s"] == pytest.approx(lat.median())
    assert row["latency_p95_s"] == pytest.approx(lat.quantile(0.95))
    # "echo: " + the question is longer than 6 tokens except for the two short questions.
    trunc = dg.truncation_rate(preds).iloc[0]
    long_ = [count_tokens(f"echo: {u}", MODEL) > 6 for u in users]
    assert trunc["n_truncated"] == sum(long_) and outputs == [
        6 if lg else count_tokens(f"echo: {u}", MODEL) for lg, u in zip(long_, users, strict=True)
    ]


def test_cost_beside_puts_sources_in_table4_units():
    measured = pd.DataFrame({"strategy": ["s"], "backbone": ["b"], "cost_usd": [2.0],
                             "cost_per_question": [0.5], "input_tokens": [3_000_000],
                             "output_tokens": [4_000], "cache_hit_rate": [0.25]})  # fmt: skip
    est = pd.DataFrame({"strategy": ["s", "s"], "backbone": ["b", "b"], "questions": [2, 2],
                        "input_tokens": [1e6, 1e6], "output_tokens_typical": [10, 30],
                        "cost_usd_typical": [1.0, 3.0]})  # fmt: skip
    t4 = pd.DataFrame({"strategy": ["s", "s", "s", "s", "total"],
                       "backbone": ["b", "b", "b", "b", "total"],
                       "metric": ["input_tokens", "cost_usd", "cost_per_question",
                                  "cache_hit_rate", "input_tokens"],
                       "value": [5.0, 0.19, 0.0, 2.2, 9.0]})  # fmt: skip
    out = co.cost_beside(measured, est, t4).set_index(["source", "metric"])["value"]
    assert out[("measured", "input_tokens")] == 3.0  # millions
    assert out[("measured", "output_tokens")] == 4.0  # thousands
    assert out[("measured", "cache_hit_rate")] == 25.0  # percent
    assert (
        out[("estimate", "input_tokens")] == 2.0 and out[("estimate", "cost_per_question")] == 1.0
    )
    assert out[("paper", "input_tokens")] == 5.0 and out[("paper", "cache_hit_rate")] == 2.2
    # the printed "$/q" 0.0000 is replaced by cost / 6,271 (Table 4 rounds cheap cells to zero)
    assert out[("paper", "cost_per_question")] == pytest.approx(0.19 / 6271)
    assert len(out.loc["paper"]) == 4  # no total row


def test_pareto_views_add_construction_cost():
    cells = pd.DataFrame({"strategy": ["full", "mem", "blind"], "backbone": "b",
                          "cost_usd": [10.0, 2.0, 1.0], "pooled": [0.9, 0.5, 0.2]})  # fmt: skip
    cons = pd.DataFrame({"strategy": ["mem"], "cost_usd": [20.0]})
    out = co.pareto_views(cells, cons).set_index(["view", "strategy"])
    assert out.loc[("answer only", "mem"), "pareto"]
    assert out.loc[("answer + construction", "mem"), "total_cost"] == 22.0
    assert not out.loc[("answer + construction", "mem"), "pareto"]  # full is cheaper and better
    assert out.loc[("answer + construction", "blind"), "total_cost"] == 1.0
    with pytest.raises(MetricsInputError, match="unknown"):
        co.pareto_views(cells, pd.DataFrame({"strategy": ["mem"], "cost_usd": [float("nan")]}))


def test_usage_by_subject_sums_per_patient():
    class R:
        def __init__(self, i, o, c, usd):
            self.input_tokens, self.output_tokens, self.cached_tokens, self.cost_usd = i, o, c, usd

    sink = [("mem0|7|v0|extract", R(10, 2, 0, 0.5)), ("mem0|7|v1|extract", R(5, 1, 4, 0.25)),
            ("mem0|8|v0|extract", R(3, 3, 0, None))]  # fmt: skip
    out = usage_by_subject(sink)
    assert out[7] == {"requests": 2, "input_tokens": 15, "output_tokens": 3, "cached_tokens": 4,
                      "cost_usd": 0.75}  # fmt: skip
    assert pd.isna(out[8]["cost_usd"])  # an unknown price is not a low one


def test_llm_prep_construction_records_tokens_and_seconds(tmp_path):
    seen = []
    summary = "Creatinine rose from 1.3 to 1.7 mg/dL; metformin then lisinopril."

    def answer(messages):
        seen.append(list(messages))
        return summary

    turns = dialogue(events_7001())
    strat = get_strategy("llm-summary")
    with FaultServer(answer=answer, cache_min_tokens=10**9) as srv:
        bb = Backbone(name="test", model=MODEL, base_url=srv.base_url, **PRICES)
        prep = LLMPrep(name="test", model_id="test:gpt-4o-mini", backbone=bb, cache=None)
        cache = ConstructionCache(tmp_path)
        stats = build_strategy(strat, {7001: turns}, prep, cache)
    assert stats["built"] == 1 and len(seen) == srv.n_requests >= 1
    [path] = list(tmp_path.rglob("*.json"))
    art = Artifact.from_dict(json.loads(path.read_text()))  # as written to the cache
    usage = art.prep_usage
    n_in = sum(count_tokens(m, MODEL) for m in seen)
    n_out = len(seen) * count_tokens(summary, MODEL)
    assert usage["requests"] == len(seen)
    assert usage["input_tokens"] == n_in and usage["output_tokens"] == n_out
    assert usage["cost_usd"] == pytest.approx(n_in * 0.01 + n_out * 0.02)
    assert art.build_seconds > 0
    row = build_cost_rows([art]).iloc[0]
    assert row["prep_input_tokens"] == n_in and row["prep_model"] == art.prep_model


def test_rule_based_artifacts_report_zero_prep_usage():
    art = Artifact("mem0", 1, {}, "rule-based", "h", {}, build_seconds=0.5)
    rows = co.construction_cost(build_cost_rows([art, Artifact("mem0", 2, {}, "rule-based", "h",
                                                                {}, build_seconds=0.25)]))  # fmt: skip
    r = rows.iloc[0]
    assert (r["n_patients"], r["build_seconds"], r["prep_input_tokens"]) == (2, 0.75, 0.0)


def test_get_or_build_meters_an_llm_prep_too(tmp_path):
    """The single-patient path (load_artifacts -> ConstructionCache.get_or_build) records the
    same usage as the batch build."""
    turns = dialogue(events_7001())
    strat = get_strategy("llm-summary")
    with FaultServer(answer=lambda m: "A short summary.", cache_min_tokens=10**9) as srv:
        bb = Backbone(name="test", model=MODEL, base_url=srv.base_url, **PRICES)
        prep = LLMPrep(name="test", model_id="test:gpt-4o-mini", backbone=bb, cache=None)
        art = ConstructionCache(tmp_path).get_or_build(strat, 7001, turns, prep)
        n = srv.n_requests
    assert n >= 1 and art.prep_usage["requests"] == n
    assert art.prep_usage["output_tokens"] == n * count_tokens("A short summary.", MODEL)
    assert prep.usage is None  # the caller's prep model is not mutated


def test_estimated_prep_cost_by_hand():
    rows = pd.DataFrame(
        {
            "strategy": ["mem0", "mem0", "a-mem"],
            "subject_id": [1, 2, 1],
            "dialogue_tokens": [1000, 3000, 500],
            "artifact_tokens": [100, 200, 50],
        }
    )
    bb = Backbone(
        name="prep",
        model=MODEL,
        base_url="http://127.0.0.1:1/v1",
        price_input=0.27,
        price_output=1.10,
    )
    out = co.estimated_prep_cost(rows, bb).set_index("strategy")
    # mem0: 4,000 in x $0.27/M + 300 out x $1.10/M; a-mem: 500 x 0.27 + 50 x 1.10 (per M)
    assert out.loc["mem0", "cost_usd"] == pytest.approx(0.00108 + 0.00033)
    assert out.loc["a-mem", "cost_usd"] == pytest.approx(0.000135 + 0.000055)
    assert out.loc["mem0", ["n_patients", "prep_input_tokens", "prep_output_tokens"]].tolist() == [
        2, 4000, 300]  # fmt: skip
    assert set(out["prep_model"]) == {"prep"}
    # the text a prep model writes, not the artifact's bookkeeping
    data = {"memories": [{"id": "m1", "text": "a"}], "token_model": "x", "summary": "s"}
    assert co._texts(data) == ["a", "s"]
    with pytest.raises(MetricsInputError, match="negative"):
        co.estimated_prep_cost(rows.assign(artifact_tokens=-1), bb)
    with pytest.raises(MetricsInputError, match="dialogue_tokens"):
        co.estimated_prep_cost(rows.drop(columns="dialogue_tokens"), bb)


def test_prep_estimate_is_a_lower_bound_of_a_real_llm_prep_build(tmp_path, monkeypatch):
    """The estimate (dialogue once in, artifact once out) never exceeds what an LLM prep build
    of llm-summary records from its endpoint; strategies without a prep model are left out."""
    turns = dialogue(events_7001())
    with FaultServer(answer=lambda m: "Creatinine rose; metformin started.",
                     cache_min_tokens=10**9) as srv:  # fmt: skip
        bb = Backbone(name="test", model=MODEL, base_url=srv.base_url, **PRICES)
        prep = LLMPrep(name="test", model_id="test:gpt-4o-mini", backbone=bb, cache=None)
        art = ConstructionCache(tmp_path).get_or_build(get_strategy("llm-summary"), 7001, turns,
                                                       prep)  # fmt: skip
    monkeypatch.setattr(co, "load", lambda name, profile: turns)
    monkeypatch.setattr(co, "load_artifacts", lambda name, profile, prep: {7001: art})
    rows = co.prep_token_rows("quick", ["full-context", "llm-summary"], MODEL)
    assert rows["strategy"].tolist() == ["llm-summary"]
    est = co.estimated_prep_cost(rows, bb).iloc[0]
    used = art.prep_usage
    assert 0 < est["prep_input_tokens"] <= used["input_tokens"]
    assert 0 < est["prep_output_tokens"] <= used["output_tokens"]
    assert 0 < est["cost_usd"] <= used["cost_usd"]
    with pytest.raises(MetricsInputError, match="prep model"):
        co.prep_token_rows("quick", ["full-context"], MODEL)
