"""Shared machinery of the T1–T9 question generators (paper §3 "Task suite", Fig. 1;
Appendix A gates L1–L3).

Every generator reads one :class:`TaskInputs` (the kept patients' events with their dialogue
coverage, the dialogue turns and the cohort strata) and returns its task's candidate questions
as a DataFrame with :data:`clinlib.tasks.base.QUESTION_COLUMNS` plus the internal
``conflicts`` column the selection uses (dropped before questions.parquet is written). Pools
far larger than any target are thinned per patient series by :func:`thin` (a stable hash, so
the thinning does not depend on row order); each generator documents its cap.

Conventions shared by all tasks:

* Only KEPT patients (``dialogue_summary.kept``) get questions.
* Anchors of T1–T8 are events whose ``event_coverage.status`` is ``covered``; T9 anchors are
  ``missed`` events (or none, for a lab never measured on a date). ``unusable`` events are
  never used. An event without a coverage row has status ``absent`` and is never an anchor.
* A "date" is the ISO calendar date (``YYYY-MM-DD``) of an event's ``time``; the date of an
  encounter is the date of its admission (else of its earliest event).
* ``qid`` = ``"<task>-" + sha1(task | subjects | sorted anchors | subtype | extra)[:12]``: a
  function of content only, so the same question gets the same id on every run and whatever
  the input row order. The paraphrase template is picked by a hash of the qid.
* Rule arithmetic is exact: values are read as the decimals the lab reported (``repr`` of the
  float, e.g. ``1.3`` -> 13/10) and relative changes are :class:`fractions.Fraction`, so a
  value sitting exactly on a threshold of :mod:`clinlib.tasks.rules` is binned as the rule
  says (``r = 0.15`` is "moderate"), never moved by float noise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import INDEX_DISEASE_ICD, LAB_BY_KEY, PANEL_ITEMIDS
from clinlib.tasks import rules
from clinlib.tasks.base import QUESTION_COLUMNS

STATUSES = ("covered", "missed", "unusable")
ABSENT = "absent"
ER_ADMISSION_TYPES: frozenset[str] = frozenset(
    {"EW EMER.", "DIRECT EMER.", "URGENT", "EU OBSERVATION"}
)
"""MIMIC-IV admission types counted as emergency ("er") encounters for T3's four classes
(EW = emergency ward, EU = emergency unit); every other type is "admit"."""

DISEASE_NAMES: dict[str, str] = {
    "diabetes": "diabetes",
    "hypertension": "hypertension",
    "ckd": "chronic kidney disease",
    "cad": "coronary artery disease",
}

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": tuple(ARTIFACTS["events"]),
    "event_coverage": ("subject_id", "event_id", "status", "turn_idx"),
    "dialogues": ("subject_id", "visit_idx", "turn_idx", "speaker", "text", "event_ids"),
    "cohort": ("subject_id", "disease", "tertile"),
    "dialogue_summary": ("subject_id", "kept"),
}

INTERNAL_COLUMNS = ("conflicts",)


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
    "event_id", "subject_id", "hadm_id", "visit_idx", "kind", "code", "label", "value",
    "value_text", "unit", "ref_low", "ref_high", "flag", "route", "date", "lab_key",
    "icd_version", "status", "turn",
)  # fmt: skip


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
        for s, v, text in zip(tt["subject_id"].tolist(), tt["visit_idx"].tolist(),
                              tt["text"].astype(str).tolist(), strict=True):  # fmt: skip
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
    ev = ev.reset_index(drop=True)

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


# --------------------------------------------------------------------------- ids, hashing


def stable_hash(*parts: Any) -> int:
    """A 64-bit integer hash of ``parts`` that is the same on every run and platform."""
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")


def make_qid(
    task: str,
    subject_ids: Sequence[int],
    anchors: Sequence[str],
    subtype: str,
    extra: Sequence[Any] = (),
) -> str:
    """Stable question id from content only (see module docstring)."""
    key = "|".join(
        [
            task,
            ",".join(str(int(s)) for s in subject_ids),
            ",".join(sorted(str(a) for a in anchors)),
            subtype,
            ",".join(str(x) for x in extra),
        ]
    )
    return f"{task}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def event_sort_key(event: Mapping[str, Any] | str) -> tuple:
    """Natural order of event ids: numeric parts compared as numbers (LAB-99 < LAB-100)."""
    eid = event if isinstance(event, str) else str(event["event_id"])
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in eid.split("-"))


def thin(items: Sequence[Any], key: Callable[[Any], Any], ident: Callable[[Any], Any],
         cap: int, salt: str) -> list:  # fmt: skip
    """At most ``cap`` items per ``key`` group: those with the smallest stable hash of
    ``(salt, ident(item))``; the order of ``items`` is kept. Used to thin candidate pools that
    are far larger than any target (documented per generator), independent of row order."""
    groups: dict[Any, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(key(it), []).append(i)
    keep: set[int] = set()
    for idx in groups.values():
        keep.update(sorted(idx, key=lambda i: stable_hash(salt, ident(items[i])))[:cap])
    return [it for i, it in enumerate(items) if i in keep]


def pick_index(qid: str, n: int, salt: str = "template") -> int:
    """Deterministic index in ``range(n)`` for a question (template / variant choice)."""
    return stable_hash(qid, salt) % n


# --------------------------------------------------------------------------- rule arithmetic


def exact(value: Any) -> Fraction:
    """The reported decimal of a lab value as an exact fraction (``1.3`` -> 13/10); a
    Fraction is returned unchanged."""
    if isinstance(value, Fraction):
        return value
    return Fraction(repr(float(value)))


def relative_change(first: Any, last: Any) -> Fraction:
    """``(last - first) / |first|`` exactly; raises ZeroDivisionError when first is 0."""
    f, la = exact(first), exact(last)
    return (la - f) / abs(f)


_STABLE = Fraction(str(rules.STABLE_REL))
_MODERATE = Fraction(str(rules.MODERATE_REL))
_STRONG = Fraction(str(rules.STRONG_REL))
_SIMILAR = Fraction(str(rules.SIMILAR_REL))


def magnitude(r: Fraction) -> str:
    """rules.py magnitude bin of a relative change: none / weak / moderate / strong."""
    a = abs(r)
    if a < _STABLE:
        return "none"
    if a < _MODERATE:
        return "weak"
    if a < _STRONG:
        return "moderate"
    return "strong"


def trend_label(first: Any, last: Any) -> str:
    """T2 gold ``"<direction>;<magnitude>"`` (rules.py docstring)."""
    r = relative_change(first, last)
    mag = magnitude(r)
    if mag == "none":
        return "stable;none"
    return f"{'increased' if r > 0 else 'decreased'};{mag}"


T8_BIN_LETTER = {"weak": "S", "moderate": "M", "strong": "L"}


def t8_label(before: Any, after: Any) -> tuple[str, str]:
    """T8 gold direction and magnitude x direction bin (rules.py docstring)."""
    r = relative_change(before, after)
    mag = magnitude(r)
    if mag == "none":
        return "similar", "0"
    sign = "+" if r > 0 else "-"
    return ("increased" if r > 0 else "decreased"), f"{T8_BIN_LETTER[mag]}{sign}"


def compare_ab(a: Any, b: Any, count: bool = False) -> str:
    """T6 gold: ``A`` / ``B`` / ``similar`` (equal counts, or within SIMILAR_REL of the larger
    magnitude for values)."""
    if count:
        return "similar" if int(a) == int(b) else ("A" if int(a) > int(b) else "B")
    fa, fb = exact(a), exact(b)
    if abs(fa - fb) <= _SIMILAR * max(abs(fa), abs(fb)):
        return "similar"
    return "A" if fa > fb else "B"


def fraction_text(r: Fraction) -> str:
    """A relative change for meta: exact ``p/q`` plus rounded float."""
    return f"{r.numerator}/{r.denominator}"


# --------------------------------------------------------------------------- clinical helpers


def lab_direction(row: Mapping[str, Any]) -> str | None:
    """``high`` / ``low`` side of the reference range of an abnormal lab (the event's own range,
    else the panel's), None when the value lies inside it or no bound applies."""
    lab = LAB_BY_KEY.get(str(row.get("lab_key")))
    hi = row.get("ref_high")
    lo = row.get("ref_low")
    hi = lab.ref_high if (hi is None or pd.isna(hi)) and lab else hi
    lo = lab.ref_low if (lo is None or pd.isna(lo)) and lab else lo
    v = row.get("value")
    if v is None or pd.isna(v):
        return None
    if hi is not None and not pd.isna(hi) and float(v) > float(hi):
        return "high"
    if lo is not None and not pd.isna(lo) and float(v) < float(lo):
        return "low"
    return None


def family_prefixes(family: str) -> dict[int, tuple[str, ...]]:
    """ICD prefixes of a T4 family (index diseases from clinlib.data.vocab, others from rules)."""
    if family in INDEX_DISEASE_ICD:
        return INDEX_DISEASE_ICD[family]
    if family in rules.T4_EXTRA_FAMILIES:
        return rules.T4_EXTRA_FAMILIES[family]
    raise KeyError(f"unknown diagnosis family {family!r}")


def families_of(code: Any, version: Any, families: Iterable[str]) -> list[str]:
    """Families among ``families`` whose prefixes contain the ICD ``code`` (read as text)."""
    if version is None or pd.isna(version):
        return []
    c = str(code).strip().upper().replace(".", "")
    return [
        f
        for f in families
        if any(c.startswith(p) for p in family_prefixes(f).get(int(version), ()))
    ]


def panel_itemids(lab_key: str) -> list[int]:
    """The panel itemids of a lab key (priority order)."""
    return list(LAB_BY_KEY[lab_key].itemids)


# --------------------------------------------------------------------------- text helpers


def format_instruction(task: str) -> str:
    """The answer-format statement of ``task`` (clinlib.tasks.answers.ANSWER_FORMATS)."""
    from clinlib.tasks.answers import ANSWER_FORMATS

    return ANSWER_FORMATS[task]


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
NUMERIC_TEXT = re.compile(r"(?:[<>]=?\s?)?\d+(?:\.\d+)?")


def mentions_number(text: str, number: str) -> bool:
    """True when ``number`` occurs in ``text`` as a whole number outside ISO dates (not inside
    2150 or 11.3); used to drop a question whose wording would contain its own gold value."""
    if not number:
        return False
    text = _ISO_DATE.sub(" ", text)
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", text) is not None


def abstain_clause() -> str:
    """The abstention clause every answer format of clinlib.tasks.answers ends with ("" when
    that module is not available), so T9's own formats read like every other task's."""
    try:
        from clinlib.tasks.answers import ABSTAIN_CLAUSE
    except ImportError:
        return ""
    return str(ABSTAIN_CLAUSE)


def join_dates(dates: Sequence[str]) -> str:
    """``a, b and c``."""
    if len(dates) == 1:
        return dates[0]
    return ", ".join(dates[:-1]) + " and " + dates[-1]


# --------------------------------------------------------------------------- rows


def question_row(
    inp: TaskInputs,
    *,
    task: str,
    subtype: str,
    subject_ids: Sequence[int],
    anchors: Sequence[str],
    templates: Sequence[str],
    fields: Mapping[str, Any],
    gold: str,
    meta: Mapping[str, Any],
    fmt: str | None = None,
    options: Sequence[str] = (),
    injection: str = "",
    evidence_events: Sequence[tuple[int, str]] | None = None,
    extra_key: Sequence[Any] = (),
    conflicts: Sequence[str] = (),
    suffix: str = "",
) -> dict[str, Any]:
    """Assemble one candidate question (QUESTION_COLUMNS + ``conflicts``, plus ``_body``: the
    worded question without its format statement, for the generators' own leak checks; it is
    not a column).

    Args:
        inp: the generator inputs.
        task / subtype: task name and stratum.
        subject_ids: one patient (two for T6, A then B).
        anchors: event ids the gold derives from (may be empty for T9 lab-unmeasured).
        templates: the task's paraphrase templates; one is chosen by the qid.
        fields: template fields.
        gold: canonical gold answer.
        meta: structured fields the gold came from (JSON-serialised).
        fmt: answer-format statement (default: the task's).
        options: T7 option texts in letter order.
        injection: JSON of the dialogue injection, or "".
        evidence_events: ``(subject_id, event_id)`` whose covering turns are the evidence
            (default: every anchor of the first subject).
        extra_key: extra content for the qid (e.g. a lab and date without anchor).
        conflicts: keys no two selected questions of the task may share.
        suffix: text appended after the body (T7's options block), before the format.

    Returns:
        A dict ready for a DataFrame row.
    """
    qid = make_qid(task, subject_ids, anchors, subtype, extra_key)
    template_id = pick_index(qid, len(templates))
    body = templates[template_id].format(**fields)
    fmt = format_instruction(task) if fmt is None else fmt
    question = body + (f"\n{suffix}\n" if suffix else " ") + fmt
    if evidence_events is None:
        evidence_events = [(subject_ids[0], a) for a in anchors]
    evidence: list[str] = []
    for sid, eid in evidence_events:
        for tag in inp.evidence(sid, [eid]):
            if tag not in evidence:
                evidence.append(tag)
    disease, tertile = inp.strata[int(subject_ids[0])]
    return {
        "qid": qid,
        "task": task,
        "subtype": subtype,
        "subject_ids": [int(s) for s in subject_ids],
        "question": question,
        "gold": gold,
        "options": list(options),
        "anchor_event_ids": [str(a) for a in anchors],
        "evidence_turns": evidence,
        "disease": disease,
        "tertile": tertile,
        "template_id": int(template_id),
        "injection": injection,
        "meta": json.dumps(meta, sort_keys=True, default=_json_default),
        "conflicts": list(conflicts),
        "_body": body,
    }


def _json_default(obj: Any) -> Any:
    if isinstance(obj, pd.Timestamp):
        return obj.isoformat()
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, Fraction):
        return fraction_text(obj)
    raise TypeError(f"meta value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Candidate rows -> DataFrame with QUESTION_COLUMNS (+ conflicts), sorted by qid, one row
    per qid (a generator must not emit the same question twice)."""
    cols = list(QUESTION_COLUMNS) + list(INTERNAL_COLUMNS)
    df = pd.DataFrame(rows, columns=cols)
    if df["qid"].duplicated().any():
        dup = df.loc[df["qid"].duplicated(), "qid"].iloc[0]
        raise AssertionError(f"generator emitted question {dup} twice")
    for c, t in QUESTION_COLUMNS.items():
        if t == "string":
            df[c] = df[c].astype("string")
        elif t == "int64":
            df[c] = df[c].astype("int64")
    return df.sort_values("qid", kind="stable").reset_index(drop=True)
