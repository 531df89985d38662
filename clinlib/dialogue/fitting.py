"""Fitting each visit to the length budget (paper Appendix C.1, Fig. 13; the budget's rules in
:mod:`clinlib.dialogue.budget`; docs/design.md "Layout").

A record of n visits gets ``13,700 * (n / 10) ** (1/3)`` characters, split over visits by
max-min fairness; a visit over its share tells its facts in priority order (admission,
discharge and principal diagnosis always, and so are a condition's first diagnosis and the
abnormal values that foreshadowed it; then procedures, index-disease diagnoses and abnormal
values that foreshadow a later diagnosis or are a lab's first; key labs; disease drugs; other
diagnoses; ...; background drugs and routine labs last) and drops the small talk when even its
bare facts crowd it. What does not fit is ``missed`` with reason ``budget: over the visit's
time budget (<tier>: <group>)`` and joins the T9 pool.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from clinlib.dialogue import budget as B
from clinlib.dialogue.fields import KEY_LABS, fmt_date, lab_day_bounds
from clinlib.dialogue.render import SPEAKER_PREFIX, VISIT_HEADER
from clinlib.dialogue.selection import (
    condition_of,
    hash_unit,
    is_background_drug,
    lab_key,
    natural_key,
)
from clinlib.dialogue.templates import FORESHADOWS
from clinlib.dialogue.turns import lab_direction, visit_records

_EST_REACTION = 110  # characters a lab reaction sentence adds (estimate; fitting re-renders)
_EST_LAB_DAY = 100  # a new lab day: the patient's question, the frame, the closing remark
_MAX_FIT_ROUNDS = 8


@dataclass
class _Group:
    tier: int
    u: float
    ids: list[str]
    cost: int
    what: str
    rank: int = 0  # inside a tier: a lab's first abnormal value (0) before its later ones


def _rendered_len(recs: list[dict[str, Any]], vdate: str | None) -> int:
    """Characters of a visit in render_dialogue(with_ids=False), with its blank-line gap."""
    head = VISIT_HEADER.format(number=1, date=vdate) if vdate else "Visit 1"
    lines = [len(f"{SPEAKER_PREFIX[r['speaker']]}: {r['text']}") for r in recs]
    return len(head) + sum(lines) + len(lines) + 2


def _event_cost(e: Mapping[str, Any]) -> int:
    # Only string fields are told (records hold None for a missing one).
    text = [
        v
        for c in ("label", "value_text", "unit", "code", "route")
        if isinstance(v := e.get(c), str)
    ]
    extra = {
        "lab": 8 + (_EST_REACTION if lab_direction(e) else 0),
        "medication": 25,
        "diagnosis": 20,
        "procedure": 45,
    }.get(e["kind"], 0)
    return sum(len(t) + 1 for t in text) + extra


def _budget_groups(
    stated: Sequence[Mapping[str, Any]],
    v: int,
    bounds: Mapping[int, tuple[str, str]],
    ends: set[str],
    news: Mapping[str, int],
    shared_days: set[tuple[str | None, str]],
    first_coded: Mapping[str, int],
    seed: int,
    keep: frozenset[str] = frozenset(),
    protect: frozenset[str] = frozenset(),
) -> tuple[list[Mapping[str, Any]], list[_Group]]:
    """A visit's stated events as (tier-0 events, droppable groups) — see clinlib.dialogue.budget;
    events of a kind in ``keep`` and groups holding an id in ``protect`` are tier 0 (never
    left out)."""
    keyed: dict[tuple, list[Mapping[str, Any]]] = {}
    for e in stated:
        kind = e["kind"]
        if kind == "lab":
            k: tuple = ("lab", lab_key(e), fmt_date(e["time"]))
        elif kind == "medication":
            k = ("medication", " ".join(str(e["label"]).lower().split()))
        elif kind in ("diagnosis", "procedure"):
            k = (kind, str(e["code"]).strip())
        else:
            k = (kind, str(e["event_id"]))
        keyed.setdefault(k, []).append(e)
    dx = sorted(
        (e for e in stated if e["kind"] == "diagnosis"),
        key=lambda e: natural_key(str(e["event_id"])),
    )
    principal = str(dx[0]["event_id"]) if dx else None
    first, last = bounds.get(v, ("", ""))
    fixed: list[Mapping[str, Any]] = []
    groups: list[_Group] = []
    for k, evs in keyed.items():
        kind = k[0]
        ids = sorted((str(e["event_id"]) for e in evs), key=natural_key)
        if kind == "lab":
            if (k[1], k[2]) in shared_days:  # a lab day two visits share stays whole
                fixed += evs
                continue
            tier = B.priority(
                "lab",
                key_lab=k[1] in KEY_LABS,
                abnormal=any(lab_direction(e) for e in evs),
                first_day=k[2] == first,
                last_day=k[2] == last,
                record_end=any(i in ends for i in ids),
                first_abnormal=any(i in news for i in ids),
                foreshadow=any(news.get(i) == -1 for i in ids),
                safety=bool(protect.intersection(ids)),
            )
        elif kind == "medication":
            tier = B.priority(
                "medication",
                disease=not is_background_drug(evs[0]["label"]),
                safety=bool(protect.intersection(ids)),
            )
        elif kind in ("diagnosis", "procedure"):
            cond = condition_of(k[1]) if kind == "diagnosis" else None
            tier = B.priority(
                kind,
                disease=cond is not None,
                principal=principal in ids,
                new_condition=cond is not None and first_coded.get(cond) == v,
            )
        else:
            tier = 0
        if tier == 0 or kind in keep:
            fixed += evs
            continue
        cost = sum(_event_cost(e) for e in evs)
        u = hash_unit(seed, "budget", ids[0])
        rank = min((news[i] for i in ids if i in news), default=0)
        groups.append(_Group(tier, u, ids, cost, f"{kind} {k[1]}", rank))
    groups.sort(key=lambda g: (g.tier, g.rank, g.u, natural_key(g.ids[0])))
    return fixed, groups


def _first_fit(groups: list[_Group], slack: float, chosen: frozenset[int]) -> frozenset[int]:
    """Groups (by index, in priority order) not yet chosen whose estimated costs fit ``slack``."""
    add = set()
    for i, g in enumerate(groups):
        if i not in chosen and g.cost <= slack:
            add.add(i)
            slack -= g.cost
    return frozenset(add)


def _trim(groups: list[_Group], chosen: frozenset[int], over: float) -> frozenset[int]:
    """Drop chosen groups from the lowest priority up until their estimates cover ``over``."""
    keep = set(chosen)
    for i in sorted(chosen, reverse=True):
        if over <= 0:
            break
        keep.discard(i)
        over -= groups[i].cost
    return frozenset(keep)


def _fit_visit(
    render: Callable[[list[Mapping[str, Any]], bool], list[dict[str, Any]]],
    fixed: list[Mapping[str, Any]],
    groups: list[_Group],
    by_id: Mapping[str, Mapping[str, Any]],
    allot: float,
    vdate: str | None,
) -> tuple[list[dict[str, Any]], list[_Group]]:
    """Render a visit within ``allot`` characters: tier-0 facts always, then groups in
    priority order while their estimated costs fit (first fit); the draft is rendered, trimmed
    from the lowest priority while over and topped up while under, at most
    :data:`_MAX_FIT_ROUNDS` renders. Returns (turn records, groups left out)."""
    bare = render(fixed, False)
    terse = _rendered_len(bare, vdate) > B.TERSE_SHARE * allot
    base = _rendered_len(render(fixed, True), vdate) if terse else _rendered_len(bare, vdate)
    chosen = _first_fit(groups, allot - base, frozenset())
    best: tuple[list[dict[str, Any]], frozenset[int]] | None = None
    for _ in range(_MAX_FIT_ROUNDS):
        used = chosen
        stated = [*fixed, *(by_id[i] for k in sorted(used) for i in groups[k].ids)]
        recs = render(stated, terse)
        n = _rendered_len(recs, vdate)
        if n <= allot or not chosen:
            best = (recs, chosen)
            more = _first_fit(groups, allot - n, chosen)
            if not more or n > allot:
                break
            chosen = chosen | more
        elif best is not None:
            break  # topping up overshot: keep the last draft that fitted
        else:
            chosen = _trim(groups, chosen, n - allot)
    if best is None:  # every round was over: the smallest draft tried last
        best = (recs, used)
    recs, chosen = best
    return recs, [g for k, g in enumerate(groups) if k not in chosen]


def _first_coded(usable: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """condition -> the first visit with a diagnosis of it."""
    first: dict[str, int] = {}
    for e in usable:
        cond = condition_of(str(e["code"])) if e["kind"] == "diagnosis" else None
        if cond is not None:
            first[cond] = min(first.get(cond, 1 << 30), int(e["visit_idx"]))
    return first


def fit_budget(
    sid: int,
    visits: Sequence[int],
    usable_by_visit: Mapping[int, list[dict[str, Any]]],
    status: dict[str, dict[str, Any]],
    starts: Mapping[int, pd.Timestamp],
    seed: int,
    keep: frozenset[str] = frozenset(),
    protect: frozenset[str] = frozenset(),
) -> dict[int, list[dict[str, Any]]]:
    """Turn records of every visit within the patient's budget (clinlib.dialogue.budget); events
    left out get status ``missed`` (``budget:`` reason). Visits go in time order, each to its fair
    share plus what earlier ones left (or overran); ids in ``protect`` are tier 0."""
    usable = [e for v in visits for e in usable_by_visit.get(v, [])]
    by_id = {str(e["event_id"]): e for e in usable}
    bounds = lab_day_bounds(usable)
    series: dict[str | None, list[Mapping[str, Any]]] = {}
    lab_visits: dict[tuple[str | None, str], set[int]] = {}
    for e in usable:
        if e["kind"] == "lab":
            series.setdefault(lab_key(e), []).append(e)
            day = (lab_key(e), fmt_date(e["time"]))
            lab_visits.setdefault(day, set()).add(int(e["visit_idx"]))
    first_coded = _first_coded(usable)
    ends: set[str] = set()
    news: dict[str, int] = {}  # each lab's first abnormal values per direction -> rank
    heralds: dict[tuple[str | None, str | None], list[str]] = {}
    for key, evs in series.items():
        evs = sorted(evs, key=lambda e: (e["time"], natural_key(str(e["event_id"]))))
        ends |= {str(evs[0]["event_id"]), str(evs[-1]["event_id"])}
        for d in ("high", "low", "flagged"):
            ids = [str(e["event_id"]) for e in evs if lab_direction(e) == d]
            news |= {i: r for r, i in enumerate(ids[: B.FIRST_ABNORMAL])}
        cond, way = FORESHADOWS.get(key or "", (None, None))
        before = first_coded.get(cond or "", -1)
        heralds.setdefault((cond, way), []).extend(
            str(e["event_id"])
            for e in evs
            if lab_direction(e) == way and int(e["visit_idx"]) < before
        )
    # The few abnormal values (at most FIRST_ABNORMAL per condition and direction) that
    # foreshadowed a condition coded later are always told (tier 0); a long run is not news.
    for (cond, _), ids in heralds.items():
        if cond is not None and len(ids) <= B.FIRST_ABNORMAL:
            news |= {i: -1 for i in ids}
    shared = {d for d, vs in lab_visits.items() if len(vs) > 1}
    plans, need = {}, {}
    for v in visits:
        in_visit = usable_by_visit.get(v, [])
        stated = [e for e in in_visit if status[str(e["event_id"])]["status"] == "covered"]
        dx = sorted(
            (e for e in in_visit if e["kind"] == "diagnosis"),
            key=lambda e: natural_key(str(e["event_id"])),
        )
        render = functools.partial(visit_records, sid, v, dx, seed)
        vdate = fmt_date(starts[v]) if v in starts else None
        full = render(stated, False)
        plans[v] = (render, stated, vdate, full)
        need[v] = _rendered_len(full, vdate)
    shares = B.fair_shares(need, B.budget_chars(len(visits)))
    out: dict[int, list[dict[str, Any]]] = {}
    carry = 0.0  # what earlier visits left of their shares (negative: what they overran)
    for v in visits:
        render, stated, vdate, full = plans[v]
        allot = shares[v] + carry
        if need[v] <= allot:
            out[v] = full
            carry = allot - need[v]
            continue
        fixed, groups = _budget_groups(
            stated, v, bounds, ends, news, shared, first_coded, seed, keep, protect
        )
        recs, dropped = _fit_visit(render, fixed, groups, by_id, allot, vdate)
        out[v] = recs
        carry = allot - _rendered_len(recs, vdate)
        for g in dropped:
            why = f"{B.BUDGET_REASON} ({B.TIER_NAMES[g.tier]}: {g.what})"
            for i in g.ids:
                status[i] |= dict(status="missed", reason=why)
    return out
