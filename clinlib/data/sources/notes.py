"""Discharge notes (LongMedBench: "each visit also includes two types of notes: one is
radiology notes, which are parsed as imaging events; the other is discharge notes, which are
summaries N_i from visits V_i, and can be parsed into admission info N_i^adm and discharge
info N_i^dis according to logic").

Two sources:

* :func:`synthetic_notes` — a SYNTHETIC discharge note per admission, written from that
  admission's events (rule-based, never called MIMIC): one sentence per fact group, and every
  sentence carries the ids of the events it states (sentence-level provenance), so the
  dialogue verifier's matching can check that each number, date, code and drug it states
  traces to a cited event (``clinlib.strategies.note_memory.verify_notes``). The note is a
  summary (the seed: "high-level compressed and emphasizing global trajectory"): the abnormal
  labs (the seed keeps only abnormal results), the orders, procedures and diagnoses, each list
  capped at :data:`NOTE_CAPS` in time order. Sentences tagged ``adm`` form N^adm (admission
  date and type, the admission day's abnormal labs and orders), ``dis`` form N^dis.
* :func:`load_mimic_notes` — real MIMIC-IV-Note (``discharge.csv.gz``, ``radiology.csv.gz``
  from PhysioNet; credentialed: read from the user's own copy, never committed). Columns
  ``note_id, subject_id, hadm_id, note_type, note_seq, charttime, storetime, text``; a missing
  column or an unparseable id raises :class:`NotesError` naming the file, column, row and
  value. :func:`split_discharge` parses a real discharge note into (N^adm, N^dis) at its first
  discharge-side heading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

NOTE_CAPS = {"labs": 6, "medications": 8, "diagnoses": 8, "procedures": 4}
NOTE_COLUMNS: tuple[str, ...] = (
    "subject_id",
    "hadm_id",
    "visit_idx",
    "part",
    "sentence_idx",
    "text",
    "event_ids",
)
MIMIC_NOTE_FILES = {"discharge": "discharge.csv.gz", "radiology": "radiology.csv.gz"}
MIMIC_NOTE_COLUMNS: tuple[str, ...] = (
    "note_id",
    "subject_id",
    "hadm_id",
    "note_type",
    "note_seq",
    "charttime",
    "storetime",
    "text",
)
# Headings of a MIMIC-IV discharge note from which on it reports the discharge (N^dis).
DISCHARGE_HEADINGS: tuple[str, ...] = (
    "Brief Hospital Course:",
    "Discharge Medications:",
    "Discharge Disposition:",
    "Discharge Diagnosis:",
    "Discharge Condition:",
    "Discharge Instructions:",
)


class NotesError(ValueError):
    """A notes file that cannot be read as documented (one line: file, column, row, value)."""


def _s(x: Any) -> str:
    if x is None or (isinstance(x, float) and x != x) or x is pd.NA:
        return ""
    return str(x).strip()


def _day(t: Any) -> str:
    return pd.Timestamp(t).strftime("%Y-%m-%d")


def _capped(events: list[Mapping[str, Any]], key: str, cap: int) -> list[Mapping[str, Any]]:
    """The first event per distinct ``key`` text, at most ``cap``."""
    seen: set[str] = set()
    out = []
    for e in events:
        k = _s(e[key])
        if k and k not in seen:
            seen.add(k)
            out.append(e)
    return out[:cap]


def _lab(e: Mapping[str, Any]) -> str:
    return " ".join(p for p in (_s(e["label"]), _s(e["value_text"]), _s(e["unit"])) if p)


def _med(e: Mapping[str, Any]) -> str:
    return " ".join(p for p in (_s(e["label"]), _s(e["value_text"]), _s(e["unit"])) if p)


def _sentence(part: str, text: str, events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"part": part, "text": text, "event_ids": [str(e["event_id"]) for e in events]}


def _labs_sentence(part: str, when: str, labs: list[Mapping[str, Any]]) -> list[dict]:
    abnormal = _capped([e for e in labs if e["flag"] == "abnormal"], "label", NOTE_CAPS["labs"])
    if not abnormal:
        return []
    items = "; ".join(f"{_lab(e)} on {_day(e['time'])}" for e in abnormal)
    return [_sentence(part, f"Abnormal results {when}: {items}.", abnormal)]


def _meds_sentence(part: str, when: str, meds: list[Mapping[str, Any]]) -> list[dict]:
    meds = _capped(meds, "label", NOTE_CAPS["medications"])
    if not meds:
        return []
    items = "; ".join(f"{_med(e)} from {_day(e['time'])}" for e in meds)
    return [_sentence(part, f"Medications started {when}: {items}.", meds)]


def visit_note(events: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sentences of one admission's synthetic discharge note (module docstring), each
    ``{"part": "adm" | "dis", "text", "event_ids"}``; empty without an admission event."""
    events = sorted(events, key=lambda e: (pd.Timestamp(e["time"]), str(e["event_id"])))
    adm = next((e for e in events if e["kind"] == "admission"), None)
    if adm is None:
        return []
    day = _day(adm["time"])
    kind = _s(adm["code"]).rstrip(".") or "unspecified"
    out = [_sentence("adm", f"Admitted on {day}; admission type {kind}.", [adm])]
    first = [e for e in events if _day(e["time"]) == day]
    later = [e for e in events if _day(e["time"]) != day]
    out += _labs_sentence("adm", "on the admission day", [e for e in first if e["kind"] == "lab"])
    out += _meds_sentence(
        "adm", "on the admission day", [e for e in first if e["kind"] == "medication"]
    )
    out += _labs_sentence("dis", "later in the stay", [e for e in later if e["kind"] == "lab"])
    out += _meds_sentence(
        "dis", "later in the stay", [e for e in later if e["kind"] == "medication"]
    )
    px = _capped([e for e in events if e["kind"] == "procedure"], "label", NOTE_CAPS["procedures"])
    if px:
        out.append(
            _sentence("dis", "Procedures: " + "; ".join(_s(e["label"]) for e in px) + ".", px)
        )
    dx = _capped([e for e in events if e["kind"] == "diagnosis"], "label", NOTE_CAPS["diagnoses"])
    if dx:
        items = "; ".join(f"{_s(e['label'])} ({_s(e['code'])})" for e in dx)
        out.append(_sentence("dis", f"Discharge diagnoses: {items}.", dx))
    dis = next((e for e in events if e["kind"] == "discharge"), None)
    if dis is not None:
        where = _s(dis["code"]).rstrip(".") or "a location not recorded"
        out.append(_sentence("dis", f"Discharged on {_day(dis['time'])} to {where}.", [dis]))
    return out


def synthetic_notes(events: pd.DataFrame) -> pd.DataFrame:
    """One synthetic discharge note per admission of ``events`` (the events table's columns),
    one row per sentence (:data:`NOTE_COLUMNS`), by patient, visit and sentence."""
    rows = []
    for (sid, hadm, v), group in events.groupby(["subject_id", "hadm_id", "visit_idx"], sort=True):
        for i, s in enumerate(visit_note(group.to_dict("records"))):
            ids = {"subject_id": int(sid), "hadm_id": int(hadm), "visit_idx": int(v)}
            rows.append({**ids, "sentence_idx": i, **s})
    return pd.DataFrame(rows, columns=list(NOTE_COLUMNS))


def note_text(sentences: Iterable[Mapping[str, Any]]) -> str:
    """A note's sentences as one paragraph."""
    return " ".join(str(s["text"]) for s in sentences)


# --- real MIMIC-IV-Note ------------------------------------------------------------------------
def _read_one(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, compression="gzip", dtype=str, keep_default_na=False)
    except (OSError, ValueError, EOFError) as exc:
        raise NotesError(f"{path}: cannot be read as gzip CSV ({exc})") from None
    missing = [c for c in MIMIC_NOTE_COLUMNS if c not in df.columns]
    if missing:
        raise NotesError(f"{path}: column {missing[0]!r} missing")
    for col, pattern in (("subject_id", r"\d+"), ("hadm_id", r"\d*")):
        bad = ~df[col].str.fullmatch(pattern)
        if bad.any():
            row = int(bad.idxmax())
            raise NotesError(f"{path}: column {col!r} row {row + 2}: {df.at[row, col]!r} is no id")
    out = df[list(MIMIC_NOTE_COLUMNS)].copy()
    out["subject_id"] = out["subject_id"].astype("int64")
    out["hadm_id"] = pd.to_numeric(out["hadm_id"].replace("", None)).astype("Int64")
    out["charttime"] = pd.to_datetime(out["charttime"], errors="coerce")
    return out


def load_mimic_notes(directory: str | Path, kinds: Iterable[str] = ("discharge", "radiology")):
    """The MIMIC-IV-Note files of ``directory`` (its ``note/`` folder or the folder holding the
    two files) as one frame with :data:`MIMIC_NOTE_COLUMNS`; ``note_type`` kept as written
    (``DS`` discharge, ``RR`` radiology, ``AR`` addendum).

    Raises:
        NotesError: a file is missing or malformed (file, column, row, value).
    """
    root = Path(directory)
    root = root / "note" if (root / "note").is_dir() else root
    parts = []
    for kind in kinds:
        if kind not in MIMIC_NOTE_FILES:
            raise NotesError(f"unknown note kind {kind!r}; known: {sorted(MIMIC_NOTE_FILES)}")
        path = root / MIMIC_NOTE_FILES[kind]
        if not path.exists():
            raise NotesError(f"{path}: not found (MIMIC-IV-Note is credentialed: download it)")
        parts.append(_read_one(path))
    return pd.concat(parts, ignore_index=True)


def split_discharge(text: str) -> tuple[str, str]:
    """(N^adm, N^dis) of a real discharge note: the text before its first discharge-side
    heading (:data:`DISCHARGE_HEADINGS`), and the rest; ("", text) when none precedes."""
    pattern = "|".join(re.escape(h) for h in DISCHARGE_HEADINGS)
    m = re.search(pattern, text, flags=re.IGNORECASE)
    if m is None:
        return text.strip(), ""
    return text[: m.start()].strip(), text[m.start() :].strip()
