"""Paired flips between strategies (paper §3 McNemar pairing; §5.7 "Illustrative failure modes", the compression loss behind Table 2 / Fig. 3): questions right under one strategy and
wrong under another, the flip table over all strategy pairs with its McNemar test, its heat
map, and flips per anchor event kind."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import altair as alt
import pandas as pd

from clinlib.analysis.failures.common import (
    FLIP_COLUMNS,
    REQUIRED_COLUMNS,
    FailureExplorerError,
    as_list,
    require_columns,
)
from clinlib.analysis.stats.question import pairwise_mcnemar
from clinlib.dialogue.viewer import kind_of

log = logging.getLogger("clinlib.analysis")


def _without_errors(preds: pd.DataFrame) -> pd.DataFrame:
    # A transport error is not a reasoning failure: it must not count as a flip.
    if "error" not in preds.columns:
        return preds
    err = preds["error"]
    return preds[err.isna() | (err.astype(str) == "")]


def flips(
    preds: pd.DataFrame,
    good: str = "full-context",
    bad: str = "mem0",
    *,
    include_errors: bool = False,
) -> pd.DataFrame:
    """Paired flips: questions answered correctly under ``good`` and wrongly under ``bad``,
    same backbone and setting (the ``b`` cell of the paper's McNemar table, §3).

    Args:
        preds: predictions.
        good: the strategy that got it right.
        bad: the strategy that got it wrong.
        include_errors: count rows with a transport error (default: dropped).

    Returns:
        One row per flip: :data:`FLIP_COLUMNS`, ordered by task and qid.

    Raises:
        FailureExplorerError: a missing column, an unknown strategy, or a strategy with more
            than one row per (qid, backbone, setting) (filter ``prep_model`` first).
    """
    require_columns(preds, REQUIRED_COLUMNS, "predictions")
    known = set(preds["strategy"].dropna().astype(str))
    for name in (good, bad):
        if name not in known:
            raise FailureExplorerError(
                f"strategy {name!r} does not occur in the predictions; known: {sorted(known)}"
            )
    p = preds if include_errors else _without_errors(preds)
    key = ["qid", "backbone", "setting"]
    sides = {}
    for role, name in (("good", good), ("bad", bad)):
        side = p[p["strategy"] == name]
        dup = side.duplicated(key, keep=False)
        if dup.any():
            row = side.loc[dup, key].iloc[0].to_dict()
            raise FailureExplorerError(
                f"strategy {name!r} has several rows for {row} (different prep_model?); "
                "filter the predictions to one prep_model first"
            )
        sides[role] = side
    g = sides["good"][[*key, "task", "subtype", "parsed", "correct"]]
    b = sides["bad"][[*key, "parsed", "response", "correct"]]
    m = g.merge(b, on=key, suffixes=("_good", "_bad"))
    m = m[
        m["correct_good"].fillna(False).astype(bool) & ~m["correct_bad"].fillna(False).astype(bool)
    ]
    out = m.rename(columns={"response": "response_bad"}).assign(good=good, bad=bad)
    return out[list(FLIP_COLUMNS)].sort_values(["task", "qid"]).reset_index(drop=True)


def only_flip_rows(rows: pd.DataFrame, flipped: pd.DataFrame, bad: str = "mem0") -> pd.DataFrame:
    """The rows of ``rows`` that are the ``bad`` side of a flip in ``flipped`` (same qid,
    backbone and setting), order kept, index reset."""
    key = ["qid", "backbone", "setting"]
    if rows.empty or flipped.empty:
        return rows.iloc[:0].reset_index(drop=True)
    hit = (
        pd.MultiIndex.from_frame(rows[key].astype(str)).isin(
            pd.MultiIndex.from_frame(flipped[key].astype(str))
        )
        & (rows["strategy"] == bad).to_numpy()
    )
    return rows[hit].reset_index(drop=True)


def flip_table(
    preds: pd.DataFrame,
    strategies: Sequence[str] | None = None,
    *,
    include_errors: bool = False,
) -> pd.DataFrame:
    """Flips for every ordered strategy pair, per backbone and setting, with the pair's
    McNemar test (via :func:`clinlib.analysis.stats.pairwise_mcnemar`).

    Args:
        preds: predictions (one prep_model per strategy).
        strategies: strategies to pair (default: all present).
        include_errors: count rows with a transport error.

    Returns:
        One row per (backbone, setting, good, bad): n (paired questions), flips (good right,
        bad wrong), reverse (bad right, good wrong), p_value, p_adj (Holm within the
        backbone × setting family).
    """
    require_columns(preds, REQUIRED_COLUMNS, "predictions")
    p = preds if include_errors else _without_errors(preds)
    if strategies is not None:
        p = p[p["strategy"].isin(list(strategies))]
    cols = ["backbone", "setting", "good", "bad", "n", "flips", "reverse", "p_value", "p_adj"]
    rows = []
    for (bb, st), grp in p.groupby(["backbone", "setting"], sort=True):
        names = sorted(grp["strategy"].unique())
        if len(names) < 2:
            continue
        asked = {n: set(g["qid"]) for n, g in grp.groupby("strategy")}
        pairs = [(a, b) for a in names for b in names if a < b and asked[a] & asked[b]]
        apart = [(a, b) for a in names for b in names if a < b and not asked[a] & asked[b]]
        if apart:  # cells run on different --tasks: not comparable, said in one line
            log.warning(
                "flip_table: backbone %s, setting %s: %d pair(s) share no questions and are "
                "not tested (e.g. %s vs %s)",
                bb,
                st,
                len(apart),
                *apart[0],
            )
        if not pairs:
            continue
        try:
            res = pairwise_mcnemar(grp, cell=("strategy",), pairs=pairs)
        except ValueError as exc:
            raise FailureExplorerError(f"backbone {bb!r}, setting {st!r}: {exc}") from None
        for r in res.to_dict("records"):
            a, b = r["strategy_a"], r["strategy_b"]
            common = dict(backbone=bb, setting=st, n=r["n"], p_value=r["p_value"], p_adj=r["p_adj"])
            rows.append({**common, "good": a, "bad": b, "flips": r["b"], "reverse": r["c"]})
            rows.append({**common, "good": b, "bad": a, "flips": r["c"], "reverse": r["b"]})
    return pd.DataFrame(rows, columns=cols)


def flips_chart(table: pd.DataFrame, backbone: str | None = None, setting: str = "post"):
    """Heat map of flips per ordered strategy pair (rows: right under, columns: wrong under).

    Args:
        table: :func:`flip_table` output.
        backbone: the backbone to draw (default: the first).
        setting: the setting to draw.
    """
    t = table[table["setting"] == setting]
    if t.empty:
        raise FailureExplorerError(f"flip table has no rows for setting {setting!r}")
    bb = backbone if backbone is not None else sorted(t["backbone"].unique())[0]
    t = t[t["backbone"] == bb]
    if t.empty:
        raise FailureExplorerError(f"flip table has no rows for backbone {bb!r}")
    order = sorted(set(t["good"]) | set(t["bad"]))
    base = alt.Chart(t).encode(
        x=alt.X("bad:N", sort=order, title="wrong under"),
        y=alt.Y("good:N", sort=order, title="right under"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("flips:Q", scale=alt.Scale(scheme="reds"), title="flips"),
        tooltip=["good", "bad", "n", "flips", "reverse", alt.Tooltip("p_adj:Q", format=".3g")],
    )
    text = base.mark_text(fontSize=10).encode(text="flips:Q")
    return (rect + text).properties(
        width=300, height=300, title=f"Paired flips · {bb} · setting {setting}"
    )


def kind_counts(flipped: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Flips per anchor event kind (lab, medication, ...; ``none`` for abstention questions).

    Returns:
        Columns kind, n (descending).
    """
    q = questions.set_index("qid")["anchor_event_ids"]
    kinds = []
    for qid in flipped["qid"]:
        ids = as_list(q.get(qid))
        kinds.append(kind_of(str(ids[0])) if len(ids) else "none")
    out = pd.Series(kinds, dtype=object).value_counts().rename_axis("kind").reset_index(name="n")
    return out
