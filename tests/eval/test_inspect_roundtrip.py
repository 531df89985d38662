"""``clintrace export --format inspect`` -> ``inspect eval`` -> ``clintrace score`` (issue 32 §3).

End to end against the kit's local fake OpenAI server (FaultServer): inspect_ai runs the
exported task file over real loopback HTTP, its @scorer calls the kit's scorer, and the log
read back is stored as outside predictions. The same server answers the kit's own harness, so
every (question, strategy) must get the same response and the same score both ways.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.eval.harness import runner
from clinlib.eval.interop.export import DATASET_FILE, TASK_FILE_NAME, export_records, write_export
from clinlib.eval.interop.external import ScoreFileError, question_set_digest
from clinlib.eval.interop.inspect_log import score_any
from clinlib.llm.testserver import FaultServer, last_user_text
from tests.eval.test_score_file import ANSWERS, make_questions, profile  # noqa: F401

STRATS = ["no-context-blind", "full-context"]
KEY_ENV = "CLINTRACE_INSPECT_TEST_KEY"


def answer(messages) -> str:
    """The hand-made answers of test_score_file by question number (Q0..Q5), and T1-q3's
    prose (a parse failure) only when the record is there, so the strategies differ; with the
    record, T3-q5 (a yes/no question) is answered off-format with a value, which the kit's run
    scores as a parse failure and `clintrace score` must too (not refuse the log)."""
    text = last_user_text(messages)
    i = int(text.split("QUESTION\n", 1)[1].split(":", 1)[0][1:])
    qid = f"T1-q{i}" if i < 4 else f"T3-q{i}"
    if qid == "T1-q0" and "(no patient record" in text:
        return "insufficient information"
    if qid == "T3-q5" and "(no patient record" not in text:
        return "42"
    return ANSWERS[qid]


def test_export_holds_the_kits_prompts(profile):  # noqa: F811
    recs = export_records(profile, STRATS)
    assert len(recs) == 2 * len(make_questions())
    one = {r["id"]: r for r in recs}["T1-q0|full-context|none|post"]
    assert one["target"] == "1.0 mg/dL" and one["metadata"]["max_tokens"] == 60
    assert one["metadata"]["question_set"] == question_set_digest(profile)
    assert [m["role"] for m in one["input"]] == ["system", "user"]
    assert "QUESTION\nQ0:" in one["input"][1]["content"]


def test_inspect_scores_equal_the_kits_on_the_same_answers(profile, tmp_path, monkeypatch):  # noqa: F811
    from inspect_ai import eval as inspect_eval

    out = write_export(tmp_path / "exp", export_records(profile, STRATS), "inspect")
    assert (out / TASK_FILE_NAME).exists() and (out / DATASET_FILE).exists()
    with FaultServer(answer=answer) as srv:
        monkeypatch.setenv("KITFAKE_BASE_URL", srv.base_url)
        monkeypatch.setenv("KITFAKE_API_KEY", "fake")
        monkeypatch.chdir(out)  # inspect resolves the task file relative to the cwd
        logs = inspect_eval(TASK_FILE_NAME, model="openai-api/kitfake/gpt-4o-mini",
                            log_dir=str(tmp_path / "logs"), display="none", max_retries=0)  # fmt: skip
        assert logs[0].status == "success", logs[0].error
        # the kit's own harness against the same server (a config-file backbone)
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[backbones.kitfake]\nbase_url = "{srv.base_url}"\nmodel = '
                       f'"gpt-4o-mini"\napi_key_env = "{KEY_ENV}"\n')  # fmt: skip
        monkeypatch.setenv(KEY_ENV, "fake")
        runner.run(
            runner.RunSpec(profile, STRATS, ["kitfake"]),
            runner.RunOptions(config=cfg, progress=False),
        )
    log = logs[0]
    inspect_scores = {s.id: s.scores["clintrace_score"].value for s in log.samples}
    stored = score_any(log.location, profile)
    assert set(stored["backbone"]) == {"ext:openai-api/kitfake/gpt-4o-mini"}
    preds = runner.load_predictions(profile)
    kit = preds[preds["backbone"] == "kitfake"].set_index(["qid", "strategy"])
    ext = preds[preds["backbone"].str.startswith("ext:")].set_index(["qid", "strategy"])
    assert len(kit) == len(ext) == 12
    ext = ext.loc[kit.index]
    assert ext["response"].tolist() == kit["response"].tolist()
    assert ext["correct"].tolist() == kit["correct"].tolist()
    assert ext["parse_failed"].tolist() == kit["parse_failed"].tolist()
    assert ext.loc[("T3-q5", "full-context"), "response"] == "42"
    assert ext.loc[("T3-q5", "full-context"), "parse_failed"]  # scored, not refused
    by_id = {f"{q}|{s}|{p}|{st}": v for (q, s), p, st, v in
             zip(ext.index, ext["prep_model"], ext["setting"], ext["score"], strict=True)}  # fmt: skip
    assert inspect_scores == pytest.approx(by_id)
    # By hand (test_score_file): full-context 3/6 right; no-context-blind loses T1-q0 -> 2/6.
    acc = kit.groupby(level="strategy")["correct"].mean()
    assert acc.to_dict() == pytest.approx({"full-context": 3 / 6, "no-context-blind": 2 / 6})
    with pytest.raises(ScoreFileError, match="already stored"):
        score_any(log.location, profile)


def test_an_inspect_log_of_another_task_is_refused(profile, tmp_path, monkeypatch):  # noqa: F811
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample

    task = Task(dataset=[Sample(input="hi", target="x")])
    with FaultServer() as srv:
        monkeypatch.setenv("KITFAKE_BASE_URL", srv.base_url)
        monkeypatch.setenv("KITFAKE_API_KEY", "fake")
        logs = inspect_eval(task, model="openai-api/kitfake/gpt-4o-mini",
                            log_dir=str(tmp_path / "logs"), display="none")  # fmt: skip
    assert logs[0].status == "success"
    with pytest.raises(ScoreFileError, match=r"sample 1 .*lacks metadata .*clintrace export"):
        score_any(logs[0].location, profile)
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"PK not a zip")
    with pytest.raises(ScoreFileError, match="not a readable inspect log"):
        score_any(broken, profile)


def test_jsonl_export_then_score(profile, tmp_path):  # noqa: F811
    out = write_export(tmp_path / "exp", export_records(profile, ["full-context"]), "jsonl")
    assert not (out / TASK_FILE_NAME).exists()
    answers = []
    for line in (out / DATASET_FILE).read_text().splitlines():
        rec = json.loads(line)
        answers.append(
            {**rec["metadata"], "backbone": "mine", "response": ANSWERS[rec["metadata"]["qid"]]}
        )
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers))
    score_any(path, profile)
    preds = runner.load_predictions(profile)
    assert preds["correct"].sum() == 3 and set(preds["prep_model"]) == {"none"}
    assert isinstance(preds, pd.DataFrame)


def test_export_command(profile, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from clinlib.cli import app

    out = tmp_path / "exp"
    res = CliRunner().invoke(app, ["export", str(out), "--profile", profile, "--format", "inspect",
                                   "--strategies", "full-context", "--tasks", "T3"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "2 samples" in res.output and (out / TASK_FILE_NAME).exists()
    assert len((out / DATASET_FILE).read_text().splitlines()) == 2
    res = CliRunner().invoke(app, ["export", str(tmp_path / "x"), "--profile", profile,
                                   "--format", "yaml"])  # fmt: skip
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "format 'yaml'" in res.output and not (tmp_path / "x").exists()
