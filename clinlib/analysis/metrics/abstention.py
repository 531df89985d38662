"""T9 abstention and the answer parsers (Fig. 4, §5.4, Appendices E.2, G.3–G.4, Tables 8–9).

T9: the paper's over-answer rate is 1 - abstention and so includes empty responses;
:func:`t9_decomposition` reports empty responses separately from genuine over-answers and
verbose abstentions the strict parser missed (:func:`looks_like_abstention`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics.common import (
    CELL,
    bool_col,
    group_counts,
    norm_label,
    require,
    task_rows,
)

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


def looks_like_abstention(text: object) -> bool:
    """Keyword heuristic: does a raw response decline to give the fact (Fig. 4, G.4)?

    True when the text matches one of :data:`ABSTENTION_PATTERNS` and does not state a
    specific value (:data:`VALUE_PATTERN`, e.g. "4.2" or "138 mEq/L").
    """
    if norm_label(text) is None:
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
    require(preds, [strict_col, lenient_col, response_col], "t9_outcomes")
    strict = bool_col(preds, strict_col, "t9_outcomes").to_numpy()
    lenient = bool_col(preds, lenient_col, "t9_outcomes").to_numpy()
    resp = preds[response_col]
    empty = resp.map(norm_label).isna().to_numpy()
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
    rows = task_rows(preds, task, "t9_decomposition")
    require(rows, cell, "t9_decomposition")
    cat = t9_outcomes(rows, strict_col, lenient_col, response_col)
    flags = pd.DataFrame({c: (cat == c).astype(int) for c in T9_CATEGORIES}, index=rows.index)
    out = group_counts(pd.concat([rows[cell], flags.assign(n=1)], axis=1), cell)
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
    require(preds, [*by, strict_col, lenient_col], "strict_vs_lenient")
    s = bool_col(preds, strict_col, "strict_vs_lenient")
    le = bool_col(preds, lenient_col, "strict_vs_lenient")
    flags = preds[by].assign(
        n=1,
        _s=s.astype(int).to_numpy(),
        _l=le.astype(int).to_numpy(),
        n_rescued=(le & ~s).astype(int).to_numpy(),
        n_lost=(s & ~le).astype(int).to_numpy(),
    )
    out = group_counts(flags, by)
    out["strict"] = out["_s"] / out["n"]
    out["lenient"] = out["_l"] / out["n"]
    out["delta"] = out["lenient"] - out["strict"]
    return out[[*by, "n", "strict", "lenient", "delta", "n_rescued", "n_lost"]]


def parse_failure_rate(preds: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """Parse failures per cell (Appendix E.2, D2: "pred is None").

    Returns:
        ``cell`` + n, n_parse_failed, parse_failure_rate.
    """
    cell = list(cell)
    require(preds, [*cell, "parse_failed"], "parse_failure_rate")
    pf = bool_col(preds, "parse_failed", "parse_failure_rate")
    out = group_counts(preds[cell].assign(n=1, n_parse_failed=pf.astype(int).to_numpy()), cell)
    out["parse_failure_rate"] = out["n_parse_failed"] / out["n"]
    return out
