"""Visit cloze scored by insertion position (LongMedBench "Temporal reasoning", Table 3: "The
agent must insert each event back to its original position", scored by Kendall's tau against
"the original event streams"). The scores are :mod:`clinlib.tasks.answers.insertion`'s; this
module applies them to T10 visit-cloze predictions.

* :func:`cloze_scores` — per prediction: the insertion answer read from the response, its
  insertion tau (the score), the share of events in their own gap, and the previous score
  (Kendall's tau over the removed events' letters, the predictions' ``score``) as
  ``order_tau``.
* :func:`with_insertion_score` — the predictions with each visit-cloze row's ``score`` set to
  its insertion tau (``order_tau`` keeps the previous score), so every Table 3 view scores the
  cloze as the seed does.
* :func:`cloze_table` — the three scores' means per reader and strategy.
"""

from __future__ import annotations

import json

import pandas as pd

from clinlib.analysis.metrics import MetricsInputError
from clinlib.tasks.answers.insertion import insertion_exact, insertion_tau, parse_insertion

SUBTYPE = "visit_cloze"


def _golds(questions: pd.DataFrame, qids: set) -> dict[str, tuple[str, int, int]]:
    """qid -> (gold insertion, number of remaining lines, number of items)."""
    out = {}
    rows = questions[questions["qid"].isin(qids)]
    for qid, meta, options in zip(rows["qid"], rows["meta"], rows["options"], strict=True):
        m = json.loads(meta)
        if "insertion" not in m:
            raise MetricsInputError(
                f"cloze_scores: question {qid!r} has no meta.insertion (built before the "
                "cloze asked for positions): run `clintrace questions` again"
            )
        out[qid] = (str(m["insertion"]), int(m["n_lines"]), len(options))
    missing = sorted(qids - set(out))
    if missing:
        raise MetricsInputError(f"cloze_scores: qid {missing[0]!r} is not in questions")
    return out


def cloze_scores(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """The T10 visit-cloze predictions with ``insertion`` (the parsed answer, None when it
    names no position for every item), ``insertion_tau``, ``insertion_exact`` and
    ``order_tau`` (the previous score)."""
    need = {"qid", "task", "subtype", "response", "score"}
    if not need <= set(preds.columns):
        raise MetricsInputError(f"cloze_scores: predictions lack {sorted(need - set(preds))}")
    rows = preds[(preds["task"] == "T10") & (preds["subtype"] == SUBTYPE)].copy()
    golds = _golds(questions, set(rows["qid"]))
    parsed = [
        parse_insertion(r, golds[q][2], golds[q][1])
        for r, q in zip(rows["response"], rows["qid"], strict=True)
    ]
    rows["insertion"] = parsed
    rows["insertion_tau"] = [
        insertion_tau(p, golds[q][0], golds[q][1]) for p, q in zip(parsed, rows["qid"], strict=True)
    ]
    rows["insertion_exact"] = [
        insertion_exact(p, golds[q][0]) for p, q in zip(parsed, rows["qid"], strict=True)
    ]
    rows["order_tau"] = rows["score"]
    return rows


def with_insertion_score(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """``preds`` with every visit-cloze row's ``score`` = its insertion tau and ``order_tau``
    = the previous score (NaN on the other rows)."""
    scored = cloze_scores(preds, questions)
    out = preds.copy()
    out["order_tau"] = float("nan")
    out.loc[scored.index, "order_tau"] = scored["order_tau"]
    out.loc[scored.index, "score"] = scored["insertion_tau"]
    return out


def cloze_table(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per reader and strategy on the visit cloze: n, mean insertion tau (the seed's score),
    the share of events inserted in their own gap, and the previous order-only tau.

    Returns:
        backbone, strategy, n, mean_insertion_tau, share_exact_position,
        mean_order_tau_previous.
    """
    rows = cloze_scores(preds, questions)
    if rows.empty:
        raise MetricsInputError("cloze_table: no T10 visit-cloze prediction")
    g = rows.groupby(["backbone", "strategy"])
    return g.agg(
        n=("qid", "size"),
        mean_insertion_tau=("insertion_tau", "mean"),
        share_exact_position=("insertion_exact", "mean"),
        mean_order_tau_previous=("order_tau", "mean"),
    ).reset_index()
