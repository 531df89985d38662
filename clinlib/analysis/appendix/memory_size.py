"""Fig. 15D (paper Appendix C.3, §6 "Memory size ≠ accuracy"): a memory's size vs the
patient's accuracy under that memory, with Pearson r and its Fisher-z CI
(:func:`clinlib.analysis.stats.pearson`; the paper: r = −0.129 on 210 patients for Mem0 size
vs Mem0 T1 accuracy).
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis import metrics, stats
from clinlib.analysis.metrics.common import MetricsInputError, require


def size_vs_accuracy(
    footprints: pd.DataFrame,
    preds: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    strategy: str = "mem0",
    task: str = "T1",
    size_col: str = "memory_chars",
    backbone: str | None = None,
) -> pd.DataFrame:
    """Per patient: the memory's size and the accuracy on ``task`` answered from it.

    Args:
        footprints: one row per (patient, strategy) with ``subject_id``, ``strategy`` and
            ``size_col`` (``clinlib.strategies.views.footprint_table``).
        preds: predictions (post setting is used).
        questions: questions.parquet (for ``subject_ids``).
        strategy, task: the memory and the task (the paper: Mem0, T1).
        size_col: the size measure (characters of all memories, the paper's "total size").
        backbone: keep one backbone (default: all backbones' answers pooled per patient).

    Returns:
        subject_id, size, n, accuracy — patients with both a memory and a question.
    """
    require(footprints, ["subject_id", "strategy", size_col], "size_vs_accuracy (footprints)")
    rows = preds[(preds["strategy"] == strategy) & (preds["task"] == task)]
    if "setting" in rows.columns:
        rows = rows[rows["setting"] == "post"]
    if backbone is not None:
        rows = rows[rows["backbone"] == backbone]
    if rows.empty:
        raise MetricsInputError(f"size_vs_accuracy: no post predictions of {strategy!r} on {task}")
    acc = metrics.by_group(rows, "patient", cell=("strategy",), questions=questions)
    size = footprints[footprints["strategy"] == strategy][["subject_id", size_col]]
    if size["subject_id"].duplicated().any():
        raise MetricsInputError(f"size_vs_accuracy: several {strategy!r} footprints for a patient")
    out = acc.astype({"subject_id": "int64"}).merge(
        size.astype({"subject_id": "int64"}), on="subject_id", how="inner"
    )
    out = out.rename(columns={size_col: "size"})
    return out[["subject_id", "size", "n", "accuracy"]].reset_index(drop=True)


def size_accuracy_r(per_patient: pd.DataFrame, alpha: float = 0.05) -> stats.PearsonResult:
    """Pearson r (Fisher-z CI) of size vs accuracy over patients."""
    require(per_patient, ["size", "accuracy"], "size_accuracy_r")
    return stats.pearson(per_patient["size"], per_patient["accuracy"], alpha=alpha)
