"""The harness's records (clinlib.eval.harness.records): a run named by a RunSpec and RunOptions."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from clinlib.eval.harness import runner
from clinlib.eval.harness.records import (
    Cell,
    CellKey,
    PredictionKey,
    RunOptions,
    RunSpec,
    run_records,
)
from clinlib.eval.readers.policies import register_offline_backbones
from clinlib.llm import get_backbone


def test_a_bare_name_is_one_name_and_the_spec_is_frozen():
    spec = RunSpec("quick", "full-context", "reference", "post", tasks="T1")
    assert spec.strategies == ("full-context",) and spec.backbones == ("reference",)
    assert spec.settings == ("post",) and spec.tasks == ("T1",) and spec.own_questions
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.limit = 3  # type: ignore[misc]


def test_retry_empty_reasks_past_the_cache_unless_the_client_options_say_otherwise():
    assert RunOptions().client_kwargs() == {}
    assert RunOptions(retry_empty=True).client_kwargs() == {"refresh_empty": True}
    opts = RunOptions(retry_empty=True, client_options={"refresh_empty": False, "timeout_s": 3})
    assert opts.client_kwargs() == {"refresh_empty": False, "timeout_s": 3}


def test_run_records_sends_each_argument_to_its_record():
    spec, options = run_records(profile="p", strategies=["a"], tasks=["T1"], progress=False)
    assert (spec.profile, spec.strategies, spec.tasks) == ("p", ("a",), ("T1",))
    assert options == RunOptions(progress=False)
    with pytest.raises(TypeError, match="unknown run argument"):
        run_records(budget=1.0)


def test_a_finished_cell_is_a_state_and_keys_are_named():
    try:
        register_offline_backbones()
    except ValueError:
        pass  # registered by an earlier test
    bb = get_backbone("reference")
    qs = pd.DataFrame({"qid": ["q1"]})
    done = Cell(bb, "post", qs, "full-context", "rule-based")
    assert done.finished and done.key == ("full-context", "reference", "rule-based", "post")
    assert done.key.basis == ("full-context", "rule-based", "post")
    assert isinstance(done.key, CellKey)
    key = PredictionKey("q1", *done.key)
    assert key.qid == "q1" and key == ("q1", "full-context", "reference", "rule-based", "post")


def test_run_takes_a_spec_not_positions():
    with pytest.raises(TypeError, match="RunSpec"):
        runner.run("quick", ["full-context"])  # type: ignore[arg-type]
