"""The judge layer (clinlib.eval.judge.scoring): the seed's prompts word for word, verdict parsing
(strict / lenient, parse failures), the reference text of T1–T9 questions, the offline lexical
judge, and the whole path against the kit's fake OpenAI-compatible server (retries, cache,
budget, MCD's three criteria)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.eval.judge import prompts as jp
from clinlib.eval.judge.scoring import (
    JudgeError,
    gold_text_of,
    judge_predictions,
    parse_verdict_lenient,
    parse_verdict_strict,
)
from clinlib.eval.synthesis.calls import BudgetStop, Calls
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.llm.testserver import FaultServer, last_user_text

SEEDS = Path(os.environ.get("CLINTRACE_SEEDS_DIR", "/work/shared/seeds"))
MCD = list(jp.MCD_CRITERIA)


def _norm(text: str) -> str:
    for a, b in (("‘‘", '"'), ("’’", '"'), ("’", "'"), ("&lt;", "<"), ("&gt;", ">"),
                 (r"$\ge$", "≥"), (r"$<$", "<")):  # fmt: skip
        text = text.replace(a, b)
    return " ".join(text.split())


@pytest.mark.parametrize("kind", ["TLA", "SUA", "IG", "MCD"])
def test_the_four_prompts_are_the_seeds_word_for_word(kind):
    path = SEEDS / "medmemorybench.txt"
    if not path.exists():
        pytest.skip(f"seed text {path} not present (set CLINTRACE_SEEDS_DIR)")
    line = next(x for x in path.read_text(encoding="utf-8").splitlines()
                if x.startswith(f"{kind} Judge Prompt "))  # fmt: skip
    assert _norm(jp.JUDGE_PROMPTS[kind]) == _norm(line[len(f"{kind} Judge Prompt ") :])


def test_render_fills_placeholders_once():
    text = jp.render_judge_prompt("TLA", {"question": "When?", "expected_answer": "2150-01-02",
                                          "model_output": "on <question>"})  # fmt: skip
    assert "Question: When?\nReference Answer: 2150-01-02\nAnswer Explanation: \n" in text
    assert "Model's Answer: on <question>\n" in text  # an answer is never substituted into
    assert jp.prompt_kind("T1") == jp.GENERIC and jp.prompt_kind("MCD") == "MCD"
    from clinlib.eval.judge.scoring import prompt_of

    assert prompt_of({"task": "TRAP-IG", "judge_prompt": "IG"}) == "IG"  # named by the question
    assert prompt_of({"task": "SUA", "judge_prompt": None}) == "SUA"
    with pytest.raises(JudgeError, match="judge_prompt 'XX' is not one of TLA"):
        prompt_of({"qid": "q", "task": "T1", "judge_prompt": "XX"})


MCD_OK = {"ncr_score": 0.8, "crc_score": 0.75, "cc_score": 0.7, "is_correct": True}


@pytest.mark.parametrize(
    "reply, mcd, strict, lenient",
    [
        ('{"is_correct": true, "reason": "same value"}', False, True, True),
        ('```json\n{"is_correct": false}\n```', False, False, False),
        ('Verdict: {"is_correct": true, "reason": "x"} done', False, None, True),
        ('"is_correct": true, "reason": "brief"', False, None, True),  # the seed's brace-less form
        ("The answer matches. [CORRECT]", False, None, True),
        ("[CORRECT] or maybe [INCORRECT]", False, None, None),  # two tags: not read
        ('"is_correct": true ... "is_correct": false', False, None, None),
        ('{"is_correct": "yes"}', False, None, None),  # not a boolean
        ("", False, None, None),
        (json.dumps(MCD_OK), True, True, True),
        (json.dumps(MCD_OK | {"crc_score": 0.7}), True, False, False),  # CRC < 0.75
        (json.dumps(MCD_OK | {"is_correct": False}), True, False, False),  # conclusion wrong
        (json.dumps({"is_correct": True}), True, None, None),  # MCD needs its three scores
        ('"ncr_score": 0.9, "crc_score": 1.0, "cc_score": 0.7, "is_correct": true', True, None,
         True),
    ],
)  # fmt: skip
def test_verdict_parsing(reply, mcd, strict, lenient):
    got_s, got_l = parse_verdict_strict(reply, mcd), parse_verdict_lenient(reply, mcd)
    assert (None if got_s is None else got_s["is_correct"]) == strict
    assert (None if got_l is None else got_l["is_correct"]) == lenient
    if mcd and got_l is not None:
        assert set(got_l["criteria"]) == set(MCD)


def test_gold_text_of_t1_t9_questions():
    assert gold_text_of({"gold": "1.3 mg/dL", "options": []}) == "1.3 mg/dL"
    assert gold_text_of({"gold": "B", "options": ["Stent", "Angioplasty"]}) == "B. Angioplasty"
    assert gold_text_of({"gold": "B", "options": '["x", "y"]'}) == "B. y"  # JSON text
    assert gold_text_of({"gold": "yes", "gold_text": "Yes, an allergy"}) == "Yes, an allergy"


QUESTIONS = pd.DataFrame([
    {"qid": "t1", "task": "T1", "question": "Potassium on 2150-01-02?", "gold": "4.1 mEq/L",
     "options": [], "subject_ids": [1]},
    {"qid": "tla", "task": "TLA", "question": "When was metformin stopped?", "gold": "x",
     "gold_text": "2150-03-02", "options": [], "subject_ids": [1]},
    {"qid": "mcd", "task": "MCD", "question": "Why was the dose reduced?", "gold": "x",
     "gold_text": "eGFR fell, so metformin was reduced", "options": [], "subject_ids": [2],
     "judge_criteria": MCD, "judge_nodes": ["eGFR 28 on 2150-03-01", "metformin reduced"]},
])  # fmt: skip


def _preds(responses: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"qid": q, "strategy": "full-context", "backbone": "b",
                          "setting": "post", "response": r} for q, r in responses.items()])  # fmt: skip


def _field(prompt: str, label: str) -> str:
    return re.search(rf"\n{label}: (.*)\n", prompt)[1]


def fake_judge(messages) -> str:
    """A judge that compares the reference with the answer as text (and breaks on cue)."""
    prompt = last_user_text(messages)
    ref, answer = _field(prompt, "Reference Answer"), _field(prompt, "Model's Answer")
    if answer == "PROSE":
        return "Looks right to me. [CORRECT]"
    if answer == "GARBAGE":
        return "I am not sure."
    if "Reasoning Hops: 2" in prompt:  # MCD: node coverage high, causal link below 0.75
        return json.dumps({"ncr_score": 1.0, "crc_score": 0.5, "cc_score": 0.7,
                           "is_correct": True, "reason": "link skipped"})  # fmt: skip
    return json.dumps({"is_correct": ref.lower() in answer.lower(), "reason": "compared"})


@pytest.fixture()
def fake_server(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    with FaultServer(answer=fake_judge, script=["500"]) as srv:  # the first request fails once
        register_backbone(Backbone(name="fake-judge", model="gpt-4o-mini", base_url=srv.base_url,
                                   max_concurrency=1, price_input=0.15, price_output=0.6),
                          replace_existing=True)  # fmt: skip
        try:
            yield srv
        finally:
            unregister_backbone("fake-judge")


def test_judge_end_to_end_on_the_fake_server(fake_server):
    preds = _preds({"t1": "4.1 mEq/L", "tla": "It was stopped on 2150-03-02.",
                    "mcd": "eGFR fell, so metformin was reduced"})  # fmt: skip
    out = judge_predictions(QUESTIONS, preds, "fake-judge", profile="quick").set_index("qid")
    assert fake_server.n_requests == 4  # three questions, one retried after the 500
    assert list(out["prompt"]) == ["generic", "TLA", "MCD"]
    assert out.loc["t1", "verdict"] and out.loc["tla", "verdict"]
    assert out.loc["mcd", "criteria"] == {"node_coverage": True, "causal_relation": False,
                                          "chain_completeness": True}  # fmt: skip
    assert not out.loc["mcd", "verdict"]  # correct only if all three criteria hold
    assert (out["cost_usd"] > 0).all() and (out["input_tokens"] > 0).all()
    assert not out["parse_failed"].any() and out["error"].isna().all()
    again = judge_predictions(QUESTIONS, preds, "fake-judge", profile="quick")
    assert fake_server.n_requests == 4 and again["from_cache"].all()  # the response cache
    assert again["verdict"].tolist() == out["verdict"].tolist()


def test_parse_failures_are_recorded_and_the_budget_stops(fake_server):
    preds = _preds({"t1": "PROSE", "tla": "GARBAGE"})
    out = judge_predictions(QUESTIONS, preds, "fake-judge", profile="quick").set_index("qid")
    assert out["parse_failed"].all()  # neither is strict JSON
    assert not out["verdict"].any()  # a parse failure counts as incorrect
    assert out.loc["t1", "verdict_lenient"] and not out.loc["t1", "parse_failed_lenient"]
    assert out.loc["tla", "parse_failed_lenient"] and not out.loc["tla", "verdict_lenient"]
    sent = fake_server.n_requests
    with pytest.raises(BudgetStop, match="2 of 2 fake-judge request"):
        judge_predictions(QUESTIONS, _preds({"t1": "4.0", "tla": "2150-03-03"}), "fake-judge",
                          calls=Calls("quick", budget_usd=0.0))  # fmt: skip
    assert fake_server.n_requests == sent


def test_bad_input_names_the_problem():
    with pytest.raises(JudgeError, match="missing column.*response"):
        judge_predictions(QUESTIONS, _preds({"t1": "x"}).drop(columns="response"))
    with pytest.raises(JudgeError, match="qid 'nope' is not in the questions"):
        judge_predictions(QUESTIONS, _preds({"nope": "x"}))
    with pytest.raises(JudgeError, match="two rows for"):
        judge_predictions(QUESTIONS, pd.concat([_preds({"t1": "x"})] * 2))


def test_lexical_judge_is_a_labelled_policy(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    preds = _preds({"t1": "4.1 mEq/L", "tla": "March", "mcd": "eGFR 28 on 2150-03-01 fell, so "
                    "metformin was reduced"})  # fmt: skip
    out = judge_predictions(QUESTIONS, preds, "lexical-judge", profile="quick").set_index("qid")
    assert out.loc["t1", "verdict"] and not out.loc["tla", "verdict"]
    assert out.loc["mcd", "verdict"] and all(out.loc["mcd", "criteria"].values())
    assert "lexical policy" in out.loc["t1", "reason"] and out["cost_usd"].eq(0).all()
    from clinlib.llm import get_backbone

    bb = get_backbone("lexical-judge")
    assert bb.kind == "offline" and "not an LLM" in bb.label


def test_select_predictions_filters_and_limits():
    from clinlib.eval.judge.run import select_predictions

    preds = pd.concat([_preds({"t1": "a", "tla": "b"}).assign(task=["T1", "TLA"]),
                       _preds({"x1": "c"}).assign(task="T1", setting="pre"),
                       _preds({"x2": "d"}).assign(task="T1")])  # fmt: skip
    got = select_predictions(preds, settings=["post"], tasks=["T1"], limit=1)
    assert got["qid"].tolist() == ["t1"]
    assert len(select_predictions(preds, settings=["post", "pre"])) == 4
    with pytest.raises(JudgeError, match="no predictions to judge for strategies=\\['x'\\]"):
        select_predictions(preds, strategies=["x"])


def test_batch_mode_judges_in_one_provider_job(tmp_path, monkeypatch):
    from clinlib.llm.batchserver import BatchServer

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    preds = _preds({"t1": "4.1 mEq/L", "tla": "2150-03-09"})
    with BatchServer(answer=fake_judge) as srv:
        register_backbone(Backbone(name="bulk-judge", model="gpt-4o-mini", base_url=srv.base_url,
                                   price_input=1.0, price_output=2.0), replace_existing=True)  # fmt: skip
        try:
            calls = Calls("quick", mode="batch", batch_options={"poll_interval_s": 0})
            out = judge_predictions(QUESTIONS, preds, "bulk-judge", calls=calls)
        finally:
            unregister_backbone("bulk-judge")
    assert srv.n_batches == 1 and len(srv.lines_run) == 2
    assert out.set_index("qid")["verdict"].to_dict() == {"t1": True, "tla": False}
    assert calls.spent_usd > 0  # priced at the batch prices


def test_cli_refuses_in_one_line_without_predictions(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from clinlib import cli

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    out = CliRunner().invoke(cli.app, ["judge", "--profile", "quick"])
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1 and "Traceback" not in out.output


def test_lexical_judge_on_hand_made_ig_and_mcd(tmp_path, monkeypatch):
    """Free-text trap answers (IG, MCD), the verdict worked out by hand with SQuAD token-F1
    (lower case, punctuation and articles dropped, multiset overlap)."""
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    qs = pd.DataFrame([
        {"qid": "ig", "task": "IG", "question": "What should you keep in mind?",
         "gold_text": "avoid penicillin and keep it generic", "judge_criteria": ["correct"]},
        {"qid": "mcd", "task": "MCD", "question": "Was a medicine given that should not be?",
         "gold_text": "creatinine high so metformin contraindicated",
         "judge_criteria": list(jp.MCD_CRITERIA),
         "judge_nodes": ["creatinine high", "metformin ordered"]},
    ])  # fmt: skip
    preds = pd.DataFrame([
        {"qid": "ig", "strategy": "s", "backbone": "good", "setting": "post",
         "response": "Avoid penicillin, cheap generic."},
        {"qid": "ig", "strategy": "s", "backbone": "bad", "setting": "post",
         "response": "Give amoxicillin."},
        {"qid": "mcd", "strategy": "s", "backbone": "good", "setting": "post",
         "response": "Creatinine high; metformin contraindicated."},
        {"qid": "mcd", "strategy": "s", "backbone": "bad", "setting": "post",
         "response": "Metformin was fine."},
    ])  # fmt: skip
    out = judge_predictions(qs, preds, "lexical-judge", profile="quick")
    got = out.set_index(["qid", "backbone"])
    # IG good: gold {avoid penicillin and keep it generic} (6), answer {avoid penicillin cheap
    # generic} (4), 3 shared: P 3/4, R 3/6, F1 = 2*.75*.5/1.25 = 0.6 >= 0.5
    assert "token-F1 0.600" in got.loc[("ig", "good"), "reason"]
    assert got.loc[("ig", "good"), "verdict"]
    # IG bad: {give amoxicillin} shares nothing: F1 0
    assert "token-F1 0.000" in got.loc[("ig", "bad"), "reason"]
    assert not got.loc[("ig", "bad"), "verdict"]
    # MCD good: gold 5 tokens, answer 4, all 4 shared: P 1, R .8, F1 = 1.6/1.8 = 0.889; both
    # nodes covered (2/2 and 1/2 >= .5): node coverage 1.0; no reasoning pattern, so causal
    # relation = node coverage when a causal word is stated ("contraindicated"): 1.0; chain
    # completeness by the seed's bands: 1.0: correct
    assert "token-F1 0.889" in got.loc[("mcd", "good"), "reason"]
    assert got.loc[("mcd", "good"), "verdict"]
    assert all(got.loc[("mcd", "good"), "criteria"].values())
    # MCD bad: {metformin was fine} vs gold: 1 shared, P 1/3, R 1/5, F1 = .25;
    # nodes: "metformin ordered" 1/2 covered, "creatinine high" 0/2: coverage .5 < .75; no
    # causal word: causal relation 0; chain completeness .3 (some node, gaps) < .7
    assert "token-F1 0.250" in got.loc[("mcd", "bad"), "reason"]
    assert not got.loc[("mcd", "bad"), "verdict"]
    assert not any(got.loc[("mcd", "bad"), "criteria"].values())


def test_judge_profile_merges_into_the_stored_verdicts(tmp_path, monkeypatch):
    """A re-judge of the paper tasks keeps verdicts stored for other rows (judge_traps' IG /
    MCD) and replaces those of the same key."""
    from clinlib.eval.judge import run as jr

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    row = {"strategy": "s", "backbone": "b", "setting": "post", "judge_backbone": "lexical-judge",
           "criteria": {"correct": True}}  # fmt: skip
    jr.store_verdicts(
        "quick", "lexical-judge", pd.DataFrame([{**row, "qid": "IG-1", "verdict": True}])
    )
    first = pd.DataFrame([{**row, "qid": "T1-1", "verdict": False}])
    monkeypatch.setattr(jr, "load_predictions", lambda profile: first[["qid"]].assign(task="T1"))
    monkeypatch.setattr(jr, "select_predictions", lambda preds, **kw: preds)
    monkeypatch.setattr(jr, "load_questions", lambda profile, tasks: pd.DataFrame())
    monkeypatch.setattr(jr, "judge_predictions", lambda *a, **kw: first)
    *_, path = jr.judge_profile("quick", "lexical-judge")
    again = first.assign(verdict=True)
    monkeypatch.setattr(jr, "judge_predictions", lambda *a, **kw: again)
    jr.judge_profile("quick", "lexical-judge")
    stored = pd.read_parquet(path).set_index("qid")["verdict"].to_dict()
    assert stored == {"IG-1": True, "T1-1": True}


def test_a_config_file_backbone_judges(tmp_path, monkeypatch):
    """`judge --config` (like `run --config`): a judge named only in the user's TOML is found;
    without the file the name is unknown."""
    from clinlib.eval.synthesis.calls import Calls

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    monkeypatch.delenv("CLINTRACE_CONFIG", raising=False)
    monkeypatch.setenv("JUDGE_TEST_KEY", "fake")
    preds = _preds({"t1": "4.1 mEq/L"})
    with FaultServer(answer=fake_judge) as srv:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[backbones.my-judge]\nbase_url = "{srv.base_url}"\nmodel = "gpt-4o-mini"\n'
            'api_key_env = "JUDGE_TEST_KEY"\n'
        )
        with pytest.raises(Exception, match="my-judge"):
            judge_predictions(QUESTIONS.head(1), preds, "my-judge", profile="quick")
        calls = Calls("quick", config=cfg)
        out = judge_predictions(QUESTIONS.head(1), preds, "my-judge", profile="quick", calls=calls)
    assert out["verdict"].tolist() == [True] and srv.n_requests == 1
