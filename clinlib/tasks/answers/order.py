"""Ordering answers of T10 (LongMedBench §"Temporal reasoning", Table 3): labels, parsers,
the gold check and Kendall's tau.

A T10 question lists n items (events or visit clips) under the letters A, B, C, ... (the
question's ``options`` hold the item texts in letter order); the answer is the letters in
chronological order, earliest first. The canonical form (gold and parsed) is the letters
joined by ``,`` without spaces: ``"C,A,B"``.

strict: the whole response is the n letters, each exactly once, separated by commas,
    semicolons, ``>``, ``->``, ``→`` or whitespace ("C, A, B", "C > A > B", "C A B"); an
    optional bracket around each letter ("(C)") is accepted, and so is a visit cloze's line
    number after a letter ("C:0, A:3, B:3" reads as "C,A,B"; the lines are scored by
    :mod:`clinlib.tasks.answers.insertion`).
lenient: the longest run of single letters joined by those separators or "then" / "and" /
    "followed by" anywhere in the response ("The order is C, then A, then B."), each letter
    optionally prefixed by Event / Visit / Clip / Item / Option. The run must be a
    permutation of the n letters.

A response that is no permutation of the expected letters (a letter missing, repeated or
unknown) is a parse failure, never a tau of 0; :func:`order_problem` says why. An
abstention is parsed as ``ABSTAIN`` by the shared abstention handling (as in every task).

Score: Kendall's tau between the parsed and the gold order, in [-1, 1] (a permutation has no
ties, so tau-a = tau-b; :func:`kendall_tau` is tested against ``scipy.stats.kendalltau``).
``correct`` is the exact order (tau = 1).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

ORDER_LETTERS: tuple[str, ...] = tuple(string.ascii_uppercase[:10])
MIN_ITEMS = 3
MAX_ITEMS = len(ORDER_LETTERS)

_STRICT_SEP = r"(?:\s*(?:,|;|->|→|>)\s*|\s+)"
_SEP = r"(?:(?:\s*(?:,|;|->|→|>|\band\b|\bthen\b|\bfollowed\s+by\b)\s*)+|\s+)"
_ITEM_WORD = r"(?:(?:event|visit|clip|item|option)\s+)?"
_LETTER = r"\(?([A-J])\)?"
# a visit cloze's insertion answer writes a line number after each letter ("C:0, A:3"): read
# here as the order of the letters (clinlib.tasks.answers.insertion reads the lines)
_SLOT = r"(?:\s*[:@]\s*\[?\d{1,3}\]?)?"


def order_labels(n: int) -> list[str]:
    """The first ``n`` letters (the labels of an n-item ordering question)."""
    if not MIN_ITEMS <= n <= MAX_ITEMS:
        raise ValueError(f"an ordering question has {MIN_ITEMS}..{MAX_ITEMS} items, got {n}")
    return list(ORDER_LETTERS[:n])


def canonical_order(letters: Sequence[str]) -> str:
    """``["C", "A", "B"]`` -> ``"C,A,B"``."""
    return ",".join(letters)


def split_order(text: str) -> list[str]:
    """``"C,A,B"`` -> ``["C", "A", "B"]`` (the canonical form only)."""
    return [p for p in str(text).split(",") if p]


def order_problem_of(letters: Sequence[str], n: int) -> str | None:
    """Why ``letters`` is not a permutation of the n labels (None when it is)."""
    want = order_labels(n)
    unknown = sorted({x for x in letters if x not in want})
    repeated = sorted({x for x in letters if letters.count(x) > 1 and x in want})
    missing = [x for x in want if x not in letters]
    parts = []
    if unknown:
        parts.append(f"unknown label(s) {', '.join(unknown)}")
    if repeated:
        parts.append(f"repeated {', '.join(repeated)}")
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if not parts:
        return None
    return f"not a permutation of {', '.join(want)}: " + "; ".join(parts)


def _strict_letters(norm: str) -> list[str] | None:
    if not re.fullmatch(rf"{_LETTER}{_SLOT}(?:{_STRICT_SEP}{_LETTER}{_SLOT})*", norm):
        return None
    return re.findall(r"[A-J]", norm)


def _runs(text: str) -> list[list[str]]:
    """Every maximal run of labelled letters joined by separators, in text order."""
    item = rf"{_ITEM_WORD}{_LETTER}{_SLOT}"
    rx = re.compile(rf"(?<![\w'])({item}(?:{_SEP}{item})+)(?![\w'])", re.IGNORECASE)
    out = []
    for m in rx.finditer(text):
        letters = re.findall(
            rf"(?<![\w']){_ITEM_WORD}\(?([A-J])\)?(?![\w'])", m.group(1), re.IGNORECASE
        )
        # a lower-case "a" is the article, not a label: keep upper-case letters only
        upper = [x for x in letters if x.isupper()]
        if len(upper) == len(letters):
            out.append(upper)
    return out


def parse_order_strict(norm: str, n: int) -> str | None:
    """Strict reading of a normalised response (module docstring); None = parse failure."""
    letters = _strict_letters(norm)
    if letters is None or order_problem_of(letters, n):
        return None
    return canonical_order(letters)


def parse_order_lenient(text: str, n: int) -> str | None:
    """Lenient reading (module docstring): the longest permutation run in the text."""
    strict = parse_order_strict(text, n)
    if strict is not None:
        return strict
    runs = [r for r in _runs(text) if order_problem_of(r, n) is None]
    if not runs:
        return None
    return canonical_order(max(runs, key=len))


def order_problem(response: str | None, n: int) -> str | None:
    """The diagnostic of an ordering response that does not parse (None when the strict
    reading parses): what is missing, repeated or unknown in its best letter run."""
    text = (response or "").strip()
    if not text:
        return "empty response"
    letters = _strict_letters(text)
    if letters is None:
        runs = _runs(text)
        if not runs:
            return "no sequence of option letters found"
        letters = max(runs, key=len)
    return order_problem_of(letters, n)


def gold_order_problem(gold: object, n: int | None = None) -> str | None:
    """Why ``gold`` is not a canonical T10 answer (None when it is)."""
    if not isinstance(gold, str) or not re.fullmatch(r"[A-J](?:,[A-J])*", gold):
        return "not letters joined by ','"
    letters = split_order(gold)
    size = len(letters) if n is None else n
    if not MIN_ITEMS <= size <= MAX_ITEMS:
        return f"needs {MIN_ITEMS}..{MAX_ITEMS} items, has {size}"
    return order_problem_of(letters, size)


def kendall_tau(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Kendall's tau between two orderings of the same labels (LongMedBench Table 3 metric).

    tau = (concordant - discordant) / (n (n - 1) / 2) over all label pairs: 1 for the gold
    order, -1 for its reverse. Both must be permutations of one label set of size >= 2.
    """
    if sorted(predicted) != sorted(gold) or len(set(gold)) != len(gold):
        raise ValueError(f"orders {list(predicted)} and {list(gold)} are not permutations")
    n = len(gold)
    if n < 2:
        raise ValueError("Kendall's tau needs at least two items")
    rank = {x: i for i, x in enumerate(predicted)}
    score = 0
    for i in range(n):
        for j in range(i + 1, n):
            score += 1 if rank[gold[i]] < rank[gold[j]] else -1
    return score / (n * (n - 1) / 2)


def order_score(parsed: str | None, gold: str) -> float:
    """The T10 score of a parsed answer: Kendall's tau against the gold; 0.0 (chance level)
    for an abstention or a parse failure, which convey no order."""
    if parsed is None or not re.fullmatch(r"[A-J](?:,[A-J])*", parsed):
        return 0.0
    pred, want = split_order(parsed), split_order(gold)
    if sorted(pred) != sorted(want):
        return 0.0
    return kendall_tau(pred, want)
