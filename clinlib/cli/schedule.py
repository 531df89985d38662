"""Run a graph of pipeline stages side by side: each stage a child process, at most ``jobs`` at
once, a stage started as soon as every stage it needs has finished (``clintrace pipeline``,
whose graph is :data:`clinlib.core.guards.PIPELINE_STEPS`).

* **Order.** Among the ready stages the earliest declared starts first, so with one job the
  stages run exactly in their declared (sequential) order.
* **Measures.** Each stage's wall seconds, start and end (offsets from the run's start) and CPU
  seconds: the child's ``wait4`` resource usage, which includes every descendant it waited for
  (stage worker processes, notebook kernels).
* **Output.** Each line a stage prints goes out whole, prefixed with the stage's name, so two
  stages' progress never splices into one line (a progress bar's ``\\r`` redraws: its last
  state).
* **Failure.** The first stage that exits non-zero stops new launches; the running ones finish;
  :func:`run_jobs` returns every outcome and :func:`failure_line` names the failed stage in one
  line. Ctrl-C (or SIGTERM) stops the running children the same way (SIGTERM: a stage replaces
  nothing) and re-raises.

A child of a command that holds the profile's writer lock shares it
(:mod:`clinlib.core.lock`: the holder lists itself in ``$CLINTRACE_WRITER_LOCKS``, which the
children inherit), so a stage run here never waits for its own parent.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinlib.core import config

# lines of a failed stage's stderr shown with its one-line error
TAIL_LINES = 12
POLL_S = 0.05


class ScheduleError(ValueError):
    """A stage graph that cannot run (a cycle, or a need that is not a stage); one line."""


@dataclass(frozen=True)
class Job:
    """One stage: its name, the command that runs it, the stages it needs."""

    name: str
    argv: tuple[str, ...]
    needs: tuple[str, ...] = ()


@dataclass
class Outcome:
    """How one stage ran: exit code, wall / CPU seconds, start / end offsets (s)."""

    name: str
    rc: int
    seconds: float
    cpu_seconds: float
    start: float
    end: float
    tail: list[str] = field(default_factory=list)


def default_jobs() -> int:
    """Stages run at once by default: one per core, at most two."""
    return max(1, min(2, os.cpu_count() or 1))


def check_graph(jobs: Sequence[Job]) -> list[str]:
    """The stage names in a topological order (the declared order among ready ones).

    Raises:
        ScheduleError: a duplicate name, a need that is no stage, or a cycle.
    """
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ScheduleError(f"stage graph: duplicate stage {_first_dup(names)!r}")
    for job in jobs:
        unknown = [n for n in job.needs if n not in names]
        if unknown:
            raise ScheduleError(f"stage graph: {job.name!r} needs {unknown[0]!r}, not a stage")
    order: list[str] = []
    while len(order) < len(jobs):
        ready = next_ready(jobs, set(order), set(order))
        if not ready:
            rest = [n for n in names if n not in order]
            raise ScheduleError(f"stage graph: a cycle among {', '.join(rest)}")
        order.append(ready[0])
    return order


def _first_dup(names: Sequence[str]) -> str:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return ""


def next_ready(
    jobs: Sequence[Job],
    done: set[str],
    started: set[str],
    priority: Mapping[str, float] | None = None,
) -> list[str]:
    """The stages not yet started whose needs are all done: highest ``priority`` first (none
    given: all equal), then in declared order."""
    ready = [j.name for j in jobs if j.name not in started and set(j.needs) <= done]
    if priority:
        ready.sort(key=lambda n: -priority.get(n, 0.0))  # stable: declared order among equals
    return ready


def remaining_path(jobs: Sequence[Job], seconds: Mapping[str, float]) -> dict[str, float]:
    """Per stage, its own seconds plus the longest chain of stages that need it (transitively):
    start the stage with the most work still behind it first (critical-path scheduling)."""
    after: dict[str, float] = {}
    for name in reversed(check_graph(jobs)):
        users = [j.name for j in jobs if name in j.needs]
        after[name] = float(seconds.get(name, 0.0)) + max((after[u] for u in users), default=0.0)
    return after


def critical_path(jobs: Sequence[Job], outcomes: Mapping[str, Outcome]) -> tuple[list[str], float]:
    """The chain of needs with the largest summed wall seconds (the least a run of these
    stages takes however many cores), and that sum."""
    best: dict[str, tuple[float, list[str]]] = {}
    for name in check_graph(jobs):
        job = next(j for j in jobs if j.name == name)
        own = outcomes[name].seconds if name in outcomes else 0.0
        prev = max((best[n] for n in job.needs), key=lambda b: b[0], default=(0.0, []))
        best[name] = (prev[0] + own, [*prev[1], name])
    if not best:
        return [], 0.0
    total, chain = max(best.values(), key=lambda b: b[0])
    return chain, total


def simulate(
    jobs: Sequence[Job],
    seconds: Mapping[str, float],
    max_jobs: int,
    priority: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, float]]:
    """(start, end) of each stage if each took ``seconds[name]`` on its own core and
    :func:`run_jobs` ran them ``max_jobs`` at a time: the schedule on an idle machine, from a
    table of measured CPU seconds (a stage with worker processes counts as one core here)."""
    order, now = check_graph(jobs), 0.0
    ends: dict[str, float] = {}
    running: dict[str, float] = {}
    span: dict[str, tuple[float, float]] = {}
    while len(span) < len(order):
        done = {n for n, e in ends.items() if e <= now}
        ready = next_ready(jobs, done, set(span), priority)
        for name in ready[: max(1, max_jobs) - len(running)]:
            span[name] = (now, now + float(seconds.get(name, 0.0)))
            ends[name] = running[name] = span[name][1]
        now = min(running.values())
        running = {n: e for n, e in running.items() if e > now}
    return span


class _Printer:
    """Writes whole lines from several threads, each under its stage's prefix."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.out(text)


def _pump(stream, prefix: str, printer: _Printer, tail: deque | None) -> None:
    """Forward a child's stream line by line (``\\r`` redraws: the last one) until EOF."""
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", "replace").rstrip("\n")
        text = next((p for p in reversed(text.split("\r")) if p.strip()), "")
        if not text:
            continue
        if tail is not None:
            tail.append(text)
        printer.line(f"{prefix}{text}")
    stream.close()


@dataclass
class _Running:
    job: Job
    proc: subprocess.Popen
    start: float
    threads: list[threading.Thread]
    tail: deque


def _launch(job: Job, t0: float, printer: _Printer, width: int, env, cwd) -> _Running:
    proc = subprocess.Popen(
        list(job.argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    prefix = f"[{job.name:<{width}}] "
    tail: deque = deque(maxlen=TAIL_LINES)
    threads = [
        threading.Thread(target=_pump, args=(proc.stdout, prefix, printer, None), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, prefix, printer, tail), daemon=True),
    ]
    for t in threads:
        t.start()
    printer.line(f"== {job.name} (started at {time.perf_counter() - t0:.1f}s)")
    return _Running(job, proc, time.perf_counter(), threads, tail)


def _reap(run: _Running, t0: float) -> Outcome | None:
    """The finished child's outcome, or None while it runs (its own pid only: never reaps a
    process of the caller's)."""
    pid, status, usage = os.wait4(run.proc.pid, os.WNOHANG)
    if pid == 0:
        return None
    end = time.perf_counter()
    rc = os.waitstatus_to_exitcode(status)
    run.proc.returncode = rc  # reaped here; Popen must not wait for it again
    for t in run.threads:
        t.join()
    return Outcome(
        name=run.job.name,
        rc=rc,
        seconds=end - run.start,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        start=run.start - t0,
        end=end - t0,
        tail=list(run.tail),
    )


def run_jobs(
    jobs: Sequence[Job],
    max_jobs: int | None = None,
    out: Callable[[str], None] = print,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    priority: Mapping[str, float] | None = None,
) -> list[Outcome]:
    """Run ``jobs`` (module docstring): returns the outcome of every stage that ran, in the
    order they finished; a stage after a failure does not start. ``priority``: which ready
    stage starts first (:func:`remaining_path`; none: declared order).

    Raises:
        ScheduleError: the graph cannot run (:func:`check_graph`).
    """
    check_graph(jobs)
    limit = max(1, int(max_jobs or default_jobs()))
    printer = _Printer(out)
    width = max((len(j.name) for j in jobs), default=0)
    t0 = time.perf_counter()
    running: list[_Running] = []
    outcomes: list[Outcome] = []
    started: set[str] = set()
    done: set[str] = set()
    failed = False
    try:
        while True:
            if not failed:
                for name in next_ready(jobs, done, started, priority)[: limit - len(running)]:
                    job = next(j for j in jobs if j.name == name)
                    running.append(_launch(job, t0, printer, width, env, cwd))
                    started.add(name)
            if not running:
                return outcomes
            time.sleep(POLL_S)
            for run in list(running):
                outcome = _reap(run, t0)
                if outcome is None:
                    continue
                running.remove(run)
                outcomes.append(outcome)
                mark = "ok" if outcome.rc == 0 else f"FAILED (exit {outcome.rc})"
                printer.line(
                    f"== {outcome.name} {mark} in {outcome.seconds:.1f}s "
                    f"(cpu {outcome.cpu_seconds:.1f}s)"
                )
                if outcome.rc == 0:
                    done.add(outcome.name)
                else:
                    failed = True
    except BaseException:
        _stop(running)
        raise


def _stop(running: Sequence[_Running]) -> None:
    """SIGTERM every running child (a stage then replaces nothing) and wait for it."""
    for run in running:
        if run.proc.returncode is None:
            try:
                run.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    for run in running:
        if run.proc.returncode is None:
            try:
                run.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                run.proc.kill()
                run.proc.wait()


def failure_line(outcomes: Sequence[Outcome]) -> str | None:
    """One line naming the first failed stage and its last stderr line (None: none failed)."""
    bad = next((o for o in outcomes if o.rc != 0), None)
    if bad is None:
        return None
    last = bad.tail[-1].strip() if bad.tail else "no output on stderr"
    return f"stage {bad.name!r} failed (exit {bad.rc}): {last}"


def exit_code(outcomes: Sequence[Outcome]) -> int:
    """The first failed stage's exit code (1 if it died of a signal), else 0."""
    bad = next((o for o in outcomes if o.rc != 0), None)
    if bad is None:
        return 0
    return bad.rc if 0 < bad.rc < 256 else 1


def stage_command(build: Path, args: Sequence[str]) -> tuple[str, ...]:
    """``clintrace <args>`` as a child process writing under ``build`` (the parent's
    ``data/build``, which a test may have moved): this module run as a script."""
    return (sys.executable, "-m", "clinlib.cli.schedule", str(build), *args)


def child_env(repo_root: Path) -> dict[str, str]:
    """The parent's environment (its writer-lock entry included) with the kit importable and
    the children's output unbuffered, so their lines arrive as they are printed."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo_root), path) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _child_main(argv: Sequence[str]) -> None:
    """``python -m clinlib.cli.schedule BUILD_DIR ARGS...``: ``clintrace ARGS`` on that build
    (the command line's app is looked up here: clinlib.cli imports this module)."""
    config.BUILD_DIR = Path(argv[0])
    importlib.import_module("clinlib.cli").app(args=list(argv[1:]), prog_name="clintrace")


if __name__ == "__main__":
    _child_main(sys.argv[1:])
