"""The evidence and ablations stages' readers (clinlib.analysis.evidence_stage,
clinlib.analysis.ablation_stage): recall read from the stage's artifact gives the same loss
labels as measuring it, covered strategies are not measured again, and a build without the
artifact (or with a failed stage) is refused in one line naming the command."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.analysis import ablation_stage, evidence, evidence_stage
from clinlib.core import config
from clinlib.core.guards import StageError, manifest_path
from tests import strategy_fixtures as sf


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A one-patient profile with dialogues and two T1 questions (anchor present / absent)."""
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    d = tmp_path / "tiny"
    d.mkdir()
    events = sf.events_7001()
    sf.dialogue(events).to_parquet(d / "dialogues.parquet", index=False)
    (d / "source.json").write_text(json.dumps({"kind": "synthetic", "credentialed": False}))
    lab = events[events["kind"] == "lab"].iloc[0]
    qs = pd.DataFrame(
        {
            "qid": ["a", "b"],
            "task": ["T1", "T1"],
            "subject_ids": [[7001], [7001]],
            "question": ["Creatinine?", "Potassium?"],
            "gold": ["x", "y"],
            "anchor_event_ids": [[lab["event_id"]], ["LAB-404"]],
            "injection": "",
            "evidence_turns": [[], []],
            "meta": "{}",
        }
    )
    return d, qs


def _preds() -> pd.DataFrame:
    # full-context right on a (anchor present), wrong on b (anchor missing: representation);
    # no-context-blind wrong on a (holds nothing: representation)
    return pd.DataFrame(
        {
            "qid": ["a", "b", "a"],
            "strategy": ["full-context", "full-context", "no-context-blind"],
            "backbone": "reference",
            "setting": "post",
            "prep_model": "none",
            "correct": [True, False, False],
        }
    )


def test_stage_recall_gives_the_labels_measuring_gives_without_building_again(tiny, monkeypatch):
    d, qs = tiny
    strategies = ["full-context", "no-context-blind"]
    measured, _ = evidence.label_losses(_preds(), qs, "tiny")
    assert list(measured["lost_in"]) == ["correct", "representation", "representation"]
    recall = evidence.evidence_recall(qs, strategies, "tiny", cache=False)
    recall.to_parquet(d / "evidence_recall.parquet", index=False)

    def no_build(*args, **kwargs):
        raise AssertionError("a covered strategy's contexts were built again")

    monkeypatch.setattr(evidence, "question_contexts_many", no_build)
    got, per_q = evidence_stage.stage_losses(_preds(), qs, "tiny")
    pd.testing.assert_series_equal(got["lost_in"], measured["lost_in"])
    assert sorted(per_q["strategy"].unique()) == strategies


def test_an_uncovered_strategy_is_still_measured(tiny):
    d, qs = tiny
    only_full = evidence.evidence_recall(qs, ["full-context"], "tiny", cache=False)
    only_full.to_parquet(d / "evidence_recall.parquet", index=False)
    got, _ = evidence_stage.stage_losses(_preds(), qs, "tiny")
    assert list(got["lost_in"]) == ["correct", "representation", "representation"]


def test_a_build_before_the_stage_is_refused_in_one_line_naming_the_command(tiny):
    _, qs = tiny
    with pytest.raises(StageError) as err:
        evidence_stage.stage_losses(_preds(), qs, "tiny")
    assert "run `clintrace evidence --profile tiny`" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(StageError, match="clintrace ablations --profile tiny"):
        ablation_stage.stage_encoder_hits("tiny")
    with pytest.raises(StageError, match="clintrace ablations --profile tiny"):
        ablation_stage.stage_builds("tiny", "k")


def test_a_failed_evidence_stage_makes_its_artifact_refused(tiny):
    d, qs = tiny
    evidence.evidence_recall(qs, ["full-context"], "tiny", cache=False).to_parquet(
        d / "evidence_recall.parquet", index=False
    )
    path = manifest_path("evidence", "tiny")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"status": "failed", "reason": "boom"}))
    with pytest.raises(StageError, match="last `clintrace evidence` failed"):
        evidence_stage.load_recall("tiny")


def test_build_rows_are_read_per_sweep(tiny):
    d, _ = tiny
    pd.DataFrame(
        {
            "label": ["dense-retrieval(k=3)", "llm-summary(budget_tokens=500)"],
            "sweep": ["k", "budget_tokens"],
            "n_built": [1, 1],
        }
    ).to_parquet(d / "ablation_builds.parquet", index=False)
    got = ablation_stage.stage_builds("tiny", "k")
    assert list(got["label"]) == ["dense-retrieval(k=3)"]
    assert "sweep" not in got.columns
    with pytest.raises(StageError, match="no sweep 'K'"):
        ablation_stage.stage_builds("tiny", "K")


def test_stage_split_reads_stored_cells_and_computes_only_the_others(tiny):
    d, qs = tiny
    oracle = pd.DataFrame(
        {
            "qid": ["a", "b"],
            "strategy": "oracle",
            "backbone": "reference",
            "setting": "post",
            "prep_model": "none",
            "correct": [True, False],
        }
    )
    preds = pd.concat([_preds(), oracle], ignore_index=True)
    per_q = evidence.evidence_recall(qs, ["full-context", "no-context-blind"], "tiny", cache=False)
    want = evidence.loss_split(preds, per_q, qs)
    # the stage measured full-context only (and its oracle ceiling); no-context-blind is a
    # cell the notebook adds
    stored = evidence.loss_split(preds[preds["strategy"] != "no-context-blind"], per_q, qs)
    assert set(stored["strategy"]) == {"full-context"}
    stored.to_parquet(d / "loss_split.parquet", index=False)
    got = evidence_stage.stage_split(preds, per_q, qs, "tiny")
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # a stored cell is read, not recomputed: a changed stored value shows through
    stored.loc[stored["strategy"] == "full-context", "accuracy"] = 0.25
    stored.to_parquet(d / "loss_split.parquet", index=False)
    got = evidence_stage.stage_split(preds, per_q, qs, "tiny")
    assert set(got.loc[got["strategy"] == "full-context", "accuracy"]) == {0.25}


def test_stage_build_costs_read_stored_strategies_and_build_only_the_others(tiny, monkeypatch):
    d, _ = tiny
    with pytest.raises(StageError, match="run `clintrace evidence --profile tiny`"):
        evidence_stage.stage_build_costs(["full-context"], "tiny")
    want = evidence_stage.build_cost_table("tiny", ["mem0", "full-context"])
    assert list(want["strategy"]) == ["mem0", "full-context"]  # one patient each
    stored = evidence_stage.build_cost_table("tiny", ["full-context", "mem0"])
    stored.to_parquet(d / "build_costs.parquet", index=False)
    got = evidence_stage.stage_build_costs(["mem0", "full-context"], "tiny")
    pd.testing.assert_frame_equal(got, want)  # in the order asked, as the cache reads it
    built = []

    def counted(profile, strategies):
        built.append(list(strategies))
        return stored[stored["strategy"] == "mem0"].assign(strategy=strategies[0])

    monkeypatch.setattr(evidence_stage, "build_cost_table", counted)
    # a stored strategy is read, not built: a changed stored value shows through
    stored.loc[stored["strategy"] == "mem0", "build_seconds"] = 99.0
    stored.to_parquet(d / "build_costs.parquet", index=False)
    got = evidence_stage.stage_build_costs(["mem0", "last-visit-only"], "tiny")
    assert built == [["last-visit-only"]]  # only the one the stage did not read
    assert list(got["strategy"]) == ["mem0", "last-visit-only"]
    assert list(got["build_seconds"]) == [99.0, 99.0]


def test_stage_prep_estimate_equals_counting_again(tiny, monkeypatch):
    from clinlib.analysis.appendix import cost as co

    d, _ = tiny
    with pytest.raises(StageError, match="run `clintrace evidence --profile tiny`"):
        evidence_stage.stage_prep_estimate(["mem0"], "tiny")
    model = evidence_stage.get_backbone(evidence_stage.PAPER_PREP_BACKBONE).model
    asked = ["full-context", "llm-summary", "mem0"]  # full-context builds without a prep model
    want = co.paper_prep_estimate("tiny", asked)
    assert list(want["strategy"]) == ["llm-summary", "mem0"]
    co.prep_token_rows("tiny", ["mem0", "llm-summary"], model).to_parquet(
        d / "prep_tokens.parquet", index=False
    )

    def no_count(*args, **kwargs):
        raise AssertionError("a stored strategy's tokens were counted again")

    monkeypatch.setattr(evidence_stage, "prep_token_rows", no_count)
    pd.testing.assert_frame_equal(evidence_stage.stage_prep_estimate(asked, "tiny"), want)
