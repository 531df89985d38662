"""The per-patient baseline (decomposition resistance, PopMedQA §1: questions "that cannot be
answered by examining any single patient"): a deterministic policy, not a language model.

It sees one patient's rendering at a time (the record's block, with the group's codebook
where the rendering has one), computes per-patient functions the kit can write (the dominant
index disease by the kit's diagnosis map, the admission count, the distinct-concept count as
an anomaly score, the treatment / outcome / confounder of the ATE question), and combines the
per-patient answers by the obvious rule for the task:

- clique and top-k: the k highest-scoring records (anomaly score; admissions for top-k);
- in-context classification: a test record is positive when its disease is the positives';
- clustering and classification: records grouped by disease (classification: the program
  whose examples' disease it shares);
- outliers: records whose disease is not the group's commonest;
- two-sample test: the two groups' commonest diseases differ;
- similarity: records with the query's disease first, then by diagnosis overlap;
- sorting: by admissions; ATE: the unadjusted difference in mean outcome.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from clinlib.tasks.population.render import CODEBOOK_TITLE, Line, parse_group
from clinlib.tasks.population.solve import Knowledge, admissions_of, primary_of

_IDS = r"((?:\d+(?:,\s*)?)+)"


def one_at_a_time(context: str) -> dict[str, list[Line]]:
    """Each patient's record parsed on its own: its block alone (plus the codebook)."""
    blocks = context.split("\n\n")
    book = [b for b in blocks if b.startswith(CODEBOOK_TITLE)]
    out: dict[str, list[Line]] = {}
    for b in blocks:
        if b.startswith("=== Patient ID:"):
            out.update(parse_group("\n\n".join([*book, b])))
    return out


def _ids(q: str, label: str) -> list[str]:
    m = re.search(rf"{re.escape(label)}:?\s*{_IDS}", q)
    return re.findall(r"\d+", m.group(1)) if m else []


def _k(q: str, default: int) -> int:
    m = re.search(r"the (\d+) (?:patients|who|of them)|into (\d+) groups", q)
    return int(next(g for g in m.groups() if g)) if m else default


def _top(score: dict[str, float], k: int) -> list[str]:
    return sorted(sorted(score, key=lambda p: (-score[p], int(p)))[:k], key=int)


def _mode(xs) -> Any:
    return Counter(xs).most_common(1)[0][0] if xs else None


def per_patient_answer(task: str, q: str, context: str, kb: Knowledge) -> Any:
    """The baseline's answer to one question (see the module docstring): each record read
    alone, then the task's combining rule (:data:`COMBINE`; the ATE's naive difference else)."""
    recs = one_at_a_time(context)
    dis = {p: primary_of(lines, kb) for p, lines in recs.items()}
    rule = COMBINE.get(task)
    return rule(q, recs, dis, kb) if rule else naive_effect(q, recs)


def _clique(q, recs, dis, kb) -> list[str]:
    return _top({p: len({ln.concept for ln in lines}) for p, lines in recs.items()}, _k(q, 3))


def _in_context(q, recs, dis, kb) -> dict[str, bool]:
    target = _mode([dis.get(p) for p in _ids(q, "Positive training examples")])
    return {t: dis.get(t) == target for t in _ids(q, "Test examples")}


def _clusters(q, recs, dis, kb) -> list[list[str]]:
    groups: dict[Any, list[str]] = {}
    for p, d in dis.items():
        groups.setdefault(d, []).append(p)
    return list(groups.values())


def _outliers(q, recs, dis, kb) -> list[str]:
    mode = _mode(list(dis.values()))
    return sorted((p for p, d in dis.items() if d != mode), key=int)


def _two_sample(q, recs, dis, kb) -> bool:
    a, b = (_mode([dis.get(p) for p in _ids(q, g)]) for g in ("Group A", "Group B"))
    return a != b


def _admissions(q, recs) -> dict[str, int]:
    seen = {p for p, _ in re.findall(r"(\d+) scored (\d+)", q)}
    return {p: admissions_of(lines) for p, lines in recs.items() if p not in seen}


def _top_k(q, recs, dis, kb) -> list[str]:
    return _top(_admissions(q, recs), _k(q, 2))


def _sorting(q, recs, dis, kb) -> list[str]:
    adm = _admissions(q, recs)
    return sorted(adm, key=lambda p: (-adm[p], int(p)))


def _classify(q, recs, dis, kb) -> dict[str, str]:
    return _programs(q, dis)


def _similar(q, recs, dis, kb) -> list[str]:
    (query,) = _ids(q, "Query patient") or [None]
    dx = {p: {ln.concept for ln in lines if ln.concept in kb.dx} for p, lines in recs.items()}
    qs = dx.get(query, set())

    def key(p):
        u = qs | dx[p]
        return (dis[p] != dis.get(query), -(len(qs & dx[p]) / len(u) if u else 0.0), int(p))

    return sorted(sorted((p for p in recs if p != query), key=key)[: _k(q, 2)], key=int)


def _programs(q: str, dis: dict[str, Any]) -> dict[str, str]:
    ex = {g: _ids(q, f"program {g}") for g in "ABC"}
    seen = {p for v in ex.values() for p in v}
    by_dis = {_mode([dis.get(p) for p in v]): g for g, v in ex.items()}
    fallback = next(iter(ex))
    return {p: by_dis.get(d, fallback) for p, d in dis.items() if p not in seen}


def naive_effect(q: str, recs: dict[str, list[Line]]) -> float | None:
    """The treated-minus-untreated difference of the outcome's last value, no weighting: what a
    reader that ignores confounding answers to an ATE question."""
    m = re.search(r"received (.+?);.*last (.+?) \((\S+)\) in each", q)
    if not m:
        return None
    t_name, y_label, y_key = m.groups()
    arms: dict[int, list[float]] = {0: [], 1: []}
    for lines in recs.values():
        t = int(any(ln.concept in (t_name, f"drug//{t_name}") for ln in lines))
        ys = [ln.value for ln in lines if ln.concept in (y_label, y_key) and ln.value is not None]
        if ys:
            arms[t].append(ys[-1])
    if not arms[0] or not arms[1]:
        return None
    return round(sum(arms[1]) / len(arms[1]) - sum(arms[0]) / len(arms[0]), 3)


# each task's combining rule over the per-record readings (a table, not a branch per task)
COMBINE = {
    "P-CLQ": _clique,
    "P-ICC": _in_context,
    "P-CLU": _clusters,
    "P-OUT": _outliers,
    "P-TST": _two_sample,
    "P-SIM": _similar,
    "P-TOP": _top_k,
    "P-SRT": _sorting,
    "P-CLS": _classify,
}


def chance_answer(task: str, q: str, pids: list[str], rng) -> Any:
    """A uniformly random answer of the task's format (the chance level's reader); the ATE's
    is 0, no effect."""
    rule = CHANCE.get(task)
    return rule(q, pids, rng) if rule else 0.0


def _pick(rng, xs, k):
    return sorted(rng.choice(xs, size=min(k, len(xs)), replace=False).tolist(), key=int)


def _seen(q: str) -> set[str]:
    return {p for p, _ in re.findall(r"(\d+) scored (\d+)", q)}


def _chance_subset(q, pids, rng) -> list[str]:
    drop = set(_ids(q, "Query patient")) | _seen(q)
    return _pick(rng, [p for p in pids if p not in drop], _k(q, 2))


def _chance_partition(q, pids, rng) -> list[list[str]]:
    k = _k(q, 3)
    lab = rng.permutation([i % k for i in range(len(pids))])
    return [[p for p, c in zip(pids, lab, strict=True) if c == i] for i in range(k)]


def _chance_programs(q, pids, rng) -> dict[str, str]:
    ex = {p for g in "ABC" for p in _ids(q, f"program {g}")}
    return {p: str(rng.choice(list("ABC"))) for p in pids if p not in ex}


# each task's random answer of its format (a table, not a branch per task)
CHANCE = {
    "P-CLQ": _chance_subset,
    "P-SIM": _chance_subset,
    "P-TOP": _chance_subset,
    "P-ICC": lambda q, pids, rng: {t: bool(rng.random() < 0.5) for t in _ids(q, "Test examples")},
    "P-CLU": _chance_partition,
    "P-OUT": lambda q, pids, rng: _pick(rng, pids, max(1, len(pids) // 8)),
    "P-TST": lambda q, pids, rng: bool(rng.random() < 0.5),
    "P-SRT": lambda q, pids, rng: [
        str(p) for p in rng.permutation([p for p in pids if p not in _seen(q)])
    ],
    "P-CLS": _chance_programs,
}
