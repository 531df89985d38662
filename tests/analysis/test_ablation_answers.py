"""The ablations stage's variant answers (clinlib.analysis.ablation_stage): asked through the
harness, kept in the stage's artifact and taken out of the predictions folder (notebooks 04
and 06-10 must not see them), put back once by notebook 11 (publish_answers), and refused in
one line naming the command on a build without them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.analysis import ablation_stage
from clinlib.core import config
from clinlib.core.guards import StageError
from clinlib.eval.harness import runner
from clinlib.eval.harness.store import part_files, predictions_dir, write_part
from tests import strategy_fixtures as sf

VARIANT = "dense-retrieval(k=3)"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A one-patient profile with dialogues and two T1 questions."""
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
            "subtype": "",
            "subject_ids": [[7001], [7001]],
            "question": ["Creatinine?", "Potassium?"],
            "gold": ["x", "y"],
            "options": [["x", "y", "z", "w"]] * 2,
            "anchor_event_ids": [[lab["event_id"]], ["LAB-404"]],
            "injection": "",
            "evidence_turns": [[], []],
            "meta": "{}",
        }
    )
    qs.to_parquet(d / "questions.parquet", index=False)
    return d, qs


def test_variant_labels_leave_the_defaults_to_the_main_evaluation():
    labels = ablation_stage.variant_labels_all()
    assert VARIANT in labels and "dense-retrieval(k=10)" in labels
    assert "llm-summary(budget_tokens=1000)" in labels
    assert "dense-retrieval" not in labels and "llm-summary" not in labels
    assert len(labels) == len(set(labels)) == 4  # K 3 and 10, budget 1000, the transformer


def test_variant_answers_leave_the_store_as_it_was(tiny, monkeypatch):
    _, qs = tiny
    monkeypatch.setattr(ablation_stage, "variant_labels_all", lambda: [VARIANT])
    before = part_files(predictions_dir("tiny"))
    got = ablation_stage.variant_answers("tiny", qs)
    # two questions x two offline readers, all of the variant, none of them left in the store
    assert len(got) == 4 and set(got["strategy"]) == {VARIANT}
    assert set(got["backbone"]) == set(ablation_stage.READERS)
    assert part_files(predictions_dir("tiny")) == before
    assert runner.load_predictions("tiny").empty


def test_variant_answers_keep_the_parts_a_concurrent_stage_writes(tiny, monkeypatch):
    # trap-answers and evaluate-longmed run beside ablations (clinlib.cli.schedule) and append
    # to the same store: a part written meanwhile that is not a variant's must survive
    _, qs = tiny
    monkeypatch.setattr(ablation_stage, "variant_labels_all", lambda: [VARIANT])
    real_run = ablation_stage.run

    def run_beside(spec, options):
        out = real_run(spec, options)
        other = runner.load_predictions("tiny").assign(strategy="full-context", run_id="other")
        write_part(other.to_dict("records"), "tiny", "other", 0)
        return out

    monkeypatch.setattr(ablation_stage, "run", run_beside)
    ablation_stage.variant_answers("tiny", qs)
    left = runner.load_predictions("tiny")
    assert len(left) == 4 and set(left["strategy"]) == {"full-context"}


def test_publish_writes_the_answers_once_and_refuses_a_build_without_them(tiny, monkeypatch):
    d, qs = tiny
    with pytest.raises(StageError, match="clintrace ablations --profile tiny"):
        ablation_stage.publish_answers("tiny")
    monkeypatch.setattr(ablation_stage, "variant_labels_all", lambda: [VARIANT])
    answers = ablation_stage.variant_answers("tiny", qs)
    # the artifact as the stage writes it (under its manifest)
    from clinlib.core.guards import stage_run

    with stage_run(ablation_stage.ABLATION_STAGE, "tiny") as staging:
        for art in ablation_stage.OUTPUTS:
            answers.to_parquet(staging.path(f"{art}.parquet"), index=False)
    assert ablation_stage.publish_answers("tiny") == 4
    assert ablation_stage.publish_answers("tiny") == 0  # already there: not doubled
    stored = runner.load_predictions("tiny", dedupe=False)
    cols = ["qid", "strategy", "backbone", "setting", "response", "correct"]
    pd.testing.assert_frame_equal(stored[cols], answers[cols])
