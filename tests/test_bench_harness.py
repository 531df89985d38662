"""The harness benchmark's behaviour (not its speed): a cached re-run makes no call, and the
report states each target. The timing ratio against a bare SDK loop is a measurement, so it
lives in bench/test_client_overhead.py and runs in ``make bench-harness``."""

from __future__ import annotations

import pandas as pd

from bench import llm_harness as harness


def test_bench_harness_cached_rerun_makes_no_call_and_reports_targets():
    """The benchmark's cached pass is served wholly from the cache (behaviour, not speed)."""
    cached = harness.cached_rerun(40, latency_s=0.0, concurrency=8)
    assert cached["fill_api_calls"] == 40
    assert (cached["rerun_api_calls"], cached["rerun_cache_hits"]) == (0, 40)
    table = pd.DataFrame([{"concurrency": 32, "kit_vs_bare": 0.85, "kit_vs_inspect": 7.0}])
    text = harness.report(table, cached)
    assert "worst 0.85x (target >= 0.9x) -> NOT met" in text
    assert "kit vs inspect_ai at 32: 7.0x (target >= 6.0x) -> met" in text
