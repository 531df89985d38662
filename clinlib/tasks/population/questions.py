"""Population questions generated jointly with their gold (PopMedQA §2.1 "PopMedQA Pipeline":
"the questions and the data involved in the answers must be jointly generated"), one per
(task idea, group size, length bin, variant), each rendered three ways.

The gold comes from the cohorts a group was drawn from and from the planted values, never from
the text; :mod:`clinlib.tasks.population.solve` then recovers it from each rendered prompt and
:mod:`clinlib.tasks.population.gates` drops a question any rendering of which it cannot solve.
Answer schemas (App. A): a JSON list of patient ids (clique, outliers, similarity, top-k,
sorting), an object id -> bool (in-context classification) or id -> class (classification), a
list of lists (clustering), a number (ATE), true / false (two-sample test).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.tasks.population import metrics
from clinlib.tasks.population.groups import concept_sets, fit_records, plant, sample_group
from clinlib.tasks.population.render import RENDERINGS, Rendered, render_group
from clinlib.tasks.population.spec import TaskIdea
from clinlib.tasks.population.tasks import PopulationAnswer
from clinlib.tasks.registry import SPECS

QUICK_BINS: tuple[int, ...] = (8_000, 24_000)  # small bins that fit small models
PAPER_BINS: tuple[int, ...] = (32_000, 64_000, 128_000, 256_000)
SEED_BINS: tuple[int, ...] = (64_000, 128_000, 256_000)  # PopMedQA §2 "64K, 128K, or 256K"
BIN_TOLERANCE: tuple[float, float] = (0.5, 1.5)  # measured / target tokens kept in a bin
SRT_RANK = {"high": 3, "medium": 2, "low": 1}


def prompt_text(question: str, context: str) -> str:
    """The population prompt body: the group's records, then the question (the seed's order)."""
    return f"{context}\n\n{question}"


def split_prompt(text: str) -> tuple[str, str]:
    """(context, question) of a :func:`prompt_text`: the question is the text after the last
    record's final line (records and the codebook are blocks separated by a blank line)."""
    blocks = text.split("\n\n")
    i = max(j for j, b in enumerate(blocks) if b.startswith("=== Patient ID:"))
    return "\n\n".join(blocks[: i + 1]), "\n\n".join(blocks[i + 1 :])


def task_of(question: str, specs: Sequence[TaskIdea]) -> str | None:
    """The task whose template ``question`` was rendered from (None if none matches)."""
    for spec in specs:
        parts = re.split(r"\{[a-z_]+\}", spec.question)
        rx = "(?s)" + ".*?".join(re.escape(p) for p in parts)
        if re.fullmatch(rx, question):
            return spec.task
    return None


def qid_of(spec: TaskIdea, n: int, bin_tokens: int, variant: Mapping, seed: int) -> str:
    key = json.dumps([spec.task, spec.name, n, bin_tokens, dict(variant), seed], sort_keys=True)
    return f"{spec.task}-" + hashlib.sha1(key.encode()).hexdigest()[:10]


def _pids(sids: Sequence[int], rng: np.random.Generator) -> dict[int, str]:
    nums = rng.choice(np.arange(1000, 10000), size=len(sids), replace=False)
    return {int(s): str(int(p)) for s, p in zip(sids, nums, strict=True)}


def gold_of(
    spec: TaskIdea,
    roles: Mapping[str, list[int]],
    pid: Mapping[int, str],
    events: pd.DataFrame,
    planted: Mapping[str, Any],
    variant: Mapping[str, Any],
    rng: np.random.Generator,
) -> tuple[Any, dict[str, Any]]:
    """The gold answer and the stem's fill-ins (test ids, group lists, query id, ...)."""
    ids = lambda sids: sorted((pid[s] for s in sids), key=int)  # noqa: E731
    t, fill = spec.task, {}
    if t == "P-CLQ":
        return ids(planted["clique"]), fill
    if t == "P-ICC":
        n_test = int(spec.params.get("n_test", 2))
        pos, neg = list(roles["positive"]), list(roles["negative"])
        tp, tn = pos[: n_test // 2], neg[: n_test - n_test // 2]
        test = sorted(tp + tn, key=lambda s: pid[s])
        fill = {
            "positive": ", ".join(ids(pos[len(tp) :])),
            "negative": ", ".join(ids(neg[len(tn) :])),
            "test": ", ".join(pid[s] for s in rng.permutation(test)),
        }
        return {pid[s]: s in tp for s in test}, fill
    if t in ("P-CLU",):
        return sorted((ids(v) for v in roles.values()), key=lambda g: int(g[0])), fill
    if t == "P-IPW":
        sids = sorted(planted["treated"])
        tr = [planted["treated"][s] for s in sids]
        e = metrics.stratum_propensity(tr, [planted["confounder"][s] for s in sids])
        p = spec.plant
        fill = {
            "treatment": p["treatment"]["label"],
            "confounder": f"{p['confounder_label']} ({p['confounder']})",
            "outcome": f"{p['outcome']['label']} (loinc//{p['outcome']['code']})",
        }
        return round(metrics.hajek_ate(tr, [planted["outcome"][s] for s in sids], e), 3), fill
    if t == "P-OUT":
        return ids(roles["outlier"]), fill
    if t == "P-TST":
        fill = {
            "group_a": ", ".join(ids(roles["group_a"])),
            "group_b": ", ".join(ids(roles["group_b"])),
        }
        return variant["a"] != variant["b"], fill
    if t == "P-SIM":
        return _similar(spec, roles, pid, events)
    if t in ("P-TOP", "P-SRT"):
        adm = events[events["kind"] == "admission"].groupby("subject_id").size()
        sids = [s for r in roles.values() for s in r]
        if t == "P-SRT":
            return {pid[s]: SRT_RANK[r] for r, v in roles.items() for s in v}, fill
        return _top_k({pid[s]: int(adm.get(s, 0)) for s in sids}, spec.k), fill
    return {pid[s]: r for r, v in roles.items() for s in v}, fill  # P-CLS


def _top_k(scores: Mapping[str, float], k: int) -> list[str] | None:
    ranked = sorted(scores, key=lambda p: (-scores[p], int(p)))
    if len(ranked) > k and scores[ranked[k - 1]] == scores[ranked[k]]:
        return None  # a tie at the boundary: no unique gold
    return sorted(ranked[:k], key=int)


def _similar(spec, roles, pid, events) -> tuple[Any, dict[str, Any]]:
    sets = concept_sets(events, kinds=("diagnosis",))
    (q,) = roles["query"]
    others = [s for r, v in roles.items() if r != "query" for s in v]
    qs = sets.get(q, set())
    score = {
        pid[s]: len(qs & sets.get(s, set())) / max(len(qs | sets.get(s, set())), 1) for s in others
    }
    return _top_k(score, spec.k), {"query": pid[q]}


def stem_of(spec: TaskIdea, n: int, fill: Mapping[str, Any]) -> str:
    return spec.question.format(n=n, k=spec.k, **fill)


def make_question(
    spec: TaskIdea,
    attrs: pd.DataFrame,
    events: pd.DataFrame,
    n: int,
    bin_tokens: int,
    variant: Mapping[str, Any],
    seed: int,
    count: Callable[[str], int],
) -> dict[str, Any] | str:
    """One question with its three renderings, or the reason it could not be made."""
    rng = np.random.default_rng(seed)
    roles = sample_group(spec, attrs, n, variant, rng)
    if isinstance(roles, str):
        return roles
    sids = sorted(s for v in roles.values() for s in v)
    ev = events[events["subject_id"].isin(sids)]
    ev, planted = plant(spec, ev, roles, attrs, rng)
    ev = fit_records(ev, sids, bin_tokens, count)
    pid = _pids(sids, rng)
    try:
        gold, fill = gold_of(spec, roles, pid, ev, planted, variant, rng)
    except ValueError as exc:  # positivity: a stratum all treated or all untreated
        return f"no gold ({str(exc).split(':')[0]})"
    if gold is None:
        return "no unique gold (a tie at the top-k boundary)"
    order = [(pid[s], s) for s in rng.permutation(sids).tolist()]
    rendered: dict[str, Rendered] = {r: render_group(ev, order, r) for r in RENDERINGS}
    return {
        "qid": qid_of(spec, n, bin_tokens, variant, seed),
        "task": spec.task,
        "spec": spec.name,
        "variant": json.dumps(dict(variant), sort_keys=True),
        "n_patients": n,
        "bin_tokens": bin_tokens,
        "question": stem_of(spec, n, fill),
        "gold": json.dumps(gold, sort_keys=True),
        "pids": [p for p, _ in order],
        "subject_ids": [int(s) for _, s in order],
        "roles": json.dumps({pid[s]: r for r, v in roles.items() for s in v}, sort_keys=True),
        "rendered": rendered,
    }


def population_answer(task: str) -> PopulationAnswer:
    """The answer schema and metric of population task ``task`` (its spec's ``answer``)."""
    spec = SPECS.get(task)
    if spec is None or spec.family != "population":
        raise ValueError(f"unknown population task {task!r}")
    return spec.answer


def score(task: str, answer: Any, gold: Any) -> float:
    """The task's App. C metric of a parsed answer against the gold (see :mod:`metrics`)."""
    return population_answer(task).metric(answer, gold)


def is_perfect(task: str, value: float) -> bool:
    return abs(value - population_answer(task).best) < 1e-9
