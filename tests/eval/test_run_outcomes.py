"""What a run records when prompts do not fit, requests hang or the user presses Ctrl-C, and
how its exit status judges it (clinlib.eval.harness.outcomes, clinlib.eval.harness.pool, clinlib.llm.context),
over real loopback HTTP (FaultServer) on the tiny hand-made profile of test_runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.guards import StageError
from clinlib.eval.harness import outcomes, runner
from clinlib.eval.harness.estimate import counter_notes
from clinlib.eval.harness.prompts import build_messages
from clinlib.llm import CacheError, ResponseCache, count_tokens, default_cache_path
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.strategies import question_contexts
from tests.eval import test_runner as tr
from tests.eval.test_runner import (
    FAKE_KEY,
    KEY_ENV,
    answer,
    make_questions,
    raw_parts,
    write_config,
)

# test_runner's fixtures: the tiny profile (two hand-built patients, 12 hand-made questions).
dialogues = tr.dialogues
profile = tr.profile

FAST = {"backoff_base_s": 0.001, "backoff_max_s": 0.01, "max_retries": 3, "timeout_s": 30.0}


def prompt_tokens(profile: str, strategy: str) -> list[int]:
    """Each question's prompt tokens under ``strategy`` (o200k: gpt-4o-mini's own encoding)."""
    qs = make_questions()
    ctx = question_contexts(qs, strategy, profile, "post")
    return [count_tokens(build_messages(q, c), "gpt-4o-mini")
            for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True)]  # fmt: skip


def window_between(profile: str) -> int:
    """A window every no-context-blind prompt fits (with the 80-token cap) and no
    full-context prompt does (even with the smallest cap, 60)."""
    small, large = (
        prompt_tokens(profile, "no-context-blind"),
        prompt_tokens(profile, "full-context"),
    )
    window = max(small) + 80
    assert min(large) + 60 > window, (max(small), min(large))  # the fixture allows a split
    return window


def test_prompts_that_cannot_fit_are_recorded_not_sent(profile, tmp_path):
    window = window_between(profile)
    with FaultServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cfg.write_text(cfg.read_text() + f"context_window = {window}\n")
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind", "full-context"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, client_options=FAST))  # fmt: skip
        assert srv.n_requests == 12  # the 12 no-context prompts only
        preds = raw_parts(profile)
        full = preds[preds["strategy"] == "full-context"]
        assert len(full) == 12 and (full["error_kind"] == "context_overflow").all()
        assert full["error"].str.startswith("context_overflow: not sent: prompt ").all()
        assert full["error"].str.contains(f"> context window {window:,} ", regex=False).all()
        row = summary.set_index("strategy").loc["full-context"]
        assert (row["new_errors"], row["new_failures"]) == (12, {"context overflow": 12})
        with pytest.raises(StageError, match=r"12 ended in an error.*context overflow x12 "
                           r"\(.*larger window.*The rows are recorded"):  # fmt: skip
            outcomes.check_run("run", summary)
        # A re-run sends nothing and is judged by its own (no) rows: no exit 2.
        again = runner.run(runner.RunSpec(profile, ["no-context-blind", "full-context"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False))  # fmt: skip
        assert srv.n_requests == 12 and again["new_predictions"].sum() == 0
        assert outcomes.check_run("run", again) == [
            "run: nothing new was asked; 12 stored row(s) of earlier runs hold errors: re-run "
            "with --retry-errors to ask them again"
        ]
        retried = runner.run(runner.RunSpec(profile, ["full-context"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, retry_errors=True))  # fmt: skip
        assert srv.n_requests == 12 and retried.loc[0, "new_failures"] == {"context overflow": 12}


def test_the_window_the_server_reports_is_used(profile, tmp_path):
    window = window_between(profile)
    models = [{"id": "gpt-4o-mini", "object": "model", "context_length": window}]
    with FaultServer(answer=answer, models=models) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)  # no context_window in it
        runner.run(
            runner.RunSpec(profile, ["full-context"], ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        preds = raw_parts(profile)
        assert srv.n_requests == 0 and (preds["error_kind"] == "context_overflow").all()
        assert preds["error"].str.endswith("(server)").all()


def test_a_server_refusal_for_length_is_context_overflow_not_retried(profile, tmp_path):
    def script(index, payload, attempt):
        return "overflow" if "\nQ3:" in last_user_text(payload["messages"]) else None

    with FaultServer(script=script, answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, client_options=FAST))  # fmt: skip
        assert srv.n_requests == 12  # the 400 was not retried
        row = runner.load_predictions(profile).set_index("qid").loc["T1-q03"]
        assert row["error_kind"] == "context_overflow" and "maximum context length" in row["error"]
        assert summary.loc[0, "new_failures"] == {"context overflow": 1}
        assert outcomes.check_run("run", summary) == [
            "run: of the 12 prediction(s) this run recorded, 1 ended in an error and 0 are empty "
            f"completions: context overflow x1 ({outcomes.REMEDIES['context overflow']})"
        ]


def test_a_hung_request_holds_one_slot_not_its_batch(profile, tmp_path):
    """Q0 hangs until released; the other 11 questions are answered and written meanwhile
    (batch-gather would hold Q0's batch-mates, and every later batch, behind it)."""

    def script(index, payload, attempt):
        return "hang" if "\nQ0:" in last_user_text(payload["messages"]) else None

    with FaultServer(script=script, answer=answer, hang_s=600) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        failure: list[BaseException] = []

        def go() -> None:
            try:
                runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, batch_size=2, client_options={"timeout_s": 600, "max_retries": 0}))  # fmt: skip
            except BaseException as exc:  # surfaced below
                failure.append(exc)

        thread = threading.Thread(target=go)
        thread.start()
        pdir = runner.predictions_dir(profile)
        deadline = time.monotonic() + 120  # a ceiling for a broken pool, not a timing margin
        while time.monotonic() < deadline and len(list(pdir.glob("part-*.parquet"))) < 5:
            time.sleep(0.05)
        written = raw_parts(profile)
        hung = [r for r in srv.records if "\nQ0:" in r.user_text]
        assert thread.is_alive() and len(hung) == 1  # Q0 is still hung ...
        assert len(written) >= 10 and "T1-q00" not in set(written["qid"])  # ... the rest done
        srv.release_hangs()
        thread.join(120)
        assert not thread.is_alive() and not failure
    preds = raw_parts(profile)
    assert len(preds) == 12 and not preds.duplicated(list(runner.KEY_COLUMNS)).any()
    assert preds["error"].isna().all() and srv.n_requests == 12


def summary_of(new: int, errors: int, empty: int, failures: dict, stored_errors: int = 0):
    return pd.DataFrame({"n": [20], "n_predicted": [20], "errors": [stored_errors + errors],
                         "new_predictions": [new], "new_errors": [errors], "new_empty": [empty],
                         "new_failures": [failures]})  # fmt: skip


def test_check_run_names_each_class_with_its_remedy_and_judges_this_run_only():
    with pytest.raises(StageError, match=r"^run: 0 predictions in 1 cell\(s\) \(5 questions"):
        outcomes.check_run("run", pd.DataFrame({"n": [5], "n_predicted": [0], "errors": [0]}))
    bad = summary_of(10, 3, 1, {"transport error": 1, "context overflow": 2})
    with pytest.raises(StageError) as err:
        outcomes.check_run("run", bad)
    text = str(err.value)
    assert text.startswith("run: of the 10 prediction(s) this run recorded, 3 ended in an error "
                           "and 1 are empty completions: context overflow x2 (")  # fmt: skip
    assert "transport error x1 (answers already received are cached; re-run the same " in text
    assert "--retry-errors" in text and "empty completion x1 (" in text and "--retry-empty" in text
    assert text.endswith("The rows are recorded (30% errors > 20% allowed); pass --accept-errors "
                         "to accept them and exit 0")  # fmt: skip
    assert "dropped" not in text
    assert outcomes.check_run("run", bad, allow_drops=True) == [text.split(". The rows")[0]]
    # 2 of 10 errors (20%) pass with a line; empty completions alone never fail a run ...
    assert len(outcomes.check_run("run", summary_of(10, 2, 5, {"batch expiry": 2}))) == 1
    # ... unless no row of the run is an answer.
    with pytest.raises(StageError, match=r"no usable answer"):
        outcomes.check_run("run", summary_of(10, 1, 9, {"request refused": 1}))
    # Nothing new sent: earlier rows' errors are mentioned, never judged.
    assert outcomes.check_run("run", summary_of(0, 0, 0, {}, stored_errors=20)) == [
        "run: nothing new was asked; 20 stored row(s) of earlier runs hold errors: re-run with "
        "--retry-errors to ask them again"
    ]
    assert outcomes.check_run("run", summary_of(10, 0, 0, {})) == []
    assert outcomes.interrupted_line(KeyboardInterrupt(), "clintrace run -p quick") == (
        "interrupted before any question was asked; nothing was saved (prep answers received "
        "are cached); run again: clintrace run -p quick"
    )


def test_failure_classes_of_new_and_older_rows():
    assert outcomes.failure_class("batch_expired") == "batch expiry"
    assert outcomes.failure_class("batch_failed") == "batch job failure"
    assert outcomes.failure_class("timeout") == "transport error"
    assert outcomes.failure_class("context_overflow") == "context overflow"
    # rows written before error_kind existed: by the client's message
    assert outcomes.failure_class(None, "timeout after 7 attempt(s): timed out") == (
        "transport error"
    )
    assert outcomes.failure_class(
        pd.NA, "client_error after 1 attempt(s): HTTP 400: Requested tokens (9120) exceed "
        "context window of 8192"
    ) == "context overflow"  # fmt: skip
    assert outcomes.failure_class(None, "client_error after 1 attempt(s): HTTP 401: bad key") == (
        "request refused"
    )


def test_summary_counts_only_this_runs_rows_when_some_have_no_run_id():
    # one stored row without a run_id (NA: written before run ids, or scored elsewhere), one
    # error row of this run, one of an earlier run: this run's counts are 1 row, 1 error
    from clinlib.eval.harness.store import CELL_COLUMNS, PREDICTION_DTYPES

    def row(qid, run_id, error):
        r = dict.fromkeys(PREDICTION_DTYPES)
        r.update(qid=qid, task="T1", strategy="full-context", backbone="b", prep_model="p",
                 setting="post", response="1", correct=error is None, correct_lenient=error is None,
                 parse_failed=False, empty=False, input_tokens=1, output_tokens=1, cached_tokens=0,
                 cost_usd=0.0, error=error, error_kind="timeout" if error else None, run_id=run_id)  # fmt: skip
        return r

    preds = pd.DataFrame([row("q0", None, None), row("q1", "now", "timeout after 7 attempt(s)"),
                          row("q2", "old", "timeout after 7 attempt(s)")])  # fmt: skip
    preds = preds.astype({c: t for c, t in PREDICTION_DTYPES.items() if t in ("string", "boolean")})
    assert preds["run_id"].isna().sum() == 1
    cell = tuple(preds.iloc[0][list(CELL_COLUMNS)])
    out = runner.summarize(preds, [("b", cell, 3, 0)], run_id="now").iloc[0]
    assert (out["n_predicted"], out["errors"], out["new_errors"]) == (3, 2, 1)
    assert out["new_failures"] == {"transport error": 1}


def cached_answers(profile: str) -> int:
    """Answers in the profile's response cache (each committed as it arrives; the run has
    buffered its row in the same event-loop step)."""
    path = default_cache_path(profile)
    if not path.is_file():
        return 0
    try:
        with ResponseCache(path, readonly=True) as cache:
            return len(cache)
    except CacheError:  # created by the child, its schema not yet written
        return 0


CHILD = """
import signal
import sys
from pathlib import Path
# A terminal starts a command with SIGINT unblocked and at its default action. A child of a
# test process inherits that process's SIG_IGN dispositions and signal mask instead: pytest
# started as a background job of a non-interactive shell (`make test &`, a CI or agent
# runner) has SIGINT ignored, Python keeps an inherited SIG_IGN, and asyncio.run installs its
# Ctrl-C handler only over the default one, so the child never acts on SIGINT (issue 33).
# Start from a terminal's state; report what was inherited.
inherited = signal.pthread_sigmask(signal.SIG_SETMASK, set())
was = signal.signal(signal.SIGINT, signal.default_int_handler)
print(f"child-signal-state: blocked={sorted(int(s) for s in inherited)} sigint={was!r}",
      file=sys.stderr, flush=True)
import clinlib.core.config as config
config.BUILD_DIR = Path(sys.argv[1])
from clinlib.cli import app
args = ["run", "--profile", "tiny", "--strategies", "no-context-blind", "--backbones", "fault",
        "--config", sys.argv[2]]
sys.argv = ["clintrace", *args]
app(args, prog_name="clintrace")
"""


def _proc_evidence(pid: int) -> str:
    """The child's signal state and where each of its threads waits (Linux /proc), for a
    failure message: pending / blocked / ignored / caught masks per thread and its wchan."""
    lines = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{tid}/status") as fh:
                keep = [ln.strip() for ln in fh if ln.startswith(("State", "SigPnd", "ShdPnd",
                                                                  "SigBlk", "SigIgn", "SigCgt"))]  # fmt: skip
            with open(f"/proc/{pid}/task/{tid}/wchan") as fh:
                keep.append(f"wchan {fh.read().strip()}")
            lines.append(f"thread {tid}: " + ", ".join(keep))
    except OSError as exc:
        lines.append(f"/proc not readable: {exc}")
    return "\n".join(lines)


class _Stderr:
    """The child's stderr read as it comes (a thread), so a hung child still shows its lines."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def text(self, timeout: float = 0.0) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


# Issue 33, root cause found: the flake was the test process's own SIGINT disposition. Run
# from a background job (SIGINT = SIG_IGN, inherited by xdist workers and by the child), the
# old test failed every time (child never acted on SIGINT, TimeoutExpired after 120 s;
# reproduced on this machine) and passed from a terminal. The child now starts from a
# terminal's signal state (CHILD above) and warns when the test process handed it anything
# else; a hung child fails with its /proc signal masks, its threads' wait channels and its
# stderr. Still run in its own process (marker `isolated`): it loads the 2 cores for ~40 s.
@pytest.mark.isolated
def test_ctrl_c_ends_with_one_line_and_the_command_resumes(profile, tmp_path):
    def script(index, payload, attempt):
        return "hang" if "\nQ5:" in last_user_text(payload["messages"]) else None

    env = {**os.environ, KEY_ENV: FAKE_KEY, "PYTHONPATH": str(config.REPO_ROOT)}
    with FaultServer(script=script, answer=answer, hang_s=600) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(cfg)],
                                 env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
        stderr = _Stderr(child.stderr)
        try:
            deadline = time.monotonic() + 300  # a ceiling, not a margin: we wait for the state
            while time.monotonic() < deadline and cached_answers(profile) < 11:
                assert child.poll() is None, stderr.text(5)
                time.sleep(0.05)
            assert cached_answers(profile) == 11, stderr.text()
            assert any("\nQ5:" in r.user_text for r in srv.records)  # Q5 is hung
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=300)
            except subprocess.TimeoutExpired:
                evidence = _proc_evidence(child.pid)
                pytest.fail(f"the child did not end within 300 s of SIGINT\n{evidence}\n"
                            f"its stderr:\n{stderr.text()}")  # fmt: skip
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        err = stderr.text(10)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        clean = "child-signal-state: blocked=[] sigint=<built-in function default_int_handler>"
        if lines[0] != clean:  # evidence for issue 33, not this test's subject: warn only
            warnings.warn(f"the test process handed its child an odd signal state: {lines[0]}",
                          stacklevel=1)  # fmt: skip
        assert child.returncode == 130, err
        assert lines[-1].startswith("interrupted: 11 prediction(s) of this run are saved; every "
                                    "answer received is in the response cache (")  # fmt: skip
        assert lines[-1].endswith(
            f"resume with: clintrace run --profile tiny --strategies no-context-blind "
            f"--backbones fault --config {cfg}"
        )
        assert "Traceback" not in err
        assert len(raw_parts(profile)) == 11
        srv.release_hangs()
        runner.run(
            runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        preds = raw_parts(profile)
        assert len(preds) == 12 and not preds.duplicated(list(runner.KEY_COLUMNS)).any()
        assert srv.n_requests == 13  # Q5 asked again (it was never answered), nothing else


class CharTokenizer:
    """A model's "own" tokenizer for the test: one token per character of every content."""

    name = "chars:test"

    def count_text(self, text: str) -> int:
        return len(text)

    def count_messages(self, messages) -> int:
        return sum(len(m["content"]) for m in messages)


def test_estimate_counts_with_the_backbones_own_tokenizer_and_flags_overflow(profile, tmp_path):
    from clinlib.llm import tokens

    cfg = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1")  # never contacted
    text = cfg.read_text().replace('model = "gpt-4o-mini"', 'model = "char-model"')
    cfg.write_text(text + "context_window = 400\n")
    qs = make_questions()
    ctx = question_contexts(qs, "full-context", profile, "post")
    chars = [sum(len(m["content"]) for m in build_messages(q, c))
             for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True)]  # fmt: skip
    caps = [60] * 10 + [80, 80]
    tokens.register_tokenizer("char-model", CharTokenizer)
    try:
        est = runner.estimate(profile, ["full-context"], ["fault"], config=cfg)
        assert est.loc[0, "counter"] == "chars:test" and est.loc[0, "input_tokens"] == sum(chars)
        assert est.loc[0, "overflow"] == sum(n + m > 400 for n, m in zip(chars, caps, strict=True))
        assert 0 < est.loc[0, "overflow"] <= 12
        assert counter_notes(est, lambda name: False) == [
            f"fault: tokens counted with chars:test; {est.loc[0, 'overflow']} question(s) exceed "
            "its context window: `run` records them as context_overflow without sending them"
        ]
        tokens.register_tokenizer("char-model", lambda: None)  # the extra is not installed
        est = runner.estimate(profile, ["full-context"], ["fault"], config=cfg)
        assert est.loc[0, "counter"] == "cl100k_base (approximation)"
        assert counter_notes(est, lambda name: True)[0].startswith(
            "fault: tokens counted with cl100k_base (approximation); its own GGUF tokenizer "
            "needs the local extra (make install-local), the server need not run"
        )
        assert est.loc[0, "input_tokens"] == sum(
            count_tokens(build_messages(q, c), "char-model")
            for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True)
        )
    finally:
        tokens._TOKENIZER_LOADERS.pop("char-model", None)
        tokens.model_tokenizer.cache_clear()


def test_a_batch_expiry_is_named_as_such(profile, tmp_path):
    """An expired batch line and a refused one are 'batch expiry' and 'request refused' in
    the run's summary and its end-of-run line, not 'transport error'."""
    from clinlib.llm.batchserver import BatchServer

    faults = {"T1-q01|no-context-blind|fault|none|post": "expired",
              "T1-q03|no-context-blind|fault|none|post": "error"}  # fmt: skip
    with BatchServer(answer=answer, line_faults=faults) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, mode="batch", batch_options={"poll_interval_s": 0.001}))  # fmt: skip
    kinds = runner.load_predictions(profile).set_index("qid")["error_kind"]
    assert (kinds["T1-q01"], kinds["T1-q03"]) == ("batch_expired", "client_error")
    assert summary.loc[0, "new_failures"] == {"batch expiry": 1, "request refused": 1}
    [line] = outcomes.check_run("run", summary)
    assert "batch expiry x1 (the provider did not answer within its batch window; re-run " in line
    assert "request refused x1 (" in line and "transport error" not in line


def test_every_request_failing_is_recorded_once_then_retried(profile, tmp_path):
    """100% faults: every question gets exactly one error row (transport error, with its
    remedy), the exit status check fails; --retry-errors on a healthy server then answers
    each once, and the latest rows supersede the errors."""
    with FaultServer(faults={"500": 1.0}, answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, batch_size=5, client_options={**FAST, "max_retries": 1}))  # fmt: skip
        assert srv.n_requests == 24  # 12 questions x 2 attempts
    raw = raw_parts(profile)
    assert len(raw) == 12 and not raw.duplicated(list(runner.KEY_COLUMNS)).any()
    assert (raw["error_kind"] == "server_error").all()
    assert summary.loc[0, "new_failures"] == {"transport error": 12}
    with pytest.raises(StageError, match=r"12 ended in an error .*transport error x12 .*"
                       r"--retry-errors.*\(100% errors > 20% allowed\)"):  # fmt: skip
        outcomes.check_run("run", summary)
    with FaultServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        again = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, retry_errors=True))  # fmt: skip
        assert srv.n_requests == 12
    assert outcomes.check_run("run", again) == []
    assert len(raw_parts(profile)) == 24 and runner.load_predictions(profile)["error"].isna().all()


def test_limit_help_says_first_n_per_task():
    from typer.testing import CliRunner

    from clinlib.cli import app

    for command in ("run", "estimate"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert "the first N questions of each task" in out, command
        assert "questions per cell" not in out
