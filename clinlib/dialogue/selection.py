"""Which events a dialogue states (paper §3 "Cohort"; Fig. 2 stage 3; T9 abstention anchors,
§4; docs/design.md "Layout"): the input checks, the events that cannot be told, and the
deterministic missed-events rule.

- ``unusable`` — the event cannot be stated faithfully: unknown kind, no time or visit, a lab
  outside the 18-lab panel or without value or unit, a medication without drug or with a dose
  but no dose unit (a medication without a dose is usable: it is told as started, drug and
  route only, never with a made-up dose), a diagnosis / procedure without code or title (unknown code), an admission without
  type, a duplicated event_id. It is left out and its reason recorded.
- ``missed`` — deliberately left unstated, the anchors of T9 abstention questions. The rule
  is deterministic and hash-based on (seed, event_id): with ``u = hash(seed, event_id)`` in
  [0, 1), a lab outside :data:`clinlib.dialogue.fields.KEY_LABS` measured on a calendar day other than
  its visit's first day (and the patient's only value of that lab on that day) is missed if
  ``u < P_MISS_LAB``; a background medication (a drug that treats none of the index diseases,
  see :data:`DISEASE_DRUGS`) is missed, together with every other order of the same drug in
  the same visit, if ``u < P_MISS_MED`` (u of the group's smallest event_id); a key lab is
  missed if ``u < P_MISS_KEY_LAB`` when :func:`clinlib.dialogue.fields.key_lab_missable` allows it (a
  normal result on a middle day of its visit: admission-day, last-day and abnormal key results
  are always told, as in a clinician's visit summary). If that leaves fewer than
  :data:`MIN_MISSED` anchors, the eligible anchors with the smallest u are added up to that
  floor. Admissions, discharges, diagnoses and procedures are never missed by this rule, nor
  are the two events of a contraindication conflict (a drug given while a lab state
  contraindicated it, and that lab: :func:`clinlib.data.contraindications.conflict_event_ids`),
  which a clinician's summary states as a safety fact.

The length budget (:mod:`clinlib.dialogue.fitting`) may leave out more events afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.data.vocab import EVENT_ID_PREFIX, EVENT_KINDS, LAB_PANEL, PANEL_ITEMIDS
from clinlib.dialogue.fields import (
    KEY_LABS,
    fmt_date,
    key_lab_missable,
    lab_day_bounds,
    present,
    visit_starts,
)
from clinlib.dialogue.templates import SYMPTOM_CODES

# --- the missed-events rule ----------------------------------------------------------------

P_MISS_LAB = 0.8
P_MISS_KEY_LAB = 0.8
P_MISS_MED = 0.3
MIN_MISSED = 4

# Substrings (lower case) of drug names that treat an index disease (diabetes, hypertension,
# CKD, CAD) or its immediate complications; every other drug is "background".
DISEASE_DRUGS: tuple[str, ...] = (
    # diabetes
    "insulin",
    "glargine",
    "lispro",
    "aspart",
    "detemir",
    "degludec",
    "metformin",
    "glipizide",
    "glyburide",
    "glimepiride",
    "gliptin",
    "glitazone",
    "gliflozin",
    "glutide",
    "exenatide",
    "acarbose",
    "repaglinide",
    "nateglinide",
    # hypertension / heart failure
    "pril",
    "sartan",
    "dipine",
    "diltiazem",
    "verapamil",
    "olol",
    "labetalol",
    "thiazide",
    "chlorthalidone",
    "furosemide",
    "torsemide",
    "bumetanide",
    "spironolactone",
    "eplerenone",
    "hydralazine",
    "clonidine",
    "doxazosin",
    "terazosin",
    "prazosin",
    "minoxidil",
    "isosorbide",
    "sacubitril",
    # CKD
    "sevelamer",
    "calcium acetate",
    "lanthanum",
    "calcitriol",
    "paricalcitol",
    "cinacalcet",
    "epoetin",
    "darbepoetin",
    "sodium bicarbonate",
    "patiromer",
    "polystyrene",
    # CAD
    "aspirin",
    "clopidogrel",
    "prasugrel",
    "ticagrelor",
    "statin",
    "ezetimibe",
    "nitroglycerin",
    "heparin",
    "enoxaparin",
    "warfarin",
    "apixaban",
    "rivaroxaban",
    "ranolazine",
    "bivalirudin",
    "eptifibatide",
)

REQUIRED_EVENT_COLUMNS: tuple[str, ...] = (
    "event_id",
    "subject_id",
    "visit_idx",
    "time",
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
    "end_time",
)
_TEXT_FIELDS = ("code", "label", "value_text", "unit", "route")
_LAB_BY_KEY = {lab.key: lab for lab in LAB_PANEL}


class DialogueInputError(ValueError):
    """The events (or cohort) table given to the dialogue stage is malformed."""


# --- small pure helpers --------------------------------------------------------------------


def stable_hash(seed: int, *parts: object) -> int:
    """Deterministic 64-bit integer from (seed, *parts): picks templates and missed events."""
    key = "|".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def hash_unit(seed: int, *parts: object) -> float:
    """Deterministic uniform number in [0, 1) from (seed, *parts)."""
    return stable_hash(seed, *parts) / 2.0**64


@functools.lru_cache(maxsize=1 << 18)
def natural_key(eid: str) -> tuple:
    """Sort key of an event id with its numbers as numbers (``LAB-9`` before ``LAB-10``)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", eid))


def lab_key(event: Mapping[str, Any]) -> str | None:
    """Panel key of a lab event (``"creatinine"``), None if its itemid is not in the panel."""
    try:
        return PANEL_ITEMIDS[int(str(event.get("code")).strip())][0]
    except (KeyError, ValueError):
        return None


def is_background_drug(name: str) -> bool:
    """True if ``name`` treats none of the index diseases (see :data:`DISEASE_DRUGS`)."""
    low = str(name).lower()
    return not any(s in low for s in DISEASE_DRUGS)


@functools.lru_cache(maxsize=1 << 14)
def condition_of(code: str) -> str | None:
    """Symptom group of an ICD code (prefix match, codes read as text), or None."""
    c = str(code).strip().upper().replace(".", "")
    for cond, prefixes in SYMPTOM_CODES.items():
        if any(c.startswith(p) for p in prefixes):
            return cond
    return None


# --- input checks --------------------------------------------------------------------------


def validate_events(events: pd.DataFrame, source: str = "events") -> pd.DataFrame:
    """Check the table-level shape of an events frame and coerce its types.

    Problems with single events are not errors here: :func:`event_problem` turns them into
    per-event ``unusable`` reasons.

    Args:
        events: the events table (clinlib.data.schema.ARTIFACTS["events"] columns).
        source: name used in error messages (e.g. the parquet path).

    Returns:
        A copy with ``time``/``end_time`` as timestamps and ``visit_idx`` as Int64.

    Raises:
        DialogueInputError: a required column is missing, an event_id or subject_id is
            null, or one event_id belongs to two patients.
    """
    missing = [c for c in REQUIRED_EVENT_COLUMNS if c not in events.columns]
    if missing:
        raise DialogueInputError(
            f"{source}: missing column(s) {', '.join(missing)}; expected the events table "
            "written by `clintrace cohort`"
        )
    df = events.copy()
    for col, other in (("event_id", "subject_id"), ("subject_id", "event_id")):
        nulls = df[col].isna()
        if nulls.any():
            examples = df.loc[nulls, other].astype(str).head(3).tolist()
            raise DialogueInputError(
                f"{source}: column {col!r} is null in {int(nulls.sum())} row(s) "
                f"(their {other}: {examples})"
            )
    try:
        df["subject_id"] = df["subject_id"].astype("int64")
    except (TypeError, ValueError) as exc:
        raise DialogueInputError(f"{source}: column 'subject_id' is not integer: {exc}") from None
    df["event_id"] = df["event_id"].astype("string")
    owners = df.groupby("event_id")["subject_id"].nunique()
    shared = owners[owners > 1]
    if len(shared):
        raise DialogueInputError(
            f"{source}: event_id {shared.index[0]!r} belongs to {int(shared.iloc[0])} patients"
        )
    for col in ("time", "end_time"):
        df[col] = pd.to_datetime(df[col], errors="coerce")
    for col in ("value", "ref_low", "ref_high"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df["visit_idx"] = pd.to_numeric(df["visit_idx"], errors="coerce").astype("Int64")
    return df


def event_problem(event: Mapping[str, Any]) -> str | None:
    """Why an event cannot be stated faithfully (None when it can).

    Args:
        event: one events-table row.

    Returns:
        A short reason naming the field and value, e.g. ``"Creatinine unit missing"``.
    """
    kind, eid = event.get("kind"), str(event.get("event_id"))
    if kind not in EVENT_KINDS:
        return f"unknown event kind {kind!r}"
    if not eid.startswith(EVENT_ID_PREFIX[kind] + "-"):
        return f"event_id {eid} does not match kind {kind!r}"
    if not present(event.get("visit_idx")):
        return "visit_idx missing"
    if not present(event.get("time")):
        return "time missing or not a timestamp"
    for col in _TEXT_FIELDS:
        val = event.get(col)
        if isinstance(val, str) and ("\n" in val or "\r" in val):
            return f"{col} contains a line break"
    label = event.get("label")
    if kind == "lab":
        key = lab_key(event)
        if key is None:
            return f"lab itemid {event.get('code')!r} is not in the 18-lab panel"
        name = label if present(label) else _LAB_BY_KEY[key].label
        if not present(label):
            return f"{name} label missing"
        vt = event.get("value_text")
        if not present(vt):
            return f"{name} value missing"
        if not any(ch.isdigit() for ch in str(vt)):
            return f"{name} value {vt!r} is not a number"
        if not present(event.get("unit")):
            return f"{name} unit missing"
    elif kind == "medication":
        if not present(label):
            return "drug name missing"
        # No dose (a MEDS eMAR / pharmacy start, an empty dose_val_rx) is still an order: it
        # is told as started, without a number. A dose without its unit cannot be told.
        if present(event.get("value_text")) and not present(event.get("unit")):
            return f"{label} dose unit missing"
    elif kind in ("diagnosis", "procedure"):
        code = event.get("code")
        if not present(code):
            return "ICD code missing"
        if not present(label):
            return f"unknown ICD code {code} (no title)"
    elif kind == "admission" and not present(event.get("code")):
        return "admission type missing"
    return None


def missed_events(
    events: Sequence[Mapping[str, Any]],
    seed: int = 0,
    starts: Mapping[int, pd.Timestamp] | None = None,
    protect: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Apply the missed-events rule (module docstring) to one patient's usable events.

    Args:
        events: the patient's usable events.
        seed: synthesis seed.
        starts: visit start times (default: :func:`clinlib.dialogue.fields.visit_starts` of events).
        protect: event ids never missed (a contraindication conflict's lab and order); a
            background drug group holding one is told whole.

    Returns:
        ``{event_id: reason}`` for every event left unstated.
    """
    starts = visit_starts(events) if starts is None else starts
    first_day = {v: fmt_date(t) for v, t in starts.items()}
    bounds = lab_day_bounds(events)
    candidates: list[tuple[float, list[str], str, str]] = []  # (u, ids, kind, reason)
    med_groups: dict[tuple[int, str], list[str]] = {}
    # A lab is only missable if no other lab of the same kind shares its calendar day (two
    # visits can touch one day): otherwise "what was X on that day" would stay answerable.
    per_day: dict[tuple[str | None, str], int] = {}
    for e in events:
        if e["kind"] == "lab":
            k = (lab_key(e), fmt_date(e["time"]))
            per_day[k] = per_day.get(k, 0) + 1
    for e in events:
        eid, kind = str(e["event_id"]), e["kind"]
        if kind == "lab" and eid in protect:
            continue
        if kind == "lab":
            key, day = lab_key(e), fmt_date(e["time"])
            if per_day[(key, day)] > 1:
                continue
            if key in KEY_LABS:
                if not key_lab_missable(e, bounds):
                    continue
                reason = f"rule: normal key lab ({key}) on a middle day of its visit"
                candidates.append((hash_unit(seed, "miss", eid), [eid], "key_lab", reason))
                continue
            if day == first_day.get(int(e["visit_idx"])):
                continue
            reason = f"rule: non-key lab ({key}) on a non-first day of its visit"
            candidates.append((hash_unit(seed, "miss", eid), [eid], "lab", reason))
        elif kind == "medication" and is_background_drug(e["label"]):
            group = (int(e["visit_idx"]), " ".join(str(e["label"]).lower().split()))
            med_groups.setdefault(group, []).append(eid)
    for (_, drug), ids in med_groups.items():
        if protect.intersection(ids):
            continue
        ids = sorted(ids, key=natural_key)
        reason = f"rule: background medication ({drug}), every order in its visit"
        candidates.append((hash_unit(seed, "miss", ids[0]), ids, "medication", reason))
    candidates.sort(key=lambda c: (c[0], c[1][0]))
    p = {"lab": P_MISS_LAB, "key_lab": P_MISS_KEY_LAB, "medication": P_MISS_MED}
    chosen = [c for c in candidates if c[0] < p[c[2]]]
    for c in candidates[:MIN_MISSED]:
        if c not in chosen:
            chosen.append(c)
    return {eid: reason for _, ids, _, reason in chosen for eid in ids}
