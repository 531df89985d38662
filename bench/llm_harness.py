"""``python -m bench.llm_harness``: throughput of the evaluation harness against a local
OpenAI-compatible server, beside a bare ``openai`` loop and inspect_ai (paper §4
"Evaluation protocol", Appendix D).

1. A fault-free asyncio server (:class:`clinlib.llm.testserver.FaultServer`, one write per
   response, in a child process so it never shares the GIL with the client) answers every
   request after a fixed latency (default 100 ms).
2. At each concurrency level (default 1, 8, 32, 64) the same N requests (default 2,000) go
   through, in alternating order: a bare ``AsyncOpenAI`` + semaphore loop (the reference),
   the kit's :class:`~clinlib.llm.client.LLMClient` writing every response to a fresh SQLite
   response cache (as a real run does), and inspect_ai (``openai-api/bench/<model>`` with the
   same ``max_connections``) when it is installed (``pip install -e '.[bench]'``).
3. A cached re-run: the kit answers the paper profile's question count (6,271) once against
   the server to fill a cache, then again from that cache alone; the second pass must make
   zero HTTP calls and is timed.

4. Hangs: the same requests (default 256, concurrency 8, 100 ms latency), every 32nd hung
   on its first attempt until the client's timeout (default 5 s; the retry answers it), sent
   two ways through the same :class:`~clinlib.llm.client.LLMClient`: batch-gather (batches
   of 32, each gathered whole before the next starts: the harness before issue 24) and the
   harness's pool (:func:`clinlib.eval.harness.pool.run_pool`). Reported: wall time and the server's
   idle share (the time no request that is not hung was being answered; the server runs in
   this process's thread here, which adds the same overhead to both ways).

Targets: kit >= 0.9x bare at every concurrency, >= 6x inspect_ai at 32; cached
re-run of 6,271 predictions <= 10 s; under hangs the pool at most half batch-gather's wall
time. Prints a table; writes ``data/build/bench-harness.json``.

Usage: ``python -m bench.llm_harness [--requests 2000] [--latency 0.1]
[--concurrency 1,8,32,64] [--cached 6271] [--no-inspect] [--hang-requests 256]
[--hang-timeout 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import BUILD_DIR
from clinlib.eval.harness.pool import run_pool
from clinlib.eval.harness.session import pool_slots
from clinlib.llm.chat import ChatRequest
from clinlib.llm.client import LLMClient
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.llm.throughput import BENCH_MODEL, bench_bare, bench_kit, subprocess_server
from clinlib.llm.types import Backbone

RATIO_TARGET = 0.9
INSPECT_TARGET = 6.0
CACHED_TARGET_S = 10.0
PAPER_QUESTIONS = 6271
HANG_TARGET = 0.5  # pool wall time <= this share of batch-gather's under hangs
HANG_BATCH = 32  # the harness's former batch (runner.DEFAULT_BATCH_SIZE)


def progress(msg: str, t0: float | None = None) -> None:
    """One progress line on stderr, flushed at once (the run takes ~20 minutes and its
    table only prints at the end). Local minimal helper: unify with a shared one if clinlib
    grows one."""
    took = f" ({time.perf_counter() - t0:.1f} s)" if t0 is not None else ""
    print(f"[bench-harness {time.strftime('%H:%M:%S')}] {msg}{took}", file=sys.stderr, flush=True)


def inspect_available() -> bool:
    """True when inspect_ai can be imported (the optional ``bench`` extra)."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return False
    return True


def bench_inspect(base_url: str, n: int, concurrency: int, log_dir: str) -> float:
    """Samples/s of inspect_ai generating one reply per sample on the same server.

    inspect_ai's OpenAI-compatible provider reads ``<PROVIDER>_BASE_URL`` and
    ``<PROVIDER>_API_KEY``; the provider here is ``bench``.
    """
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    os.environ["BENCH_BASE_URL"] = base_url
    os.environ.setdefault("BENCH_API_KEY", "bench")
    task = Task(
        dataset=[Sample(input=f"inspect question {i}", target="x") for i in range(n)],
        solver=generate(),
    )
    started = time.perf_counter()
    logs = eval(
        task,
        model=f"openai-api/bench/{BENCH_MODEL}",
        max_connections=concurrency,
        max_retries=0,
        log_dir=log_dir,
        display="none",
        score=False,
    )
    elapsed = time.perf_counter() - started
    status = logs[0].status if logs else "no log"
    if status != "success":
        raise RuntimeError(f"inspect_ai run did not succeed: {status}")
    return n / elapsed


def throughput(
    concurrencies: list[int],
    n_requests: int,
    latency_s: float,
    with_inspect: bool,
    timeout_s: float = 60.0,
) -> pd.DataFrame:
    """One row per concurrency: bare / kit (/ inspect) requests per second and ratios."""
    rows = []
    for i, conc in enumerate(concurrencies, 1):
        level = f"level {i}/{len(concurrencies)} (concurrency {conc}, {n_requests:,} requests)"
        progress(f"{level}: starting the local {latency_s * 1000:.0f} ms server")
        with subprocess_server(latency_s) as url, tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            bare = asyncio.run(bench_bare(url, n_requests, conc, timeout_s))
            progress(f"{level}: bare openai {bare:.1f} req/s", t0)
            t0 = time.perf_counter()
            kit = asyncio.run(bench_kit(url, n_requests, conc, timeout_s, f"{tmp}/c.sqlite"))
            progress(f"{level}: kit {kit:.1f} req/s", t0)
            # a second bare pass after the kit, so drift in machine load shows as a spread
            t0 = time.perf_counter()
            bare2 = asyncio.run(bench_bare(url, n_requests, conc, timeout_s))
            progress(f"{level}: bare openai again {bare2:.1f} req/s", t0)
            insp = None
            if with_inspect:
                t0 = time.perf_counter()
                insp = bench_inspect(url, n_requests, conc, f"{tmp}/logs")
                progress(f"{level}: inspect_ai {insp:.1f} req/s", t0)
        bare_med = statistics.mean([bare, bare2])
        rows.append({
            "concurrency": conc,
            "n_requests": n_requests,
            "latency_bound_rps": conc / latency_s,
            "bare_rps": round(bare_med, 1),
            "bare_spread_rps": round(abs(bare - bare2), 1),
            "kit_rps": round(kit, 1),
            "kit_vs_bare": round(kit / bare_med, 3),
            "inspect_rps": round(insp, 1) if insp else None,
            "kit_vs_inspect": round(kit / insp, 2) if insp else None,
        })  # fmt: skip
    return pd.DataFrame(rows)


def cached_rerun(n: int, latency_s: float, concurrency: int = 64) -> dict[str, Any]:
    """Fill a response cache with ``n`` answers, then time a second pass served from it.

    Requests carry prompt-sized messages (~2 kB each) so the cache holds realistic rows.
    """
    from clinlib.llm.chat import ChatRequest
    from clinlib.llm.client import LLMClient
    from clinlib.llm.types import Backbone

    filler = "Clinician: Creatinine was 1.4 mg/dL on 2150-03-02 [LAB-12]. " * 30
    requests = [
        ChatRequest(f"q{i}", [{"role": "system", "content": "Answer briefly."},
                              {"role": "user", "content": f"{filler}\nQUESTION\nq{i}?"}])
        for i in range(n)
    ]  # fmt: skip

    async def one_pass(url: str, cache: str) -> tuple[float, int, int]:
        bb = Backbone(name="bench", model=BENCH_MODEL, base_url=url, max_concurrency=concurrency)
        t0 = time.perf_counter()
        async with LLMClient(bb, cache=cache, timeout_s=60.0) as client:
            results = await client.complete_many(requests)
            calls, hits = client.stats.api_calls, client.stats.cache_hits
        if any(not r.ok for r in results):
            raise RuntimeError("cached re-run benchmark: a request failed")
        return time.perf_counter() - t0, calls, hits

    with subprocess_server(latency_s) as url, tempfile.TemporaryDirectory() as tmp:
        cache = f"{tmp}/cache.sqlite"
        progress(f"cached re-run: filling a cache with {n:,} answers")
        fill_s, fill_calls, _ = asyncio.run(one_pass(url, cache))
        progress(f"cached re-run: filled, {fill_calls:,} API calls in {fill_s:.1f} s; re-running")
        rerun_s, rerun_calls, rerun_hits = asyncio.run(one_pass(url, cache))
        progress(f"cached re-run: {rerun_s:.2f} s, {rerun_calls} API calls")
    return {
        "n": n,
        "fill_s": round(fill_s, 2),
        "fill_api_calls": fill_calls,
        "rerun_s": round(rerun_s, 2),
        "rerun_api_calls": rerun_calls,
        "rerun_cache_hits": rerun_hits,
        "target_s": CACHED_TARGET_S,
    }


async def _send(mode: str, url: str, requests: list[ChatRequest], concurrency: int,
                timeout_s: float) -> list[Any]:  # fmt: skip
    """Answer ``requests`` by batch-gather or through the pool; one result per request."""
    bb = Backbone(name="bench", model=BENCH_MODEL, base_url=url, max_concurrency=concurrency)
    results: list[Any] = []
    async with LLMClient(bb, timeout_s=timeout_s, backoff_base_s=0.05, backoff_max_s=0.1) as client:
        if mode == "batch-gather":
            for start in range(0, len(requests), HANG_BATCH):
                results += await client.complete_many(requests[start : start + HANG_BATCH])
        else:
            await run_pool(requests, client.complete, pool_slots(client),
                           lambda _req, res: results.append(res))  # fmt: skip
    return results


def hang_scenario(n: int = 256, concurrency: int = 8, latency_s: float = 0.1,
                  timeout_s: float = 5.0, every: int = HANG_BATCH) -> pd.DataFrame:  # fmt: skip
    """Wall time and server idle share of batch-gather vs the pool when every ``every``-th
    request hangs on its first attempt until the client's timeout."""

    def script(index: int, payload: dict, attempt: int) -> str | None:
        i = int(last_user_text(payload["messages"]).rsplit(" ", 1)[1])
        return "hang" if attempt == 0 and i % every == 0 else None

    requests = [ChatRequest(f"h{i}", [{"role": "user", "content": f"hang question {i}"}])
                for i in range(n)]  # fmt: skip
    rows = []
    for mode in ("batch-gather", "pool"):
        with FaultServer(script=script, latency_s=latency_s, hang_s=10 * timeout_s) as srv:
            t0 = time.perf_counter()
            results = asyncio.run(_send(mode, srv.base_url, requests, concurrency, timeout_s))
            wall = time.perf_counter() - t0
            rows.append({"mode": mode, "requests": n, "answered": sum(r.ok for r in results),
                         "hangs": srv.fault_counts["hang"], "wall_s": round(wall, 2),
                         "idle_share": round(max(0.0, 1 - srv.busy_s / wall), 3)})  # fmt: skip
        progress(f"hangs: {mode} {wall:.1f} s, server idle {rows[-1]['idle_share']:.0%}")
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, cached: dict[str, Any], hangs: pd.DataFrame | None = None) -> str:
    """Human-readable summary with each target marked met / NOT met."""
    lines = [table.to_string(index=False)]
    worst = float(table["kit_vs_bare"].min())
    lines.append(f"kit vs bare: worst {worst:.2f}x (target >= {RATIO_TARGET}x) -> "
                 f"{'met' if worst >= RATIO_TARGET else 'NOT met'}")  # fmt: skip
    at32 = table[(table["concurrency"] == 32) & table["kit_vs_inspect"].notna()]
    if not at32.empty:
        r = float(at32["kit_vs_inspect"].iloc[0])
        lines.append(f"kit vs inspect_ai at 32: {r:.1f}x (target >= {INSPECT_TARGET}x) -> "
                     f"{'met' if r >= INSPECT_TARGET else 'NOT met'}")  # fmt: skip
    elif table["kit_vs_inspect"].isna().all():
        lines.append(
            "inspect_ai: not measured (install the bench extra: pip install -e '.[bench]')"
        )
    ok = cached["rerun_s"] <= CACHED_TARGET_S and cached["rerun_api_calls"] == 0
    lines.append(
        f"cached re-run of {cached['n']:,} predictions: {cached['rerun_s']:.2f} s, "
        f"{cached['rerun_api_calls']} API calls, {cached['rerun_cache_hits']:,} cache hits "
        f"(target <= {CACHED_TARGET_S:.0f} s, 0 calls) -> {'met' if ok else 'NOT met'}"
    )
    if hangs is not None:
        by = hangs.set_index("mode")
        pool, gather = by.loc["pool"], by.loc["batch-gather"]
        ratio = pool["wall_s"] / gather["wall_s"]
        lines.append(
            f"hangs ({int(pool['hangs'])} of {int(pool['requests'])} requests hung once): pool "
            f"{pool['wall_s']:.1f} s, server idle {pool['idle_share']:.0%}; batch-gather "
            f"{gather['wall_s']:.1f} s, idle {gather['idle_share']:.0%}; pool/batch-gather "
            f"{ratio:.2f} (target <= {HANG_TARGET}) -> {'met' if ratio <= HANG_TARGET else 'NOT met'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--cached", type=int, default=PAPER_QUESTIONS)
    parser.add_argument("--no-inspect", action="store_true")
    parser.add_argument("--hang-requests", type=int, default=256)
    parser.add_argument("--hang-timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    concs = [int(c) for c in args.concurrency.split(",") if c]
    with_inspect = not args.no_inspect and inspect_available()
    table = throughput(concs, args.requests, args.latency, with_inspect)
    cached = cached_rerun(args.cached, args.latency)
    hangs = hang_scenario(args.hang_requests, latency_s=args.latency, timeout_s=args.hang_timeout)
    text = report(table, cached, hangs)
    print(text)
    out = {
        "throughput": table.to_dict("records"),
        "cached_rerun": cached,
        "hangs": hangs.to_dict("records"),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    path = Path(BUILD_DIR) / "bench-harness.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
