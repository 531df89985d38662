"""The failure explorer's "lost in representation / reading" filter (issue 27 §2): the
explorer's hand-built predictions labelled by evidence.lost_in from the contexts each strategy
showed, filtered by the pure filter, the ipywidgets explorer and the marimo app."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis import evidence
from clinlib.analysis import failures as F
from tests.analysis.test_explore_failures import (
    CONTEXTS,
    _ctx_fn,
    _dialogues,
    _load_app,
    _preds,
    _questions,
)


def _labelled() -> pd.DataFrame:
    """Q1 anchors LAB-1 (in full-context only), Q2 LAB-3 (full-context and mem0), Q3 none.
    Full-context's Q2 answer is made wrong: the one "lost in reading" prediction."""
    p = _preds()
    p.loc[(p.qid == "Q2") & (p.strategy == "full-context"), "correct"] = False
    ctx = pd.concat([
        pd.DataFrame({"qid": ["Q1", "Q2", "Q3"], "strategy": s, "setting": "post",
                      "context": CONTEXTS[s]})
        for s in CONTEXTS
    ], ignore_index=True)  # fmt: skip
    return evidence.lost_in(p, evidence.recall_of_contexts(_questions(), ctx))


def test_lost_filter_splits_wrong_answers_by_where_they_were_lost():
    p = _labelled()
    rep = F.filter_predictions(p, lost="representation")
    assert sorted(zip(rep.qid, rep.strategy, rep.backbone, strict=True)) == [
        ("Q1", "last-visit-only", "reference"),
        ("Q1", "mem0", "eager"),  # a transport error counts wrong
        ("Q1", "mem0", "reference"),
        ("Q2", "last-visit-only", "reference"),
    ]
    read = F.filter_predictions(p, lost="reading")
    assert read[["qid", "strategy"]].values.tolist() == [["Q2", "full-context"]]
    assert set(p.loc[p.qid == "Q3", "lost_in"]) == {"not measured"}  # no anchor
    assert set(p.loc[p.setting == "pre", "lost_in"]) == {"not measured"}  # not measured there
    with pytest.raises(F.FailureExplorerError, match="lost_in"):
        F.filter_predictions(_preds(), lost="reading")
    with pytest.raises(F.FailureExplorerError, match="lost 'memory'"):
        F.filter_predictions(p, lost="memory")


def test_widget_offers_the_lost_filter_when_predictions_are_labelled():
    w = F.failure_explorer(_labelled(), _questions(), _ctx_fn, _dialogues())
    c = w.controls
    assert not c["lost"].disabled
    c["lost"].value = "reading"
    assert "<b>1</b> of 14" in c["count"].value
    c["lost"].value = "representation"
    assert "<b>4</b> of 14" in c["count"].value and "ABSENT" in c["body"].value
    plain = F.failure_explorer(_preds(), _questions(), _ctx_fn, _dialogues())
    assert plain.controls["lost"].disabled


def test_marimo_app_filters_labelled_predictions():
    data = {"preds": _labelled(), "questions": _questions(), "dialogues": _dialogues(),
            "context_fn": _ctx_fn}  # fmt: skip
    _, defs = _load_app().run(defs={"data": data, "problem": "", "profile": "fixture"})
    assert defs["lost"].value == "any" and len(defs["rows"]) == 8  # incorrect, any loss
    assert defs["labelled"](data["preds"]) is data["preds"]  # already labelled: no rebuild
