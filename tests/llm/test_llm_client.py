"""The resilient client against the fault-injecting server over real loopback HTTP.

clinlib.llm.client + clinlib.llm.testserver (paper §4, Appendices D-E).
Latencies, timeouts and backoffs are small so the whole file runs in seconds.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from clinlib.llm import tokens
from clinlib.llm.chat import RESULT_COLUMNS, ChatRequest, results_frame
from clinlib.llm.client import LLMClient, run_batch
from clinlib.llm.faults import FAULT_KINDS, FaultConfigError
from clinlib.llm.response_cache import ResponseCache
from clinlib.llm.retry import http_failure_kind
from clinlib.llm.testserver import FaultServer
from clinlib.llm.types import (
    Backbone,
    EgressRefusedError,
    GenerationParams,
    InvalidRequestError,
    MissingAPIKeyError,
    OfflineReply,
)

MODEL = "gpt-4o-mini"
# Fast retry policy for tests: tiny backoff. The timeout only bounds a hang: no loaded machine
# makes a loopback answer take 30 s, so a healthy request never times out. A test whose hang
# must time out sets its own (and no healthy request of it depends on that one).
FAST = dict(timeout_s=30.0, backoff_base_s=0.01, backoff_max_s=0.05, seed=0)
# A hang followed by a healthy retry: the client waits this long for the hang, and the healthy
# retry has as long to answer (a loopback echo; seconds of slack on a loaded 2-core machine).
HANG_THEN_OK_S = 5.0


def backbone(srv, **kw):
    kw.setdefault("max_concurrency", 8)
    return Backbone(name="test", model=MODEL, base_url=srv.base_url, **kw)


def req(i, text=None, **params):
    content = text if text is not None else f"question {i}"
    return ChatRequest(f"r{i}", [{"role": "user", "content": content}], GenerationParams(**params))


# -- every fault kind ---------------------------------------------------------------------
RETRYABLE = [k for k in FAULT_KINDS if k not in ("empty", "401", "overflow")]
EXPECTED_KIND = {
    "429": "rate_limit",
    "500": "server_error",
    "503": "server_error",
    "hang": "timeout",
    "drop": "connection",
    "disconnect": "connection",
    "truncated": "bad_response",
}


@pytest.mark.parametrize("fault", RETRYABLE)
def test_each_fault_is_retried(fault):
    # Only "hang" waits for the client's timeout; every other fault answers at once.
    policy = {**FAST, "timeout_s": HANG_THEN_OK_S} if fault == "hang" else FAST
    with FaultServer(script=[fault], retry_after_s=0.05) as srv:
        [res] = run_batch(backbone(srv), [req(0)], **policy)
        assert res.ok, res.error
        assert res.response == "echo: question 0"
        assert res.attempts == 2 and srv.n_requests == 2
        assert [r.fault for r in srv.records] == [fault, None]
        assert srv.records[1].attempt == 1  # the same payload, asked again


def test_a_context_length_refusal_is_context_overflow_and_not_retried():
    """A 400 saying the prompt does not fit is not a transport fault: asking again would get
    the same answer, so it is recorded at once as context_overflow (OpenAI's wording here;
    the llama.cpp / vLLM / Anthropic wordings are matched in classify_failure's pattern)."""
    with FaultServer(script=["overflow"]) as srv:
        [res] = run_batch(backbone(srv), [req(0)], **FAST)
        assert (res.error_kind, res.attempts, srv.n_requests) == ("context_overflow", 1, 1)
        assert "maximum context length is" in res.error
    for text in ("Requested tokens (9120) exceed context window of 8192",
                 "the request exceeds the available context size, try increasing it",
                 "prompt is too long: 210000 tokens > 200000 maximum",
                 "This model's maximum model length is 4096 tokens"):  # fmt: skip
        assert http_failure_kind(400, text) == "context_overflow", text
    assert http_failure_kind(400, "Invalid value for temperature") == "client_error"
    assert http_failure_kind(404, "context window") == "client_error"  # not a 400 / 413


@pytest.mark.parametrize("fault", RETRYABLE)
def test_each_fault_is_recorded_when_retries_run_out(fault):
    # Every attempt fails here. Only a "hang" waits for the client's timeout, so only it gets
    # a short one (it cannot make a hang look like anything but a timeout); every other fault
    # answers at once and gets a timeout no loaded machine reaches, so a slow 429 is never
    # misread as a timeout.
    fast = {**FAST, "timeout_s": 0.3 if fault == "hang" else 30.0}
    with FaultServer(script=lambda i, payload, attempt: fault, retry_after_s=0.05) as srv:
        [res] = run_batch(backbone(srv), [req(0)], max_retries=2, **fast)
        assert not res.ok and res.response is None
        assert res.error_kind == EXPECTED_KIND[fault]
        assert res.attempts == 3 and srv.n_requests == 3
        assert res.error.startswith(f"{EXPECTED_KIND[fault]} after 3 attempt(s): ")
        if fault in ("500", "503"):
            assert f"HTTP {fault}" in res.error and f"injected {fault}" in res.error


def test_non_retryable_error_is_recorded_at_once():
    with FaultServer(script=["401"]) as srv:
        [res] = run_batch(backbone(srv), [req(0)], **FAST)
        assert (res.error_kind, res.attempts, srv.n_requests) == ("client_error", 1, 1)
        assert "HTTP 401" in res.error and "Incorrect API key" in res.error


def test_empty_completion_is_recorded_not_retried(tmp_path):
    with FaultServer(script=["empty"]) as srv:
        cache_path = tmp_path / "c.sqlite"
        [res] = run_batch(backbone(srv), [req(0)], cache=cache_path, **FAST)
        assert res.ok and res.empty and res.response == ""
        assert (res.attempts, res.output_tokens, res.finish_reason) == (1, 0, "stop")
        # A plain re-run serves the cached empty answer; the M1 pass re-asks it.
        [again] = run_batch(backbone(srv), [req(0)], cache=cache_path, **FAST)
        assert again.from_cache and again.empty and srv.n_requests == 1
        [fixed] = run_batch(backbone(srv), [req(0)], cache=cache_path, refresh_empty=True, **FAST)
        assert not fixed.from_cache and fixed.response == "echo: question 0"
        assert srv.n_requests == 2
        with ResponseCache(cache_path, readonly=True) as cache:
            assert cache.to_frame()["response"].tolist() == ["echo: question 0"]


def test_null_content_counts_as_empty():
    with FaultServer(answer=lambda messages: None) as srv:
        [res] = run_batch(backbone(srv), [req(0)], **FAST)
        assert res.ok and res.empty and res.response == ""


# -- batches under mixed faults ---------------------------------------------------------------
def test_mixed_faults_every_request_answered_once_with_bounded_concurrency():
    # No "hang" here: a hang needs a timeout, and "one extra attempt per injected fault" holds
    # only if no healthy request ever times out, i.e. with a timeout that only bounds a hang
    # (FAST's 30 s). Hangs are covered one by one above.
    rates = {"429": 0.05, "500": 0.05, "503": 0.05, "drop": 0.03, "disconnect": 0.03,
             "truncated": 0.04}  # fmt: skip
    assert sum(rates.values()) == pytest.approx(0.25)
    n, conc = 150, 8
    requests = [req(i) for i in range(n)]
    seen = []
    with FaultServer(faults=rates, seed=7, latency_s=0.01, retry_after_s=0.02) as srv:
        results = run_batch(
            backbone(srv, max_concurrency=conc), requests, on_result=seen.append, **FAST
        )
        faults_injected = sum(v for k, v in srv.fault_counts.items() if k != "ok")
        assert faults_injected >= 20  # ~25% of first attempts, plus retries
        assert len(srv.fault_counts) >= 6
        # that the slots are used at all is test_concurrency_is_used_but_never_exceeded's
        assert srv.max_in_flight <= conc
        assert srv.n_requests == n + faults_injected  # one extra attempt per injected fault
    assert len(results) == n and len(seen) == n
    assert [r.request_id for r in results] == [r.request_id for r in requests]
    assert sorted(r.request_id for r in seen) == sorted(r.request_id for r in requests)
    for i, res in enumerate(results):
        assert res.ok, res.error
        assert res.response == f"echo: question {i}"  # nothing crossed between requests
        assert res.attempts >= 1
    assert sum(r.attempts for r in results) == srv.n_requests


def test_concurrency_is_used_but_never_exceeded():
    # Counting, not timing: the first four requests hang until four are in flight at once,
    # then every hang is released; a client that sent more than four at a time would have
    # had more in flight by then (it never waits for an answer before sending).
    with FaultServer(script=["hang"] * 4) as srv:
        filled = threading.Event()

        def release_when_four_in_flight():
            deadline = time.monotonic() + 60  # bounds a client that never fills its slots
            while srv.in_flight < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            filled.set()
            srv.release_hangs()

        watcher = threading.Thread(target=release_when_four_in_flight, daemon=True)
        watcher.start()
        results = run_batch(backbone(srv, max_concurrency=4), [req(i) for i in range(16)], **FAST)
        watcher.join()
    assert filled.is_set() and all(r.ok for r in results)
    assert [r.attempts for r in results] == [1] * 16  # the hung four answered, not retried
    assert srv.max_in_flight == 4


def test_faults_are_deterministic_whatever_the_arrival_order():
    rates = {"500": 0.3}
    draws = []
    for order in (range(40), reversed(range(40))):
        with FaultServer(faults=rates, seed=3) as srv:
            run_batch(backbone(srv, max_concurrency=1), [req(i) for i in order], **FAST)
            draws.append({r.user_text for r in srv.records if r.fault == "500"})
    assert draws[0] == draws[1] and draws[0]


# -- Retry-After -------------------------------------------------------------------------------
def test_retry_after_is_honoured():
    with FaultServer(script=["429"], retry_after_s=1) as srv:
        [res] = run_batch(backbone(srv), [req(0)], **FAST)
        first, second = srv.records
    assert res.ok and res.attempts == 2
    assert second.arrived_at - first.arrived_at >= 1.0
    assert res.elapsed_s >= 1.0


def test_retry_after_beyond_the_cap_fails_instead_of_waiting():
    # counting, not timing: one request and no retry; the elapsed bound only catches a client
    # that waited out the 120 s
    with FaultServer(script=["429"], retry_after_s=120) as srv:
        started = time.perf_counter()
        [res] = run_batch(backbone(srv), [req(0)], max_retry_after_s=60, **FAST)
        assert srv.n_requests == 1 and res.attempts == 1
    assert time.perf_counter() - started < 60
    assert res.error_kind == "rate_limit" and "exceeds max_retry_after_s" in res.error


# -- usage and cost ----------------------------------------------------------------------------
def test_usage_cached_tokens_and_cost():
    system = {"role": "system", "content": "You read clinical dialogues carefully. " * 20}
    msgs = [[system, {"role": "user", "content": f"Q{i}?"}] for i in range(2)]
    prices = dict(price_input=1.0, price_output=5.0, price_cache_read=0.1)
    with FaultServer(cache_min_tokens=0, cache_block=1) as srv:
        bb = backbone(srv, **prices)
        results = run_batch(bb, [ChatRequest(f"r{i}", m) for i, m in enumerate(msgs)], **FAST)
    first, second = results
    n_in = tokens.count_tokens(msgs[1], MODEL)
    system_tokens = tokens.count_tokens([system], MODEL) - tokens.TOKENS_REPLY_PRIMING
    assert first.cached_tokens == 0 and second.input_tokens == n_in
    assert second.cached_tokens == system_tokens > 100
    assert second.output_tokens == tokens.count_tokens("echo: Q1?", MODEL)
    by_hand = ((n_in - system_tokens) * 1.0 + system_tokens * 0.1 + second.output_tokens * 5) / 1e6
    assert second.cost_usd == pytest.approx(by_hand)
    assert not second.usage_estimated


def test_max_tokens_truncates_with_finish_reason_length():
    with FaultServer() as srv:
        [res] = run_batch(backbone(srv), [req(0, text="one two three four five six seven", max_tokens=3)], **FAST)  # fmt: skip
    assert res.finish_reason == "length" and res.output_tokens == 3
    assert res.response == "echo: one"  # "echo", ":", " one"


def test_results_frame_columns():
    with FaultServer() as srv:
        frame = results_frame(run_batch(backbone(srv), [req(0), req(1)], **FAST))
    assert tuple(frame.columns) == RESULT_COLUMNS and len(frame) == 2
    assert frame["request_id"].tolist() == ["r0", "r1"]


# -- cache ------------------------------------------------------------------------------------
def test_cached_rerun_makes_zero_requests(tmp_path, monkeypatch):
    cache_path = tmp_path / "cache.sqlite"
    requests = [req(i) for i in range(20)]
    with FaultServer(faults={"500": 0.2}, seed=1) as srv:
        first = run_batch(backbone(srv), requests, cache=cache_path, **FAST)
        calls = srv.n_requests
        assert calls >= 20 and all(r.ok and not r.from_cache for r in first)
        second = run_batch(backbone(srv), requests, cache=cache_path, **FAST)
        assert srv.n_requests == calls  # zero new requests
    assert all(r.from_cache and r.attempts == 0 for r in second)
    for a, b in zip(first, second, strict=True):
        assert (a.response, a.input_tokens, a.output_tokens, a.cost_usd) == (
            b.response,
            b.input_tokens,
            b.output_tokens,
            b.cost_usd,
        )
    # Changing a generation parameter is a different request.
    with FaultServer() as srv:
        run_batch(backbone(srv), [req(0, max_tokens=5)], cache=cache_path, **FAST)
        assert srv.n_requests == 1


def test_cache_and_logs_never_contain_the_api_key(tmp_path, monkeypatch, caplog):
    secret = "sk-test-CLINTRACE-0123456789-SECRET"
    monkeypatch.setenv("CLINTRACE_FAKE_KEY", secret)
    cache_path = tmp_path / "cache.sqlite"
    with caplog.at_level(logging.DEBUG):  # every logger, the SDK's and httpx's included
        with FaultServer(script=["500", "401", None, "429"], retry_after_s=0.01) as srv:
            bb = backbone(srv, api_key_env="CLINTRACE_FAKE_KEY", max_concurrency=1)
            results = run_batch(bb, [req(i) for i in range(3)], cache=cache_path, **FAST)
            assert srv.authorization_headers[0] == f"Bearer {secret}"  # the key was sent
    failed = [r for r in results if not r.ok]
    assert len(failed) == 1 and failed[0].error_kind == "client_error"
    assert "Incorrect API key provided: ***." in failed[0].error  # scrubbed echo
    blobs = [p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("cache.sqlite")]
    assert blobs and all(secret.encode() not in blob for blob in blobs)
    assert all(b"Bearer" not in blob for blob in blobs)
    assert secret not in caplog.text and caplog.text  # logs were captured, key absent
    assert all(secret not in (r.error or "") for r in results)


def test_missing_key_fails_before_any_request_but_cache_hits_need_none(tmp_path, monkeypatch):
    monkeypatch.delenv("CLINTRACE_ABSENT_KEY", raising=False)
    cache_path = tmp_path / "c.sqlite"
    with FaultServer() as srv:
        keyless = backbone(srv)
        run_batch(keyless, [req(0)], cache=cache_path, **FAST)
        needs_key = Backbone(name="test", model=MODEL, base_url=srv.base_url,
                             api_key_env="CLINTRACE_ABSENT_KEY")  # fmt: skip
        [hit] = run_batch(needs_key, [req(0)], cache=cache_path, **FAST)
        assert hit.from_cache
        with pytest.raises(MissingAPIKeyError, match="CLINTRACE_ABSENT_KEY"):
            run_batch(needs_key, [req(0), req(1)], cache=cache_path, **FAST)
        assert srv.n_requests == 1


# -- egress, offline backbones, bad input ------------------------------------------------------
def test_credentialed_data_refused_for_unapproved_backbone():
    with FaultServer() as srv:
        with pytest.raises(EgressRefusedError, match="not approved_for_credentialed"):
            LLMClient(backbone(srv), credentialed=True)
        run_batch(backbone(srv), [req(0)], credentialed=True, allow_unapproved=True, **FAST)
        approved = backbone(srv, approved_for_credentialed=True)
        run_batch(approved, [req(1)], credentialed=True, **FAST)
        assert srv.n_requests == 2


def test_offline_backbone_answers_without_http():
    calls = []

    def policy(messages, params):
        calls.append(params.max_tokens)
        text = messages[-1]["content"]
        if text == "boom":
            raise RuntimeError("reader crashed")
        if text == "known usage":
            return OfflineReply("ok", input_tokens=7, output_tokens=1)
        return None if text == "nothing" else text.upper()

    async def async_policy(messages, params):
        await asyncio.sleep(0)
        return "async"

    bb = Backbone(name="upper", model="gpt-4o-mini", kind="offline", policy=policy)
    texts = ["abc", "nothing", "boom", "known usage"]
    results = run_batch(bb, [req(i, text=t, max_tokens=9) for i, t in enumerate(texts)])
    assert [r.response for r in results] == ["ABC", "", None, "ok"]
    assert results[1].empty and results[2].error_kind == "policy_error"
    assert "reader crashed" in results[2].error
    assert results[0].input_tokens == tokens.count_tokens(
        [{"role": "user", "content": "abc"}], MODEL
    )
    assert results[0].usage_estimated and not results[3].usage_estimated
    assert (results[3].input_tokens, results[3].output_tokens) == (7, 1)
    assert calls == [9, 9, 9, 9] and all(r.attempts == 0 for r in results)
    abb = Backbone(name="a", model="m", kind="offline", policy=async_policy)
    assert run_batch(abb, [req(0)])[0].response == "async"


def test_invalid_requests_are_rejected_up_front():
    bb = Backbone(name="o", model="m", kind="offline", policy=lambda m, p: "x")
    with pytest.raises(InvalidRequestError, match="duplicate request_id 'r0'"):
        run_batch(bb, [req(0), req(0)])
    bad_role = ChatRequest("q7", [{"role": "doctor", "content": "hi"}])
    with pytest.raises(InvalidRequestError, match="request 'q7': message 0 has role 'doctor'"):
        run_batch(bb, [bad_role])
    with pytest.raises(InvalidRequestError, match="messages must be a non-empty list"):
        run_batch(bb, [ChatRequest("q8", [])])
    with pytest.raises(InvalidRequestError, match="not JSON-serialisable"):
        run_batch(bb, [ChatRequest("q9", [{"role": "user", "content": "x"}],
                                   GenerationParams(extra={"when": object()}))])  # fmt: skip


def test_run_batch_works_inside_a_running_event_loop():
    """Notebooks already run a loop; run_batch must still work there."""

    async def inside_notebook():
        with FaultServer() as srv:
            return run_batch(backbone(srv), [req(0)], **FAST)

    [res] = asyncio.run(inside_notebook())
    assert res.response == "echo: question 0"


def test_async_api_single_request_and_stats():
    async def go(url):
        bb = Backbone(name="t", model=MODEL, base_url=url)
        async with LLMClient(bb, **FAST) as client:
            res = await client.complete(req(0))
            return res, client.stats

    with FaultServer(script=["503"]) as srv:
        res, stats = asyncio.run(go(srv.base_url))
    assert res.ok and stats.api_calls == 2 and stats.retries == {"server_error": 1}


def test_fault_server_validates_its_configuration():
    with pytest.raises(FaultConfigError, match="unknown fault kind 'teapot'"):
        FaultServer(faults={"teapot": 0.1})
    with pytest.raises(FaultConfigError, match="sum to"):
        FaultServer(faults={"500": 0.6, "503": 0.6})
    with pytest.raises(FaultConfigError, match="in script"):
        FaultServer(script=["500", "oops"])


def test_generation_params_reach_the_server_and_extra_goes_in_the_body():
    payloads = []

    def capture(index, payload, attempt):
        payloads.append(payload)
        return None

    params = GenerationParams(
        temperature=0.0, max_tokens=60, seed=1, stop=("\n\n",), extra={"provider": {"order": ["x"]}}
    )
    with FaultServer(script=capture) as srv:
        run_batch(backbone(srv), [ChatRequest("a", [{"role": "user", "content": "hi"}], params)])
    [body] = payloads
    assert body["model"] == MODEL and body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.0, 60, 1)
    assert body["stop"] == ["\n\n"] and body["provider"] == {"order": ["x"]}
    with pytest.raises(InvalidRequestError, match="repeats"):
        GenerationParams(max_tokens=5, extra={"max_tokens": 6}).to_dict()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "100", "retry-after": "9"}, 0.1),  # ms wins, as in the SDK
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, expected):
    from clinlib.llm.retry import parse_retry_after

    assert parse_retry_after(headers) == expected


def test_a_crashing_callback_is_raised_not_swallowed():
    bb = Backbone(name="o", model="m", kind="offline", policy=lambda m, p: "x")

    def explode(result):
        raise ZeroDivisionError("progress bar bug")

    with pytest.raises(ZeroDivisionError, match="progress bar bug"):
        run_batch(bb, [req(i) for i in range(3)], on_result=explode)
