"""``clintrace score``: outside predictions scored and stored like the kit's own (issue 32 §2),
and the offline readers' policy version in what identifies their stored predictions.

A tiny profile under tmp_path (two hand-built patients, hand-made questions) so every
accuracy below is worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.analysis.failures.selection import filter_predictions
from clinlib.analysis.metrics.accuracy import accuracy_table
from clinlib.cli import app
from clinlib.core import config
from clinlib.eval.harness import runner, store
from clinlib.eval.interop.external import (
    ScoreFileError,
    question_set_digest,
    score_file,
    wrong_task,
)
from clinlib.eval.readers import version as reader_version
from tests import strategy_fixtures as sf

YESNO = "Reply yes or no. If the record does not state it, reply exactly: insufficient information."


def make_questions() -> pd.DataFrame:
    """Four T1 value questions (gold 1.i mg/dL) and two T3 yes/no questions (gold yes / no)."""
    rows = [
        {"qid": f"T1-q{i}", "task": "T1", "subtype": "abnormal", "subject_ids": [7001],
         "question": f"Q{i}: What did the Creatinine measurement show? Reply with the value "
                     "and its unit only (for example: 1.3 mg/dL).",
         "gold": f"1.{i} mg/dL", "options": []}
        for i in range(4)
    ] + [
        {"qid": f"T3-q{i}", "task": "T3", "subtype": "stale", "subject_ids": [7001],
         "question": f"Q{i}: Is the patient still on Metformin? {YESNO}",
         "gold": gold, "options": []}
        for i, gold in ((4, "yes"), (5, "no"))
    ]  # fmt: skip
    df = pd.DataFrame(rows)
    for col in ("anchor_event_ids", "evidence_turns"):
        df[col] = [[] for _ in range(len(df))]
    return df.assign(disease="diabetes", tertile="low", template_id=0, injection="", meta="{}")


@pytest.fixture()
def profile(tmp_path, monkeypatch) -> str:
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    d = tmp_path / "tiny"
    d.mkdir()
    sf.dialogue(sf.events_7001()).to_parquet(d / "dialogues.parquet", index=False)
    make_questions().to_parquet(d / "questions.parquet", index=False)
    (d / "source.json").write_text(json.dumps({"kind": "synthetic", "credentialed": False}))
    return "tiny"


ANSWERS = {  # qid -> response: right, right, wrong, parse failure, right, wrong
    "T1-q0": "1.0 mg/dL", "T1-q1": "1.1 mg/dL", "T1-q2": "9.9 mg/dL",
    "T1-q3": "I think it was about normal", "T3-q4": "yes", "T3-q5": "yes",
}  # fmt: skip


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rows(backbone: str = "my-gpt", **extra) -> list[dict]:
    return [{"qid": q, "strategy": "full-context", "backbone": backbone, "response": a, **extra}
            for q, a in ANSWERS.items()]  # fmt: skip


def test_scored_file_is_stored_like_a_run_and_reaches_tables_and_explorer(profile, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", rows(question_set=question_set_digest(profile)))
    out = score_file(path, profile)
    assert out["backbone"].unique().tolist() == ["ext:my-gpt"]  # never a kit backbone name
    preds = runner.load_predictions(profile)
    assert len(preds) == 6 and set(preds["backbone"]) == {"ext:my-gpt"}
    by = preds.set_index("qid")
    # By hand: T1 right q0, q1; wrong q2; q3 prose fails the strict parse; T3 q4 right, q5 wrong.
    assert by["correct"].to_dict() == {"T1-q0": True, "T1-q1": True, "T1-q2": False,
                                       "T1-q3": False, "T3-q4": True, "T3-q5": False}  # fmt: skip
    assert by.loc["T1-q3", "parse_failed"] and not by.loc["T1-q2", "parse_failed"]
    assert by["reader_version"].isna().all()
    assert by["run_id"].str.startswith("score-").all()  # a later run's summary needs it
    table = accuracy_table(preds, by=("strategy", "backbone", "task")).set_index("task")
    assert table.loc["T1", "accuracy"] == pytest.approx(2 / 4)
    assert table.loc["T3", "accuracy"] == pytest.approx(1 / 2)
    cell = store.cell_summary(preds)
    assert cell.loc[0, "accuracy"] == pytest.approx(3 / 6) and cell.loc[0, "parse_failures"] == 1
    wrong = filter_predictions(preds, backbone="ext:my-gpt", outcome="incorrect")
    assert wrong["qid"].tolist() == ["T1-q2", "T1-q3", "T3-q5"]
    # a kit run afterwards summarises beside them (its own rows picked by run_id)
    cells = runner.run(
        runner.RunSpec(profile, ["no-context-blind"], ["reference"]),
        runner.RunOptions(progress=False),
    )
    assert cells["new_predictions"].tolist() == [6]


def test_parquet_input_and_replace(profile, tmp_path):
    path = tmp_path / "p.parquet"
    pd.DataFrame(rows(backbone="ext:other")).to_parquet(path)
    score_file(path, profile)
    with pytest.raises(ScoreFileError, match=r"already stored .*--replace"):
        score_file(path, profile)
    fixed = pd.DataFrame(rows(backbone="ext:other")).assign(response="1.2 mg/dL")
    fixed.head(3).to_parquet(path)
    score_file(path, profile, replace=True)
    by = runner.load_predictions(profile).set_index("qid")
    assert by.loc["T1-q2", "correct"] and not by.loc["T1-q0", "correct"]  # superseded rows
    assert by.loc["T3-q5", "response"] == "yes"  # rows not in the new file stay


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"qid": "T1-q0", "strategy": "s", "backbone": "b"}\n', r"missing column\(s\) \['response'\]"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"1.0 mg/dL"}\n'
         b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"caf\xe9"}\n', "line 2 is not UTF-8"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x"}\n{oops\n', "line 2 is not JSON"),
        (b'{"qid":"T1-q9","strategy":"s","backbone":"b","response":"x"}\n', "qid 'T1-q9' is not a question"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"1.0 mg/dL"}\n'
         b'{"qid":"T1-q0","strategy":"s","backbone":"ext:b","response":"1.1 mg/dL"}\n', "row 2 .*duplicate key"),
        (b'qid,strategy,backbone,response\nT1-q0,s,b,x\n', "takes JSON lines .*parquet .*inspect_ai log"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","question_set":"abc"}\n',
         "question_set abc.* not the current question set"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","task":"T3"}\n', "task 'T3' differs"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","question":"old"}\n', "question 'old' differs"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","setting":"pre"}\n', "T3 questions only"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","setting":"later"}\n', "setting 'later'"),
        (b'{"qid":"T1-q0","strategy":"","backbone":"b","response":"x"}\n', "column strategy is empty"),
        (b'{"qid":"T1-q0","strategy":"s","backbone":"b","response":"x","input_tokens":"many"}\n', "not a number"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_whole(profile, tmp_path, content, message):
    path = tmp_path / ("bad.csv" if content.startswith(b"qid,") else "bad.jsonl")
    path.write_bytes(content)
    with pytest.raises(ScoreFileError, match=message):
        score_file(path, profile)
    assert runner.load_predictions(profile).empty  # nothing written


def test_wrong_task_shapes():
    assert wrong_task("T3", "42", None) == "value"
    assert wrong_task("T3", "Yes, still on it.", None) is None  # the task's lenient parse
    assert wrong_task("T1", "no", None) == "yes/no"
    assert wrong_task("T1", "insufficient information", None) is None  # abstention is an answer
    assert wrong_task("T1", "hmm", None) is None  # a parse failure, scored wrong
    assert wrong_task("T4", "increased", None) == "direction"


def test_a_wrong_task_answer_is_a_parse_failure_unless_refused(profile, tmp_path, caplog):
    """As the kit's own run scores an off-format answer; --refuse-wrong-task refuses it."""
    path = tmp_path / "p.jsonl"
    cases = [("42", "is a value answer, not a yes/no"), ("LAB-1;LAB-2", "event ids answer")]
    for response, message in cases:
        row = {"qid": "T3-q4", "strategy": "s", "backbone": "b", "response": response}
        write_jsonl(path, [row])
        with pytest.raises(ScoreFileError, match=message):
            score_file(path, profile, allow_wrong_task=False)
        assert runner.load_predictions(profile).empty
    write_jsonl(path, [{"qid": "T3-q4", "strategy": "s", "backbone": "b", "response": "42"}])
    with caplog.at_level("WARNING", logger="clinlib.eval"):
        score_file(path, profile)
    row = runner.load_predictions(profile).iloc[0]
    assert row["parse_failed"] and not row["correct"] and row["backbone"] == "ext:b"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 1 off-format answer(s) scored as parse failures, as the kit's own run scores "
        "them (e.g. qid T3-q4: '42')"
    ]


def test_cli_scores_and_refuses_with_one_line_and_exit_2(profile, tmp_path):
    good = write_jsonl(tmp_path / "p.jsonl", rows())
    res = CliRunner().invoke(app, ["score", str(good), "--profile", profile])
    assert res.exit_code == 0, res.output
    assert "ext:my-gpt" in res.output and "0.500" in res.output  # 3 of 6, by hand above
    res = CliRunner().invoke(app, ["score", str(good), "--profile", profile])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "already stored" in lines[0] and "Traceback" not in res.output
    bad = write_jsonl(tmp_path / "q.jsonl", [{"qid": "nope", "strategy": "s", "backbone": "b",
                                              "response": "x"}])  # fmt: skip
    res = CliRunner().invoke(app, ["score", str(bad), "--profile", profile])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "qid 'nope' is not a question of this build" in res.output


def test_reader_predictions_of_another_policy_version_are_asked_again(profile, monkeypatch):
    first = runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference"]), runner.RunOptions(progress=False)
    )
    assert first["new_predictions"].tolist() == [6]
    preds = runner.load_predictions(profile)
    assert set(preds["reader_version"]) == {reader_version.policy_digest()}
    again = runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference"]), runner.RunOptions(progress=False)
    )
    assert again["new_predictions"].tolist() == [0]  # same policy: done
    # The policy's source changes: its digest changes, stored reader rows no longer count.
    monkeypatch.setattr(reader_version, "policy_digest", lambda: "newer-policy")
    monkeypatch.setattr(store, "policy_digest", lambda: "newer-policy")
    assert runner.load_predictions(profile).empty
    redo = runner.run(
        runner.RunSpec(profile, ["full-context"], ["reference"]), runner.RunOptions(progress=False)
    )
    assert redo["new_predictions"].tolist() == [6]
    assert set(runner.load_predictions(profile)["reader_version"]) == {"newer-policy"}
    assert len(runner.load_predictions(profile, dedupe=False)) == 6  # old rows left out


def test_reader_rows_without_a_version_are_stale(profile):
    store.write_part([{"qid": "T1-q0", "task": "T1", "strategy": "full-context",
                       "backbone": "reference", "prep_model": "none", "setting": "post",
                       "response": "1.0 mg/dL", "correct": True, "correct_lenient": True,
                       "parse_failed": False, "empty": False, "input_tokens": 1,
                       "output_tokens": 1, "cached_tokens": 0, "context_tokens": 1,
                       "cost_usd": 0.0, "latency_s": 0.0, "from_cache": False}],
                     profile, "old", 0)  # fmt: skip
    assert runner.load_predictions(profile).empty


def test_policy_digest_covers_every_reader_module():
    here = Path(reader_version.__file__).parent
    on_disk = {p.stem for p in here.glob("*.py")} - {"version", "__init__"}
    assert set(reader_version.READER_MODULES) == on_disk
    assert len(reader_version.policy_digest()) == reader_version.VERSION_CHARS


def test_an_outside_strategy_opens_in_the_failure_explorer(profile, tmp_path):
    from clinlib.analysis.evidence import label_losses
    from clinlib.analysis.failures.view import context_fn_for, explain, side_by_side

    path = write_jsonl(
        tmp_path / "p.jsonl", rows() + [{**r, "strategy": "my-memory"} for r in rows()]
    )
    score_file(path, profile)
    preds = runner.load_predictions(profile)
    questions = make_questions()
    fn = context_fn_for(profile)
    i = int(preds.index[(preds["strategy"] == "my-memory") & (preds["qid"] == "T1-q2")][0])
    page = explain(preds, questions, i, fn)
    assert "9.9 mg/dL" in page and "my-memory" in page
    tab = side_by_side(preds, questions, "T1-q2", "ext:my-gpt", "post", fn).set_index("strategy")
    assert tab.loc["my-memory", "anchors_present"] == "n/a"
    assert tab.loc["full-context", "anchors_present"] == "0/0"  # hand-made questions: no anchors
    labelled, _ = label_losses(preds, questions, profile)
    assert set(labelled.loc[labelled["strategy"] == "my-memory", "lost_in"]) == {"not measured"}
