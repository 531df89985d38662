"""Paraphrase robustness: accuracy on the template wording vs the paraphrased wording of the
same questions, per task, with homogeneity tests (paper Fig. 2 stage 4: questions paraphrased
from templates; the kit measures whether the wording moves accuracy).

Each question kept in both wordings (``question_paraphrases.parquet``: accepted) is answered
twice by the same (strategy, backbone, setting) cell: once in the template profile, once in the
paraphrase variant (:mod:`clinlib.eval.synthesis.paraphrase`); the pairs share the qid. Statistics
(pure functions):

* per task: the two accuracies, their paired difference with a patient-clustered CR1 interval
  (:func:`clinlib.analysis.stats.cluster.paired_cluster_robust`; questions of one patient are
  not independent) and McNemar's test on the discordant pairs (:func:`clinlib.analysis.stats.mcnemar`);
* across tasks, :func:`homogeneity`: (a) the paired homogeneity test: a chi-square test on the
  tasks x (template-only correct, paraphrase-only correct) table of discordant pairs (is the
  direction of the wording effect the same in every task? scipy ``chi2_contingency``); (b) the
  Cochran-Mantel-Haenszel test of no wording effect and the Breslow-Day test of equal odds
  ratios over the per-task 2 x 2 tables (statsmodels ``StratifiedTable``), which treat the two
  wordings as independent samples (they are paired: (a) and McNemar are the paired tests).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency
from statsmodels.stats.contingency_tables import StratifiedTable

from clinlib.analysis.meaning import clip_interval
from clinlib.analysis.stats.cluster import paired_cluster_robust, with_clusters
from clinlib.analysis.stats.question import StatsInputError, mcnemar

KEYS: tuple[str, ...] = ("qid", "strategy", "backbone", "prep_model", "setting")
PAIR_COLUMNS: tuple[str, ...] = (*KEYS, "task", "cluster", "template", "paraphrase")
Z95 = 1.959963984540054


def wording_pairs(
    template: pd.DataFrame,
    paraphrased: pd.DataFrame,
    paraphrases: pd.DataFrame,
    questions: pd.DataFrame,
) -> pd.DataFrame:
    """One row per (question, cell) answered in both wordings, for kept paraphrases only.

    Args:
        template / paraphrased: predictions (KEYS, task, correct) of the template profile and
            of the paraphrase variant.
        paraphrases: ``question_paraphrases.parquet`` (qid, accepted).
        questions: the template questions (qid, subject_ids) for the patient clusters.

    Returns:
        :data:`PAIR_COLUMNS`; ``template`` / ``paraphrase`` are the two correctness flags.
    """
    kept = set(paraphrases.loc[paraphrases["accepted"].astype(bool), "qid"])
    a = template[template["qid"].isin(kept)][[*KEYS, "task", "correct"]]
    b = paraphrased[paraphrased["qid"].isin(kept)][[*KEYS, "correct"]]
    pairs = a.merge(b, on=list(KEYS), suffixes=("_t", "_p"), validate="one_to_one")
    pairs = with_clusters(pairs, questions)
    out = pairs.rename(columns={"correct_t": "template", "correct_p": "paraphrase"})
    for col in ("template", "paraphrase"):
        out[col] = out[col].astype(bool)
    return out[list(PAIR_COLUMNS)].reset_index(drop=True)


def robustness_table(pairs: pd.DataFrame, by: tuple[str, ...] = ("task",)) -> pd.DataFrame:
    """Accuracy per wording and its paired difference, per group of ``by``.

    Returns:
        by columns, n, n_patients, acc_template, acc_paraphrase, diff (paraphrase - template),
        diff_lo / diff_hi (patient-clustered CR1 95% interval, clipped to [−1, 1]), template_only /
        paraphrase_only (discordant pairs), mcnemar_p.
    """
    if pairs.empty:
        raise StatsInputError("robustness_table: no question answered in both wordings")
    rows = []
    for key, g in pairs.groupby(list(by), sort=True):
        t, p = g["template"].to_numpy(bool), g["paraphrase"].to_numpy(bool)
        cr = paired_cluster_robust(p.astype(float), t.astype(float), g["cluster"].to_numpy())
        mc = mcnemar(t, p)
        key = key if isinstance(key, tuple) else (key,)
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "n": len(g),
                "n_patients": int(g["cluster"].nunique()),
                "acc_template": t.mean(),
                "acc_paraphrase": p.mean(),
                "diff": cr.diff,
                **dict(zip(("diff_lo", "diff_hi"), _interval(cr.diff, cr.se), strict=True)),
                "template_only": mc.b,
                "paraphrase_only": mc.c,
                "mcnemar_p": mc.p_value,
            }
        )
    return pd.DataFrame(rows)


def _interval(diff: float, se: float) -> tuple[float, float]:
    """The CR1 normal interval of a paired difference of proportions, clipped to [−1, 1]
    (no difference of proportions lies outside it)."""
    return clip_interval(diff - Z95 * se, diff + Z95 * se, "difference of proportions")


def task_tables(pairs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per task, the 2 x 2 table rows = (template, paraphrase), columns = (correct, wrong)."""
    out = {}
    for task, g in pairs.groupby("task", sort=True):
        t, p = g["template"].to_numpy(bool), g["paraphrase"].to_numpy(bool)
        out[str(task)] = np.array([[t.sum(), (~t).sum()], [p.sum(), (~p).sum()]], dtype=float)
    return out


def _direction_test(table: pd.DataFrame) -> tuple:
    """(statistic, df, p, n_tasks, note) of the discordant-direction chi-square."""
    disc = table[(table["template_only"] + table["paraphrase_only"]) > 0]
    counts = disc[["template_only", "paraphrase_only"]].to_numpy(float)
    if len(disc) < 2:
        return np.nan, np.nan, np.nan, len(disc), "fewer than two tasks with discordant pairs"
    if (counts.sum(axis=0) == 0).any():  # every discordant pair favours the same wording
        return 0.0, len(disc) - 1, 1.0, len(disc), "every discordant pair favours one wording"
    chi2, p, dof, _ = chi2_contingency(counts, correction=False)
    return float(chi2), int(dof), float(p), len(disc), ""


def homogeneity(pairs: pd.DataFrame) -> pd.DataFrame:
    """Is the wording effect the same across tasks? One row per test: test, statistic, df,
    p_value, n_tasks (tasks entering it), note. See the module docstring."""
    rows = [("discordant-direction chi-square (paired)", *_direction_test(robustness_table(pairs)))]
    # a task whose answers are all correct (or all wrong) in both wordings has no odds ratio
    tabs = [t for t in task_tables(pairs).values() if (t.sum(axis=0) > 0).all()]
    if len(tabs) >= 2:
        zeros = any((t == 0).any() for t in tabs)
        st = StratifiedTable(tabs, shift_zeros=zeros)
        cmh, bd = st.test_null_odds(correction=False), st.test_equal_odds()
        note = "treats the wordings as independent" + ("; 0.5 added to zero cells" * zeros)
        rows.append(
            (
                "Cochran-Mantel-Haenszel (no wording effect)",
                float(cmh.statistic),
                1,
                float(cmh.pvalue),
                len(tabs),
                note,
            )
        )
        rows.append(
            (
                "Breslow-Day (equal odds ratios)",
                float(bd.statistic),
                len(tabs) - 1,
                float(bd.pvalue),
                len(tabs),
                note,
            )
        )
    else:
        rows.append(
            (
                "Cochran-Mantel-Haenszel (no wording effect)",
                np.nan,
                np.nan,
                np.nan,
                len(tabs),
                "fewer than two tasks with both correct and wrong answers",
            )
        )
    cols = ["test", "statistic", "df", "p_value", "n_tasks", "note"]
    return pd.DataFrame(rows, columns=cols)
