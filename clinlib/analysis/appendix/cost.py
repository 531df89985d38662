"""Table 4 *measured* and Fig. 16 (paper Appendix D), and the cost of building each memory.

- :func:`measured_cost` — per cell, from what the run recorded (not an estimate): input,
  output and cache-read tokens, cache-hit rate, cost, and latency p50 / p95
  (:func:`clinlib.analysis.metrics.cost_table` plus the latency quantiles);
- :func:`cost_beside` — the measured cells, the offline estimate
  (:func:`clinlib.eval.harness.runner.estimate`) and the paper's Table 4 in one long table, in
  Table 4's units (input in millions, output in thousands of tokens, cache hits in %);
- :func:`build_cost_table` / :func:`construction_cost` — prep tokens, cost and seconds of
  every memory, recorded at construction (``Artifact.build_seconds`` / ``prep_usage``);
- :func:`prep_token_rows` / :func:`estimated_prep_cost` — what an LLM prep model (the paper's
  DeepSeek-V3, §4 "Memory prep model") would at least have spent on the memories the kit built
  rule-based (which send nothing and record 0 USD): each patient's dialogue read once, the
  artifact's text written once, at the backbone's prices. An estimate and a lower bound;
- :func:`pareto_views` — the cost-accuracy frontier twice: answer-only and answer +
  construction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis import metrics
from clinlib.analysis.appendix.from_paper import fig16_cells
from clinlib.analysis.metrics.common import CELL, MetricsInputError, num_col, require
from clinlib.data.build import load
from clinlib.dialogue.render import render_dialogue
from clinlib.llm.backbones import get_backbone
from clinlib.llm.tokens import count_texts
from clinlib.llm.types import Backbone
from clinlib.strategies.build_cost import build_cost_rows
from clinlib.strategies.construction import load_artifacts, split_dialogues
from clinlib.strategies.prep import PAPER_PREP_BACKBONE
from clinlib.strategies.registry import get_strategy

# Table 4's units for each metric (data/paper/README.md).
TABLE4_SCALE: dict[str, float] = {
    "cost_usd": 1.0,
    "cost_per_question": 1.0,
    "input_tokens": 1e-6,
    "output_tokens": 1e-3,
    "cache_hit_rate": 100.0,
}
VIEWS: tuple[str, ...] = ("answer only", "answer + construction")


def measured_cost(preds: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """Per cell, what the run recorded (Table 4 measured; Fig. 16).

    Returns:
        :func:`clinlib.analysis.metrics.cost_table` columns + latency_p50_s, latency_p95_s.
    """
    cell = list(cell)
    table = metrics.cost_table(preds, cell=cell)
    lat = num_col(preds, "latency_s", "measured_cost")
    q = (
        preds[cell]
        .assign(_lat=lat.to_numpy())
        .groupby(cell, sort=True, dropna=False)["_lat"]
        .quantile([0.5, 0.95])
        .unstack()
        .reset_index()
    )
    q = q.rename(columns={0.5: "latency_p50_s", 0.95: "latency_p95_s"})
    return table.merge(q, on=cell, how="left")


def _long(df: pd.DataFrame, source: str, metrics_: Sequence[str]) -> pd.DataFrame:
    out = df.melt(
        id_vars=["strategy", "backbone"],
        value_vars=list(metrics_),
        var_name="metric",
        value_name="value",
    )
    out["value"] = out["value"].astype(float) * out["metric"].map(TABLE4_SCALE)
    return out.assign(source=source)


def cost_beside(
    measured: pd.DataFrame, estimate: pd.DataFrame | None, table4: pd.DataFrame | None
) -> pd.DataFrame:
    """Measured cells, the estimate and the paper's Table 4 in Table 4's units.

    Args:
        measured: :func:`measured_cost` output.
        estimate: ``runner.estimate`` output (input_tokens, output_tokens_typical,
            cost_usd_typical, questions per cell and setting) or None.
        table4: ``paper.load_table(4)`` or None (its cost per question recomputed as cost /
            6,271, :func:`clinlib.analysis.appendix.from_paper.fig16_cells`).

    Returns:
        strategy, backbone, source ("measured" / "estimate" / "paper"), metric, value.
    """
    frames = [_long(measured, "measured", list(TABLE4_SCALE))]
    if estimate is not None:
        need = [
            "strategy",
            "backbone",
            "questions",
            "input_tokens",
            "output_tokens_typical",
            "cost_usd_typical",
        ]
        require(estimate, need, "cost_beside (estimate)")
        est = estimate.groupby(["strategy", "backbone"], sort=False)[need[2:]].sum().reset_index()
        est = est.rename(
            columns={"output_tokens_typical": "output_tokens", "cost_usd_typical": "cost_usd"}
        )
        est["cost_per_question"] = est["cost_usd"] / est["questions"]
        frames.append(
            _long(
                est, "estimate", ["cost_usd", "cost_per_question", "input_tokens", "output_tokens"]
            )
        )
    if table4 is not None:
        require(table4, ["strategy", "backbone", "metric", "value"], "cost_beside (table4)")
        # "$/q" is printed to four decimals (cheap cells read 0.0000): recomputed as Fig. 16 does.
        paper = fig16_cells(table4)
        paper = paper[paper["metric"] == "cost_per_question"]
        rest = table4[(table4["strategy"] != "total") & (table4["metric"] != "cost_per_question")]
        paper = pd.concat([rest[["strategy", "backbone", "metric", "value"]], paper])
        frames.append(paper.assign(value=paper["value"].astype(float), source="paper"))
    out = pd.concat(frames, ignore_index=True)
    return out[["strategy", "backbone", "source", "metric", "value"]]


def build_cost_table(
    profile: str | None, strategies: Sequence[str], prep: str = "rule-based", setting: str = "post"
) -> pd.DataFrame:
    """The recorded construction cost of every patient's artifact (built and cached first
    where missing), one row per (strategy, patient): ``clinlib.strategies.build_cost``
    columns."""
    if not strategies:
        raise MetricsInputError("build_cost_table: name at least one strategy")
    frames = [
        build_cost_rows(load_artifacts(s, profile, prep, setting=setting).values())
        for s in strategies
    ]
    return pd.concat(frames, ignore_index=True)


def construction_cost(rows: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: patients, total build seconds, prep tokens and cost (Appendix D).

    Returns:
        strategy, prep_model, n_patients, build_seconds, prep_requests, prep_input_tokens,
        prep_output_tokens, prep_cost_usd.
    """
    cols = [
        "build_seconds",
        "prep_requests",
        "prep_input_tokens",
        "prep_output_tokens",
        "prep_cost_usd",
    ]
    require(rows, ["strategy", "prep_model", "subject_id", *cols], "construction_cost")
    g = rows.groupby(["strategy", "prep_model"], sort=False)
    out = g[cols].sum(min_count=1).reset_index()
    out.insert(2, "n_patients", g["subject_id"].nunique().to_numpy())
    return out


# The keys of an artifact's data that hold what a prep model writes (llm-summary's summary,
# Mem0's memory texts, A-Mem's notes); the rest is bookkeeping (ids, counts, token model).
WRITTEN_KEYS: frozenset[str] = frozenset(
    {"summary", "text", "content", "keywords", "context", "tags"}
)


def _texts(value: object, written: bool = False) -> list[str]:
    """The strings under :data:`WRITTEN_KEYS` in an artifact's JSON data, depth first."""
    if isinstance(value, str):
        return [value] if written else []
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, written or k in WRITTEN_KEYS)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v, written)]
    return []


def prep_token_rows(profile: str | None, strategies: Sequence[str], model: str) -> pd.DataFrame:
    """Per (strategy, patient) of the strategies a prep model builds (``uses_prep``): the
    rendered dialogue's tokens and the tokens of the text the artifact holds (its
    :data:`WRITTEN_KEYS` strings joined by newlines), counted with ``model``'s tokenizer; strategies built without a prep model are
    left out.

    Returns:
        strategy, subject_id, dialogue_tokens, artifact_tokens.
    """
    prepared = [s for s in strategies if get_strategy(s, profile).uses_prep]
    if not prepared:
        raise MetricsInputError("prep_token_rows: none of the strategies uses a prep model")
    groups = split_dialogues(load("dialogues", profile))
    dialogue = dict(
        zip(groups, count_texts([render_dialogue(g) for g in groups.values()], model), strict=True)
    )
    frames = []
    for name in prepared:
        arts = load_artifacts(name, profile, "rule-based")
        n_out = count_texts(["\n".join(_texts(a.data)) for a in arts.values()], model)
        frames.append(
            pd.DataFrame(
                {
                    "strategy": name,
                    "subject_id": list(arts),
                    "dialogue_tokens": [dialogue[s] for s in arts],
                    "artifact_tokens": n_out,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def estimated_prep_cost(rows: pd.DataFrame, backbone: Backbone) -> pd.DataFrame:
    """Per strategy, a lower bound on an LLM prep model's bill (Appendix D): every
    patient's dialogue sent once as input and the artifact written once as output, priced at
    ``backbone``'s rates without cache reads. Real systems send more (Mem0 and A-Mem call the
    model per message or note), so the true construction cost is at least this.

    Args:
        rows: :func:`prep_token_rows` output (strategy, subject_id, dialogue_tokens,
            artifact_tokens).
        backbone: the prep model whose prices apply.

    Returns:
        strategy, prep_model, n_patients, prep_input_tokens, prep_output_tokens, cost_usd.
    """
    require(
        rows,
        ["strategy", "subject_id", "dialogue_tokens", "artifact_tokens"],
        "estimated_prep_cost",
    )
    if rows.empty:
        raise MetricsInputError("estimated_prep_cost: no rows")
    for col in ("dialogue_tokens", "artifact_tokens"):
        values = num_col(rows, col, "estimated_prep_cost")
        if (values < 0).any():
            raise MetricsInputError(f"estimated_prep_cost: column {col!r} has a negative count")
    g = rows.groupby("strategy", sort=False)
    out = pd.DataFrame(
        {
            "prep_model": backbone.name,
            "n_patients": g["subject_id"].nunique(),
            "prep_input_tokens": g["dialogue_tokens"].sum(),
            "prep_output_tokens": g["artifact_tokens"].sum(),
        }
    ).reset_index()
    out["cost_usd"] = [
        backbone.cost(i, o)
        for i, o in zip(out["prep_input_tokens"], out["prep_output_tokens"], strict=True)
    ]
    return out


def paper_prep_estimate(profile: str | None, strategies: Sequence[str]) -> pd.DataFrame:
    """:func:`estimated_prep_cost` of the profile's memories at the paper's fixed prep model
    (DeepSeek-V3, §4 "Memory prep model"; its preset's tokenizer and prices)."""
    backbone = get_backbone(PAPER_PREP_BACKBONE)
    return estimated_prep_cost(prep_token_rows(profile, strategies, backbone.model), backbone)


def pareto_views(
    cells: pd.DataFrame, construction: pd.DataFrame, cost: str = "cost_usd", acc: str = "pooled"
) -> pd.DataFrame:
    """The frontier twice: answer-only cost, and answer + the strategy's
    construction cost (``construction[["strategy", cost]]``; strategies that build nothing
    add 0).

    Returns:
        ``cells`` columns + view, total_cost, pareto (per view).
    """
    require(cells, ["strategy", "backbone", cost, acc], "pareto_views")
    require(construction, ["strategy", cost], "pareto_views (construction)")
    if construction["strategy"].duplicated().any():
        raise MetricsInputError("pareto_views: one construction row per strategy")
    known = cells["strategy"].isin(construction["strategy"])
    add = cells["strategy"].map(construction.set_index("strategy")[cost]).where(known, 0.0)
    if np.isnan(add.to_numpy(float)).any():
        raise MetricsInputError("pareto_views: a construction cost is unknown (NaN)")
    frames = []
    for view, extra in zip(VIEWS, (0.0 * add, add), strict=True):
        df = cells.drop(columns=[c for c in ("pareto",) if c in cells.columns])
        df = df.assign(view=view, total_cost=pd.to_numeric(df[cost]) + extra.to_numpy())
        df["pareto"] = metrics.pareto_frontier(df, cost="total_cost", acc=acc).to_numpy()
        frames.append(df)
    return pd.concat(frames, ignore_index=True)
