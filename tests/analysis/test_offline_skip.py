"""The analysis notebooks' shared start asks the harness only when an offline-reader key is
missing: a no-op run re-reads every stored prediction twice (seconds per notebook on paper),
so :func:`clinlib.analysis.offline_run.offline_predictions` checks the keys first."""

from __future__ import annotations

import pandas as pd

from clinlib.analysis import offline_run
from clinlib.analysis.offline_run import missing_keys, offline_predictions

STRATS = ["full-context", "mem0"]  # mem0 uses a prep model, full-context none


def _questions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qid": ["Q1", "Q2", "Q3"],
            "task": ["T1", "T2", "T3"],
            "subject_ids": [[1], [2], [3]],
            "gold": ["a", "b", "yes"],
        }
    )


def _stored() -> pd.DataFrame:
    """Every key: 3 questions post + Q3 (T3) pre, x 2 strategies x 2 readers = 16 rows."""
    rows = [
        {
            "qid": q,
            "task": t,
            "strategy": s,
            "backbone": b,
            "prep_model": "rule-based" if s == "mem0" else "none",
            "setting": st,
            "correct": True,
        }
        for b in ("reference", "eager")
        for s in STRATS
        for st in ("post", "pre")
        for q, t in (("Q1", "T1"), ("Q2", "T2"), ("Q3", "T3"))
        if st == "post" or t == "T3"
    ]
    return pd.DataFrame(rows)


def test_missing_keys_counts_what_a_run_would_ask():
    stored, q = _stored(), _questions()
    assert len(stored) == 16
    assert missing_keys(stored, q, STRATS) == 0
    assert missing_keys(stored.iloc[1:], q, STRATS) == 1  # reference/full-context/Q1/post
    # counterexample: mem0 built by an LLM prep model is another key to the harness; a run
    # with the default rule-based prep would ask all 8 mem0 keys again
    llm = stored.assign(prep_model=stored["prep_model"].replace("rule-based", "gpt-4o-mini"))
    assert missing_keys(llm, q, STRATS) == 8
    assert missing_keys(stored, q, [*STRATS, "a-mem"]) == 8  # 4 keys per reader


def test_offline_predictions_runs_only_when_a_key_is_missing(monkeypatch):
    store = {"rows": _stored().iloc[1:]}
    calls = []

    def fake_run(spec, options):
        calls.append(list(spec.strategies))
        store["rows"] = _stored()

    monkeypatch.setattr(offline_run, "run", fake_run)
    monkeypatch.setattr(offline_run, "load_predictions", lambda name: store["rows"])
    monkeypatch.setattr(offline_run, "load", lambda what, name: _questions())
    kit = offline_predictions("quick", STRATS)
    assert calls == [STRATS] and len(kit.stored) == 16  # missing one: run, then read again
    kit = offline_predictions("quick", STRATS)
    assert calls == [STRATS] and len(kit.stored) == 16  # nothing missing: no second run
