"""Provider batch jobs (clinlib.llm.batch) through the real openai SDK against BatchServer.

Expected values are worked out by hand from the injected faults: which request ends how, how
many batches the server saw, what is cached, and the batch price (half the live one).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from clinlib.core import config
from clinlib.llm import (
    Backbone,
    BackboneError,
    ChatRequest,
    GenerationParams,
    LLMClient,
    ResponseCache,
    count_tokens,
    load_config,
)
from clinlib.llm import batch as batch_mod
from clinlib.llm.batch import BatchClient, BatchPending
from clinlib.llm.batchfiles import (
    BatchFileError,
    chunk_lines,
    load_entries,
    parse_result_file,
)
from clinlib.llm.batchserver import BatchServer
from clinlib.llm.chat import request_body
from clinlib.llm.response_cache import canonical_json
from clinlib.llm.testserver import FaultServer

P_IN, P_OUT = 2.0, 8.0  # live USD per million tokens; batch: 1.0 and 4.0


def backbone(url: str) -> Backbone:
    return Backbone(name="b", model="gpt-4o-mini", base_url=url, price_input=P_IN,
                    price_output=P_OUT, price_cache_read=0.5)  # fmt: skip


def requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", [{"role": "user", "content": f"question {i}"}],
                        GenerationParams(max_tokens=30)) for i in range(n)]  # fmt: skip


def batch_run(url, tmp_path, reqs, **options):
    async def go():
        async with LLMClient(backbone(url), cache=tmp_path / "cache.sqlite") as client:
            job = BatchClient(client, tmp_path / "batches", poll_interval_s=0.001, **options)
            return await job.complete_many(reqs), job.stats, client.stats

    return asyncio.run(go())


def cached_count(tmp_path: Path) -> int:
    with ResponseCache(tmp_path / "cache.sqlite") as cache:
        return len(cache)


def test_batch_prices_default_to_half_and_can_be_overridden(tmp_path):
    bb = Backbone(name="x", model="m", base_url="http://h/v1", price_input=3.0,
                  price_output=15.0, price_cache_read=0.3)  # fmt: skip
    assert (bb.batch_prices.price_input, bb.batch_prices.price_output) == (1.5, 7.5)
    # 1M input, 0.5M of them cache reads, 0.2M output: (0.5*1.5 + 0.5*0.15 + 0.2*7.5) USD
    assert bb.batch_cost(1_000_000, 200_000, 500_000) == pytest.approx(0.75 + 0.075 + 1.5)
    path = tmp_path / "c.toml"
    path.write_text('[backbones.x]\nbase_url = "http://h/v1"\nmodel = "m"\nprice_input = 3.0\n'
                    "batch_price_input = 2.0\n")  # fmt: skip
    loaded = load_config(path)["x"]
    assert loaded.batch_prices.price_input == 2.0 and loaded.batch_prices.price_output == 0.0
    with pytest.raises(BackboneError, match="batch_price_output must be a number"):
        Backbone(name="x", model="m", base_url="http://h/v1", batch_price_output=-1.0)


def test_batch_line_body_is_the_live_body_and_shares_the_cache(tmp_path):
    reqs = requests(3)
    with FaultServer() as live:  # what the SDK really sends for a live call
        asyncio.run(_live(backbone(live.base_url), reqs[:1], None))
        sent = live.records[0].key
    body = request_body("gpt-4o-mini", reqs[0])
    assert hashlib.sha256(canonical_json(body).encode()).hexdigest() == sent
    with BatchServer() as srv:
        results, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert [r.response for r in results] == [f"echo: question {i}" for i in range(3)]
        line = json.loads(srv.file_bytes["file-0001"].splitlines()[0])
        assert line == {"custom_id": "r0", "method": "POST", "url": "/v1/chat/completions",
                        "body": body}  # fmt: skip
        # A live client on the same endpoint now answers everything from the cache.
        again = asyncio.run(_live(backbone(srv.base_url), reqs, tmp_path / "cache.sqlite"))
        assert srv.n_requests == 0 and all(r.from_cache for r in again)


async def _live(bb, reqs, cache):
    async with LLMClient(bb, cache=cache) as client:
        return await client.complete_many(reqs)


def test_partial_errors_malformed_and_missing_lines(tmp_path):
    faults = {"r1": "error", "r2": "server_error", "r3": "malformed", "r4": "missing"}
    reqs = requests(7)
    with BatchServer(line_faults=faults, polls_to_finish=3) as srv:
        results, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "client_error", "server_error", "bad_response", "batch_missing",
                     None, None]  # fmt: skip
    # output file: r0, r3 (cut in half), r5, r6 -> the malformed one is line 2
    assert "output file file-0002 of batch_0001 line 2 is malformed" in results[3].error
    assert "HTTP 400" in results[1].error and "HTTP 500" in results[2].error
    assert all(r.response is None for r in results if r.error)
    assert stats.polls == 3 and stats.batches_created == 1 and stats.malformed_lines == 1
    ok = results[0]
    n_in = count_tokens(reqs[0].messages, "gpt-4o-mini")
    n_out = count_tokens("echo: question 0", "gpt-4o-mini")
    assert (ok.input_tokens, ok.output_tokens) == (n_in, n_out)
    assert ok.cost_usd == pytest.approx((n_in * 1.0 + n_out * 4.0) / 1e6)  # batch = half
    assert cached_count(tmp_path) == 3  # successes only
    (entry,) = load_entries(tmp_path / "batches")
    assert entry.collected and entry.status == "completed" and entry.batch_id == "batch_0001"


def test_expired_batch_keeps_completed_lines_and_errors_are_resubmitted(tmp_path):
    def expire_first(batch_index, line_index, custom_id):
        return "expired" if batch_index == 0 and custom_id in ("r2", "r3") else None

    reqs = requests(4)
    with BatchServer(line_faults=expire_first) as srv:
        first, _, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert srv.batches["batch_0001"]["status"] == "expired"
        assert [r.error_kind for r in first] == [None, None, "batch_expired", "batch_expired"]
        assert cached_count(tmp_path) == 2
        second, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert srv.n_batches == 2 and srv.lines_run == ["r0", "r1", "r2", "r3"]
    assert [r.from_cache for r in second] == [True, True, False, False]
    assert all(r.error is None for r in second) and stats.lines_submitted == 2


def test_failed_batch_makes_every_request_an_error(tmp_path):
    with BatchServer(fail_batches=1) as srv:
        results, _, _ = batch_run(srv.base_url, tmp_path, requests(2))
    assert {r.error_kind for r in results} == {"batch_failed"}
    assert "injected validation failure (input line 1)" in results[0].error
    assert cached_count(tmp_path) == 0


def test_large_runs_are_split_under_the_limits(tmp_path):
    with BatchServer() as srv:
        results, stats, client_stats = batch_run(srv.base_url, tmp_path, requests(7),
                                                 max_requests=3)  # fmt: skip
        sizes = [len(srv.file_bytes[b["input_file_id"]].splitlines())
                 for b in srv.batches.values()]  # fmt: skip
    assert sizes == [3, 3, 1] and stats.batches_created == 3 and client_stats.api_calls == 7
    assert all(r.error is None for r in results)
    lines = [b"x" * n for n in (4, 4, 4, 9, 1)]
    assert chunk_lines(lines, max_requests=10, max_bytes=9) == [[0, 1], [2], [3], [4]]
    with pytest.raises(BatchFileError, match="request 3 alone is 9 bytes"):
        chunk_lines(lines, max_bytes=8)


def test_identical_prompts_are_sent_once(tmp_path):
    reqs = [ChatRequest(rid, [{"role": "user", "content": "same"}]) for rid in ("a", "b")]
    with BatchServer() as srv:
        results, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert srv.lines_run == ["a"]
    assert [r.request_id for r in results] == ["a", "b"]
    assert results[0].response == results[1].response == "echo: same"


def test_pending_batch_is_collected_on_rerun_not_resubmitted(tmp_path):
    reqs = requests(3)
    with BatchServer(polls_to_finish=4) as srv:
        with pytest.raises(BatchPending, match="rerun the same command"):
            batch_run(srv.base_url, tmp_path, reqs, max_wait_s=0)
        (entry,) = load_entries(tmp_path / "batches")
        assert entry.batch_id == "batch_0001" and not entry.collected
        results, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert srv.n_batches == 1 and stats.batches_resumed == 1
    assert all(r.error is None for r in results)


def test_killed_between_create_and_record_adopts_the_batch(tmp_path, monkeypatch):
    original = BatchClient._record
    calls = []

    def dies_once(self, entry, batch):
        calls.append(batch.id)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the process dies right after batches.create returned
        original(self, entry, batch)

    monkeypatch.setattr(batch_mod.BatchClient, "_record", dies_once)
    with BatchServer() as srv:
        with pytest.raises(KeyboardInterrupt):
            batch_run(srv.base_url, tmp_path, requests(2))
        (entry,) = load_entries(tmp_path / "batches")
        assert entry.input_file_id == "file-0001" and entry.batch_id is None
        results, stats, _ = batch_run(srv.base_url, tmp_path, requests(2))
        assert srv.n_batches == 1 and len(srv.files) == 2  # one input, one output file
    assert stats.batches_created == 0 and stats.batches_resumed == 1
    assert all(r.error is None for r in results)


CHILD = """
import asyncio, sys
from clinlib.llm import Backbone, ChatRequest, GenerationParams, LLMClient
from clinlib.llm.batch import BatchClient
bb = Backbone(name="b", model="gpt-4o-mini", base_url=sys.argv[1])
reqs = [ChatRequest(f"r{i}", [{"role": "user", "content": f"question {i}"}],
                    GenerationParams(max_tokens=30)) for i in range(3)]
async def go():
    async with LLMClient(bb) as client:
        await BatchClient(client, sys.argv[2], poll_interval_s=0.02).complete_many(reqs)
asyncio.run(go())
"""


def test_sigkill_while_polling_then_rerun_collects_the_same_batch(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(config.REPO_ROOT)}
    state = tmp_path / "batches"
    with BatchServer(polls_to_finish=10_000) as srv:
        child = subprocess.Popen([sys.executable, "-c", CHILD, srv.base_url, str(state)],
                                 env=env)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and srv.batch_polls.get("batch_0001", 0) < 2:
            assert child.poll() is None, "the child ended before it was killed"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        (entry,) = load_entries(state)
        assert entry.batch_id == "batch_0001"  # recorded before the first poll
        srv.polls_to_finish = srv.batch_polls["batch_0001"] + 1
        results, stats, _ = batch_run(srv.base_url, tmp_path, requests(3))
        assert srv.n_batches == 1 and stats.batches_resumed == 1
    assert [r.response for r in results] == [f"echo: question {i}" for i in range(3)]


def test_result_file_diagnostics_name_the_line():
    text = '{"custom_id": "a", "response": {"status_code": 200, "body": {}}, "error": null}\n'
    text += '{"custom_id": "b", "resp\n\n["not", "a", "line"]\n'
    parsed, problems = parse_result_file(text, "output file f of b1")
    assert [p.custom_id for p in parsed] == ["a"]
    assert [(cid, msg.split(" is ")[0]) for cid, msg in problems] == [
        ("b", "output file f of b1 line 2"), (None, "output file f of b1 line 4")]  # fmt: skip


def test_cancelled_batch_is_reported_not_resubmitted_silently(tmp_path):
    reqs = requests(2)
    with BatchServer(polls_to_finish=5) as srv:
        with pytest.raises(BatchPending):
            batch_run(srv.base_url, tmp_path, reqs, max_wait_s=0)
        sdk = openai.OpenAI(api_key="no-key", base_url=srv.base_url, max_retries=0)
        assert sdk.batches.cancel("batch_0001").status == "cancelled"
        results, stats, _ = batch_run(srv.base_url, tmp_path, reqs)
        assert srv.n_batches == 1 and stats.batches_resumed == 1
    assert {r.error_kind for r in results} == {"batch_cancelled"}
    assert "(status cancelled)" in results[0].error


def test_endpoint_without_a_batch_api_is_one_clear_error(tmp_path):
    with FaultServer() as srv:  # chat completions only, like OpenRouter
        with pytest.raises(batch_mod.BatchJobError, match="HTTP 404.*batch API"):
            batch_run(srv.base_url, tmp_path, requests(1))


def test_a_retried_create_whose_reply_was_lost_makes_no_second_batch(tmp_path):
    with BatchServer(lost_creates=1) as srv:
        results, stats, _ = batch_run(srv.base_url, tmp_path, requests(2))
        assert srv.n_batches == 1 and stats.batches_created == 1
    assert all(r.error is None for r in results)


def test_a_batch_the_restarted_server_forgot_names_a_remedy_that_works(tmp_path):
    """After a batch server restart, polling the recorded batch answers 404: rerunning cannot
    collect it, so the line says to drop --batch or forget the job; forgetting it (deleting
    its record) and rerunning submits it again and collects it."""
    reqs = requests(2)
    with BatchServer(polls_to_finish=4) as srv:
        with pytest.raises(BatchPending):
            batch_run(srv.base_url, tmp_path, reqs, max_wait_s=0)
        port = srv.port
    with BatchServer(port=port) as srv:  # the same endpoint, a fresh server: no batch known
        with pytest.raises(batch_mod.BatchJobError) as err:
            batch_run(srv.base_url, tmp_path, reqs)
        line = str(err.value)
        assert "polling batch_0001 failed" in line and "\n" not in line
        assert "rerun without --batch to answer live, or forget the job" in line
        assert str(tmp_path / "batches") in line
        for record in (tmp_path / "batches").glob("*.json"):  # forget the job
            record.unlink()
        results, _, _ = batch_run(srv.base_url, tmp_path, reqs)
    assert [r.response for r in results] == ["echo: question 0", "echo: question 1"]
