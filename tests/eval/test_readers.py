"""Offline readers (clinlib.eval.readers.policies): hand-worked contexts for every task, isolation from
everything but the messages, registry and replay, and an end-to-end check on the quick
profile."""

from __future__ import annotations

import builtins

import pandas as pd
import pytest

from clinlib.core.config import build_dir
from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.readers import answers as reader_answers
from clinlib.eval.readers import policies as readers
from clinlib.llm.backbones import get_backbone, unregister_backbone
from clinlib.llm.types import GenerationParams
from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T9_START_FORMAT

DIALOGUE = """Visit 1 (2150-01-10)
Patient: I feel tired.
Clinician: Results for 2150-01-10: Glucose 180 mg/dL and Potassium 5.6 mEq/L. [LAB-1, LAB-2] \
The Glucose result, 180 mg/dL, exceeds the normal range, 70 to 100 mg/dL, which means your \
blood sugar is running high. [LAB-1] The same day, 2150-01-10, Sodium was 140 mEq/L. [LAB-3]
Clinician: On 2150-01-11 we started MetFORMIN (Glucophage) 500 mg PO. [RX-1]
Clinician: Your discharge diagnoses on 2150-01-12 include Essential (primary) hypertension \
(I10); Hyperlipidemia, unspecified (E785). [DX-1-1, DX-1-2]

Visit 2 (2150-06-01)
Patient: Hello again.
Clinician: From the samples taken on 2150-05-31, Glucose measured 150 mg/dL and Sodium \
measured 138 mEq/L. [LAB-4, LAB-5] Also on 2150-06-03: Glucose 120 mg/dL. [LAB-6]
Clinician: Physician noted: Glucose of 150 mg/dL is consistent with Type 2 diabetes mellitus.
Clinician: The diagnoses recorded on 2150-06-04 were Type 2 diabetes mellitus without \
complications (E119). [DX-2-1]
Clinician: Physician noted: the patient has never been diagnosed with Type 2 diabetes \
mellitus without complications.
Clinician: Physician noted: the Sodium on 2150-01-10 was 150 mEq/L.
"""

T1_Q = "What was the patient's {lab} on {date}? " + ANSWER_FORMATS["T1"]


def ask(context: str, question: str, eager: bool = False) -> str:
    msgs = build_messages({"question": question}, context)
    return readers.eager_policy(msgs, None) if eager else readers.reference_policy(msgs, None)


def test_t1_value_on_date_and_absent_fact() -> None:
    assert ask(DIALOGUE, T1_Q.format(lab="Glucose", date="2150-01-10")) == "180 mg/dL"
    # ED draw dated the day before the visit header still has its own date
    assert ask(DIALOGUE, T1_Q.format(lab="Sodium", date="2150-05-31")) == "138 mEq/L"
    absent = T1_Q.format(lab="Glucose", date="2150-03-01")
    assert ask(DIALOGUE, absent) == ABSTAIN
    # eager: the nearest-date Glucose (2150-01-10 is 50 days away, 2150-05-31 is 91)
    assert ask(DIALOGUE, absent, eager=True) == "180 mg/dL"
    # eager on a lab never mentioned: the reference-range midpoint (Hemoglobin 11.2-17.5)
    unseen = T1_Q.format(lab="Hemoglobin", date="2150-01-10")
    assert ask(DIALOGUE, unseen) == ABSTAIN
    assert ask(DIALOGUE, unseen, eager=True) == "14.3 g/dL"


def test_t1_memory_and_timeline_formats() -> None:
    mem = "Memories (most relevant first):\n- Potassium was 4.4 mEq/L (high) on 2150-02-02 [LAB-9]"
    assert ask(mem, T1_Q.format(lab="Potassium", date="2150-02-02")) == "4.4 mEq/L"
    # a drug name holding a lab word is not a lab value (unit mismatch)
    drug = "- Sodium Bicarbonate 1300 mg PO started 2150-02-02 [RX-3]"
    assert ask(drug, T1_Q.format(lab="Sodium", date="2150-02-02")) == ABSTAIN
    row = "| 1 | 2150-02-02 to 2150-02-04 | 2150-02-03: Creatinine 2.2 mg/dL H [LAB-7] | |"
    assert ask(row, T1_Q.format(lab="Creatinine", date="2150-02-03")) == "2.2 mg/dL"


def test_t2_trend_first_of_each_encounter() -> None:
    q = (
        "Take the first Glucose result of each of these two encounters: 2150-01-10 and "
        "2150-06-01. What is the trend of the Glucose from the earliest to the latest of them? "
        + ANSWER_FORMATS["T2"]
    )
    # 180 -> 150 (first of visit 2, drawn 2150-05-31): r = -30/180 = -0.167 -> moderate
    assert ask(DIALOGUE, q) == "decreased;moderate"
    q2 = q.replace("Glucose", "Potassium")
    assert ask(DIALOGUE, q2) == ABSTAIN
    assert ask(DIALOGUE, q2, eager=True) == "stable;none"


def test_t3_attribution_sentence_in_encounter() -> None:
    q = (
        "Did the physician, in the encounter of {d}, explicitly link the Glucose finding of "
        "150 mg/dL to Type 2 diabetes mellitus? " + ANSWER_FORMATS["T3"]
    )
    assert ask(DIALOGUE, q.format(d="2150-06-01")) == "yes"
    assert ask(DIALOGUE, q.format(d="2150-01-10")) == "no"  # wrong encounter
    other = q.format(d="2150-06-01").replace("150 mg/dL", "120 mg/dL")
    assert ask(DIALOGUE, other) == "no"


def test_t4_abnormal_ids_before_diagnosis() -> None:
    q = (
        "At the encounter that began on 2150-06-01, Type 2 diabetes mellitus without "
        "complications (ICD code E119) was coded for the first time. Which earlier abnormal "
        "% Hemoglobin A1c or Glucose results, documented before that encounter, are evidence "
        "for it? " + ANSWER_FORMATS["T4"]
    )
    # only visit 1's Glucose 180 (> 100) is before; visit 2's values are not "earlier"
    assert ask(DIALOGUE, q) == "LAB-1"
    untagged = DIALOGUE.replace("[LAB-1, LAB-2]", "").replace("[LAB-1]", "")
    assert ask(untagged, q) == ABSTAIN
    assert ask(untagged, q, eager=True).startswith("LAB-")


def test_t5_contradictions() -> None:
    dx = (
        "Regarding the diagnosis of Type 2 diabetes mellitus without complications in the "
        "encounter that began on 2150-06-01: does the record contradict itself? "
        + ANSWER_FORMATS["T5"]
    )
    assert ask(DIALOGUE, dx) == "yes"
    clean = dx.replace(
        "Type 2 diabetes mellitus without complications", "Hyperlipidemia, unspecified"
    )
    assert ask(DIALOGUE, clean) == "no"
    lab = "Regarding the Sodium result of 2150-01-10: does the record contradict itself? "
    assert ask(DIALOGUE, lab + ANSWER_FORMATS["T5"]) == "yes"  # 140 vs 150 the same day
    lab2 = "Regarding the Glucose result of 2150-01-10: does the record contradict itself? "
    assert ask(DIALOGUE, lab2 + ANSWER_FORMATS["T5"]) == "no"  # 180 stated twice
    assert ask("", lab2 + ANSWER_FORMATS["T5"]) == ABSTAIN
    assert ask("", lab2 + ANSWER_FORMATS["T5"], eager=True) == "no"


T6_CONTEXT = """Patient A:
Visit 1 (2150-01-10)
Clinician: Results for 2150-01-10: Glucose 200 mg/dL. [LAB-1] Also on 2150-01-12: Glucose \
120 mg/dL. [LAB-2]
Clinician: On 2150-01-12 the chart lists Essential (primary) hypertension (I10); Chronic \
kidney disease, Stage III (moderate) (5853). [DX-1-1, DX-1-2]

Patient B:
Visit 1 (2160-01-10)
Clinician: Results for 2160-01-10: Glucose 190 mg/dL. [LAB-3] Also on 2160-02-01: Glucose \
100 mg/dL. [LAB-4]
Clinician: On 2160-01-12 the chart lists Essential (primary) hypertension (I10). [DX-2-1]
Clinician: On 2160-01-11 we performed Hemodialysis (procedure code 3995). [PX-2-1]
"""


def test_t6_per_subtype_rules() -> None:
    fmt = " " + ANSWER_FORMATS["T6"]
    a = "Patients A and B both have diabetes. Which patient has more distinct diagnosis codes "
    a += "across all of their encounters? Answer similar if the numbers are equal."
    assert ask(T6_CONTEXT, a + fmt) == "A"  # 2 codes vs 1 (the procedure code is not one)
    b = "Compare the peak Glucose of Patient A and Patient B (both with diabetes): which is "
    b += "higher? Answer similar if they differ by at most 5%."
    assert ask(T6_CONTEXT, b + fmt) == "similar"  # 200 vs 190: 10 <= 0.05 * 200
    c = "Which patient's Glucose moved more from first to last measurement, Patient A or "
    c += "Patient B (both with diabetes)? Answer similar if the changes differ by at most 5%."
    assert ask(T6_CONTEXT, c + fmt) == "B"  # |120-200| = 80 < |100-190| = 90
    one = T6_CONTEXT.split("Patient B:")[0]
    assert ask(one, c + fmt) == ABSTAIN
    assert ask(one, c + fmt, eager=True) == "A"


def test_t7_option_in_encounter() -> None:
    q = (
        "Which medication was started during the encounter that began on {d}?\nOptions:\n"
        "A. Lisinopril\nB. Metformin\nC. Insulin\nD. Glipizide\n" + ANSWER_FORMATS["T7"]
    )
    assert ask(DIALOGUE, q.format(d="2150-01-10")) == "B"
    assert ask(DIALOGUE, q.format(d="2150-06-01")) == ABSTAIN
    # eager: an option named anywhere in the record, else the first
    assert ask(DIALOGUE, q.format(d="2150-06-01"), eager=True) == "B"
    assert ask("nothing here", q.format(d="2150-06-01"), eager=True) == "A"


def test_t8_before_after_rule() -> None:
    q = (
        "MetFORMIN (Glucophage) was started on 2150-01-11. Relative to the most recent prior "
        "Glucose, how had the Glucose changed at the first measurement taken at least 7 days "
        "after the start? " + ANSWER_FORMATS["T8"]
    )
    # before = 180 (2150-01-10), after = 150 (2150-05-31): r = -0.167 -> decreased
    assert ask(DIALOGUE, q) == "decreased"
    early = DIALOGUE.split("Visit 2")[0]
    assert ask(early, q) == ABSTAIN
    assert ask(early, q, eager=True) == "similar"


def test_t9_dose_and_start() -> None:
    dose = (
        "During the encounter of 2150-01-10, what was the prescribed dose of MetFORMIN? "
        + ANSWER_FORMATS["T9"]
    )
    assert ask(DIALOGUE, dose) == "500 mg"
    missing = dose.replace("MetFORMIN", "Heparin")
    assert ask(DIALOGUE, missing) == ABSTAIN
    assert ask(DIALOGUE, missing, eager=True) != ABSTAIN
    start = (
        "On what date was Heparin started during the encounter that began on 2150-01-10? "
        f"{T9_START_FORMAT} If the record does not state it, reply exactly: insufficient "
        "information."
    )
    assert ask(DIALOGUE, start) == ABSTAIN
    assert ask(DIALOGUE, start, eager=True) == "2150-01-10"


def test_unrecognised_question_is_a_clear_error() -> None:
    with pytest.raises(readers.ReaderError, match="cannot recognise"):
        ask(DIALOGUE, "How is the weather?")
    with pytest.raises(readers.ReaderError, match="no messages"):
        readers.reference_policy([], None)


def test_readers_see_only_the_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    import clinlib.data.build

    msgs = build_messages({"question": T1_Q.format(lab="Glucose", date="2150-01-10")}, DIALOGUE)

    def boom(*args, **kwargs):
        raise AssertionError("a reader touched data outside the messages")

    monkeypatch.setattr(clinlib.data.build, "load", boom)
    monkeypatch.setattr(pd, "read_parquet", boom)
    monkeypatch.setattr(builtins, "open", boom)
    assert readers.reference_policy(msgs, None) == "180 mg/dL"
    assert readers.eager_policy(msgs, None) == "180 mg/dL"


def test_rules_against_hand_values() -> None:
    assert reader_answers.trend_answer(100, 104) == "stable;none"
    assert reader_answers.trend_answer(100, 110) == "increased;weak"
    assert reader_answers.trend_answer(100, 85) == "decreased;moderate"  # exactly 15% -> moderate
    assert reader_answers.trend_answer(100, 130) == "increased;strong"
    assert reader_answers.change_answer(5.0, 5.2) == "similar"
    assert reader_answers.compare_answer(3, 3, counts=True) == "similar"
    assert reader_answers.compare_answer(100, 94) == "A"  # 6 > 5% of 100
    assert reader_answers.compare_answer(100, 95) == "similar"


def test_registry_is_idempotent() -> None:
    first = readers.register_offline_backbones()
    second = readers.register_offline_backbones()
    assert [b.name for b in first] == ["reference", "eager"]
    assert all(a is b for a, b in zip(first, second, strict=True))
    ref = get_backbone("reference")
    assert ref.kind == "offline" and ref.price_input == 0 and "not an LLM" in ref.display_name


def test_replay_by_key_and_by_hash() -> None:
    msgs = build_messages({"question": "q?"}, "ctx")
    preds = pd.DataFrame(
        {
            "qid": ["T1-x", "T1-y"],
            "strategy": ["full-context", "full-context"],
            "setting": ["post", "post"],
            "response": ["1.3 mg/dL", "2 mg/dL"],
            "messages_hash": [readers.messages_hash(msgs), "0" * 64],
        }
    )
    policy = readers.replay_policy_from(preds)
    assert policy(msgs, None).text == "1.3 mg/dL"
    key = GenerationParams(extra={"replay_key": {"qid": "T1-y", "strategy": "full-context",
                                                 "setting": "post"}})  # fmt: skip
    assert policy(build_messages({"question": "other"}, ""), key).text == "2 mg/dL"
    miss = policy(build_messages({"question": "other"}, ""), None)
    assert miss.text == "" and miss.finish_reason.startswith("error")
    with pytest.raises(readers.ReaderError, match="messages_hash"):
        readers.replay_policy_from(pd.DataFrame({"response": ["x"]}))
    backbone = readers.register_replay("replay-test", preds)
    try:
        assert get_backbone("replay-test").kind == "offline" and backbone.price_output == 0
    finally:
        unregister_backbone("replay-test")


QUICK = build_dir("quick")


def test_quick_profile_end_to_end(quick_built) -> None:
    from clinlib.strategies import question_contexts
    from clinlib.tasks import score

    questions = pd.read_parquet(QUICK / "questions.parquet")
    full = question_contexts(questions, "full-context", "quick")
    by_qid = questions.set_index("qid")
    correct: dict[str, list[bool]] = {}
    for row in full.itertuples():
        q = by_qid.loc[row.qid]
        resp = readers.reference_policy(build_messages(q, row.context), None)
        opts = list(q["options"]) or None
        correct.setdefault(q["task"], []).append(score(q["task"], resp, q["gold"], opts).correct)
    acc = {t: sum(v) / len(v) for t, v in correct.items()}
    assert all(a >= 0.9 for a in acc.values()), acc
    # post-construction T3: a derived representation cannot hold the injected sentence
    t3 = questions[questions["task"] == "T3"]
    summary = question_contexts(t3, "llm-summary", "quick", setting="post")
    answers = [
        readers.reference_policy(build_messages(by_qid.loc[r.qid], r.context), None)
        for r in summary.itertuples()
    ]
    assert set(answers) == {"no"}
    gold = t3.set_index("qid").loc[summary["qid"], "gold"]
    assert (gold == "no").mean() == pytest.approx(
        sum(a == g for a, g in zip(answers, gold, strict=True)) / len(answers)
    )


def test_label_scan_equals_finditer_on_overlapping_labels():
    """The str.find pre-scan finds exactly the regex's own non-overlapping matches."""
    from clinlib.eval.readers.prompt import PANEL_RES, _label_matches

    text = (
        "Visit 1 (2150-01-01)\nClinician: % Hemoglobin A1c 6.5 % H and Hemoglobin 12.1 g/dL "
        "[LAB-1, LAB-2]. HEMOGLOBIN was 11 g/dL on 2150-01-02; hemoglobinuria noted. "
        "Creatinine, Creatinine 1.2 mg/dL (high). xCreatinine 9 mg/dL. Glucose: 140 mg/dL L."
    )
    for key, (_lab, rx) in PANEL_RES.items():
        want = [(m.span(), m.groupdict()) for m in rx.finditer(text)]
        got = [(m.span(), m.groupdict()) for m in _label_matches(rx, key, text, text.lower())]
        assert got == want, key
    assert len(list(PANEL_RES["hemoglobin"][1].finditer(text))) == 2
