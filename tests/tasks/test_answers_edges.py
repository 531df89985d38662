"""Edges of clinlib.tasks.answers left by the last mutation round of issue 33 §3 (T11's
decisions, the T1 / T11 routing of the strict parser, normalisation, a guess around an
abstention, T7's option texts). Each expectation is worked out by hand from these rules:

- T11 time decay (answers/decision.py): credit = 1 - minutes / 1440, printed rounded half-up
  to 4 places. 27 min: 1 - 27/1440 = 0.98125 exactly -> "0.9813" (half-even would give
  "0.9812": the 4th digit 2 is even).
- A canonical T11 gold is ``<letter>`` then ``|<letter>=<credit>`` parts (4 places), the
  credit letters unique, in letter order, none above 1 (1 itself is allowed: an action at
  the cut's minute), every letter among the question's options when their count is known;
  each failure has its own reason. ``correct`` = the answered letter's credit is 1.
- The strict parser routes T1 to the value reading only: a bare date or "yes" is T9's
  over-answer, never a T1 value. T11's strict reading is T7's, with the options: a letter
  followed by another option's text is contradictory (None).
- Normalisation (answers/text.py ``_normalize``): every run of Unicode whitespace is one
  space; the wrappers (quotes, ``*``, ``_``) are trimmed again after the trailing full stop;
  U+2212 is "-"; the micro sign / Greek mu is "u"; T9's lenient over-answer is recorded as
  the normalised text.
- A hedged guess before an abstention cue ("probably X, but it is not documented") is read
  from the hedge to the cue only, not from a hedge anywhere to the end.
- T7 options are compared lower-cased with every run of other characters one space ("A." =
  "a"); "C <text>" (a letter, a space, no punctuation) is a letter only when an option's
  first word follows, and an option with no letter or digit is never that option.
"""

from __future__ import annotations

import pytest

from clinlib.tasks import answers as A
from clinlib.tasks import score
from clinlib.tasks.answers.decision import decay, decay_text, gold_decision_problem, split_gold

# --------------------------------------------------------------------------- T11 decisions


def test_decay_text_rounds_half_up():
    assert decay(27) * 1440 == 1413  # 1413 / 1440 = 0.98125 exactly
    assert decay_text(decay(27)) == "0.9813"


FORMAT = "not '<letter>' followed by '|<letter>=<credit>' parts"
ORDER = "credit letters repeat or are out of order"


@pytest.mark.parametrize(
    ("gold", "n_options", "reason"),
    [
        ("B|A=0.93", None, FORMAT),  # 2 places, not 4
        (7, None, FORMAT),  # not a string
        ("B|B=0.5000", None, ORDER),  # the gold letter repeated (in order)
        ("B|C=0.5000|A=0.2500", None, ORDER),  # out of order (no repeat)
        ("B|A=1.5000", None, "a credit above 1"),
        ("B|A=1.0000", None, None),  # credit 1: an action at the cut's minute
        ("C", 2, "a letter beyond the 2 options"),
        ("B", 2, None),
    ],
)
def test_gold_decision_problem_names_the_reason(gold, n_options, reason):
    assert gold_decision_problem(gold, n_options) == reason


def test_split_gold_refuses_a_malformed_gold():
    with pytest.raises(ValueError, match=r"^T11 gold 'B\|A=1\.5000': a credit above 1$"):
        split_gold("B|A=1.5000")


def test_t11_correct_means_full_credit():
    assert A.is_correct("T11", "B", "B|A=0.9271")  # the gold letter
    assert A.is_correct("T11", "A", "B|A=1.0000")  # another letter worth 1
    assert not A.is_correct("T11", "A", "B|A=0.9271")  # partial credit is not correct
    got = score("T11", "B", "B|A=0.9271", ["lab test", "medication order", "procedure"])
    assert (got.correct, got.value) == (True, 1.0)


def test_t11_gold_checked_against_its_options():
    assert A.gold_problem("T11", "C", ["yes", "no"]) == "a letter beyond the 2 options"
    assert A.gold_problem("T11", "B", ["yes", "no"]) is None


def test_t11_strict_reads_the_letter_with_its_options():
    options = ["lab test", "medication order", "procedure"]
    assert A.parse_strict("T11", "C. procedure", options) == "C"
    assert A.parse_strict("T11", "A. procedure", options) is None  # A is "lab test"


# --------------------------------------------------------------------------- routing


def test_t1_strict_never_reads_a_date_or_yes():
    for text in ("2150-01-01", "yes"):
        assert A.parse_strict("T1", text) is None, text
        assert A.parse_strict("T9", text) == text, text  # T9's over-answer in the format


# --------------------------------------------------------------------------- normalisation


def test_wrappers_are_trimmed_after_the_full_stop():
    assert A.parse_strict("T3", "**Yes**.") == "yes"


@pytest.mark.parametrize("space", ["\u00a0", "\u2009", "\u3000"])  # NBSP, thin, ideographic
def test_trailing_unicode_space_is_trimmed(space):
    assert A.parse_strict("T1", f"1.3 mg/dL.{space}") == "1.3 mg/dL"


def test_unicode_minus_is_a_hyphen():
    assert A.parse_strict("T4", "LAB\u2212101") == "LAB-101"
    # the date written with U+2212 is recognised (and dropped), leaving one value
    assert A.parse_lenient("T1", "On 2150\u221201\u221205 it was 1.3 mg/dL") == "1.3 mg/dL"


def test_t9_over_answer_is_recorded_normalised():
    assert A.parse_lenient("T9", "It was\n\nvery  high") == "It was very high"
    assert A.parse_lenient("T9", "The µ level was high") == "The u level was high"
    assert A.parse_lenient("T9", "The μ level was high") == "The u level was high"


# --------------------------------------------------------------------------- abstention


def test_a_guess_before_the_cue_ends_at_the_cue():
    # guess = "increased, but it is" (the later "fell" is after the cue)
    text = "Probably increased, but it is not documented; before that it fell"
    assert A.parse_lenient("T8", text) == "increased"
    text = "Probably 140, but it is not documented; the previous value was 138"
    assert A.parse_lenient("T1", text) == "140"


# --------------------------------------------------------------------------- T7 options


def test_options_differing_only_in_punctuation_are_not_distinct():
    assert A.gold_problem("T7", "A", ["a", "A.", "b", "c"]) == "options are not distinct"


def test_a_letter_and_a_space_needs_an_options_first_word():
    options = ["Metformin", "Heparin", "Atorvastatin 40 mg", "Insulin"]
    assert A.parse_strict("T7", "C Atorvastatin", options) == "C"  # first word only
    # "---" has no letter or digit: it never matches the start of "patient was seen"
    assert A.parse_strict("T7", "A patient was seen", ["---", "xx", "yy", "zz"]) is None


def test_unknown_task_message_lists_the_tasks():
    known = "T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T1R, T11, T1F, T7R"
    with pytest.raises(A.AnswerError, match=rf"^unknown task 'T99'; known: {known}$"):
        A.parse_strict("T99", "x")
