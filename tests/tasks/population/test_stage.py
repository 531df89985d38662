"""The population stage on the quick cohort, in a temporary build folder: one task end to end
(reproducible, every kept question solved from each rendering), and the CLI's one-line exit 2
on a bad spec and on an empty result."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.core import config
from clinlib.llm.tokens import count_tokens
from clinlib.tasks.population.build import GATES_FILE, QUESTIONS_FILE, build_population
from clinlib.tasks.population.checker import check
from clinlib.tasks.population.questions import score

SPEC_TOP = """
[[task]]
task = "P-TOP"
name = "t"
sizes = [8]
k = 2
question = "The team scored some of these {n} patients: {examples}. Offer the {k} slots to the {k} of them who score highest. Answer with a JSON list of {k} patient IDs."
cohort = [
  { role = "example", size = "4" },
  { role = "rest", size = "n - 4" },
]
plant = { pattern = "score", max_count = 6 }
"""


@pytest.fixture
def tmp_quick(tmp_path, monkeypatch, quick_cohort):
    src = config.BUILD_DIR / quick_cohort
    dst = tmp_path / quick_cohort
    dst.mkdir()
    for name in ("cohort.parquet", "events.parquet", "source.json", "raw"):
        (dst / name).symlink_to(src / name)
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    return dst


def _count(s: str) -> int:
    return count_tokens(s, "gpt-4")


def test_stage_writes_solved_reproducible_questions(tmp_quick, tmp_path):
    spec = tmp_path / "top.toml"
    spec.write_text(SPEC_TOP)
    df, gates = build_population("quick", count=_count, specs=spec, per_cell=2, bins=[32000])
    assert (tmp_quick / QUESTIONS_FILE).exists() and (tmp_quick / GATES_FILE).exists()
    assert set(df["rendering"]) == {"descriptions", "codes", "codebook"}
    assert df.groupby("qid").size().eq(3).all() and df["qid"].nunique() == 2
    for q in df.itertuples():  # the independent checker reaches the recipe's gold
        assert score(q.task, check(q.task, q.question, q.context), json.loads(q.gold)) == 1.0
        assert not any(str(s) in q.context for s in q.subject_ids)
    again, _ = build_population("quick", count=_count, specs=spec, per_cell=2, bins=[32000])
    assert again[["qid", "context", "gold"]].equals(df[["qid", "context", "gold"]])
    checked = gates[gates["gate"] == "agreement"]["n_checked"].sum()
    assert checked >= 2


def test_cli_bad_spec_and_empty_result_exit_2(tmp_quick, tmp_path):
    from clinlib import cli

    bad = tmp_path / "bad.toml"
    bad.write_text("[[task]]\ntask = 'P-NOPE'\n")
    out = CliRunner().invoke(cli.app, ["population", "--profile", "quick", "--specs", str(bad)])
    assert out.exit_code == 2 and "bad.toml" in out.output and "Traceback" not in out.output
    empty = tmp_path / "empty.toml"
    empty.write_text(SPEC_TOP.replace("sizes = [8]", "sizes = [1000]"))  # no pool that large
    out = CliRunner().invoke(
        cli.app, ["population", "--profile", "quick", "--specs", str(empty), "--bins", "32000"]
    )
    assert out.exit_code == 2 and "no question passed" in out.output
    assert not (tmp_quick / QUESTIONS_FILE).exists()


@pytest.mark.parametrize("kind", ["mimic", "meds"])
def test_real_sources_get_a_not_applicable_manifest_and_one_line(tmp_quick, kind):
    from clinlib import cli
    from clinlib.analysis.population import load_questions, not_built
    from clinlib.tasks.population.build import population_status

    (tmp_quick / "source.json").unlink()
    (tmp_quick / "source.json").write_text(json.dumps({"kind": kind}))
    (tmp_quick / QUESTIONS_FILE).write_text("stale")  # a set from another source must not survive
    df, gates = build_population("quick", count=_count, bins=[32000], per_cell=1)
    assert df.empty and gates.empty and not (tmp_quick / QUESTIONS_FILE).exists()
    status = population_status("quick")
    assert status["status"] == "not_applicable" and status["source"] == kind
    assert "need the synthetic source" in status["reason"] and kind in status["reason"]
    out = CliRunner().invoke(cli.app, ["population", "--profile", "quick", "--bins", "32000"])
    lines = out.output.strip().splitlines()
    assert out.exit_code == 0 and len(lines) == 1 and "not built" in lines[0], out.output
    assert "Traceback" not in out.output
    assert not_built("quick") == status["reason"] and load_questions("quick").empty


def test_the_synthetic_source_is_applicable_and_says_so(tmp_quick, tmp_path):
    from clinlib.tasks.population.build import not_applicable, population_status
    from clinlib.tasks.population.spec import load_specs

    assert not_applicable("synthetic", load_specs()) is None
    assert not_applicable("mimic", load_specs()) is not None
    spec = tmp_path / "top.toml"
    spec.write_text(SPEC_TOP)
    build_population("quick", count=_count, specs=spec, per_cell=1, bins=[32000])
    assert population_status("quick") == {"status": "ok", "source": "synthetic", "questions": 1}


def test_a_run_on_a_real_source_refuses_in_one_line(tmp_quick):
    from clinlib.core.guards import StageError
    from clinlib.eval.population.answer import load_population

    (tmp_quick / "source.json").unlink()
    (tmp_quick / "source.json").write_text(json.dumps({"kind": "mimic"}))
    build_population("quick", count=_count, bins=[32000], per_cell=1)
    with pytest.raises(StageError, match="need the synthetic source"):
        load_population("quick")


def test_a_too_long_draw_retires_its_size_and_larger_ones():
    from clinlib.tasks.population.build import _resize

    sizes = [10, 16, 30, 50]
    _resize(sizes, 16, "13000 tokens for a 8000 bin", 8000)
    assert sizes == [10]
    _resize(sizes, 10, "13000 tokens for a 8000 bin", 8000)  # the last size is kept
    assert sizes == [10]
    sizes = [10, 16, 30, 50]
    _resize(sizes, 16, "9000 tokens for a 24000 bin", 24000)  # too short: 16 and smaller go
    assert sizes == [30, 50]


def test_gate_totals_sum_the_gates_in_order(tmp_quick):
    import pandas as pd

    from clinlib.analysis.population import gate_totals

    rows = [  # two cells; by hand: length 5 checked 3 failed, agreement 2 checked 1 failed
        ("length", "P-CLQ", 8000, 3, 2),
        ("length", "P-TOP", 8000, 2, 1),
        ("structure", "P-CLQ", 8000, 1, 0),
        ("structure", "P-TOP", 8000, 1, 0),
        ("leakage", "P-CLQ", 8000, 1, 0),
        ("leakage", "P-TOP", 8000, 1, 0),
        ("agreement", "P-CLQ", 8000, 1, 1),
        ("agreement", "P-TOP", 8000, 1, 0),
        ("shortfall", "P-CLQ", 8000, 0, 0),
    ]
    pd.DataFrame(rows, columns=["gate", "task", "bin_tokens", "n_checked", "n_failed"]).assign(
        detail=""
    ).to_parquet(tmp_quick / GATES_FILE)
    t = gate_totals("quick").set_index("gate")
    assert list(t.index) == ["length", "structure", "leakage", "agreement"]
    assert t.loc["length"].tolist() == [5, 3, 2]
    assert t.loc["agreement"].tolist() == [2, 1, 1]


def test_groups_are_subsamples_of_cohorts_built_at_n_max(tmp_quick, tmp_path):
    """PopMedQA §2.1 step 3: every question of an idea is a subsample of its cohorts built once
    at N_max (here 10), so all its groups together hold at most N_max patients; groups drawn
    afresh from the pool (the counterexample) hold far more."""
    import numpy as np

    from clinlib.core.config import artifact_path
    from clinlib.tasks.population.groups import attributes, sample_group
    from clinlib.tasks.population.spec import load_specs

    spec = tmp_path / "top.toml"
    spec.write_text(SPEC_TOP.replace("sizes = [8]", "sizes = [8, 10]"))
    df, _ = build_population("quick", count=_count, specs=spec, per_cell=4, bins=[32000])
    union = {int(s) for ids in df["subject_ids"] for s in ids}
    assert df["qid"].nunique() >= 3 and len(union) <= 10
    idea = load_specs(spec)[0]
    attrs = attributes(
        pd.read_parquet(artifact_path("cohort.parquet", "quick")),
        pd.read_parquet(artifact_path("events.parquet", "quick")),
    )
    fresh = set()
    for seed in range(4):
        roles = sample_group(idea, attrs, 8, {}, np.random.default_rng(seed))
        fresh |= {s for v in roles.values() for s in v}
    assert len(fresh) > 10


def test_eval_stage_writes_caches_and_names_its_command(tmp_quick, tmp_path):
    from clinlib.analysis.population_stage import (
        EVAL_OUTPUTS,
        eval_missing,
        evaluate_population,
        load_eval,
    )

    # the default specs' P-TOP (the offline readers recognise a question by those templates)
    build_population("quick", count=_count, tasks=["P-TOP"], per_cell=1, bins=[32000])
    assert eval_missing("quick") == (
        "no population evaluation on the quick build yet: run "
        "`clintrace population-eval --profile quick`"
    )
    first = evaluate_population("quick")
    assert first["status"] == "ok" and first["n_questions"] == 1
    assert all((tmp_quick / f"{a}.parquet").exists() for a in EVAL_OUTPUTS)
    assert eval_missing("quick") is None
    out = load_eval("quick")
    # 3 readers x 3 renderings answered the one question (direct prompt)
    assert len(out["formats"]) == 3 * 3 and first["n_predictions"] == 9
    dec = out["decomposition"].set_index("rendering")  # the group reader (checker) is perfect
    assert (dec["group"] == 1.0).all() and dec["per_patient"].between(0, 1).all()
    assert set(out["decomposition"]["rendering"]) == {"descriptions", "codes", "codebook"}
    assert evaluate_population("quick")["status"] == "cached"
    build_population("quick", count=_count, tasks=["P-TOP"], per_cell=1, bins=[32000], seed=1)
    assert "questions changed" in eval_missing("quick")


def test_checks_file_holds_the_gate_answers_the_group_reader_reuses(tmp_quick):
    from clinlib.eval.population.answer import messages_for
    from clinlib.eval.population.readers import SOLVER_READER, register_population_readers
    from clinlib.tasks.population.build import CHECKS_FILE
    from clinlib.tasks.population.checker import check_key

    df, _ = build_population("quick", count=_count, tasks=["P-TOP"], per_cell=1, bins=[32000])
    checks = pd.read_parquet(tmp_quick / CHECKS_FILE)
    assert list(checks.columns) == ["qid", "rendering", "key", "answer"] and len(checks) == 3
    for q, c in zip(df.itertuples(), checks.itertuples(), strict=True):
        assert (c.qid, c.rendering) == (q.qid, q.rendering)
        assert c.key == check_key(q.task, q.question, q.context)
        assert c.answer == json.dumps(check(q.task, q.question, q.context))
    assert check_key("P-TOP", "a", "bc") != check_key("P-TOP", "ab", "c")
    (solver,) = [b for b in register_population_readers("quick") if b.name == SOLVER_READER]
    q = df.iloc[0]
    msgs = messages_for(q["question"], q["context"])
    assert solver.policy(msgs).text == checks["answer"].iloc[0]
    # the reader reads the file: a wrong stored answer comes back as its answer ...
    checks.loc[0, "answer"] = '["0", "1"]'
    checks.to_parquet(tmp_quick / CHECKS_FILE)
    assert solver.policy(msgs).text == '["0", "1"]'
    # ... and without the file (a build made before it) it solves the prompt itself
    (tmp_quick / CHECKS_FILE).unlink()
    assert solver.policy(msgs).text == json.dumps(check(q["task"], q["question"], q["context"]))
