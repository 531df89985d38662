"""The evaluation harness (clinlib.eval.harness.runner) over real loopback HTTP (FaultServer).

A tiny profile under tmp_path: two hand-built patients' template dialogues and hand-made
questions whose answers the server's answer function gets right or wrong by design, so the
accuracies below are worked out by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.eval.harness import cells, parallel, runner, session
from clinlib.eval.harness.prompts import build_messages
from clinlib.llm import (
    Backbone,
    EgressRefusedError,
    ResponseCache,
    count_tokens,
    default_cache_path,
    register_backbone,
    unregister_backbone,
)
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.strategies import question_contexts
from tests import strategy_fixtures as sf

KEY_ENV = "CLINTRACE_RUNNER_TEST_KEY"
FAKE_KEY = "sk-runnertest-FAKE0123456789abcdef"
PRICE_IN, PRICE_OUT = 100.0, 400.0  # USD per million tokens: large, so budgets bite
N_T1 = 10
FAST = {"backoff_base_s": 0.001, "backoff_max_s": 0.01, "max_retries": 10, "timeout_s": 5.0}


@pytest.fixture(scope="module")
def dialogues() -> pd.DataFrame:
    return pd.concat(
        [sf.dialogue(sf.events_7001()), sf.dialogue(sf.events_7002())], ignore_index=True
    )


def make_questions() -> pd.DataFrame:
    """N_T1 value questions (Q0..Q9) and two T7 multiple-choice questions (Q10, Q11)."""
    rows = []
    for i in range(N_T1):
        rows.append({
            "qid": f"T1-q{i:02d}", "task": "T1", "subtype": "abnormal",
            "subject_ids": [7001 if i % 2 else 7002],
            "question": f"Q{i}: What did the Creatinine measurement show? Reply with the value "
                        "and its unit only (for example: 1.3 mg/dL).",
            "gold": f"1.{i} mg/dL", "options": [],
        })  # fmt: skip
    for i in (10, 11):
        rows.append({
            "qid": f"T7-q{i}", "task": "T7", "subtype": "drug", "subject_ids": [7001],
            "question": f"Q{i}: Which drug?\nOptions:\nA. Metformin\nB. Aspirin\nC. Insulin\n"
                        "D. Heparin\nReply with the letter of one option (A, B, C or D).",
            "gold": "A", "options": ["Metformin", "Aspirin", "Insulin", "Heparin"],
        })  # fmt: skip
    df = pd.DataFrame(rows)
    for col in ("anchor_event_ids", "evidence_turns"):
        df[col] = [[] for _ in range(len(df))]
    return df.assign(disease="diabetes", tertile="low", template_id=0, injection="", meta="{}")


def answer(messages) -> str:
    """Right for even-numbered questions, wrong for odd ones (Q11 replies in prose)."""
    text = last_user_text(messages)
    i = int(text.split("QUESTION\n", 1)[1].split(":", 1)[0][1:])
    if i == 10:
        return "A"
    if i == 11:
        return "The answer is A."  # strict parse fails, lenient parses A
    return f"1.{i} mg/dL" if i % 2 == 0 else "9.9 mg/dL"


@pytest.fixture()
def profile(tmp_path, monkeypatch, dialogues) -> str:
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    d = tmp_path / "tiny"
    d.mkdir()
    dialogues.to_parquet(d / "dialogues.parquet", index=False)
    make_questions().to_parquet(d / "questions.parquet", index=False)
    (d / "source.json").write_text(json.dumps({"kind": "synthetic", "credentialed": False}))
    return "tiny"


def write_config(path: Path, base_url: str, approved: bool = False) -> Path:
    path.write_text(
        "[backbones.fault]\n"
        f'base_url = "{base_url}"\nmodel = "gpt-4o-mini"\napi_key_env = "{KEY_ENV}"\n'
        f"price_input = {PRICE_IN}\nprice_output = {PRICE_OUT}\nprice_cache_read = 10.0\n"
        f"max_concurrency = 4\napproved_for_credentialed = {str(approved).lower()}\n"
    )
    return path


def raw_parts(profile: str) -> pd.DataFrame:
    return runner.load_predictions(profile, dedupe=False)


STRATS = ["no-context-blind", "full-context"]
N_KEYS = len(STRATS) * (N_T1 + 2)


def test_setting_semantics_and_selection():
    qs = make_questions().assign(task=["T3"] * 3 + ["T1"] * (N_T1 - 3) + ["T7", "T7"])
    assert runner.setting_questions(qs, "pre")["qid"].tolist() == ["T1-q00", "T1-q01", "T1-q02"]
    assert len(runner.setting_questions(qs, "post")) == N_T1 + 2
    with pytest.raises(runner.RunnerError, match="setting 'during'"):
        runner.setting_questions(qs, "during")
    sel = runner.select_questions(qs, tasks=["T1", "T7"], limit=1)
    assert sel["qid"].tolist() == ["T1-q03", "T7-q10"]
    with pytest.raises(runner.RunnerError, match=r"task\(s\) \['T9'\]"):
        runner.select_questions(qs, tasks=["T9"])
    with pytest.raises(runner.RunnerError, match="duplicate qid 'T1-q00'"):
        runner.select_questions(pd.concat([qs, qs.head(1)]))


def test_faults_lose_nothing_and_cached_rerun_makes_no_call(profile, tmp_path):
    faults = {"500": 0.08, "503": 0.05, "429": 0.04, "disconnect": 0.04, "truncated": 0.04}
    with FaultServer(faults=faults, seed=3, answer=answer, retry_after_s=0.01) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cells = runner.run(runner.RunSpec(profile, STRATS, ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, batch_size=5, client_options=FAST))  # fmt: skip
        assert sum(v for k, v in srv.fault_counts.items() if k != "ok") >= 4  # faults happened
        raw = raw_parts(profile)
        assert len(raw) == N_KEYS and not raw.duplicated(list(runner.KEY_COLUMNS)).any()
        assert raw["error"].isna().all()
        # By hand, per strategy: T1 right for Q0,2,4,6,8 (5/10); T7 Q10 right, Q11 strict
        # parse failure but lenient right -> strict 6/12, lenient 7/12.
        assert cells["n_predicted"].tolist() == [12, 12]
        assert cells["accuracy"].tolist() == pytest.approx([6 / 12, 6 / 12])
        assert cells["accuracy_lenient"].tolist() == pytest.approx([7 / 12, 7 / 12])
        assert cells["parse_failures"].tolist() == [1, 1]
        one = raw.set_index(["qid", "strategy"])
        assert one.loc[("T7-q11", "full-context"), "parsed_lenient"] == "A"
        assert cells["cost_usd"].sum() == pytest.approx(
            (raw["input_tokens"] * PRICE_IN + raw["output_tokens"] * PRICE_OUT).sum() / 1e6
            - (raw["cached_tokens"] * (PRICE_IN - 10.0)).sum() / 1e6
        )

        n_seen = srv.n_requests
        again = runner.run(
            runner.RunSpec(profile, STRATS, ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        assert srv.n_requests == n_seen  # finished cells: skipped entirely
        assert again["new_predictions"].tolist() == [0, 0]
        assert again["accuracy"].tolist() == cells["accuracy"].tolist()

        # Predictions lost but the response cache kept: every answer comes from the cache.
        for part in runner.predictions_dir(profile).iterdir():
            part.unlink()
        cached = runner.run(
            runner.RunSpec(profile, STRATS, ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        assert srv.n_requests == n_seen
        assert cached["cache_hits"].tolist() == [12, 12] and cached["api_calls"].sum() == 0
        assert cached["accuracy"].tolist() == cells["accuracy"].tolist()


def test_empty_and_failed_answers_are_recorded_and_retried(profile, tmp_path):
    # Q1 (no-context-blind) gets an empty completion; Q2 a 401 that is not retried.
    def script(index, payload, attempt):
        text = last_user_text(payload["messages"])
        if "(no patient record" in text and "\nQ1:" in text:
            return "empty"
        if "(no patient record" in text and "\nQ2:" in text and attempt == 0:
            return "401"
        return None

    with FaultServer(script=script, answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cells = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, client_options=FAST))  # fmt: skip
        preds = runner.load_predictions(profile).set_index("qid")
        assert preds.loc["T1-q01", "empty"] and preds.loc["T1-q01", "response"] == ""
        assert not preds.loc["T1-q01", "correct"] and preds.loc["T1-q01", "parse_failed"]
        err = preds.loc["T1-q02", "error"]
        assert err.startswith("client_error") and FAKE_KEY not in err
        # 11 answered: right Q0,4,6,8 + Q10 (Q2 errored, Q1 empty) -> 5/11.
        assert cells.loc[0, "errors"] == 1 and cells.loc[0, "empty"] == 1
        assert cells.loc[0, "accuracy"] == pytest.approx(5 / 11)

        plain = runner.run(
            runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        assert plain.loc[0, "new_predictions"] == 0  # errors are not retried by default
        retried = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, retry_errors=True))  # fmt: skip
        assert retried.loc[0, "new_predictions"] == 1 and retried.loc[0, "errors"] == 0
        assert retried.loc[0, "accuracy"] == pytest.approx(6 / 12)  # Q2 now right
        raw = raw_parts(profile)
        assert len(raw) == 13 and len(runner.load_predictions(profile)) == 12

    # No API key anywhere on disk (predictions, cache, WAL files).
    for path in (config.BUILD_DIR / profile).rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path


def test_estimate_counts_the_real_messages(profile, tmp_path):
    cfg = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1")
    est = runner.estimate(profile, STRATS, ["fault"], settings=("post", "pre"), config=cfg)
    assert est["setting"].tolist() == ["post", "post"]  # no T3 question: nothing under pre
    qs = make_questions()
    for row in est.itertuples():
        ctx = question_contexts(qs, row.strategy, profile, "post")
        n_in = sum(
            count_tokens(build_messages(q, c), "gpt-4o-mini")
            for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True)
        )
        n_out = N_T1 * 60 + 2 * 80  # MAX_TOKENS: T1 60, T7 80
        assert (row.questions, row.input_tokens, row.output_tokens_max) == (12, n_in, n_out)
        assert row.cost_usd_max == pytest.approx((n_in * PRICE_IN + n_out * PRICE_OUT) / 1e6)
        assert row.pending == 12
    full = est.set_index("strategy")["input_tokens"]
    assert full["full-context"] > full["no-context-blind"] + 500


def test_budget_stops_before_exceeding(profile, tmp_path):
    with FaultServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        est = runner.estimate(profile, ["no-context-blind"], ["fault"], config=cfg)
        budget = float(est.loc[0, "cost_usd_max"]) / 2
        cells = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, budget_usd=budget, batch_size=4))  # fmt: skip
        row = cells.iloc[0]
        assert row["stopped"].startswith("budget") and 0 < row["n_predicted"] < 12
        assert 0 < row["new_cost_usd"] <= budget
        assert srv.n_requests == row["n_predicted"]
        rest = runner.run(
            runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
            runner.RunOptions(config=cfg, progress=False),
        )
        assert rest.loc[0, "n_predicted"] == 12 and rest.loc[0, "stopped"] is None
        assert srv.n_requests == 12
        # A zero budget sends nothing.
        zero = runner.run(runner.RunSpec(profile, ["full-context"], ["fault"]),
                          runner.RunOptions(config=cfg, progress=False, budget_usd=0.0))  # fmt: skip
        assert zero.loc[0, "n_predicted"] == 0 and zero.loc[0, "stopped"].startswith("budget")
        assert srv.n_requests == 12


def test_egress_refused_for_credentialed_profile(profile, tmp_path):
    src = config.BUILD_DIR / profile / "source.json"
    src.write_text(json.dumps({"kind": "mimic", "credentialed": True}))
    with FaultServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        with pytest.raises(EgressRefusedError, match="fault"):
            runner.run(
                runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                runner.RunOptions(config=cfg, progress=False),
            )
        assert srv.n_requests == 0 and not runner.predictions_dir(profile).exists()
        ok = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"], limit=1),
                        runner.RunOptions(config=cfg, progress=False, allow_unapproved=True))  # fmt: skip
        assert ok.loc[0, "n_predicted"] == 2  # first question of T1 and of T7
        approved = write_config(tmp_path / "a.toml", srv.base_url, approved=True)
        runner.run(
            runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
            runner.RunOptions(config=approved, progress=False),
        )
    # Offline backbones never send anything: always allowed.
    register_backbone(Backbone(name="runner-test-offline", model="gpt-4o-mini", kind="offline",
                               policy=lambda m, p: "A"), replace_existing=True)  # fmt: skip
    try:
        off = runner.run(
            runner.RunSpec(profile, ["no-context-blind"], ["runner-test-offline"]),
            runner.RunOptions(progress=False),
        )
        assert off.loc[0, "n_predicted"] == 12
        assert off.loc[0, "accuracy"] == pytest.approx(2 / 12)  # only the two T7 "A"s are right
    finally:
        unregister_backbone("runner-test-offline")


def test_bad_input_errors(profile):
    with pytest.raises(runner.RunnerError, match="budget_usd"):
        runner.run(runner.RunSpec(profile), runner.RunOptions(budget_usd=-1, progress=False))
    with pytest.raises(ValueError, match="unknown backbone 'nope'"):
        runner.run(runner.RunSpec(profile, backbones=["nope"]), runner.RunOptions(progress=False))
    with pytest.raises(runner.RunnerError, match="setting"):
        runner.estimate(profile, settings=("later",), backbones=["gpt-4o-mini"])


CHILD = """
import sys
from pathlib import Path
import clinlib.core.config as config
config.BUILD_DIR = Path(sys.argv[1])
from clinlib.eval.harness import runner
runner.run(runner.RunSpec("tiny", {strats!r}, ["fault"]),
           runner.RunOptions(config=sys.argv[2], progress=False, batch_size=2,
                             client_options={{"concurrency": 2}}))
"""


def test_resume_after_sigkill(profile, tmp_path):
    env = {**os.environ, KEY_ENV: FAKE_KEY, "PYTHONPATH": str(config.REPO_ROOT)}
    code = CHILD.format(strats=STRATS)
    # The child's first 4 requests (two batches of 2) are answered; every later one hangs
    # until the child dies, so the kill always lands mid-run, however slow the machine (no
    # time window to hit). After the kill nothing hangs.
    killed_flag = threading.Event()

    def script(index, payload, attempt):
        return "hang" if index >= 4 and not killed_flag.is_set() else None

    with FaultServer(answer=answer, script=script) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(cfg)], env=env)
        pdir = runner.predictions_dir(profile)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(pdir.glob("part-*.parquet"))) < 2:
            assert child.poll() is None, "the child finished before it could be killed"
            time.sleep(0.05)
        assert child.poll() is None, "the child finished before it could be killed"
        child.send_signal(signal.SIGKILL)
        killed_flag.set()
        child.wait()
        killed = raw_parts(profile)
        assert 0 < len(killed) < N_KEYS
        with ResponseCache(default_cache_path(profile), readonly=True) as cache:
            cached_texts = {
                last_user_text(json.loads(r)["messages"])
                for r in cache.to_frame(include_request=True)["request"]
            }
        srv.reset_stats()
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(cfg)], env=env,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0
        raw = raw_parts(profile)
        assert len(raw) == N_KEYS and not raw.duplicated(list(runner.KEY_COLUMNS)).any()
        resent = [r.user_text for r in srv.records if r.user_text in cached_texts]
        assert resent == []  # nothing answered before the kill was asked again
        assert srv.n_requests == N_KEYS - len(cached_texts)


def test_ablation_variant_is_its_own_cell(profile):
    """A strategy with non-default parameters is keyed by its label, so it never overwrites
    or is skipped as the default strategy's cell."""
    from clinlib.strategies import get_strategy

    register_backbone(Backbone(name="runner-test-offline", model="gpt-4o-mini", kind="offline",
                               policy=lambda m, p: "A"), replace_existing=True)  # fmt: skip
    try:
        runner.run(
            runner.RunSpec(profile, ["last-n-visits"], ["runner-test-offline"]),
            runner.RunOptions(progress=False),
        )
        variant = get_strategy("last-n-visits", profile=profile, n=1)
        cells = runner.run(
            runner.RunSpec(profile, [variant], ["runner-test-offline"]),
            runner.RunOptions(progress=False),
        )
        assert cells["strategy"].tolist() == ["last-n-visits(n=1)"]
        assert cells.loc[0, "n_predicted"] == 12 and cells.loc[0, "new_predictions"] == 12
        preds = raw_parts(profile)
        assert preds.groupby("strategy").size().to_dict() == {
            "last-n-visits": 12,
            "last-n-visits(n=1)": 12,
        }
    finally:
        unregister_backbone("runner-test-offline")


def test_matched_prep_uses_each_answering_backbone(profile, tmp_path):
    """prep="matched" (Appendix G.5): the answering backbone also writes the summary; an
    offline reader cannot, and says so."""
    from clinlib.strategies import PrepError

    def answer_or_summarise(messages) -> str:
        text = last_user_text(messages)
        return answer(messages) if "QUESTION\n" in text else "Summary: creatinine 1.2 mg/dL."

    with FaultServer(answer=answer_or_summarise) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cells = runner.run(runner.RunSpec(profile, ["llm-summary"], ["fault"], prep="matched"),
                           runner.RunOptions(config=cfg, progress=False))  # fmt: skip
        assert cells[["strategy", "backbone", "prep_model"]].values.tolist() == [
            ["llm-summary", "fault", "fault"]
        ]
        assert cells.loc[0, "n_predicted"] == 12
        # one summary request per patient, then the 12 questions
        assert srv.n_requests == 2 + 12
    from clinlib.eval.readers.policies import register_offline_backbones

    register_offline_backbones()
    with pytest.raises(PrepError, match="'reference' is an offline reader"):
        runner.run(
            runner.RunSpec(profile, ["llm-summary"], ["reference"], prep="matched"),
            runner.RunOptions(progress=False),
        )
    # A strategy without a prep model runs under "matched" with a reader all the same.
    ok = runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference"], prep="matched"),
        runner.RunOptions(progress=False),
    )
    assert ok.loc[0, "n_predicted"] == 12 and ok.loc[0, "prep_model"] == "none"


def test_run_parallel_matches_a_single_process_run(profile, tmp_path):
    """Two spawned processes, strategies dealt between them: the same predictions as one
    in-process run, none duplicated, and a second call adds nothing."""
    from clinlib.eval.readers.policies import register_offline_backbones

    register_offline_backbones()
    strats = ["no-context-blind", "full-context", "last-visit-only"]
    par = parallel.run_parallel(runner.RunSpec(profile, strats, ["reference"]), workers=2)
    assert sorted(par["strategy"]) == sorted(strats) and (par["n_predicted"] == 12).all()
    preds = raw_parts(profile)
    assert len(preds) == 36 and not preds.duplicated(list(runner.KEY_COLUMNS)).any()
    assert preds["run_id"].nunique() == 2  # one run per process
    again = parallel.run_parallel(runner.RunSpec(profile, strats, ["reference"]), workers=2)
    assert len(raw_parts(profile)) == 36 and again["n_predicted"].tolist() == [12, 12, 12]
    # the same answers as a single in-process run in a fresh profile
    single = tmp_path / "tiny2"
    single.mkdir()
    for f in ("dialogues.parquet", "questions.parquet", "source.json"):
        (single / f).write_bytes((config.BUILD_DIR / profile / f).read_bytes())
    runner.run(runner.RunSpec("tiny2", strats, ["reference"]), runner.RunOptions(progress=False))
    one = raw_parts("tiny2")
    cols = ["qid", "strategy", "response", "correct", "context_tokens"]
    assert (preds[cols].sort_values(cols[:2]).reset_index(drop=True)
            .equals(one[cols].sort_values(cols[:2]).reset_index(drop=True)))  # fmt: skip


def test_questions_sharing_a_context_run_back_to_back():
    """Items are grouped by context in first-seen order, stable within a group."""
    from clinlib.eval.readers.policies import register_offline_backbones

    register_offline_backbones()
    qs = make_questions().head(5)
    ctx = pd.DataFrame({
        "qid": qs["qid"], "context": ["A", "B", "A", "C", "B"], "label": "full-context",
        "prep_model": "rule-based", "setting": "post", "context_tokens": 1,
    })  # fmt: skip
    items = cells.build_items(qs, ctx, runner.resolve_backbones(["reference"], None)[0])
    order = [it.key[0] for it in items]
    assert order == ["T1-q00", "T1-q02", "T1-q01", "T1-q04", "T1-q03"]


def test_offline_readers_take_turns_and_parse_each_record_once(profile, monkeypatch):
    """Two offline readers of one cell answer batch by batch in turn, so a record is parsed
    once for both (not once per reader), and every answer is still written."""
    from clinlib.eval.readers import policies as readers

    readers.register_offline_backbones()
    scans: list[str] = []
    real = readers._scan_record
    monkeypatch.setattr(readers, "_scan_record", lambda rec: scans.append(rec) or real(rec))
    monkeypatch.setattr(readers, "_SCANS", readers.OrderedDict())
    monkeypatch.setattr(readers, "SCAN_CACHE_CHARS", 1)  # only the latest record is kept
    monkeypatch.setattr(session, "OFFLINE_BATCH_SIZE", 1)
    readers._parse_cached.cache_clear()
    qs = make_questions().head(N_T1)
    qs["question"] = [f"What did the Creatinine measurement of {d} show? Reply with the value "
                      "and its unit only (for example: 1.3 mg/dL)."
                      for d in ["2150-01-10", "2150-03-02"] * (N_T1 // 2)]  # fmt: skip
    qs.to_parquet(config.BUILD_DIR / profile / "questions.parquet", index=False)
    runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference", "eager"]),
        runner.RunOptions(progress=False, batch_size=1),
    )
    preds = raw_parts(profile)
    assert len(preds) == 2 * N_T1 and preds["error"].isna().all(), preds["error"].iloc[0]
    assert preds["backbone"].tolist()[:4] == ["reference", "eager"] * 2  # write order
    contexts = question_contexts(qs, "full-context", profile)["context"]
    assert len(scans) == contexts.nunique() == 2  # two patients, one full context each
    groups = session.answer_groups(
        [runner.PlanEntry(b, runner.CellKey("full-context", b.name, "rule-based", "post"), 1, [1])
         for b in runner.resolve_backbones(["reference", "eager"], None)])  # fmt: skip
    assert len(groups) == 1 and len(groups[0]) == 2


def _independent_inputs(profile: str, strategy: str, model: str) -> int:
    """Input tokens of every question's messages under ``strategy``, from freshly built
    contexts (not from the runner)."""
    qs = pd.read_parquet(config.BUILD_DIR / profile / "questions.parquet")
    ctx = question_contexts(qs, strategy, profile, "post")
    return sum(count_tokens(build_messages(q, c), model)
               for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True))  # fmt: skip


def test_estimate_reads_prompt_counts_a_run_recorded(profile, monkeypatch):
    """The harness records each prompt's tokens per encoding; an estimate then
    prices every covered cell without rebuilding a context, to the same token."""
    from clinlib.eval.harness import prompt_tokens
    from clinlib.eval.readers.policies import register_offline_backbones

    register_offline_backbones()
    runner.run(runner.RunSpec(profile, STRATS, ["reference"]), runner.RunOptions(progress=False))
    counts = prompt_tokens.load_counts(profile)
    assert len(counts) == len(STRATS) * (N_T1 + 2) * len(prompt_tokens.ENCODINGS)
    real = cells.question_contexts_many  # where the harness looks it up

    def boom(*args, **kwargs):
        raise AssertionError("a context was rebuilt")

    monkeypatch.setattr(cells, "question_contexts_many", boom)
    est = runner.estimate(profile, STRATS, ["gpt-4o-mini", "deepseek-chat-v3.1"])
    for row in est.itertuples():
        model = "gpt-4o-mini" if row.backbone == "gpt-4o-mini" else "deepseek-chat"
        assert row.input_tokens == _independent_inputs(profile, row.strategy, model)
        assert row.questions == 12 and row.pending == 12  # no prediction for these backbones
    assert est.loc[est["backbone"] == "gpt-4o-mini", "input_tokens"].tolist() != (
        est.loc[est["backbone"] == "deepseek-chat-v3.1", "input_tokens"].tolist()
    )  # two encodings, two counts
    # A question set rebuilt with other texts under the same qids: the counts are stale and
    # refused, so the estimate builds contexts again (and re-records on the new basis).
    qpath = config.BUILD_DIR / profile / "questions.parquet"
    qs = pd.read_parquet(qpath)
    qs["question"] = qs["question"] + " Think of the most recent visit only."
    qs.to_parquet(qpath, index=False)
    shutil.rmtree(runner.predictions_dir(profile))  # stale too (estimate refuses them)
    assert prompt_tokens.load_counts(profile).empty
    with pytest.raises(AssertionError, match="rebuilt"):
        runner.estimate(profile, ["full-context"], ["gpt-4o-mini"])
    monkeypatch.setattr(cells, "question_contexts_many", real)
    fresh = runner.estimate(profile, ["full-context"], ["gpt-4o-mini"])
    assert fresh.loc[0, "input_tokens"] == _independent_inputs(profile, "full-context",
                                                               "gpt-4o-mini")  # fmt: skip
    assert len(prompt_tokens.load_counts(profile)) == 12 * len(prompt_tokens.ENCODINGS)


def test_a_run_on_some_tasks_summarises_every_cell_over_those_tasks(profile):
    """`run --tasks T7` after a full run of one cell: both cells' rows are over T7 only (two
    questions each), not the earlier cell's twelve beside the new cell's two."""
    opts = runner.RunOptions(progress=False)
    runner.run(runner.RunSpec(profile, ["full-context"], ["reference"]), opts)
    out = runner.run(
        runner.RunSpec(profile, ["full-context", "no-context-blind"], ["reference"], tasks=["T7"]),
        opts,
    )
    assert out["n"].tolist() == [2, 2] and out["n_predicted"].tolist() == [2, 2]
    assert out["new_predictions"].tolist() == [0, 2]
    whole = runner.cell_summary(runner.load_predictions(profile))
    assert whole.set_index("strategy").loc["full-context", "n_predicted"] == N_T1 + 2


@pytest.mark.parametrize(("share_run", "parses"), [(1, 2), (4, 4)])
def test_offline_readers_alternate_within_a_batch(profile, monkeypatch, share_run, parses):
    """Within a batch the readers take turns over runs of OFFLINE_SHARE_RUN items, so a record
    the first reader parsed is still in a small parse memo for the second. Ten questions on
    two records (A x5 then B x5), batches of 4, a memo of ONE record: taking turns item by
    item parses A and B once each; taking turns per whole batch (the counterexample) parses
    A, B, then A and B again for the second reader of the batch [A, B, B, B]. Every answer
    is written either way, one part per reader and batch."""
    import functools

    from clinlib.eval.readers import policies as readers

    readers.register_offline_backbones()
    calls: list[str] = []
    real = readers.parse_record

    def counted(record, extra_labels=()):
        calls.append(record)
        return real(record, extra_labels=extra_labels)

    monkeypatch.setattr(readers, "parse_record", counted)
    memo = functools.lru_cache(maxsize=1)(lambda rec, extra: counted(rec, extra))
    monkeypatch.setattr(readers, "_parse_cached", memo)
    monkeypatch.setattr(session, "OFFLINE_BATCH_SIZE", 4)
    monkeypatch.setattr(session, "OFFLINE_SHARE_RUN", share_run)
    qs = make_questions().head(N_T1)
    qs["question"] = [
        f"What did the Creatinine measurement of {d} show? Reply with the value "
        "and its unit only (for example: 1.3 mg/dL)."
        for d in ["2150-01-10", "2150-03-02"] * (N_T1 // 2)
    ]
    qs.to_parquet(config.BUILD_DIR / profile / "questions.parquet", index=False)
    runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference", "eager"]),
        runner.RunOptions(progress=False, batch_size=1),
    )
    preds = raw_parts(profile)
    assert len(preds) == 2 * N_T1 and preds["error"].isna().all()
    assert len(set(calls)) == 2 and len(calls) == parses
    parts = sorted((config.BUILD_DIR / profile / "predictions").glob("part-*.parquet"))
    assert len(parts) == 2 * 3  # two readers x batches of 4, 4 and 2


def test_build_items_share_converted_frames_across_backbones():
    """Items built with the frame memo equal those built without it, for each backbone, and
    each call gets its own question dicts."""
    from clinlib.eval.readers.policies import register_offline_backbones

    register_offline_backbones()
    qs = make_questions().head(5)
    ctx = pd.DataFrame({
        "qid": qs["qid"], "context": ["A", "B", "A", "C", "B"], "label": "full-context",
        "prep_model": "rule-based", "setting": "post", "context_tokens": 1,
    })  # fmt: skip
    memo: dict = {}
    for bb in runner.resolve_backbones(["reference", "eager"], None):
        plain = cells.build_items(qs, ctx, bb)
        shared = cells.build_items(qs, ctx, bb, memo)
        assert [(i.key, i.request, i.question, i.checkpoint) for i in plain] == [
            (i.key, i.request, i.question, i.checkpoint) for i in shared
        ]
    first = cells.build_items(qs, ctx, bb, memo)[0].question
    assert first is not cells.build_items(qs, ctx, bb, memo)[0].question
