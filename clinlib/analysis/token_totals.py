"""Token totals per (strategy, backbone) over the whole question set beside the paper's Table 4
(Appendix D; notebook 10).

- :func:`token_totals` — one row per cell from :func:`clinlib.eval.harness.runner.estimate`: input tokens,
  typical output tokens and their cost at the preset's prices;
- :func:`input_ratios` — each strategy's input tokens over full-context's (mean over the
  backbones), ours beside Table 4's (structured-timeline 0.93, dense 0.55, A-Mem 0.32, Mem0
  0.17, last-visit 0.14, summary 0.13);
- :func:`recompute_table4_costs` — Table 4's cost cells recomputed from its own tokens and
  cache-hit rate at each preset's prices, flagging cells that do not fit (its Haiku cells fit
  $0.80 / $4 per million, Claude 3.5 Haiku's prices, not the preset's $1 / $5);
- :func:`full_context_vs_table4` — our full-context input tokens beside Table 4's "Input (M)".
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from clinlib.llm.presets import PRESETS

FULL = "full-context"
TOTAL_COLUMNS = ("strategy", "backbone", "input_tokens", "output_tokens", "cost_usd")
# Relative difference beyond which a recomputed Table 4 cost "does not fit" its printed value
# (cells print 2-3 significant digits of tokens, so honest recomputations land within ~2 %).
COST_TOL = 0.05
CENT = 0.01  # printed costs are rounded to cents: a tiny cell fits within a cent
TOKEN_TOL = 0.25  # the target: full-context input tokens within +-25 % of Table 4


def token_totals(estimate: pd.DataFrame) -> pd.DataFrame:
    """Per cell: input tokens, typical output tokens and typical cost, summed over settings."""
    cols = {
        "input_tokens": "input_tokens",
        "output_tokens_typical": "output_tokens",
        "cost_usd_typical": "cost_usd",
    }
    out = estimate.groupby(["strategy", "backbone"], sort=False)[list(cols)].sum()
    return out.rename(columns=cols).reset_index()[list(TOTAL_COLUMNS)]


def _table4_wide(table4: pd.DataFrame) -> pd.DataFrame:
    cells = table4[table4["strategy"] != "total"]
    return cells.pivot_table(index=["strategy", "backbone"], columns="metric", values="value")


def _ratios(inputs: pd.Series) -> pd.Series:
    """input(strategy, backbone) / input(full-context, backbone), averaged over backbones."""
    df = inputs.rename("x").reset_index()
    full = df[df["strategy"] == FULL].set_index("backbone")["x"]
    df["ratio"] = df["x"] / df["backbone"].map(full)
    return df.groupby("strategy", sort=False)["ratio"].mean()


def input_ratios(totals: pd.DataFrame, table4: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: ours and Table 4's input-token ratio to full-context (mean over the
    backbones each has), and ours minus the paper's."""
    ours = _ratios(totals.set_index(["strategy", "backbone"])["input_tokens"])
    paper = _ratios(_table4_wide(table4)["input_tokens"])
    df = pd.DataFrame({"ours": ours, "paper": paper}).rename_axis("strategy").reset_index()
    df["diff"] = df["ours"] - df["paper"]
    return df.sort_values("paper", ascending=False, na_position="last").reset_index(drop=True)


def recompute_table4_costs(
    table4: pd.DataFrame,
    prices: Mapping[str, tuple[float, float, float]] | None = None,
    tol: float = COST_TOL,
) -> pd.DataFrame:
    """Table 4's cost cells from its tokens: ``input x ((1 - h) x p_in + h x p_cache) + output x
    p_out`` with h the cell's cache-hit rate and prices in USD per million tokens.

    Args:
        table4: clinlib.analysis.paper.load_table(4).
        prices: backbone -> (input, output, cache read) USD per million (default: the presets).
        tol: relative difference above which a cell is flagged as not fitting (a cell within
            a cent of its printed cost always fits).

    Returns:
        strategy, backbone, input_m, output_k, cache_hit, printed, recomputed, rel_diff, fits.
    """
    if prices is None:
        prices = {
            n: (b.price_input, b.price_output, b.price_cache_read) for n, b in PRESETS.items()
        }
    wide = _table4_wide(table4).reset_index()
    rows = []
    for r in wide.itertuples():
        p_in, p_out, p_cache = prices[r.backbone]
        h = r.cache_hit_rate / 100
        cost = r.input_tokens * ((1 - h) * p_in + h * p_cache) + r.output_tokens / 1000 * p_out
        rel = (cost - r.cost_usd) / r.cost_usd if r.cost_usd else float("nan")
        rows.append(
            dict(
                strategy=r.strategy,
                backbone=r.backbone,
                input_m=r.input_tokens,
                output_k=r.output_tokens,
                cache_hit=r.cache_hit_rate,
                printed=r.cost_usd,
                recomputed=round(cost, 2),
                rel_diff=round(rel, 3),
                fits=bool(abs(rel) <= tol or abs(cost - r.cost_usd) <= CENT),
            )
        )
    return pd.DataFrame(rows)


def full_context_vs_table4(totals: pd.DataFrame, table4: pd.DataFrame) -> pd.DataFrame:
    """Per backbone: our full-context input tokens (M) beside Table 4's "Input (M)", their
    ratio and whether it is within :data:`TOKEN_TOL`."""
    ours = totals[totals["strategy"] == FULL].set_index("backbone")["input_tokens"] / 1e6
    paper = _table4_wide(table4)["input_tokens"].xs(FULL, level="strategy")
    df = pd.DataFrame({"ours_m": ours, "paper_m": paper}).dropna().rename_axis("backbone")
    df["ratio"] = df["ours_m"] / df["paper_m"]
    df["within_25pct"] = (df["ratio"] - 1).abs() <= TOKEN_TOL
    return df.reset_index()
