"""Groups of patients drawn from cohorts with known properties, planted patterns, and the fit
of each record to a target prompt length (PopMedQA §2.1 steps 1 and 3: cohorts specified with
the task, "subsampled at the specified value of N").

Patient attributes come from the kit's cohort (index disease, complexity tertile) and from the
record itself (index diseases with an ICD code, admission count), so a question's gold is
computed from the same events the prompt prints. Planting (the patterns the kit's records lack)
adds events to a copy of the group's synthetic records, never to the artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.vocab import INDEX_DISEASES, index_diseases_for
from clinlib.tasks.population.render import concept_key, description
from clinlib.tasks.population.spec import Cohort, Criterion, TaskIdea

MUST_KINDS: tuple[str, ...] = ("admission", "discharge", "diagnosis", "procedure")
PLANT_SOURCE = "planted"


def icd_version(code_system: str) -> int:
    return 9 if "9" in str(code_system) else 10


def attributes(cohort: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """One row per cohort patient: subject_id, disease, tertile, index_dx (sorted list of index
    diseases with an ICD code in the record), n_admissions (admission events)."""
    dx = events[events["kind"] == "diagnosis"]
    found: dict[int, set[str]] = {}
    for sid, code, system in zip(dx["subject_id"], dx["code"], dx["code_system"], strict=True):
        found.setdefault(int(sid), set()).update(index_diseases_for(code, icd_version(system)))
    adm = events[events["kind"] == "admission"].groupby("subject_id").size()
    out = cohort[["subject_id", "disease", "tertile"]].copy()
    out["subject_id"] = out["subject_id"].astype(int)
    out["index_dx"] = [sorted(found.get(s, set())) for s in out["subject_id"]]
    out["n_admissions"] = [int(adm.get(s, 0)) for s in out["subject_id"]]
    return out.sort_values("subject_id").reset_index(drop=True)


def primary_disease(counts: Mapping[str, int]) -> str | None:
    """The cohort's rule (clinlib.data.cohort): the index disease with most code rows, ties in
    the order of INDEX_DISEASES; None without any."""
    best = [d for d in INDEX_DISEASES if counts.get(d, 0) > 0]
    return max(best, key=lambda d: (counts[d], -INDEX_DISEASES.index(d))) if best else None


def _fill(value: Any, variant: Mapping[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        return variant[value[1:]]
    if isinstance(value, list):
        return [_fill(v, variant) for v in value]
    return value


def bind(cohort: Cohort, variant: Mapping[str, Any]) -> Cohort:
    """The cohort with ``$name`` values filled from one variant."""

    def f(cs: Sequence[Criterion]) -> tuple[Criterion, ...]:
        return tuple(Criterion(c.field, c.op, _fill(c.value, variant)) for c in cs)

    return Cohort(cohort.role, cohort.size, f(cohort.positive), f(cohort.negative))


def sample_group(
    spec: TaskIdea,
    attrs: pd.DataFrame,
    n: int,
    variant: Mapping[str, Any],
    rng: np.random.Generator,
) -> dict[str, list[int]] | str:
    """Draw each cohort's patients without replacement; returns role -> subject_ids, or the
    reason the pool is too small."""
    taken: set[int] = set()
    out: dict[str, list[int]] = {}
    rows = attrs.to_dict("records")
    for cohort in (bind(c, variant) for c in spec.cohorts):
        want = cohort.n(n, spec.k)
        pool = [r["subject_id"] for r in rows if r["subject_id"] not in taken and cohort.admits(r)]
        if len(pool) < want:
            return f"cohort {cohort.role!r}: {len(pool)} patients meet its criteria < {want}"
        pick = sorted(int(s) for s in rng.choice(pool, size=want, replace=False)) if want else []
        out[cohort.role] = pick
        taken.update(pick)
    return out


def sample_cohorts(
    spec: TaskIdea, attrs: pd.DataFrame, variant: Mapping[str, Any], rng: np.random.Generator
) -> tuple[int, dict[str, list[int]]] | str:
    """The idea's cohorts built once at ``N_max`` (PopMedQA §2.1 step 3: "cohorts are generated
    at a large size N_max"): the largest of the spec's sizes whose cohorts the pool can fill,
    and role -> subject_ids at that size; or why none can be."""
    why = "no size"
    for n_max in sorted(spec.sizes, reverse=True):
        got = sample_group(spec, attrs, n_max, variant, rng)
        if not isinstance(got, str):
            return n_max, got
        why = got
    return why


def subsample(
    spec: TaskIdea,
    roster: Mapping[str, list[int]],
    n: int,
    variant: Mapping[str, Any],
    rng: np.random.Generator,
) -> dict[str, list[int]] | str:
    """A group of size ``n`` subsampled from the idea's N_max cohorts ("to create concrete
    questions of size N, the idea's cohorts are subsampled at the specified value of N"): each
    role keeps ``cohort.n(n, k)`` of its N_max members, drawn without replacement."""
    out: dict[str, list[int]] = {}
    for cohort in (bind(c, variant) for c in spec.cohorts):
        want, pool = cohort.n(n, spec.k), roster.get(cohort.role, [])
        if len(pool) < want:
            return f"cohort {cohort.role!r}: {len(pool)} at N_max < {want}"
        out[cohort.role] = (
            sorted(int(s) for s in rng.choice(pool, size=want, replace=False)) if want else []
        )
    return out


def _event(sid: int, t: pd.Timestamp, ev: Mapping[str, Any], n: int, kind: str) -> dict:
    return {
        "event_id": f"PLANT-{sid}-{n}",
        "subject_id": sid,
        "time": t,
        "kind": kind,
        "code": str(ev["code"]),
        "code_system": ev.get("code_system", "drug"),
        "label": str(ev["label"]),
        "value": float(ev["value"]) if "value" in ev else np.nan,
        "unit": ev.get("unit"),
        "source": PLANT_SOURCE,
    }


def plant(
    spec: TaskIdea,
    events: pd.DataFrame,
    roles: Mapping[str, list[int]],
    attrs: pd.DataFrame,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Add the spec's planted events to the group's records; returns the events and what was
    planted (for the gold)."""
    p = spec.plant
    if p.get("pattern") != "confounded":  # signatures, scores: clinlib.tasks.population.plant
        return events, {}
    first = events.groupby("subject_id")["time"].min()
    last = events.groupby("subject_id")["time"].max()
    new: list[dict] = []
    info = _plant_confounded(p, roles, attrs, first, last, rng, new)
    planted = pd.DataFrame(new).astype({"time": events["time"].dtype})
    return pd.concat([events, planted], ignore_index=True), info


def _plant_confounded(p, roles, attrs, first, last, rng, new) -> dict[str, Any]:
    has = {
        int(s): p["confounder"] in dx
        for s, dx in zip(attrs["subject_id"], attrs["index_dx"], strict=True)
    }
    m = p["outcome_model"]
    sids = sorted(s for r in roles.values() for s in r)
    treated, outcome, conf = {}, {}, {}
    for sid in sids:
        x = int(has[sid])
        t = int(rng.random() < p["p_treat"][x])
        y = round(m["base"] + m["confounder"] * x + m["effect"] * t + rng.normal(0, m["sd"]))
        treated[sid], outcome[sid], conf[sid] = t, float(y), x
        if t:
            new.append(
                _event(sid, first[sid] + pd.Timedelta(days=1), p["treatment"], 0, "medication")
            )
        ev = dict(p["outcome"], value=y)
        new.append(_event(sid, last[sid] + pd.Timedelta(days=1), ev, 1, "lab"))
    return {"treated": treated, "outcome": outcome, "confounder": conf}


def fit_records(
    events: pd.DataFrame, sids: Sequence[int], target_tokens: int, count: Callable[[str], int]
) -> pd.DataFrame:
    """Each record cut to about ``target_tokens / len(sids)`` tokens of its descriptions
    rendering: admissions, discharges, diagnoses, procedures and planted events are always
    kept; then medications and labs in time order while the budget lasts."""
    budget = target_tokens / max(len(sids), 1)
    rank = {int(s): i for i, s in enumerate(sids)}
    ev = events[events["subject_id"].isin(rank)]
    # one stable sort = each record's stable sort by (time, event_id), records in sids order
    ev = ev.assign(_r=ev["subject_id"].map(rank)).sort_values(
        ["_r", "time", "event_id"], kind="stable"
    )
    r = ev["_r"].to_numpy()
    must = (ev["kind"].isin(MUST_KINDS) | (ev["source"] == PLANT_SOURCE)).to_numpy()
    key = [ev[c].astype(str).to_numpy(dtype=object) for c in ("kind", "code", "label")]
    codes, uniq = pd.factorize(key[0] + "\x1f" + key[1] + "\x1f" + key[2])
    per = np.array([count(description(*u.split("\x1f"))) + 3.0 for u in uniq], dtype=float)
    cost = per[codes] if len(codes) else np.zeros(0)  # + value, unit, newline
    n_r = len(sids)
    days = ev.assign(_d=ev["time"].dt.floor("D")).groupby("_r")["_d"].nunique()
    spent = np.bincount(r, weights=np.where(must, cost, 0.0), minlength=n_r)
    spent += 8 * days.reindex(range(n_r), fill_value=0).to_numpy()
    optional = np.where(must, 0.0, cost)
    total = np.cumsum(optional)  # integer-valued floats: segment sums below are exact
    start = np.searchsorted(r, np.arange(n_r))
    before = np.concatenate([[0.0], total])[start]
    chosen = must | (total - before[r] + spent[r] <= budget)
    return ev[chosen].drop(columns="_r").reset_index(drop=True)


def concept_sets(events: pd.DataFrame, kinds: Sequence[str] | None = None) -> dict[int, set[str]]:
    """subject_id -> set of ``system//code`` concepts (optionally of some kinds only)."""
    ev = events if kinds is None else events[events["kind"].isin(kinds)]
    out: dict[int, set[str]] = {}
    for sid, system, code in zip(ev["subject_id"], ev["code_system"], ev["code"], strict=True):
        out.setdefault(int(sid), set()).add(concept_key(system, code))
    return out
