"""a-mem: Zettelkasten-style agentic memory (paper §4 "A-Mem (Zettelkasten-style atomic notes,
DeepSeek-prepared)"; §6 "atomic facts vs. visit-level notes vs. prose"; Appendix C.3 "A-Mem
notes per patient"; Xu et al. 2025, "A-MEM: Agentic Memory for LLM Agents").

A-Mem's design, one note per encounter (the paper's "visit-level notes"):

1. **Note construction** — each encounter becomes a note with ``content`` (a condensed,
   self-contained note of the encounter), ``keywords``, ``tags`` and a one-sentence
   ``context``; with an LLM prep model under :data:`NOTE_CONSTRUCTION_PROMPT`, offline by the
   rule-based reader: abnormal labs, medications, procedures, diagnoses and the reported
   complaint (normal lab values are only counted, as a note-taker would), keywords = the
   abnormal labs, drugs, diagnosis codes and procedures, tags = the kinds of finding plus the
   condition groups of the diagnosis codes, context = what the encounter was about.
2. **Link generation** — the new note's nearest existing notes by embedding (cosine over
   ``content``, the ``neighbors`` closest) are candidates; the LLM under
   :data:`EVOLUTION_PROMPT` chooses which to link ("strengthen"); the rule-based stand-in links
   the candidates that share a keyword.
3. **Memory evolution** — the linked neighbours' context and tags are updated in the light of
   the new note ("update_neighbor"); the rule-based stand-in appends a dated follow-up line to
   the neighbour's context (the last three are kept) and merges the new note's condition tags.

Access follows A-Mem's agentic search: the K notes closest to the question (cosine on content),
then their linked notes (at most ``max_linked``, default K), each shown with its date, context,
keywords and tags. Derived: a sentence injected after construction is in no note.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.dialogue.render import render_visit
from clinlib.dialogue.selection import condition_of
from clinlib.strategies.base import Artifact, Strategy, StrategyError, question_text
from clinlib.strategies.embed import DEFAULT_EMBEDDING_MODEL, EmbedsQueries
from clinlib.strategies.facts import Fact, facts_of
from clinlib.strategies.mem0 import retrieval_text
from clinlib.strategies.prep import PrepError, PrepRequest, count_text_tokens, parse_json_reply

FOLLOW_UPS_KEPT = 3
MAX_KEYWORDS = 12
NOTES_HEADER = "Memory notes (most relevant first; linked notes follow):"

NOTE_CONSTRUCTION_PROMPT = """Generate a structured memory note of the following hospital \
encounter (part of a patient-clinician dialogue) by:
1. Writing "content": a condensed, self-contained note of the encounter (dates, key findings \
with values and units, medications, procedures, diagnoses with codes; keep bracketed event ids \
such as [LAB-12] next to the facts they support);
2. Identifying the most salient "keywords" (clinical concepts, ordered from most to least \
important; at least three, not redundant; not dates);
3. Writing "context": one sentence on the main topic of the encounter and its key points;
4. Creating "tags": several broad categories for classification (at least three).
Return only JSON: {"content": "...", "keywords": [...], "context": "...", "tags": [...]}"""
NOTE_CONSTRUCTION_USER = "Encounter:\n{encounter}"

EVOLUTION_PROMPT = """You are an AI memory evolution agent responsible for managing and \
evolving a knowledge base of notes about one patient. Analyse the new memory note according to \
its keywords and context, together with its nearest neighbour notes, and decide how the memory \
should evolve.

The new memory note:
context: {context}
content: {content}
keywords: {keywords}

The nearest neighbour notes:
{neighbors}

Decide:
1. Should this memory evolve? Consider its relationships with the other notes.
2. Which actions: "strengthen" (connect the new note to neighbours; give the new note's updated \
tags) and/or "update_neighbor" (rewrite the context and tags of the neighbours in the light of \
the new note; unchanged ones keep their current context and tags, in the order given).
The lengths of new_context_neighborhood and new_tags_neighborhood must equal the number of \
neighbours, which is {n}.
Return only JSON: {{"should_evolve": true or false, "actions": ["strengthen", \
"update_neighbor"], "suggested_connections": [neighbour indices], "tags_to_update": [...], \
"new_context_neighborhood": [...], "new_tags_neighborhood": [[...], ...]}}"""


def _condition_tags(facts: Sequence[Fact]) -> list[str]:
    tags: dict[str, None] = {}
    for f in facts:
        if f.kind == "diagnosis":
            group = condition_of(f.code)
            if group:
                tags.setdefault(group.replace("_", " "), None)
    return list(tags)


def _note_sentences(
    kinds: dict[str, list[Fact]], date: str, ids: Callable[[Fact], str]
) -> list[str]:
    """The note's content: the encounter, abnormal labs, orders, diagnoses and symptoms."""
    adm, dis = kinds.get("admission", []), kinds.get("discharge", [])
    parts = [
        f"Encounter of {date or 'unknown date'}"
        + (f" ({adm[0].name})" if adm else "")
        + (
            f", discharged {dis[-1].date}" + (f" to {dis[-1].name}" if dis[-1].name else "")
            if dis
            else ""
        )
        + "."
    ]
    labs = kinds.get("lab", [])
    abnormal = [f for f in labs if f.flag]
    if abnormal:
        parts.append(
            "Abnormal labs: "
            + "; ".join(
                f"{f.name} {f.value} {f.unit} ({f.flag}) on {f.date}{ids(f)}" for f in abnormal
            )
            + "."
        )
    if labs:
        parts.append(f"{len(labs) - len(abnormal)} other lab result(s) within range.")
    for kind, label in (
        ("medication", "Medications"),
        ("procedure", "Procedures"),
        ("diagnosis", "Diagnoses"),
    ):
        fs = kinds.get(kind, [])
        if not fs:
            continue
        if kind == "medication":
            items = [
                f"{f.name} {f.value} {f.unit}{' ' + f.route if f.route else ''}{ids(f)}" for f in fs
            ]
        else:
            items = [f"{f.name} ({f.code}){ids(f)}" for f in fs]
        parts.append(f"{label}: " + "; ".join(items) + ".")
    symptoms = [f.name for f in kinds.get("symptom", [])]
    if symptoms:
        parts.append("Patient reported: " + "; ".join(symptoms) + ".")
    return parts


def rule_based_note(number: int, visit_idx: int, facts: Sequence[Fact], with_ids: bool) -> dict:
    """Note construction (content, keywords, tags, context) from one encounter's facts."""
    kinds: dict[str, list[Fact]] = {}
    for f in facts:
        kinds.setdefault(f.kind, []).append(f)
    ids = lambda f: f" [{', '.join(f.ids)}]" if with_ids and f.ids else ""  # noqa: E731
    adm = kinds.get("admission", [])
    date = adm[0].date if adm else next((f.date for f in facts if f.date), "")
    parts = _note_sentences(kinds, date, ids)
    labs = kinds.get("lab", [])
    abnormal = [f for f in labs if f.flag]
    keywords: dict[str, None] = {}
    for f in abnormal:
        keywords.setdefault(f.name, None)
    for f in kinds.get("medication", []):
        keywords.setdefault(f.name, None)
    for f in kinds.get("diagnosis", []) + kinds.get("procedure", []):
        keywords.setdefault(f"{f.name} ({f.code})", None)
    tags = [
        t
        for t, fs in (
            ("abnormal labs", abnormal),
            ("medications", kinds.get("medication")),
            ("procedures", kinds.get("procedure")),
            ("diagnoses", kinds.get("diagnosis")),
        )
        if fs
    ]
    tags += _condition_tags(facts)
    top_dx = [f.name for f in kinds.get("diagnosis", [])[:2]]
    context = (
        f"Encounter {number} on {date or 'an unknown date'}: {len(abnormal)} abnormal of "
        f"{len(labs)} lab results, {len(kinds.get('medication', []))} medication orders"
        + (f"; diagnoses include {' and '.join(top_dx)}" if top_dx else "")
        + "."
    )
    return {
        "id": f"n{number}",
        "visit_idx": int(visit_idx),
        "date": date,
        "content": " ".join(parts),
        "keywords": list(keywords)[:MAX_KEYWORDS],
        "tags": tags,
        "context": context,
        "links": [],
        "evolution_history": [],
    }


def _norm(s: str) -> str:
    return " ".join(str(s).lower().split())


def rule_based_evolution(note: dict, neighbors: Sequence[dict]) -> dict:
    """The rule-based stand-in of the evolution decision, in EVOLUTION_PROMPT's JSON shape."""
    mine = {_norm(k) for k in note["keywords"]}
    connect, contexts, tags = [], [], []
    cond = [
        t
        for t in note["tags"]
        if t not in ("abnormal labs", "medications", "procedures", "diagnoses")
    ]
    for i, nb in enumerate(neighbors):
        shared = [k for k in nb["keywords"] if _norm(k) in mine]
        if shared:
            connect.append(i)
            follow = [ln for ln in nb["context"].split("\n") if ln.startswith("Followed up")]
            head = nb["context"].split("\n")[0]
            line = f"Followed up {note['date'] or 'later'}: {', '.join(shared[:3])}."
            contexts.append("\n".join([head, *(follow + [line])[-FOLLOW_UPS_KEPT:]]))
            tags.append(list(dict.fromkeys([*nb["tags"], *cond])))
        else:
            contexts.append(nb["context"])
            tags.append(list(nb["tags"]))
    return {
        "should_evolve": bool(connect),
        "actions": ["strengthen", "update_neighbor"] if connect else [],
        "suggested_connections": connect,
        "tags_to_update": list(note["tags"]),
        "new_context_neighborhood": contexts,
        "new_tags_neighborhood": tags,
    }


def apply_evolution(note: dict, neighbors: Sequence[dict], decision: Mapping[str, Any]) -> None:
    """Apply an evolution decision (A-Mem's process_memory) to the new note and neighbours."""
    if not decision.get("should_evolve"):
        return
    actions = [str(a) for a in decision.get("actions", [])]
    if "strengthen" in actions:
        for i in decision.get("suggested_connections", []):
            try:
                nb = neighbors[int(i)]
            except (ValueError, TypeError, IndexError):
                continue
            if nb["id"] not in note["links"]:
                note["links"].append(nb["id"])
        new_tags = [str(t) for t in decision.get("tags_to_update", []) if str(t).strip()]
        if new_tags:
            note["tags"] = new_tags
    if "update_neighbor" in actions:
        contexts = list(decision.get("new_context_neighborhood", []))
        tags = list(decision.get("new_tags_neighborhood", []))
        for i, nb in enumerate(neighbors):
            changed = {}
            if i < len(contexts) and str(contexts[i]).strip() and contexts[i] != nb["context"]:
                changed["context"] = str(contexts[i])
            if i < len(tags) and isinstance(tags[i], list) and tags[i] != nb["tags"]:
                changed["tags"] = [str(t) for t in tags[i]]
            if changed:
                nb["evolution_history"].append({"by": note["id"], **changed})
                nb.update(changed)


def _format_neighbors(neighbors: Sequence[dict]) -> str:
    return "\n".join(
        f"memory index:{i}\tdate:{n['date']}\tmemory content: {n['content']}\t"
        f"memory context: {n['context']}\tmemory keywords: {n['keywords']}\t"
        f"memory tags: {n['tags']}"
        for i, n in enumerate(neighbors)
    )


class AMemMemory(EmbedsQueries, Strategy):
    """Visit-level Zettelkasten notes with links and evolution (derived; prep-built)."""

    name = "a-mem"
    family = "agentic memory"
    derived = True
    uses_prep = True
    defaults = {
        "k": 5,
        "neighbors": 5,
        "max_linked": None,
        "with_ids": True,
        "embedding_model": DEFAULT_EMBEDDING_MODEL,
        "embedding_dir": None,
    }
    construction_keys = ("neighbors", "with_ids", "embedding_model")

    def validate_params(self) -> None:
        self._positive_int("k")
        self._positive_int("neighbors")
        if self.params["max_linked"] is not None and int(self.params["max_linked"]) < 0:
            raise StrategyError(f"{self.name}: max_linked must be >= 0")

    def prepare(self, jobs: Sequence[tuple[int, pd.DataFrame]], prep: Any) -> None:
        self._drafts: dict[int, list[dict]] = {}
        if getattr(prep, "is_llm", False):
            return
        # Rule-based notes do not depend on each other: draft them all, embed in one batch.
        for sid, turns in jobs:
            self._drafts[sid] = self._rule_based_drafts(turns)
        self.embedder.ensure(
            [retrieval_text(n["content"]) for notes in self._drafts.values() for n in notes]
        )

    def _rule_based_drafts(self, turns: pd.DataFrame) -> list[dict]:
        by_visit: dict[int, list[Fact]] = {int(v): [] for v in pd.unique(turns["visit_idx"])}
        for f in facts_of(turns):
            by_visit.setdefault(f.visit_idx, []).append(f)
        return [
            rule_based_note(i, v, by_visit[v], bool(self.params["with_ids"]))
            for i, v in enumerate(sorted(by_visit), start=1)
        ]

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        drafts = getattr(self, "_drafts", {}).pop(subject_id, None)
        states = list(self._states(subject_id, turns, prep, drafts))
        _, notes, warnings = states[-1] if states else (0, [], [])
        return {"notes": notes, "warnings": warnings}

    def build_snapshots(
        self, subject_id: int, turns: pd.DataFrame, prep: Any, at: Sequence[int]
    ) -> dict[int, dict]:
        """The notes after the first t visits for every t in ``at``, from one visit-by-visit
        pass (the streaming protocol, MedMemoryBench §5 "Evaluation Protocol"); evolution rewrites earlier notes,
        so each snapshot is a deep copy."""
        wanted = {int(t) for t in at}
        return {
            t: copy.deepcopy({"notes": notes, "warnings": warnings})
            for t, notes, warnings in self._states(subject_id, turns, prep, None)
            if t in wanted
        }

    def _states(
        self, subject_id: int, turns: pd.DataFrame, prep: Any, drafts: list[dict] | None
    ) -> Iterator[tuple[int, list[dict], list[str]]]:
        """(visits seen, notes, warnings) after each visit: notes are built and evolved
        visit by visit, so every prefix is a snapshot of the store."""
        llm = getattr(prep, "is_llm", False)
        visits = [(int(v), g) for v, g in turns.groupby("visit_idx", sort=True)]
        if drafts is None and not llm:
            drafts = self._rule_based_drafts(turns)
        notes: list[dict] = []
        warnings: list[str] = []
        vectors: list[np.ndarray] = []
        for i, (v, g) in enumerate(visits, start=1):
            note = (
                drafts[i - 1]
                if drafts is not None
                else self._llm_note(subject_id, i, v, g, prep, warnings)
            )
            vec = self.embedder.encode([retrieval_text(note["content"])])[0]
            if notes:
                sims = np.stack(vectors) @ vec
                near = [
                    notes[int(j)]
                    for j in np.argsort(-sims, kind="stable")[: int(self.params["neighbors"])]
                ]
                decision = (
                    self._llm_evolution(subject_id, note, near, prep, warnings)
                    if llm
                    else rule_based_evolution(note, near)
                )
                apply_evolution(note, near, decision)
            notes.append(note)
            vectors.append(vec)
            yield i, notes, warnings

    def _llm_note(
        self, subject_id: int, number: int, v: int, g: pd.DataFrame, prep: Any, warnings: list
    ) -> dict:
        text = render_visit(g, with_ids=bool(self.params["with_ids"]), header=True)
        reply = prep.complete(
            [
                PrepRequest(
                    f"{self.name}|{subject_id}|v{v}|note",
                    [
                        {"role": "system", "content": NOTE_CONSTRUCTION_PROMPT},
                        {"role": "user", "content": NOTE_CONSTRUCTION_USER.format(encounter=text)},
                    ],
                    max_tokens=1500,
                )
            ]
        )[0]
        date = str(g["visit_date"].iloc[0]) if "visit_date" in g.columns else ""
        note = {
            "id": f"n{number}",
            "visit_idx": v,
            "date": date,
            "content": text,
            "keywords": [],
            "tags": [],
            "context": "General",
            "links": [],
            "evolution_history": [],
        }
        try:
            parsed = parse_json_reply(reply, f"visit {v} note construction")
        except PrepError as exc:
            # A-Mem keeps the raw content with default metadata when analysis fails.
            warnings.append(str(exc))
            return note
        if isinstance(parsed, Mapping):
            if str(parsed.get("content", "")).strip():
                note["content"] = str(parsed["content"]).strip()
            note["keywords"] = [str(k) for k in parsed.get("keywords", []) if str(k).strip()]
            note["tags"] = [str(t) for t in parsed.get("tags", []) if str(t).strip()]
            note["context"] = str(parsed.get("context", "General")).strip() or "General"
        return note

    def _llm_evolution(
        self, subject_id: int, note: dict, near: Sequence[dict], prep: Any, warnings: list
    ) -> dict:
        prompt = EVOLUTION_PROMPT.format(
            context=note["context"],
            content=note["content"],
            keywords=note["keywords"],
            neighbors=_format_neighbors(near),
            n=len(near),
        )
        reply = prep.complete(
            [
                PrepRequest(
                    f"{self.name}|{subject_id}|{note['id']}|evolve",
                    [{"role": "user", "content": prompt}],
                    max_tokens=2000,
                )
            ]
        )[0]
        try:
            parsed = parse_json_reply(reply, f"{note['id']} evolution")
        except PrepError as exc:
            warnings.append(str(exc))
            return {"should_evolve": False}
        return parsed if isinstance(parsed, Mapping) else {"should_evolve": False}

    # -- access -----------------------------------------------------------------------------
    def search(self, artifact: Artifact, query: str) -> list[tuple[dict, bool]]:
        """A-Mem's agentic search: (note, is_linked_neighbour) pairs."""
        notes = artifact.data.get("notes", [])
        if not notes:
            return []
        ranked = self._ranked(notes, query)
        k = int(self.params["k"])
        limit = int(self.params["max_linked"]) if self.params["max_linked"] is not None else k
        by_id = {n["id"]: n for n in notes}
        out = [(n, False) for n in ranked[:k]]
        seen = {n["id"] for n, _ in out}
        added = 0
        for n, _ in list(out):
            for link in n.get("links", []):
                if added >= limit:
                    break
                if link in by_id and link not in seen:
                    out.append((by_id[link], True))
                    seen.add(link)
                    added += 1
        return out

    def _ranked(self, notes: Sequence[dict], query: str) -> list[dict]:
        mat = self.embedder.encode([retrieval_text(n["content"]) for n in notes])
        q = self.embedder.encode([query])[0]
        return [notes[int(i)] for i in np.argsort(-(mat @ q), kind="stable")]

    @staticmethod
    def render_note(note: Mapping[str, Any], linked: bool = False) -> str:
        """One note as shown to the answering model."""
        mark = " (linked)" if linked else ""
        return (
            f"[{note['id']}{mark} | {note['date']}] {note['content']}\n"
            f"  context: {note['context']}\n"
            f"  keywords: {', '.join(note['keywords'])}\n"
            f"  tags: {', '.join(note['tags'])}"
        )

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        hits = self.search(artifact, question_text(question))
        if not hits:
            return NOTES_HEADER + "\n(none)"
        return NOTES_HEADER + "\n" + "\n".join(self.render_note(n, linked) for n, linked in hits)

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        notes = artifact.data.get("notes", [])
        return (
            [int(n["visit_idx"]) for n in self._ranked(notes, question_text(question))]
            if notes
            else []
        )

    def store_text(self, artifact: Artifact) -> str:
        return "\n".join(self.render_note(n) for n in artifact.data.get("notes", []))

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        notes = artifact.data.get("notes", [])
        return {
            "n_items": len(notes),
            "item": "notes",
            "n_notes": len(notes),
            "n_links": sum(len(n.get("links", [])) for n in notes),
            "n_evolved": sum(1 for n in notes if n.get("evolution_history")),
            "store_tokens": count_text_tokens(self.store_text(artifact)),
        }
