"""clinlib.cli.schedule on fake stages (tiny python commands): at most N at once, needs
respected, the declared order with one job, a failure stops new launches and is named in one
line, CPU seconds measured from wait4 (grandchildren included), whole prefixed lines."""

from __future__ import annotations

import re
import sys

import pytest

from clinlib.cli import schedule as sch
from clinlib.cli.schedule import Job, Outcome, ScheduleError


def _stamp(tmp_path, name: str, sleep: float = 0.3, code: str = "") -> tuple[str, ...]:
    """A job that writes its start and end times to <tmp>/<name>.t around a sleep."""
    out = tmp_path / f"{name}.t"
    body = (
        "import time, sys\n"
        f"t0 = time.time(); time.sleep({sleep})\n{code}\n"
        f"open({str(out)!r}, 'w').write(f'{{t0}} {{time.time()}}')\n"
    )
    return (sys.executable, "-c", body)


def _interval(tmp_path, name: str) -> tuple[float, float]:
    start, end = (tmp_path / f"{name}.t").read_text().split()
    return float(start), float(end)


def _max_overlap(intervals) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = best = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def _pair(tmp_path, name: str, partner: str, linger: float = 0.0) -> tuple[str, ...]:
    """A job that stamps its start, waits (up to 60 s) until its partner has started too,
    lingers, and stamps its end: it only finishes in time when the two run at once, whatever
    the load."""
    code = (
        "import os, time\n"
        f"open({str(tmp_path / (name + '.s'))!r}, 'w').close()\n"
        f"while not os.path.exists({str(tmp_path / (partner + '.s'))!r}):\n"
        "    time.sleep(0.02)\n"
        "    assert time.time() - t0 < 60, 'partner never started'\n"
        f"time.sleep({linger})\n"
    )
    return _stamp(tmp_path, name, 0.1, code)


def test_at_most_n_at_once_and_needs_respected(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    jobs = [
        Job(n, _pair(tmp_path, n, p)) for n, p in [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]
    ]
    jobs.append(Job("e", _stamp(tmp_path, "e", 0.05), needs=("a", "c")))
    outcomes = sch.run_jobs(jobs, 2, out=lambda _s: None)
    assert sorted(o.name for o in outcomes) == names and all(o.rc == 0 for o in outcomes)
    spans = {n: _interval(tmp_path, n) for n in names}
    assert _max_overlap(spans.values()) == 2  # the pairs ran together, never three at once
    assert spans["e"][0] >= max(spans["a"][1], spans["c"][1])  # after both of its needs


def test_one_job_runs_the_declared_order(tmp_path):
    log = tmp_path / "order.log"
    code = "open({!r}, 'a').write('{}\\n')"
    jobs = [
        Job(n, (sys.executable, "-c", code.format(str(log), n)), needs)
        for n, needs in [("x", ()), ("p", ()), ("y", ("x",)), ("q", ("p",)), ("z", ("y", "q"))]
    ]
    sch.run_jobs(jobs, 1, out=lambda _s: None)
    assert log.read_text().split() == ["x", "p", "y", "q", "z"]
    assert sch.check_graph(jobs) == ["x", "p", "y", "q", "z"]


def test_a_failure_stops_new_launches_and_is_named_in_one_line(tmp_path):
    fail = "sys.stderr.write('working\\nerror: events.parquet row 7: bad value\\n'); sys.exit(3)"
    # slow ends 1.5 s after bad has started failing, whatever the load on the machine
    jobs = [
        Job("slow", _pair(tmp_path, "slow", "bad", linger=1.5)),
        Job(
            "bad",
            _stamp(
                tmp_path, "bad", 0.05, f"open({str(tmp_path / 'bad.s')!r}, 'w').close()\n" + fail
            ),
        ),
        Job("after-bad", _stamp(tmp_path, "after-bad", 0.01), needs=("bad",)),
        Job("after-slow", _stamp(tmp_path, "after-slow", 0.01), needs=("slow",)),
    ]
    outcomes = sch.run_jobs(jobs, 2, out=lambda _s: None)
    by = {o.name: o for o in outcomes}
    assert set(by) == {"slow", "bad"}  # the running one finished, nothing new started
    assert by["slow"].rc == 0 and (tmp_path / "slow.t").exists()
    assert not (tmp_path / "after-bad.t").exists() and not (tmp_path / "after-slow.t").exists()
    assert sch.exit_code(outcomes) == 3
    line = sch.failure_line(outcomes)
    assert line == "stage 'bad' failed (exit 3): error: events.parquet row 7: bad value"
    assert "\n" not in line and by["bad"].tail[-2:] == ["working", line.split(": ", 1)[1]]
    assert sch.failure_line([by["slow"]]) is None and sch.exit_code([by["slow"]]) == 0


def test_cpu_seconds_include_the_stages_own_children(tmp_path):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    spawn = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"
    jobs = [
        Job("sleeper", (sys.executable, "-c", "import time; time.sleep(0.5)")),
        Job("spawner", (sys.executable, "-c", spawn)),
    ]
    by = {o.name: o for o in sch.run_jobs(jobs, 2, out=lambda _s: None)}
    assert by["spawner"].cpu_seconds >= 0.4  # the grandchild's 0.4 s of CPU is counted
    assert by["sleeper"].cpu_seconds < 0.35 <= by["sleeper"].seconds


def test_two_stages_lines_stay_whole_and_prefixed(tmp_path):
    code = (
        "import sys\nfor i in range(300):\n"
        "    print('{n}-line-%03d ' % i + 'x' * 60, flush=True)\n"
        "sys.stderr.write('{n} bar 10%\\r{n} bar 100%\\n')\n"
    )
    jobs = [Job(n, (sys.executable, "-c", code.format(n=n))) for n in ("aa", "b")]
    lines: list[str] = []
    sch.run_jobs(jobs, 2, out=lines.append)
    body = [ln for ln in lines if not ln.startswith("== ")]
    assert len(body) == 2 * 301
    for ln in body:
        name = ln[1:3].strip()
        assert ln.startswith(f"[{name:<2}] "), ln
        text = ln[5:]
        assert text == f"{name} bar 100%" or re.fullmatch(rf"{name}-line-\d{{3}} x{{60}}", text)


def test_bad_graphs_are_refused_in_one_line():
    with pytest.raises(ScheduleError, match=r"^stage graph: a cycle among a, b$"):
        sch.check_graph([Job("a", (), ("b",)), Job("b", (), ("a",)), Job("c", ())])
    with pytest.raises(ScheduleError, match=r"'a' needs 'zz', not a stage"):
        sch.check_graph([Job("a", (), ("zz",))])
    with pytest.raises(ScheduleError, match=r"duplicate stage 'a'"):
        sch.check_graph([Job("a", ()), Job("a", ())])


def test_critical_path_worked_by_hand():
    jobs = [Job("a", ()), Job("b", (), ("a",)), Job("c", (), ("a",)), Job("d", (), ("b", "c"))]
    secs = {"a": 2.0, "b": 5.0, "c": 7.0, "d": 1.0}
    outcomes = {n: Outcome(n, 0, s, s, 0.0, s) for n, s in secs.items()}
    assert sch.critical_path(jobs, outcomes) == (["a", "c", "d"], 10.0)


def test_a_stage_child_shares_the_parents_lock_and_build_folder(tmp_path, monkeypatch):
    """A child started under the parent's writer lock proceeds (it fails on the empty build,
    not on the lock) and reads the parent's build folder (a test's tmp folder here); the lock
    refusing any other process is tests/core/test_lock.py's."""
    from clinlib.core import config, lock
    from clinlib.core.config import REPO_ROOT

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    monkeypatch.delenv(lock.HELD_ENV, raising=False)
    job = Job("dialogues", sch.stage_command(tmp_path, ["dialogues", "--profile", "t"]))
    lines: list[str] = []
    with lock.profile_lock("t", "clintrace pipeline --profile t"):
        outcomes = sch.run_jobs([job], 1, out=lines.append, env=sch.child_env(REPO_ROOT))
    assert outcomes[0].rc == 2, lines
    assert f"{tmp_path / 't' / 'events.parquet'} does not exist" in outcomes[0].tail[-1]
    assert "is being written by" not in "\n".join(lines)


# a(2) then b(5) and c(7) side by side, d(1) after both; e(4) free
HAND_JOBS = (
    Job("a", ()),
    Job("b", (), ("a",)),
    Job("c", (), ("a",)),
    Job("d", (), ("b", "c")),
    Job("e", ()),
)
HAND_SECS = {"a": 2.0, "b": 5.0, "c": 7.0, "d": 1.0, "e": 4.0}


def test_simulate_worked_by_hand():
    # a(2) then b(5) and c(7) side by side, d(1) after both; e(4) free: fills b's idle slot
    jobs, secs = list(HAND_JOBS), dict(HAND_SECS)
    two = sch.simulate(jobs, secs, 2)
    assert two == {
        "a": (0.0, 2.0),
        "e": (0.0, 4.0),
        "b": (2.0, 7.0),
        "c": (4.0, 11.0),
        "d": (11.0, 12.0),
    }
    one = sch.simulate(jobs, secs, 1)
    assert max(e for _, e in one.values()) == sum(secs.values())
    assert [n for n, _ in sorted(one.items(), key=lambda kv: kv[1])] == ["a", "b", "c", "d", "e"]


def test_critical_path_first_worked_by_hand(tmp_path):
    jobs, secs = list(HAND_JOBS), dict(HAND_SECS)
    first = sch.remaining_path(jobs, secs)
    assert first == {"a": 10.0, "b": 6.0, "c": 8.0, "d": 1.0, "e": 4.0}
    # c (8 s of work behind it) before b: done at 10 s, the critical path, not 12 s
    two = sch.simulate(jobs, secs, 2, first)
    assert two["c"] == (2.0, 9.0) and two["b"] == (4.0, 9.0) and two["d"] == (9.0, 10.0)
    # the real scheduler starts the ready stages in that order too
    log = tmp_path / "order.log"
    code = "open({!r}, 'a').write('{}\\n')"
    real = [
        Job(j.name, (sys.executable, "-c", code.format(str(log), j.name)), j.needs) for j in jobs
    ]
    sch.run_jobs(real, 1, out=lambda _s: None, priority=first)
    assert log.read_text().split() == ["a", "c", "b", "e", "d"]  # e (4 s) before d (1 s)
