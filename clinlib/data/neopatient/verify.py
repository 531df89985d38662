"""neopatient stage 4, Verification (PopMedQA §3 "Verification"): every completed record is
checked against its recipe, and a record that fails any check is rejected (the seed's "automated
quality gate, filtering out records that failed to follow the recipe or accidentally triggered
exclusion criteria").

Deviation from the seed, named here: the seed's verifier is an LLM reading the record beside the
specification; this one is rule-based — named checks that compare the coded record with the
recipe it came from. Each check returns the first offending event (or None):

``generated``          every segment was written (a backbone reply that could not be read fails)
``matched``            every event got a code (best cosine at or above ``match.MIN_SCORE``)
``traces_to_recipe``   every event's code is one its segment planned (a description matched to
                       another code — a matching error — fails here)
``complete``           every planned concept of every segment is in the record
``exclusion``          no code the cohort's negative description forbids
``inclusion``          the cohort's index diagnoses at two or more stays
``consistent_doses``   each long-term drug has the same dose at every stay
``chronology``         events inside their stay; stays in order and > 7 days apart
``lab_values``         one result per lab a day, each inside the kit's physiological bounds
                       (``clinlib.data.plausibility.BOUNDS``: the cohort stage would exclude it)
``length_bin``         the event count inside the recipe's length bin
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta

from clinlib.data.neopatient.generate import TextEvent, event_time
from clinlib.data.neopatient.match import Match
from clinlib.data.neopatient.recipes import (
    DX,
    LAB,
    PX,
    RX,
    Recipe,
    bin_bounds,
    cohort_spec,
    dx_concept,
    rx_concept,
)
from clinlib.data.plausibility import BOUNDS
from clinlib.data.vocab import PANEL_ITEMIDS

CHECKS: tuple[str, ...] = (
    "generated",
    "matched",
    "traces_to_recipe",
    "complete",
    "exclusion",
    "inclusion",
    "consistent_doses",
    "chronology",
    "lab_values",
    "length_bin",
)


def _first(events: Sequence[TextEvent], bad) -> str | None:
    for e in events:
        if bad(e):
            return f"segment {e.segment} {e.system} {e.text!r}"
    return None


def verify_record(
    recipe: Recipe, events: Sequence[TextEvent], matches: Sequence[Match]
) -> dict[str, str | None]:
    """Check name -> None (passed) or a one-line reason, in :data:`CHECKS` order."""
    code = {id(e): m.code for e, m in zip(events, matches, strict=True)}
    out: dict[str, str | None] = dict.fromkeys(CHECKS)
    bad = [e for e in events if e.segment < 0 or e.segment >= len(recipe.segments)]
    if bad or not events:
        out["generated"] = bad[0].text if bad else "no events"
        return out
    out["matched"] = _first(events, lambda e: code[id(e)] is None)
    out["traces_to_recipe"] = _first(
        events,
        lambda e: (
            code[id(e)] is not None
            and (e.system, code[id(e)]) not in recipe.planned_codes(e.segment)
        ),
    )
    out["complete"] = _missing(recipe, events, code)
    spec = cohort_spec(recipe.cohort)
    excluded = {dx_concept(k).code for k in spec.excluded}
    out["exclusion"] = _first(events, lambda e: e.system == DX and code[id(e)] in excluded)
    index = {dx_concept(k).code for k in spec.index}
    stays = {e.segment for e in events if e.system == DX and code[id(e)] in index}
    out["inclusion"] = None if len(stays) >= 2 else f"index diagnoses at {len(stays)} stay(s)"
    out["consistent_doses"] = _doses(spec, events, code)
    out["chronology"] = _chronology(recipe, events)
    out["lab_values"] = _lab_values(events, code)
    low, high = bin_bounds(recipe.length_bin)
    n = 2 * len(recipe.segments) + len(events)
    out["length_bin"] = None if low <= n < high else f"{n} events outside [{low}, {high})"
    return out


def _missing(recipe: Recipe, events: Sequence[TextEvent], code: dict) -> str | None:
    have = defaultdict(set)
    for e in events:
        have[e.segment].add((e.system, code[id(e)]))
    for seg in recipe.segments:
        lost = recipe.planned_codes(seg.index) - have[seg.index]
        if lost:
            return f"segment {seg.index}: planned {sorted(lost)[0]} not generated"
    return None


def _doses(spec, events: Sequence[TextEvent], code: dict) -> str | None:
    chronic = {rx_concept(k).code for k, _ in spec.drugs}
    seen: dict[str, float | None] = {}
    for e in events:
        c = code[id(e)]
        if e.system == RX and c in chronic:
            if seen.setdefault(c, e.value) != e.value:
                return f"{c}: dose {e.value} at segment {e.segment}, {seen[c]} before"
    return None


def _chronology(recipe: Recipe, events: Sequence[TextEvent]) -> str | None:
    segs = recipe.segments
    for a, b in zip(segs, segs[1:], strict=False):
        if b.admit - a.discharge <= timedelta(days=7):
            return f"segment {b.index} starts {b.admit} <= 7 days after segment {a.index}"
    for k, e in enumerate(events):
        seg = segs[e.segment]
        t = event_time(seg, e.system, e.day, k)
        start = seg.admit.replace(hour=0, minute=0) if e.system == PX else seg.admit
        if not start <= t <= seg.discharge or not 0 <= e.day <= seg.los_days:
            return f"segment {e.segment} {e.system} {e.text!r} at day {e.day}: outside the stay"
    return None


def _lab_values(events: Sequence[TextEvent], code: dict) -> str | None:
    seen = set()
    for e in events:
        c = code[id(e)]
        if e.system != LAB or c is None:
            continue
        key = PANEL_ITEMIDS[int(c)][0]
        lo, hi = BOUNDS[key]
        if (e.segment, c, e.day) in seen:
            return f"segment {e.segment} {e.text!r}: a second result on day {e.day}"
        seen.add((e.segment, c, e.day))
        if e.value is None or not lo <= e.value <= hi:
            return f"segment {e.segment} {e.text!r} = {e.value}: outside [{lo}, {hi}]"
    return None


def failed_checks(result: dict[str, str | None]) -> list[str]:
    return [name for name, why in result.items() if why is not None]


__all__ = ["CHECKS", "failed_checks", "verify_record"]
