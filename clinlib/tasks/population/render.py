"""Three renderings of a group of patient records (PopMedQA §4 "Prompting strategies",
Figs 7-8) and the parser that reads them back.

- ``descriptions`` (the seed's baseline): each coded event as its description, truncated to
  :data:`DESC_CHARS` characters (Fig. 7 left prints "Thyrotropin [Units/volume] in Serum or
  Plasma --ba", 50 characters), then its value and unit;
- ``codes``: ``system//code`` and the value (Fig. 7 right);
- ``codebook``: one codebook for the whole group maps every unique code to ``#n`` with its
  ``(system//code) description``, and the records cite ``#n`` (Fig. 8). The kit's dialogue
  strategy :mod:`clinlib.strategies.codebook` does the same for the diagnoses and procedures a
  dialogue states; here every coded event kind is in the codebook (labs, medications,
  procedures, diagnoses, admission and discharge types), and the id prefix is the same ``#``.

A record is ``=== Patient ID: <pid> ===`` then ``Time: <YYYY-MM-DD>`` lines, each followed by
that day's events, one per line, in time order. The synthetic default has no NDC codes: a
medication's code is its drug name (``drug//Lisinopril``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

RENDERINGS: tuple[str, ...] = ("descriptions", "codes", "codebook")
DESC_CHARS = 50
ID_PREFIX = "#"  # as clinlib.strategies.codebook.ID_PREFIX (a later layer; not imported)
CODEBOOK_TITLE = "Codebook (integer IDs assigned to medical codes):"
PATIENT_HEADER = "=== Patient ID: {pid} ==="
SYSTEMS: dict[str, str] = {
    "itemid": "labitem",
    "ICD9-CM": "icd9",
    "ICD10-CM": "icd10",
    "ICD9-PCS": "icd9_proc",
    "ICD10-PCS": "icd10_proc",
    "drug": "drug",
    "admission_type": "admission",
    "discharge_location": "discharge",
    "LOINC": "loinc",
}
_HEADER_RX = re.compile(r"^=== Patient ID: (\S+) ===$")
_CODEBOOK_RX = re.compile(r"^(#\d+): \((\S+?//.+?)\) (.*)$")
_VALUE_RX = re.compile(r"^(?P<concept>.*?)(?: (?P<value>-?\d+(?:\.\d+)?)(?: (?P<unit>\S+))?)?$")


def concept_key(code_system: str, code: str) -> str:
    """``system//code`` as the ``codes`` rendering prints it."""
    return f"{SYSTEMS.get(code_system, str(code_system).lower())}//{code}"


def description(kind: str, code: str, label: str) -> str:
    """The truncated description of one coded event."""
    text = f"{label} ({code})" if kind in ("admission", "discharge") else str(label)
    return text[:DESC_CHARS].rstrip()


def _value(row: Mapping) -> str:
    v = row.get("value")
    if v is None or pd.isna(v):
        return ""
    num = f"{float(v):g}"
    unit = row.get("unit")
    unit = "" if unit is None or pd.isna(unit) else str(unit).replace(" ", "")
    return f" {num} {unit}" if unit else f" {num}"


@dataclass(frozen=True)
class Rendered:
    """One question's group in one rendering: the text and the coded-concept occurrences
    (``concepts``: each printed concept string and how many times it is printed, the
    codebook's definition lines included) that App. B's M counts."""

    rendering: str
    text: str
    concepts: dict[str, int]
    n_codes: int


def _event_lines(events: pd.DataFrame, rendering: str, ids: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    day = None
    for row in events.to_dict("records"):
        d = pd.Timestamp(row["time"]).strftime("%Y-%m-%d")
        if d != day:
            lines.append(f"Time: {d}")
            day = d
        key = concept_key(row["code_system"], row["code"])
        if rendering == "descriptions":
            concept = description(row["kind"], row["code"], row["label"])
        elif rendering == "codes":
            concept = key
        else:
            concept = ids[key]
        lines.append(concept + _value(row))
    return lines


def codebook_entries(events: pd.DataFrame) -> dict[str, str]:
    """Unique ``system//code`` -> description, in order of first appearance over the group."""
    out: dict[str, str] = {}
    for row in events[["code_system", "code", "kind", "label"]].to_dict("records"):
        key = concept_key(row["code_system"], row["code"])
        if key not in out:
            out[key] = description(row["kind"], row["code"], row["label"])
    return out


def render_group(
    events: pd.DataFrame, order: Sequence[tuple[str, int]], rendering: str
) -> Rendered:
    """Render the records of ``order`` (``(pid, subject_id)`` pairs, in print order).

    ``events`` holds the group's selected events (columns of events.parquet); each record is
    printed in time order.
    """
    if rendering not in RENDERINGS:
        raise ValueError(f"unknown rendering {rendering!r}; known: {', '.join(RENDERINGS)}")
    events = events.sort_values(["subject_id", "time", "event_id"], kind="stable")
    by_subject = dict(tuple(events.groupby("subject_id", sort=False)))
    ordered = pd.concat([by_subject[s] for _, s in order if s in by_subject])
    entries = codebook_entries(ordered)
    ids = {k: f"{ID_PREFIX}{i}" for i, k in enumerate(entries, start=1)}
    sections: list[str] = []
    concepts: dict[str, int] = {}
    if rendering == "codebook":
        head = [CODEBOOK_TITLE] + [f"{ids[k]}: ({k}) {d}" for k, d in entries.items()]
        sections.append("\n".join(head))
        for line in head[1:]:
            concepts[line] = 1
    for pid, sid in order:
        rec = by_subject.get(sid, events.iloc[0:0])
        body = _event_lines(rec, rendering, ids)
        sections.append("\n".join([PATIENT_HEADER.format(pid=pid), *body]))
        for row in rec.to_dict("records"):
            key = concept_key(row["code_system"], row["code"])
            shown = {"codes": key, "codebook": ids[key]}.get(
                rendering, description(row["kind"], row["code"], row["label"])
            )
            concepts[shown] = concepts.get(shown, 0) + 1
    return Rendered(rendering, "\n\n".join(sections), concepts, int(len(ordered)))


@dataclass(frozen=True)
class Line:
    """One parsed event line: its day, the concept (``system//code`` when the rendering shows
    codes or a codebook, else the description) and the printed value (or None)."""

    day: str
    concept: str
    value: float | None


def split_line(line: str) -> tuple[str, float | None]:
    """An event line's concept and value (a trailing number, optionally with a unit)."""
    v = _VALUE_RX.match(line)
    concept, value = v.group("concept"), v.group("value")
    if not concept:  # a description that is only a number
        return line, None
    return concept, float(value) if value is not None else None


def parse_group(text: str) -> dict[str, list[Line]]:
    """Read a rendered group back: pid -> its event lines (codebook ids resolved to codes).

    Raises ValueError on a line outside a record, so a malformed context is not half-read.
    """
    book: dict[str, str] = {}
    records: dict[str, list[Line]] = {}
    pid = day = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line == CODEBOOK_TITLE:
            continue
        m = _CODEBOOK_RX.match(line)
        if m and pid is None:
            book[m.group(1)] = m.group(2)
            continue
        h = _HEADER_RX.match(line)
        if h:
            pid, day = h.group(1), None
            records[pid] = []
            continue
        if line.startswith("Time: "):
            day = line[6:]
            continue
        if pid is None or day is None:
            raise ValueError(f"parse_group: line outside a record: {line[:60]!r}")
        concept, value = split_line(line)
        records[pid].append(Line(day, book.get(concept, concept), value))
    return records
