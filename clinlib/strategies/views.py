"""Notebook helpers for notebooks/05_representations (paper §4 strategies side by side;
Appendix C.2 retrieval hit rates; Appendix C.3 compression footprints).

Thin wrappers that load or build artifacts through the construction cache and return tidy
DataFrames and altair charts, so the notebook stays a few calls per cell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.data.build import load
from clinlib.strategies import PAPER_STRATEGIES, get_strategy
from clinlib.strategies.base import context_for
from clinlib.strategies.cache import ConstructionCache, constructions_dir
from clinlib.strategies.construction import question_contexts, split_dialogues
from clinlib.strategies.facts import facts_of
from clinlib.strategies.footprints import (
    HIT_KS,
    PAPER_HIT_N,
    PAPER_HIT_RATES,
    footprints,
    hit_rates,
    retrieval_hits,
)
from clinlib.strategies.prep import count_text_tokens, get_prep
from clinlib.strategies.registry import LOCAL_STRATEGIES
from clinlib.tasks.base import TASKS

ALL_STRATEGIES: tuple[str, ...] = LOCAL_STRATEGIES  # offline: no outside service
RANKING_STRATEGIES: tuple[str, ...] = ("dense-retrieval", "bm25", "hybrid", "a-mem")
PREVIEW_CHARS = 240


def _dialogues(profile: str, dialogues: pd.DataFrame | None) -> pd.DataFrame:
    return dialogues if dialogues is not None else load("dialogues", profile)


def artifacts_for(
    strategy: str,
    groups: Mapping[int, pd.DataFrame],
    profile: str | None = None,
    prep: str = "rule-based",
    **params: Any,
) -> dict[int, Any]:
    """subject_id -> artifact for the given dialogues (cached, built where missing)."""
    name = resolve_profile(profile)
    strat = get_strategy(strategy, profile=name, **params)
    prep_model = get_prep(prep, profile=name)
    cache = ConstructionCache(constructions_dir(name))
    return {sid: cache.get_or_build(strat, sid, g, prep_model) for sid, g in groups.items()}


def side_by_side(
    question: Mapping[str, Any],
    profile: str | None = None,
    strategies: Sequence[str] = ALL_STRATEGIES,
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
    needles: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One question seen through every strategy.

    Args:
        question: a question row (or any mapping with question + subject_ids).
        profile: build profile.
        strategies: registry names.
        prep: prep model.
        dialogues: the turns (default: the profile's dialogues.parquet).
        needles: label -> regular expression; a boolean column per needle says whether the
            context matches it (see :func:`value_needles`).

    Returns:
        One row per strategy: strategy, family, derived, prep_model, context_tokens, needle
        columns, preview (first characters of the context).
    """
    name = resolve_profile(profile)
    sids = [int(s) for s in question["subject_ids"]]
    groups = split_dialogues(_dialogues(name, dialogues), sids)
    rows = []
    for s in strategies:
        strat = get_strategy(s, profile=name)
        arts = artifacts_for(s, groups, name, prep)
        ctx = context_for(question, strat, arts, groups)
        row = {
            "strategy": s,
            "family": strat.family,
            "derived": strat.derived,
            "prep_model": strat.prep_id(get_prep(prep, profile=name)),
            "context_tokens": count_text_tokens(ctx),
        }
        for label, pattern in (needles or {}).items():
            row[label] = re.search(pattern, ctx) is not None
        row["preview"] = ctx[:PREVIEW_CHARS].replace("\n", " / ")
        rows.append(row)
    return pd.DataFrame(rows)


def footprint_table(
    profile: str | None = None,
    strategies: Sequence[str] = PAPER_STRATEGIES,
    prep: str = "rule-based",
    subjects: Iterable[int] | None = None,
    questions: pd.DataFrame | None = None,
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Footprints (Appendix C.3) of several strategies, one row per (patient, strategy)."""
    name = resolve_profile(profile)
    groups = split_dialogues(_dialogues(name, dialogues), subjects)
    frames = []
    for s in strategies:
        strat = get_strategy(s, profile=name)
        arts = artifacts_for(s, groups, name, prep)
        q = None
        if questions is not None:
            q = questions[questions["subject_ids"].apply(lambda x: int(list(x)[0]) in groups)]
        frames.append(footprints(strat, arts, groups, q))
    return pd.concat(frames, ignore_index=True)


def hit_table(
    questions: pd.DataFrame,
    profile: str | None = None,
    strategies: Sequence[str] = RANKING_STRATEGIES,
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
    ks: Iterable[int] = HIT_KS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-question hits and per-task hit@k rates (Appendix C.2) for ranking strategies.

    Returns:
        (hits with a ``strategy`` column, rates with a ``strategy`` column).
    """
    name = resolve_profile(profile)
    wanted = {int(s) for ids in questions["subject_ids"] for s in ids}
    groups = split_dialogues(_dialogues(name, dialogues), wanted)
    hits, rates = [], []
    for s in strategies:
        strat = get_strategy(s, profile=name)
        arts = artifacts_for(s, groups, name, prep)
        strat.warm_queries(questions.to_dict("records"))  # one encoder batch, not one per question
        h = retrieval_hits(questions, strat, arts, groups, ks)
        hits.append(h.assign(strategy=s))
        rates.append(hit_rates(h).assign(strategy=s))
    return pd.concat(hits, ignore_index=True), pd.concat(rates, ignore_index=True)


def hit_long(rates: pd.DataFrame) -> pd.DataFrame:
    """:func:`hit_table` rates in long form: strategy, task (``all`` for the overall row), k,
    hit_rate — the layout of ``figures/05_retrieval_hits.csv``."""
    kcols = [c for c in rates.columns if c.startswith("hit@")]
    long = rates.melt(
        id_vars=["strategy", "task"], value_vars=kcols, var_name="k", value_name="hit_rate"
    )
    long["k"] = long["k"].str.replace("hit@", "").astype(int)
    long["task"] = long["task"].replace({"overall": "all"})
    return long.sort_values(["strategy", "task", "k"], kind="stable").reset_index(drop=True)[
        ["strategy", "task", "k", "hit_rate"]
    ]


def hits_beside_paper(rates: pd.DataFrame, strategy: str = "dense-retrieval") -> pd.DataFrame:
    """One strategy's hit@k per task beside the paper's BGE-M3 figures (Appendix C.2): the
    kit's n and hit@k, the paper's eligible n per task, and its hit@k on the ``all`` row (the
    paper prints per-task rates only as bars)."""
    mine = rates[rates["strategy"] == strategy].drop(columns="strategy").copy()
    mine["task"] = mine["task"].replace({"overall": "all"})
    mine.insert(2, "paper_n", mine["task"].map({**PAPER_HIT_N, "all": sum(PAPER_HIT_N.values())}))
    for k, v in PAPER_HIT_RATES.items():
        mine[f"paper hit@{k}"] = [v if t == "all" else float("nan") for t in mine["task"]]
    return mine.reset_index(drop=True)


def hit_chart(rates: pd.DataFrame) -> alt.Chart:
    """Overall hit@k per strategy, with the paper's BGE-M3 rates as a reference line."""
    overall = rates[rates["task"] == "overall"]
    kcols = [c for c in overall.columns if c.startswith("hit@")]
    long = overall.melt(id_vars=["strategy"], value_vars=kcols, var_name="k", value_name="rate")
    long["k"] = long["k"].str.replace("hit@", "").astype(int)
    paper = pd.DataFrame(
        {
            "k": list(PAPER_HIT_RATES),
            "rate": list(PAPER_HIT_RATES.values()),
            "strategy": "paper (BGE-M3)",
        }
    )
    data = pd.concat([long, paper], ignore_index=True)
    return (
        alt.Chart(data, title="Retrieval hit@k of the anchor visit")
        .mark_line(point=True)
        .encode(
            x=alt.X("k:O", title="k"),
            y=alt.Y("rate:Q", title="hit rate", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("strategy:N", title="strategy"),
            strokeDash=alt.condition(
                alt.datum.strategy == "paper (BGE-M3)", alt.value([4, 3]), alt.value([1, 0])
            ),
        )
        .properties(width=260, height=220)
    )


def footprint_chart(fp: pd.DataFrame) -> alt.Chart:
    """Per-patient stored tokens by strategy (box plot, log scale)."""
    data = fp[fp["store_tokens"] > 0][["strategy", "store_tokens"]]
    return (
        alt.Chart(data, title="Tokens held per patient")
        .mark_boxplot(extent="min-max")
        .encode(
            x=alt.X("store_tokens:Q", title="tokens (log)", scale=alt.Scale(type="log")),
            y=alt.Y("strategy:N", title=None, sort="-x"),
        )
    )


def items_chart(fp: pd.DataFrame) -> alt.HConcatChart:
    """Appendix C.3 panels: Mem0 facts, A-Mem notes and summary words per patient."""
    panels = []
    for strategy, label in (
        ("mem0", "Mem0 facts"),
        ("a-mem", "A-Mem notes"),
        ("llm-summary", "LLM-summary words"),
    ):
        data = fp[fp["strategy"] == strategy][["n_items"]]
        panels.append(
            alt.Chart(data, title=label)
            .mark_bar()
            .encode(
                x=alt.X("n_items:Q", bin=alt.Bin(maxbins=15), title="per patient"),
                y=alt.Y("count():Q", title="patients"),
            )
            .properties(width=220, height=160)
        )
    return alt.hconcat(*panels).properties(title="Compression footprints per patient")


def load_questions(profile: str | None = None) -> pd.DataFrame | None:
    """The profile's questions.parquet, or None when the question stage has not run."""
    path = artifact_path("questions.parquet", resolve_profile(profile))
    return pd.read_parquet(path) if path.exists() else None


def pick_patients(
    dialogues: pd.DataFrame, questions: pd.DataFrame | None = None, n: int = 6
) -> list[int]:
    """``n`` patients with the fewest visits (cheap to embed), preferring patients that have
    a T3 positive and a T1 question (so every section of the notebook has material)."""
    visits = dialogues.groupby("subject_id")["visit_idx"].nunique().sort_values(kind="stable")
    if questions is None or questions.empty:
        return [int(s) for s in visits.index[:n]]
    first = questions["subject_ids"].apply(lambda x: int(list(x)[0]))
    t3 = set(first[(questions["task"] == "T3") & (questions["injection"].astype(str) != "")])
    t1 = set(first[questions["task"] == "T1"])
    ranked = sorted(visits.index, key=lambda s: (s not in t3, s not in t1, visits[s], s))
    return [int(s) for s in ranked[:n]]


def demo_question(turns: pd.DataFrame) -> dict[str, Any]:
    """A T1-style question about the patient's first lab that was measured more than once
    (used when no question set is available)."""
    labs = [f for f in facts_of(turns) if f.kind == "lab"]
    names = [f.name for f in labs]
    target = next((f for f in labs if names.count(f.name) > 1), labs[0] if labs else None)
    sid = int(turns["subject_id"].iloc[0])
    if target is None:
        return {
            "qid": "demo",
            "task": "T1",
            "subject_ids": [sid],
            "question": "What happened at the last encounter?",
        }
    return {
        "qid": "demo",
        "task": "T1",
        "subject_ids": [sid],
        "question": f"What was the patient's {target.name} on {target.date}?",
        "gold": f"{target.value} {target.unit}",
    }


def injection_table(
    question: Mapping[str, Any],
    profile: str | None = None,
    strategies: Sequence[str] = PAPER_STRATEGIES,
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """For a question with an injection: is the injected sentence in the context, per
    strategy, when it is injected after (post) or before (pre) construction? (§5.5)"""
    name = resolve_profile(profile)
    text = json.loads(question["injection"])["text"]
    q = pd.DataFrame([dict(question)])
    turns = _dialogues(name, dialogues)
    rows = []
    for s in strategies:
        row = {"strategy": s}
        for setting in ("post", "pre"):
            ctx = question_contexts(q, s, name, setting, prep, dialogues=turns)
            row[f"{setting}: injected sentence in context"] = text in ctx["context"].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows)


def _first_subject(questions: pd.DataFrame) -> pd.Series:
    return questions["subject_ids"].apply(lambda x: int(list(x)[0]))


def questions_of(questions: pd.DataFrame | None, subjects: Iterable[int]) -> pd.DataFrame | None:
    """The questions whose patients are all among ``subjects`` (None passes through)."""
    if questions is None:
        return None
    keep = {int(s) for s in subjects}
    return questions[questions["subject_ids"].apply(lambda x: all(int(s) in keep for s in x))]


def example_question(
    questions: pd.DataFrame | None, turns: pd.DataFrame, task: str = "T1"
) -> dict[str, Any]:
    """A question of ``task`` about this patient, else :func:`demo_question`."""
    sid = int(turns["subject_id"].iloc[0])
    if questions is not None:
        pool = questions[(questions["task"] == task) & (_first_subject(questions) == sid)]
        spec = TASKS.get(task)
        if spec is not None and spec.example_column:
            pool = pool[pool[spec.example_column].astype(str) != ""]
        if len(pool):
            return dict(pool.iloc[0])
    return demo_question(turns)


def _needle_gap(unit: str, others: Sequence[str]) -> str:
    """What may stand between a lab's name and one of its values: up to 40 non-numeric
    characters, event-id tags (``[LAB-427]``), dates, and this lab's other values with its unit
    (a summary's ``1.2 mg/dL on <date> (first 1.1 mg/dL``); never a sentence end, another lab's
    name or a bare number (a reference range's ``0.5 to 1.2 mg/dL`` is not a value)."""
    token = (
        r"\[[^\]\n]{0,40}\]|\d{4}-\d\d-\d\d(?: \d\d:\d\d)?"
        rf"|\d+(?:\.\d+)? {re.escape(unit)}|[^.;\n\d\[]"
    )
    stop = "|".join(re.escape(o) for o in sorted(others, key=len, reverse=True))
    not_other = f"(?!{stop})" if stop else ""
    return rf"(?:{not_other}(?:{token})){{0,40}}?(?<![\d.])"


def value_needles(turns: pd.DataFrame, question: Mapping[str, Any], n: int = 3) -> dict[str, str]:
    """Up to ``n`` distinct values of the lab the question asks about (or the patient's first
    lab), as ``{"<lab> <value> <unit> (<date>)": regex}`` for :func:`side_by_side`: the lab's
    name followed by that value and unit, with only what :func:`_needle_gap` allows between."""
    labs = [f for f in facts_of(turns) if f.kind == "lab"]
    if not labs:
        return {}
    asked = [f for f in labs if f.name in question["question"]]
    name = (asked or labs)[0].name
    others = sorted({f.name for f in labs if f.name != name})
    out: dict[str, str] = {}
    for f in labs:
        if f.name != name:
            continue
        gap = _needle_gap(f.unit, others)
        pattern = re.escape(f.name) + gap + re.escape(f"{f.value} {f.unit}")
        if pattern not in out.values():
            out[f"{f.name} {f.value} {f.unit} ({f.date})"] = pattern
    return dict(list(out.items())[:n])
