"""The generators' inputs: the kept patients' events with their dialogue coverage, the
dialogue turns, the encounters and the cohort strata, validated once (paper §3 "Task suite";
Appendix A gate L1: anchors are covered events, T9 anchors missed ones).

Only KEPT patients (``dialogue_summary.kept``) get questions. An event without a coverage row
has status ``absent`` and is never an anchor. A "date" is the ISO calendar date of an event's
``time``; the date of an encounter is the date of its admission (else of its earliest event).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import PANEL_ITEMIDS

STATUSES = ("covered", "missed", "unusable")
ABSENT = "absent"
ER_ADMISSION_TYPES: frozenset[str] = frozenset(
    {"EW EMER.", "DIRECT EMER.", "URGENT", "EU OBSERVATION"}
)
"""MIMIC-IV admission types counted as emergency ("er") encounters for T3's four classes
(EW = emergency ward, EU = emergency unit); every other type is "admit"."""

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": tuple(ARTIFACTS["events"]),
    "event_coverage": ("subject_id", "event_id", "status", "turn_idx"),
    "dialogues": ("subject_id", "visit_idx", "turn_idx", "speaker", "text", "event_ids"),
    "cohort": ("subject_id", "disease", "tertile"),
    "dialogue_summary": ("subject_id", "kept"),
}


class TaskInputError(ValueError):
    """Bad generator input: names the table, column and offending value."""


# --------------------------------------------------------------------------- inputs


def _require(df: pd.DataFrame, name: str) -> None:
    missing = [c for c in REQUIRED_COLUMNS[name] if c not in df.columns]
    if missing:
        raise TaskInputError(f"{name}: missing column(s) {', '.join(missing)}")


def lab_key_of(code: Any) -> str | None:
    """Panel key of a lab event's ``code`` (an itemid as text), None when not in the panel."""
    try:
        return PANEL_ITEMIDS[int(str(code).strip())][0]
    except (KeyError, ValueError, TypeError):
        return None


def icd_version(code_system: Any) -> int | None:
    """9 or 10 from an events ``code_system`` (``ICD9-CM``, ``ICD10-PCS``, ...)."""
    s = str(code_system)
    if s.startswith("ICD10"):
        return 10
    if s.startswith("ICD9"):
        return 9
    return None


RECORD_COLUMNS = (
    "event_id",
    "subject_id",
    "hadm_id",
    "visit_idx",
    "kind",
    "code",
    "label",
    "value",
    "value_text",
    "unit",
    "ref_low",
    "ref_high",
    "flag",
    "route",
    "date",
    "lab_key",
    "icd_version",
    "status",
    "turn",
)


@dataclass
class TaskInputs:
    """Everything the generators read, restricted to kept patients.

    Attributes:
        events: events of kept patients plus ``date`` (ISO), ``lab_key`` (labs),
            ``status`` (coverage status or ``absent``), ``turn`` (covering turn or -1),
            ``icd_version`` (diagnoses / procedures).
        turns: dialogue turns of kept patients.
        visits: one row per (subject_id, visit_idx): hadm_id, admit_time, disch_time, date,
            admission_type, encounter (``er`` | ``admit``).
        patients: subject_id, disease, tertile of kept patients.
        seed: selection seed (generation itself does not depend on it).
        raw_lab_days: ``(subject_id, lab_key, date)`` of every panel lab row in the raw source
            (any unit), to confirm that a lab was never measured on a date; None = unknown,
            the events table is used alone.

    The generators iterate plain-Python views built once (:attr:`records`, :attr:`by_visit`,
    :attr:`lab_series`, ...): per-group pandas indexing is far too slow at the paper's size.
    """

    events: pd.DataFrame
    turns: pd.DataFrame
    visits: pd.DataFrame
    patients: pd.DataFrame
    seed: int = 0
    raw_lab_days: frozenset | None = None

    @cached_property
    def records(self) -> list[dict]:
        """Events as dicts (nulls are None; ``t`` = time in microseconds since the epoch),
        ordered by subject, visit, time and natural event id."""
        ev = self.events
        cols = {c: _pylist(ev[c]) for c in RECORD_COLUMNS}
        cols["t"] = ev["time"].astype("datetime64[us]").astype("int64").tolist()
        names = list(cols)
        recs = [dict(zip(names, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
        for r in recs:
            if r["icd_version"] is not None:
                r["icd_version"] = int(r["icd_version"])
        recs.sort(key=lambda r: (r["subject_id"], r["visit_idx"], r["t"], event_sort_key(r)))
        return recs

    @cached_property
    def by_subject(self) -> dict[int, list[dict]]:
        """subject_id -> the patient's records in order."""
        out: dict[int, list[dict]] = {}
        for r in self.records:
            out.setdefault(r["subject_id"], []).append(r)
        return out

    @cached_property
    def by_visit(self) -> dict[tuple[int, int], list[dict]]:
        """(subject_id, visit_idx) -> the encounter's records in order."""
        out: dict[tuple[int, int], list[dict]] = {}
        for r in self.records:
            out.setdefault((r["subject_id"], r["visit_idx"]), []).append(r)
        return out

    @cached_property
    def lab_series(self) -> dict[tuple[int, str], list[dict]]:
        """(subject_id, lab_key) -> every panel lab record with a value, by time then id."""
        out: dict[tuple[int, str], list[dict]] = {}
        for r in self.records:
            if r["kind"] == "lab" and r["lab_key"] is not None and r["value"] is not None:
                out.setdefault((r["subject_id"], r["lab_key"]), []).append(r)
        for series in out.values():
            series.sort(key=lambda r: (r["t"], event_sort_key(r)))
        return out

    @cached_property
    def lab_day_count(self) -> dict[tuple[int, str, str], int]:
        """(subject_id, lab_key, date) -> number of lab events (any status)."""
        out: dict[tuple[int, str, str], int] = {}
        for r in self.records:
            if r["kind"] == "lab" and r["lab_key"] is not None:
                k = (r["subject_id"], r["lab_key"], r["date"])
                out[k] = out.get(k, 0) + 1
        return out

    @cached_property
    def visit_texts(self) -> dict[tuple[int, int], list[str]]:
        """(subject_id, visit_idx) -> the encounter's turn texts."""
        out: dict[tuple[int, int], list[str]] = {}
        tt = self.turns
        for s, v, text in zip(
            tt["subject_id"].tolist(),
            tt["visit_idx"].tolist(),
            tt["text"].astype(str).tolist(),
            strict=True,
        ):
            out.setdefault((int(s), int(v)), []).append(text)
        return out

    @cached_property
    def strata(self) -> dict[int, tuple[str, str]]:
        """subject_id -> (disease, tertile)."""
        return {
            int(s): (str(d), str(t))
            for s, d, t in zip(
                self.patients["subject_id"],
                self.patients["disease"],
                self.patients["tertile"],
                strict=True,
            )
        }

    @cached_property
    def turn_of(self) -> dict[str, int]:
        """event_id -> covering turn_idx (covered events only)."""
        return {r["event_id"]: int(r["turn"]) for r in self.records if r["status"] == "covered"}

    @cached_property
    def status_of(self) -> dict[str, str]:
        """event_id -> coverage status (``absent`` without a coverage row)."""
        return {r["event_id"]: r["status"] for r in self.records}

    @cached_property
    def visit_info(self) -> dict[tuple[int, int], dict]:
        """(subject_id, visit_idx) -> visit row as a dict."""
        return {
            (int(r["subject_id"]), int(r["visit_idx"])): r for r in self.visits.to_dict("records")
        }

    @cached_property
    def record_text(self) -> dict[int, str]:
        """subject_id -> lower-case text of every event label/code and every dialogue turn
        (what "appears nowhere in the record" is checked against)."""
        parts: dict[int, list[str]] = {}
        for r in self.records:
            parts.setdefault(r["subject_id"], []).append(f"{r['code']} {r['label']}")
        for (sid, _), texts in self.visit_texts.items():
            parts.setdefault(sid, []).extend(texts)
        return {sid: " \n".join(p).lower() for sid, p in parts.items()}

    def evidence(self, subject_id: int, event_ids: Iterable[str]) -> list[str]:
        """``"<subject_id>:<turn_idx>"`` of the turns covering ``event_ids`` (in order)."""
        out: list[str] = []
        for eid in event_ids:
            t = self.turn_of.get(str(eid))
            if t is not None:
                tag = f"{int(subject_id)}:{t}"
                if tag not in out:
                    out.append(tag)
        return out

    def visit_date(self, subject_id: int, visit_idx: int) -> str:
        """ISO date of an encounter (its admission date)."""
        return str(self.visit_info[(int(subject_id), int(visit_idx))]["date"])


def _pylist(col: pd.Series) -> list:
    """A column as a Python list with every null as None."""
    return [None if _isna(x) else x for x in col.astype(object).tolist()]


def _isna(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and x != x)


def timestamp(t_us: int) -> pd.Timestamp:
    """A record's ``t`` back as a Timestamp."""
    return pd.Timestamp(int(t_us), unit="us")


def make_inputs(
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    dialogues: pd.DataFrame,
    cohort: pd.DataFrame,
    summary: pd.DataFrame | None = None,
    seed: int = 0,
    raw_lab_days: Iterable[tuple[int, str, str]] | None = None,
) -> TaskInputs:
    """Validate the stage artifacts and assemble :class:`TaskInputs`.

    Args:
        events: events.parquet.
        coverage: event_coverage.parquet.
        dialogues: dialogues.parquet.
        cohort: cohort.parquet.
        summary: dialogue_summary.parquet; its ``kept`` column picks the patients (default:
            every patient with dialogue turns).
        seed: selection seed carried along.
        raw_lab_days: optional ``(subject_id, lab_key, date)`` triples from the raw source.

    Returns:
        The inputs, restricted to kept patients.

    Raises:
        TaskInputError: a missing column, an unknown coverage status, a duplicated coverage
            row or a kept patient without a cohort row.
    """
    for df, name in (
        (events, "events"),
        (coverage, "event_coverage"),
        (dialogues, "dialogues"),
        (cohort, "cohort"),
    ):
        _require(df, name)
    kept = _kept_patients(dialogues, cohort, summary)
    ev = _with_coverage(_kept_events(events, kept), coverage, kept)
    turns = dialogues[dialogues["subject_id"].astype(int).isin(kept)].copy()
    turns = turns.sort_values(["subject_id", "turn_idx"], kind="stable").reset_index(drop=True)
    patients = cohort[cohort["subject_id"].astype(int).isin(kept)][
        ["subject_id", "disease", "tertile"]
    ].copy()
    patients["subject_id"] = patients["subject_id"].astype("int64")
    raw = frozenset(raw_lab_days) if raw_lab_days is not None else None
    return TaskInputs(
        events=ev,
        turns=turns,
        visits=_visits(ev),
        patients=patients.sort_values("subject_id").reset_index(drop=True),
        seed=int(seed),
        raw_lab_days=raw,
    )


def _kept_patients(
    dialogues: pd.DataFrame, cohort: pd.DataFrame, summary: pd.DataFrame | None
) -> set[int]:
    """The kept patients (``dialogue_summary.kept``, else every patient with turns); each
    must have a cohort row."""
    if summary is not None:
        _require(summary, "dialogue_summary")
        kept = set(summary.loc[summary["kept"].astype(bool), "subject_id"].astype(int))
    else:
        kept = set(dialogues["subject_id"].astype(int))
    in_cohort = set(cohort["subject_id"].astype(int))
    orphans = sorted(kept - in_cohort)
    if orphans:
        raise TaskInputError(
            f"cohort: kept patient(s) {orphans[:5]} have no cohort row (disease/tertile)"
        )
    return kept


def _kept_events(events: pd.DataFrame, kept: set[int]) -> pd.DataFrame:
    """The kept patients' events with ``date``, ``lab_key`` and ``icd_version``."""
    ev = events[events["subject_id"].astype(int).isin(kept)].copy()
    ev["subject_id"] = ev["subject_id"].astype("int64")
    ev["visit_idx"] = ev["visit_idx"].astype("int64")
    ev["event_id"] = ev["event_id"].astype(str)
    ev["time"] = pd.to_datetime(ev["time"])
    ev["date"] = ev["time"].dt.strftime("%Y-%m-%d")
    is_lab = ev["kind"] == "lab"
    ev["lab_key"] = None
    ev.loc[is_lab, "lab_key"] = ev.loc[is_lab, "code"].map(lab_key_of)
    ev["icd_version"] = ev["code_system"].map(icd_version)
    return ev


def _with_coverage(ev: pd.DataFrame, coverage: pd.DataFrame, kept: set[int]) -> pd.DataFrame:
    """``ev`` plus each event's coverage ``status`` (``absent`` without a row) and covering
    ``turn`` (-1 when none), in (subject, visit, time, event id) order."""
    cov = coverage[coverage["subject_id"].astype(int).isin(kept)]
    bad = sorted(set(cov["status"].dropna().astype(str)) - set(STATUSES))
    if bad or cov["status"].isna().any():
        shown = bad[:3] if bad else ["<null>"]
        raise TaskInputError(
            f"event_coverage: column status has value(s) {shown}; expected one of {STATUSES}"
        )
    dup = cov["event_id"].astype(str).duplicated()
    if dup.any():
        raise TaskInputError(
            f"event_coverage: event_id {cov['event_id'][dup].iloc[0]!r} has more than one row"
        )
    status = dict(zip(cov["event_id"].astype(str), cov["status"].astype(str), strict=True))
    turn = dict(zip(cov["event_id"].astype(str), cov["turn_idx"], strict=True))
    ev["status"] = ev["event_id"].map(status).fillna(ABSENT)
    ev["turn"] = ev["event_id"].map(turn)
    covered_no_turn = (ev["status"] == "covered") & ev["turn"].isna()
    if covered_no_turn.any():
        eid = ev.loc[covered_no_turn, "event_id"].iloc[0]
        raise TaskInputError(f"event_coverage: covered event {eid!r} has no turn_idx")
    ev["turn"] = ev["turn"].fillna(-1).astype("int64")
    ev = ev.sort_values(["subject_id", "visit_idx", "time", "event_id"], kind="stable")
    return ev.reset_index(drop=True)


def _visits(ev: pd.DataFrame) -> pd.DataFrame:
    """One row per encounter: admission facts, else the span of the visit's events."""
    span = ev.groupby(["subject_id", "visit_idx"]).agg(
        hadm_id=("hadm_id", "first"), first_time=("time", "min"), last_time=("time", "max")
    )
    adm = ev[ev["kind"] == "admission"].drop_duplicates(["subject_id", "visit_idx"])
    adm = adm.set_index(["subject_id", "visit_idx"])[["time", "end_time", "code"]]
    out = span.join(adm, how="left").reset_index()
    out["admit_time"] = out["time"].fillna(out["first_time"])
    out["disch_time"] = pd.to_datetime(out["end_time"]).fillna(out["last_time"])
    out["date"] = out["admit_time"].dt.strftime("%Y-%m-%d")
    out["admission_type"] = out["code"].astype("string")
    out["encounter"] = np.where(out["admission_type"].isin(ER_ADMISSION_TYPES), "er", "admit")
    cols = ["subject_id", "visit_idx", "hadm_id", "admit_time", "disch_time", "date"]
    return out[cols + ["admission_type", "encounter"]]


def event_sort_key(event: Mapping[str, Any] | str) -> tuple:
    """Natural order of event ids: numeric parts compared as numbers (LAB-99 < LAB-100)."""
    eid = event if isinstance(event, str) else str(event["event_id"])
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in eid.split("-"))
