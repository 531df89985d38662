"""T10 ordering answers: Kendall's tau (against scipy), strict / lenient parsers, parse-failure
diagnostics, the gold check, the registry entry and the clip-leak rule (LongMedBench
"Temporal reasoning", Table 3). Values worked out by hand."""

from __future__ import annotations

import itertools

import pytest
from scipy.stats import kendalltau

from clinlib.tasks import TASKS, score
from clinlib.tasks import answers as A
from clinlib.tasks.answers.order import (
    kendall_tau,
    order_problem,
    order_score,
    parse_order_lenient,
    parse_order_strict,
)
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.order_leaks import clip_leak

ITEMS4 = ["w", "x", "y", "z"]


# --------------------------------------------------------------------------- Kendall's tau


def test_kendall_tau_by_hand():
    assert kendall_tau("ABC", "ABC") == 1.0
    assert kendall_tau("CBA", "ABC") == -1.0
    # gold A<B<C<D; predicted B,A,C,D: one discordant pair (A,B) of six -> (5 - 1) / 6
    assert kendall_tau(list("BACD"), list("ABCD")) == pytest.approx(4 / 6)
    # predicted C,A,B vs gold A,B,C: pairs AB concordant, AC and BC discordant -> -1/3
    assert kendall_tau(list("CAB"), list("ABC")) == pytest.approx(-1 / 3)


def test_kendall_tau_matches_scipy_on_every_permutation_of_five():
    gold = list("ABCDE")
    for perm in itertools.permutations(gold):
        ranks_pred = [perm.index(x) for x in gold]
        expected = kendalltau(range(5), ranks_pred).statistic
        assert kendall_tau(list(perm), gold) == pytest.approx(expected)


def test_kendall_tau_refuses_non_permutations():
    with pytest.raises(ValueError, match="not permutations"):
        kendall_tau(list("ABB"), list("ABC"))
    with pytest.raises(ValueError, match="at least two"):
        kendall_tau(["A"], ["A"])


# --------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    "response,strict,lenient",
    [
        ("C, A, D, B", "C,A,D,B", "C,A,D,B"),
        ("C > A > D > B", "C,A,D,B", "C,A,D,B"),
        ("(C) (A) (D) (B)", "C,A,D,B", "C,A,D,B"),
        ("Answer: C;A;D;B.", "C,A,D,B", "C,A,D,B"),
        ("The order is C, then A, then D, then B.", None, "C,A,D,B"),
        ("Event C -> Event A -> Event D -> Event B", None, "C,A,D,B"),
        # not permutations: a parse failure in both modes, never a tau of 0
        ("C, A, D", None, None),
        ("C, A, A, B", None, None),
        ("C, A, E, B", None, None),
        ("I think a patient ordering is unclear", None, None),
        ("insufficient information", ABSTAIN, ABSTAIN),
    ],
)
def test_parsers(response, strict, lenient):
    assert A.parse_strict("T10", response, ITEMS4) == strict
    assert A.parse_lenient("T10", response, ITEMS4) == lenient


def test_parser_needs_the_items():
    assert A.parse_strict("T10", "A, B, C", None) is None
    assert parse_order_strict("B, A, C", 3) == "B,A,C"
    assert parse_order_lenient("first B and then A and C", 3) == "B,A,C"


def test_diagnostics_say_what_is_wrong():
    assert order_problem("C, A, D", 4) == "not a permutation of A, B, C, D: missing B"
    assert order_problem("C, A, A, B, D", 4) == "not a permutation of A, B, C, D: repeated A"
    assert order_problem("C, A, E, B", 4) == (
        "not a permutation of A, B, C, D: unknown label(s) E; missing D"
    )
    assert order_problem("no idea", 4) == "no sequence of option letters found"
    assert order_problem("", 4) == "empty response"


def test_score_is_tau_and_failures_are_flagged():
    s = score("T10", "B, A, C, D", "A,B,C,D", ITEMS4)
    assert (s.parsed, s.correct, s.parse_failed) == ("B,A,C,D", False, False)
    assert s.value == pytest.approx(4 / 6)
    exact = score("T10", "A, B, C, D", "A,B,C,D", ITEMS4)
    assert exact.correct and exact.value == 1.0
    bad = score("T10", "A, B, C", "A,B,C,D", ITEMS4)
    assert bad.parse_failed and bad.value == 0.0 and bad.problem.endswith("missing D")
    abstain = score("T10", "insufficient information", "A,B,C,D", ITEMS4)
    assert abstain.parsed == ABSTAIN and not abstain.parse_failed and abstain.value == 0.0
    # accuracy tasks keep 1 / 0
    assert score("T3", "yes", "yes").value == 1.0 and score("T3", "no", "yes").value == 0.0
    assert order_score(None, "A,B,C") == 0.0


def test_gold_problem():
    assert A.gold_problem("T10", "C,A,B", ["x", "y", "z"]) is None
    assert A.gold_problem("T10", "C,A") == "needs 3..10 items, has 2"
    assert A.gold_problem("T10", "C,A", ["x", "y", "z"]).endswith("missing B")
    assert A.gold_problem("T10", "C,A,C", ["x", "y", "z"]).endswith("repeated C; missing B")
    assert A.gold_problem("T10", "C, A, B") == "not letters joined by ','"
    assert A.gold_problem("T10", "B,A,C,D", ["x", "y", "z"]).startswith("not a permutation")


def test_registry_flags_t10_as_extended():
    t10 = TASKS["T10"]
    assert not t10.paper and t10.grade is not None and t10.max_tokens == 80
    assert all(TASKS[f"T{i}"].paper for i in range(1, 10))
    assert t10.subtypes == (
        "visit_cloze",
        "visit_sorting",
        "joint_sorting",
        "visit_sorting_notes",
    )


# --------------------------------------------------------------------------- leaks


@pytest.mark.parametrize(
    "text,leak",
    [
        ("Glucose 2100 mg/dL (abnormal); Platelet Count 2100 K/uL", None),
        ("Heparin 5000 UNIT SC, Insulin 70/30", None),
        ("First degree atrioventricular block; Subsequent encounter for care", None),
        ("Abnormal results later in the stay: Sodium 128 mEq/L.", None),
        ("Admitted 2150-01-03 with chest pain", "ISO date '2150-01-03'"),
        ("seen on 3/14 for follow-up", "numeric date '3/14'"),
        ("Seen March 3", "month-name date 'march 3'"),
        ("labs drawn at 09:24", "clock time '09:24'"),
        ("since 2150 the patient", "year '2150'"),
        ("Follow-up exam 3/14.", "numeric date '3/14'"),  # a full stop ends the date
        ("Seen in 2150.", "year '2150'"),
        ("Sodium Chloride 0.9% 1000.5 mL", None),
        ("Visit 3: chest pain", "visit number 'visit 3'"),
        ("readmitted, her second admission this year", "visit ordinal 'second admission'"),
        ("as at the previous stay", "visit ordinal 'previous stay'"),
    ],
)
def test_clip_leak(text, leak):
    assert clip_leak(text) == leak
