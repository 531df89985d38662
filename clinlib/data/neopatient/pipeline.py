"""neopatient end to end (PopMedQA §3, Fig. 2): sampling -> generation -> matching ->
verification -> MEDS. A record that fails verification is sampled again (a fresh recipe draw,
up to :data:`MAX_ATTEMPTS` times) and counted; the run refuses when no record survives.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clinlib.data.neopatient.generate import (
    RULE_BASED,
    Complete,
    backbone_events,
    rule_based_events,
    surface_form,
)
from clinlib.data.neopatient.match import CodeIndex, Encode, match_accuracy
from clinlib.data.neopatient.recipes import (
    LAB,
    RX,
    Concept,
    Recipe,
    bin_bounds,
    cohort_spec,
    lab_concept,
    rx_concept,
    sample_recipe,
)
from clinlib.data.neopatient.records import events_frame, record_events, write_records
from clinlib.data.neopatient.verify import failed_checks, verify_record
from clinlib.data.vocab import PANEL_ITEMIDS

FIRST_SUBJECT = 90_000_000
MAX_ATTEMPTS = 5


class NeopatientError(ValueError):
    """A run that wrote nothing usable (every record rejected)."""


@dataclass
class NeoRun:
    """What :func:`generate_cohort` made: the event table, recipes and the run's report."""

    events: pd.DataFrame
    recipes: list[Recipe]
    writer: str
    attempts: int = 0
    rejections: Counter = field(default_factory=Counter)
    match: dict = field(default_factory=dict)
    mismatches: list[tuple[str, str, str | None]] = field(default_factory=list)
    mismatches_kept: int = 0  # mismatched events in written records (verification keeps this 0)
    seconds: float = 0.0

    def bins(self) -> pd.DataFrame:
        """Per written record: its bin and event count (admissions and discharges included)."""
        n = self.events.groupby("subject_id").size()
        return pd.DataFrame(
            {
                "subject_id": [r.subject_id for r in self.recipes],
                "length_bin": [r.length_bin for r in self.recipes],
                "events": [int(n[r.subject_id]) for r in self.recipes],
            }
        )


def _texts(batch: Sequence[Recipe], backbone: Complete | None, seed: int) -> dict[int, list]:
    if backbone is not None:
        return backbone_events(batch, backbone)
    return {r.subject_id: rule_based_events(r, cohort_spec(r.cohort).shifts, seed) for r in batch}


def generate_cohort(
    cohort: str,
    n: int,
    encode: Encode,
    length_bin: str = "short",
    seed: int = 0,
    backbone: Complete | None = None,
    index: CodeIndex | None = None,
) -> NeoRun:
    """Generate ``n`` verified records of ``cohort`` in ``length_bin``.

    Args:
        encode: texts -> L2-normalised vectors (the matching step's encoder).
        backbone: prompts -> replies; None for the rule-based writer (the default).
        index: a prebuilt :class:`CodeIndex` (else one is built with ``encode``).
    """
    t0 = time.perf_counter()
    cohort_spec(cohort), bin_bounds(length_bin)  # unknown names fail before any work
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    index = index or CodeIndex(encode)
    writer = RULE_BASED if backbone is None else "backbone"
    run = NeoRun(events=pd.DataFrame(), recipes=[], writer=writer)
    pending = [FIRST_SUBJECT + i for i in range(n)]
    rows: list[dict] = []
    serial: dict = {"lab": 0, "rx": 0}
    planned, found, said = [], [], []
    for attempt in range(MAX_ATTEMPTS):
        if not pending:
            break
        batch = [sample_recipe(cohort, sid, length_bin, seed, attempt) for sid in pending]
        texts = _texts(batch, backbone, seed + attempt)
        pending = []
        for recipe in batch:
            events = texts[recipe.subject_id]
            matches = index.match_many([(e.system, e.text) for e in events])
            run.attempts += 1
            planned += [e.planned for e in events]
            found += matches
            said += [e.text for e in events]
            wrong = [
                (e.text, e.planned, m.code)
                for e, m in zip(events, matches, strict=True)
                if e.planned is not None and m.code != e.planned
            ]
            run.mismatches += wrong
            failed = failed_checks(verify_record(recipe, events, matches))
            run.mismatches_kept += 0 if failed else len(wrong)
            if failed:
                run.rejections.update(failed)
                pending.append(recipe.subject_id)
                continue
            run.recipes.append(recipe)
            rows += record_events(recipe, events, matches, serial)
    run.match = match_accuracy(planned, found, said) if backbone is None else {}
    if not run.recipes:
        top = ", ".join(f"{k} x{v}" for k, v in run.rejections.most_common(3))
        raise NeopatientError(f"neopatient: all {n} records failed verification ({top})")
    run.recipes.sort(key=lambda r: r.subject_id)
    run.events = events_frame(rows)
    run.seconds = time.perf_counter() - t0
    return run


def vocabulary_accuracy(index: CodeIndex) -> tuple[int, int, list[tuple[str, str, str | None]]]:
    """Matching measured over the whole indexed vocabulary: every code's title in each of the
    rule-based writer's surface forms, looked up in its system. Returns (correct, total,
    misses as (description, planned code, matched code))."""
    concepts = [_concept(e) for e in index.entries]
    queries = [(c.system, surface_form(c, v)) for v in (0, 1) for c in concepts]
    matches = index.match_many(queries)
    planned = [c.code for _ in (0, 1) for c in concepts]
    misses = [
        (t, p, m.code)
        for (_, t), p, m in zip(queries, planned, matches, strict=True)
        if m.code != p
    ]
    return len(queries) - len(misses), len(queries), misses


def _concept(entry) -> Concept:
    """The concept a recipe would plan for an indexed code (labs and drugs: their names)."""
    if entry.system == LAB:
        return lab_concept(PANEL_ITEMIDS[int(entry.code)][0])
    if entry.system == RX:
        return rx_concept(entry.code)
    return Concept(entry.system, entry.code, entry.description)


def write_run(run: NeoRun, out_dir: Path) -> Path:
    """The run's records as a MEDS dataset under ``out_dir``."""
    return write_records(run.events, run.recipes, Path(out_dir), run.writer)
