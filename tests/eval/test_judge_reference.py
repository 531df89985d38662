"""The judge receives each judged trap question's reference material (MedMemoryBench Appendix
D.1 judge prompts): the request body the judge is sent, read on the kit's fake
OpenAI-compatible server, holds every field the seed's prompt asks for, non-empty, for every
judged type; a question without its material is caught."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.config import artifact_path
from clinlib.eval.judge import prompts as jp
from clinlib.eval.judge.scoring import judge_fields, judge_predictions, lexical_mcd_scores
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.tasks.traps.reference import REFERENCE_COLUMNS

JUDGED = ("TLA", "SUA", "IG", "MCD")  # the seed's four judge prompts


@pytest.fixture(scope="module")
def trap_questions(quick_built):
    from clinlib.tasks.traps.stage import build_traps

    path = artifact_path("trap_questions.parquet", "quick")
    if not path.exists() or "judge_pattern" not in pd.read_parquet(path).columns:
        build_traps("quick")
    return pd.read_parquet(path)


def test_every_judged_type_carries_its_material_into_the_request(trap_questions, tmp_path):
    q = trap_questions
    assert set(REFERENCE_COLUMNS) <= set(q.columns)
    picked = pd.concat([q[q["task"] == t].head(3) for t in JUDGED], ignore_index=True)
    assert set(picked["task"]) == set(JUDGED)
    bodies: list[str] = []

    def record(messages):
        bodies.append(last_user_text(messages))
        return json.dumps(
            {
                "is_correct": False,
                "ncr_score": 0,
                "crc_score": 0,
                "cc_score": 0,
                "reason": "recorded",
            }
        )

    preds = pd.DataFrame(
        {
            "qid": picked["qid"],
            "strategy": "s",
            "backbone": "b",
            "setting": "post",
            "response": "an answer",
        }
    )
    old = config.BUILD_DIR
    config.BUILD_DIR = tmp_path
    try:
        with FaultServer(answer=record) as srv:
            register_backbone(
                Backbone(
                    name="body-judge", model="gpt-4o-mini", base_url=srv.base_url, max_concurrency=1
                ),
                replace_existing=True,
            )
            try:
                out = judge_predictions(picked, preds, "body-judge", profile="quick")
            finally:
                unregister_backbone("body-judge")
    finally:
        config.BUILD_DIR = old
    assert len(bodies) == len(picked) and list(out["prompt"]) == list(picked["task"])
    for body in bodies:
        kind = next(k for k in JUDGED if jp.read_fields(k, body) is not None)
        assert jp.missing_fields(kind, body) == [], (kind, body[:400])
        got = jp.read_fields(kind, body)
        if kind == "MCD":  # four nodes, three links, the pattern names them
            assert got["hop_count"] == "3"
            assert got["required_nodes_str"].count("\n") == 3
            assert got["reasoning_pattern"].count("->") == 3
        if kind == "IG":
            assert "required_patient_info: [" in got["metadata_info"]


def test_a_question_without_its_material_is_caught():
    bare = {"qid": "m", "task": "MCD", "question": "Was a medicine wrong?", "gold_text": "yes"}
    text = jp.render_judge_prompt("MCD", judge_fields(bare, "no"))
    missing = jp.missing_fields("MCD", text)
    assert {
        "explanation",
        "nodes_for_validation",
        "required_nodes_str",
        "hop_count",
        "reasoning_pattern",
    } <= set(missing)
    ig = jp.render_judge_prompt(
        "IG",
        judge_fields(
            {**bare, "task": "IG", "judge_explanation": "why", "judge_metadata": "Metadata: x"},
            "no",
        ),
    )
    assert jp.missing_fields("IG", ig) == [
        "metadata_info:required_patient_info",
        "metadata_info:common_wrong_answer",
    ]
    assert jp.missing_fields("TLA", "not a prompt") == ["<not this prompt>"]


def test_lexical_mcd_criteria_are_three_different_rules():
    nodes = [
        "creatinine 3.1 mg/dL",
        "eGFR below 30",
        "metformin ordered",
        "metformin contraindicated",
    ]
    links = [(1, 2), (2, 4), (3, 4)]
    # every node named, a causal connective: NCR 1, CRC 1, CC 1
    assert lexical_mcd_scores(
        "Creatinine 3.1 mg/dL means eGFR below 30, so metformin ordered was contraindicated.",
        nodes,
        links,
    ) == (1.0, 1.0, 1.0)
    # the nouns listed with no causal word: every node covered (node 4 by "metformin", 1 of 2
    # tokens = 0.5), NCR 1 but CRC 0 and CC 0.3 (the seed's band for a chain with gaps)
    assert lexical_mcd_scores(
        "creatinine 3.1 mg/dL; eGFR below 30; metformin ordered", nodes, links
    ) == (1.0, 0.0, 0.3)
    # node 2 missing (2 tokens of "eGFR below 30" absent): NCR 3/4, links 1-2 and 2-4 fail:
    # CRC 1/3, CC: NCR .75 < .8, CRC .33 < .5 -> 0.3
    ncr, crc, cc = lexical_mcd_scores(
        "Creatinine 3.1 mg/dL, so metformin ordered is contraindicated.", nodes, links
    )
    assert (ncr, round(crc, 3), cc) == (0.75, 0.333, 0.3)


def test_a_query_type_without_questions_is_skipped_not_a_crash(monkeypatch):
    from clinlib.eval.traps import ask

    no_mcd = pd.DataFrame({"task": ["EEM", "TLA", "SUA", "MQ", "IG"]})
    monkeypatch.setattr(ask, "load", lambda name, profile: no_mcd)
    assert ask.asked_tasks("quick") == (["EEM", "TLA", "SUA", "MQ", "IG"], ["MCD"])
