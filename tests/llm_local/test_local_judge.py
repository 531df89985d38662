"""The judge against the real local model (issue 30 §3): SmolLM2-135M judges three answers
through the unchanged judge layer (the seed's prompts, the response cache).

What is asserted is the path, not the model's judgement: every request answered, every verdict
either parsed or recorded as a parse failure (never dropped, never an error), usage from the
endpoint, and a rerun served from the cache. Three short requests keep `make test-local` sane.
"""

from __future__ import annotations

import pytest

from clinlib.core import config
from clinlib.eval.judge.scoring import judge_predictions
from clinlib.eval.synthesis.calls import Calls
from tests.eval.test_judge import QUESTIONS, _preds

pytestmark = pytest.mark.local


def test_the_local_model_judges_through_the_judge_layer(local_server_running, tmp_path,
                                                         monkeypatch):  # fmt: skip
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    name = local_server_running.backbone.name
    preds = _preds({"t1": "4.1 mEq/L", "tla": "2150-03-02",
                    "mcd": "eGFR fell, so metformin was reduced"})  # fmt: skip
    out = judge_predictions(QUESTIONS, preds, name, calls=Calls("quick"), max_tokens=96)
    assert len(out) == 3 and out["error"].isna().all(), out["error"].tolist()
    assert (out["output_tokens"] > 0).all() and (out["input_tokens"] > 0).all()
    assert out["judge_response"].map(bool).all()
    # parsed or recorded: a verdict is a bool either way, a failure counts as incorrect
    assert (~out["parse_failed"] | ~out["verdict"]).all()
    assert set(out.loc[out["qid"] == "mcd", "criteria"].iat[0]) == {
        "node_coverage", "causal_relation", "chain_completeness"}  # fmt: skip
    again = judge_predictions(QUESTIONS, preds, name, calls=Calls("quick"), max_tokens=96)
    assert again["from_cache"].all()
    assert again["judge_response"].tolist() == out["judge_response"].tolist()
