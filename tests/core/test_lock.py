"""One writer per profile, and no half states (issue 26 §4): the profile lock, the staged
swap of a stage's outputs, a read-only build folder and an empty --profile, each through the
real CLI or the real stage code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config, guards, lock
from clinlib.core.io import Staging
from tests import hosp_fixture

CLI = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@contextmanager
def _holder(build: Path, profile: str, hold_s: float = 60.0):
    """Another process holding ``profile``'s writer lock (the real lock module)."""
    code = textwrap.dedent(f"""
        import sys, time
        from clinlib.core import config, lock
        config.BUILD_DIR = __import__("pathlib").Path({str(build)!r})
        with lock.profile_lock({profile!r}, "clintrace run --profile {profile}"):
            print("held", flush=True)
            time.sleep({hold_s})
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_writer_is_refused_naming_the_holder(tmp_build):
    with _holder(tmp_build, "t") as proc:
        before = time.time()
        result = CLI.invoke(app, ["run", "--profile", "t", "--backbones", "reference"])
        line = _one_line_error(result, "profile 't' is being written by", f"pid {proc.pid}",
                               "`clintrace run --profile t`", "since ", "UTC")  # fmt: skip
        # the recorded start is the holder's, a moment before this test asked
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(before))
        assert stamp[:13] in line
        # nothing was written by the refused run
        assert not (tmp_build / "t" / "predictions").exists()
        assert not (tmp_build / "t" / "manifests").exists()
        # every writing stage takes the same lock
        for cmd in (["dialogues"], ["questions"], ["strategies"], ["evaluate-offline"],
                    ["notebooks"], ["pipeline"], ["population"],
                    ["run", "--tasks", "population"]):  # fmt: skip
            _one_line_error(CLI.invoke(app, [*cmd, "--profile", "t"]), "is being written by")
    # the holder is gone (killed): the kernel released its lock
    result = CLI.invoke(app, ["dialogues", "--profile", "t"])
    assert "is being written by" not in result.output
    assert "events.parquet does not exist" in result.output


def test_readers_need_no_lock(tmp_build):
    with _holder(tmp_build, "t"):
        result = CLI.invoke(app, ["info", "--profile", "t"])
        assert result.exit_code == 0, result.output


def test_a_waiting_writer_gets_the_lock_when_the_holder_ends(tmp_build):
    with _holder(tmp_build, "t", hold_s=1.0) as proc:
        t0 = time.perf_counter()
        with lock.profile_lock("t", "test", wait=30):
            assert time.perf_counter() - t0 < 29
            assert lock.holder("t")["pid"] == os.getpid()
        proc.wait(timeout=30)
    with _holder(tmp_build, "t") as proc, pytest.raises(lock.ProfileBusy, match=r"waited 0.3 s"):
        with lock.profile_lock("t", "test", wait=0.3):
            pass


def test_the_lock_is_reentrant_and_leaves_no_holder(tmp_build):
    with lock.profile_lock("t", "outer") as root:
        with lock.profile_lock("t", "inner"):
            assert lock.holder("t")["command"] == "outer"
        assert lock.holder("t")["command"] == "outer"
        assert lock.lock_paths("t")[1].exists()
        assert not root.exists()  # the lock makes no profile folder
    assert lock.holder("t") is None


def test_command_line_names_the_program_not_its_path():
    assert lock.command_line(["/x/.venv/bin/clintrace", "run", "-p", "q"]) == "clintrace run -p q"


def test_an_empty_profile_is_refused():
    result = CLI.invoke(app, ["cohort", "--mimic-dir", "/nonexistent", "--profile", ""])
    _one_line_error(result, "--profile is empty")
    _one_line_error(CLI.invoke(app, ["dialogues", "--profile", "  "]), "--profile is empty")
    with pytest.raises(ValueError, match="empty"):
        config.resolve_profile("")


@contextmanager
def _unprivileged():
    """Drop to an unprivileged effective uid (root ignores file modes), if root."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.fixture()
def open_dir():
    """A world-traversable scratch folder (pytest's tmp_path is 0700 to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="clintrace-ro-"))
    path.chmod(0o755)
    yield path
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    subprocess.run(["rm", "-rf", str(path)], check=False)


def test_a_read_only_build_folder_is_one_line(open_dir, monkeypatch):
    build = open_dir / "build"
    build.mkdir()
    monkeypatch.setattr(config, "BUILD_DIR", build)
    mimic = hosp_fixture.write_csv_dir(open_dir / "mimic")
    build.chmod(0o555)
    with _unprivileged():
        result = CLI.invoke(app, ["cohort", "--mimic-dir", str(mimic), "--profile", "t"])
    _one_line_error(result, str(build), "cannot write (Permission denied)")
    # writable for the lock, but not where the stage writes: still one line
    build.chmod(0o777)
    (build / "t" / "manifests").mkdir(parents=True)
    (build / "t").chmod(0o777)
    (build / "t" / "manifests").chmod(0o555)
    with _unprivileged():
        result = CLI.invoke(app, ["cohort", "--mimic-dir", str(mimic), "--profile", "t"])
    _one_line_error(result, "manifests", "cannot write (Permission denied)")


# --------------------------------------------------------------------------- no half states


def _write(name: str, value: int, profile: str = "p") -> None:
    pd.DataFrame({"x": [value]}).to_parquet(config.artifact_path(f"{name}.parquet", profile))


def _stage(stage: str, value: int, interrupt_after: int | None = None) -> None:
    """A stage writing each output (value ``value``) through its staging folder."""
    with guards.stage_run(stage, "p") as staging:
        for i, out in enumerate(guards.STAGES[stage][0]):
            if interrupt_after is not None and i == interrupt_after:
                raise KeyboardInterrupt
            pd.DataFrame({"x": [value]}).to_parquet(staging.path(f"{out}.parquet"))


def test_an_interrupted_stage_replaces_nothing(tmp_build):
    from clinlib.data.build import load

    _stage("cohort", 1)
    _stage("dialogues", 1)
    _stage("questions", 1)
    before = guards.read_manifest("questions", "p")
    with pytest.raises(KeyboardInterrupt):
        _stage("questions", 2, interrupt_after=2)  # questions and gates staged, then Ctrl-C
    for out in guards.STAGES["questions"][0]:
        assert load(out, "p")["x"].tolist() == [1]  # the old set, whole and current
    assert guards.read_manifest("questions", "p") == before
    assert not list((tmp_build / "p").glob(".staging-*"))
    # an interrupted first run leaves no manifest and no file
    with pytest.raises(KeyboardInterrupt):
        _stage("temporal_questions", 2, interrupt_after=1)
    assert guards.read_manifest("temporal_questions", "p") is None
    assert not config.artifact_path("temporal_questions.parquet", "p").exists()


def test_a_failed_question_stage_removes_its_whole_set(tmp_build, monkeypatch):
    from clinlib.tasks import build

    for out in ("questions", "gates", "question_availability"):
        (tmp_build / "p").mkdir(parents=True, exist_ok=True)
        _write(out, 1)
    monkeypatch.setattr(build, "load_inputs", lambda *a, **k: None)

    def no_questions(*a, **k):
        raise guards.StageError("questions: 0 of 139 target questions generated")

    monkeypatch.setattr(build, "build_question_set", no_questions)
    with pytest.raises(guards.StageError):
        build.build_questions("p")
    for out in ("questions", "gates", "question_availability"):
        assert not config.artifact_path(f"{out}.parquet", "p").exists(), out


def test_a_failed_gate_commits_its_report_as_one_unit(tmp_build, monkeypatch):
    from clinlib.tasks import build

    (tmp_build / "p").mkdir(parents=True)
    for out in ("questions", "gates", "question_availability"):
        _write(out, 1)
    qs = pd.DataFrame({"qid": ["a"], "task": ["T1"], "question": ["What was it?"]})
    avail = pd.DataFrame({"task": ["T1"], "candidates": [1]})
    gates = pd.DataFrame({"gate": ["L2"], "task": ["T1"], "n_checked": [1], "n_failed": [1],
                          "threshold": [0.0], "passed": [False], "severity": ["hard"]})  # fmt: skip
    monkeypatch.setattr(build, "load_inputs", lambda *a, **k: None)
    monkeypatch.setattr(build, "build_question_set", lambda *a, **k: (qs, avail, []))
    monkeypatch.setattr(build, "_check_nonempty", lambda *a, **k: None)
    monkeypatch.setattr(build, "run_validation_gates", lambda *a, **k: gates)
    with pytest.raises(ValueError):
        build.build_questions("p", counts={"T1": 1})
    assert not config.artifact_path("questions.parquet", "p").exists()
    assert pd.read_parquet(config.artifact_path("gates.parquet", "p"))["gate"].tolist()[0] == "L2"
    got = pd.read_parquet(config.artifact_path("question_availability.parquet", "p"))
    assert got["candidates"].tolist() == [1]
    assert pd.read_parquet(config.artifact_path("questions_rejected.parquet", "p"))[
        "qid"
    ].tolist() == ["a"]


def test_staging_commits_in_order_and_discards(tmp_path):
    staging = Staging(tmp_path, "s")
    staging.path("b.txt").write_text("b")
    staging.path("a.txt").write_text("a")
    assert staging.commit() == ["b.txt", "a.txt"]
    assert (tmp_path / "a.txt").read_text() == "a"
    staging.path("c.txt").write_text("c")
    staging.discard()
    assert not (tmp_path / "c.txt").exists() and not staging.dir.exists()


def test_sigterm_stops_a_writer_like_ctrl_c(tmp_build):
    _stage("cohort", 1)
    before = guards.read_manifest("cohort", "p")
    code = textwrap.dedent(f"""
        import os, signal, time
        from pathlib import Path
        import pandas as pd
        from clinlib.cli import common as cli
        from clinlib.core import config, guards
        config.BUILD_DIR = Path({str(tmp_build)!r})
        with cli.writer_lock("p"), guards.stage_run("cohort", "p") as staging:
            pd.DataFrame({{"x": [2]}}).to_parquet(staging.path("cohort.parquet"))
            os.kill(os.getpid(), signal.SIGTERM)  # `kill <pid>` mid-stage
            time.sleep(30)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-500:]
    assert pd.read_parquet(config.artifact_path("cohort.parquet", "p"))["x"].tolist() == [1]
    assert guards.read_manifest("cohort", "p") == before
    assert not list((tmp_build / "p").glob(".staging-*"))
    assert lock.holder("p") is None


def test_a_notebook_run_takes_the_lock_and_a_writers_child_shares_it(tmp_build, capsys):
    """Issue 26 §4 (h): runner.run, as notebooks 04, 06, 11 ... call it, is a writer: refused
    while another process holds the profile; but a kernel started by a holder (`clintrace
    notebooks`) inherits the holder's lock instead of refusing."""
    from clinlib.eval.harness import runner

    with _holder(tmp_build, "t") as proc:
        with pytest.raises(lock.ProfileBusy, match=f"pid {proc.pid}"):
            runner.run(runner.RunSpec("t", ["no-context-blind"], ["reference"]),
                       runner.RunOptions(progress=False, wait_for_lock=0))  # fmt: skip
    assert not (tmp_build / "t" / "predictions").exists()
    # by default a notebook's run waits its turn (make test runs two notebooks at a time):
    # it takes the lock once the holder ends, and only then fails, on the profile not built
    with _holder(tmp_build, "t", hold_s=1.0) as proc:
        with pytest.raises(Exception, match="does not exist") as info:
            runner.run(
                runner.RunSpec("t", ["no-context-blind"], ["reference"]),
                runner.RunOptions(progress=False),
            )
        assert not isinstance(info.value, lock.ProfileBusy)
        assert f"being written by pid {proc.pid}" in capsys.readouterr().err  # it waited
        proc.wait(timeout=30)
    child = textwrap.dedent(f"""
        from clinlib.core import config, lock
        config.BUILD_DIR = __import__("pathlib").Path({str(tmp_build)!r})
        with lock.profile_lock("t"):
            print("child wrote", flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with lock.profile_lock("t", "clintrace notebooks --profile t"):
        assert os.environ[lock.HELD_ENV].endswith(f"={os.getpid()}")
        shared = subprocess.run([sys.executable, "-c", child], env={**env, **os.environ},
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert shared.stdout.strip() == "child wrote", shared.stderr
        # a process that is not the holder's child (no inherited entry) is refused
        alien = {k: v for k, v in env.items() if k != lock.HELD_ENV}
        refused = subprocess.run([sys.executable, "-c", child], env=alien,
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
        assert refused.returncode != 0 and "is being written by" in refused.stderr
    assert lock.HELD_ENV not in os.environ  # released: nothing left for later children
