"""Three renderings of a group of patient records (PopMedQA §4 "Prompting strategies",
Figs 7-8) and the parser that reads them back.

- ``descriptions`` (the seed's baseline): each coded event as its full description
  (:mod:`clinlib.tasks.population.describe`; the stage relabels the events with them), then its
  value and unit. Fig. 7 left cuts descriptions at 50 characters ("Thyrotropin [Units/volume] in
  Serum or Plasma --ba"); the kit prints them whole (:data:`DESC_CHARS` is None), a deviation
  named in :mod:`.describe`: cut, they fall below the seed's 8-20 tokens per code;
- ``codes``: ``system//code`` and the value (Fig. 7 right);
- ``codebook``: one codebook for the whole group maps every unique code to ``#n`` with its
  ``(system//code) description``, and the records cite ``#n`` (Fig. 8). The kit's dialogue
  strategy :mod:`clinlib.strategies.codebook` does the same for the diagnoses and procedures a
  dialogue states; here every coded event kind is in the codebook (labs, medications,
  procedures, diagnoses, admission and discharge types), and the id prefix is the same
  constant (``clinlib.data.vocab.CODEBOOK_ID_PREFIX``, the lowest layer both use).

A record is ``=== Patient ID: <pid> ===`` then ``Time: <YYYY-MM-DD>`` lines, each followed by
that day's events, one per line, in time order. The synthetic default has no NDC codes: a
medication's code is its drug name (``drug//Lisinopril``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from clinlib.data.vocab import CODEBOOK_ID_PREFIX

RENDERINGS: tuple[str, ...] = ("descriptions", "codes", "codebook")
DESC_CHARS: int | None = None  # no cut (Fig. 7 cuts at 50; see .describe)
ID_PREFIX = CODEBOOK_ID_PREFIX  # shared with clinlib.strategies.codebook
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
_CODEBOOK_RX = re.compile(r"^(" + re.escape(ID_PREFIX) + r"\d+): \((\S+?//.+?)\) (.*)$")
_VALUE_RX = re.compile(r"^(?P<concept>.*?)(?: (?P<value>-?\d+(?:\.\d+)?)(?: (?P<unit>\S+))?)?$")
_NUMBER_RX = re.compile(r"-?\d+(?:\.\d+)?")  # _VALUE_RX's value, matched whole
_UNIT_RX = re.compile(r"\S+")  # and its unit
_HEADER_START = "=== Patient ID: "


def concept_key(code_system: str, code: str) -> str:
    """``system//code`` as the ``codes`` rendering prints it."""
    return f"{SYSTEMS.get(code_system, str(code_system).lower())}//{code}"


def description(kind: str, code: str, label: str) -> str:
    """The truncated description of one coded event."""
    bare = kind in ("admission", "discharge") and str(label).lower() == kind
    text = f"{label} ({code})" if bare else str(label)
    return text[:DESC_CHARS].rstrip()


def _value(row: Mapping) -> str:
    v = row.get("value")
    if v is None or v != v:
        return ""
    num = f"{float(v):g}"
    unit = row.get("unit")
    unit = "" if unit is None or unit != unit else str(unit).replace(" ", "")
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


def _plain(events: pd.DataFrame) -> dict[str, list]:
    """The columns rendering needs, as Python lists (arrow-backed iteration is slow)."""
    cols = ["subject_id", "kind", "code", "code_system", "label", "unit"]
    out = {c: events[c].astype(object).where(events[c].notna(), None).tolist() for c in cols}
    out["day"] = events["time"].dt.strftime("%Y-%m-%d").tolist()
    out["value"] = events["value"].astype(float).tolist()
    out["key"] = [concept_key(s, c) for s, c in zip(out["code_system"], out["code"], strict=True)]
    out["desc"] = [
        description(k, c, lab)
        for k, c, lab in zip(out["kind"], out["code"], out["label"], strict=True)
    ]
    out["val"] = [
        _value({"value": v, "unit": u}) for v, u in zip(out["value"], out["unit"], strict=True)
    ]
    return out


def codebook_entries(events: pd.DataFrame) -> dict[str, str]:
    """Unique ``system//code`` -> description, in order of first appearance over the group."""
    p = _plain(events)
    out: dict[str, str] = {}
    for key, desc in zip(p["key"], p["desc"], strict=True):
        out.setdefault(key, desc)
    return out


def prepare_group(events: pd.DataFrame, order: Sequence[tuple[str, int]]) -> dict[str, list]:
    """The records of ``order`` in print order (each record in time order) as the plain
    columns :func:`render_group` prints: computed once, rendered any number of ways."""
    rank = {int(s): i for i, (_, s) in enumerate(order)}
    ev = events[events["subject_id"].isin(rank)]
    ev = ev.assign(_r=ev["subject_id"].map(rank)).sort_values(
        ["_r", "time", "event_id"], kind="stable"
    )
    return _plain(ev)


def render_group(
    events: pd.DataFrame | Mapping[str, list], order: Sequence[tuple[str, int]], rendering: str
) -> Rendered:
    """Render the records of ``order`` (``(pid, subject_id)`` pairs, in print order).

    ``events`` holds the group's selected events (columns of events.parquet), or those
    events already prepared for ``order`` by :func:`prepare_group`; each record is printed in
    time order.
    """
    if rendering not in RENDERINGS:
        raise ValueError(f"unknown rendering {rendering!r}; known: {', '.join(RENDERINGS)}")
    p = events if isinstance(events, Mapping) else prepare_group(events, order)
    entries: dict[str, str] = {}
    for key, desc in zip(p["key"], p["desc"], strict=True):
        entries.setdefault(key, desc)
    ids = {k: f"{ID_PREFIX}{i}" for i, k in enumerate(entries, start=1)}
    shown = {"descriptions": p["desc"], "codes": p["key"], "codebook": [ids[k] for k in p["key"]]}[
        rendering
    ]
    concepts: dict[str, int] = {}
    sections: list[str] = []
    if rendering == "codebook":
        head = [f"{ids[k]}: ({k}) {d}" for k, d in entries.items()]
        sections.append("\n".join([CODEBOOK_TITLE, *head]))
        concepts.update(dict.fromkeys(head, 1))
    by_pid: dict[int, list[str]] = {int(s): [] for _, s in order}
    last: dict[int, str] = {}
    for sid, day, concept, val in zip(p["subject_id"], p["day"], shown, p["val"], strict=True):
        lines = by_pid[int(sid)]
        if last.get(int(sid)) != day:
            lines.append(f"Time: {day}")
            last[int(sid)] = day
        lines.append(concept + val)
        concepts[concept] = concepts.get(concept, 0) + 1
    for pid, sid in order:
        sections.append("\n".join([PATIENT_HEADER.format(pid=pid), *by_pid[int(sid)]]))
    return Rendered(rendering, "\n\n".join(sections), concepts, len(shown))


@dataclass(frozen=True)
class Line:
    """One parsed event line: its day, the concept (``system//code`` when the rendering shows
    codes or a codebook, else the description) and the printed value (or None)."""

    day: str
    concept: str
    value: float | None


def _value_split(line: str) -> tuple[str, str | None]:
    """What :data:`_VALUE_RX` matches, without its lazy scan over the whole line: the value
    and unit hold no space, so the match starts at the line's second-to-last space (a value
    and a unit) or else at its last (a value alone), or the line has none."""
    if "\n" in line:  # not a line of splitlines(): the pattern's own "." and "$" rules
        v = _VALUE_RX.match(line)
        return v.group("concept"), v.group("value")
    words = line.rsplit(" ", 2)
    if len(words) == 3 and _NUMBER_RX.fullmatch(words[1]) and _UNIT_RX.fullmatch(words[2]):
        return line[: -len(words[1]) - len(words[2]) - 2], words[1]
    if len(words) >= 2 and _NUMBER_RX.fullmatch(words[-1]):
        return line[: -len(words[-1]) - 1], words[-1]
    return line, None


@functools.lru_cache(maxsize=1 << 17)  # event lines repeat: ~5% of a paper set's are distinct
def split_line(line: str) -> tuple[str, float | None]:
    """An event line's concept and value (a trailing number, optionally with a unit)."""
    concept, value = _value_split(line)
    if not concept:  # a description that is only a number
        return line, None
    return concept, float(value) if value is not None else None


def parse_group(text: str) -> dict[str, list[Line]]:
    """Read a rendered group back: pid -> its event lines (codebook ids resolved to codes).

    Raises ValueError on a line outside a record, so a malformed context is not half-read.
    """
    return _scan(text, True)


def record_ids(text: str) -> list[str]:
    """The patient ids :func:`parse_group` reads back from ``text`` (its keys, in order), with
    the same ValueError on a line outside a record; the event lines are checked, not kept."""
    return list(_scan(text, False))


def _scan(text: str, keep: bool) -> dict[str, list[Line]]:
    book: dict[str, str] = {}
    records: dict[str, list[Line]] = {}
    pid = day = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line == CODEBOOK_TITLE:
            continue
        m = _CODEBOOK_RX.match(line) if pid is None else None
        if m:
            book[m.group(1)] = m.group(2)
            continue
        h = _HEADER_RX.match(line) if line.startswith(_HEADER_START) else None
        if h:
            pid, day = h.group(1), None
            records[pid] = []
            continue
        if line.startswith("Time: "):
            day = line[6:]
            continue
        if pid is None or day is None:
            raise ValueError(f"parse_group: line outside a record: {line[:60]!r}")
        if not keep:
            continue
        concept, value = split_line(line)
        records[pid].append(Line(day, book.get(concept, concept), value))
    return records
