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


def test_hang_scenario_loses_nothing_either_way_and_reports_the_ratio():
    """Both ways answer every request (each hung once, then retried); batch-gather waits one
    full client timeout per batch, one batch after another (a lower bound, whatever the
    load); the comparison of wall times is the benchmark's, not this test's."""
    table = harness.hang_scenario(64, concurrency=4, latency_s=0.01, timeout_s=1.0)
    assert table["mode"].tolist() == ["batch-gather", "pool"]
    assert table["answered"].tolist() == [64, 64] and table["hangs"].tolist() == [2, 2]
    assert table.set_index("mode").loc["batch-gather", "wall_s"] >= 2 * 1.0
    assert ((table["idle_share"] >= 0) & (table["idle_share"] <= 1)).all()
    cached = {"n": 1, "rerun_s": 0.1, "rerun_api_calls": 0, "rerun_cache_hits": 1}
    fixed = pd.DataFrame({"mode": ["batch-gather", "pool"], "requests": [256, 256],
                          "answered": [256, 256], "hangs": [8, 8], "wall_s": [43.2, 13.0],
                          "idle_share": [0.84, 0.3]})  # fmt: skip
    text = harness.report(pd.DataFrame([{"concurrency": 8, "kit_vs_bare": 1.0,
                                         "kit_vs_inspect": None}]), cached, fixed)  # fmt: skip
    assert text.splitlines()[-1] == (
        "hangs (8 of 256 requests hung once): pool 13.0 s, server idle 30%; batch-gather "
        "43.2 s, idle 84%; pool/batch-gather 0.30 (target <= 0.5) -> met"
    )
