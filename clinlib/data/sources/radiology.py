"""Radiology reports as imaging events (LongMedBench: "radiology notes, which are parsed as
imaging events"; an event E = {a, t, p, o} where the argument p is "the modality (CT, X-ray,
MRI) of an imaging event" and the observation o is "the radiology report").

Two sources, one frame (:data:`IMAGING_COLUMNS`: event_id, subject_id, hadm_id, visit_idx, time,
modality, region, findings, impression):

* :func:`synthetic_imaging` — SYNTHETIC imaging events (rule-based, never called MIMIC): one to
  :data:`MAX_PER_STAY` studies per stay, each at a stable-hash minute strictly inside the stay,
  its modality, region and findings drawn by a stable hash of the stay from the small banks
  below. The kit's synthetic hosp tables hold no imaging, so the studies are made from the
  stays' admission and discharge times alone (the same function on the raw admissions table is
  gate L2's route). :func:`synthetic_reports` writes one report per study, one sentence per
  line, every sentence carrying the id of the study it states (sentence-level provenance);
  :func:`verify_reports` checks each sentence against its cited study and fails on a changed
  modality, region, time or finding and on an unknown id.
* :func:`imaging_from_mimic` — real MIMIC-IV-Note radiology reports (``note_type`` RR, read by
  :func:`clinlib.data.sources.notes.load_mimic_notes`) parsed into the same frame: the modality
  and region from the report's ``EXAMINATION:`` line (else its first line), the time from
  ``charttime``, the report's own text as findings. Reports without an admission id or a
  recognised modality are counted, not kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

IMAGING_COLUMNS: tuple[str, ...] = (
    "event_id",
    "subject_id",
    "hadm_id",
    "visit_idx",
    "time",
    "modality",
    "region",
    "findings",
    "impression",
)
REPORT_COLUMNS: tuple[str, ...] = (
    "subject_id",
    "hadm_id",
    "visit_idx",
    "event_id",
    "sentence_idx",
    "text",
    "event_ids",
)
MODALITIES: tuple[str, ...] = ("CT", "X-ray", "MRI", "Ultrasound")
# region -> (findings, impression) pairs; a region is imaged by the modalities listed
FINDINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "chest": (
        ("Bibasilar opacities, small bilateral pleural effusions.", "Possible pneumonia."),
        ("Clear lungs, normal cardiomediastinal silhouette.", "No acute process."),
        ("Mild pulmonary vascular congestion.", "Mild fluid overload."),
    ),
    "abdomen": (
        ("Mild hepatomegaly without focal lesion.", "Hepatomegaly."),
        ("No free fluid, normal bowel gas pattern.", "No acute abdominal process."),
    ),
    "head": (
        ("No hemorrhage, mass effect or midline shift.", "No acute intracranial process."),
        ("Chronic small vessel ischemic changes.", "No acute findings."),
    ),
    "kidneys": (
        ("Mild right hydronephrosis.", "Mild right hydronephrosis."),
        ("Normal renal size, no hydronephrosis.", "Normal kidneys."),
    ),
    "lower extremity veins": (
        ("Compressible veins, normal flow.", "No deep vein thrombosis."),
        ("Non-compressible left popliteal vein.", "Left popliteal deep vein thrombosis."),
    ),
}
REGION_MODALITIES: dict[str, tuple[str, ...]] = {
    "chest": ("X-ray", "CT"),
    "abdomen": ("CT", "Ultrasound", "MRI"),
    "head": ("CT", "MRI"),
    "kidneys": ("Ultrasound", "CT"),
    "lower extremity veins": ("Ultrasound",),
}
MAX_PER_STAY = 3
_STAMP = "%Y-%m-%d %H:%M"


def _h(*parts: Any) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def study(modality: str, region: str) -> str:
    """The study a question names: ``"CT abdomen"``."""
    return f"{modality} {region}"


def stay_studies(
    subject_id: int, hadm_id: int, visit_idx: int, admit: Any, disch: Any
) -> list[dict[str, Any]]:
    """The synthetic imaging events of one stay (module docstring), in time order; none for a
    stay shorter than two hours."""
    start, end = pd.Timestamp(admit), pd.Timestamp(disch)
    minutes = int((end - start).total_seconds() // 60)
    if minutes < 120:
        return []
    n = 1 + _h("n", subject_id, hadm_id) % MAX_PER_STAY
    offsets = sorted({60 + _h("t", subject_id, hadm_id, k) % (minutes - 119) for k in range(n)})
    regions = sorted(FINDINGS)
    out = []
    for k, off in enumerate(offsets):
        region = regions[_h("r", subject_id, hadm_id, k) % len(regions)]
        mods = REGION_MODALITIES[region]
        finding, impression = FINDINGS[region][
            _h("f", subject_id, hadm_id, k) % len(FINDINGS[region])
        ]
        out.append(
            {
                "event_id": f"img-{subject_id}-{hadm_id}-{k}",
                "subject_id": int(subject_id),
                "hadm_id": int(hadm_id),
                "visit_idx": int(visit_idx),
                "time": (start + pd.Timedelta(minutes=off)).floor("min"),
                "modality": mods[_h("m", subject_id, hadm_id, k) % len(mods)],
                "region": region,
                "findings": finding,
                "impression": impression,
            }
        )
    return out


def synthetic_imaging(visits: pd.DataFrame) -> pd.DataFrame:
    """Imaging events of every stay of ``visits`` (subject_id, hadm_id, visit_idx and the
    admission / discharge times as ``admit_time``/``disch_time`` or ``admittime``/``dischtime``)."""
    admit = "admit_time" if "admit_time" in visits.columns else "admittime"
    disch = "disch_time" if "disch_time" in visits.columns else "dischtime"
    rows = [
        e
        for r in visits.to_dict("records")
        for e in stay_studies(
            int(r["subject_id"]), int(r["hadm_id"]), int(r["visit_idx"]), r[admit], r[disch]
        )
    ]
    return pd.DataFrame(rows, columns=list(IMAGING_COLUMNS))


def report_sentences(e: Mapping[str, Any]) -> list[str]:
    """One study's report, a sentence per line (each states only this study's facts)."""
    return [
        f"EXAMINATION: {study(e['modality'], e['region'])}.",
        f"DATE: {pd.Timestamp(e['time']).strftime(_STAMP)}.",
        f"FINDINGS: {e['findings']}",
        f"IMPRESSION: {e['impression']}",
    ]


def synthetic_reports(imaging: pd.DataFrame) -> pd.DataFrame:
    """One report per imaging event, one row per sentence (:data:`REPORT_COLUMNS`)."""
    rows = []
    for e in imaging.to_dict("records"):
        for i, text in enumerate(report_sentences(e)):
            keys = {k: e[k] for k in ("subject_id", "hadm_id", "visit_idx", "event_id")}
            rows.append({**keys, "sentence_idx": i, "text": text, "event_ids": [e["event_id"]]})
    return pd.DataFrame(rows, columns=list(REPORT_COLUMNS))


def verify_reports(reports: pd.DataFrame, imaging: pd.DataFrame) -> list[str]:
    """Problems of report sentences against the studies they cite (empty: every sentence
    traces to its study): an unknown or missing id, or a stated modality, region, time,
    finding or impression that is not the cited study's."""
    by_id = {str(e["event_id"]): e for e in imaging.to_dict("records")}
    problems = []
    for s in reports.to_dict("records"):
        ids = [str(i) for i in (s["event_ids"] if s["event_ids"] is not None else [])]
        where = f"report {s['event_id']} sentence {s['sentence_idx']}"
        if len(ids) != 1 or ids[0] not in by_id:
            problems.append(f"{where}: cites {ids or 'no event'}, not one known study")
            continue
        if str(s["text"]) not in report_sentences(by_id[ids[0]]):
            problems.append(f"{where}: {s['text']!r} is not stated by {ids[0]}")
    return problems


# --- real MIMIC-IV-Note radiology reports --------------------------------------------------------
_MODALITY_RE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("MRI", re.compile(r"\bMRI?\b|\bMRA\b|MAGNETIC RESONANCE", re.I)),
    ("CT", re.compile(r"\bCTA?\b|COMPUTED TOMOGRAPHY", re.I)),
    ("Ultrasound", re.compile(r"\bUS\b|ULTRASOUND|DUPLEX|DOPPLER|SONO", re.I)),
    ("X-ray", re.compile(r"X-?RAY|RADIOGRAPH|\bCXR\b|CHEST \((?:PA|AP|PORTABLE)", re.I)),
)
_REGION_RE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("head", re.compile(r"HEAD|BRAIN", re.I)),
    ("chest", re.compile(r"CHEST|THORAX|LUNG", re.I)),
    ("abdomen", re.compile(r"ABD|LIVER|PELVIS|ABDOMEN", re.I)),
    ("kidneys", re.compile(r"RENAL|KIDNEY", re.I)),
    ("lower extremity veins", re.compile(r"LOWER EXT|LE VEIN|DVT", re.I)),
)
_EXAM_RE = re.compile(r"EXAMINATION:\s*(.+)", re.I)


def exam_line(text: str) -> str:
    """The report's ``EXAMINATION:`` line, else its first non-empty line."""
    m = _EXAM_RE.search(text)
    if m:
        return m.group(1).strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def parse_exam(text: str) -> tuple[str | None, str]:
    """(modality or None, region or "unspecified") named by a report's examination line."""
    line = exam_line(text)
    modality = next((m for m, rx in _MODALITY_RE if rx.search(line)), None)
    region = next((r for r, rx in _REGION_RE if rx.search(line)), "unspecified")
    return modality, region


def imaging_from_mimic(
    notes: pd.DataFrame, visits: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Imaging events from real radiology notes (module docstring) and the counts of reports
    left out by cause (``no hadm_id``, ``no modality``, ``unknown stay``). ``visits``
    (subject_id, hadm_id, visit_idx) numbers the stays; without it visit_idx is -1."""
    rr = notes[notes["note_type"].astype(str).str.upper().isin(["RR", "AR"])]
    ranks = {}
    if visits is not None:
        ranks = {
            (int(r["subject_id"]), int(r["hadm_id"])): int(r["visit_idx"])
            for _, r in visits.iterrows()
        }
    dropped = {"no hadm_id": 0, "no modality": 0, "unknown stay": 0}
    rows = []
    for r in rr.to_dict("records"):
        if pd.isna(r["hadm_id"]):
            dropped["no hadm_id"] += 1
            continue
        modality, region = parse_exam(str(r["text"]))
        if modality is None:
            dropped["no modality"] += 1
            continue
        key = (int(r["subject_id"]), int(r["hadm_id"]))
        if visits is not None and key not in ranks:
            dropped["unknown stay"] += 1
            continue
        rows.append(
            {
                "event_id": str(r["note_id"]),
                "subject_id": key[0],
                "hadm_id": key[1],
                "visit_idx": ranks.get(key, -1),
                "time": pd.Timestamp(r["charttime"]),
                "modality": modality,
                "region": region,
                "findings": str(r["text"]).strip(),
                "impression": "",
            }
        )
    return pd.DataFrame(rows, columns=list(IMAGING_COLUMNS)), dropped


def studies_by_stay(imaging: Iterable[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """visit_idx -> that stay's imaging events in time order (one patient's events)."""
    out: dict[int, list[Mapping[str, Any]]] = {}
    for e in sorted(imaging, key=lambda e: (pd.Timestamp(e["time"]), str(e["event_id"]))):
        out.setdefault(int(e["visit_idx"]), []).append(e)
    return out
