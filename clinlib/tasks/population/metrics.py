"""PopMedQA task metrics (PopMedQA App. C "Task Scoring"), pure functions.

| task | metric |
| --- | --- |
| planted clique | precision ``|P ∩ T| / k`` |
| in-context classification, two-sample test, classification | accuracy |
| clustering | Rand index (share of patient pairs put together / apart as in the truth) |
| inverse-propensity weighting | absolute error of the ATE (gold: Hajek estimator) |
| outlier detection | F1 |
| similarity search, top-k | precision@k |
| sorting | Kendall's τ over the pairs from different ground-truth cohorts |

Every function takes the parsed answer and the gold and returns a float; an answer that does
not parse is scored by the caller (``None`` -> the task's worst score, :data:`WORST`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations


def precision_at_k(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> float:
    """``|P ∩ T| / k`` with ``k = |T|``; extra predictions beyond k are cut (first k kept)."""
    k = len(truth)
    if k == 0:
        raise ValueError("precision_at_k: empty truth")
    seen: list[Hashable] = []
    for p in predicted:
        if p not in seen:
            seen.append(p)
    return len(set(seen[:k]) & set(truth)) / k


def accuracy(predicted: Mapping[Hashable, Hashable], truth: Mapping[Hashable, Hashable]) -> float:
    """Share of the truth's items whose predicted label equals the true one (missing = wrong)."""
    if not truth:
        raise ValueError("accuracy: empty truth")
    return sum(predicted.get(k) == v for k, v in truth.items()) / len(truth)


def rand_index(
    predicted: Sequence[Sequence[Hashable]], truth: Sequence[Sequence[Hashable]]
) -> float:
    """Rand index of two partitions given as lists of clusters of items.

    Items of the truth missing from the prediction each count as a singleton cluster; items
    only in the prediction are ignored.
    """
    true_of = {x: i for i, c in enumerate(truth) for x in c}
    pred_of = {x: i for i, c in enumerate(predicted) for x in c if x in true_of}
    for j, x in enumerate(x for x in true_of if x not in pred_of):
        pred_of[x] = ("missing", j)
    items = sorted(true_of, key=str)
    pairs = list(combinations(items, 2))
    if not pairs:
        raise ValueError("rand_index: fewer than two items")
    agree = sum((true_of[a] == true_of[b]) == (pred_of[a] == pred_of[b]) for a, b in pairs)
    return agree / len(pairs)


def hajek_ate(
    treated: Sequence[int], outcome: Sequence[float], propensity: Sequence[float]
) -> float:
    """Hajek (self-normalised) inverse-propensity-weighted average treatment effect.

    ``sum(T Y / e) / sum(T / e) - sum((1-T) Y / (1-e)) / sum((1-T) / (1-e))``.
    """
    if not (len(treated) == len(outcome) == len(propensity)) or not treated:
        raise ValueError("hajek_ate: treated, outcome and propensity must be equal and non-empty")
    if any(not 0.0 < e < 1.0 for e in propensity):
        raise ValueError("hajek_ate: every propensity must lie strictly between 0 and 1")
    w1 = [t / e for t, e in zip(treated, propensity, strict=True)]
    w0 = [(1 - t) / (1 - e) for t, e in zip(treated, propensity, strict=True)]
    if sum(w1) == 0 or sum(w0) == 0:
        raise ValueError("hajek_ate: needs treated and untreated patients")
    m1 = sum(w * y for w, y in zip(w1, outcome, strict=True)) / sum(w1)
    m0 = sum(w * y for w, y in zip(w0, outcome, strict=True)) / sum(w0)
    return m1 - m0


def stratum_propensity(treated: Sequence[int], stratum: Sequence[Hashable]) -> list[float]:
    """Propensity as the treated share within each stratum (the saturated model of a discrete
    confounder)."""
    n: dict[Hashable, int] = {}
    t: dict[Hashable, int] = {}
    for ti, s in zip(treated, stratum, strict=True):
        n[s] = n.get(s, 0) + 1
        t[s] = t.get(s, 0) + int(ti)
    return [t[s] / n[s] for s in stratum]


def absolute_error(predicted: float, truth: float) -> float:
    """``|predicted - truth|`` (the IPW task's score: lower is better)."""
    if math.isnan(predicted) or math.isnan(truth):
        raise ValueError("absolute_error: NaN")
    return abs(predicted - truth)


def f1(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> float:
    """F1 of a predicted set against a true set (both empty -> 1.0)."""
    p, t = set(predicted), set(truth)
    if not p and not t:
        return 1.0
    tp = len(p & t)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(p), tp / len(t)
    return 2 * precision * recall / (precision + recall)


def kendall_tau_between(predicted: Sequence[Hashable], cohort_of: Mapping[Hashable, int]) -> float:
    """Kendall's τ between a predicted ranking (first = highest) and the true cohort ranks,
    over the pairs of items from different ground-truth cohorts only.

    ``cohort_of[x]`` is the true rank of x's cohort (higher = ranked first). Pairs from one
    cohort have no true order and are skipped; so every counted pair is untied in the truth and
    τ = (concordant - discordant) / pairs. Items missing from the prediction are placed last, in
    one tie (a pair of two missing items counts as neither).
    """
    pos = {x: i for i, x in enumerate(dict.fromkeys(p for p in predicted if p in cohort_of))}
    last = len(pos)
    items = sorted(cohort_of, key=str)
    conc = disc = pairs = 0
    for a, b in combinations(items, 2):
        if cohort_of[a] == cohort_of[b]:
            continue
        pairs += 1
        pa, pb = pos.get(a, last), pos.get(b, last)
        if pa == pb:
            continue
        truth_a_first = cohort_of[a] > cohort_of[b]
        conc += truth_a_first == (pa < pb)
        disc += truth_a_first != (pa < pb)
    if not pairs:
        raise ValueError("kendall_tau_between: every item is in one cohort")
    return (conc - disc) / pairs
