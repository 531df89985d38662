"""Tests for clinlib.analysis.probe (paper §5.5 T3 injection probe, Table 3, Fig. 5) on hand-built frames."""

from __future__ import annotations

import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from clinlib.analysis import paper, probe, probe_artifacts
from clinlib.core import config
from clinlib.eval.harness.slices import local_slice
from clinlib.strategies.base import Artifact
from clinlib.tasks.injections import Injection, apply_injections

SENTENCE = "Physician noted: Glucose of 160 mg/dL is consistent with Type 2 diabetes mellitus."
PARTS = {"lab": "Glucose", "value": "160", "unit": "mg/dL", "problem": "Type 2 diabetes mellitus"}


def _questions() -> pd.DataFrame:
    return pd.DataFrame(
        {"qid": ["q1", "q2", "q3", "q4"], "task": "T3", "gold": ["yes", "yes", "no", "no"]}
    )


def _preds(cell_answers: dict[tuple[str, str, str], list[str]]) -> pd.DataFrame:
    gold = dict(zip(_questions()["qid"], _questions()["gold"], strict=True))
    rows = []
    for (strategy, backbone, setting), answers in cell_answers.items():
        for qid, parsed in zip(gold, answers, strict=True):
            rows.append({
                "qid": qid, "task": "T3", "strategy": strategy, "backbone": backbone,
                "setting": setting, "parsed": parsed, "correct": parsed == gold[qid],
            })  # fmt: skip
    return pd.DataFrame(rows)


PREDS = _preds({
    ("mem0", "r", "post"): ["no", "no", "no", "no"],  # constant-No: accuracy = floor = 0.5
    ("mem0", "r", "pre"): ["yes", "no", "no", None],  # 1/2 positives; one abstention
    ("full-context", "r", "post"): ["yes", "yes", "no", "no"],
    ("full-context", "r", "pre"): ["yes", "yes", "yes", "insufficient information"],
})  # fmt: skip


def test_answer_class():
    assert probe.answer_class(" Yes ") == "yes"
    assert probe.answer_class("no") == "no"
    assert probe.answer_class("insufficient information") == "other"
    assert probe.answer_class(None) == "other"
    assert probe.answer_class(float("nan")) == "other"


def test_answer_counts_by_hand():
    c = probe.answer_counts(PREDS, _questions()).set_index(["strategy", "setting"])
    post = c.loc[("mem0", "post")]
    assert (post["yes"], post["no"], post["other"], post["n"]) == (0, 4, 0, 4)
    assert post["accuracy"] == 0.5 and post["floor"] == 0.5
    assert bool(post["constant_no"]) and bool(post["at_floor"])
    pre = c.loc[("mem0", "pre")]
    assert (pre["yes"], pre["no"], pre["other"]) == (1, 2, 1)
    assert pre["accuracy"] == 0.5  # q1 yes + q3 no correct
    assert not bool(pre["constant_no"])
    fc = c.loc[("full-context", "pre")]
    assert (fc["yes"], fc["other"], fc["accuracy"]) == (3, 1, 0.5)
    assert not bool(fc["constant_no"])
    lo, hi = proportion_confint(2, 4, method="wilson")
    assert fc["ci_low"] == pytest.approx(lo) and fc["ci_high"] == pytest.approx(hi)


def test_answer_counts_errors():
    with pytest.raises(probe.ProbeError, match="gold"):
        probe.answer_counts(PREDS)
    with pytest.raises(probe.ProbeError, match="no T3 predictions"):
        probe.answer_counts(PREDS.assign(task="T1"), _questions())
    with pytest.raises(probe.ProbeError, match="parsed"):
        probe.answer_counts(PREDS.drop(columns="parsed"), _questions())


def test_recall_by_setting_pre_vs_post():
    r = probe.recall_by_setting(PREDS, _questions()).set_index("strategy")
    assert r.loc["mem0", "n_pos"] == 2
    assert r.loc["mem0", "recall_pre"] == 0.5 and r.loc["mem0", "recall_post"] == 0.0
    assert r.loc["mem0", "drop"] == 0.5
    assert r.loc["full-context", "recall_pre"] == 1.0
    lo, hi = proportion_confint(1, 2, method="wilson")
    assert r.loc["mem0", "ci_low_pre"] == pytest.approx(lo)
    assert r.loc["mem0", "ci_high_pre"] == pytest.approx(hi)
    only_post = probe.recall_by_setting(PREDS[PREDS["setting"] == "post"], _questions())
    assert only_post["recall_pre"].isna().all()


def test_beside_paper_uses_table3():
    r = probe.recall_by_setting(PREDS, _questions())
    t3 = paper.load_table("table03_t3_preservation")
    b = probe.beside_paper(r, t3).set_index("strategy")
    assert b.loc["mem0", "paper: deepseek-chat-v3.1"] == pytest.approx(0.053)
    assert b.loc["mem0", "paper: claude-haiku-4.5"] == 0.0
    assert pd.isna(b.loc["full-context", "paper: gpt-4o-mini"])  # not run in Table 3
    assert b.loc["mem0", "kit_recall_pre"] == 0.5
    with pytest.raises(probe.ProbeError, match="prep block"):
        probe.beside_paper(r, t3, prep="nope")


def test_parse_injection_and_kept():
    assert probe.parse_injection(SENTENCE) == PARTS
    with pytest.raises(probe.ProbeError, match="template"):
        probe.parse_injection("The patient feels fine.")
    full = probe.kept(f"Clinician: labs back.\n{SENTENCE}", PARTS)
    assert full["sentence"] and full["lab_fact"] and full["relation"]
    # a memory that kept the value and the diagnosis, separately: fact yes, relation no
    mem = "- Glucose was 160 mg/dL on 2138-01-12\n- Diagnosis Type 2 diabetes mellitus recorded"
    k = probe.kept(mem, PARTS)
    assert k["lab_fact"] and k["problem"] and not k["relation"] and not k["sentence"]
    assert k["evidence"] == "- Glucose was 160 mg/dL on 2138-01-12"
    # both names on one line without an attribution phrase is not a kept relation
    note = "Abnormal labs: Glucose 160 mg/dL; diagnoses include Type 2 diabetes mellitus"
    assert not probe.kept(note, PARTS)["relation"]
    # 1160 or 160.5 is not the value 160
    assert not probe.kept("Glucose 1160 mg/dL. Glucose 160.5 mg/dL.", PARTS)["lab_fact"]
    assert probe.kept(None, PARTS) == {
        "sentence": False, "lab_fact": False, "problem": False, "relation": False,
        "evidence": "",
    }  # fmt: skip


def test_injected_excerpt():
    turns = pd.DataFrame({
        "subject_id": 7, "visit_idx": [0, 0, 0, 1], "turn_idx": [0, 1, 2, 3],
        "speaker": ["clinician", "patient", "clinician", "clinician"],
        "text": ["a", "b", "c", "d"], "event_ids": [[], [], [], []],
    })  # fmt: skip
    inj = Injection("t3", 7, 0, 1, "clinician", SENTENCE, "q1")
    out = probe.injected_excerpt(apply_injections(turns, [inj]), "q1", window=1)
    assert out["text"].tolist() == ["b", SENTENCE, "c"]
    assert out["injected"].tolist() == [False, True, False]
    with pytest.raises(probe.ProbeError, match="q9"):
        probe.injected_excerpt(apply_injections(turns, [inj]), "q9")


def test_charts_carry_the_flags():
    counts = probe.answer_counts(PREDS, _questions())
    spec = probe.collapse_chart(counts, "t").to_dict()
    assert len(spec["vconcat"]) == 2  # post and pre rows
    post_a = spec["vconcat"][0]["hconcat"][0]["layer"]
    flagged = spec["datasets"][post_a[2]["data"]["name"]]
    assert [d["cell"] for d in flagged] == ["mem0 × r"]
    r = probe.recall_by_setting(PREDS, _questions())
    rspec = probe.recall_chart(r, paper.load_table("table03_t3_preservation")).to_dict()
    band = rspec["datasets"][rspec["layer"][0]["data"]["name"]]
    assert {d["strategy"]: d["max"] for d in band}["mem0"] == pytest.approx(0.053)
    with pytest.raises(probe.ProbeError, match="no T3 cells"):
        probe.collapse_chart(counts.iloc[0:0])


def test_probe_figure_resolves_colours():
    counts = probe.answer_counts(PREDS, _questions())
    recall = probe.recall_by_setting(PREDS, _questions())
    spec = probe.probe_figure(counts, recall, None, "t").to_dict()
    assert spec["resolve"]["scale"]["color"] == "independent"
    assert len(spec["vconcat"]) == 2


@pytest.fixture
def sliced(quick_in_tmp_build):
    """The quick profile's local slice in a temporary BUILD_DIR (its constructions too)."""
    return local_slice("quick")


def test_artifact_inspection_of_the_rule_based_prep(sliced):
    qs = pd.read_parquet(config.BUILD_DIR / sliced / "questions.parquet")
    positive = qs[(qs["task"] == "T3") & (qs["gold"] == "yes")].iloc[0].to_dict()
    got = probe.artifact_inspection(positive, sliced, ["full-context", "llm-summary"],
                                    settings=("pre",))  # fmt: skip
    assert set(got["setting"]) == {"pre"}  # only the settings asked for are built
    full = got[got["strategy"] == "full-context"]
    assert full["where"].tolist() == ["context"]  # raw text: nothing stored but the dialogue
    assert full[["sentence", "lab_fact", "problem", "relation"]].all(axis=None)
    summary = got[got["strategy"] == "llm-summary"]
    assert summary["where"].tolist() == ["stored", "context"]
    assert (summary["prep_model"] == "rule-based").all() and (summary["prep_warnings"] == 0).all()
    # the extractive constructor has no slot for a free-text assertion (notebook 06)
    assert not summary["sentence"].any() and not summary["relation"].any()


def _artifact(strategy: str, data: dict) -> Artifact:
    return Artifact(strategy, 7, {}, "some-llm", "h", data, "k", 0.0)


def test_prep_outputs_counts_items_and_warnings(monkeypatch):
    made = {  # what a small LLM leaves: a summary, no memory (bad JSON), raw-content notes
        "llm-summary": _artifact("llm-summary", {"summary": "The patient was discharged."}),
        "mem0": _artifact("mem0", {"memories": [], "warnings": ["visit 0: not JSON", "v1"]}),
        "a-mem": _artifact("a-mem", {"notes": [{"content": "x" * 300}, {"content": "y"}],
                                     "warnings": ["visit 0 note: not JSON"]}),
    }  # fmt: skip
    monkeypatch.setattr(probe_artifacts, "load_artifacts", lambda name, *a, **k: {7: made[name]})
    got = probe.prep_outputs(7, "p", prep="some-llm", excerpt_chars=10).set_index("strategy")
    assert got["items"].to_dict() == {"llm-summary": 1, "mem0": 0, "a-mem": 2}
    assert got["prep_warnings"].to_dict() == {"llm-summary": 0, "mem0": 2, "a-mem": 1}
    assert got.loc["llm-summary", "first_item"] == "The patien"
    assert got.loc["a-mem", "first_item"] == "x" * 10 and got.loc["mem0", "first_item"] == ""
    assert got.loc["mem0", "first_warning"] == "visit 0: n"
    assert (got["prep_model"] == "some-llm").all() and (got["setting"] == "pre").all()
    with pytest.raises(probe.ProbeError, match="not one of"):
        probe.prep_outputs(7, "p", strategies=["full-context"])
