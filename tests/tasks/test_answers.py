"""Strict / lenient answer parsing and correctness (paper Appendix E.2 D2, Appendix G.3).

Every expectation below is worked out by hand from the rules in clinlib.tasks.answers'
docstring; the adversarial cases are the ones the brief lists (another date's value, a negated
"yes", a letter with contradicting option text, several numbers, hedged abstention + value).
"""

from __future__ import annotations

import pytest

from clinlib.tasks import answers as A
from clinlib.tasks.base import ABSTAIN, score

OPTS = ["Metformin", "Lisinopril", "Atorvastatin", "Warfarin"]

# (task, response, strict, lenient)
CASES: list[tuple[str, str, str | None, str | None]] = [
    # ---- T1 -----------------------------------------------------------------------------
    ("T1", "1.3 mg/dL", "1.3 mg/dL", "1.3 mg/dL"),
    ("T1", "1.3", "1.3", "1.3"),
    ("T1", "**Answer:** 1.3 MG/DL.", "1.3 mg/dL", "1.3 mg/dL"),
    ("T1", "7.2 x10^3/uL", "7.2 K/uL", "7.2 K/uL"),
    ("T1", "<0.01 ng/mL", "<0.01 ng/mL", "<0.01 ng/mL"),
    ("T1", "The creatinine on 2150-01-02 was 1.3 mg/dL.", None, "1.3 mg/dL"),
    ("T1", "At visit 2 the WBC was 7.2 x10^3/uL", None, "7.2 K/uL"),
    ("T1", "1.3 mg/dL (reference range 0.5-1.2 mg/dL)", None, "1.3 mg/dL"),
    ("T1", "HbA1c 6.5%", None, "6.5 %"),  # the 1 of A1c is not a number
    # several numbers: ambiguous unless one is marked as the answer
    ("T1", "Creatinine rose from 1.1 to 1.3 mg/dL", None, None),
    ("T1", "1.1-1.3 mg/dL", None, None),
    ("T1", "Earlier 1.1 mg/dL; the answer is 1.3 mg/dL", None, "1.3 mg/dL"),
    ("T1", "1.3 mg/dL, i.e. 1.3", None, "1.3 mg/dL"),
    # abstentions, verbose and hedged
    ("T1", "Insufficient information.", ABSTAIN, ABSTAIN),
    ("T1", "No sodium value was reported on that date", None, ABSTAIN),
    ("T1", "not documented, but probably 140", None, "140"),
    ("T1", "probably 140, but it is not documented", None, "140"),
    (
        "T1",
        "There is no information about sodium on 2150-01-03; the previous value was 138.",
        None,
        ABSTAIN,
    ),
    ("T1", "Sodium was not measured, roughly never checked", None, ABSTAIN),
    ("T1", "about 140 mEq/L", None, "140 mEq/L"),
    ("T1", "I cannot help with that.", None, None),
    # ---- T2 -----------------------------------------------------------------------------
    ("T2", "increased;moderate", "increased;moderate", "increased;moderate"),
    ("T2", "Decreased, Strong", "decreased;strong", "decreased;strong"),
    ("T2", "stable;none", "stable;none", "stable;none"),
    ("T2", "It went up slightly", None, "increased;weak"),
    ("T2", "no significant change", None, "stable;none"),
    ("T2", "The creatinine did not increase; it decreased markedly.", None, "decreased;strong"),
    ("T2", "increased", None, None),  # magnitude missing
    ("T2", "It increased then decreased sharply", None, None),  # two directions
    ("T2", "It rose moderately, a strong rise", None, None),  # two magnitudes
    ("T2", "cannot be determined, but it likely increased slightly", None, "increased;weak"),
    ("T2", "Insufficient information to determine whether it increased", None, ABSTAIN),
    ("T2", "Direction: increased; magnitude: moderate", None, "increased;moderate"),
    ("T2", "**decreased;weak**", "decreased;weak", "decreased;weak"),
    # ---- T3 -----------------------------------------------------------------------------
    ("T3", "Yes.", "yes", "yes"),
    ("T3", "No, the clinician did not.", "no", "no"),
    ("T3", "I would not say yes", None, None),  # negated yes: discarded, never flipped
    ("T3", "I wouldn't say yes.", None, None),
    ("T3", "The physician noted the hyperkalemia is consistent with CKD", None, "yes"),
    ("T3", "The record does not mention any attribution of the finding.", None, "no"),
    ("T3", "The answer is no.", None, "no"),
    ("T3", "Yes, no wait", "yes", "yes"),  # strict reads the leading answer
    ("T3", "Maybe yes, maybe no.", None, None),
    ("T3", "cannot be determined", None, ABSTAIN),
    # ---- T4 -----------------------------------------------------------------------------
    ("T4", "LAB-1;LAB-22", "LAB-1;LAB-22", "LAB-1;LAB-22"),
    ("T4", "LAB-22; lab-1", "LAB-1;LAB-22", "LAB-1;LAB-22"),
    ("T4", "DX-20000001-3", "DX-20000001-3", "DX-20000001-3"),
    ("T4", "The evidence is [LAB-22] and [DX-2000-3]", None, "DX-2000-3;LAB-22"),
    ("T4", "LAB-1, LAB-2", None, "LAB-1;LAB-2"),
    ("T4", "LAB-1 but not LAB-2", None, "LAB-1"),
    ("T4", "LAB-1;the creatinine", None, "LAB-1"),
    ("T4", "the elevated creatinine values", None, None),
    # ---- T6 -----------------------------------------------------------------------------
    ("T6", "B", "B", "B"),
    ("T6", "Patient B", "B", "B"),
    ("T6", "(a)", "A", "A"),
    ("T6", "similar", "similar", "similar"),
    ("T6", "Patient A has more diagnoses than patient B", None, "A"),
    ("T6", "Patient A has fewer diagnoses than patient B", None, "B"),
    ("T6", "A higher count is seen in patient B", None, "B"),  # sentence-initial article
    ("T6", "They are similar.", None, "similar"),
    ("T6", "Both patients have the same number of diagnoses", None, "similar"),
    ("T6", "Patient A: 5, patient B: 7, so B", None, "B"),
    ("T6", "Patient A and patient B", None, None),
    # ---- T7 (options: A Metformin, B Lisinopril, C Atorvastatin, D Warfarin) ---------------
    ("T7", "B", "B", "B"),
    ("T7", "(B)", "B", "B"),
    ("T7", "B. Lisinopril", "B", "B"),
    ("T7", "B. Metformin", None, None),  # letter contradicts its text: parse failure
    ("T7", "B. Lisinopril (not Metformin)", "B", "B"),
    ("T7", "C Atorvastatin", "C", "C"),
    ("T7", "Option d", "D", "D"),
    ("T7", "Atorvastatin", None, "C"),
    ("T7", "The answer is C", None, "C"),
    ("T7", "A patient on atorvastatin", None, "C"),  # "A" is an article here
    ("T7", "the answer is a drug", None, None),
    ("T7", "Lisinopril or Metformin", None, None),
    # ---- T8 -----------------------------------------------------------------------------
    ("T8", "increased", "increased", "increased"),
    ("T8", "Decreased.", "decreased", "decreased"),
    ("T8", "it went up slightly", None, "increased"),
    ("T8", "no real change", None, "similar"),
    ("T8", "It did not change significantly", None, "similar"),
    ("T8", "It did not increase.", None, None),
    ("T8", "It went down after the follow-up", None, "decreased"),
    # ---- T9 -----------------------------------------------------------------------------
    ("T9", "insufficient information", ABSTAIN, ABSTAIN),
    ("T9", "Insufficient information.", ABSTAIN, ABSTAIN),
    ("T9", "Insufficient information - the record has no value.", ABSTAIN, ABSTAIN),
    ("T9", "That is insufficient information, but probably 140", None, "140"),
    ("T9", "140 mEq/L", "140 mEq/L", "140 mEq/L"),  # over-answer, parsed form recorded
    ("T9", "Yes", "yes", "yes"),
    ("T9", "2150-01-03", "2150-01-03", "2150-01-03"),
    ("T9", "No sodium value was reported on that date", None, ABSTAIN),
    ("T9", "not measured", None, ABSTAIN),
    ("T9", "The record does not mention a dose.", None, ABSTAIN),
    ("T9", "It cannot be determined from the record.", None, ABSTAIN),
    ("T9", "unknown", None, ABSTAIN),
    ("T9", "not documented, but probably 140", None, "140"),
    ("T9", "The patient probably had no potassium measured", None, ABSTAIN),
    ("T9", "It was started on 2150-01-03.", None, "2150-01-03"),
    ("T9", "The patient was on metformin.", None, "The patient was on metformin"),
]


@pytest.mark.parametrize(("task", "response", "strict", "lenient"), CASES)
def test_parsers(task, response, strict, lenient):
    options = OPTS if task == "T7" else None
    assert A.parse_strict(task, response, options) == strict
    assert A.parse_lenient(task, response, options) == lenient


@pytest.mark.parametrize(("task", "response", "strict", "lenient"), CASES)
def test_lenient_accepts_whatever_strict_accepts(task, response, strict, lenient):
    # both parsers are called: a lenient parser that skipped its strict pass fails here on the
    # responses only the strict reading accepts (e.g. T9 "Yes", T3 "Yes, no wait")
    options = OPTS if task == "T7" else None
    got = A.parse_strict(task, response, options)
    if got is not None:
        assert A.parse_lenient(task, response, options) == got
    assert (got is not None) == (strict is not None)


@pytest.mark.parametrize("task", A.TASK_NAMES)
@pytest.mark.parametrize("response", ["", "   ", None])
def test_empty_response_is_a_parse_failure(task, response):
    assert A.parse_strict(task, response) is None
    assert A.parse_lenient(task, response) is None


# (task, parsed, gold, correct)
CORRECT: list[tuple[str, str | None, str, bool]] = [
    ("T1", "1.3 mg/dL", "1.3 mg/dL", True),
    ("T1", "1.30", "1.3 mg/dL", True),
    ("T1", "1.33 mg/dL", "1.3 mg/dL", True),  # rounds to 1.3
    ("T1", "1.35", "1.3 mg/dL", False),  # half a unit is excluded (rounds to 1.4)
    ("T1", "1.25", "1.3 mg/dL", False),
    ("T1", "1.1 mg/dL", "1.3 mg/dL", False),  # another date's value
    ("T1", "140", "140 mEq/L", True),
    ("T1", "140.4", "140 mEq/L", True),
    ("T1", "139.5", "140 mEq/L", False),
    ("T1", "4.1 mmol/L", "4.1 mEq/L", True),  # monovalent ion: same number
    ("T1", "1.3 mg", "1.3 mg/dL", False),  # a different explicit unit
    ("T1", "7.2 K/uL", "7.2 K/uL", True),
    ("T1", "<0.01 ng/mL", "<0.01 ng/mL", True),
    ("T1", "0.01 ng/mL", "<0.01 ng/mL", False),  # comparator required
    ("T1", ABSTAIN, "1.3 mg/dL", False),
    ("T1", None, "1.3 mg/dL", False),
    ("T2", "increased;moderate", "increased;moderate", True),
    ("T2", "increased;weak", "increased;moderate", False),
    ("T3", "yes", "yes", True),
    ("T3", "no", "yes", False),
    ("T4", "LAB-2;LAB-1", "LAB-1;LAB-2", True),
    ("T4", "LAB-1", "LAB-1;LAB-2", False),
    ("T4", "LAB-1;LAB-2;LAB-3", "LAB-1;LAB-2", False),
    ("T6", "a", "A", True),
    ("T6", "similar", "B", False),
    ("T7", "C", "C", True),
    ("T7", "B", "C", False),
    ("T8", "similar", "similar", True),
    ("T9", ABSTAIN, ABSTAIN, True),
    ("T9", "140 mEq/L", ABSTAIN, False),
    ("T9", "yes", ABSTAIN, False),
]


@pytest.mark.parametrize(("task", "parsed", "gold", "expected"), CORRECT)
def test_is_correct(task, parsed, gold, expected):
    assert A.is_correct(task, parsed, gold) is expected


def test_end_to_end_adversarial_pairs():
    # a number that is another date's value parses fine and is wrong
    assert not A.is_correct(
        "T1", A.parse_lenient("T1", "It was 1.1 mg/dL on 2150-01-05"), "1.3 mg/dL"
    )
    # hedged abstention plus a value is an over-answer on T9 and a (right) value on T1
    hedged = "not documented, but probably 140"
    assert not A.is_correct("T9", A.parse_lenient("T9", hedged), ABSTAIN)
    assert A.is_correct("T1", A.parse_lenient("T1", hedged), "140 mEq/L")
    # the verbose abstention is rescued by the lenient parser only (Table 8's mechanism)
    verbose = "No sodium value was reported on that date."
    assert A.parse_strict("T9", verbose) is None
    assert A.is_correct("T9", A.parse_lenient("T9", verbose), ABSTAIN)


def test_score_through_the_registry():
    # base.score wires the registered task to these parsers: strict D2 vs lenient rescue
    s = score("T9", "Not measured on that date.", ABSTAIN)
    assert (s.parsed, s.correct, s.parse_failed) == (None, False, True)
    s = score("T9", "Not measured on that date.", ABSTAIN, lenient=True)
    assert (s.parsed, s.correct, s.parse_failed) == (ABSTAIN, True, False)
    s = score("T7", "B. Metformin", "B", options=OPTS, lenient=True)
    assert (s.correct, s.parse_failed) == (False, True)
    s = score("T1", "", "1.3 mg/dL")  # D1: empty response
    assert s.parse_failed and not s.correct


@pytest.mark.parametrize(
    ("task", "gold", "options", "ok"),
    [
        ("T1", "1.3 mg/dL", None, True),
        ("T1", "1.3", None, False),
        ("T1", "<0.01 ng/mL", None, True),
        ("T2", "stable;none", None, True),
        ("T2", "stable;weak", None, False),
        ("T2", "increased;none", None, False),
        ("T3", "Yes", None, False),
        ("T4", "LAB-1;LAB-2", None, True),
        ("T4", "LAB-2;LAB-1", None, False),
        ("T4", "lab-1", None, False),
        ("T6", "similar", None, True),
        ("T7", "B", OPTS, True),
        ("T7", "B", ["X", "Y", "x", "Z"], False),
        ("T7", "B", ["X", "Y", "Z"], False),
        ("T7", "E", OPTS, False),
        ("T8", "stable", None, False),
        ("T9", ABSTAIN, None, True),
        ("T9", "140 mEq/L", None, False),
    ],
)
def test_gold_problem(task, gold, options, ok):
    assert (A.gold_problem(task, gold, options) is None) is ok


def test_bad_input_errors():
    with pytest.raises(A.AnswerError, match="unknown task 'T12'"):
        A.parse_strict("T12", "yes")
    with pytest.raises(A.AnswerError, match="T2 gold 'up;weak'"):
        A.is_correct("T2", "increased;weak", "up;weak")


def test_formats_and_caps():
    # the paper's nine plus the extended tasks (T10, T1R, T11), each with a format and a cap
    assert set(A.ANSWER_FORMATS) == set(A.ALL_TASK_NAMES) == set(A.MAX_TOKENS)
    assert A.ALL_TASK_NAMES == (*A.TASK_NAMES, *A.EXTENDED_TASK_NAMES)
    assert A.ANSWER_FORMATS["T1"] == A.ANSWER_FORMATS["T9"]  # T9 must read like T1
    assert all(f.endswith(A.ABSTAIN_CLAUSE) for f in A.ANSWER_FORMATS.values())
    assert A.MAX_TOKENS == {
        "T1": 60,
        "T2": 60,
        "T3": 80,
        "T4": 120,
        "T5": 80,
        "T6": 80,
        "T7": 80,
        "T8": 120,
        "T9": 80,
        "T10": 80,
        "T1R": 60,
        "T11": 60,
        "T11O": 40,
        "T1F": 60,
        "T7R": 80,
        "T7I": 80,
    }
    assert A.ANSWER_FORMATS["T1R"] == A.ANSWER_FORMATS["T1"]  # T1R asks T1's question
