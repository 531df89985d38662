"""Deterministic solvers: each task's gold recovered from the rendered prompt only (a question
its solver cannot answer from the prompt is a gate failure, not a question).

A solver reads the question stem and the rendered group (:func:`render.parse_group`), plus
:class:`Knowledge`, the dictionary knowledge a reader brings (which ICD codes and which
diagnosis descriptions belong to which index disease, as :mod:`clinlib.data.vocab` defines
them). It never sees the gold, the cohort roles or the subject ids. It returns the answer in
the task's schema, or None when the text does not determine one (a tie, a missing value).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from clinlib.data.vocab import index_diseases_for
from clinlib.tasks.population.groups import icd_version, primary_disease
from clinlib.tasks.population.metrics import hajek_ate, stratum_propensity
from clinlib.tasks.population.render import Line, concept_key, description, parse_group, split_line

_IDS = r"((?:\d+(?:,\s*)?)+)"


@dataclass(frozen=True)
class Knowledge:
    """Concept (``system//code`` or a diagnosis description) -> index diseases it codes, and
    the set of concepts that are diagnoses."""

    dx: dict[str, tuple[str, ...]]

    @classmethod
    def from_events(cls, events: pd.DataFrame) -> Knowledge:
        dx = events[events["kind"] == "diagnosis"].drop_duplicates(["code_system", "code"])
        out: dict[str, set[str]] = {}
        for system, code, label in zip(dx["code_system"], dx["code"], dx["label"], strict=True):
            ds = set(index_diseases_for(code, icd_version(system)))
            out.setdefault(concept_key(system, code), set()).update(ds)
            shown = split_line(description("diagnosis", code, label))[0]
            out.setdefault(shown, set()).update(ds)
        return cls({k: tuple(sorted(v)) for k, v in out.items()})


def _ids(stem: str, label: str) -> list[str]:
    m = re.search(rf"{re.escape(label)}:\s*{_IDS}", stem)
    return re.findall(r"\d+", m.group(1)) if m else []


def primary_of(lines: list[Line], kb: Knowledge) -> str | None:
    """One record's dominant index disease (most diagnosis lines; the cohort's tie rule)."""
    counts: Counter[str] = Counter()
    for ln in lines:
        for d in kb.dx.get(ln.concept, ()):
            counts[d] += 1
    return primary_disease(counts)


def admissions_of(lines: list[Line]) -> int:
    """One record's admission lines."""
    return sum(ln.concept.startswith(("admission//", "Admission (")) for ln in lines)


def _top(scores: Mapping[str, float], k: int) -> list[str] | None:
    ranked = sorted(scores, key=lambda p: (-scores[p], p))
    if len(ranked) > k and scores[ranked[k - 1]] == scores[ranked[k]]:
        return None
    return ranked[:k]


def _k(stem: str) -> int:
    m = re.search(r"k=(\d+)|the (\d+) (?:patients|whose)|find the (\d+)", stem)
    if not m:
        raise ValueError("no k in the question")
    return int(next(g for g in m.groups() if g))


def solve_clique(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    k = _k(stem)
    carriers: dict[str, set[str]] = {}
    for pid, lines in recs.items():
        for ln in lines:
            if ln.value is not None:  # a treatment pathway: dosed concepts only
                carriers.setdefault(ln.concept, set()).add(pid)
    by_set = Counter(frozenset(s) for s in carriers.values() if len(s) == k)
    if not by_set:
        return None
    (best, n), *rest = by_set.most_common()
    if rest and rest[0][1] == n:
        return None
    return sorted(best, key=int)


def solve_icc(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    pos, neg, test = (
        _ids(stem, s)
        for s in ("Positive training examples", "Negative training examples", "Test examples")
    )
    prim = {p: primary_of(recs.get(p, []), kb) for p in pos + neg + test}
    target = {prim[p] for p in pos}
    if len(target) != 1 or target & {prim[p] for p in neg}:
        return None
    (t,) = target
    return {p: prim[p] == t for p in test}


def solve_cluster(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    groups: dict[str | None, list[str]] = {}
    for pid, lines in recs.items():
        groups.setdefault(primary_of(lines, kb), []).append(pid)
    return sorted((sorted(g, key=int) for g in groups.values()), key=lambda g: int(g[0]))


def solve_ipw(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    m = re.search(
        r"received (.+?);.*last (.+?) \((\S+)\) in each.*a (.+?) \((\w+)\) diagnosis", stem
    )
    if not m:
        return None
    treatment, outcome_label, outcome_key, confounder = (
        m.group(1),
        m.group(2),
        m.group(3),
        m.group(5),
    )
    t, y, x = [], [], []
    for lines in recs.values():
        t.append(int(any(ln.concept in (treatment, f"drug//{treatment}") for ln in lines)))
        ys = [
            ln.value
            for ln in lines
            if ln.concept in (outcome_label, outcome_key) and ln.value is not None
        ]
        if not ys:
            return None
        y.append(ys[-1])
        x.append(int(any(confounder in kb.dx.get(ln.concept, ()) for ln in lines)))
    e = stratum_propensity(t, x)
    try:
        return round(hajek_ate(t, y, e), 3)
    except ValueError:
        return None


def solve_outlier(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    prim = {p: primary_of(lines, kb) for p, lines in recs.items()}
    (mode, n), *rest = Counter(prim.values()).most_common()
    if rest and rest[0][1] == n:
        return None
    return sorted((p for p, d in prim.items() if d != mode), key=int)


def solve_two_sample(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    modes = []
    for label in ("Group A", "Group B"):
        prim = Counter(primary_of(recs.get(p, []), kb) for p in _ids(stem, label))
        (mode, n), *rest = prim.most_common()
        if rest and rest[0][1] == n:
            return None
        modes.append(mode)
    return modes[0] != modes[1]


def solve_similarity(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    (query,) = _ids(stem, "Query patient") or [None]
    if query not in recs:
        return None
    sets = {p: {ln.concept for ln in lines if ln.concept in kb.dx} for p, lines in recs.items()}
    q = sets[query]
    scores = {p: len(q & s) / len(q | s) if q | s else 0.0 for p, s in sets.items() if p != query}
    return _top(scores, _k(stem))


def solve_top(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    return _top({p: admissions_of(lines) for p, lines in recs.items()}, _k(stem))


def solve_sort(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    counts = {p: admissions_of(lines) for p, lines in recs.items()}
    return sorted(counts, key=lambda p: (-counts[p], int(p)))


def solve_classify(stem: str, recs: dict[str, list[Line]], kb: Knowledge) -> Any:
    return {p: primary_of(lines, kb) for p, lines in recs.items()}


SOLVERS = {
    "P-CLQ": solve_clique,
    "P-ICC": solve_icc,
    "P-CLU": solve_cluster,
    "P-IPW": solve_ipw,
    "P-OUT": solve_outlier,
    "P-TST": solve_two_sample,
    "P-SIM": solve_similarity,
    "P-TOP": solve_top,
    "P-SRT": solve_sort,
    "P-CLS": solve_classify,
}


def solve(task: str, stem: str, context: str, kb: Knowledge, records: dict | None = None) -> Any:
    """The task's answer read from ``stem`` and the rendered ``context`` (None if undetermined);
    ``records``: ``parse_group(context)`` when the caller has parsed it already."""
    return SOLVERS[task](stem, parse_group(context) if records is None else records, kb)
