"""Outside rows in the analysis tables: an outside system's predictions (``ext:``) and an
outside memory's (``remote-memory``), on a subset of tasks, reach the SP1-SP3 tables beside
the offline readers, labelled by their source; pairwise tests skip, with one line, the cells
that share no questions instead of failing."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from clinlib.analysis import figures as af
from clinlib.analysis import metrics
from clinlib.analysis.failures import flip_table
from clinlib.analysis.offline_run import SOURCES, OfflinePredictions, row_source
from clinlib.analysis.stats import cluster, cluster_tables
from clinlib.eval.harness.store import typed
from clinlib.strategies.registry import PAPER_STRATEGIES

TASKS = ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9")
REMOTE = "remote-memory(endpoint='http://127.0.0.1:9')"


def _questions() -> pd.DataFrame:
    rows = [
        {"qid": f"{t}-{i}", "task": t, "subject_ids": [100 + i % 4], "gold": "x"}
        for t in TASKS
        for i in range(8)
    ]
    return pd.DataFrame(rows)


def _rows(questions, strategies, backbone, tasks, seed) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for s in strategies:
        for q in questions[questions["task"].isin(tasks)].to_dict("records"):
            ok = bool(rng.random() < 0.6)
            out.append(
                {
                    "qid": q["qid"],
                    "task": q["task"],
                    "strategy": s,
                    "backbone": backbone,
                    "prep_model": "rule-based",
                    "setting": "post",
                    "correct": ok,
                    "correct_lenient": ok,
                    "score": float(ok),
                    "score_lenient": float(ok),
                    "parsed": "x" if ok else "y",
                    "parse_failed": False,
                    "empty": False,
                    "error": None,
                    "input_tokens": 10,
                    "output_tokens": 1,
                    "cost_usd": 0.0,
                    "context_tokens": 10,
                    "cached_tokens": 0,
                    "from_cache": False,
                }
            )
    return out


@pytest.fixture(scope="module")
def stored():
    qs = _questions()
    rows = []
    for i, bb in enumerate(("reference", "eager")):
        rows += _rows(qs, PAPER_STRATEGIES, bb, TASKS, i)
        rows += _rows(qs, [REMOTE], bb, ("T3",), 10 + i)  # an outside memory, T3 only
    rows += _rows(qs, ["full-context", "no-context-blind"], "ext:mine", ("T1", "T3"), 20)
    rows += _rows(qs, ["their-rag"], "ext:theirs", ("T2",), 30)  # an outside system's own label
    rows += _rows(qs, ["mem0(k=3)"], "reference", TASKS, 40)  # a variant: not in the view
    return qs, typed(pd.DataFrame(rows))


def test_every_backbone_and_outside_row_is_in_the_view_labelled_by_source(stored):
    qs, frame = stored
    view = OfflinePredictions("x", frame, pd.DataFrame(), qs, pd.DataFrame()).of(PAPER_STRATEGIES)
    by = view.groupby(["backbone", "source"]).size().to_dict()
    n = 8  # questions per task
    assert by == {
        ("eager", SOURCES["reader"]): 8 * 9 * n,
        ("eager", SOURCES["memory"]): n,
        ("ext:mine", SOURCES["outside"]): 2 * 2 * n,
        ("ext:theirs", SOURCES["outside"]): n,
        ("reference", SOURCES["reader"]): 8 * 9 * n,
        ("reference", SOURCES["memory"]): n,
    }
    assert "mem0(k=3)" not in set(view["strategy"])
    assert row_source("gpt-4o-mini", "mem0") == SOURCES["llm"]
    assert "not an LLM" in SOURCES["reader"]


def test_the_sp_tables_take_the_outside_rows(stored):
    qs, frame = stored
    view = OfflinePredictions("x", frame, pd.DataFrame(), qs, pd.DataFrame()).of(PAPER_STRATEGIES)
    post = af.post_setting(view)
    acc = metrics.accuracy_table(post, by=("strategy", "backbone", "task"))
    cells = set(zip(acc["strategy"], acc["backbone"], acc["task"], strict=True))
    want = {(REMOTE, "reference", "T3"), ("full-context", "ext:mine", "T1")}
    assert want | {("their-rag", "ext:theirs", "T2")} <= cells
    # the outside memory's T3 accuracy is its rows' share correct, worked out directly
    mine = post[(post["strategy"] == REMOTE) & (post["backbone"] == "reference")]
    got = acc[(acc["strategy"] == REMOTE) & (acc["backbone"] == "reference")]["accuracy"]
    assert got.tolist() == [pytest.approx(mine["correct"].astype(bool).mean())]
    summary = metrics.summary_rows(acc)  # pooled over every task: partial cells left out
    assert set(summary["backbone"]) == {"reference", "eager"}
    assert REMOTE not in set(summary["strategy"]) and len(summary) == 2 * 8
    with pytest.raises(metrics.MetricsInputError, match="no cell covers every task"):
        metrics.summary_rows(acc[acc["backbone"].str.startswith("ext:")])
    cluster_tables.clustered_accuracy(cluster.with_clusters(post, qs), by=("strategy", "backbone"))
    metrics.t9_decomposition(post)


def test_pairwise_tests_skip_cells_that_share_no_questions_with_one_line(stored, caplog):
    qs, frame = stored
    t3 = frame[(frame["backbone"] == "reference") & frame["strategy"].isin([REMOTE, "mem0"])]
    other = frame[(frame["backbone"] == "reference") & (frame["strategy"] == "dense-retrieval")]
    apart = pd.concat([t3[t3["strategy"] == REMOTE], other[other["task"] == "T1"]])
    with caplog.at_level(logging.WARNING, logger="clinlib.analysis"):
        table = flip_table(pd.concat([t3, other[other["task"] == "T1"]]))
    pairs = set(zip(table["good"], table["bad"], strict=True))
    assert (
        (REMOTE, "mem0") in pairs
        and ("dense-retrieval", "mem0") in pairs
        and (REMOTE, "dense-retrieval") not in pairs
    )
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "flip_table: backbone reference, setting post: 1 pair(s) share no questions and are "
        f"not tested (e.g. dense-retrieval vs {REMOTE})"
    ]
    assert flip_table(apart).empty


def test_checks_and_gaps_take_the_rows_they_name(stored, caplog):
    """The pooled-accuracy check recounts the cells a pooled row holds (an outside memory on
    T3 only is in none); the blind-full gap skips a backbone without those strategies, in a
    line; truncation counts an outside row (no finish reason) as not truncated."""
    from clinlib.analysis import headline
    from clinlib.analysis.appendix import diagnostics as dg

    qs, frame = stored
    view = OfflinePredictions("x", frame, pd.DataFrame(), qs, pd.DataFrame()).of(PAPER_STRATEGIES)
    post = af.post_setting(view)
    summary = metrics.summary_rows(
        metrics.accuracy_table(post, by=("strategy", "backbone", "task"))
    )
    (check,) = headline.pooled_checks(summary, post)
    assert check.holds and check.value == 0
    wrong = summary.assign(pooled=summary["pooled"].where(summary["strategy"] != "mem0", 0.0))
    with pytest.raises(Exception, match="equals a recount"):
        headline.pooled_checks(wrong, post)  # a wrong pooled cell still fails
    with caplog.at_level(logging.WARNING, logger="clinlib.analysis"):
        gap = cluster_tables.paired_gap(
            cluster.with_clusters(post, qs), "full-context", "no-context-blind", n_boot=50
        )
    assert gap["backbone"].tolist() == ["eager", "ext:mine", "reference"]
    assert any("ext:theirs lacks full-context" in r.getMessage() for r in caplog.records)
    trunc = dg.truncation_rate(post.assign(finish_reason=post["finish_reason"].astype("string")))
    assert trunc["n_truncated"].sum() == 0


def test_context_lift_leaves_out_a_backbone_without_the_blind_cell(stored, caplog):
    qs, frame = stored
    acc = metrics.accuracy_table(af.post_setting(frame), by=("strategy", "backbone", "task"))
    llm = pd.DataFrame(
        [
            {
                "strategy": "full-context",
                "backbone": "llm-x",
                "task": "T3",
                "n": 8,
                "k": 4,
                "accuracy": 0.5,
            }
        ]
    )
    with caplog.at_level(logging.WARNING, logger="clinlib.analysis"):
        lift = metrics.context_lift(pd.concat([acc, llm]), regimes=["full-context"])
    assert "llm-x" not in set(lift["backbone"]) and {"reference", "eager"} <= set(lift["backbone"])
    assert "1 cell(s) without a 'no-context-blind' accuracy left out" in caplog.text
    only = pd.concat([llm, llm.assign(strategy="no-context-blind", backbone="llm-y")])
    with pytest.raises(metrics.MetricsInputError, match="no 'no-context-blind' accuracy"):
        metrics.context_lift(only, regimes=["full-context"])
