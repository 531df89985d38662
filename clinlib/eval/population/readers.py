"""Offline readers for population questions : deterministic policies,
not language models, registered as offline backbones so the population harness runs them like
any other backbone.

- ``population-solver`` (group reader, ceiling): the independent checker
  (:mod:`clinlib.tasks.population.checker`), which compares the patients with each other over
  the prompt it is sent. It is the agreement gate's checker, so on a kept question it scores
  the best value by construction; it shows what the prompt determines, not what a model can do.
  The population stage's agreement gate already ran the checker on every kept (question,
  rendering) and kept each answer under a digest of its input (``population_checks.parquet``);
  asked a prompt whose (task, question, records) digest is there, the reader answers with that
  answer instead of solving the same text a second time (a build without the file: solved).
- ``population-per-patient`` (decomposition baseline): one patient's rendering at a time,
  combined by the task's obvious rule (:mod:`clinlib.eval.population.per_patient`).
- ``population-overlap`` (non-LLM baseline): code-overlap similarity only, no clinical
  knowledge: Jaccard similarity of the concept sets each record prints; agglomerative
  clustering (scikit-learn, average linkage on 1 - Jaccard) for clustering; 1-nearest-neighbour
  for in-context classification; the unadjusted difference in mean outcome for the ATE; the
  least similar records as outliers; within- vs between-group similarity for the two-sample
  test; record length for top-k and sorting; for classification, each record takes the
  program of its most similar labelled example (1-nearest-neighbour, as for in-context
  classification; no answer is hard-coded).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from clinlib.core.config import artifact_path
from clinlib.eval.population.counts import count_messages_by_lines
from clinlib.eval.population.per_patient import naive_effect, per_patient_answer
from clinlib.llm import Backbone, register_backbone
from clinlib.llm.types import OFFLINE_READER_MODEL_PREFIX, OfflineReply
from clinlib.tasks.population.build import checker_answers, population_events
from clinlib.tasks.population.checker import check, check_key
from clinlib.tasks.population.questions import split_prompt, task_of
from clinlib.tasks.population.render import Line, parse_group
from clinlib.tasks.population.solve import Knowledge
from clinlib.tasks.population.spec import load_specs
from clinlib.tasks.registry import get_spec
from clinlib.tasks.spec import resolve

SOLVER_READER = "population-solver"
OVERLAP_READER = "population-overlap"
PER_PATIENT_READER = "population-per-patient"
READER_LABELS = {
    SOLVER_READER: "Group reader (the independent checker, deterministic ceiling, not an LLM)",
    PER_PATIENT_READER: "Per-patient baseline (one record at a time, rule-based, not an LLM)",
    OVERLAP_READER: "Code-overlap baseline (Jaccard + scikit-learn clustering, not an LLM)",
}
_IDS = r"((?:\d+(?:,\s*)?)+)"


def _user(messages: Sequence[Mapping[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m.get("role") == "user")


@cache
def _specs():
    return tuple(load_specs())


def _question(messages) -> tuple[str, str, str]:
    """(task, question, context) of a population prompt; refused when no task's template
    matches the question."""
    context, question = split_prompt(_user(messages))
    task = task_of(question, _specs())
    if task is None:
        raise ValueError("not a population question")
    return task, question, context


def _read(messages) -> tuple[str, str, dict[str, list[Line]]]:
    task, question, context = _question(messages)
    return task, question, parse_group(context)


def _jaccard(sets: Mapping[str, set[str]]) -> tuple[list[str], np.ndarray]:
    pids = list(sets)
    sim = np.eye(len(pids))
    for i, a in enumerate(pids):
        for j in range(i + 1, len(pids)):
            u = sets[a] | sets[pids[j]]
            sim[i, j] = sim[j, i] = len(sets[a] & sets[pids[j]]) / len(u) if u else 0.0
    return pids, sim


def _ids(q: str, label: str) -> list[str]:
    m = re.search(rf"{re.escape(label)}:\s*{_IDS}", q)
    return re.findall(r"\d+", m.group(1)) if m else []


def _k(q: str, default: int = 2) -> int:
    m = re.search(r"k=(\d+)|the (\d+) (?:patients|whose)|into (\d+) groups", q)
    return int(next(g for g in m.groups() if g)) if m else default


class _Overlap:
    """What the code-overlap baseline reads of a group: Jaccard similarity of code sets."""

    def __init__(self, q: str, recs: dict[str, list[Line]]) -> None:
        self.q, self.recs = q, recs
        self.pids, self.sim = _jaccard(
            {p: {ln.concept for ln in lines} for p, lines in recs.items()}
        )
        self.at = {p: i for i, p in enumerate(self.pids)}


def overlap_answer(task: str, q: str, recs: dict[str, list[Line]]) -> Any:
    """The code-overlap baseline's answer (see the module docstring): the task's own baseline,
    named by its spec (``reader_policy``, :mod:`clinlib.tasks.population.tasks`)."""
    return resolve(get_spec(task).reader_policy)(_Overlap(q, recs))


def overlap_clique(o: _Overlap) -> list[str]:
    k, pids = _k(o.q), o.pids
    off = o.sim - np.eye(len(pids))
    i, j = np.unravel_index(np.argmax(off), off.shape)
    chosen = [int(i), int(j)]
    while len(chosen) < k:
        rest = [x for x in range(len(pids)) if x not in chosen]
        chosen.append(max(rest, key=lambda x: off[x, chosen].sum()))
    return sorted((pids[c] for c in chosen), key=int)


def overlap_icc(o: _Overlap) -> dict[str, bool]:
    labels = ("Positive training examples", "Negative training examples", "Test examples")
    pos, neg, test = (_ids(o.q, s) for s in labels)
    lab = {p: True for p in pos} | {p: False for p in neg}
    return {t: lab[max(lab, key=lambda p: (o.sim[o.at[t], o.at[p]], p))] for t in test}


def overlap_clusters(o: _Overlap) -> list[list[str]]:
    k = min(_k(o.q, 3), len(o.pids))
    fit = AgglomerativeClustering(n_clusters=k, metric="precomputed", linkage="average").fit(
        1 - o.sim
    )
    groups: dict[int, list[str]] = {}
    for p, c in zip(o.pids, fit.labels_, strict=True):
        groups.setdefault(int(c), []).append(p)
    return list(groups.values())


def overlap_ate(o: _Overlap) -> float | None:
    return naive_effect(o.q, o.recs)


def overlap_outliers(o: _Overlap) -> list[str]:
    mean = (o.sim.sum(axis=1) - 1) / max(len(o.pids) - 1, 1)
    cut = mean.mean() - mean.std()
    out = [p for p, m in zip(o.pids, mean, strict=True) if m < cut]
    return out or [o.pids[int(np.argmin(mean))]]


def overlap_two_sample(o: _Overlap) -> bool:
    a, b = _ids(o.q, "Group A"), _ids(o.q, "Group B")
    sim, at = o.sim, o.at
    within = np.mean([sim[at[x], at[y]] for g in (a, b) for x in g for y in g if x < y])
    between = np.mean([sim[at[x], at[y]] for x in a for y in b])
    return bool(within > 1.1 * between)


def overlap_similar(o: _Overlap) -> list[str]:
    (query,) = _ids(o.q, "Query patient")
    others = [p for p in o.pids if p != query]
    return sorted(others, key=lambda p: (-o.sim[o.at[query], o.at[p]], p))[: _k(o.q)]


def overlap_sort(o: _Overlap) -> list[str]:
    return sorted(o.pids, key=lambda p: (-len(o.recs[p]), p))


def overlap_top(o: _Overlap) -> list[str]:
    return overlap_sort(o)[: _k(o.q)]


def overlap_classes(o: _Overlap) -> dict[str, str]:
    lab = {p: g for g in "ABC" for p in _ids(o.q, f"program {g}")}
    if not lab:
        return {}
    return {
        t: lab[max(lab, key=lambda p: (o.sim[o.at[t], o.at[p]], p))] for t in o.pids if t not in lab
    }


def _knowledge(profile: str) -> Knowledge:
    """The diagnosis map of ``profile``'s events as the descriptions rendering prints them
    (full code descriptions, :func:`clinlib.tasks.population.build.population_events`)."""
    return _kb_cached(str(artifact_path("events.parquet", profile)), profile)


@cache
def _kb_cached(path: str, profile: str) -> Knowledge:
    return Knowledge.from_events(population_events(profile))


def _policy(kind: str, profile: str, model: str):
    def answer(messages) -> Any:
        # only the overlap baseline reads the parsed group; the other two read the text their
        # own way, so parsing it for them (the longest step on a 256K-token prompt) is skipped
        if kind == OVERLAP_READER:
            task, q, recs = _read(messages)
            return overlap_answer(task, q, recs)
        task, q, context = _question(messages)
        if kind == PER_PATIENT_READER:
            return per_patient_answer(task, q, context, _knowledge(profile))
        return check(task, q, context)

    def policy(messages, params=None) -> OfflineReply:
        # the usage the harness would count, counted line by line (each distinct line once)
        n_in = count_messages_by_lines(messages, model)
        if kind == SOLVER_READER:  # the agreement gate solved this very input already
            task, q, context = _question(messages)
            known = checker_answers(profile).get(check_key(task, q, context))
            if known is not None:
                return OfflineReply(known, input_tokens=n_in)
        return OfflineReply(json.dumps(answer(messages)), input_tokens=n_in)

    return policy


def register_population_readers(profile: str) -> list[Backbone]:
    """Register the three population readers (kind="offline", price 0) for ``profile``."""
    out = []
    for name in (SOLVER_READER, OVERLAP_READER, PER_PATIENT_READER):
        model = f"{OFFLINE_READER_MODEL_PREFIX}{name}"
        bb = Backbone(
            name=name,
            model=model,
            kind="offline",
            label=READER_LABELS[name],
            policy=_policy(name, profile, model),
        )
        out.append(register_backbone(bb, replace_existing=True))
    return out
