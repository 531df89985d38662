"""clinlib.cli.notebooks.execute_all: notebooks run two at a time, never before what they wait
for (AFTER), results in numbered order."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from clinlib.cli import notebooks as N

NAMES = ["01_a", "04_run_evaluation", "05_b", "10_pareto_cost", "11_ablations",
         "12_c", "13_failure_explorer"]  # fmt: skip


def fake_run(monkeypatch, tmp_path, seconds: dict[str, float], together: tuple[str, ...] = ()):
    """Fake notebooks that log their start and end; the ``together`` ones wait for each other
    once started (a barrier, so their overlap never depends on thread timing: with fewer
    workers than ``together`` the barrier times out and the run fails)."""
    log: list[tuple[str, str, float]] = []
    live = {"now": 0, "max": 0}
    lock = threading.Lock()
    meet = threading.Barrier(len(together), timeout=30) if together else None

    def execute_one(path: Path, out_dir: Path, timeout: int) -> dict:
        with lock:
            live["now"] += 1
            live["max"] = max(live["max"], live["now"])
            log.append(("start", path.stem, time.monotonic()))
        if meet is not None and path.stem in together:
            meet.wait()
        time.sleep(seconds.get(path.stem, 0.01))
        with lock:
            live["now"] -= 1
            log.append(("end", path.stem, time.monotonic()))
        return {"notebook": path.name, "ok": path.stem != "05_b", "seconds": 0.0, "error": ""}

    monkeypatch.setattr(N, "check_built", lambda profile: None)
    monkeypatch.setattr(N, "build_dir", lambda profile: tmp_path)
    monkeypatch.setattr(N, "numbered_notebooks", lambda: [Path(f"{n}.ipynb") for n in NAMES])
    monkeypatch.setattr(N, "execute_one", execute_one)
    return log, live


def test_dependents_wait_for_prerequisites_and_two_run_at_once(monkeypatch, tmp_path):
    first = ("04_run_evaluation", "10_pareto_cost")
    log, live = fake_run(monkeypatch, tmp_path, {}, together=first)
    seen = []
    rows = N.execute_all("quick", workers=2, on_done=lambda r: seen.append(r["notebook"]))
    assert [r["notebook"] for r in rows] == [f"{n}.ipynb" for n in NAMES]  # numbered order
    assert sorted(seen) == sorted(f"{n}.ipynb" for n in NAMES)  # each reported once
    assert not rows[2]["ok"]  # a failing notebook is reported, the others still run
    t = {(kind, name): at for kind, name, at in log}
    assert t[("start", "11_ablations")] >= t[("end", "04_run_evaluation")]
    assert t[("start", "11_ablations")] >= t[("end", "10_pareto_cost")]
    assert t[("start", "13_failure_explorer")] >= t[("end", "11_ablations")]
    assert live["max"] == 2  # 04 and 10 met at the barrier: both ran at once, never three
    # the prerequisites of 11 start first (they gate the longest chain); which of the two
    # threads logs its start first is the OS's choice, so the pair is compared as a set
    assert {name for kind, name, _ in log[:2]} == set(first)
    assert all(kind == "start" for kind, _, _ in log[:2])


def test_one_worker_runs_one_at_a_time(monkeypatch, tmp_path):
    _log, live = fake_run(monkeypatch, tmp_path, {})
    N.execute_all("quick", workers=1)
    assert live["max"] == 1


def test_schedule_puts_prerequisites_first():
    assert N.schedule(["01_x", "13_failure_explorer", "11_ablations", "10_pareto_cost"]) == [
        "10_pareto_cost", "11_ablations", "01_x", "13_failure_explorer"
    ]  # fmt: skip
