"""The streaming setting through the harness (clinlib.eval.harness.runner.run) on a quick-profile
subset with the deterministic reference reader: one prediction row per (question, checkpoint),
checkpoint columns filled only under ``stream``, and — by construction — the final checkpoint's
answers equal the static ``post`` answers for the same questions."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.config import build_dir
from clinlib.data.build import load
from clinlib.eval.harness import runner
from clinlib.strategies import question_contexts_many, setting_plan
from clinlib.tasks.settings import noise_transform

STRATS = ["full-context", "mem0", "last-visit-only"]


@pytest.fixture(scope="module")
def subset_build(quick_built, tmp_path_factory):
    """A scratch build folder holding the quick profile's inputs (its caches stay clean)."""
    src = build_dir("quick")
    root = tmp_path_factory.mktemp("build")
    (root / "quick").mkdir()
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, root / "quick" / f.name)
    old, config.BUILD_DIR = config.BUILD_DIR, root
    yield "quick"
    config.BUILD_DIR = old


def _subset() -> pd.DataFrame:
    qs = pd.read_parquet(build_dir("quick") / "questions.parquet")
    turns = pd.read_parquet(build_dir("quick") / "dialogues.parquet", columns=["subject_id",
                                                                              "visit_idx"])  # fmt: skip
    n = turns.groupby("subject_id")["visit_idx"].nunique()
    small = set(n[n <= 10].index)
    single = qs[[len(ids) == 1 and int(ids[0]) in small for ids in qs["subject_ids"]]]
    return single.groupby("task", sort=True).head(1).reset_index(drop=True)


def test_final_checkpoint_equals_post(subset_build):
    qs = _subset()
    assert {"T1", "T3", "T5", "T9"} <= set(qs["task"])  # both injection variants and T9
    runner.run(runner.RunSpec(subset_build, STRATS, ["reference"], ["post", "stream(delta=2)"], questions=qs),
               runner.RunOptions(progress=False))  # fmt: skip
    assert set(runner.load_predictions(subset_build)["setting"]) == {"post"}  # static only
    preds = runner.load_predictions(subset_build, all_settings=True)
    post = preds[preds["setting"] == "post"]
    stream = preds[preds["setting"].str.startswith("stream@")]
    assert len(post) == len(qs) * len(STRATS)
    plan = setting_plan(qs, "stream(delta=2)", subset_build)
    assert len(stream) == len(plan) * len(STRATS)
    assert post[["checkpoint_visit", "checkpoint_final", "memory_items"]].isna().all().all()
    assert stream[["checkpoint_visit", "checkpoint_final", "memory_items"]].notna().all().all()
    assert (stream["setting"] == "stream@" + stream["checkpoint_visit"].astype(str)).all()
    final = stream[stream["checkpoint_final"].astype(bool)]
    assert len(final) == len(post)  # every question reaches its patient's final checkpoint
    keys = ["qid", "strategy"]
    both = post.merge(final, on=keys, suffixes=("_post", "_final"))
    assert len(both) == len(post)
    for col in ("correct", "response", "context_tokens"):
        assert (both[f"{col}_post"] == both[f"{col}_final"]).all(), col
    acc = both.groupby("strategy")[["correct_post", "correct_final"]].mean()
    assert (acc["correct_post"] == acc["correct_final"]).all()
    # earlier checkpoints see less: last-visit-only's memory is one visit, mem0's grows
    mem0 = stream[stream["strategy"] == "mem0"].groupby("qid")["memory_items"]
    assert (mem0.max() >= mem0.min()).all() and (mem0.max() > mem0.min()).any()
    # a second run finds every key done: nothing is re-asked
    again = runner.run(runner.RunSpec(subset_build, STRATS, ["reference"], ["post", "stream(delta=2)"], questions=qs),
                       runner.RunOptions(progress=False))  # fmt: skip
    assert int(again["new_predictions"].sum()) == 0
    assert set(again["setting"]) == {"post", *plan["setting"]}


def test_mixed_contexts_and_stream_over_the_extended_sequence(subset_build):
    """mixed: the construction and the answer-time text are the noisy dialogue (after the T3
    injection); stream+mixed counts the noise sessions; its final checkpoint is mixed."""
    qs = _subset()
    qs = qs[qs["task"].isin(["T1", "T3"])].reset_index(drop=True)
    post, mixed, final = (
        question_contexts_many(qs, ["full-context"], subset_build, s)[0].set_index("qid")
        for s in ("post", "mixed(seed=123)", "stream(delta=4)+mixed(seed=123)")
    )
    assert set(mixed["setting"]) == {"mixed(seed=123)"}
    assert (mixed["context_tokens"] > post.loc[mixed.index, "context_tokens"]).all()
    assert mixed["checkpoint_visit"].isna().all()
    t3 = qs[(qs["task"] == "T3") & (qs["injection"] != "")]["qid"]
    for qid in t3:  # the T3 sentence is still there at answer time, among the noise
        text = json.loads(qs.set_index("qid").loc[qid, "injection"])["text"]
        assert text in mixed.loc[qid, "context"] and text in post.loc[qid, "context"]
    turns = load("dialogues", subset_build)
    noisy = noise_transform("mixed(seed=123)")(turns[turns["subject_id"].isin(
        {int(ids[0]) for ids in qs["subject_ids"]})])  # fmt: skip
    n_ext = noisy.groupby("subject_id")["visit_idx"].nunique()
    last = final[final["checkpoint_final"].astype(bool)]
    sids = {q: int(ids[0]) for q, ids in zip(qs["qid"], qs["subject_ids"], strict=True)}
    assert [int(v) for v in last["checkpoint_visit"]] == [n_ext[sids[q]] for q in last.index]
    assert (last["context"] == mixed.loc[last.index, "context"]).all()
    assert last["setting"].str.startswith("stream+mixed(seed=123)@").all()
