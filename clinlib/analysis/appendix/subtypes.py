"""Per-task subtype diagnostics (paper Appendix B, Figs 7–12) over the kit's predictions.

Each builder takes the predictions table (docs/design.md contract) and questions.parquet and
returns a tidy frame; the strata are the question generators' own (``subtype``): T3's four
attribution classes (Y/N injected x admit/er), T5's four controlled subtypes vs its natural one,
T4's condition families, T8's seven magnitude x direction bins, T9's silent-evidence kind (lab
vs other; ``lab-unmeasured`` counts as lab, the generator's ``SUBTYPE_GROUP``). Accuracy comes
from :func:`clinlib.analysis.metrics.by_group` (Wilson CIs); T4 adds the paper's set-F1.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.analysis import metrics
from clinlib.analysis.figures import FULL
from clinlib.analysis.metrics.common import MetricsInputError, norm_label, require
from clinlib.tasks.generators.t9 import SUBTYPE_GROUP as T9_KIND

# Fig. 7's six panels (T2 / T4 / T9 have their own figures, Appendix B.1).
FIG7_TASKS: tuple[str, ...] = ("T1", "T3", "T5", "T6", "T7", "T8")
T5_NATURAL_PREFIX = "natural"


def _post(preds: pd.DataFrame) -> pd.DataFrame:
    """The post-construction rows (T3 runs in two settings; Appendix B reads post)."""
    if "setting" not in preds.columns:
        return preds
    return preds[preds["setting"] == "post"]


def subtype_accuracy(
    preds: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    tasks: Sequence[str] = FIG7_TASKS,
    strategy: str | None = FULL,
) -> pd.DataFrame:
    """Fig. 7: accuracy per (strategy, backbone, task, subtype), post setting.

    Args:
        preds: predictions (``subtype`` joined from ``questions`` when absent).
        questions: questions.parquet.
        tasks: the tasks drawn.
        strategy: keep one strategy (the paper's full-context); None keeps all.
    """
    rows = _post(preds)
    rows = rows[rows["task"].isin(list(tasks))]
    if strategy is not None:
        rows = rows[rows["strategy"] == strategy]
    if rows.empty:
        raise MetricsInputError(
            f"subtype_accuracy: no post predictions of {strategy!r} on {list(tasks)}"
        )
    cell = ("strategy", "backbone", "task")
    return metrics.by_group(rows, "subtype", cell=cell, questions=questions)


def t5_family(subtype: object) -> str:
    """T5's design axis (Appendix B.3): ``natural`` for the natural subtype, else ``controlled``."""
    return "natural" if str(subtype).startswith(T5_NATURAL_PREFIX) else "controlled"


def t5_families(preds: pd.DataFrame, questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fig. 9: T5 accuracy per (strategy, backbone, family), controlled vs natural."""
    rows = metrics.common.with_question_cols(
        metrics.common.task_rows(_post(preds), "T5", "t5_families"),
        questions,
        ["subtype"],
        "t5_families",
    )
    rows = rows.assign(family=rows["subtype"].map(t5_family))
    return metrics.accuracy_table(rows, by=("strategy", "backbone", "family"))


def t3_classes(preds: pd.DataFrame, questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fig. 8: T3 accuracy per (strategy, backbone, setting, 4-class subtype).

    Both settings are kept (``setting`` is a column): the paper's Fig. 8 is post-construction.
    """
    rows = metrics.common.task_rows(preds, "T3", "t3_classes")
    cell = ("strategy", "backbone", "setting") if "setting" in rows.columns else metrics.CELL
    return metrics.by_group(rows, "subtype", cell=cell, questions=questions)


def set_f1(parsed: object, gold: object) -> float:
    """T4's set-F1 on event ids (Appendix B.4): 2|P∩G| / (|P| + |G|); 0 for no parse.

    Ids compare case-insensitively; ``parsed`` and ``gold`` are ids joined by ``;``.
    """
    p, g = norm_label(parsed), norm_label(gold)
    if g is None:
        raise MetricsInputError("set_f1: gold is empty")
    gs = {x.strip() for x in str(g).split(";") if x.strip()}
    ps = set() if p is None else {x.strip() for x in str(p).split(";") if x.strip()}
    if not ps:
        return 0.0
    return 2 * len(ps & gs) / (len(ps) + len(gs))


def t4_retrieval(preds: pd.DataFrame, questions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Fig. 10: T4 pool composition, set-F1 per backbone under full-context, and the
    strategy x backbone set-F1 grid (post setting).

    Returns:
        ``{"pool": subtype, n; "full": backbone, n, set_f1, accuracy;
        "grid": strategy, backbone, n, set_f1, accuracy}``.
    """
    require(questions, ["qid", "task", "subtype", "gold"], "t4_retrieval (questions)")
    qs = questions[questions["task"] == "T4"]
    pool = qs.groupby("subtype").size().rename("n").reset_index()
    rows = metrics.common.task_rows(_post(preds), "T4", "t4_retrieval")
    require(rows, ["qid", "parsed", "correct", "strategy", "backbone"], "t4_retrieval")
    rows = rows.drop(columns=[c for c in ("gold",) if c in rows.columns])
    rows = rows.merge(qs[["qid", "gold"]], on="qid", how="inner")
    rows["set_f1"] = [set_f1(p, g) for p, g in zip(rows["parsed"], rows["gold"], strict=True)]
    rows["accuracy"] = rows["correct"].astype(float)
    grid = (
        rows.groupby(["strategy", "backbone"], sort=True)
        .agg(n=("qid", "size"), set_f1=("set_f1", "mean"), accuracy=("accuracy", "mean"))
        .reset_index()
    )
    full = grid[grid["strategy"] == FULL].drop(columns="strategy").reset_index(drop=True)
    return {"pool": pool, "full": full, "grid": grid}


def t8_bins(preds: pd.DataFrame, questions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Fig. 11: T8 question counts per bin and accuracy per (strategy, backbone, bin)."""
    require(questions, ["task", "subtype"], "t8_bins (questions)")
    counts = questions[questions["task"] == "T8"].groupby("subtype").size()
    rows = metrics.common.task_rows(_post(preds), "T8", "t8_bins")
    acc = metrics.by_group(rows, "subtype", questions=questions)
    return {
        "counts": counts.rename("n").rename_axis("bin").reset_index(),
        "accuracy": acc.rename(columns={"subtype": "bin"}),
    }


def t9_by_kind(
    preds: pd.DataFrame, questions: pd.DataFrame | None = None, cell: Sequence[str] = metrics.CELL
) -> pd.DataFrame:
    """Fig. 12: T9 per (cell, anchor kind): accuracy (strict abstention), abstention rate
    (strict + lenient + parser-missed, :func:`clinlib.analysis.metrics.t9_decomposition`) and
    over-answer rate when wrong (over-answers / wrong answers; empties are wrong but not
    over-answers)."""
    rows = metrics.common.with_question_cols(
        metrics.common.task_rows(_post(preds), "T9", "t9_by_kind"),
        questions,
        ["subtype"],
        "t9_by_kind",
    )
    unknown = ~rows["subtype"].isin(list(T9_KIND))
    if unknown.any():
        raise MetricsInputError(
            f"t9_by_kind: T9 subtype {rows.loc[unknown, 'subtype'].iloc[0]!r} is not one of "
            f"{sorted(T9_KIND)}"
        )
    rows = rows.assign(kind=rows["subtype"].map(T9_KIND))
    out = metrics.t9_decomposition(rows, cell=[*cell, "kind"])
    wrong = out["n"] - out["correct_abstain"]
    out["accuracy"] = out["abstention_strict"]
    out["abstention_rate"] = out["abstention_total"]
    out["over_answer_when_wrong"] = (out["over_answer"] / wrong).where(wrong > 0)
    return out[[*cell, "kind", "n", "accuracy", "abstention_rate", "over_answer_when_wrong"]]
