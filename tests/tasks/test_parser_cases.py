"""Parser cases the main table (tests/tasks/test_answers.py) lacked: T5's yes / no readings,
and every gold the task generators produce, written in the strict format, read by both parsers.

T5 asks whether the chart holds a self-contradictory statement, so "yes" means a
contradiction. Lenient reading (clinlib.tasks.answers.readings.yes_no_lenient): an explicit
yes / no wins; else a contradiction word (contradict / conflict / inconsistent / discrepancy /
mismatch) reads "yes" unless a negator is within the 8 words before it ("no"); else an
agreement word (consistent / agree / match) reads "no" unless a negator is within the 6 words
before it ("yes"). Each expectation below follows from those rules by hand.
"""

from __future__ import annotations

import pytest

from clinlib.tasks import answers as A
from clinlib.tasks import generators
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.generate import generate_candidates
from tests import task_fixture as F

# (response, strict, lenient)
T5_CASES: list[tuple[str, str | None, str | None]] = [
    ("Yes.", "yes", "yes"),
    ("NO", "no", "no"),
    ("No, the statements agree with each other.", "no", "no"),
    ("Yes - the note says hypertension was never diagnosed.", "yes", "yes"),
    ("The chart contradicts itself about hypertension.", None, "yes"),
    ("There is a discrepancy between the note and the coded diagnosis", None, "yes"),
    ("The record is inconsistent about the diagnosis.", None, "yes"),
    ("The statements do not contradict each other.", None, "no"),
    ("I found no conflict in the chart.", None, "no"),
    ("The notes are consistent with the coded diagnoses.", None, "no"),
    ("The notes are not consistent with the coded diagnoses.", None, "yes"),
    ("The note matches the record.", None, "no"),
    # a contradiction word outranks an agreement word in the same answer
    ("There is a discrepancy, although the other notes are consistent", None, "yes"),
    ("The answer is yes", None, "yes"),
    ("So no.", None, "no"),
    ("I would not say yes", None, None),  # a negated yes is discarded, never flipped
    # ... and the reading goes on past it (a discarded word does not end the search)
    ("I would not say yes; the answer is no.", None, "no"),
    ("Not no, I would say the answer is yes.", None, "yes"),
    ("Maybe yes, maybe no.", None, None),
    ("Insufficient information.", ABSTAIN, ABSTAIN),
    ("It cannot be determined from the record.", None, ABSTAIN),
    ("The hypertension was treated with lisinopril.", None, None),
]


@pytest.mark.parametrize(("response", "strict", "lenient"), T5_CASES)
def test_t5_parsers(response, strict, lenient):
    assert A.parse_strict("T5", response) == strict
    assert A.parse_lenient("T5", response) == lenient


def test_t5_readings_are_not_t3s():
    # the same sentence reads differently under T3 (attribution) and T5 (contradiction)
    text = "The finding is not consistent with the diagnosis."
    assert A.parse_lenient("T3", text) == "no"  # negated attribution
    assert A.parse_lenient("T5", text) == "yes"  # negated agreement = a contradiction


# --------------------------------------------------------------------------- generated golds

CAPS = {"t3": "MAX_PER_VISIT", "t7": "MAX_ENCOUNTERS_PER_DRUG", "t8": "MAX_PER_SERIES",
        "t9": "MISSED_PER_LAB"}  # fmt: skip


@pytest.fixture(scope="module")
def generated() -> dict[str, list[tuple[str, list[str] | None]]]:
    """(gold, options) of every candidate the T1–T9 generators make from the task fixture."""
    with pytest.MonkeyPatch.context() as mp:
        for mod, name in CAPS.items():
            mp.setattr(getattr(generators, mod), name, 10**6)
        cands = generate_candidates(F.inputs())
    out = {}
    for task, df in cands.items():
        out[task] = [
            (str(g), list(o) if task == "T7" else None)
            for g, o in zip(df["gold"], df["options"], strict=True)
        ]
    return out


def _decorations(task: str, gold: str) -> list[str]:
    """The gold as a model following the format might write it: bare, with a trailing full
    stop, in bold (markdown), and (except T4's id lists and T7's letters) in upper case."""
    out = [gold, f"{gold}.", f"**{gold}**"]
    if task in ("T2", "T3", "T5", "T6", "T8", "T9"):
        out.append(gold.upper())
    return out


@pytest.mark.parametrize("task", [f"T{i}" for i in range(1, 10)])
def test_every_generated_gold_parses_to_itself_under_both_parsers(generated, task):
    pairs = generated[task]
    assert pairs, f"the task fixture generated no {task} candidate"
    for gold, options in pairs:
        assert A.gold_problem(task, gold, options) is None, (task, gold)
        for response in _decorations(task, gold):
            assert A.parse_strict(task, response, options) == gold, (task, response)
            assert A.parse_lenient(task, response, options) == gold, (task, response)
            assert A.is_correct(task, A.parse_strict(task, response, options), gold)


def test_generated_golds_cover_every_answer_of_the_closed_vocabularies(generated):
    """The check above is only as good as the golds it sees: every closed answer appears."""
    golds = {t: {g for g, _ in pairs} for t, pairs in generated.items()}
    assert golds["T3"] == golds["T5"] == {"yes", "no"}
    assert golds["T6"] == {"A", "B", "similar"}
    assert golds["T7"] == {"A", "B", "C", "D"}
    assert golds["T8"] == {"increased", "decreased", "similar"}
    assert golds["T9"] == {ABSTAIN}
    assert {g.split(";")[0] for g in golds["T2"]} == {"increased", "decreased", "stable"}


# --------------------------------------------------------------------------- T1 tolerance


# A value is correct when it lies strictly within half a unit of the gold's last decimal
# (clinlib.tasks.answers.correct.is_correct): gold 1.3 -> |x - 1.3| < 0.05; gold 140 -> < 0.5;
# gold 0.50 -> < 0.005. Decimal arithmetic, so the edges are exact.
@pytest.mark.parametrize(
    ("parsed", "gold", "correct"),
    [
        ("1.3499", "1.3 mg/dL", True),
        ("1.35", "1.3 mg/dL", False),
        ("1.2501", "1.3 mg/dL", True),
        ("1.25", "1.3 mg/dL", False),
        ("140.49 mEq/L", "140 mEq/L", True),
        ("140.5 mEq/L", "140 mEq/L", False),
        ("139.51", "140 mEq/L", True),
        ("0.5049 ng/mL", "0.50 ng/mL", True),
        ("0.505 ng/mL", "0.50 ng/mL", False),
        ("0.4951", "0.50 ng/mL", True),
        ("<0.01 ng/mL", "<0.01 ng/mL", True),
        ("0.01 ng/mL", "<0.01 ng/mL", False),  # the comparator is part of the value
    ],
)
def test_t1_tolerance_is_half_a_unit_of_the_golds_precision(parsed, gold, correct):
    assert A.is_correct("T1", parsed, gold) is correct


# Each way a gold can be malformed, with the reason gold_problem gives (the audit and the
# question builder print it; survivors of bench-mutation's answers group).
GOLD_REASONS = [
    ("T1", None, None, "empty or not a string"),
    ("T1", "  ", None, "empty or not a string"),
    ("T1", " 1.3 mg/dL", None, "surrounding whitespace"),
    ("T1", "1.3", None, "not '<value_text> <unit>'"),
    ("T1", "<0.5 mg/dL", None, None),
    ("T2", "increased", None, "not '<increased|decreased|stable>;<none|weak|moderate|strong>'"),
    ("T2", "stable;weak", None, "stable pairs with none and only with none"),
    ("T2", "increased;none", None, "stable pairs with none and only with none"),
    ("T3", "maybe", None, "not 'yes' or 'no'"),
    ("T5", "Yes", None, "not 'yes' or 'no'"),
    ("T4", "LAB-1;lab-2", None, "not event ids joined by ';'"),
    ("T4", "LAB-2;LAB-1", None, "ids not sorted and unique"),
    ("T4", "LAB-1;LAB-1", None, "ids not sorted and unique"),
    ("T6", "C", None, "not 'A', 'B' or 'similar'"),
    ("T7", "E", None, "not an option letter A-D"),
    ("T7", "A", ["a", "b", "c"], "needs four non-empty options"),
    ("T7", "A", ["a", " ", "b", "c"], "needs four non-empty options"),
    ("T7", "A", ["a", "A ", "b", "c"], "options are not distinct"),
    ("T7", "A", ["a", "d", "b", "c"], None),
    ("T8", "up", None, "not 'increased', 'decreased' or 'similar'"),
    ("T9", "1.3 mg/dL", None, "not 'insufficient information'"),
]


@pytest.mark.parametrize(("task", "gold", "options", "reason"), GOLD_REASONS)
def test_gold_problem_names_the_reason(task, gold, options, reason):
    assert A.gold_problem(task, gold, options) == reason


# The negation windows of the lenient yes/no readings, at their edges: a negator within the
# window (in words, counted back from the cue) flips the cue's reading, one word further it
# does not. T3's attribution cue and T5's contradiction cue look 8 words back, T5's
# consistency cue 6 (the filler words are number words: no negator, no clause break).
FILL = "one two three four five six seven eight".split()


@pytest.mark.parametrize(
    ("task", "cue", "n_within", "negated", "plain"),
    [
        ("T3", "linked to the diagnosis", 7, "no", "yes"),  # not + 7 words = 8
        ("T5", "contradicts the codes", 7, "no", "yes"),  # not + 7 words = 8
        ("T5", "is consistent with the codes", 4, "yes", "no"),  # not + 4 + "is" = 6
    ],
)
def test_negation_window_edges(task, cue, n_within, negated, plain):
    def say(k: int) -> str:
        return "It is not " + " ".join(FILL[:k]) + " " + cue + "."

    assert A.parse_lenient(task, say(n_within)) == negated
    assert A.parse_lenient(task, say(n_within + 1)) == plain
