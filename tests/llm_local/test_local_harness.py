"""The unchanged harness against the real local model (llama.cpp serving SmolLM2-135M).

A slice of the quick profile (two patients' T1 / T3 / T9 questions, last-visit-only) is
answered through ``runner.run``: a partial run, its resumption (only the rest is asked), a
re-run served from the response cache, usage from the server's own tokenizer at $0, and the
model's parse failures diagnosed against the scorer.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from clinlib.eval.harness import runner
from clinlib.llm import ResponseCache, count_tokens, default_cache_path
from clinlib.tasks import score
from tests.llm_local.conftest import TASKS

pytestmark = pytest.mark.local

STRATEGY = ["last-visit-only"]
EXAMPLE = "1.3 mg/dL"  # the example value in every T1 question's answer instruction


@pytest.fixture(scope="module")
def answered(local_server_running, local_profile):
    """(partial-run summary, resumed-run summary, predictions) for the slice."""
    bb = local_server_running.backbone
    partial = runner.run(
        runner.RunSpec(local_profile, STRATEGY, [bb], tasks=TASKS, limit=1),
        runner.RunOptions(progress=False),
    )
    resumed = runner.run(
        runner.RunSpec(local_profile, STRATEGY, [bb]), runner.RunOptions(progress=False)
    )
    return partial, resumed, runner.load_predictions(local_profile)


def test_a_partial_run_resumes_with_only_the_rest(answered, local_profile):
    partial, resumed, preds = answered
    n_all = len(pd.read_parquet(runner.predictions_dir(local_profile).parent / "questions.parquet"))
    n_first = int(partial["new_predictions"].sum())
    assert n_first == len(TASKS) == int(partial["api_calls"].sum())
    assert int(resumed["new_predictions"].sum()) == n_all - n_first
    assert int(resumed["api_calls"].sum()) == n_all - n_first  # nothing asked twice
    assert len(preds) == n_all and not preds.duplicated(list(runner.KEY_COLUMNS)).any()
    assert preds["error"].isna().all() and (preds["backbone"] == "local-smollm2").all()


def test_usage_is_the_models_own_tokenizer_and_costs_nothing(
    answered, local_server_running, local_profile
):
    _, _, preds = answered
    bb = local_server_running.backbone
    assert (preds["cost_usd"] == 0.0).all() and (preds["input_tokens"] > 0).all()
    assert (preds["output_tokens"] > 0).all()
    with ResponseCache(default_cache_path(local_profile), readonly=True) as cache:
        frame = cache.to_frame(include_request=True)
    assert not frame["usage_estimated"].any()  # the server reported usage
    for request, n_server in zip(frame["request"], frame["input_tokens"], strict=True):
        messages = json.loads(request)["messages"]
        # the GGUF tokenizer + chat template (clinlib.llm.local_tokens) counts what usage says
        assert count_tokens(messages, bb.model) == n_server
    cl100k = [count_tokens(json.loads(r)["messages"], "gpt-4") for r in frame["request"]]
    assert cl100k != frame["input_tokens"].tolist()  # an OpenAI encoding would not
    # so the estimate made before a run prices exactly the prompts the run sends
    est = runner.estimate(local_profile, STRATEGY, [bb])
    assert int(est["input_tokens"].sum()) == int(preds["input_tokens"].sum())
    assert float(est["cost_usd_max"].sum()) == 0.0


def test_a_rerun_is_served_from_the_response_cache(answered, local_server_running, local_profile):
    _, _, before = answered
    shutil.rmtree(runner.predictions_dir(local_profile))  # forget the rows, keep the cache
    again = runner.run(
        runner.RunSpec(local_profile, STRATEGY, [local_server_running.backbone]),
        runner.RunOptions(progress=False),
    )
    assert int(again["api_calls"].sum()) == 0
    assert int(again["cache_hits"].sum()) == len(before)
    after = runner.load_predictions(local_profile)
    key = list(runner.KEY_COLUMNS)
    merged = before.merge(after, on=key, suffixes=("", "_again"))
    assert len(merged) == len(before) and merged["from_cache_again"].all()
    assert (merged["response"] == merged["response_again"]).all()
    assert (merged["input_tokens"] == merged["input_tokens_again"]).all()


def test_parse_failures_are_diagnosed(answered):
    """The scorer's verdicts re-derived row by row; the 135M model's failures on this slice
    are counted (no parse, or the prompt's example value copied instead of the record's) and
    printed, not required: whether a small model gets something wrong is not the harness's
    behaviour."""
    _, _, preds = answered
    qs = pd.read_parquet(runner.predictions_dir("local").parent / "questions.parquet")
    rows = preds.merge(qs[["qid", "gold", "options"]], on="qid")
    copied = rows["response"].fillna("").str.contains(EXAMPLE, regex=False) & (
        rows["gold"] != EXAMPLE
    )
    for row in rows.itertuples():
        opts = [str(o) for o in row.options] or None
        strict = score(row.task, row.response, str(row.gold), opts, lenient=False)
        assert strict.parse_failed == row.parse_failed and strict.correct == row.correct
    assert not rows.loc[copied, "correct"].any()  # a copied example is never right
    # How often the 135M model fails is a property of the model and its build, not of the
    # harness: it is reported, never asserted (a better model or build must not fail this).
    print(
        f"\nlocal slice: {len(rows)} questions, strict {rows['correct'].mean():.1%}, "
        f"lenient {rows['correct_lenient'].mean():.1%}, parse failures "
        f"{int(rows['parse_failed'].sum())}, example copied {int(copied.sum())}"
    )
