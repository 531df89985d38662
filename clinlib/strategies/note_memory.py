"""``note-memory(m=...)``: LongMedBench's note memory M_N^(i,j) = {N_i, ..., N_{j-1}}, "visit-
level summaries from preceding V_i to V_{j-1} ... high-level compressed and emphasizing global
trajectory rather than detailed event recall" — the discharge notes of the up to ``m`` visits
BEFORE the question's target visit (``m = inf``: every earlier one), one paragraph per visit,
in time order. ``history_only``: a decision question (T11 / T11O) may be asked under it, which
gives the seed's Table 4 (event memory ``history-visits`` / ``flat-history`` vs note memory).

The notes are the SYNTHETIC discharge notes of :mod:`clinlib.data.sources.notes`, written from
the events the dialogue states (as ``event-table`` takes them: the ids its turns list, so a fact
the dialogue leaves out is absent here too), never MIMIC's. Each note paragraph opens with its
admission date (the seed's summaries carry their visit's time; no visit number). Every
sentence carries the ids of the events it states; :func:`verify_notes` checks them with the
dialogue verifier's own per-turn checks (:func:`clinlib.dialogue.checks.check_turns`: tags
consistent, no untraced number / date / code / drug) and ``check_ids_exist``, each sentence
taken as a turn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.data.sources.notes import note_text, visit_note
from clinlib.dialogue.checks import check_ids_exist, check_turns
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher, format_tag
from clinlib.strategies.base import Artifact, StrategyError
from clinlib.strategies.event_table import EventTable, stated_event_ids
from clinlib.strategies.prep import count_text_tokens
from clinlib.strategies.window import history, target_visit

NOTES_HEADER = "Discharge notes of earlier stays (one per stay, in time order):"


def note_turns(sentences: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A note's sentences as verifier turns (text, tagged text, event ids)."""
    return [
        {
            "turn_idx": i,
            "text": str(s["text"]),
            "text_tagged": f"{s['text']} {format_tag(list(s['event_ids']))}",
            "event_ids": list(s["event_ids"]),
        }
        for i, s in enumerate(sentences)
    ]


def verify_notes(
    sentences: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """The dialogue verifier's per-turn checks on one patient's note sentences against that
    patient's events: ``{check: [problem, ...]}`` (all empty when every stated fact traces to
    a cited event)."""
    by_id = {str(e["event_id"]): e for e in events}
    turns = note_turns(sentences)
    meds = [str(e["label"]) for e in events if e.get("kind") == "medication" and e.get("label")]
    drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    out = check_turns(turns, by_id, drugs)
    out["event_ids_exist"] = check_ids_exist(turns, by_id, {})
    return out


class NoteMemory(EventTable):
    """The synthetic discharge notes of the visits before the target (module docstring)."""

    name = "note-memory"
    family = "note memory"
    query_dependent = True
    history_only = True
    defaults = {"m": math.inf, "events_dir": None}
    construction_keys = ()

    def validate_params(self) -> None:
        m = self.params["m"]
        if isinstance(m, str) and m.strip().lower() in ("inf", "infinity"):
            m = math.inf
        if isinstance(m, bool) or not (
            (isinstance(m, int) and m >= 0) or (isinstance(m, float) and m == math.inf)
        ):
            raise StrategyError(f"{self.name}: m must be an integer >= 0 or inf, got {m!r}")
        self.params["m"] = m

    def label(self) -> str:
        m = self.params["m"]
        return f"{self.name}(m={'inf' if math.isinf(m) else int(m)})"

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        self.prepare([(subject_id, turns)], prep)
        ev = self._events.get(int(subject_id), {})
        stated = set(stated_event_ids(turns))
        visit_of = {
            str(e): int(v)
            for ids, v in zip(turns["event_ids"], turns["visit_idx"], strict=True)
            for e in ([] if ids is None else list(ids))
        }
        per_visit: dict[int, list[dict]] = {}
        for eid in stated:
            if eid in ev and eid in visit_of:
                per_visit.setdefault(visit_of[eid], []).append(ev[eid])
        notes = {str(v): visit_note(evs) for v, evs in per_visit.items()}
        return {"notes": notes, "visits": sorted(per_visit)}

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        visits = sorted({int(v) for v in turns_now["visit_idx"]})
        shown = history(visits, target_visit({}, question, visits), self.params["m"])
        notes = artifact.data.get("notes", {})
        paras = [note_text(notes[str(v)]) for v in shown if notes.get(str(v))]
        return "\n\n".join([NOTES_HEADER, *paras]) if paras else ""

    def store_text(self, artifact: Artifact) -> str:
        notes = artifact.data.get("notes", {})
        return "\n\n".join(note_text(notes[k]) for k in sorted(notes, key=int))

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_items": len(artifact.data.get("notes", {})),
            "item": "notes",
            "store_tokens": count_text_tokens(self.store_text(artifact)),
        }
