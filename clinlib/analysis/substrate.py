"""The substrate pilot of ClinTraceBench App. G.8: the same questions answered from the dialogue
(``full-context``) and from a bare dated table of the same source events (``event-table``),
per backbone × task, with the paired accuracy gap's question-level interval beside the
patient-clustered one (:func:`clinlib.analysis.stats.cluster_tables.paired_gap`).

G.8: "the narrative relations targeted by T3, T4 and T5 were not explicitly represented in
[the table], so those tasks could not be evaluated equivalently" — their rows carry
``equivalent = False`` and stay out of the pooled ``equivalent tasks`` row. With the offline
readers (deterministic dialogue-reading policies) a gap measures how the policy reads a table,
not how a language model does.
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis.stats.cluster import with_clusters
from clinlib.analysis.stats.cluster_tables import paired_gap
from clinlib.analysis.stats.question import StatsInputError
from clinlib.strategies.event_table import NOT_EQUIVALENT_TASKS

DIALOGUE, TABLE = "full-context", "event-table"
POOLED = "equivalent tasks"


def substrate_gap(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    setting: str = "post",
    dialogue: str = DIALOGUE,
    table: str = TABLE,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy from the dialogue vs from the event table, per backbone × task.

    Returns:
        backbone, task (plus ``equivalent tasks``, the pooled rows of the tasks G.8 can
        compare), equivalent, n, n_clusters, acc_dialogue, acc_table, gap_pp (dialogue −
        table), q_low_pp / q_high_pp (question-level paired bootstrap), c_low_pp / c_high_pp
        (patient-clustered), p_mcnemar, p_cluster. Only questions answered under both.
    """
    sub = preds[(preds["setting"] == setting) & preds["strategy"].isin([dialogue, table])]
    if not {dialogue, table} <= set(sub["strategy"]):
        raise StatsInputError(
            f"substrate_gap: need {dialogue!r} and {table!r} predictions under {setting!r}; "
            f"have {sorted(set(sub['strategy']))}"
        )
    frame = with_clusters(sub.assign(correct=sub["correct"].fillna(False).astype(bool)), questions)
    eq = ~frame["task"].isin(NOT_EQUIVALENT_TASKS)
    frame = pd.concat([frame, frame[eq].assign(task=POOLED)], ignore_index=True)
    out = []
    for backbone, grp in frame.groupby("backbone", sort=True):
        both = grp.groupby(["qid", "task"])["strategy"].transform("nunique") == 2
        grp = grp[both]
        if grp.empty:  # a backbone run on other strategies (an outside or --tasks run)
            continue
        gap = paired_gap(grp, dialogue, table, by="task", n_boot=n_boot, seed=seed)
        acc = grp.groupby(["task", "strategy"])["correct"].mean().unstack()
        gap["acc_dialogue"] = gap["task"].map(acc[dialogue])
        gap["acc_table"] = gap["task"].map(acc[table])
        out.append(gap.assign(backbone=backbone))
    res = pd.concat(out, ignore_index=True)
    res["equivalent"] = ~res["task"].isin(NOT_EQUIVALENT_TASKS)
    cols = [
        "backbone",
        "task",
        "equivalent",
        "n",
        "n_clusters",
        "acc_dialogue",
        "acc_table",
        "gap_pp",
        "q_low_pp",
        "q_high_pp",
        "c_low_pp",
        "c_high_pp",
        "p_mcnemar",
        "p_cluster",
    ]
    return res[cols]
