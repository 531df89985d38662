"""The quick build `make test` runs every notebook, app and site check on holds a user's own
results (`make pipeline-quick` adds them: clinlib.eval.interop.outside_rows): an outside memory
(`remote-memory` over HTTP, service stopped before the notebooks) and outside predictions
(`ext:`), each on a subset of the tasks. These tests check the build holds them, so the
notebook run is the all-notebooks-with-the-service-stopped test (docs/guide.md "Your own
results, end to end")."""

from __future__ import annotations

import json

import pytest

from clinlib.core.config import build_dir
from clinlib.eval.harness.store import load_predictions
from clinlib.eval.interop import outside_rows as orows


@pytest.fixture(scope="module")
def preds(quick_built):
    p = load_predictions(quick_built)
    if not (p["strategy"] == orows.REMOTE_STRATEGY).any():
        pytest.fail(
            "the quick build holds no outside rows: run `make pipeline-quick` "
            "(python -m clinlib.eval.interop.outside_rows --profile quick)"
        )
    return p


def test_the_outside_memory_covers_its_tasks_only(preds):
    remote = preds[preds["strategy"] == orows.REMOTE_STRATEGY]
    assert sorted(remote["task"].unique()) == sorted(orows.REMOTE_TASKS)
    assert set(remote["backbone"]) == {"reference", "eager"}
    assert set(remote.loc[remote["task"] == "T3", "setting"]) == {"post", "pre"}
    # partial coverage: the kit's own cells answer tasks the outside memory did not
    kit = preds[preds["strategy"] == "full-context"]
    assert set(kit["task"]) - set(orows.REMOTE_TASKS)


def test_every_outside_memory_context_is_in_the_read_log(preds):
    """What lets the notebooks, the explorer and the site work with the service stopped: each
    prediction's context is kept (clinlib.strategies.remote_memory "A run keeps what it read")."""
    remote = preds[preds["strategy"] == orows.REMOTE_STRATEGY]
    reads = build_dir("quick") / "constructions" / "remote-memory" / "reads"
    logged = {json.loads(p.read_text())["context_sha"] for p in reads.rglob("*.json")}
    assert set(remote["context_sha"]) <= logged and remote["context_sha"].notna().all()


def test_outside_predictions_are_scored_back_whole(preds):
    ext = preds[preds["backbone"] == orows.EXT_LABEL]
    assert sorted(ext["task"].unique()) == sorted(orows.EXT_TASKS)
    assert set(ext["strategy"]) == set(orows.EXT_STRATEGIES)
    t6 = ext[ext["task"] == "T6"]
    off = t6["response"] == orows.OFF_FORMAT_ANSWER
    # every 4th T6 sample (export order) off-format, each a parse failure, none refused
    assert off.sum() == len(t6) // orows.OFF_FORMAT_EVERY > 0
    assert t6.loc[off, "parse_failed"].all() and not t6.loc[off, "correct"].any()


def test_off_format_answers_are_every_fourth_t6_sample(monkeypatch):
    monkeypatch.setattr(orows, "eager_policy", lambda messages: "A")  # the policy: not tested here
    recs = [
        {
            "input": [{"role": "user", "content": "x"}],
            "metadata": {
                "qid": f"q{i}",
                "task": t,
                "strategy": "s",
                "setting": "post",
                "question": "?",
                "question_set": "d",
            },
        }
        for i, t in enumerate(["T6", "T1", "T6", "T6", "T6", "T6"])
    ]
    got = [r["response"] == orows.OFF_FORMAT_ANSWER for r in orows.outside_answers(recs)]
    # the T6 samples are q0, q2, q3, q4, q5; the 4th of them is q4
    assert got == [False, False, False, False, True, False]
    assert {r["backbone"] for r in orows.outside_answers(recs)} == {orows.EXT_LABEL}
