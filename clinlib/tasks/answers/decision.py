"""Decision answers of T11 (LongMedBench "Task 3": next action T3-N, argument T3-A, discharge
within 6 h T3-D, "a time-decay scoring mechanism is applied to recognize actions E_24h, events
that occur within 24h after t_GT"; seed fact ``lmb_decision_decay``): the time decay, the gold
with its credits, the parsers and the graded score.

Every T11 question lists its options under letters (``options``: next action = the action
kinds of the patient's record, argument = T11_ARGUMENT_OPTIONS arguments of the patient's
record, discharge = ``yes`` / ``no``); the answer is one letter.

Time decay (the seed states that actions within 24 h after the cut earn credit "by time
decay" but prints no formula in its text; the kit's is linear, with one constant,
rules.T11_HORIZON_MIN = 24 h): an option matching an action ``delta`` minutes after the cut
earns ``decay(delta) = 1 - delta / 1440`` for ``0 <= delta <= 1440`` and 0 beyond; an action AT
the cut's minute (delta = 0: the exact next action, or one ordered with it) earns 1. An option
matching several later actions earns the credit of the earliest. Credits are exact fractions
rounded half-up to rules.T11_DECAY_DECIMALS places (:func:`decay_text`).

Gold (canonical): the ground-truth letter, then every OTHER option with a non-zero credit as
``|<letter>=<credit>`` in letter order: ``"B|A=0.8750|D=0.0417"``; discharge golds are a bare
letter. ``correct`` = the parsed letter is the ground-truth letter (or another letter worth
credit 1, an action at the same minute); the graded score is the parsed letter's credit (1 for
the gold letter, 0 for an abstention or a parse failure).

strict: the response starts with one option letter ("B", "(B)", "B.", "Option B", "B. text")
and no other; lenient: also the letter or the option text named anywhere (T7's lenient
reading); a letter beyond the question's options is a parse failure.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from clinlib.tasks import rules
from clinlib.tasks.answers.order import ORDER_LETTERS

_PLACES = rules.T11_DECAY_DECIMALS
_GOLD_RE = re.compile(rf"([A-J])((?:\|[A-J]=(?:0|1)\.\d{{{_PLACES}}})*)")


def decay(delta_min: int | float | Fraction) -> Fraction:
    """Credit of an action ``delta_min`` minutes after the cut (module docstring): 1 at 0,
    linear to 0 at rules.T11_HORIZON_MIN, 0 beyond or before the cut."""
    d = Fraction(delta_min)
    if d < 0 or d > rules.T11_HORIZON_MIN:
        return Fraction(0)
    return 1 - d / rules.T11_HORIZON_MIN


def decay_text(credit: Fraction) -> str:
    """A credit as printed in a gold: rounded half-up to T11_DECAY_DECIMALS places."""
    q = Decimal(1).scaleb(-rules.T11_DECAY_DECIMALS)
    value = Decimal(credit.numerator) / Decimal(credit.denominator)
    return str(value.quantize(q, rounding=ROUND_HALF_UP))


def decision_gold(letter: str, credits: dict[str, Fraction]) -> str:
    """The canonical gold: ``letter`` plus the other letters' non-zero credits (module
    docstring)."""
    parts = [letter]
    for other in sorted(credits):
        if other != letter:
            text = decay_text(credits[other])
            if Decimal(text) > 0:
                parts.append(f"{other}={text}")
    return "|".join(parts)


def split_gold(gold: str) -> tuple[str, dict[str, float]]:
    """(ground-truth letter, letter -> credit) of a canonical gold (the letter itself = 1)."""
    problem = gold_decision_problem(gold)
    if problem:
        raise ValueError(f"T11 gold {gold!r}: {problem}")
    letter, *rest = gold.split("|")
    credits = {letter: 1.0}
    for part in rest:
        k, v = part.split("=")
        credits[k] = float(v)
    return letter, credits


def gold_decision_problem(gold: object, n_options: int | None = None) -> str | None:
    """Why ``gold`` is not a canonical T11 gold (None when it is)."""
    if not isinstance(gold, str) or not _GOLD_RE.fullmatch(gold):
        return "not '<letter>' followed by '|<letter>=<credit>' parts"
    letters = [p.split("=")[0] for p in gold.split("|")]
    if len(set(letters)) != len(letters) or letters[1:] != sorted(letters[1:]):
        return "credit letters repeat or are out of order"
    if any(Decimal(p.split("=")[1]) > 1 for p in gold.split("|")[1:]):
        return "a credit above 1"
    if n_options is not None and any(x not in ORDER_LETTERS[:n_options] for x in letters):
        return f"a letter beyond the {n_options} options"
    return None


def decision_letter(parsed: str | None, n_options: int) -> str | None:
    """``parsed`` when it is one of the first ``n_options`` letters, else None."""
    if parsed is None:
        return None
    return parsed if parsed in ORDER_LETTERS[:n_options] else None


def decision_correct(parsed: str | None, gold: str) -> bool:
    """The parsed letter earns full credit (the ground truth, or an action at its minute)."""
    return decision_score(parsed, gold) >= 1.0


def decision_score(parsed: str | None, gold: str) -> float:
    """The graded T11 score: the parsed letter's credit; 0 for anything else."""
    if parsed is None or not re.fullmatch(r"[A-J]", parsed):
        return 0.0
    return split_gold(gold)[1].get(parsed, 0.0)
