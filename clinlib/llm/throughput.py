"""Throughput of the kit's chat client against a bare ``AsyncOpenAI`` + semaphore loop on the
same fault-free :class:`~clinlib.llm.testserver.FaultServer` (paper §4: the client must not
be the bottleneck of the paper's 200,672 requests; docs/design.md "LLM layer").
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import openai
import pandas as pd

from clinlib.llm.chat import ChatRequest
from clinlib.llm.client import LLMClient
from clinlib.llm.retry import httpx
from clinlib.llm.types import Backbone

BENCH_MODEL = "gpt-4o-mini"


async def bench_bare(base_url: str, n: int, concurrency: int, timeout_s: float) -> float:
    """Requests/s of a plain AsyncOpenAI + semaphore loop (the reference)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    client = openai.AsyncOpenAI(
        api_key="bench",
        base_url=base_url,
        max_retries=0,
        timeout=timeout,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout),
    )
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> str | None:
        async with sem:
            resp = await client.chat.completions.create(
                model=BENCH_MODEL,
                messages=[{"role": "user", "content": f"bare question {i}"}],
                temperature=0,
            )
            return resp.choices[0].message.content

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - started
    await client.close()
    return n / elapsed


async def bench_kit(
    base_url: str, n: int, concurrency: int, timeout_s: float, cache_path: str | None
) -> float:
    """Requests/s of :class:`~clinlib.llm.client.LLMClient` on the same server."""
    backbone = Backbone(
        name="bench", model=BENCH_MODEL, base_url=base_url, max_concurrency=concurrency
    )
    requests = [
        ChatRequest(f"q{i}", [{"role": "user", "content": f"kit question {i}"}]) for i in range(n)
    ]
    started = time.perf_counter()
    async with LLMClient(backbone, cache=cache_path, timeout_s=timeout_s) as client:
        results = await client.complete_many(requests)
    elapsed = time.perf_counter() - started
    failed = [r for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"benchmark request failed: {failed[0].error}")
    return n / elapsed


@contextmanager
def subprocess_server(latency_s: float = 0.0, seed: int = 0) -> Iterator[str]:
    """Run a fault-free :class:`FaultServer` in a child process; yields its base URL.

    A benchmark must not share the GIL with the server it measures.
    """
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clinlib.llm.testserver",
            "--latency",
            str(latency_s),
            "--seed",
            str(seed),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"test server subprocess did not start (said {url!r})")
        yield url
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def compare_throughput(
    concurrencies: Sequence[int] = (1, 8, 32, 64),
    n_requests: int = 500,
    latency_s: float = 0.1,
    timeout_s: float = 30.0,
    repeats: int = 1,
    with_cache: bool = False,
) -> pd.DataFrame:
    """Throughput of the kit's client vs a bare AsyncOpenAI + semaphore loop.

    Each concurrency level gets a fresh fault-free server in a child process with a fixed
    answer latency; bare and kit runs alternate (order swapped every repeat) ``repeats``
    times and the medians are kept.

    Args:
        concurrencies: requests in flight to test.
        n_requests: requests per run.
        latency_s: server-side latency per request.
        timeout_s: client timeout.
        repeats: runs per client and level (median reported).
        with_cache: the kit client also writes every response to a fresh SQLite cache.

    Returns:
        DataFrame: concurrency, n_requests, latency_s, ideal_rps, bare_rps, kit_rps, ratio
        (kit / bare throughput), bare_cpu_ms, kit_cpu_ms (client CPU per request).
    """

    def timed(coro: Any) -> tuple[float, float]:
        # (requests/s, client CPU ms per request): CPU time is the stable measure of the
        # client's own overhead; wall throughput also reflects machine load.
        cpu0 = time.process_time()
        rps = asyncio.run(coro)
        return rps, (time.process_time() - cpu0) / n_requests * 1e3

    rows = []
    for conc in concurrencies:
        bare_runs, kit_runs = [], []
        with subprocess_server(latency_s) as url, tempfile.TemporaryDirectory() as tmp:
            for rep in range(repeats):
                cache_path = f"{tmp}/bench-{rep}.sqlite" if with_cache else None
                # Alternate which client goes first so drift in machine load cancels out.
                if rep % 2 == 0:
                    bare_runs.append(timed(bench_bare(url, n_requests, conc, timeout_s)))
                kit_runs.append(timed(bench_kit(url, n_requests, conc, timeout_s, cache_path)))
                if rep % 2 == 1:
                    bare_runs.append(timed(bench_bare(url, n_requests, conc, timeout_s)))
        bare = statistics.median(r for r, _ in bare_runs)
        kit = statistics.median(r for r, _ in kit_runs)
        rows.append(
            {
                "concurrency": conc,
                "n_requests": n_requests,
                "latency_s": latency_s,
                "ideal_rps": conc / latency_s,
                "bare_rps": bare,
                "kit_rps": kit,
                "ratio": kit / bare,
                "bare_cpu_ms": statistics.median(c for _, c in bare_runs),
                "kit_cpu_ms": statistics.median(c for _, c in kit_runs),
            }
        )
    return pd.DataFrame(rows)
