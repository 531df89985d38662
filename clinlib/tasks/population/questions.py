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
from clinlib.tasks.population.groups import fit_records, plant, sample_group, subsample
from clinlib.tasks.population.plant import plant_score, plant_signatures
from clinlib.tasks.population.render import RENDERINGS, prepare_group, render_group
from clinlib.tasks.population.spec import TaskIdea
from clinlib.tasks.population.tasks import PopulationAnswer
from clinlib.tasks.registry import SPECS

# Bins of the descriptions rendering (full code descriptions, cl100k_base): the seed's three
# plus small ones that fit small models; 16K is the smallest whose groups of 8-10 full records
# fit (at 8K the admissions, diagnoses and procedures of ten records alone exceed 1.5 x the bin).
QUICK_BINS: tuple[int, ...] = (16_000, 32_000)
PAPER_BINS: tuple[int, ...] = (16_000, 32_000, 64_000, 128_000, 256_000)
SEED_BINS: tuple[int, ...] = (64_000, 128_000, 256_000)  # PopMedQA §2 "64K, 128K, or 256K"
BIN_TOLERANCE: tuple[float, float] = (0.5, 1.5)  # measured / target tokens kept in a bin


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


def _ids_of(pid: Mapping[int, str], sids) -> list[str]:
    return sorted((pid[s] for s in sids), key=int)


def _scores_text(pid: Mapping[int, str], counts: Mapping[int, int], sids) -> str:
    return ", ".join(f"{pid[s]} scored {counts[s]}" for s in sorted(sids, key=lambda s: pid[s]))


def gold_of(
    spec: TaskIdea,
    roles: Mapping[str, list[int]],
    pid: Mapping[int, str],
    planted: Mapping[str, Any],
    variant: Mapping[str, Any],
    rng: np.random.Generator,
) -> tuple[Any, dict[str, Any]]:
    """The gold answer and the stem's fill-ins, from the roles the group was drawn into and the
    recipe of what was planted (:mod:`.plant`), never from the rendered text."""
    ids = lambda sids: _ids_of(pid, sids)  # noqa: E731
    t, fill = spec.task, {}
    if t in ("P-CLQ", "P-OUT"):
        return ids(roles["clique" if t == "P-CLQ" else "outlier"]), fill
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
    if t == "P-CLU":
        return sorted((ids(v) for v in roles.values()), key=lambda g: int(g[0])), fill
    if t == "P-IPW":
        return _ate(spec, planted)
    if t == "P-TST":
        fill = {
            "group_a": ", ".join(ids(roles["group_a"])),
            "group_b": ", ".join(ids(roles["group_b"])),
        }
        return not variant.get("mixed", False), fill
    if t == "P-SIM":
        return ids(roles["similar"]), {"query": pid[roles["query"][0]]}
    if t in ("P-TOP", "P-SRT"):
        counts, rest = planted["counts"], roles["rest"]
        fill = {"examples": _scores_text(pid, counts, roles["example"])}
        if t == "P-SRT":
            return {pid[s]: counts[s] for s in rest}, fill
        return _top_k({pid[s]: counts[s] for s in rest}, spec.k), fill
    n_ex = int(spec.params.get("n_examples", 2))  # P-CLS: labelled examples of each program
    fill = {f"examples_{r}": ", ".join(ids(v[:n_ex])) for r, v in roles.items()}
    return {pid[s]: r.upper() for r, v in roles.items() for s in v[n_ex:]}, fill


def _ate(spec: TaskIdea, planted: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
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


def _top_k(scores: Mapping[str, float], k: int) -> list[str] | None:
    ranked = sorted(scores, key=lambda p: (-scores[p], int(p)))
    if len(ranked) > k and scores[ranked[k - 1]] == scores[ranked[k]]:
        return None  # a tie at the boundary: no unique gold
    return sorted(ranked[:k], key=int)


def carriers_of(
    spec: TaskIdea, roles: Mapping[str, list[int]], variant: Mapping[str, Any], rng
) -> dict[int, int | None]:
    """subject_id -> the signature it carries (the spec's ``plant.carriers``: role -> index);
    a ``mixed`` variant deals the same carriers out at random over the whole group."""
    table = spec.plant.get("carriers", {})
    out = {int(s): table.get(r) for r, v in roles.items() for s in v}
    if variant.get("mixed"):
        sids = sorted(out)
        out = dict(
            zip(sids, rng.permutation(np.array([out[s] for s in sids], dtype=object)), strict=True)
        )
    return out


def counts_of(spec: TaskIdea, roles: Mapping[str, list[int]], rng) -> dict[int, int]:
    """The hidden score of each patient: the examples distinct and non-zero."""
    hi = int(spec.plant.get("max_count", 6))
    out = {int(s): int(rng.integers(0, hi + 1)) for s in roles["rest"]}
    ex = rng.choice(np.arange(1, hi + 1), size=len(roles["example"]), replace=False)
    return out | {int(s): int(c) for s, c in zip(roles["example"], ex, strict=True)}


def _plant(spec, ev, roles, attrs, variant, rng) -> tuple[pd.DataFrame, dict[str, Any]] | str:
    p = spec.plant
    if p.get("pattern") == "signature":
        carriers = carriers_of(spec, roles, variant, rng)
        n_sig = max(v for v in p["carriers"].values()) + 1
        return plant_signatures(ev, carriers, n_sig, int(p.get("m", 3)), rng)
    if p.get("pattern") == "score":
        return plant_score(ev, counts_of(spec, roles, rng), rng)
    return ev, {}


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
    renderings: Sequence[str] = RENDERINGS,
    roster: Mapping[str, list[int]] | None = None,
) -> dict[str, Any] | str:
    """One question with its ``renderings`` (default all three; :func:`render_rest` adds the
    others), or the reason it could not be made. With ``roster`` (the idea's cohorts built at
    N_max, :func:`~clinlib.tasks.population.groups.sample_cohorts`) the group is subsampled
    from it; without, drawn afresh from the pool."""
    rng = np.random.default_rng(seed)
    if roster is None:
        roles = sample_group(spec, attrs, n, variant, rng)
    else:
        roles = subsample(spec, roster, n, variant, rng)
    if isinstance(roles, str):
        return roles
    sids = sorted(s for v in roles.values() for s in v)
    ev = events[events["subject_id"].isin(sids)]
    ev, planted = plant(spec, ev, roles, attrs, rng)  # the confounded ATE, before fitting
    ev = fit_records(ev, sids, bin_tokens, count)
    got = _plant(spec, ev, roles, attrs, variant, rng)  # signatures on the fitted records
    if isinstance(got, str):
        return got
    ev, recipe = got
    planted = {**planted, **recipe}
    pid = _pids(sids, rng)
    try:
        gold, fill = gold_of(spec, roles, pid, planted, variant, rng)
    except ValueError as exc:  # positivity: a stratum all treated or all untreated
        return f"no gold ({str(exc).split(':')[0]})"
    if gold is None:
        return "no unique gold (a tie at the top-k boundary)"
    order = [(pid[s], s) for s in rng.permutation(sids).tolist()]
    prepared = prepare_group(ev, order)  # sorted and printed once for every rendering
    rendered = {r: render_group(prepared, order, r) for r in renderings}
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
        "plan": (prepared, order),
    }


def render_rest(q: dict[str, Any]) -> dict[str, Any]:
    """``q`` with every rendering of :data:`RENDERINGS` it lacks rendered from its plan (the
    stage renders the descriptions first, to measure the length before the other two)."""
    prepared, order = q["plan"]
    missing = {r: render_group(prepared, order, r) for r in RENDERINGS if r not in q["rendered"]}
    return {**q, "rendered": {r: {**q["rendered"], **missing}[r] for r in RENDERINGS}}


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
