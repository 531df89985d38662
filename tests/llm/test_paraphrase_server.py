"""`clintrace questions --paraphrase` (paper Fig. 2 stage 4): each check of
clinlib.tasks.paraphrase on hand-written replies, then the whole path against the kit's fake
server on the quick profile (a temporary build folder linking to it)."""

from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.data.build import load
from clinlib.eval.synthesis.paraphrase import paraphrase_questions
from clinlib.eval.synthesis.rule_writers import paraphrase_text
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.paraphrase import check_paraphrase, first_problem, question_slots

FMT = ANSWER_FORMATS["T1"]
T1 = {"qid": "T1-a", "task": "T1", "subtype": "abnormal", "gold": "4.3 mEq/L", "options": [],
      "injection": "", "question": f"What was the patient's Potassium on 2125-07-05? {FMT}",
      "meta": json.dumps({"date": "2125-07-05", "lab": "potassium", "value": 4.3})}  # fmt: skip
T9 = T1 | {"qid": "T9-a", "task": "T9", "gold": "insufficient information",
           "question": f"What did the Bicarbonate measurement of 2130-07-31 show? {FMT}",
           "meta": json.dumps({"date": "2130-07-31"})}  # fmt: skip
T7Q = ("Which procedure was performed during the encounter that began on 2158-05-27?\nOptions:\n"
       "A. Stent\nB. Catheter\nC. Pacemaker\nD. Angioplasty\n" + ANSWER_FORMATS["T7"])  # fmt: skip
T7 = T1 | {"qid": "T7-a", "task": "T7", "gold": "D", "question": T7Q,
           "options": ["Stent", "Catheter", "Pacemaker", "Angioplasty"], "meta": "{}"}  # fmt: skip


@pytest.mark.parametrize(
    "row, reply, check",
    [
        (T1, f"Tell me the patient's Potassium on 2125-07-05. {FMT}", ""),
        (T1, T1["question"], "reworded"),
        (T1, "", "rewriter_error"),
        (T1, "Tell me the patient's Potassium on 2125-07-05.", "answer_format"),
        (T1, f"Tell me the patient's Potassium on the fifth of July. {FMT}", "slots_verbatim"),
        (T1, f"Tell me the patient's K+ on 2125-07-05. {FMT}", "slots_verbatim"),
        (T1, f"Tell me the Potassium on 2125-07-05, about 4 visits in. {FMT}", "slots_verbatim"),
        (T9, f"If recorded, what did the Bicarbonate measurement of 2130-07-31 show? {FMT}",
         "no_gold_leak"),
        (T7, T7Q.replace("A. Stent", "A. A stent"), "answer_format"),
        (T7, T7Q.replace("Which procedure was performed", "What was done"), ""),
    ],
)  # fmt: skip
def test_each_check_catches_its_break(row, reply, check):
    assert first_problem(check_paraphrase(row, reply))[0] == check


def test_slots_are_the_stems_fields():
    assert question_slots(T1) == ["2125-07-05", "Potassium"]  # not "1.3" of the format
    problems = check_paraphrase(T1, f"Tell me the patient's Potassium on 2125-07-06. {FMT}")
    assert problems["slots_verbatim"] == ["lost '2125-07-05'", "added '2125-07-06'"]


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_paraphrases_on_the_fake_server(quick_in_tmp_build):
    """Replies reword the opening phrase (rule_writers.paraphrase_text) but lose the date of
    every T1 question: T1 keeps its templates (slots_verbatim), every other reworded question
    is kept, an unchanged one is not, and the gates pass on the new set."""

    base = load("questions", "quick")
    before = _sha(config.artifact_path("questions.parquet", "quick"))
    t1 = set(base.loc[base["task"] == "T1", "question"])

    def reply(messages):
        q = last_user_text(messages).split("Question:\n", 1)[1]
        new = paraphrase_text(q)
        return re.sub(r"\d{4}-\d{2}-\d{2}", "that day", new) if q in t1 else new

    with FaultServer(answer=reply) as srv:
        register_backbone(Backbone(name="fake-pp", model="gpt-4o-mini", base_url=srv.base_url),
                          replace_existing=True)  # fmt: skip
        try:
            out = paraphrase_questions("quick", "fake-pp")
        finally:
            unregister_backbone("fake-pp")
        assert srv.n_requests == len(base)
    log = out["paraphrases"].set_index("qid").loc[base["qid"]]
    changed = pd.Series([paraphrase_text(q) != q for q in base["question"]], index=log.index)
    is_t1 = (base["task"] == "T1").to_numpy()
    reworded_t1 = log[is_t1 & changed.to_numpy()]
    assert len(reworded_t1) and (reworded_t1["check"] == "slots_verbatim").all()
    others = log[~is_t1]
    assert (others.loc[changed[~is_t1].to_numpy(), "accepted"]).all()
    assert (others.loc[~changed[~is_t1].to_numpy(), "check"] == "reworded").all()
    new = load("questions", out["profile"]).set_index("qid").loc[base["qid"]]
    kept = log["accepted"].to_numpy()
    assert (new["question"].to_numpy()[kept] == log["paraphrase"].to_numpy()[kept]).all()
    assert (new["question"].to_numpy()[~kept] == base["question"].to_numpy()[~kept]).all()
    assert (new["gold"].to_numpy() == base["gold"].to_numpy()).all()
    gates = load("gates", out["profile"])
    assert gates.loc[gates["severity"] == "hard", "passed"].all()
    assert _sha(config.artifact_path("questions.parquet", "quick")) == before
