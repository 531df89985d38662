"""Visit cloze scored by insertion position (LongMedBench "Temporal reasoning": "The agent must
insert each event back to its original position", Kendall's tau against the original stream):
the pure scores of clinlib.tasks.answers.insertion, worked out by hand (and the all-pairs tau
against scipy)."""

from __future__ import annotations

import pytest
from scipy.stats import kendalltau

from clinlib.tasks.answers.insertion import (
    insertion_exact,
    insertion_tau,
    parse_insertion,
    rebuilt_stream,
    split_insertion,
)
from clinlib.tasks.answers.order import order_score, parse_order_strict

# A visit with four remaining lines; A goes after line 1, B after line 3: 1 A 2 3 B 4.
GOLD, LINES = "A:1,B:3", 4


def test_parse_reads_every_letter_with_a_line_in_the_answer_order():
    assert parse_insertion("C:0, A:3, B:3", 3, 5) == "C:0,A:3,B:3"
    assert parse_insertion("C after line 0, A after 3, B@[3]", 3, 5) == "C:0,A:3,B:3"
    assert parse_insertion("C:0, A:3", 3, 5) is None  # B has no line
    assert parse_insertion("C:0, A:3, B:9", 3, 5) is None  # there is no line 9
    assert parse_insertion("C, A, B", 3, 5) is None  # an order names no position
    assert parse_insertion("insufficient information", 3, 5) is None


def test_rebuilt_stream_keeps_the_answer_order_within_a_gap():
    assert rebuilt_stream([("B", 2), ("A", 2)], 3) == ["1", "2", "B", "A", "3"]
    assert rebuilt_stream([("A", 0)], 2) == ["A", "1", "2"]


def test_the_right_insertion_scores_one():
    assert insertion_tau(GOLD, GOLD, LINES) == 1.0
    assert insertion_exact(GOLD, GOLD) == 1.0


def test_counterexample_right_order_wrong_positions():
    # three events, gold 1 A 2 3 B C 4; answered in the right order, all after the last line:
    # 1 2 3 4 A B C.
    gold, answer = "A:1,B:3,C:3", "A:4,B:4,C:4"
    assert parse_order_strict("A:4, B:4, C:4", 3) == "A,B,C"
    assert order_score("A,B,C", "A,B,C") == 1.0  # the order-only score is perfect
    # 15 decided pairs. A: (1,A) (A,B) (A,C) concordant, (A,2) (A,3) (A,4) discordant -> 0;
    # B: (1,B) (2,B) (3,B) (B,C) concordant, (B,4) discordant -> +3; C: (1,C) (2,C) (3,C)
    # concordant, (C,4) discordant -> +2. tau = 5 / 15.
    assert insertion_tau(answer, gold, LINES) == pytest.approx(1 / 3)
    assert insertion_exact(answer, gold) == 0.0
    # over all 21 pairs (the 6 pairs of remaining lines always concordant): (5 + 6) / 21
    assert insertion_tau(answer, gold, LINES, decided_only=False) == pytest.approx(11 / 21)


def test_right_gap_wrong_order_within_it():
    # gold 1 2 A B 3 4, answered 1 2 B A 3 4: only (A, B) is discordant of 9 decided pairs,
    # both events sit in their own gap, and the order-only tau is -1.
    assert insertion_tau("B:2,A:2", "A:2,B:2", LINES) == pytest.approx(7 / 9)
    assert insertion_exact("B:2,A:2", "A:2,B:2") == 1.0
    assert order_score("B,A", "A,B") == -1.0


def test_all_pairs_tau_equals_scipy_and_the_decided_pairs_do_not_dilute():
    gold, answer = "A:5,B:20,C:30", "A:40,B:40,C:40"
    original = rebuilt_stream(split_insertion(gold), 40)
    rebuilt = rebuilt_stream(split_insertion(answer), 40)
    want = kendalltau(range(len(original)), [rebuilt.index(x) for x in original]).statistic
    assert insertion_tau(answer, gold, 40, decided_only=False) == pytest.approx(want)
    assert want == pytest.approx(0.856, abs=1e-3)
    assert insertion_tau(answer, gold, 40) == pytest.approx(-0.057, abs=1e-3)


def test_unparsed_or_other_letters_score_chance_and_a_bad_gold_raises():
    assert insertion_tau(None, GOLD, LINES) == 0.0
    assert insertion_tau("A:1,C:3", GOLD, LINES) == 0.0
    assert insertion_exact(None, GOLD) == 0.0
    with pytest.raises(ValueError, match="not a canonical insertion"):
        insertion_tau(GOLD, "A,B", LINES)
