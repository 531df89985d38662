"""The run budget at its exact edge and the pending cost of an interrupted run, on the tiny
profile of tests/eval/test_runner.py over loopback HTTP (FaultServer).

Prices of $1,000,000 per million tokens make every upper-bound cost an integer number of
dollars (input tokens + the task's output cap), so sums are exact in floating point and the
budget can sit exactly on the cumulative cost: a request whose upper cost reaches the budget
exactly still fits (``searchsorted(..., side="right")``); one dollar less and it does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clinlib.eval.harness import runner
from clinlib.eval.harness.cells import generation_params
from clinlib.eval.harness.prompts import build_messages
from clinlib.llm import count_tokens
from clinlib.llm.batchserver import BatchServer
from clinlib.llm.testserver import FaultServer
from clinlib.strategies import question_contexts
from tests.eval.test_runner import (  # the tiny profile and its fixtures
    KEY_ENV,
    answer,
    dialogues,  # noqa: F401
    make_questions,
    profile,  # noqa: F401
)

DOLLAR_PER_TOKEN = 1_000_000.0
STRATEGY = "no-context-blind"


def _config(path: Path, base_url: str) -> Path:
    # max_concurrency 8: the pool's 16 slots each admit their first question before any answer
    # returns, so every admission is judged against upper-bound reservations alone (a question
    # admitted after an answer came back would see that answer's actual, smaller cost instead:
    # the pool's budget is spent + what the requests in flight could still cost).
    path.write_text(
        "[backbones.fault]\n"
        f'base_url = "{base_url}"\nmodel = "gpt-4o-mini"\napi_key_env = "{KEY_ENV}"\n'
        f"price_input = {DOLLAR_PER_TOKEN}\nprice_output = {DOLLAR_PER_TOKEN}\n"
        "price_cache_read = 0.0\nmax_concurrency = 8\n"
    )
    return path


def _upper_costs(profile_name: str) -> dict[str, int]:
    """Each question's upper-bound cost in dollars, worked out independently of the runner:
    its prompt's tokens plus its task's output cap."""
    qs = make_questions()
    ctx = question_contexts(qs, STRATEGY, profile_name, "post")
    return {
        q["qid"]: count_tokens(build_messages(q, c), "gpt-4o-mini")
        + int(generation_params(q["task"]).max_tokens)
        for q, c in zip(qs.to_dict("records"), ctx["context"], strict=True)
    }


def test_a_budget_equal_to_the_upper_cost_lets_every_request_through(profile, tmp_path):  # noqa: F811
    costs = _upper_costs(profile)
    total = sum(costs.values())
    with FaultServer(answer=answer) as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        est = runner.estimate(profile, [STRATEGY], ["fault"], config=cfg)
        assert est.loc[0, "cost_usd_max"] == total  # the estimate agrees, to the dollar
        cells = runner.run(runner.RunSpec(profile, [STRATEGY], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, budget_usd=float(total), batch_size=len(costs)))  # fmt: skip
        row = cells.iloc[0]
        assert (row["n_predicted"], row["stopped"]) == (len(costs), None)
        assert srv.n_requests == len(costs)


def test_one_dollar_less_stops_before_the_last_request_and_prices_what_is_pending(
    profile,  # noqa: F811
    tmp_path,
):
    costs = _upper_costs(profile)
    total = sum(costs.values())
    with FaultServer(answer=answer) as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        cells = runner.run(runner.RunSpec(profile, [STRATEGY], ["fault"]),
                           runner.RunOptions(config=cfg, progress=False, budget_usd=float(total - 1), batch_size=len(costs)))  # fmt: skip
        row = cells.iloc[0]
        assert row["stopped"].startswith("budget")
        assert row["n_predicted"] == len(costs) - 1 and srv.n_requests == len(costs) - 1
        done = set(runner.load_predictions(profile)["qid"])
        (left,) = set(costs) - done
        # the interrupted cell's estimate: one question pending, priced alone
        est = runner.estimate(profile, [STRATEGY], ["fault"], config=cfg).iloc[0]
        assert (est["questions"], est["pending"]) == (len(costs), 1)
        assert est["pending_cost_usd_max"] == pytest.approx(costs[left], abs=1e-9)
        assert est["cost_usd_max"] == total


@pytest.mark.parametrize(("below", "n_cut"), [(0.0, 0), (0.5, 1)])
def test_batch_mode_budget_edge(profile, tmp_path, below, n_cut):  # noqa: F811
    # Batch mode checks the whole cell up front (np.searchsorted over the cumulative upper
    # costs, at the batch price: half of $1 per token, so every cost is a multiple of $0.5 and
    # every sum exact). A budget equal to the cell's total keeps every request (side="right");
    # half a dollar less cuts exactly the last one.
    half = {q: c / 2 for q, c in _upper_costs(profile).items()}
    total = sum(half.values())
    with BatchServer(answer=answer) as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        row = runner.run(runner.RunSpec(profile, [STRATEGY], ["fault"]),
                         runner.RunOptions(config=cfg, progress=False, budget_usd=total - below, mode="batch", batch_options={"poll_interval_s": 0.001})).iloc[0]  # fmt: skip
        assert row["n_predicted"] == len(half) - n_cut and len(srv.lines_run) == len(half) - n_cut
        assert (row["stopped"] is None) == (n_cut == 0)
