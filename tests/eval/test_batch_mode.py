"""The harness's batch mode (run(mode="batch") / `clintrace run --batch`) against BatchServer.

The tiny profile and answer function of test_runner: Q0..Q9 right when even, Q10 right,
Q11 right only leniently, so the accuracies are worked out by hand; a batch run must give
the same rows as a live one, at the batch price, into the same response cache.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clinlib import cli
from clinlib.eval.harness import runner
from clinlib.llm import ResponseCache, default_cache_path, get_backbone
from clinlib.llm.batch import BatchPending
from clinlib.llm.batchfiles import load_entries
from clinlib.llm.batchserver import BatchServer
from tests.eval.test_runner import (  # noqa: F401 - the tiny profile fixtures
    FAST,
    PRICE_IN,
    PRICE_OUT,
    answer,
    dialogues,
    profile,
    write_config,
)

FAST_BATCH = {"poll_interval_s": 0.001}


def test_batch_run_matches_live_rows_at_half_price(profile, tmp_path):  # noqa: F811 - the fixture
    with BatchServer(answer=answer, line_faults={"T1-q03|no-context-blind|fault|none|post":
                                                 "error"}) as srv:  # fmt: skip
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                             runner.RunOptions(config=cfg, progress=False, mode="batch", batch_options=FAST_BATCH, client_options=FAST))  # fmt: skip
        assert srv.n_batches == 1 and srv.n_requests == 0  # no live call at all
        preds = runner.load_predictions(profile)
        assert len(preds) == 12 and preds["error"].notna().sum() == 1
        failed = preds[preds["error"].notna()].iloc[0]
        assert failed["qid"] == "T1-q03" and "HTTP 400" in failed["error"]
        ok = preds[preds["error"].isna()]
        # Q0,2,4,6,8 and Q10 right; Q11 wrong strictly (prose), right leniently
        assert ok["correct"].sum() == 6 and ok["correct_lenient"].sum() == 7
        bb = get_backbone("fault", cfg)
        assert bb.batch_prices.price_input == PRICE_IN / 2
        expected = [bb.batch_cost(i, o, c) for i, o, c in
                    ok[["input_tokens", "output_tokens", "cached_tokens"]].itertuples(index=False)]  # fmt: skip
        assert ok["cost_usd"].tolist() == pytest.approx(expected)
        assert ok["cost_usd"].sum() < bb.cost(ok["input_tokens"].sum(), ok["output_tokens"].sum())
        row = summary.iloc[0]
        assert row["errors"] == 1 and row["new_predictions"] == 12 and row["api_calls"] == 12
        with ResponseCache(default_cache_path(profile), readonly=True) as cache:
            assert len(cache) == 11
        # The failed one is re-asked live with retry_errors: the cache serves the other 11.
        runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                   runner.RunOptions(config=cfg, progress=False, retry_errors=True, client_options=FAST))  # fmt: skip
        assert srv.n_requests == 1
    assert runner.load_predictions(profile)["error"].isna().all()


def test_cli_batch_pending_then_rerun_collects_one_batch(profile, tmp_path):  # noqa: F811 - the fixture
    cli_runner = CliRunner()
    with BatchServer(answer=answer, polls_to_finish=3) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        args = ["run", "--profile", profile, "--strategies", "no-context-blind", "--backbones",
                "fault", "--config", str(cfg), "--batch", "--poll-interval", "0"]  # fmt: skip
        first = cli_runner.invoke(cli.app, [*args, "--batch-wait", "0"])
        assert first.exit_code == 3, first.output
        assert "pending:" in first.output and "rerun the same command" in first.output
        assert runner.load_predictions(profile).empty
        (entry,) = load_entries(tmp_path / profile / runner.BATCHES_DIR)
        assert entry.batch_id == "batch_0001" and not entry.collected
        second = cli_runner.invoke(cli.app, args)
        assert second.exit_code == 0, second.output
        assert srv.n_batches == 1 and srv.n_requests == 0
    assert len(runner.load_predictions(profile)) == 12
    bad = cli_runner.invoke(cli.app, [*args[:-2], "--poll-interval", "-1"])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1, bad.output


def test_estimate_prices_batch_beside_live(profile, tmp_path):  # noqa: F811 - the fixture
    with BatchServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        table = runner.estimate(profile, ["no-context-blind"], ["fault"], config=cfg)
    assert table["batch_cost_usd_max"].iloc[0] == pytest.approx(table["cost_usd_max"].iloc[0] / 2)
    assert PRICE_OUT > 0  # the output cap is priced too (half of it in batch)


def test_budget_is_checked_at_the_batch_price(profile, tmp_path):  # noqa: F811 - the fixture
    with BatchServer(answer=answer) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        est = runner.estimate(profile, ["no-context-blind", "full-context"], ["fault"],
                              config=cfg).set_index("strategy")  # fmt: skip
        # Half the live upper bound holds the whole cell at the batch price (live: ~6 of 12).
        budget = float(est.loc["no-context-blind", "cost_usd_max"]) / 2 * 1.001
        whole = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, budget_usd=budget, mode="batch", batch_options=FAST_BATCH)).iloc[0]  # fmt: skip
        assert whole["n_predicted"] == 12 and whole["stopped"] is None
        assert len(srv.lines_run) == 12
        half = float(est.loc["full-context", "batch_cost_usd_max"]) / 2
        cut = runner.run(runner.RunSpec(profile, ["full-context"], ["fault"]),
                         runner.RunOptions(config=cfg, progress=False, budget_usd=half, mode="batch", batch_options=FAST_BATCH)).iloc[0]  # fmt: skip
        assert cut["stopped"].startswith("budget") and 0 < cut["n_predicted"] < 12
        assert len(srv.lines_run) - 12 == cut["n_predicted"]
        assert 0 < cut["new_cost_usd"] <= half


def test_two_backbones_are_submitted_before_either_is_awaited(profile, tmp_path):  # noqa: F811 - the fixture
    with BatchServer(answer=answer, polls_to_finish=2) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        second = cfg.read_text().replace("[backbones.fault]", "[backbones.fault2]")
        cfg.write_text(cfg.read_text() + second.replace('"gpt-4o-mini"', '"gpt-4o"'))
        kwargs = dict(config=cfg, progress=False, mode="batch")
        with pytest.raises(BatchPending) as pending:
            runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault", "fault2"]),
                       runner.RunOptions(batch_options={"poll_interval_s": 0, "max_wait_s": 0}, **kwargs))  # fmt: skip
        assert srv.n_batches == 2 and str(pending.value).count("still running") == 2
        summary = runner.run(runner.RunSpec(profile, ["no-context-blind"], ["fault", "fault2"]),
                             runner.RunOptions(batch_options=FAST_BATCH, **kwargs))  # fmt: skip
        assert srv.n_batches == 2 and summary["n_predicted"].tolist() == [12, 12]
        assert sorted(b["model"] for b in _models(srv)) == ["gpt-4o", "gpt-4o-mini"]


def _models(srv: BatchServer) -> list[dict]:
    """The model of each batch, read from its input file's first line."""
    return [{"model": json.loads(srv.file_bytes[b["input_file_id"]].splitlines()[0])["body"]["model"]}
            for b in srv.batches.values()]  # fmt: skip
