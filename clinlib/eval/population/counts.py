"""Token counts of population prompts line by line: exact, and each distinct line encoded once.

A paper population set prints about 8.6 M lines over its 1,731 prompts, of which about 106,000
are distinct (the same lab, drug and diagnosis lines recur across records and questions), yet
a whole-prompt count encodes every one of them, once per tokenizer.

The cut is :mod:`clinlib.llm.tokens`' safe cut: a newline followed by a character that is
neither whitespace nor ``/``. The pre-tokenizers of ``cl100k_base`` and ``o200k_base`` never
put such a newline and the character after it in one pre-token (a newline joins only
whitespace, or the punctuation before it, which o200k extends over following ``/``), and BPE
merges within pre-tokens, so the pieces' counts add up to the whole text's count exactly.
tests/eval/test_population_counts.py compares the sums with :func:`count_tokens` on adversarial
text and on the quick set's prompts under both tokenizers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clinlib.llm.tokens import count_tokens, model_tokenizer

_CUT = re.compile(r"\n(?=[^\s/])")


class _PieceMemo(dict):
    """piece -> tokens of the piece and the newline the cut removed after it."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model

    def __missing__(self, piece: str) -> int:
        n = self[piece] = count_tokens(piece + "\n", self.model)
        return n


@functools.cache
def _memo(model: str) -> _PieceMemo:
    return _PieceMemo(model)


def count_by_lines(text: str, model: str) -> int:
    """``count_tokens(text, model)``, summed over the text's lines (each distinct line
    encoded once per process); a model counted by its own tokenizer is counted whole."""
    if model_tokenizer(model) is not None:
        return count_tokens(text, model)
    *pieces, last = _CUT.split(text)
    return sum(map(_memo(model).__getitem__, pieces)) + count_tokens(last, model)


def line_counter(model: str) -> Callable[[str], int]:
    """A one-argument counter for ``model`` (the population stage's length gate)."""
    return functools.partial(count_by_lines, model=model)


def count_messages_by_lines(messages: Sequence[Mapping[str, Any]], model: str) -> int:
    """``count_tokens(messages, model)`` (chat accounting) with each string content counted by
    :func:`count_by_lines`: the messages with their contents emptied, plus the contents."""
    if model_tokenizer(model) is not None:
        return count_tokens(messages, model)
    texts = [m.get("content") for m in messages]
    if not all(isinstance(t, str) for t in texts):
        return count_tokens(messages, model)
    bare = [{**m, "content": ""} for m in messages]
    return count_tokens(bare, model) + sum(count_by_lines(t, model) for t in texts)
