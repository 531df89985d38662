"""neopatient stage 2, Generation (PopMedQA §3 "Generation"): each segment of a recipe becomes
textual events — a natural-language description, a target coding system, a day within the stay
and a value — not yet codes (the seed: "descriptions are medically plausible but may not yet match
official ontology strings exactly"); :mod:`.match` codes them.

Two writers, one output shape (:class:`TextEvent`):

* :func:`rule_based_events` (the default, labelled ``rule-based``): each planned concept written
  in a plain-language surface form of its official title (lower case, qualifiers dropped, common
  synonyms), lab values drawn around the cohort's typical values, doses from the recipe. It keeps
  the planned code beside the text so :mod:`.match`'s accuracy can be measured.
* :func:`backbone_events`: a language model writes the segment from a prompt that states the
  segment's plan in words; its JSON reply is parsed here. The model is an injected callable
  (``prompts -> replies``), so this data-layer module imports no LLM client; the command line
  wires the kit's client in. Nothing requires it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from clinlib.data.neopatient.recipes import (
    DX,
    LAB,
    PX,
    RX,
    SYSTEMS,
    Concept,
    Recipe,
    Segment,
    patient_rng,
)
from clinlib.data.plausibility import BOUNDS
from clinlib.data.sources.synthetic_vocab import DRUGS
from clinlib.data.vocab import LAB_BY_KEY, PANEL_ITEMIDS

RULE_BASED = "rule-based"
Complete = Callable[[Sequence[str]], Sequence[str | None]]

# Plain-language rewrites of official wording (applied in order, on lower-case text).
SYNONYMS: tuple[tuple[str, str], ...] = (
    ("type 2 diabetes mellitus", "type 2 diabetes"),
    ("chronic kidney disease", "ckd"),
    ("myocardial infarction", "heart attack"),
    ("(primary) hypertension", "hypertension"),
    ("esophageal reflux", "acid reflux"),
    ("atherosclerotic heart disease", "coronary artery disease"),
    ("percutaneous approach", "percutaneous"),
    ("nonautologous red blood cells", "donor red cells"),
)
DROP_WORDS = re.compile(r"\b(not elsewhere classified|organism)\b,?\s*")


class GenerationError(ValueError):
    """A backbone's reply for a segment could not be read as events."""


@dataclass(frozen=True)
class TextEvent:
    """One generated event before matching: what the writer said and, for the rule-based
    writer, which code it meant (``planned``; None for a backbone)."""

    segment: int
    system: str
    text: str
    day: int
    value: float | None
    planned: str | None = None


def surface_form(concept: Concept, variant: int) -> str:
    """A plain-language rendering of a concept's official title (variant 0 or 1)."""
    text = concept.title.lower()
    if concept.system == RX:
        text = re.sub(r"\s*\(.*?\)", "", text).strip()
        return text if variant == 0 else f"{text} {DRUGS[concept.code].prod_strength.lower()}"
    if concept.system == LAB:
        return f"serum {text}" if variant == 0 else f"{text} level"
    text = DROP_WORDS.sub("", text).strip(" ,")
    if variant == 1:
        for old, new in SYNONYMS:
            text = text.replace(old, new)
    return re.sub(r"\s+", " ", text)


def lab_value(concept: Concept, shifts: dict, rng) -> float:
    """A value of a panel lab: around the cohort's typical value, else inside the range."""
    key = PANEL_ITEMIDS[int(concept.code)][0]
    lab = LAB_BY_KEY[key]
    if key in shifts:
        mean, sd = shifts[key]
        value = rng.normal(mean, sd)
    else:
        high = lab.ref_high
        low = lab.ref_low if lab.ref_low is not None else high * 0.5
        value = rng.uniform(low, high)
    lo, hi = BOUNDS.get(key, (0.0, float("inf")))
    return round(float(min(max(value, lo), hi)), lab.decimals)


def rule_based_events(recipe: Recipe, shifts: dict, seed: int = 0) -> list[TextEvent]:
    """Every planned concept of every segment as a :class:`TextEvent` (labs once a day)."""
    rng = patient_rng(seed, recipe.cohort + "/generate", recipe.subject_id)
    out: list[TextEvent] = []
    for seg in recipe.segments:
        for c in (*seg.diagnoses, *seg.procedures):
            day = seg.los_days if c.system == DX else min(1, seg.los_days)
            out.append(
                TextEvent(
                    seg.index, c.system, surface_form(c, int(rng.integers(2))), day, None, c.code
                )
            )
        for c, dose in seg.medications:
            text = surface_form(c, int(rng.integers(2)))
            out.append(TextEvent(seg.index, RX, text, 0, float(dose), c.code))
        for day in range(seg.los_days + 1):
            for c in seg.labs:
                value = lab_value(c, shifts, rng)
                text = surface_form(c, int(rng.integers(2)))
                out.append(TextEvent(seg.index, LAB, text, day, value, c.code))
    return out


def segment_prompt(recipe: Recipe, seg: Segment) -> str:
    """The words a backbone gets for one segment: the plan, the event budget, the format."""
    dx = "; ".join(c.title for c in seg.diagnoses)
    px = "; ".join(c.title for c in seg.procedures) or "none"
    rx = "; ".join(f"{c.title} {dose} {DRUGS[c.code].dose_unit}" for c, dose in seg.medications)
    labs = "; ".join(c.title for c in seg.labs)
    return (
        f"Write hospital stay {seg.index + 1} of a synthetic {recipe.age}-year-old "
        f"{'woman' if recipe.gender == 'F' else 'man'} ({recipe.cohort}). The stay runs from "
        f"day 0 to day {seg.los_days}.\nDiagnoses: {dx}.\nProcedures: {px}.\n"
        f"Medications (dose): {rx}.\nLabs, once on every day 0..{seg.los_days}: {labs}.\n"
        f"Return only a JSON array, one object per event, with keys system (one of "
        f"{', '.join(SYSTEMS)}), text (a plain-language description), day (0..{seg.los_days}) "
        f"and value (the lab result or the dose as a number; null otherwise)."
    )


def parse_segment(reply: str | None, seg: Segment) -> list[TextEvent]:
    """A backbone's reply as events; :class:`GenerationError` naming what is wrong."""
    if not reply or "[" not in reply or "]" not in reply:
        raise GenerationError(f"segment {seg.index}: the reply holds no JSON array")
    try:
        items = json.loads(reply[reply.index("[") : reply.rindex("]") + 1])
    except json.JSONDecodeError as exc:
        raise GenerationError(f"segment {seg.index}: reply is not JSON ({exc.msg})") from None
    out = []
    for i, item in enumerate(items):
        ok = isinstance(item, dict) and item.get("system") in SYSTEMS
        ok = ok and isinstance(item.get("text"), str) and isinstance(item.get("day"), int)
        if not ok or not 0 <= item["day"] <= seg.los_days:
            raise GenerationError(f"segment {seg.index}: event {i} is not a valid event: {item}")
        value = item.get("value")
        value = float(value) if isinstance(value, int | float) else None
        if item["system"] == LAB and value is None:
            raise GenerationError(f"segment {seg.index}: lab event {i} has no numeric value")
        out.append(TextEvent(seg.index, item["system"], item["text"], item["day"], value))
    return out


def backbone_events(recipes: Sequence[Recipe], complete: Complete) -> dict[int, list[TextEvent]]:
    """Every segment of every recipe written by a backbone, one prompt per segment in one
    batch: subject -> events. A record with a reply that cannot be read gets one marker event
    (segment -1, its text the reason), which fails the verifier's ``generated`` check."""
    prompts, where = [], []
    for r in recipes:
        for seg in r.segments:
            prompts.append(segment_prompt(r, seg))
            where.append((r, seg))
    replies = list(complete(prompts))
    out: dict[int, list[TextEvent]] = {r.subject_id: [] for r in recipes}
    failed: dict[int, str] = {}
    for (r, seg), reply in zip(where, replies, strict=True):
        try:
            out[r.subject_id].extend(parse_segment(reply, seg))
        except GenerationError as exc:
            failed.setdefault(r.subject_id, str(exc))
    for sid, msg in failed.items():
        out[sid] = [TextEvent(-1, "", msg, 0, None)]  # the verifier's `generated` check fails
    return out


def event_time(seg: Segment, system: str, day: int, k: int) -> datetime:
    """When an event of ``system`` on ``day`` of the stay happens (the k-th of its day)."""
    base = seg.admit.replace(hour=0, minute=0) + timedelta(days=day)
    if system == LAB:
        hour = 11 if day == 0 else 6  # after the admission on day 0
        return base + timedelta(hours=hour, minutes=k % 50)
    if system == RX:
        return seg.admit + timedelta(hours=1, minutes=k)
    if system == PX:
        return base  # MIMIC procedures carry a date only
    return seg.discharge  # diagnoses are coded at discharge


__all__ = [
    "RULE_BASED",
    "GenerationError",
    "TextEvent",
    "backbone_events",
    "rule_based_events",
    "surface_form",
]
