"""Rendering dialogues as text: the evaluation context (paper §3 "Cohort"; §4 "the full
dialogue" given to each strategy; docs/design.md "Layout").

``render_dialogue`` gives visits in order, each with a ``Visit N (YYYY-MM-DD)`` header and one
``Patient:`` / ``Clinician:`` line per turn, with or without the provenance tags. Turns of an
inserted noise session (``is_noise``; MedMemoryBench §4 "Noise Augmentation") are always shown
without their ``NOISE-...`` tags, so the evaluation context does not say which sessions are
noise; dialogues without noise render exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.dialogue.fields import present, records

SPEAKER_PREFIX = {"patient": "Patient", "clinician": "Clinician"}
VISIT_HEADER = "Visit {number} ({date})"


def _turn_records(turns: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records(turns), key=lambda r: int(r["turn_idx"]))


def _render(recs: list[dict[str, Any]], with_ids: bool, header: bool) -> str:
    lines = []
    if header and recs:
        number, date = int(recs[0]["visit_idx"]) + 1, recs[0].get("visit_date")
        head = VISIT_HEADER.format(number=number, date=date)
        lines.append(head if present(date) else head.split(" (")[0])
    for r in recs:
        noise = r.get("is_noise")
        text = r["text_tagged"] if with_ids and not (present(noise) and bool(noise)) else r["text"]
        lines.append(f"{SPEAKER_PREFIX.get(r['speaker'], str(r['speaker']))}: {text}")
    return "\n".join(lines)


def render_visit(
    turns: pd.DataFrame | Sequence[Mapping[str, Any]], with_ids: bool = True, header: bool = True
) -> str:
    """Render one visit's turns as text.

    Args:
        turns: the turns of exactly one visit (dialogues.parquet rows).
        with_ids: append the provenance tags (evaluation contexts; default).
        header: start with ``Visit N (YYYY-MM-DD)``.

    Returns:
        ``"Visit 2 (2150-04-01)\\nPatient: ...\\nClinician: ... [LAB-1]"``.
    """
    recs = _turn_records(turns)
    visits = {int(r["visit_idx"]) for r in recs}
    if len(visits) > 1:
        raise ValueError(f"render_visit expects one visit, got visits {sorted(visits)}")
    return _render(recs, with_ids, header)


def render_dialogue(
    turns: pd.DataFrame | Sequence[Mapping[str, Any]],
    with_ids: bool = True,
    visits: Iterable[int] | None = None,
) -> str:
    """Render a patient's dialogue (the evaluation context): visits in order, each with its
    header, separated by a blank line.

    Args:
        turns: one patient's turns.
        with_ids: append provenance tags (default True for evaluation contexts).
        visits: optional visit_idx values to include (e.g. the last visit only).

    Returns:
        The dialogue text.
    """
    recs = _turn_records(turns)
    if len({int(r["subject_id"]) for r in recs if "subject_id" in r}) > 1:
        raise ValueError("render_dialogue expects one patient's turns")
    keep = None if visits is None else {int(v) for v in visits}
    by_visit: dict[int, list[dict[str, Any]]] = {}
    for r in recs:
        v = int(r["visit_idx"])
        if keep is None or v in keep:
            by_visit.setdefault(v, []).append(r)
    return "\n\n".join(_render(by_visit[v], with_ids, True) for v in sorted(by_visit))
