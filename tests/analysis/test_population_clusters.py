"""Clustered intervals of population scores (issue 29): the group-clustered and question-level
intervals against statsmodels, the shared-patient interval by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from clinlib.analysis.population import clustered_scoreboard

Z = 1.959963984540054


def _frames():
    # three questions (groups) x two renderings; q1 and q2 share patient 2, q3 shares none
    questions = pd.DataFrame({"qid": ["q1", "q2", "q3"],
                              "subject_ids": [[1, 2], [2, 3], [4, 5]]})  # fmt: skip
    scores = {"q1": (1.0, 0.8), "q2": (0.4, 0.2), "q3": (0.9, 0.5)}
    preds = pd.DataFrame([{"qid": q, "rendering": r, "task": "P-SRT", "backbone": "b", "score": s}
                          for q, pair in scores.items()
                          for r, s in zip(("codes", "codebook"), pair, strict=True)])  # fmt: skip
    return preds, questions


def test_pooled_intervals_match_statsmodels_and_hand():
    preds, questions = _frames()
    board = clustered_scoreboard(preds, questions).set_index("rendering")
    row = board.loc["all"]
    y = preds["score"].to_numpy()
    assert row["n"] == 6 and row["n_groups"] == 3 and row["score"] == pytest.approx(y.mean())
    ones = np.ones((6, 1))
    hc1 = sm.OLS(y, ones).fit(cov_type="HC1").bse[0]
    assert row["q_high"] - row["score"] == pytest.approx(Z * hc1)
    cr1 = sm.OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": np.repeat([0, 1, 2], 2)})
    assert row["group_high"] - row["score"] == pytest.approx(Z * cr1.bse[0])
    # by hand: rows of q1 and q2 are linked (patient 2), q3's rows only to each other
    e = y - y.mean()
    linked = np.kron(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]]), np.ones((2, 2)))
    se = np.sqrt(e @ linked @ e) / 6
    assert row["patient_high"] - row["score"] == pytest.approx(Z * se)
    assert row["pair_overlap"] == pytest.approx((linked.sum() - 6) / 30)


def test_per_rendering_rows_and_unscored():
    preds, questions = _frames()
    preds.loc[0, "score"] = np.nan  # an ATE-style unscored reply
    board = clustered_scoreboard(preds, questions).set_index("rendering")
    assert board.loc["codes", "n"] == 2 and board.loc["codes", "n_unscored"] == 1
    assert board.loc["codebook", "n_groups"] == 3
    # one row per group in a rendering: group-clustered == question-level
    assert board.loc["codebook", "group_low"] == pytest.approx(board.loc["codebook", "q_low"])


def test_scoreboard_carries_the_per_rendering_intervals():
    from clinlib.analysis.population import scoreboard

    preds, questions = _frames()
    preds = preds.assign(score_lenient=preds["score"], parse_failed=False)
    board = scoreboard(preds, questions).set_index("rendering")
    cl = clustered_scoreboard(preds, questions).set_index("rendering")
    for r in ("codes", "codebook"):
        assert board.loc[r, "group_high"] == cl.loc[r, "group_high"]
        assert board.loc[r, "score"] == pytest.approx(cl.loc[r, "score"])
    assert "group_low" not in scoreboard(preds).columns
