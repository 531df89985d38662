"""Visit cloze scored by insertion position (LongMedBench "Temporal reasoning", the Visit Cloze
sentence: "several intervention events ... with timestamps preserved are masked and provided
to the agent as a shuffled list. The agent must insert each event back to its original
position"; "The evaluation score is measured by Kendall's tau", "using the original event
streams as ground truth").

A cloze question numbers the visit's remaining lines ``[1]``, ``[2]``, ...; an insertion
answer gives each removed event (letter) with the number of the line it goes after, 0 for
before the first line, in chronological order: ``"C:0, A:3, B:3"``. The canonical form (gold
``meta.insertion`` and parsed) is ``"C:0,A:3,B:3"``. Two letters in one gap keep the answer's
order.

Scores (pure functions, hand-worked in tests/tasks/test_insertion.py):

* :func:`insertion_tau` — the seed's score: Kendall's tau between the visit stream the answer
  rebuilds (:func:`rebuilt_stream`) and the original stream. Reading named here: the seed does
  not say over which pairs; the kit counts the pairs the answer decides (every pair with at
  least one removed event). The pairs of two remaining lines are fixed by the question and
  always concordant; counting them would put any answer near 1 on a long visit (three
  events that belong after lines 5, 20 and 30 of a 40-line visit, all put after line 40:
  0.856 over every pair, -0.057 over the decided ones).
* :func:`insertion_exact` — the share of removed events put in their own gap.

The previous score, Kendall's tau over the removed events' letters alone
(:func:`clinlib.tasks.answers.order.order_score`), stays the T10 ``score`` column; it is 1 for
an answer whose order is right and whose positions are all wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PAIR_RE = re.compile(r"\(?([A-J])\)?\s*(?::|@|after\s+(?:line\s+)?)\s*\[?(\d{1,3})\]?", re.I)
_CANON_RE = re.compile(r"[A-J]:\d{1,3}(?:,[A-J]:\d{1,3})*")

Insertion = list[tuple[str, int]]


def canonical_insertion(pairs: Sequence[tuple[str, int]]) -> str:
    """``[("C", 0), ("A", 3)]`` -> ``"C:0,A:3"``."""
    return ",".join(f"{letter}:{slot}" for letter, slot in pairs)


def split_insertion(text: str | None) -> Insertion | None:
    """The canonical form back to pairs (None: not canonical)."""
    if text is None or not _CANON_RE.fullmatch(str(text)):
        return None
    return [(p.split(":")[0], int(p.split(":")[1])) for p in str(text).split(",")]


def parse_insertion(response: str | None, n_items: int, n_lines: int) -> str | None:
    """The canonical insertion answer in a response, or None: every one of the ``n_items``
    letters exactly once, each with a line number in 0..``n_lines`` (``C:0``, ``C: 0``,
    ``C@0``, ``C after line 0``), in the response's order."""
    pairs = [(m.group(1).upper(), int(m.group(2))) for m in _PAIR_RE.finditer(response or "")]
    letters = [p[0] for p in pairs]
    want = [chr(ord("A") + i) for i in range(n_items)]
    if sorted(letters) != want or any(not 0 <= s <= n_lines for _, s in pairs):
        return None
    return canonical_insertion(pairs)


def gold_insertion(letter_lines: Sequence[tuple[str, int]]) -> str:
    """The gold of a cloze: (letter, the number of remaining lines before it) in time order."""
    return canonical_insertion(list(letter_lines))


def rebuilt_stream(pairs: Sequence[tuple[str, int]], n_lines: int) -> list[str]:
    """The visit the answer rebuilds: lines ``"1"`` .. ``"n_lines"`` with each letter after
    its line (stable: letters of one gap in the answer's order)."""
    by_gap: dict[int, list[str]] = {}
    for letter, slot in pairs:
        by_gap.setdefault(slot, []).append(letter)
    out = list(by_gap.get(0, []))
    for line in range(1, n_lines + 1):
        out.append(str(line))
        out += by_gap.get(line, [])
    return out


def _tau(rebuilt: Sequence[str], original: Sequence[str], decided_only: bool) -> float:
    rank = {x: i for i, x in enumerate(rebuilt)}
    score = pairs = 0
    for i in range(len(original)):
        for j in range(i + 1, len(original)):
            a, b = original[i], original[j]
            if decided_only and a.isdigit() and b.isdigit():
                continue
            pairs += 1
            score += 1 if rank[a] < rank[b] else -1
    return score / pairs if pairs else 0.0


def insertion_tau(parsed: str | None, gold: str, n_lines: int, decided_only: bool = True) -> float:
    """Kendall's tau between the rebuilt and the original stream (module docstring); 0.0
    (chance) for an abstention, a parse failure or another letter set. ``decided_only=False``
    counts every pair of the stream (shown for comparison)."""
    pred, want = split_insertion(parsed), split_insertion(gold)
    if want is None:
        raise ValueError(f"gold {gold!r} is not a canonical insertion answer")
    if pred is None or sorted(p[0] for p in pred) != sorted(w[0] for w in want):
        return 0.0
    original = rebuilt_stream(want, n_lines)
    return _tau(rebuilt_stream(pred, n_lines), original, decided_only)


def insertion_exact(parsed: str | None, gold: str) -> float:
    """The share of removed events the answer puts in their own gap (0.0 when unparsed)."""
    pred, want = split_insertion(parsed), split_insertion(gold)
    if want is None:
        raise ValueError(f"gold {gold!r} is not a canonical insertion answer")
    if pred is None:
        return 0.0
    slot = dict(pred)
    return sum(slot.get(letter) == s for letter, s in want) / len(want)
