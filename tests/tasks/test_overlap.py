"""Answer-overlap metrics (clinlib.tasks.answers.overlap): SQuAD token-F1 worked out by hand,
ROUGE-L against a longest-common-subsequence count done by hand."""

from __future__ import annotations

import pytest

from clinlib.tasks.answers.overlap import normalize_answer, rouge_l, token_f1


def test_normalisation_is_squads():
    assert normalize_answer("The  Creatinine, was 1.9 mg/dL!") == "creatinine was 19 mgdl"
    assert normalize_answer("An apple a day") == "apple day"


@pytest.mark.parametrize(
    "pred, ref, expected",
    [
        # [creatinine, was, 19, mgdl] vs [creatinine, 19, mgdl]: 3 shared; P 3/4, R 1
        ("The creatinine was 1.9 mg/dL", "creatinine 1.9 mg/dL", 6 / 7),
        # multiset overlap: x once, y once -> 2 of 3 each way
        ("x x y", "x y y", 2 / 3),
        ("increased;moderate", "increased; moderate", 0.0),  # one token vs two: none shared
        ("yes", "Yes.", 1.0),
        ("", "", 1.0),  # both empty
        ("the", "no", 0.0),  # the prediction is empty after normalisation
        ("B", "B. Angioplasty", 2 / 3),  # P 1, R 1/2
    ],
)
def test_token_f1_by_hand(pred, ref, expected):
    assert token_f1(pred, ref) == pytest.approx(expected)


def test_rouge_l_by_hand():
    # tokens (lower case, no stemming): LCS of [the cat lay on a mat] and
    # [the cat sat on the mat] is [the cat on mat] = 4: P = R = 4/6
    assert rouge_l("The cat lay on a mat", "the cat sat on the mat") == pytest.approx(2 / 3)
    # order matters for ROUGE-L, not for token-F1
    assert rouge_l("mat the on", "the on mat") == pytest.approx(2 / 3)
    assert token_f1("mat the on", "the on mat") == 1.0
    assert rouge_l("", "anything") == 0.0
