"""neopatient stage 3, Matching (PopMedQA §3 "Matching", "Static Resources"): a precomputed
vector index of the kit's code vocabularies maps each generated description to a code of its
target system (the seed uses ChromaDB over Qwen 3 8B vectors; here an in-memory matrix of
normalised vectors and a dot product, the same nearest-neighbour lookup at this vocabulary's size).

The encoder is injected (``texts -> array (n, dim)``, L2-normalised): this data-layer module
imports no model. The command line passes the kit's shipped static encoder
(``clinlib.strategies.encoders``, loaded offline from ``data/models/``); nothing is downloaded.

Vocabularies indexed (``clinlib.data.sources.synthetic_vocab`` and the 18-lab panel): every
ICD-10-CM diagnosis and ICD-10-PCS procedure title the kit carries, every panel lab (label, fluid,
category, unit) and every drug (name, strength, form). A lookup searches its own system only; a
best cosine under :data:`MIN_SCORE` is no match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from clinlib.data.neopatient.recipes import DX, LAB, PX, RX
from clinlib.data.sources.synthetic_vocab import DRUGS, ICD10_DX_TITLES, ICD10_PX_TITLES, LAB_ITEMS
from clinlib.data.vocab import LAB_PANEL

Encode = Callable[[Sequence[str]], np.ndarray]
MIN_SCORE = 0.45
# Weight of the word-overlap term (share of the query's words found in the description) added
# to the cosine: a hybrid lexical + vector lookup (the static encoder alone places a short drug
# name such as "heparin" nearer to another drug).
LEXICAL_WEIGHT = 0.5
WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class VocabEntry:
    """One code of the index: its system, code and the text its vector is made from."""

    system: str
    code: str
    description: str


@dataclass(frozen=True)
class Match:
    """The nearest code of a description's system (``code`` None: under :data:`MIN_SCORE`)."""

    code: str | None
    score: float
    runner_up: str | None


def lab_description(itemid: int) -> str:
    """A panel lab's full description: label, fluid, category and unit (MIMIC d_labitems)."""
    item = next(i for i in LAB_ITEMS.values() if i.itemid == itemid)
    return f"{item.label}, {item.fluid}, {item.category} ({item.unit or 'no unit'})"


def drug_description(key: str) -> str:
    """A drug's full description: name, product strength and dispensed form."""
    d = DRUGS[key]
    return f"{d.drug} {d.prod_strength}".strip()


def vocabulary() -> list[VocabEntry]:
    """Every code the index holds, in a fixed order."""
    out = [VocabEntry(DX, c, t) for c, t in sorted(ICD10_DX_TITLES.items())]
    out += [VocabEntry(PX, c, t) for c, t in sorted(ICD10_PX_TITLES.items())]
    out += [
        VocabEntry(LAB, str(lab.itemids[0]), lab_description(lab.itemids[0])) for lab in LAB_PANEL
    ]
    out += [VocabEntry(RX, k, drug_description(k)) for k in sorted(DRUGS)]
    return out


class CodeIndex:
    """Normalised vectors of every vocabulary description, searched per system."""

    def __init__(self, encode: Encode, entries: Sequence[VocabEntry] | None = None) -> None:
        self.encode = encode
        self.entries = list(entries if entries is not None else vocabulary())
        vecs = np.asarray(encode([e.description for e in self.entries]), dtype=np.float32)
        self.vectors = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        self.rows = {
            s: np.array([i for i, e in enumerate(self.entries) if e.system == s])
            for s in {e.system for e in self.entries}
        }
        self.words = [words(e.description) for e in self.entries]
        self._cache: dict[tuple[str, str], Match] = {}

    def match_many(self, queries: Sequence[tuple[str, str]]) -> list[Match]:
        """(system, text) pairs -> their matches; each distinct text is encoded once."""
        todo = list(dict.fromkeys(q for q in queries if q not in self._cache))
        if todo:
            vecs = np.asarray(self.encode([t for _, t in todo]), dtype=np.float32)
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            for (system, text), v in zip(todo, vecs, strict=True):
                self._cache[(system, text)] = self._nearest(system, v, words(text))
        return [self._cache[q] for q in queries]

    def _nearest(self, system: str, vec: np.ndarray, query: set[str]) -> Match:
        rows = self.rows.get(system)
        if rows is None or not len(rows):
            return Match(None, 0.0, None)
        overlap = [len(query & self.words[i]) / max(len(query), 1) for i in rows]
        scores = self.vectors[rows] @ vec + LEXICAL_WEIGHT * np.asarray(overlap)
        order = np.argsort(-scores, kind="stable")
        best = self.entries[rows[order[0]]].code
        second = self.entries[rows[order[1]]].code if len(order) > 1 else None
        score = float(scores[order[0]])
        return Match(best if score >= MIN_SCORE else None, score, second)


def words(text: str) -> set[str]:
    """Lower-case word set of a text (the lexical half of the lookup)."""
    return set(WORD.findall(text.lower()))


def match_accuracy(
    planned: Sequence[str | None], matched: Sequence[Match], texts: Sequence[str]
) -> dict[str, float]:
    """Share of events (and of distinct descriptions) whose matched code is the planned one;
    events without a plan (a backbone's) are not counted."""
    rows = [(p, m.code, t) for p, m, t in zip(planned, matched, texts, strict=True) if p]
    correct = sum(p == c for p, c, _ in rows)
    distinct = {(p, t): p == c for p, c, t in rows}
    return {
        "events": len(rows),
        "correct": correct,
        "accuracy": correct / len(rows) if rows else float("nan"),
        "descriptions": len(distinct),
        "descriptions_correct": sum(distinct.values()),
    }
