"""Anthropic Message Batches through the batch seam (clinlib.llm.anthropic_batch) against the
local fake (clinlib.llm.anthropic_fake): the translation worked out by hand, then create /
poll / results end to end with per-line faults, lost and rate-limited creates, and resume.
Anthropic's real API is not called here."""

from __future__ import annotations

import asyncio
import json

import pytest

from clinlib.llm import Backbone, ChatRequest, GenerationParams, LLMClient, count_tokens
from clinlib.llm.anthropic_batch import (
    AnthropicBatchClient,
    anthropic_params,
    batch_status,
    completion_of,
    make_batch_client,
    openai_line,
)
from clinlib.llm.anthropic_fake import AnthropicBatchServer
from clinlib.llm.batch import BatchClient, BatchJobError, BatchPending
from clinlib.llm.batchfiles import load_entries
from tests.eval.test_runner import dialogues, profile  # noqa: F401 - the tiny profile fixtures

KEY = "sk-ant-test-0123456789abcdef"


def backbone(url: str) -> Backbone:
    return Backbone(name="claude", model="claude-haiku-4.5", base_url=url, price_input=1.0,
                    price_output=5.0, price_cache_read=0.1, api_key_env="ANTHROPIC_TEST_KEY")  # fmt: skip


def requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", [{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": f"question {i}"}],
                        GenerationParams(max_tokens=30, seed=7)) for i in range(n)]  # fmt: skip


def run(url, tmp_path, reqs, **options):
    async def go():
        async with LLMClient(backbone(url), cache=tmp_path / "cache.sqlite") as client:
            job = AnthropicBatchClient(client, tmp_path / "batches", poll_interval_s=0.001,
                                       **options)  # fmt: skip
            return await job.complete_many(reqs), job.stats

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", KEY)


# --- translation, by hand ----------------------------------------------------------------------
def test_params_move_system_and_stop_and_drop_what_anthropic_does_not_take():
    body = {"model": "m", "max_tokens": 60, "temperature": 0.0, "seed": 3, "stop": ["\n\n"],
            "messages": [{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
                         {"role": "user", "content": "Q"}]}  # fmt: skip
    assert anthropic_params(body) == {
        "model": "m", "max_tokens": 60, "temperature": 0.0, "system": "S1\n\nS2",
        "stop_sequences": ["\n\n"], "messages": [{"role": "user", "content": "Q"}]}  # fmt: skip


def test_a_message_becomes_a_completion_with_openai_token_counts():
    msg = {"id": "msg_1", "model": "m", "stop_reason": "max_tokens",
           "content": [{"type": "text", "text": "A"}, {"type": "tool_use"}, {"type": "text", "text": "B"}],
           "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                     "cache_creation_input_tokens": 5, "output_tokens": 4}}  # fmt: skip
    out = completion_of(msg)
    assert out["choices"][0]["message"]["content"] == "AB"
    assert out["choices"][0]["finish_reason"] == "length"
    # prompt = 10 uncached + 90 read + 5 written; cached = the 90 read
    assert out["usage"] == {"prompt_tokens": 105, "completion_tokens": 4, "total_tokens": 109,
                            "prompt_tokens_details": {"cached_tokens": 90}}  # fmt: skip


def test_result_lines_and_statuses_read_as_openai_batch_lines():
    err = {"custom_id": "a", "result": {"type": "errored", "error": {"type": "error", "error": {
        "type": "overloaded_error", "message": "busy"}}}}  # fmt: skip
    assert json.loads(openai_line(json.dumps(err)))["response"]["status_code"] == 529
    exp = json.loads(openai_line(json.dumps({"custom_id": "b", "result": {"type": "expired"}})))
    assert exp["error"]["code"] == "batch_expired"
    assert openai_line('{"custom_id": "c", "res') == '{"custom_id": "c", "res'  # left to the parser
    ended = {"id": "x", "processing_status": "ended", "results_url": "u",
             "request_counts": {"succeeded": 3, "errored": 1, "expired": 1, "canceled": 0}}  # fmt: skip
    st = batch_status(ended)
    assert (st.status, st.output_file_id, st.request_counts.completed, st.request_counts.failed) == (
        "expired", "u", 3, 2)  # fmt: skip
    running = batch_status({"id": "x", "processing_status": "in_progress", "request_counts": {}})
    assert (running.status, running.output_file_id) == ("in_progress", None)


def test_the_batch_api_is_chosen_by_host_or_by_option():
    async def pick(url, api=None):
        async with LLMClient(backbone(url)) as client:
            return type(make_batch_client(client, "/tmp/unused", api=api))

    assert asyncio.run(pick("https://api.anthropic.com/v1")) is AnthropicBatchClient
    assert asyncio.run(pick("https://api.openai.com/v1")) is BatchClient
    assert asyncio.run(pick("http://127.0.0.1:9/v1", "anthropic")) is AnthropicBatchClient
    with pytest.raises(BatchJobError, match="batch api 'bedrock' unknown"):
        asyncio.run(pick("http://127.0.0.1:9/v1", "bedrock"))


# --- end to end against the fake -------------------------------------------------------------
def test_batch_answers_equal_live_ones_with_line_faults(tmp_path):
    faults = {"r1": "errored", "r2": "overloaded", "r3": "expired", "r4": "malformed"}
    reqs = requests(6)
    with AnthropicBatchServer(line_faults=faults, polls_to_finish=3) as srv:
        results, stats = run(srv.base_url, tmp_path, reqs)
        assert set(srv.api_keys) == {KEY}
        sent = srv.requests_of["msgbatch_0001"][0]["params"]
        assert sent["system"] == "Answer briefly." and "seed" not in sent
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "client_error", "server_error", "batch_expired", "bad_response", None]
    assert [r.response for r in results if r.error is None] == ["echo: question 0",
                                                                "echo: question 5"]  # fmt: skip
    assert stats.polls == 3 and stats.batches_created == 1 and stats.malformed_lines == 1
    ok = results[0]
    n_in = count_tokens(reqs[0].messages, "claude-haiku-4.5")
    n_out = count_tokens("echo: question 0", "claude-haiku-4.5")
    assert (ok.input_tokens, ok.output_tokens) == (n_in, n_out)
    assert ok.cost_usd == pytest.approx((n_in * 0.5 + n_out * 2.5) / 1e6)  # half the live price
    (entry,) = load_entries(tmp_path / "batches")
    assert entry.collected and entry.status == "expired" and entry.batch_id == "msgbatch_0001"


async def _live(url, reqs, cache):
    async with LLMClient(backbone(url), cache=cache) as client:
        return await client.complete_many(reqs)


def test_a_batch_answer_is_the_live_answer_and_shares_its_cache(tmp_path):
    reqs = requests(2)
    with AnthropicBatchServer() as srv:
        fresh = asyncio.run(_live(srv.base_url, reqs, None))  # live, no cache
        assert srv.n_requests == 2
        srv.reset_stats()
        results, _ = run(srv.base_url, tmp_path, reqs)
        assert [r.response for r in results] == [r.response for r in fresh]
        assert [r.input_tokens for r in results] == [r.input_tokens for r in fresh]
        again = asyncio.run(_live(srv.base_url, reqs, tmp_path / "cache.sqlite"))
        assert srv.n_requests == 0 and all(r.from_cache for r in again)


def test_a_rate_limited_create_is_retried_a_lost_one_is_not(tmp_path):
    with AnthropicBatchServer(create_faults=[429]) as srv:
        results, stats = run(srv.base_url, tmp_path / "a", requests(2))
        assert len(srv.batches) == 1 and all(r.error is None for r in results)
    with AnthropicBatchServer(create_faults=[500]) as srv:
        with pytest.raises(BatchJobError) as err:
            run(srv.base_url, tmp_path / "b", requests(2))
        assert len(srv.batches) == 1  # it was made: the kit does not make a second one
    line = str(err.value)
    assert "may have reached the provider (server_error: HTTP 500" in line
    assert "check the provider's console for a batch of 2 requests" in line and "\n" not in line
    assert KEY not in line


def test_a_pending_batch_is_collected_on_rerun_not_resubmitted(tmp_path):
    with AnthropicBatchServer(polls_to_finish=4) as srv:
        with pytest.raises(BatchPending, match="rerun the same command to collect them"):
            run(srv.base_url, tmp_path, requests(3), max_wait_s=0)
        results, stats = run(srv.base_url, tmp_path, requests(3))
        assert len(srv.batches) == 1 and stats.batches_resumed == 1
        assert [r.response for r in results] == [f"echo: question {i}" for i in range(3)]


def test_the_harness_runs_in_anthropic_batch_mode(profile, tmp_path):  # noqa: F811
    """run(mode="batch", batch_options={"api": "anthropic"}) goes through Message Batches:
    the same rows as the OpenAI batch path (test_batch_mode), priced at half."""
    from clinlib.eval.harness import runner
    from clinlib.llm import get_backbone
    from tests.eval.test_runner import FAST, answer, write_config

    cid = "T1-q03|no-context-blind|fault|none|post"
    with AnthropicBatchServer(answer=answer, line_faults={cid: "overloaded"}) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                   runner.RunOptions(config=cfg, progress=False, mode="batch", client_options=FAST, batch_options={"api": "anthropic", "poll_interval_s": 0.001}))  # fmt: skip
        assert len(srv.batches) == 1 and srv.n_requests == 0  # no live call at all
    preds = runner.load_predictions(profile)
    assert len(preds) == 12 and preds["error"].notna().sum() == 1
    failed = preds[preds["error"].notna()].iloc[0]
    assert failed["qid"] == "T1-q03" and "HTTP 529" in failed["error"]
    preds = preds[preds["error"].isna()]
    # Q0,2,4,6,8 and Q10 right; Q11 wrong strictly (prose), right leniently (test_batch_mode)
    assert preds["correct"].sum() == 6 and preds["correct_lenient"].sum() == 7
    bb = get_backbone("fault", cfg)
    expected = [bb.batch_cost(i, o, c) for i, o, c in
                preds[["input_tokens", "output_tokens", "cached_tokens"]].itertuples(index=False)]  # fmt: skip
    assert preds["cost_usd"].tolist() == pytest.approx(expected)
