"""Stage guards and bad input: no stage goes silently empty or stale, and bad input gets exit 2 with one
line naming file / column / row / value. Tiny hand-built tables (tests/hosp_fixture.py,
tests/data/test_mimic_loader.py), so every test runs in seconds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config, guards
from clinlib.core.guards import StageError
from clinlib.data.sources.mimic import SourceSchemaError, open_hosp
from clinlib.eval.harness import records, runner, store
from tests import hosp_fixture
from tests import strategy_fixtures as F
from tests.data.test_mimic_loader import CSV, with_table, write_hosp

CLI = CliRunner()


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _table(root: Path, name: str) -> list[str]:
    with gzip.open(root / "hosp" / f"{name}.csv.gz", "rt", newline="") as fh:
        return fh.read().splitlines()


def _rewrite(root: Path, name: str, lines: list[str]) -> None:
    with gzip.open(root / "hosp" / f"{name}.csv.gz", "wt", newline="") as fh:
        fh.write("\n".join(lines) + "\n")


def _fixture(tmp_path: Path) -> Path:
    return hosp_fixture.write_csv_dir(tmp_path / "mimic")


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _cohort_cli(root: Path, *extra: str):
    return CLI.invoke(app, ["cohort", "--mimic-dir", str(root), "--profile", "t", *extra])


# --------------------------------------------------------------------------- §4 bad input


def test_duplicated_hadm_id_names_file_column_value_and_lines(tmp_path, tmp_build):
    root = _fixture(tmp_path)
    lines = _table(root, "admissions")
    _rewrite(root, "admissions", lines[:3] + [lines[2]] + lines[3:])  # line 3 repeated as 4
    hadm = lines[2].split(",")[1]
    _one_line_error(_cohort_cli(root), "admissions.csv.gz", "'hadm_id'", f"value {hadm}",
                    "lines 3 and 4")  # fmt: skip
    assert not (tmp_build / "t" / "events.parquet").exists()  # nothing written


def test_duplicated_labevent_id_among_cohort_rows(tmp_path, tmp_build):
    root = _fixture(tmp_path)
    lines = _table(root, "labevents")
    row = next(ln for ln in lines[1:] if ln.split(",")[1] == "1")  # patient 1 is eligible
    _rewrite(root, "labevents", [*lines, row])
    lab_id = row.split(",")[0]
    _one_line_error(_cohort_cli(root), "labevents.csv.gz", "'labevent_id'", f"value {lab_id}")


@pytest.mark.parametrize("value", ["0", "-5"])
def test_per_disease_must_be_positive(tmp_path, tmp_build, value):
    result = _cohort_cli(_fixture(tmp_path), "--per-disease", value)
    _one_line_error(result, "--per-disease must be a positive integer", value)
    assert not (tmp_build / "t").exists()  # refused before anything is touched


def test_wrong_type_past_the_sample_is_one_line(tmp_path, tmp_build):
    # 10,001 filler rows push the bad value past open_hosp's 10,000-row type sample.
    root = _fixture(tmp_path)
    lines = _table(root, "labevents")
    cols = lines[0].split(",")
    base = lines[1].split(",")
    filler = []
    for i in range(10_001):
        row = list(base)
        row[cols.index("labevent_id")] = str(900_000 + i)
        row[cols.index("subject_id")] = "3"
        filler.append(",".join(row))
    bad = list(base)
    bad[cols.index("labevent_id")], bad[cols.index("subject_id")] = "999999", "3"
    bad[cols.index("valuenum")] = "abc"
    _rewrite(root, "labevents", [*lines, *filler, ",".join(bad)])
    line = len(lines) + len(filler) + 1
    _one_line_error(_cohort_cli(root), "labevents.csv.gz", "'valuenum'", "DOUBLE", "'abc'",
                    f"line {line}")  # fmt: skip


def test_utf8_bom_in_a_header_is_stripped(tmp_path):
    text = "\ufeff" + CSV["admissions"]
    con = open_hosp(write_hosp(tmp_path, with_table("admissions", text)))
    first = con.execute("SELECT subject_id, hadm_id FROM admissions LIMIT 1").fetchone()
    assert first == tuple(int(v) for v in CSV["admissions"].splitlines()[1].split(",")[:2])


def test_ragged_row_names_the_line(tmp_path):
    text = CSV["d_labitems"] + "50000,Too,many,fields,here\n"
    with pytest.raises(SourceSchemaError) as info:
        open_hosp(write_hosp(tmp_path, with_table("d_labitems", text)))
    n = len(text.splitlines())
    assert str(info.value).startswith(str(tmp_path / "hosp" / "d_labitems.csv.gz"))
    assert "ragged row" in str(info.value) and f"line {n}" in str(info.value)


def test_unterminated_quote_names_the_line(tmp_path):
    text = CSV["d_labitems"] + '50001,"never closed,Blood,Chemistry\n'
    with pytest.raises(SourceSchemaError) as info:
        open_hosp(write_hosp(tmp_path, with_table("d_labitems", text)))
    assert "unterminated quote" in str(info.value)
    assert f"line {len(text.splitlines())}" in str(info.value)


def test_header_only_prescriptions_is_refused(tmp_path, tmp_build):
    root = _fixture(tmp_path)
    _rewrite(root, "prescriptions", _table(root, "prescriptions")[:1])
    _one_line_error(_cohort_cli(root), "prescriptions.csv.gz", "a header only")


def test_cohort_of_zero_patients_names_the_emptying_step(tmp_path, tmp_build):
    # One prescription per patient: nobody passes ">=2 prescriptions".
    root = _fixture(tmp_path)
    lines = _table(root, "prescriptions")
    seen, kept = set(), [lines[0]]
    for ln in lines[1:]:
        if ln.split(",")[0] not in seen:
            seen.add(ln.split(",")[0])
            kept.append(ln)
    _rewrite(root, "prescriptions", kept)
    _one_line_error(_cohort_cli(root), "cohort: 0 of 8 patients selected", ">=2 prescriptions")
    assert guards.read_manifest("cohort", "t")["status"] == "failed"


def test_profile_outside_the_build_folder(monkeypatch):
    result = CLI.invoke(app, ["info"], env={"CLINTRACE_PROFILE": "../x"})
    _one_line_error(result, "invalid profile name '../x'")


def test_user_config_cannot_replace_a_builtin_backbone(tmp_path):
    from clinlib.llm.userconfig import LLMConfigError, load_config

    reader = tmp_path / "a.toml"
    reader.write_text('[backbones.reference]\nbase_url = "http://x/v1"\nmodel = "m"\n')
    with pytest.raises(LLMConfigError, match=r"\[backbones\.reference\].*offline reader"):
        load_config(reader)
    preset = tmp_path / "b.toml"
    preset.write_text('[backbones."gpt-4o-mini"]\nmodel = "other/model"\n')
    with pytest.raises(LLMConfigError, match="would replace built-in preset 'gpt-4o-mini'"):
        load_config(preset)
    result = CLI.invoke(app, ["backbones", "--config", str(reader)])
    _one_line_error(result, "a.toml", "offline reader")


def test_notebooks_refuse_a_never_built_profile(tmp_build):
    result = CLI.invoke(app, ["notebooks", "--profile", "never-built"])
    _one_line_error(result, "profile 'never-built' was never built")


def test_runner_accepts_a_bare_strategy_string(quick_built):
    assert records.listed("full-context") == ["full-context"]
    assert records.listed(("a", "b")) == ["a", "b"]
    out = runner.estimate("quick", "no-context-blind", "gpt-4o-mini", "post", limit=1,
                          tasks="T1")  # fmt: skip
    assert out["strategy"].tolist() == ["no-context-blind"] and out["questions"].tolist() == [1]


def test_corrupt_cached_construction_is_found_by_the_strategies_stage(tmp_path):
    from clinlib.strategies import get_strategy
    from clinlib.strategies.construction import ConstructionCache, build_strategy

    turns = F.dialogue(F.events_7001())
    cache = ConstructionCache(tmp_path / "c")
    strat = get_strategy("full-context")
    first = build_strategy(strat, {7001: turns}, None, cache)
    assert (first["built"], first["repaired"]) == (1, 0)
    [path] = list((tmp_path / "c").rglob("*.json"))
    path.write_text('{"truncated')
    second = build_strategy(strat, {7001: turns}, None, cache)
    assert (second["built"], second["cached"], second["repaired"]) == (1, 0, 1)
    assert json.loads(path.read_text())["subject_id"] == 7001  # rebuilt in place
    third = build_strategy(strat, {7001: turns}, None, cache)
    assert (third["built"], third["cached"], third["repaired"]) == (0, 1, 0)


def test_retry_empty_re_asks_empty_completions(monkeypatch):
    preds = pd.DataFrame({
        "qid": ["q1", "q2", "q3"], "strategy": "s", "backbone": "b", "prep_model": "none",
        "setting": "post", "empty": [True, False, False], "error": [None, None, "timeout"],
    })  # fmt: skip
    monkeypatch.setattr(store, "load_predictions", lambda profile, **kw: preds)
    qids = lambda keys: sorted(k[0] for k in keys)  # noqa: E731
    assert qids(store.done_keys("p", retry_errors=False)) == ["q1", "q2", "q3"]
    assert qids(store.done_keys("p", retry_errors=False, retry_empty=True)) == ["q2", "q3"]
    assert qids(store.done_keys("p", retry_errors=True, retry_empty=True)) == ["q2"]
    result = CLI.invoke(app, ["run", "--help"])
    assert "--retry-empty" in result.output


# --------------------------------------------------------------------------- §3 guards


def test_check_kept_counts_and_groups_reasons():
    reasons = guards.group_reasons(["dose_missing: RX-1", "dose_missing: RX-2 | no_visit: x",
                                    "no_visit: y"] + ["dose_missing: z"] * 33)  # fmt: skip
    assert reasons == {"dose_missing": 35, "no_visit": 2}
    with pytest.raises(StageError) as info:
        guards.check_kept("dialogues", "patients", 3, 38, reasons)
    msg = str(info.value)
    assert msg == (
        "dialogues: 35 of 38 patients dropped (92% > 20% allowed): 'dose_missing' x35, "
        "'no_visit' x2; fix the input, or pass --allow-drops to accept"
    )
    guards.check_kept("dialogues", "patients", 3, 38, reasons, allow_drops=True)
    guards.check_kept("dialogues", "patients", 31, 38, reasons)  # 18% dropped: a warning
    with pytest.raises(StageError, match="0 of 38 patients kept"):
        guards.check_kept("dialogues", "patients", 0, 38, reasons, allow_drops=True)


def _write(name: str, df: pd.DataFrame, profile: str = "p") -> None:
    from clinlib.core.io import write_parquet

    write_parquet(df, config.artifact_path(f"{name}.parquet", profile))


def _fake_stage(stage: str, value: int) -> None:
    with guards.stage_run(stage, "p"):
        for out in guards.STAGES[stage][0]:
            _write(out, pd.DataFrame({"x": [value]}))


def test_manifests_refuse_failed_unfinished_and_stale_artifacts(tmp_build):
    from clinlib.data.build import load

    _fake_stage("cohort", 1)
    _fake_stage("dialogues", 1)
    assert load("dialogues", "p")["x"].tolist() == [1]
    _fake_stage("cohort", 2)  # upstream rebuilt with other content
    with pytest.raises(StageError, match="dialogues.parquet is stale: cohort.parquet was rebuilt"):
        load("dialogues", "p")
    _fake_stage("dialogues", 2)
    assert load("dialogues", "p")["x"].tolist() == [2]
    with pytest.raises(RuntimeError), guards.stage_run("cohort", "p"):
        raise RuntimeError("disk full")
    with pytest.raises(StageError, match=r"cohort.parquet is not current: .*failed \(disk full\)"):
        load("cohort", "p")
    with pytest.raises(StageError, match="`clintrace cohort` ran again after it and did not"):
        load("dialogues", "p")
    _fake_stage("cohort", 2)
    _write("dialogues", pd.DataFrame({"x": [9]}))  # written behind the stage's back
    with pytest.raises(StageError, match="dialogues.parquet changed after"):
        load("dialogues", "p")


def test_failed_question_stage_removes_the_old_set(tmp_build, monkeypatch):
    from clinlib.data.build import load
    from clinlib.tasks import build

    _write("questions", pd.DataFrame({"qid": ["old"]}))
    monkeypatch.setattr(build, "load_inputs", lambda *a, **k: None)

    def gate_fails(*a, **k):
        raise ValueError("L2 gold recompute T7: 2 of 82 not recomputable")

    monkeypatch.setattr(build, "build_question_set", gate_fails)
    with pytest.raises(ValueError, match="not recomputable"):
        build.build_questions("p")
    assert not config.artifact_path("questions.parquet", "p").exists()
    with pytest.raises(FileNotFoundError, match="run `clintrace questions --profile p`"):
        load("questions", "p")
    assert "not recomputable" in guards.read_manifest("questions", "p")["reason"]


def test_dialogue_stage_fails_when_most_patients_drop(tmp_build):
    events = F.events_7001()
    other = F.events_7002()
    cohort = pd.DataFrame({"subject_id": [7001, 7002, 7003, 7004, 7005]})
    _write("events", pd.concat([events, other], ignore_index=True))
    _write("cohort", cohort)
    from clinlib.dialogue.synth import build_dialogues

    with pytest.raises(StageError) as info:
        build_dialogues("p")
    assert str(info.value).startswith("dialogues: 3 of 5 patients' dialogues dropped (60% > 20%")
    assert not config.artifact_path("dialogues.parquet", "p").exists()
    out = build_dialogues("p", allow_drops=True)
    assert int(out["dialogue_summary"]["kept"].sum()) == 2


def test_evaluable_patients_needs_a_kept_dialogue_and_a_question():
    cohort = pd.DataFrame({"subject_id": [1, 2, 3, 4], "disease": list("abab")})
    summary = pd.DataFrame({"subject_id": [1, 2, 3, 4], "kept": [True, False, True, True]})
    questions = pd.DataFrame({"subject_ids": [[1], [2], [1, 3]]})
    out = guards.evaluable_patients(cohort, summary, questions)
    assert out["subject_id"].tolist() == [1, 3]


def test_cli_turns_an_untranslated_duckdb_error_into_one_line():
    import duckdb
    import typer

    from clinlib.cli import common as cli

    def boom():
        raise duckdb.ConversionException(
            "Conversion Error: CSV Error on Line: 7\nOriginal Line: 1,x\nError when converting "
            'column "valuenum". Could not convert string "abc" to \'DOUBLE\'\n\n'
            "  file = /data/hosp/labevents.csv.gz\n  delimiter = ,"
        )

    with pytest.raises(typer.Exit) as info:
        cli.run_stage(boom)
    assert info.value.exit_code == 2


def test_stage_table_shares_and_total_worked_by_hand():
    from clinlib.cli.pipeline import stage_table

    table = stage_table([("synth", 10.0), ("strategies (post)", 30.0)])
    assert table.splitlines() == [
        "  synth                 10.0s  25.0%",
        "  strategies (post)     30.0s  75.0%",
        "  total                 40.0s",
    ]
    with_cpu = stage_table([("synth", 10.0, 9.5), ("strategies (post)", 30.0, 55.25)])
    assert with_cpu.splitlines() == [
        "  synth                 10.0s  25.0%  cpu      9.5s",
        "  strategies (post)     30.0s  75.0%  cpu     55.2s",
        "  total                 40.0s         cpu     64.8s",
    ]


def _prediction(qid: str) -> dict:
    from clinlib.eval.harness import runner
    from clinlib.eval.readers.version import policy_digest

    zero = {"int64": 0, "float64": 0.0, "bool": False, "string": ""}
    row = {c: zero.get(t) for c, t in runner.PREDICTION_DTYPES.items()}
    return row | {"qid": qid, "task": "T1", "strategy": "full-context", "backbone": "reference",
                  "prep_model": "none", "setting": "post", "written_at": pd.Timestamp.now("UTC"),
                  "reader_version": policy_digest()}  # the current reader's row  # fmt: skip


def test_predictions_for_an_older_question_set_are_refused_then_moved_aside(tmp_build):
    from clinlib.eval.harness import runner, store

    _write("dialogues", pd.DataFrame({"x": [1]}))
    _write("questions", pd.DataFrame({"qid": ["T1-a", "T1-b"]}))
    store.claim_predictions("p")  # a first run records what its answers are answers to
    runner.write_part([_prediction("T1-a")], "p", "r1", 0)
    assert runner.load_predictions("p")["qid"].tolist() == ["T1-a"]
    _write("questions", pd.DataFrame({"qid": ["T1-a", "T1-c"]}))  # rebuilt: T1-a kept its qid
    with pytest.raises(runner.RunnerError, match="stale: questions.parquet changed"):
        runner.load_predictions("p")
    store.claim_predictions("p")  # the next run starts clean
    assert runner.load_predictions("p").empty
    assert len(list(tmp_build.glob("p/predictions.stale-*/part-*.parquet"))) == 1


def test_pre_basis_predictions_are_moved_only_when_they_answer_vanished_questions(tmp_build):
    from clinlib.eval.harness import runner, store

    _write("dialogues", pd.DataFrame({"x": [1]}))
    _write("questions", pd.DataFrame({"qid": ["T1-a"]}))
    runner.write_part([_prediction("T1-a")], "p", "r1", 0)  # no basis recorded (older kit)
    store.claim_predictions("p")
    assert runner.load_predictions("p")["qid"].tolist() == ["T1-a"]  # all still asked: kept
    (runner.predictions_dir("p") / guards.PREDICTIONS_BASIS_FILE).unlink()
    _write("questions", pd.DataFrame({"qid": ["T1-z"]}))
    store.claim_predictions("p")
    assert runner.load_predictions("p").empty
