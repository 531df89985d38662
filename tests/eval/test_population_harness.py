"""Population questions inside the main harness (issue 29 §3): `run --tasks P-...` and
`estimate --tasks P-...` share one code path with the `population-run` / `population-estimate`
aliases; provider batch mode, the egress guard and mixed task lists; all on one small P-TOP set
built from the quick cohort in a temporary build folder."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config
from clinlib.eval.population.answer import (
    PREDICTIONS_FILE,
    answer_population,
    estimate_population,
    messages_for,
    population_tasks,
)
from clinlib.llm import Backbone, count_tokens, register_backbone, unregister_backbone
from clinlib.tasks.population.build import QUESTIONS_FILE, build_population
from clinlib.tasks.population.spec import TASK_IDS

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def _built(tmp_path_factory, quick_cohort):
    """P-TOP questions of the default specs (the offline readers recognise a question by the
    default specs' templates), 32K bin (full code descriptions), built once from the quick
    cohort."""
    root = tmp_path_factory.mktemp("pop")
    src, dst = config.BUILD_DIR / quick_cohort, root / quick_cohort
    dst.mkdir()
    for name in ("cohort.parquet", "events.parquet", "source.json", "raw"):
        (dst / name).symlink_to(src / name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", root)
        df, _ = build_population(
            "quick",
            count=lambda s: count_tokens(s, "gpt-4"),
            tasks=["P-TOP"],
            per_cell=2,
            bins=[32000],
        )
    return dst, df


@pytest.fixture
def pop_profile(_built, tmp_path, monkeypatch):
    """Profile ``quick`` in a fresh temporary BUILD_DIR holding the built P-TOP set."""
    src, df = _built
    dst = tmp_path / "quick"
    dst.mkdir()
    for name in ("cohort.parquet", "events.parquet", QUESTIONS_FILE):
        (dst / name).symlink_to((src / name).resolve())
    shutil.copy(src / "source.json", dst / "source.json")
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    return dst, df


def test_population_tasks_selects_refuses_and_expands():
    assert population_tasks(["T1", "T9"]) is None and population_tasks(None) is None
    assert population_tasks(["population"]) == list(TASK_IDS)
    assert population_tasks(["P-TOP", "P-SRT"]) == ["P-TOP", "P-SRT"]
    with pytest.raises(ValueError, match="mixes population tasks"):
        population_tasks(["T1", "P-TOP"])
    with pytest.raises(ValueError, match="unknown population task 'P-XYZ'"):
        population_tasks(["P-XYZ"])


def test_run_and_its_alias_answer_the_same_rows(pop_profile):
    root, df = pop_profile
    runner = CliRunner()
    res = runner.invoke(app, ["run", "--profile", "quick", "--tasks", "P-TOP", "--backbones",
                              "population-solver", "--renderings", "codes,codebook"])  # fmt: skip
    assert res.exit_code == 0, res.output
    first = pd.read_parquet(root / PREDICTIONS_FILE)
    assert len(first) == 2 * df["qid"].nunique() and set(first["rendering"]) == {
        "codes",
        "codebook",
    }
    assert (first["score"] == 1.0).all() and not first["parse_failed"].any()
    res = runner.invoke(app, ["population-run", "--profile", "quick", "--tasks", "P-TOP",
                              "--backbones", "population-solver", "--renderings", "codes,codebook"])  # fmt: skip
    assert res.exit_code == 0, res.output
    again = pd.read_parquet(root / PREDICTIONS_FILE)
    cols = ["qid", "rendering", "backbone", "response", "score"]
    pd.testing.assert_frame_equal(first[cols], again[cols])


def test_limit_is_per_task_as_in_run():
    from clinlib.eval.population.answer import _select

    qs = pd.DataFrame([{"qid": f"{t}{i}", "task": t, "rendering": r}
                       for t in ("P-TOP", "P-SRT") for i in (1, 2)
                       for r in ("descriptions", "codes", "codebook")])  # fmt: skip
    got = _select(qs, None, None, 1)
    assert sorted(got["qid"].unique()) == ["P-SRT1", "P-TOP1"] and len(got) == 6
    assert _select(qs, ["codes"], ["P-SRT"], 5)["qid"].tolist() == ["P-SRT1", "P-SRT2"]
    with pytest.raises(ValueError, match="no question matches"):
        _select(qs, ["codes"], ["P-CLQ"], None)


def test_mixed_tasks_exit_2_with_one_line(pop_profile):
    res = CliRunner().invoke(app, ["run", "--profile", "quick", "--tasks", "T1,P-TOP"])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "mixes population tasks" in res.output


def test_estimate_counts_the_real_prompts_and_prices_a_256k_set(pop_profile):
    _, df = pop_profile
    table = estimate_population("quick", [MODEL])
    for r in table.itertuples():
        sub = df[df["rendering"] == r.rendering]
        pairs = zip(sub["question"], sub["context"], strict=True)
        want = sum(count_tokens(messages_for(q, c), MODEL) for q, c in pairs)
        assert r.input_tokens == want and r.requests == len(sub)
        assert r.output_tokens_max == len(sub) * 2048
    runner = CliRunner()
    main = runner.invoke(app, ["estimate", "--profile", "quick", "--tasks", "population",
                               "--backbones", MODEL])  # fmt: skip
    alias = runner.invoke(app, ["population-estimate", "--profile", "quick", "--backbones", MODEL])
    assert main.exit_code == alias.exit_code == 0, main.output
    assert main.output == alias.output  # one code path
    assert (
        f"a set of {df['qid'].nunique()} population questions of 256,000 input tokens each"
        in main.output
    )


def test_batch_mode_sends_one_job_and_a_rerun_collects_it(pop_profile):
    from clinlib.llm.batch import BatchPending
    from clinlib.llm.batchserver import BatchServer

    root, df = pop_profile
    with BatchServer(answer=lambda m: '["P1", "P2"]', polls_to_finish=2) as srv:
        register_backbone(Backbone(name="bulk", model=MODEL, base_url=srv.base_url,
                                   price_input=1.0, price_output=2.0), replace_existing=True)  # fmt: skip
        try:
            with pytest.raises(BatchPending):
                answer_population("quick", ["bulk"], mode="batch",
                                  batch_options={"poll_interval_s": 0, "max_wait_s": 0})  # fmt: skip
            new = answer_population("quick", ["bulk"], mode="batch",
                                    batch_options={"poll_interval_s": 0})  # fmt: skip
        finally:
            unregister_backbone("bulk")
        assert srv.n_batches == 1 and len(srv.lines_run) == len(df)  # collected, not resent
    assert len(new) == len(df) and new["error"].isna().all() and not new["parse_failed"].any()
    golds = dict(zip(df["qid"], df["gold"].map(json.loads), strict=True))
    for q, sc in zip(new["qid"], new["score"], strict=True):  # precision@k of ["P1", "P2"]
        assert sc == len({"P1", "P2"} & set(golds[q])) / len(golds[q])
    assert (new["cost_usd"] > 0).all()


def test_credentialed_records_never_reach_an_unapproved_backbone(pop_profile):
    from clinlib.llm.testserver import FaultServer

    root, _ = pop_profile
    src = json.loads((root / "source.json").read_text())
    (root / "source.json").write_text(json.dumps(dict(src, credentialed=True)))
    srv = FaultServer(answer=lambda m: "[]")
    srv.start()
    register_backbone(
        Backbone(name="open", model=MODEL, base_url=srv.base_url), replace_existing=True
    )
    try:
        res = CliRunner().invoke(app, ["run", "--profile", "quick", "--tasks", "P-TOP",
                                       "--backbones", "open"])  # fmt: skip
    finally:
        unregister_backbone("open")
        srv.stop()
    assert res.exit_code == 2 and srv.n_requests == 0
    assert not (root / PREDICTIONS_FILE).exists()
