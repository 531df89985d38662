"""The judge audit: how far a judge agrees with deterministic gold (MedMemoryBench
§6 "Response Quality and Hallucination Analysis" and its appendix Table 5, which measures its
judge against human labels with agreement, Cohen's κ, precision, recall and F1).

The kit has what the seed lacked: questions whose correctness a deterministic scorer decides
(T1–T9's parsers; the trap S / O types). :func:`judge_audit` sets a judge's verdicts
(:func:`clinlib.eval.judge.scoring.judge_predictions`) against that scorer's ``correct`` per task and
judge backbone, so a reader knows how far to trust the judge where no gold exists. The
deterministic scorer is the reference ("truth"), the judge the rater; "positive" = correct.

:func:`labelled_audit` is the audit the seed ran (§6, Table 5: free-text answers of the four
judged types against human labels): the judge against the shipped labelled set
(:mod:`clinlib.eval.judge.audit_set`), text against text, never a letter against a letter.

The statistics are pure functions (:func:`cohen_kappa`, :func:`binary_prf`), checked against
scikit-learn in the tests. :func:`overlap_scores` adds the answer-overlap metrics (token-F1,
ROUGE-L) per prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.analysis.stats.cluster import CLUSTER_COLUMN, cluster_bootstrap_ci, with_clusters
from clinlib.analysis.stats.question import wilson_ci
from clinlib.eval.judge.prompts import MCD_CRITERIA
from clinlib.eval.judge.scoring import KEY_COLUMNS, gold_text_of, judge_predictions
from clinlib.tasks.answers.overlap import rouge_l, token_f1
from clinlib.tasks.traps.reference import REFERENCE_COLUMNS

AUDIT_COLUMNS: tuple[str, ...] = (
    "judge_backbone",
    "task",
    "n",
    "n_patients",
    "agreement",
    "agree_q_low",
    "agree_q_high",
    "agree_boot_low",
    "agree_boot_high",
    "kappa",
    "precision",
    "recall",
    "f1",
    "judge_rate",
    "gold_rate",
    "parse_failed",
)
N_BOOT = 1000
ALL = "all"


def _binary(values: Sequence) -> np.ndarray:
    return np.asarray(pd.Series(values).astype(bool), dtype=bool)


def cohen_kappa(truth: Sequence, rater: Sequence) -> float:
    """Cohen's κ of two binary raters: (p_o - p_e) / (1 - p_e); NaN when p_e = 1 (both
    constant and equal: κ undefined) or no rows."""
    a, b = _binary(truth), _binary(rater)
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels vs {len(b)}")
    if not len(a):
        return float("nan")
    po = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    pe = pa * pb + (1 - pa) * (1 - pb)
    return float("nan") if pe == 1 else (po - pe) / (1 - pe) + 0.0  # + 0.0: no -0.0


def binary_prf(truth: Sequence, rater: Sequence) -> tuple[float, float, float]:
    """(precision, recall, F1) of ``rater`` against ``truth`` with True as the positive class;
    NaN where a denominator is zero (no predicted / no true positives)."""
    a, b = _binary(truth), _binary(rater)
    tp = float(np.sum(a & b))
    pp, ap = float(b.sum()), float(a.sum())
    precision = tp / pp if pp else float("nan")
    recall = tp / ap if ap else float("nan")
    f1 = 2 * tp / (pp + ap) if pp + ap else float("nan")
    return precision, recall, f1


def _row(g: pd.DataFrame, verdict: str) -> dict:
    truth, rater = g["correct"], g[verdict]
    p, r, f = binary_prf(truth, rater)
    agree = (_binary(truth) == _binary(rater)).astype(float)
    q_low, q_high = wilson_ci(int(agree.sum()), len(agree))
    boot = cluster_bootstrap_ci(agree, g[CLUSTER_COLUMN], n_boot=N_BOOT)
    return {
        "n": len(g),
        "n_patients": int(g[CLUSTER_COLUMN].nunique()),
        "agreement": float(agree.mean()),
        "agree_q_low": float(q_low),
        "agree_q_high": float(q_high),
        "agree_boot_low": boot.low,
        "agree_boot_high": boot.high,
        "kappa": cohen_kappa(truth, rater),
        "precision": p,
        "recall": r,
        "f1": f,
        "judge_rate": float(_binary(rater).mean()),
        "gold_rate": float(_binary(truth).mean()),
        "parse_failed": float(g["parse_failed"].mean()) if "parse_failed" in g else np.nan,
    }


def audit_frame(
    judged: pd.DataFrame, predictions: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame:
    """The judged rows with the deterministic scorer's ``correct`` and the question's patient
    cluster (:func:`clinlib.analysis.stats.cluster.with_clusters`: its first patient)."""
    keys = [c for c in (*KEY_COLUMNS, "prep_model") if c in judged and c in predictions]
    merged = judged.merge(
        predictions[[*keys, "correct"]], on=keys, how="inner", validate="many_to_one"
    )
    if len(merged) != len(judged):
        raise ValueError(
            f"judge audit: {len(judged) - len(merged)} judged row(s) have no "
            "prediction with a deterministic 'correct'"
        )
    return with_clusters(merged, questions)


def judge_audit(
    judged: pd.DataFrame,
    predictions: pd.DataFrame,
    questions: pd.DataFrame,
    *,
    lenient: bool = False,
) -> pd.DataFrame:
    """Agreement of each judge backbone with the deterministic scorer, per task and overall.

    Args:
        judged: :func:`clinlib.eval.judge.scoring.judge_predictions` rows (one or more judges).
        predictions: the same predictions with the scorer's ``correct``.
        questions: their questions (qid, subject_ids: the patient clusters).
        lenient: audit ``verdict_lenient`` instead of the strict ``verdict``.

    Returns:
        :data:`AUDIT_COLUMNS`, one row per (judge_backbone, task) plus task ``all``:
        agreement with its question-level Wilson interval (``agree_q_*``) and the
        patient-clustered bootstrap one (``agree_boot_*``), κ, precision / recall / F1 of a
        "correct" verdict, the rates of "correct" by judge and by scorer, parse failures.
    """
    merged = audit_frame(judged, predictions, questions)
    verdict = "verdict_lenient" if lenient else "verdict"
    rows = []
    for judge, g in merged.groupby("judge_backbone", sort=True):
        for task, t in g.groupby("task", sort=True):
            rows.append({"judge_backbone": judge, "task": task, **_row(t, verdict)})
        rows.append({"judge_backbone": judge, "task": ALL, **_row(g, verdict)})
    return pd.DataFrame(rows, columns=list(AUDIT_COLUMNS))


def overlap_scores(predictions: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per prediction: token-F1 and ROUGE-L of the response against the reference answer
    (:func:`clinlib.eval.judge.scoring.gold_text_of`); columns key columns, task, token_f1, rouge_l."""
    by_qid = {str(q["qid"]): q for q in questions.to_dict("records")}
    refs = [gold_text_of(by_qid[str(q)]) for q in predictions["qid"]]
    responses = predictions["response"].fillna("").astype(str).tolist()
    keys = [c for c in (*KEY_COLUMNS, "task") if c in predictions]
    out = predictions[keys].copy()
    out["token_f1"] = [token_f1(r, g) for r, g in zip(responses, refs, strict=True)]
    out["rouge_l"] = [rouge_l(r, g) for r, g in zip(responses, refs, strict=True)]
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- labelled audit

AUDIT_STRATEGY, AUDIT_BACKBONE, AUDIT_SETTING = "audit", "labelled", "audit"


def labelled_questions(pairs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The audit set (:func:`clinlib.eval.judge.audit_set.load_audit_set`) as judge input:
    (questions with their reference material, predictions whose ``correct`` is the label)."""
    questions = pd.DataFrame(
        {
            "qid": pairs["pair_id"],
            "task": pairs["task"],
            "question": pairs["question"],
            "gold": pairs["reference"],
            "gold_text": pairs["reference"],
            "options": [[] for _ in range(len(pairs))],
            "subject_ids": [[int(s)] for s in pairs["subject_id"]],
            "judge_criteria": [
                list(MCD_CRITERIA) if t == "MCD" else ["correct"] for t in pairs["task"]
            ],
            **{c: pairs[c] for c in REFERENCE_COLUMNS},
        }
    )
    predictions = pd.DataFrame(
        {
            "qid": pairs["pair_id"],
            "strategy": AUDIT_STRATEGY,
            "backbone": AUDIT_BACKBONE,
            "setting": AUDIT_SETTING,
            "task": pairs["task"],
            "response": pairs["answer"],
            "correct": pairs["verdict"].astype(bool),
        }
    )
    return questions, predictions


def labelled_audit(
    pairs: pd.DataFrame,
    judge_backbone: str,
    *,
    profile: str | None = None,
    lenient: bool = False,
    calls: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judge every labelled pair with ``judge_backbone`` and audit the verdicts against the
    labels (text against text: the answer and the reference are both free text).

    Returns:
        (:func:`judge_audit` table per type and ``all``, one row per pair: pair_id, task,
        kind, label, verdict, agree).
    """
    questions, predictions = labelled_questions(pairs)
    judged = judge_predictions(questions, predictions, judge_backbone, profile=profile, calls=calls)
    return audit_of_verdicts(pairs, judged, lenient=lenient)


def audit_of_verdicts(
    pairs: pd.DataFrame, judged: pd.DataFrame, *, lenient: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`labelled_audit`'s (table, rows) from a judge's verdicts on the labelled pairs
    (``judged``: qid = pair_id, judge_backbone, verdict, verdict_lenient, parse_failed), fresh
    or stored (:data:`VERDICT_COLUMNS`, :func:`clinlib.eval.judge.audit_set.load_verdicts`).

    Raises:
        ValueError: the verdicts do not cover every pair exactly once.
    """
    questions, predictions = labelled_questions(pairs)
    have = judged["qid"].astype(str)
    if sorted(have) != sorted(pairs["pair_id"].astype(str)):
        raise ValueError(
            f"judge audit: {len(judged)} verdict(s) for {len(pairs)} labelled pairs "
            "(each pair needs exactly one)"
        )
    tasks = pairs[["pair_id", "task"]].rename(columns={"pair_id": "qid"})
    judged = judged.drop(columns=["task"], errors="ignore").merge(tasks, on="qid", how="left")
    judged = judged.assign(strategy=AUDIT_STRATEGY, backbone=AUDIT_BACKBONE, setting=AUDIT_SETTING)
    judged = judged.set_index("qid").loc[pairs["pair_id"]].reset_index()
    table = judge_audit(judged, predictions, questions, lenient=lenient)
    verdict = "verdict_lenient" if lenient else "verdict"
    rows = pairs[["pair_id", "task", "kind", "answer", "reference"]].assign(
        label=pairs["verdict"].astype(bool).to_numpy(),
        verdict=judged[verdict].astype(bool).to_numpy(),
        parse_failed=judged["parse_failed"].astype(bool).to_numpy(),
    )
    rows["agree"] = rows["label"] == rows["verdict"]
    return table, rows.reset_index(drop=True)


def agreement_by_kind(rows: pd.DataFrame) -> pd.DataFrame:
    """Share of pairs the judge gets right per (task, kind) of :func:`labelled_audit` rows:
    where a judge fails (a lexical judge: paraphrases rejected, hedges and contradictions
    accepted)."""
    return rows.pivot_table(index="kind", columns="task", values="agree", aggfunc="mean")
