"""Metrics over the predictions table (paper §3 "Headline metric", §5.1–§5.6, Appendices B,
D, E.2, F and G.1–G.4).

Pure functions: each takes the predictions DataFrame (DESIGN.md contract: qid, task,
strategy, backbone, prep_model, setting, response, parsed, correct, input_tokens,
output_tokens, cached_tokens, cost_usd, latency_s, error, plus ``correct_lenient`` and
``parse_failed`` from the harness) and returns a DataFrame whose id columns come first.
Columns that live in questions.parquet (subtype, disease, tertile, subject_ids, gold) are
joined on ``qid`` when a function needs them and ``questions=`` is given.

Conventions and the ambiguities resolved here:

- Accuracies, lifts and rates are proportions in [0, 1]; the paper prints pp (x 100).
- Pooled accuracy weights each task by its size (sum of correct / sum of n); macro accuracy
  is the unweighted mean of per-task accuracies (§3 "Headline metric"). Table 1's Macro and
  Delta_blind rows follow from Table 14's per-task accuracies; its Pool. row (and the §5.1
  pooled figures, e.g. full-context x DeepSeek 0.672) do not — Table 14 with the stated task
  sizes gives 0.703 — so the paper's pooled row cannot be re-derived from its own cube.
  (Of the 60 Macro / Delta_blind values, only full-context x Sonnet's macro differs: 66.5
  from Table 14, printed 67.) Table 2 lifts follow from Table 14 to within 1 pp (116/120
  exact; the rest are 3-decimal rounding).
- T9: the paper's over-answer rate is 1 - abstention and so includes empty responses;
  :func:`t9_decomposition` reports empty responses separately from genuine over-answers.
- Empty responses count as wrong (Limitations: "retained in headline numbers").
- T3 runs in two settings; filter ``setting`` (or add it to ``by``) before pooling T3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.stats import bootstrap_ci, wilson_ci

BLIND_STRATEGY = "no-context-blind"
MEM_AVG = "mem-avg"  # same spelling as clinlib.analysis.paper and data/paper/table02
MEM_AVG_MEMBERS: tuple[str, ...] = ("mem0", "a-mem")
TABLE2_REGIMES: tuple[str, ...] = ("full-context", "dense-retrieval", MEM_AVG)
CELL: tuple[str, ...] = ("strategy", "backbone")

# by_group names -> column (Appendix B subtypes, F.1 patients, F.2 diseases, F.3 tertiles).
GROUP_COLUMNS: dict[str, str] = {
    "subtype": "subtype",
    "disease": "disease",
    "tertile": "tertile",
    "patient": "subject_ids",
}

# T9 outcome categories of Fig. 4, in stacking order. The paper's five collapse "patched
# correct" and "other rescored" into one lenient-parser bucket; "empty" separates API
# non-responses (Appendix E.1) from genuine over-answers.
T9_CATEGORIES: tuple[str, ...] = (
    "correct_abstain",
    "rescued_lenient",
    "parser_missed",
    "over_answer",
    "empty",
)

# Verbose-abstention heuristic for T9 "parser-missed" (Fig. 4, Appendix G.4): phrases that
# decline to give the requested fact, e.g. "no sodium value was reported on that date",
# "not measured", "the dialogue does not mention ...". Case-insensitive.
ABSTENTION_PATTERNS: tuple[str, ...] = (
    r"\binsufficient\b",
    r"\bnot (?:enough|sufficient) (?:information|data|detail|details|context|evidence)\b",
    r"\bno (?:\w+[ -]){0,3}?(?:value|values|result|results|reading|readings|record|records|"
    r"measurement|measurements|data|information|mention|documentation|entry|entries|level|"
    r"levels)\b",
    r"\bnot (?:been )?(?:documented|recorded|reported|mentioned|measured|available|provided|"
    r"stated|specified|listed|found|given|included|noted|obtained|checked|performed)\b",
    r"\b(?:cannot|can't|can not|unable to|could not|couldn't) (?:be )?(?:determine|determined|"
    r"answer|answered|find|found|tell|say|confirm|confirmed|identify|provide|locate|know)\b",
    r"\b(?:does|do|did|is|was)(?: not|n't) (?:\w+ )?(?:mention|contain|include|specify|state|"
    r"provide|report|document|record|show|indicate|available|documented|recorded|mentioned)\b",
    r"\bthere (?:is|are|was|were) no\b",
    r"\b(?:unknown|unavailable)\b",
)
# A specific value in the response ("4.2", "138 mEq/L", "7.1%") marks an answer, not an
# abstention, even next to a hedge: Appendix G.4 counts fabricated values as over-answers.
VALUE_PATTERN = (
    r"(?<![\w.-])\d+(?:\.\d+)?\s*(?:mg/dl|meq/l|mmol/l|g/dl|k/ul|ng/ml|pg/ml|iu/l|u/l|%)"
    r"|(?<![\w.-])\d+\.\d+(?![\w.-])"
)
_ABSTAIN_RE = re.compile("|".join(f"(?:{p})" for p in ABSTENTION_PATTERNS), re.IGNORECASE)
_VALUE_RE = re.compile(VALUE_PATTERN, re.IGNORECASE)

PRED_COST_COLUMNS: tuple[str, ...] = (
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "latency_s",
)


class MetricsInputError(ValueError):
    """Raised when a predictions/questions table cannot be scored as given."""


# --------------------------------------------------------------------------- helpers


def _require(df: pd.DataFrame, cols: Sequence[str], fn: str, hint: str = "") -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        extra = f"; {hint}" if hint else ""
        raise MetricsInputError(
            f"{fn}: table lacks column(s) {missing}; it has {list(df.columns)}{extra}"
        )


def _example_id(df: pd.DataFrame, mask: pd.Series | np.ndarray) -> str:
    if "qid" in df.columns:
        return f" (e.g. qid={df.loc[np.asarray(mask), 'qid'].iloc[0]!r})"
    return ""


def _bool_col(df: pd.DataFrame, col: str, fn: str) -> pd.Series:
    """``df[col]`` as a plain bool Series; NA or non-boolean values are errors."""
    s = df[col]
    na = s.isna()
    if na.any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has {int(na.sum())} missing value(s){_example_id(df, na)}; "
            "the harness must record True/False for every prediction"
        )
    if pd.api.types.is_bool_dtype(s):
        return s.astype(bool)
    ok = s.isin([True, False, 0, 1])
    if not ok.all():
        bad = s[~ok].iloc[0]
        raise MetricsInputError(
            f"{fn}: column {col!r} must be boolean; found {bad!r}{_example_id(df, ~ok)}"
        )
    return s.astype(bool)


def _num_col(df: pd.DataFrame, col: str, fn: str, allow_nan: bool = False) -> pd.Series:
    s = pd.to_numeric(df[col], errors="coerce")
    bad = s.isna() & df[col].notna()
    if bad.any():
        raise MetricsInputError(
            f"{fn}: column {col!r} is not numeric: {df.loc[bad, col].iloc[0]!r}"
            f"{_example_id(df, bad)}"
        )
    if not allow_nan and s.isna().any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has {int(s.isna().sum())} missing value(s)"
            f"{_example_id(df, s.isna())}"
        )
    if (s < 0).any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has a negative value {s[s < 0].iloc[0]!r}"
            f"{_example_id(df, s < 0)}"
        )
    return s.astype(float)


def _with_question_cols(
    preds: pd.DataFrame, questions: pd.DataFrame | None, cols: Sequence[str], fn: str
) -> pd.DataFrame:
    """Join ``cols`` missing from ``preds`` from ``questions`` on qid."""
    need = [c for c in cols if c not in preds.columns]
    if not need:
        return preds
    if questions is None:
        raise MetricsInputError(
            f"{fn}: predictions lack {need}; pass questions= (questions.parquet) to join them"
        )
    _require(questions, ["qid", *need], f"{fn} (questions)")
    dup = questions["qid"].duplicated()
    if dup.any():
        raise MetricsInputError(
            f"{fn}: questions has duplicate qid {questions.loc[dup, 'qid'].iloc[0]!r}"
        )
    _require(preds, ["qid"], fn)
    out = preds.merge(questions[["qid", *need]], on="qid", how="left", validate="many_to_one")
    unknown = ~preds["qid"].isin(questions["qid"]).to_numpy()
    if unknown.any():
        raise MetricsInputError(
            f"{fn}: {int(unknown.sum())} prediction(s) have a qid absent from questions, e.g. "
            f"{preds.loc[unknown, 'qid'].iloc[0]!r}"
        )
    return out


def _task_rows(preds: pd.DataFrame, task: str, fn: str) -> pd.DataFrame:
    _require(preds, ["task"], fn)
    # A fresh index: later steps select rows by label and must not hit duplicates.
    rows = preds[preds["task"] == task].reset_index(drop=True)
    if rows.empty:
        raise MetricsInputError(
            f"{fn}: no predictions for task {task!r}; tasks present: "
            f"{sorted(preds['task'].dropna().unique().tolist())}"
        )
    return rows


def _norm_label(value: object) -> object:
    """Labels compare case- and whitespace-insensitively; missing stays None."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    text = str(value).strip().lower()
    return text or None


def _group_counts(flags: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    return flags.groupby(list(keys), sort=True, dropna=False).sum().reset_index()


# --------------------------------------------------------------------------- accuracy


def accuracy_table(
    preds: pd.DataFrame,
    by: Sequence[str] = ("strategy", "backbone", "task"),
    correct_col: str = "correct",
    alpha: float = 0.05,
    n_boot: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy with a Wilson CI per group (Table 1 / Table 14 cells, §3 CIs).

    Args:
        preds: predictions table.
        by: grouping columns (default one row per strategy x backbone x task).
        correct_col: boolean correctness column ("correct" strict, "correct_lenient").
        alpha: 1 - confidence level.
        n_boot: if > 0, also a percentile bootstrap CI (Appendix F.4; the paper used 100
            resamples, seed 20260519); the same seed is used in every group.
        seed: bootstrap seed.

    Returns:
        ``by`` columns + n, k, accuracy, ci_low, ci_high (+ boot_low, boot_high).
    """
    by = list(by)
    _require(preds, [*by, correct_col], "accuracy_table")
    if preds.empty:
        raise MetricsInputError("accuracy_table: predictions table is empty")
    ok = _bool_col(preds, correct_col, "accuracy_table")
    frame = preds[by].assign(n=1, k=ok.astype(int).to_numpy())
    out = _group_counts(frame, by)
    out["accuracy"] = out["k"] / out["n"]
    out["ci_low"], out["ci_high"] = wilson_ci(out["k"].to_numpy(), out["n"].to_numpy(), alpha)
    if n_boot > 0:
        groups = ok.groupby([preds[c] for c in by], sort=True, dropna=False)
        bounds = [bootstrap_ci(g.to_numpy(float), np.mean, n_boot, alpha, seed) for _, g in groups]
        out["boot_low"] = [b[0] for b in bounds]
        out["boot_high"] = [b[1] for b in bounds]
    return out


def summary_rows(
    per_task: pd.DataFrame,
    task_n: Mapping[str, int] | None = None,
    baseline: str = BLIND_STRATEGY,
    cell: Sequence[str] = CELL,
    match: Sequence[str] = ("backbone",),
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Pooled, macro and Delta_blind per cell (Table 1 bottom rows, §5.1, §5.3).

    Args:
        per_task: one row per (cell, task) with ``accuracy`` and ``n`` (e.g. the output of
            :func:`accuracy_table`, or the paper's published per-task accuracies).
        task_n: task -> size; overrides ``n`` (needed when ``per_task`` has no n column).
        baseline: strategy whose macro is subtracted for Delta_blind.
        cell: columns identifying a cell; must include "strategy".
        match: columns on which a cell is matched to its baseline (same backbone).
        alpha: 1 - confidence level of the pooled Wilson CI.

    Returns:
        ``cell`` columns + n_tasks, n, pooled, pooled_ci_low, pooled_ci_high, macro,
        delta_blind (macro - same-backbone baseline macro; NaN for the baseline's own rows,
        which the paper prints as a dash, and where no baseline cell exists).
    """
    cell, match = list(cell), list(match)
    if "strategy" not in cell:
        raise MetricsInputError(f"summary_rows: cell must include 'strategy', got {cell}")
    _require(per_task, [*cell, "task", "accuracy"], "summary_rows")
    df = per_task[[*cell, "task", "accuracy"]].copy()
    if task_n is not None:
        df["n"] = df["task"].map(dict(task_n))
        if df["n"].isna().any():
            task = df.loc[df["n"].isna(), "task"].iloc[0]
            raise MetricsInputError(f"summary_rows: task_n has no size for task {task!r}")
    else:
        _require(per_task, ["n"], "summary_rows", "or pass task_n={task: size}")
        df["n"] = per_task["n"].to_numpy()
    acc = pd.to_numeric(df["accuracy"], errors="coerce")
    if acc.isna().any() or ((acc < 0) | (acc > 1)).any():
        raise MetricsInputError("summary_rows: accuracy must be numbers in [0, 1]")
    dup = df.duplicated([*cell, "task"])
    if dup.any():
        raise MetricsInputError(
            f"summary_rows: (cell, task) repeated: {df.loc[dup, [*cell, 'task']].iloc[0].to_dict()}"
        )
    # Macro over different task sets would not be comparable across cells.
    task_sets = df.groupby(cell, dropna=False)["task"].agg(frozenset)
    if task_sets.nunique() > 1:
        full = frozenset().union(*task_sets)
        short = task_sets[task_sets != full]
        raise MetricsInputError(
            f"summary_rows: cell {short.index[0]} lacks task(s) {sorted(full - short.iloc[0])}; "
            "every cell must cover the same tasks"
        )
    df["k"] = acc * df["n"]
    out = (
        df.groupby(cell, sort=True, dropna=False)
        .agg(n_tasks=("task", "size"), n=("n", "sum"), k=("k", "sum"), macro=("accuracy", "mean"))
        .reset_index()
    )
    out["pooled"] = out["k"] / out["n"]
    out["pooled_ci_low"], out["pooled_ci_high"] = wilson_ci(
        out["k"].to_numpy(), out["n"].to_numpy(), alpha
    )
    base = out.loc[out["strategy"] == baseline, [*match, "macro"]]
    if base.duplicated(match).any():
        raise MetricsInputError(
            f"summary_rows: several {baseline!r} cells per {match}; add the distinguishing "
            "column to match="
        )
    out = out.merge(base.rename(columns={"macro": "_base"}), on=match, how="left")
    out["delta_blind"] = np.where(out["strategy"] == baseline, np.nan, out["macro"] - out["_base"])
    cols = [*cell, "n_tasks", "n", "pooled", "pooled_ci_low", "pooled_ci_high", "macro"]
    return out[[*cols, "delta_blind"]]


def context_lift(
    per_task: pd.DataFrame,
    baseline: str = BLIND_STRATEGY,
    regimes: Sequence[str] | None = None,
    mem_members: Sequence[str] = MEM_AVG_MEMBERS,
    match: Sequence[str] = ("backbone",),
) -> pd.DataFrame:
    """Per-task accuracy lift over the same-backbone baseline (Table 2).

    The "mem-avg" regime is the per-task mean of the ``mem_members`` strategies' accuracies
    (Mem0 and A-Mem). A "macro" pseudo-task row per (regime, backbone) holds the mean over
    tasks (its lift equals Delta_blind).

    Args:
        per_task: one row per (strategy, backbone, task) with ``accuracy``.
        baseline: the no-context strategy.
        regimes: strategies (and/or "mem-avg") to report; default every non-baseline strategy
            present, plus "mem-avg" when all members are present. :data:`TABLE2_REGIMES` gives
            the paper's three.
        mem_members: strategies averaged into "mem-avg".
        match: columns matching a cell to its baseline.

    Returns:
        Long table: regime, ``match`` columns, task, accuracy, baseline_accuracy, lift.
    """
    match = list(match)
    _require(per_task, ["strategy", *match, "task", "accuracy"], "context_lift")
    df = per_task[["strategy", *match, "task", "accuracy"]]
    if df.duplicated(["strategy", *match, "task"]).any():
        raise MetricsInputError("context_lift: (strategy, backbone, task) repeated in per_task")
    present = set(df["strategy"])
    if baseline not in present:
        raise MetricsInputError(f"context_lift: no rows for baseline strategy {baseline!r}")
    members_present = all(m in present for m in mem_members)
    if regimes is None:
        regimes = sorted(present - {baseline}) + ([MEM_AVG] if members_present else [])
    frames = []
    for regime in regimes:
        if regime == MEM_AVG:
            if not members_present:
                raise MetricsInputError(
                    f"context_lift: 'mem-avg' needs strategies {list(mem_members)}; "
                    f"present: {sorted(present)}"
                )
            mem = df[df["strategy"].isin(mem_members)]
            counts = mem.groupby([*match, "task"])["strategy"].nunique()
            short = counts[counts < len(mem_members)]
            if not short.empty:
                raise MetricsInputError(
                    f"context_lift: 'mem-avg' lacks a member for {short.index[0]}"
                )
            rows = mem.groupby([*match, "task"], sort=True)["accuracy"].mean().reset_index()
        elif regime in present:
            rows = df.loc[df["strategy"] == regime, [*match, "task", "accuracy"]]
        else:
            raise MetricsInputError(f"context_lift: unknown regime {regime!r}; {sorted(present)}")
        frames.append(rows.assign(regime=regime))
    lifted = pd.concat(frames, ignore_index=True)
    base = df.loc[df["strategy"] == baseline, [*match, "task", "accuracy"]].rename(
        columns={"accuracy": "baseline_accuracy"}
    )
    lifted = lifted.merge(base, on=[*match, "task"], how="left")
    if lifted["baseline_accuracy"].isna().any():
        miss = lifted.loc[lifted["baseline_accuracy"].isna(), [*match, "task"]].iloc[0]
        raise MetricsInputError(f"context_lift: no {baseline!r} accuracy for {miss.to_dict()}")
    lifted["lift"] = lifted["accuracy"] - lifted["baseline_accuracy"]
    macro = (
        lifted.groupby(["regime", *match], sort=False)[["accuracy", "baseline_accuracy", "lift"]]
        .mean()
        .reset_index()
        .assign(task="macro")
    )
    out = pd.concat([lifted, macro], ignore_index=True)
    order = {r: i for i, r in enumerate(regimes)}
    out = out.assign(_r=out["regime"].map(order), _m=(out["task"] == "macro").astype(int))
    out = out.sort_values(["_r", *match, "_m", "task"], kind="mergesort")
    cols = ["regime", *match, "task", "accuracy", "baseline_accuracy", "lift"]
    return out[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- skewed tasks


def _f1_per_label(gold: np.ndarray, pred: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    scores = []
    for lab in labels:
        tp = np.sum((gold == lab) & (pred == lab))
        fp = np.sum((gold != lab) & (pred == lab))
        fn = np.sum((gold == lab) & (pred != lab))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return np.asarray(scores, dtype=float)


def macro_f1(
    preds: pd.DataFrame,
    task: str,
    cell: Sequence[str] = CELL,
    labels: Sequence[str] | None = None,
    pred_col: str = "parsed",
    gold_col: str = "gold",
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Macro-F1 of parsed label vs gold per cell for a skewed task (Tables 5–6, T5 / T8).

    The average runs over the gold label set only: an unparsed or off-label prediction is
    a miss for its gold class but adds no class of its own (sklearn ``f1_score(...,
    labels=labels, average="macro")``). A label with no gold and no prediction scores 0.
    Labels compare case-/whitespace-insensitively.

    Args:
        preds: predictions; ``gold`` is joined from ``questions`` when absent.
        task: e.g. "T5" or "T8".
        cell: grouping columns.
        labels: label set; default every gold label of the task (same for every cell).
        pred_col, gold_col: parsed prediction and gold columns.
        questions: questions table for the join.

    Returns:
        ``cell`` + n, accuracy (parsed == gold), macro_f1.
    """
    cell = list(cell)
    rows = _task_rows(
        _with_question_cols(preds, questions, [gold_col], "macro_f1"), task, "macro_f1"
    )
    _require(rows, [*cell, pred_col, gold_col], "macro_f1")
    gold = rows[gold_col].map(_norm_label)
    if gold.isna().any():
        raise MetricsInputError(f"macro_f1: {int(gold.isna().sum())} {task} row(s) have no gold")
    pred = rows[pred_col].map(_norm_label)
    lab = sorted(set(gold)) if labels is None else [_norm_label(x) for x in labels]
    records = []
    for key, idx in rows.groupby(cell, sort=True, dropna=False).groups.items():
        g = gold.loc[idx].to_numpy(object)
        p = pred.loc[idx].to_numpy(object)
        key = key if isinstance(key, tuple) else (key,)
        records.append(
            {
                **dict(zip(cell, key, strict=True)),
                "n": len(g),
                "accuracy": float(np.mean(g == p)),
                "macro_f1": float(_f1_per_label(g, p, lab).mean()),
            }
        )
    return pd.DataFrame(records)


def majority_baseline(gold: Sequence[object], labels: Sequence[str] | None = None) -> dict:
    """Accuracy and macro-F1 of always predicting the most frequent gold label.

    The paper's trivial baselines: T5 0.919 accuracy / 0.478 macro-F1 (455 vs 40; exact
    value 0.4789), T8 0.247 macro-F1 (§3, Tables 5–6).

    Returns:
        dict with label, accuracy, macro_f1.
    """
    g = np.asarray([_norm_label(x) for x in gold], dtype=object)
    if g.size == 0 or any(x is None for x in g):
        raise MetricsInputError("majority_baseline: gold must be non-empty with no missing labels")
    values, counts = np.unique(g.astype(str), return_counts=True)
    top = str(values[np.argmax(counts)])
    lab = sorted(set(g)) if labels is None else [_norm_label(x) for x in labels]
    pred = np.full(g.size, top, dtype=object)
    return {
        "label": top,
        "accuracy": float(np.mean(g == pred)),
        "macro_f1": float(_f1_per_label(g, pred, lab).mean()),
    }


def positive_recall(
    preds: pd.DataFrame,
    task: str = "T3",
    positive: str = "yes",
    cell: Sequence[str] = ("strategy", "backbone", "setting"),
    correct_col: str = "correct",
    gold_col: str = "gold",
    questions: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Positive-class recall on the injected positives (Table 3, §5.5 equal-input probe).

    Args:
        preds: predictions; ``gold`` is joined from ``questions`` when absent.
        task: the probe task.
        positive: gold label of the injected positives.
        cell: grouping columns (default includes ``setting``: pre vs post injection).
        correct_col: correctness column; on a gold-positive row correct == recalled.
        gold_col, questions: as in :func:`macro_f1`.
        alpha: 1 - confidence level of the Wilson CI.

    Returns:
        ``cell`` + n_pos, k, recall, ci_low, ci_high.
    """
    cell = list(cell)
    rows = _task_rows(
        _with_question_cols(preds, questions, [gold_col], "positive_recall"),
        task,
        "positive_recall",
    )
    pos = rows[rows[gold_col].map(_norm_label) == _norm_label(positive)]
    if pos.empty:
        raise MetricsInputError(f"positive_recall: no {task} rows with gold {positive!r}")
    out = accuracy_table(pos, by=cell, correct_col=correct_col, alpha=alpha)
    return out.rename(columns={"n": "n_pos", "accuracy": "recall"})


# --------------------------------------------------------------------------- T9 / parsers


def looks_like_abstention(text: object) -> bool:
    """Keyword heuristic: does a raw response decline to give the fact (Fig. 4, G.4)?

    True when the text matches one of :data:`ABSTENTION_PATTERNS` and does not state a
    specific value (:data:`VALUE_PATTERN`, e.g. "4.2" or "138 mEq/L").
    """
    if _norm_label(text) is None:
        return False
    s = str(text)
    return bool(_ABSTAIN_RE.search(s)) and not _VALUE_RE.search(s)


def t9_outcomes(
    preds: pd.DataFrame,
    strict_col: str = "correct",
    lenient_col: str = "correct_lenient",
    response_col: str = "response",
) -> pd.Series:
    """Per-row T9 outcome (one of :data:`T9_CATEGORIES`), in this precedence:

    correct_abstain (strict parser abstention) > rescued_lenient (only the lenient parser) >
    empty (blank response) > parser_missed (verbose abstention per
    :func:`looks_like_abstention`) > over_answer (everything else: a value, a bare yes/no...).

    Returns:
        Series of category strings aligned with ``preds.index``.
    """
    _require(preds, [strict_col, lenient_col, response_col], "t9_outcomes")
    strict = _bool_col(preds, strict_col, "t9_outcomes").to_numpy()
    lenient = _bool_col(preds, lenient_col, "t9_outcomes").to_numpy()
    resp = preds[response_col]
    empty = resp.map(_norm_label).isna().to_numpy()
    missed = resp.map(looks_like_abstention).to_numpy(bool)
    cat = np.select(
        [strict, lenient, empty, missed],
        ["correct_abstain", "rescued_lenient", "empty", "parser_missed"],
        default="over_answer",
    )
    return pd.Series(cat, index=preds.index, name="t9_outcome")


def t9_decomposition(
    preds: pd.DataFrame,
    cell: Sequence[str] = CELL,
    task: str = "T9",
    strict_col: str = "correct",
    lenient_col: str = "correct_lenient",
    response_col: str = "response",
) -> pd.DataFrame:
    """T9 outcome decomposition per cell (Fig. 4, §5.4, Appendix G.4).

    Args:
        preds: predictions (rows of other tasks are ignored).
        cell: grouping columns.
        task, strict_col, lenient_col, response_col: see :func:`t9_outcomes`.

    Returns:
        ``cell`` + n, one count column per :data:`T9_CATEGORIES` entry, the same as
        ``<category>_rate``, and abstention_strict (= T9 accuracy), abstention_lenient,
        abstention_total (+ parser-missed, the paper's "abstention rate").
    """
    cell = list(cell)
    rows = _task_rows(preds, task, "t9_decomposition")
    _require(rows, cell, "t9_decomposition")
    cat = t9_outcomes(rows, strict_col, lenient_col, response_col)
    flags = pd.DataFrame({c: (cat == c).astype(int) for c in T9_CATEGORIES}, index=rows.index)
    out = _group_counts(pd.concat([rows[cell], flags.assign(n=1)], axis=1), cell)
    out = out[[*cell, "n", *T9_CATEGORIES]]
    for c in T9_CATEGORIES:
        out[f"{c}_rate"] = out[c] / out["n"]
    out["abstention_strict"] = out["correct_abstain_rate"]
    out["abstention_lenient"] = out["abstention_strict"] + out["rescued_lenient_rate"]
    out["abstention_total"] = out["abstention_lenient"] + out["parser_missed_rate"]
    return out


def strict_vs_lenient(
    preds: pd.DataFrame,
    by: Sequence[str] = ("task", "strategy"),
    strict_col: str = "correct",
    lenient_col: str = "correct_lenient",
) -> pd.DataFrame:
    """Strict vs lenient parser accuracy (Tables 8–9: T9 and T7, pooled over backbones).

    Args:
        preds: predictions with both correctness columns.
        by: grouping columns.
        strict_col, lenient_col: the two correctness columns.

    Returns:
        ``by`` + n, strict, lenient, delta (lenient - strict), n_rescued (lenient only),
        n_lost (strict only; non-zero means the lenient parser is not a superset).
    """
    by = list(by)
    _require(preds, [*by, strict_col, lenient_col], "strict_vs_lenient")
    s = _bool_col(preds, strict_col, "strict_vs_lenient")
    le = _bool_col(preds, lenient_col, "strict_vs_lenient")
    flags = preds[by].assign(
        n=1,
        _s=s.astype(int).to_numpy(),
        _l=le.astype(int).to_numpy(),
        n_rescued=(le & ~s).astype(int).to_numpy(),
        n_lost=(s & ~le).astype(int).to_numpy(),
    )
    out = _group_counts(flags, by)
    out["strict"] = out["_s"] / out["n"]
    out["lenient"] = out["_l"] / out["n"]
    out["delta"] = out["lenient"] - out["strict"]
    return out[[*by, "n", "strict", "lenient", "delta", "n_rescued", "n_lost"]]


def by_group(
    preds: pd.DataFrame,
    group: str,
    cell: Sequence[str] = CELL,
    correct_col: str = "correct",
    questions: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Accuracy per cell and stratum (Appendix B subtypes, F.1 patients, F.2 diseases, F.3
    tertiles).

    Args:
        preds: predictions; the group column is joined from ``questions`` when absent.
        group: "subtype", "disease", "tertile", "patient" (see :data:`GROUP_COLUMNS`) or any
            other column name. "patient" explodes ``subject_ids``: a cross-patient (T6)
            question counts once for each of its patients.
        cell: grouping columns; add "task" for per-task strata.
        correct_col: correctness column.
        questions: questions table for the join.
        alpha: 1 - confidence level.

    Returns:
        As :func:`accuracy_table` with ``cell`` + the group column ("subject_id" for patient).
    """
    col = GROUP_COLUMNS.get(group, group)
    rows = _with_question_cols(preds, questions, [col], "by_group")
    if group == "patient":
        rows = rows.explode(col).rename(columns={col: "subject_id"})
        if rows["subject_id"].isna().any():
            bad = rows["subject_id"].isna()
            raise MetricsInputError(
                f"by_group: a question has no subject_ids{_example_id(rows, bad)}"
            )
        col = "subject_id"
    return accuracy_table(rows, by=[*cell, col], correct_col=correct_col, alpha=alpha)


def parse_failure_rate(preds: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """Parse failures per cell (Appendix E.2, D2: "pred is None").

    Returns:
        ``cell`` + n, n_parse_failed, parse_failure_rate.
    """
    cell = list(cell)
    _require(preds, [*cell, "parse_failed"], "parse_failure_rate")
    pf = _bool_col(preds, "parse_failed", "parse_failure_rate")
    out = _group_counts(preds[cell].assign(n=1, n_parse_failed=pf.astype(int).to_numpy()), cell)
    out["parse_failure_rate"] = out["n_parse_failed"] / out["n"]
    return out


# --------------------------------------------------------------------------- cost


def cost_table(
    preds: pd.DataFrame, cell: Sequence[str] = CELL, with_total: bool = False
) -> pd.DataFrame:
    """Cost, tokens and cache-hit rate per cell (Table 4, §4, Appendix D).

    ``cache_hit_rate`` is cached_tokens / input_tokens summed over the cell (input tokens
    include the cached ones, OpenAI's convention), so a total is a ratio of sums — the
    paper's 17.1% — not a mean of per-cell rates. A missing ``cost_usd`` (unknown price)
    makes the cell's cost NaN rather than silently low.

    Args:
        preds: predictions with cost_usd, input_tokens, output_tokens, cached_tokens,
            latency_s.
        cell: grouping columns.
        with_total: append a row whose ``cell`` columns read "total".

    Returns:
        ``cell`` + n, cost_usd, cost_per_question (cost / n), input_tokens, output_tokens,
        cached_tokens, cache_hit_rate, mean_latency_s.
    """
    cell = list(cell)
    _require(preds, [*cell, *PRED_COST_COLUMNS], "cost_table")
    num = pd.DataFrame(
        {
            c: _num_col(preds, c, "cost_table", allow_nan=(c == "cost_usd"))
            for c in PRED_COST_COLUMNS
        },
        index=preds.index,
    )
    over = num["cached_tokens"] > num["input_tokens"]
    if over.any():
        raise MetricsInputError(
            "cost_table: cached_tokens exceeds input_tokens"
            f"{_example_id(preds, over)}; input_tokens must include cached tokens"
        )
    frame = pd.concat([preds[cell], num], axis=1)
    frame["n"] = 1
    agg = {
        "n": ("n", "sum"),
        "cost_usd": ("cost_usd", lambda s: s.sum(min_count=len(s))),
        "input_tokens": ("input_tokens", "sum"),
        "output_tokens": ("output_tokens", "sum"),
        "cached_tokens": ("cached_tokens", "sum"),
        "latency_sum": ("latency_s", "sum"),
    }
    out = frame.groupby(cell, sort=True, dropna=False).agg(**agg).reset_index()
    if with_total:
        total = {c: "total" for c in cell}
        total.update({k: out[k].sum(min_count=len(out)) for k in agg})
        out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out["cost_per_question"] = out["cost_usd"] / out["n"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["cache_hit_rate"] = np.where(
            out["input_tokens"] > 0, out["cached_tokens"] / out["input_tokens"], np.nan
        )
    out["mean_latency_s"] = out["latency_sum"] / out["n"]
    cols = ["n", "cost_usd", "cost_per_question", "input_tokens", "output_tokens"]
    return out[[*cell, *cols, "cached_tokens", "cache_hit_rate", "mean_latency_s"]]


def pareto_frontier(df: pd.DataFrame, cost: str = "cost_usd", acc: str = "pooled") -> pd.Series:
    """Non-dominated cells in (cost, accuracy) space (Fig. 6, §5.6: 11 of 32 cells).

    A cell is dominated when another costs no more and is at least as accurate, and is
    strictly better on one of the two. Ties: cells with identical cost and accuracy do not
    dominate each other (both stay on the frontier); at equal cost only the most accurate
    survive, at equal accuracy only the cheapest.

    Args:
        df: one row per cell.
        cost, acc: column names.

    Returns:
        Boolean Series named "pareto", aligned with ``df.index``.
    """
    _require(df, [cost, acc], "pareto_frontier")
    c = pd.to_numeric(df[cost], errors="coerce").to_numpy(float)
    a = pd.to_numeric(df[acc], errors="coerce").to_numpy(float)
    if np.isnan(c).any() or np.isnan(a).any():
        raise MetricsInputError(f"pareto_frontier: {cost!r} and {acc!r} must be numeric, no NaN")
    on = np.zeros(c.size, dtype=bool)
    best_cheaper = -np.inf  # best accuracy among strictly cheaper cells
    for value in np.unique(c):  # ascending cost
        at = c == value
        top = a[at].max()
        on[at] = (a[at] == top) & (top > best_cheaper)
        best_cheaper = max(best_cheaper, top)
    return pd.Series(on, index=df.index, name="pareto")
