"""Dialogue rewrites and question paraphrases by the real local model (llama.cpp serving
SmolLM2-135M; paper Fig. 2 stages 3-4), through the unchanged verifier and checks.

What is asserted is the path, not the quality: a 135M model is expected to fail the verifier
often, which exercises rescue and fallback for real. Each visit gets a recorded outcome and, when
rejected, the check that caught it; whatever is kept passes every HARD check; a rerun asks the
server nothing (response cache). The rates are printed (``pytest -s``) for the report: they
describe this model, on these two visits, at this output cap.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.io import write_parquet
from clinlib.data.build import SOURCE_FILE, load
from clinlib.dialogue.rewrite import REWRITE_CHECKS
from clinlib.dialogue.rewrite_report import backbone_rates, failing_checks
from clinlib.eval.synthesis.rewrite import rewrite_dialogues
from clinlib.eval.synthesis.rule_writers import REWRITER
from tests.llm_local.conftest import PATIENTS

pytestmark = pytest.mark.local

PATIENT = PATIENTS[0]  # two visits of about a thousand tokens each (quick profile)
MAX_TOKENS = 1024  # per visit: a whole rewrite fits; bounded so two visits take minutes


@pytest.fixture(scope="module")
def one_patient(tmp_path_factory, quick_built):
    """A profile ``one`` holding :data:`PATIENT`'s cohort row and events (quick's), in a
    temporary BUILD_DIR; its raw tables are quick's (source.json)."""
    events = load("events", quick_built)
    cohort = load("cohort", quick_built)
    source = json.loads(config.artifact_path(SOURCE_FILE, quick_built).read_text())
    root = tmp_path_factory.mktemp("build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", root)
        write_parquet(events[events["subject_id"] == PATIENT].reset_index(drop=True),
                      config.artifact_path("events.parquet", "one"))  # fmt: skip
        write_parquet(cohort[cohort["subject_id"] == PATIENT].reset_index(drop=True),
                      config.artifact_path("cohort.parquet", "one"))  # fmt: skip
        config.artifact_path(SOURCE_FILE, "one").write_text(json.dumps(source))
        yield "one"


@pytest.fixture(scope="module")
def rewritten(local_server_running, one_patient):
    name = local_server_running.backbone.name
    seen = []
    out = rewrite_dialogues(one_patient, name, rescue=[REWRITER], max_tokens=MAX_TOKENS,
                            on_result=seen.append)  # fmt: skip
    return name, out, seen


def test_every_visit_has_an_outcome_and_a_named_check(rewritten, one_patient):
    name, out, seen = rewritten
    log = out["frames"]["dialogue_rewrites"]
    n_visits = load("events", one_patient)["visit_idx"].nunique()
    # one request per visit to the model; a rejected visit's rescue is a second request, to
    # the rule-based rescuer
    asked = [r for r in seen if r.request_id.startswith("rw-")]
    assert len(log) == n_visits == sum(r.backbone == name for r in asked)
    assert sum(r.backbone == REWRITER for r in asked) == int((log["outcome"] == "rescued").sum())
    assert set(log["outcome"]) <= {"accepted", "rescued"}  # the rule-based rescue never fails
    rejected = log[log["outcome"] == "rescued"]
    assert rejected["check"].isin(list(REWRITE_CHECKS)).all()
    assert (rejected["attempts"].map(len) == 1).all()
    assert (log.loc[log["outcome"] == "accepted", "backbone"] == name).all()
    print("\nlocal rewrite rates:\n" + backbone_rates(log, [name, REWRITER]).to_string())
    if len(rejected):
        print(failing_checks(log).to_string())
    for r in log.itertuples():
        print(f"visit {r.visit_idx}: {r.outcome} ({r.reason or 'verified'})")


def test_what_is_kept_passes_every_hard_check(rewritten):
    _, out, _ = rewritten
    checks = load("dialogue_checks", out["profile"])
    assert checks.loc[checks["severity"] == "hard", "passed"].all(), checks[~checks["passed"]]


def test_a_rerun_asks_the_model_nothing(rewritten, local_server_running, one_patient):
    name, first, _ = rewritten
    again = rewrite_dialogues(one_patient, name, rescue=[REWRITER], max_tokens=MAX_TOKENS)
    assert again["calls"].api_calls.get(name, 0) == 0
    assert again["calls"].cache_hits[name] == len(first["frames"]["dialogue_rewrites"])
    pd.testing.assert_frame_equal(load("dialogues", again["profile"]),
                                  first["frames"]["dialogues"].reset_index(drop=True))  # fmt: skip
