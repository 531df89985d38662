"""The judge audit on the labelled free-text set (MedMemoryBench §6, Table 5): the shipped set is
what its generator makes, its labels follow how each answer was made, the audit compares text
with text, and it can fail: an oracle judge scores κ 1, a judge that always says "correct"
scores κ 0, and the lexical judge's paraphrase failures show."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from clinlib.analysis.judge_audit import agreement_by_kind, labelled_audit
from clinlib.core import config
from clinlib.eval.judge.audit_set import (
    CORRECT_KINDS,
    KINDS,
    build_audit_set,
    load_audit_set,
)
from clinlib.eval.judge.scoring import lexical_f1
from clinlib.llm import register_policy_backbone, unregister_backbone
from clinlib.llm.types import OfflineReply
from clinlib.tasks.answers.overlap import token_f1


@pytest.fixture()
def pairs(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)  # the judge's response cache
    return load_audit_set()


def test_shipped_set_is_the_generators_and_labelled_by_how_it_was_made(pairs):
    built = build_audit_set()
    built["judge_nodes"] = built["judge_nodes"].map(json.loads)
    pd.testing.assert_frame_equal(pairs, built, check_dtype=False)
    assert len(pairs) >= 200
    assert pairs.groupby("task").size().to_dict() == {"IG": 56, "MCD": 56, "SUA": 56, "TLA": 56}
    assert (pairs["verdict"] == pairs["kind"].isin(CORRECT_KINDS)).all()
    assert set(KINDS) <= set(pairs["kind"])  # every kind of answer the protocol names
    assert pairs["spot_checked"].sum() == 32
    assert pairs.groupby("subject_id")["task"].nunique().eq(1).all()  # one patient, one type
    assert (pairs["answer"].str.len() > 0).all() and (pairs["reference"].str.len() > 0).all()


def test_the_audit_is_text_against_text():
    # SQuAD normalisation drops "a": token-F1 of an empty answer against the reference "A" is
    # 1 — a letter-against-letter audit agrees by construction; lexical_f1 does not
    assert token_f1("", "A") == 1.0
    assert lexical_f1("", "A") == 0.0 and lexical_f1("A", "A") == 1.0
    assert lexical_f1("anything", "") == 0.0
    pairs = load_audit_set()
    assert not pairs["reference"].str.fullmatch(r"[A-H]").any()
    assert not pairs["answer"].str.fullmatch(r"[A-H]").any()


def _judge(name, decide):
    def policy(messages, params):
        text = messages[-1]["content"]
        answer = text.split("\nModel's Answer: ", 1)[1].split("\nEvaluation Criteria:")[0]
        answer = answer.split("\n---\n")[0]
        ref = text.split("\nReference Answer: ", 1)[1].split("\nAnswer Explanation:")[0]
        ok = decide((ref, answer))
        return OfflineReply(
            json.dumps(
                {
                    "is_correct": ok,
                    "ncr_score": float(ok),
                    "crc_score": float(ok),
                    "cc_score": float(ok),
                }
            )
        )

    register_policy_backbone(name, policy, model=f"policy/{name}", label=name)


def test_the_audit_can_fail(pairs):
    truth = dict(
        zip(zip(pairs["reference"], pairs["answer"], strict=True), pairs["verdict"], strict=True)
    )
    assert len(truth) == len(pairs)  # every (reference, answer) is unique: an oracle exists
    _judge("oracle-judge", lambda a: bool(truth[a]))
    _judge("yes-judge", lambda a: True)
    try:
        oracle, _ = labelled_audit(pairs, "oracle-judge", profile="quick")
        yes, rows = labelled_audit(pairs, "yes-judge", profile="quick")
    finally:
        unregister_backbone("oracle-judge")
        unregister_backbone("yes-judge")
    o, y = oracle.set_index("task").loc["all"], yes.set_index("task").loc["all"]
    assert o["agreement"] == 1.0 and o["kappa"] == 1.0 and o["n"] == 224
    # always "correct": agreement = the correct share, 72 / 224; κ 0; precision 72/224, recall 1
    assert y["agreement"] == pytest.approx(72 / 224) and y["kappa"] == 0.0
    assert y["precision"] == pytest.approx(72 / 224) and y["recall"] == 1.0
    assert y["n_patients"] == 32


def test_lexical_judge_fails_on_paraphrases(pairs):
    table, rows = labelled_audit(pairs, "lexical-judge", profile="quick")
    by_kind = agreement_by_kind(rows)
    # "14 March 2151" against "2151-03-14": no shared token ("21510314" after SQuAD
    # normalisation), F1 0, rejected — every TLA paraphrase is lost
    assert by_kind.loc["paraphrase", "TLA"] == 0.0 and by_kind.loc["paraphrase2", "TLA"] == 0.0
    assert by_kind.loc["verbatim"].min() == 1.0  # the reference's own words always pass
    # κ recomputed independently from the per-pair rows
    all_row = table.set_index("task").loc["all"]
    assert all_row["kappa"] == pytest.approx(cohen_kappa_score(rows["label"], rows["verdict"]))
    assert all_row["kappa"] < 0.5  # a weak judge: the audit says so


def test_cli_audits_the_judge_on_the_labelled_set(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from clinlib import cli

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    out = CliRunner().invoke(cli.app, ["judge", "--audit-set", "--profile", "quick"])
    assert out.exit_code == 0, out.output
    assert "224 labelled pairs, 32 read by hand" in out.output
    assert "lexical-judge  all 224" in out.output
