"""Answer-overlap metrics for free-text answers: SQuAD-style token-F1 and ROUGE-L, which
MedMemoryBench reports beside its LLM-as-Judge accuracy (its Table 3, MedMemoryBench §6
"Response Quality and Hallucination Analysis"; Tables 6–7).

Both are pure functions of two strings.

* :func:`token_f1` — the SQuAD v1.1 evaluation script's ``f1_score``: both texts normalised by
  :func:`normalize_answer` (lower case, punctuation removed, the articles a / an / the removed,
  whitespace collapsed), split on whitespace, and F1 of the multiset overlap. Two empty texts
  score 1, one empty text scores 0 (SQuAD 2.0's rule for no-answer).
* :func:`rouge_l` — ROUGE-L F-measure from Google's maintained ``rouge-score`` library
  (``RougeScorer(["rougeL"])``, its default tokenizer, no stemming): longest common
  subsequence of the token sequences.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any

ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(ARTICLES_RE.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The normalised answer's tokens."""
    return normalize_answer(text).split()


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token-F1 of a prediction against a reference answer (0..1).

    Args:
        prediction: the model's answer.
        reference: the gold answer text.

    Returns:
        2PR / (P + R) over the multiset of normalised tokens; 1.0 when both are empty, 0.0
        when exactly one is.
    """
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1)
def _rouge() -> Any:
    # deferred: rouge_score imports nltk, seconds that only ROUGE-L needs (docs/design.md)
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (``rouge-score``'s RougeScorer, target = reference)."""
    return float(_rouge().score(str(reference), str(prediction))["rougeL"].fmeasure)
