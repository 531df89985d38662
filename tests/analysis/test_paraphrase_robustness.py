"""Paraphrase robustness statistics (clinlib.analysis.paraphrase_robustness) against counts
and formulas worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from clinlib.analysis.paraphrase_robustness import (
    homogeneity,
    robustness_table,
    task_tables,
    wording_pairs,
)

# per task: (both correct, template only, paraphrase only, both wrong)
COUNTS = {"T1": (6, 4, 1, 3), "T2": (2, 1, 5, 2), "T3": (5, 2, 2, 3)}


def _pairs() -> pd.DataFrame:
    rows, k = [], 0
    for task, (both, t_only, p_only, none) in COUNTS.items():
        for t, p, n in ((1, 1, both), (1, 0, t_only), (0, 1, p_only), (0, 0, none)):
            for _ in range(n):
                rows.append(
                    {"task": task, "cluster": k, "template": bool(t), "paraphrase": bool(p)}
                )
                k += 1  # one question per patient: the clustered se is the plain paired se
    return pd.DataFrame(rows)


def test_per_task_accuracies_and_discordant_pairs():
    table = robustness_table(_pairs()).set_index("task")
    for task, (both, t_only, p_only, none) in COUNTS.items():
        n = both + t_only + p_only + none
        row = table.loc[task]
        assert row["n"] == n
        assert row["acc_template"] == pytest.approx((both + t_only) / n)
        assert row["acc_paraphrase"] == pytest.approx((both + p_only) / n)
        assert row["diff"] == pytest.approx((p_only - t_only) / n)
        assert (row["template_only"], row["paraphrase_only"]) == (t_only, p_only)
        exact = sps.binomtest(min(t_only, p_only), t_only + p_only, 0.5).pvalue
        assert row["mcnemar_p"] == pytest.approx(min(1.0, exact))
        d = np.array([-1.0] * t_only + [1.0] * p_only + [0.0] * (both + none))
        se = np.sqrt(n / (n - 1) * np.sum((d - d.mean()) ** 2)) / n  # CR1, one per cluster
        assert row["diff_hi"] - row["diff"] == pytest.approx(1.959963984540054 * se)


def test_homogeneity_by_hand():
    out = homogeneity(_pairs()).set_index("test")
    disc = np.array([[4, 1], [1, 5], [2, 2]], dtype=float)
    expected = disc.sum(1, keepdims=True) * disc.sum(0, keepdims=True) / disc.sum()
    chi2 = ((disc - expected) ** 2 / expected).sum()
    row = out.loc["discordant-direction chi-square (paired)"]
    assert row["statistic"] == pytest.approx(chi2) and row["df"] == 2
    assert row["p_value"] == pytest.approx(sps.chi2.sf(chi2, 2))
    # CMH without continuity correction: (sum a - sum E[a])^2 / sum Var(a)
    num, var = 0.0, 0.0
    for t in task_tables(_pairs()).values():
        n = t.sum()
        r1, c1 = t[0].sum(), t[:, 0].sum()
        num += t[0, 0] - r1 * c1 / n
        var += r1 * (n - r1) * c1 * (n - c1) / (n**2 * (n - 1))
    cmh = out.loc["Cochran-Mantel-Haenszel (no wording effect)"]
    assert cmh["statistic"] == pytest.approx(num**2 / var)
    assert cmh["p_value"] == pytest.approx(sps.chi2.sf(num**2 / var, 1))


def test_one_sided_discordance_is_homogeneous():
    pairs = _pairs()
    pairs.loc[~pairs["template"] & pairs["paraphrase"], "paraphrase"] = False
    row = homogeneity(pairs).iloc[0]
    assert row["statistic"] == 0.0 and row["p_value"] == 1.0


def test_wording_pairs_keep_accepted_paraphrases_only():
    keys = {"strategy": "s", "backbone": "b", "prep_model": "none", "setting": "post"}
    t = pd.DataFrame([{"qid": q, "task": "T1", "correct": c, **keys}
                      for q, c in (("a", True), ("b", True), ("c", False))])  # fmt: skip
    p = pd.DataFrame([{"qid": q, "task": "T1", "correct": c, **keys}
                      for q, c in (("a", False), ("b", True), ("c", True))])  # fmt: skip
    log = pd.DataFrame({"qid": ["a", "b", "c"], "accepted": [True, False, True]})
    qs = pd.DataFrame({"qid": ["a", "b", "c"], "subject_ids": [[7], [7], [8]]})
    pairs = wording_pairs(t, p, log, qs)
    assert pairs["qid"].tolist() == ["a", "c"]
    assert pairs["cluster"].tolist() == [7, 8]
    assert pairs[["template", "paraphrase"]].values.tolist() == [[True, False], [False, True]]
