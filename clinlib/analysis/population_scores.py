"""PopMedQA's scoreboards as pure functions over population predictions (§4.1, Figs 3, 5, 6).

A prediction row carries ``task``, ``qid``, ``backbone``, ``rendering``, ``prompt`` (``direct``
or ``cot``), ``score`` (the App. C metric of the strictly parsed answer), ``score_all`` (the
same, an unparsed answer counted at :func:`~clinlib.eval.population.answer.failed_score`) and ``parse_failed``.

- Fig. 6, two means per task: "the mean over all the questions in the task" (every answer, an
  unparsed one counted) and "the mean over just the questions the model answered properly (i.e.
  in the correct format)" (:func:`format_means`).
- Fig. 3, win rate: the share of head-to-head comparisons a backbone wins against every other
  backbone on the same (question, rendering, prompt), restricted to questions up to a length
  (:func:`win_rates`).
- Fig. 5, ablation meta-analysis: each dot compares a baseline run and an ablation run of one
  backbone; "a dark dot at -5% indicates that the baseline model won 55% of head-to-head
  comparisons"; "a light dot restricts the scoring to examples where both models gave an
  answer"; diamonds are each family's mean (:func:`ablation_effects`, :func:`family_means`).

In every comparison an unparsed answer loses to a parsed one and ties another unparsed one; a
tie counts half.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.eval.population.answer import failed_score  # noqa: F401 (re-exported)
from clinlib.tasks.population.questions import population_answer

CONDITION = ("rendering", "prompt")
# Fig. 5's families the kit can run: (family, baseline (rendering, prompt), ablation)
ABLATIONS: tuple[tuple[str, tuple[str, str], tuple[str, str]], ...] = (
    ("Prompting", ("descriptions", "direct"), ("codes", "direct")),
    ("Prompting", ("descriptions", "direct"), ("codebook", "direct")),
    ("Reasoning", ("descriptions", "direct"), ("descriptions", "cot")),
)
COMPRESSION_NOTE = (
    "prompt compression (Fig. 5's Compression family) is not run: LLMLingua-2 (llmlingua on "
    "PyPI) compresses with a token classifier whose weights it downloads "
    "(microsoft/llmlingua-2-xlm-roberta-large-meetingbank), and Glyph renders text to images "
    "for a vision model; neither runs here without downloading model weights"
)


def format_means(preds: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6 per (task, backbone, rendering, prompt): ``mean_all`` over every answer (unparsed
    at :func:`~clinlib.eval.population.answer.failed_score`), ``mean_formatted`` over the answers that parsed, their counts
    and ``parse_failed`` (the share that did not)."""
    keys = ["task", "backbone", *CONDITION]
    df = preds.assign(_ok=~preds["parse_failed"].astype(bool))
    df["_fmt"] = df["score"].where(df["_ok"])
    out = df.groupby(keys).agg(
        n=("qid", "size"),
        n_formatted=("_ok", "sum"),
        mean_all=("score_all", "mean"),
        mean_formatted=("_fmt", "mean"),
    )
    out["parse_failed"] = 1.0 - out["n_formatted"] / out["n"]
    out["lower_is_better"] = [
        population_answer(t).lower_is_better for t in out.index.get_level_values("task")
    ]
    return out.reset_index()


def beats(task: str, a: float, a_ok: bool, b: float, b_ok: bool) -> float:
    """1 if answer a beats b, 0.5 on a tie, else 0; an unparsed answer loses to a parsed one
    and ties another unparsed one; the ATE's error is better when lower."""
    if not (a_ok and b_ok):
        return 0.5 if a_ok == b_ok else float(a_ok)
    if population_answer(task).lower_is_better:
        a, b = -a, -b
    return 1.0 if a > b else 0.5 if a == b else 0.0


def _wide(preds: pd.DataFrame, column: str) -> pd.DataFrame:
    return preds.pivot_table(
        index=["qid", "task", *CONDITION], columns="backbone", values=column, aggfunc="last"
    )


def win_rates(preds: pd.DataFrame, lengths: pd.Series, thresholds: Sequence[int]) -> pd.DataFrame:
    """Fig. 3: each backbone's share of comparisons won against every other backbone on the
    same (question, rendering, prompt), counting every row (an unparsed answer loses), over
    the questions whose prompt has at most L tokens (``lengths``: qid -> tokens), each L in
    ``thresholds``. A row a backbone did not answer at all is no comparison."""
    score = _wide(preds, "score")
    ok = _wide(preds.assign(_ok=~preds["parse_failed"].astype(bool)), "_ok")
    names = list(score.columns)
    rows = []
    for limit in thresholds:
        keep = score.index.get_level_values("qid").map(lengths) <= limit
        s, o = score[keep], ok[keep]
        for a in names:
            wins = n = 0.0
            for b in (x for x in names if x != a):
                both = o[a].notna() & o[b].notna()
                for idx in s.index[both]:
                    wins += beats(
                        idx[1], s.at[idx, a], bool(o.at[idx, a]), s.at[idx, b], bool(o.at[idx, b])
                    )
                    n += 1
            rows.append(
                {
                    "backbone": a,
                    "max_tokens": int(limit),
                    "comparisons": int(n),
                    "win_rate": wins / n if n else np.nan,
                }
            )
    return pd.DataFrame(rows)


def _paired(preds: pd.DataFrame, base: tuple[str, str], abl: tuple[str, str]) -> pd.DataFrame:
    cols = ["qid", "task", "backbone", "score", "parse_failed"]
    pick = lambda c: preds[(preds["rendering"] == c[0]) & (preds["prompt"] == c[1])][cols]  # noqa: E731
    return pick(base).merge(pick(abl), on=["qid", "task", "backbone"], suffixes=("_b", "_a"))


def ablation_effects(
    preds: pd.DataFrame,
    ablations: Sequence[tuple[str, tuple[str, str], tuple[str, str]]] = ABLATIONS,
) -> pd.DataFrame:
    """Fig. 5's dots: per backbone and ablation, the ablation's share of head-to-head wins
    against the baseline run on the same questions minus one half (``effect_all``, the dark
    dot: every question, an unparsed answer losing) and the same over the questions both runs
    answered in format (``effect_answered``, the light dot; NaN when there is none)."""
    rows = []
    for family, base, abl in ablations:
        pairs = _paired(preds, base, abl)
        for bb, sub in pairs.groupby("backbone"):
            w = [
                beats(t, a, not fa, b, not fb)
                for t, a, fa, b, fb in zip(
                    sub["task"],
                    sub["score_a"],
                    sub["parse_failed_a"],
                    sub["score_b"],
                    sub["parse_failed_b"],
                    strict=True,
                )
            ]
            both = (
                ~sub["parse_failed_a"].astype(bool) & ~sub["parse_failed_b"].astype(bool)
            ).to_numpy()
            w = np.asarray(w, dtype=float)
            rows.append(
                {
                    "family": family,
                    "backbone": bb,
                    "baseline": "/".join(base),
                    "ablation": "/".join(abl),
                    "n": len(w),
                    "n_answered": int(both.sum()),
                    "effect_all": float(w.mean() - 0.5),
                    "effect_answered": float(w[both].mean() - 0.5) if both.any() else np.nan,
                }
            )
    return pd.DataFrame(rows)


def family_means(effects: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5's diamonds: each family's mean dark and light effect over its dots."""
    return (
        effects.groupby("family")
        .agg(
            dots=("backbone", "size"),
            effect_all=("effect_all", "mean"),
            effect_answered=("effect_answered", "mean"),
        )
        .reset_index()
    )


# --- charts of the scoreboards (notebook 17) ---------------------------------------------


def formats_chart(formats: pd.DataFrame):
    """Fig. 6: per task, each backbone's mean over all answers (solid) and over the answers in
    the correct format (faint), prompt ``direct``, pooled over renderings."""
    d = formats[formats["prompt"] == "direct"]
    d = d.assign(_s=d["mean_all"] * d["n"], _f=d["mean_formatted"] * d["n_formatted"])
    g = d.groupby(["task", "backbone"])[["_s", "_f", "n", "n_formatted"]].sum().reset_index()
    g["all answers"] = g["_s"] / g["n"]
    g["correctly formatted"] = g["_f"] / g["n_formatted"].where(g["n_formatted"] > 0)
    long = g.melt(["task", "backbone"], ["all answers", "correctly formatted"], "mean", "score")
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("backbone:N", title=None),
            x=alt.X("score:Q"),
            yOffset="mean:N",
            color="backbone:N",
            opacity=alt.Opacity("mean:N", scale=alt.Scale(range=[1.0, 0.35])),
        )
        .properties(width=160, height=90)
        .facet(
            facet="task:N",
            columns=5,
            title="Fig. 6: mean over all answers (solid) and correctly formatted ones (faint); P-IPW: absolute error",
        )
        .resolve_scale(x="independent")
    )


def wins_chart(wins: pd.DataFrame):
    """Fig. 3: win rate by maximum question length (descriptions rendering, cl100k_base)."""
    return (
        alt.Chart(wins)
        .mark_line(point=True)
        .encode(
            x=alt.X("max_tokens:Q", title="maximum question length (tokens)"),
            y=alt.Y("win_rate:Q", title="share of comparisons won", scale=alt.Scale(domain=[0, 1])),
            color="backbone:N",
        )
        .properties(title="Fig. 3: head-to-head win rate", width=300, height=200)
    )


def ablations_chart(effects: pd.DataFrame):
    """Fig. 5: one dot per (backbone, ablation), dark over every question, light over those both
    runs answered in format; the family mean as a diamond."""
    long = effects.melt(
        ["family", "backbone", "ablation"], ["effect_all", "effect_answered"], "dot", "effect"
    )
    dots = (
        alt.Chart(long)
        .mark_circle(size=70)
        .encode(
            x=alt.X(
                "effect:Q", axis=alt.Axis(format="%"), title="ablation effect (win share - 50%)"
            ),
            y=alt.Y("family:N"),
            color="backbone:N",
            opacity=alt.Opacity("dot:N", scale=alt.Scale(range=[1.0, 0.35])),
            tooltip=[
                "family",
                "backbone",
                "ablation",
                "dot",
                alt.Tooltip("effect:Q", format=".3f"),
            ],
        )
    )
    means = family_means(effects)
    diamonds = (
        alt.Chart(means)
        .mark_point(shape="diamond", size=160, filled=True, color="black")
        .encode(x="effect_all:Q", y="family:N")
    )
    return (dots + diamonds).properties(
        title="Fig. 5: ablation meta-analysis", width=300, height=120
    )


def decomposition_chart(board: pd.DataFrame):
    """Per task: chance, the per-patient baseline and the group reader (share tasks; P-IPW is
    an absolute error and drawn apart)."""
    long = board.melt(["task"], ["chance", "per_patient", "group"], "reader", "score")
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("task:N"),
            y=alt.Y("score:Q"),
            color=alt.Color("reader:N", sort=["chance", "per_patient", "group"]),
            xOffset=alt.XOffset("reader:N", sort=["chance", "per_patient", "group"]),
            tooltip=["task", "reader", alt.Tooltip("score:Q", format=".3f")],
        )
        .properties(
            title="decomposition: chance, per-patient baseline, group reader (P-IPW: absolute error)",
            width=520,
            height=200,
        )
    )
