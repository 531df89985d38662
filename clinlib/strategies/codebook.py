"""codebook: unique medical codes mapped once to short ids that the record then references
(kit extra from PopMedQA / neopatient, Kaul et al. 2026, §B "verbose context problem" and
Fig. 8: "defines succinct ID numbers for all unique codes (across all patients), and then
references those IDs within the subsequent patient records").

Here the coded concepts are the ICD diagnoses and procedures the dialogue states with their
titles ("Unspecified essential hypertension (4019)", "Hemodialysis ... procedure code 3995"):
construction reads them from the dialogue text (the rule-based reader), numbers them ``#1``,
``#2``, ... in order of first mention, and rewrites the dialogue (ids on) with each
``title (code)`` / procedure title replaced by its id, behind a codebook header. For a
multi-patient question (T6) one codebook is shared across the patients, as in PopMedQA.
Derived: the encoded text is fixed at construction (a later injection is not in it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.data.vocab import CODEBOOK_ID_PREFIX
from clinlib.strategies.base import (
    PATIENT_LABELS,
    SECTION_HEADER,
    Artifact,
    Strategy,
    StrategyError,
    render,
)
from clinlib.strategies.facts import facts_of
from clinlib.strategies.prep import count_text_tokens

CODEBOOK_TITLE = "Codebook (short ids assigned to medical codes):"
ID_PREFIX = CODEBOOK_ID_PREFIX  # shared with clinlib.tasks.population.render
MIN_PROCEDURE_TITLE = 8  # shorter procedure titles are left in place (ambiguous substrings)


def build_codebook(turns: pd.DataFrame) -> list[dict[str, str]]:
    """Unique coded concepts in order of first mention: ``{"kind", "code", "title"}``."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for f in facts_of(turns):
        if f.kind in ("diagnosis", "procedure") and f.code and f.name:
            key = ("dx" if f.kind == "diagnosis" else "px", f.code)
            seen.setdefault(key, {"kind": key[0], "code": f.code, "title": f.name})
    return list(seen.values())


def _replacements(entries: Sequence[Mapping[str, str]], ids: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e, i in zip(entries, ids, strict=True):
        if e["kind"] == "dx":
            out[f"{e['title']} ({e['code']})"] = i
        elif len(e["title"]) >= MIN_PROCEDURE_TITLE:
            out[e["title"]] = i
    return out


def encode_text(text: str, replacements: Mapping[str, str]) -> str:
    """Replace every key by its id in one pass (longest keys first)."""
    if not replacements:
        return text
    pattern = re.compile(
        "|".join(re.escape(k) for k in sorted(replacements, key=len, reverse=True))
    )
    return pattern.sub(lambda m: replacements[m.group(0)], text)


def codebook_header(entries: Sequence[Mapping[str, str]], ids: Sequence[str]) -> str:
    """The codebook lines: ``#1: (dx 4019) Unspecified essential hypertension``."""
    lines = [CODEBOOK_TITLE]
    lines += [
        f"{i}: ({e['kind']} {e['code']}) {e['title']}" for e, i in zip(entries, ids, strict=True)
    ]
    return "\n".join(lines)


class Codebook(Strategy):
    """The dialogue with ICD concepts replaced by codebook ids (derived)."""

    name = "codebook"
    query_dependent = False
    family = "compression"
    derived = True
    defaults = {"with_ids": True}
    construction_keys = ("with_ids",)

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        text = render(turns, with_ids=bool(self.params["with_ids"]))
        if re.search(re.escape(ID_PREFIX) + r"\d", text):
            raise StrategyError(
                f"{self.name}: the dialogue of patient {subject_id} already contains "
                f"'{ID_PREFIX}<digit>', which would clash with codebook ids"
            )
        entries = build_codebook(turns)
        ids = [f"{ID_PREFIX}{i}" for i in range(1, len(entries) + 1)]
        encoded = encode_text(text, _replacements(entries, ids))
        return {
            "entries": [dict(e, id=i) for e, i in zip(entries, ids, strict=True)],
            "dialogue": text,
            "encoded": encoded,
        }

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        entries = artifact.data["entries"]
        header = codebook_header(entries, [e["id"] for e in entries])
        return f"{header}\n\n{artifact.data['encoded']}" if entries else artifact.data["encoded"]

    def combine(
        self, question: Mapping[str, Any], parts: Sequence[tuple[Artifact | None, pd.DataFrame]]
    ) -> str:
        # One codebook across the patients (PopMedQA): ids renumbered over the union.
        union: dict[tuple[str, str], dict[str, str]] = {}
        for artifact, _ in parts:
            if artifact is None:
                raise StrategyError(f"{self.name}: no artifact for a patient of this question")
            for e in artifact.data["entries"]:
                union.setdefault(
                    (e["kind"], e["code"]), {k: e[k] for k in ("kind", "code", "title")}
                )
        entries = list(union.values())
        ids = [f"{ID_PREFIX}{i}" for i in range(1, len(entries) + 1)]
        repl = _replacements(entries, ids)
        sections = [codebook_header(entries, ids)] if entries else []
        for label, (artifact, _) in zip(PATIENT_LABELS, parts, strict=False):
            body = encode_text(artifact.data["dialogue"], repl)
            sections.append(f"{SECTION_HEADER.format(label=label)}\n{body}")
        return "\n\n".join(sections)

    def store_text(self, artifact: Artifact) -> str:
        return self.access(artifact, {"question": ""}, pd.DataFrame())

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        store = self.store_text(artifact)
        return {
            "n_items": len(artifact.data.get("entries", [])),
            "item": "codes",
            "store_tokens": count_text_tokens(store),
            "verbatim_tokens": count_text_tokens(artifact.data.get("dialogue", "")),
        }
