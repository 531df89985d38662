"""Noise augmentation of the dialogues (MedMemoryBench §4 "Noise Augmentation", the Mixed mode;
§5 "Evaluation Protocol": the streaming protocol's extended sequence S~; the seeds of its appendix
"Results Across Multiple Random Seeds"; seed facts in :mod:`clinlib.core.seed_facts`).

:func:`add_noise` inserts NEW sessions between a patient's real visits (never before the
first; possibly after the last), about ``round(ratio x real visits)`` per patient:

* general-health sessions (``NOISE-GH-<topic>-<n>``) on one of the 38 topics of
  :data:`clinlib.dialogue.noise_topics.GH_TOPICS`, 4, 6 or 8 turns, with no patient fact;
* proxy sessions (``NOISE-PROXY-<relation>-<n>``): the patient asks about one of 2-4
  relatives, each a fixed donor of the synthetic donor pool (:mod:`clinlib.data.donors`), and
  the clinician reads out the relative's labs and a drug with the kit's lab and medication
  item phrasing, naming the relative in every fact-bearing sentence ("On 2150-03-02, your
  father's Potassium was 5.9 mEq/L.").

Dates. A real visit occupies the days from the day before its admission to the last date
its turns mention (its discharge); event dates lie there (clinlib.data.events joins labs and
drugs within [admittime - 1 day, dischtime]). Noise sessions and the relative's fact dates
are drawn from the free days between occupied spans (up to :data:`AFTER_LAST_DAYS` after the
last visit), so a noise turn never states one of the patient's own (lab, date) or (drug,
date) pairs — even for a fact the dialogue left unstated; a fact that would is moved or
dropped, and the verifier's HARD check ``noise_states_no_patient_fact`` checks it against the
events.

Provenance. The tags are kept in ``text_tagged`` and ``event_ids`` (for the verifier and the
misattributed-memory count), but what a strategy or reader sees must not flag noise: the
seed's ``is_noise`` is a flag on stored summaries, not something methods see. So
:func:`clinlib.dialogue.render.render_dialogue` shows noise turns without their tags, and
:func:`hide_noise_tags` blanks the noise tags of the turns a constructor reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.vocab import NOISE_ID_PREFIX
from clinlib.dialogue import noise_topics as nt
from clinlib.dialogue.fields import TURN_COLUMNS, is_noise_turn, present, real_turns
from clinlib.dialogue.matching import DATE_RE, find_spans, format_tag, is_noise_id
from clinlib.dialogue.relatives import Relative, default_profiles, donor_profiles, relatives_of
from clinlib.dialogue.templates import MED_ITEMS

# The light helpers live beside the tag format and the turn records, so the verifier does not
# import the donor pool; they are part of this module's interface.
__all__ = [
    "NoiseError",
    "Relative",
    "add_noise",
    "donor_profiles",
    "hide_noise_tags",
    "is_noise_id",
    "is_noise_turn",
    "noise_facts",
    "noise_tag",
    "real_turns",
    "relatives_of",
]

NOISE_COLUMNS: tuple[str, ...] = ("is_noise", "source_visit_idx")
NOISE_KINDS: tuple[str, ...] = ("GH", "PROXY")
PROXY_SHARE = 0.5  # share of noise sessions that are proxy consultations
AFTER_LAST_DAYS = 365  # free days after the last real visit a session may fall on
MAX_FACT_LAG_DAYS = 14  # a relative's result is at most this many days older than the session
LABS_PER_SESSION = 2
# the placement's own random stream (relatives.REL_STREAM is 1): relatives do not depend on
# the ratio
_PLACE_STREAM = 2


class NoiseError(ValueError):
    """Unusable input to the noise transformation (missing column, bad ratio or seed)."""


@dataclass
class _Session:
    kind: str
    slot: int  # source visit_idx of the real visit it follows
    day: date
    tag: str = ""
    turns: list[tuple[str, list[tuple[str, bool]]]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)


# --- public helpers -------------------------------------------------------------------------


def noise_tag(kind: str, name: str, n: int) -> str:
    """``NOISE-GH-<topic>-<n>`` / ``NOISE-PROXY-<relation>-<n>``."""
    if kind not in NOISE_KINDS:
        raise NoiseError(f"noise kind {kind!r} not in {NOISE_KINDS}")
    return f"{NOISE_ID_PREFIX}-{kind}-{name}-{int(n)}"


def hide_noise_tags(turns: pd.DataFrame) -> pd.DataFrame:
    """What constructors read: noise turns keep their text but lose their tags
    (``text_tagged`` = ``text``, no ``event_ids``), so no method sees which sessions are
    noise. Real turns are unchanged; ``turns`` is not modified."""
    out = turns.copy()
    if "is_noise" not in out.columns or not out["is_noise"].any():
        return out
    mask = out["is_noise"].fillna(False).astype(bool)
    out.loc[mask, "text_tagged"] = out.loc[mask, "text"]
    out["event_ids"] = [[] if m else ids for m, ids in zip(mask, out["event_ids"], strict=True)]
    return out


# --- the patient's calendar ----------------------------------------------------------------


def _day(text: str) -> date:
    return date.fromisoformat(str(text)[:10])


def _calendar(
    recs: list[dict[str, Any]],
) -> tuple[list[int], dict[int, tuple[date, date]], dict[str, list[str]]]:
    """(visit order, visit -> occupied (first, last) day, date -> real sentences naming it)."""
    spans: dict[int, tuple[date, date]] = {}
    said: dict[str, list[str]] = {}
    for r in recs:
        v = int(r["visit_idx"])
        days = [d for d in DATE_RE.findall(str(r["text"])) if len(d) == 10 and d[4] == "-"]
        if present(r.get("visit_date")):
            days.append(str(r["visit_date"])[:10])
        for d in days:
            said.setdefault(d, []).append(str(r["text"]))
            lo, hi = spans.get(v, (_day(d), _day(d)))
            spans[v] = (min(lo, _day(d)), max(hi, _day(d)))
    order = sorted({int(r["visit_idx"]) for r in recs})
    for v in order:
        if v not in spans:
            raise NoiseError(f"dialogues: patient {recs[0]['subject_id']} visit {v} has no date")
        lo, hi = spans[v]
        spans[v] = (lo - timedelta(days=1), hi)  # labs may be drawn the day before admission
    return order, spans, said


def _free_days(order: list[int], spans: dict[int, tuple[date, date]]) -> dict[int, list[date]]:
    """Free days after each real visit, before the next one's occupied span."""
    busy = {s[0] + timedelta(days=i) for s in spans.values() for i in range((s[1] - s[0]).days + 1)}
    out = {}
    for i, v in enumerate(order):
        lo = spans[v][1] + timedelta(days=1)
        if i + 1 < len(order):
            hi = spans[order[i + 1]][0] - timedelta(days=1)
        else:
            hi = spans[v][1] + timedelta(days=AFTER_LAST_DAYS)
        n = (hi - lo).days + 1
        out[v] = [d for d in (lo + timedelta(days=k) for k in range(max(n, 0))) if d not in busy]
    return out


def _states(said: Mapping[str, list[str]], label: str, day: date) -> bool:
    """True if a real turn names ``label`` in a turn that also gives ``day``."""
    return any(find_spans(t, label, True) for t in said.get(day.isoformat(), []))


# --- sessions ------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _gh_session(slot: int, day: date, n: int, rng: np.random.Generator) -> _Session:
    """A general-health consultation: question, answer, follow-up, answer; sometimes the
    warning signs, sometimes a closing (4, 6 or 8 turns). No patient fact, no number."""
    slug, question, answer, follow, follow_answer, warning = _pick(rng, nt.GH_TOPICS)
    s = _Session("GH", slot, day, noise_tag("GH", slug, n))
    s.turns = [
        ("patient", [(_pick(rng, nt.GH_OPENERS), False), (question, False)]),
        ("clinician", [(answer, True)]),
        ("patient", [(follow, False)]),
        ("clinician", [(follow_answer, True)]),
    ]
    extra = int(rng.integers(3))
    if extra >= 1:
        s.turns += [
            ("patient", [(_pick(rng, nt.GH_WHEN), False)]),
            ("clinician", [(warning, True)]),
        ]
    if extra == 2:
        s.turns += [
            ("patient", [(_pick(rng, nt.CLOSINGS), False)]),
            ("clinician", [(_pick(rng, nt.CLOSING_REPLIES), False)]),
        ]
    return s


def _fact_day(
    day: date,
    free: set[date],
    labels: Sequence[str],
    said: Mapping[str, list[str]],
    rng: np.random.Generator,
) -> date | None:
    """A free day at most MAX_FACT_LAG_DAYS before the session on which the patient's
    dialogue names none of ``labels``; None if there is none (the facts are dropped)."""
    lag = int(rng.integers(MAX_FACT_LAG_DAYS + 1))
    for k in range(lag, -1, -1):
        d = day - timedelta(days=k)
        if d in free and not any(_states(said, lab, d) for lab in labels):
            return d
    return None


def _proxy_labs(labs: list[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Up to LABS_PER_SESSION labs of distinct names, led by an abnormal one when there is one."""
    abnormal = [x for x in labs if x["abnormal"]]
    chosen = [_pick(rng, abnormal or labs)]
    for i in rng.permutation(len(labs)):
        if len(chosen) >= LABS_PER_SESSION:
            break
        if labs[int(i)]["label"] not in {c["label"] for c in chosen}:
            chosen.append(labs[int(i)])
    return chosen


def _fact(s: _Session, rel: Relative, kind: str, item: Mapping[str, Any], d: date) -> dict:
    return {
        "tag": s.tag,
        "relation": rel.relation,
        "donor_id": rel.donor_id,
        "kind": kind,
        "label": item["label"],
        "value_text": item["value_text"],
        "unit": item["unit"],
        "route": item.get("route", ""),
        "date": d.isoformat(),
    }


def _proxy_session(
    slot: int,
    day: date,
    n: int,
    rel: Relative,
    profile: Mapping[str, list],
    free: set[date],
    said: Mapping[str, list[str]],
    rng: np.random.Generator,
) -> _Session:
    """A proxy consultation about ``rel``: the patient asks (no numbers), the clinician tells
    the relative's labs and a drug, each sentence naming the relative (4 or 6 turns)."""
    s = _Session("PROXY", slot, day, noise_tag("PROXY", rel.relation, n))
    pron = nt.PRONOUN[rel.relation]
    fill = dict(
        relation=rel.relation,
        pronoun=pron,
        possessive=nt.POSSESSIVE[pron],
        possessive_cap=nt.POSSESSIVE[pron].capitalize(),
    )
    ask = [(_pick(rng, nt.PROXY_ASKS).format(**fill), False)]
    if rel.condition:
        ask.append((_pick(rng, nt.PROXY_HISTORY).format(**fill, condition=rel.condition), False))
    told = [(_pick(rng, nt.PROXY_INTROS).format(**fill), False)]
    labs = _proxy_labs(profile["labs"], rng)
    lab_day = _fact_day(day, free, [x["label"] for x in labs], said, rng)
    if lab_day is not None:
        frame, item = _pick(rng, nt.PROXY_LAB_FRAMES)
        items = [item.format(label=x["label"], value=x["value_text"], unit=x["unit"]) for x in labs]
        told.append((frame.format(**fill, date=lab_day.isoformat(), items=_join(items)), True))
        s.facts += [_fact(s, rel, "lab", x, lab_day) for x in labs]
    s.turns = [
        ("patient", ask),
        ("clinician", told),
        ("patient", [(_pick(rng, nt.PROXY_MED_ASKS).format(**fill), False)]),
    ]
    med = _pick(rng, profile["meds"]) if profile["meds"] else None
    med_day = _fact_day(day, free, [med["label"]], said, rng) if med else None
    if med is not None and med_day is not None:
        item = _pick(rng, MED_ITEMS).format(
            drug=med["label"], dose=med["value_text"], unit=med["unit"], route=med["route"]
        )
        frame = _pick(rng, nt.PROXY_MED_FRAMES)
        s.turns.append(
            ("clinician", [(frame.format(**fill, items=item, date=med_day.isoformat()), True)])
        )
        s.facts.append(_fact(s, rel, "medication", med, med_day))
    else:
        s.turns.append(("clinician", [(_pick(rng, nt.PROXY_NO_MEDS).format(**fill), False)]))
    if int(rng.integers(2)):
        s.turns += [
            ("patient", [(_pick(rng, nt.PROXY_WORRY).format(**fill), False)]),
            ("clinician", [(_pick(rng, nt.PROXY_ADVICE).format(**fill), False)]),
        ]
    return s


# --- placement and assembly ----------------------------------------------------------------


def _place(
    order: list[int], free: Mapping[int, list[date]], n: int, rng: np.random.Generator
) -> list[tuple[int, date]]:
    """``n`` (slot, day) pairs: each session follows a uniformly drawn real visit that still
    has a free day; days within a slot are distinct. Chronological order."""
    taken: dict[int, int] = {}
    for _ in range(n):
        open_slots = [v for v in order if len(free[v]) > taken.get(v, 0)]
        if not open_slots:
            break
        v = _pick(rng, open_slots)
        taken[v] = taken.get(v, 0) + 1
    out = []
    for v in order:
        if taken.get(v):
            idx = sorted(int(i) for i in rng.choice(len(free[v]), size=taken[v], replace=False))
            out += [(v, free[v][i]) for i in idx]
    return out


def _plan_patient(
    sid: int,
    recs: list[dict[str, Any]],
    ratio: float,
    seed: int,
    profiles: Mapping[int, Mapping[str, list]],
) -> list[_Session]:
    """The noise sessions of one patient, in chronological order."""
    order, spans, said = _calendar(recs)
    n = math.floor(ratio * len(order) + 0.5)
    if n == 0:
        return []
    free = _free_days(order, spans)
    rels = relatives_of(sid, seed, profiles) if profiles else []
    rng = np.random.default_rng([int(seed), int(sid), _PLACE_STREAM])
    sessions = []
    for k, (slot, day) in enumerate(_place(order, free, n, rng), start=1):
        if rels and rng.random() < PROXY_SHARE:
            rel = _pick(rng, rels)
            sessions.append(
                _proxy_session(
                    slot, day, k, rel, profiles[rel.donor_id], set(free[slot]), said, rng
                )
            )
        else:
            sessions.append(_gh_session(slot, day, k, rng))
    return sessions


def _noise_rows(sid: int, s: _Session, v: int, t: int, blank: Mapping[str, Any]) -> list[dict]:
    rows = []
    for i, (speaker, sentences) in enumerate(s.turns):
        tagged = [x + (" " + format_tag([s.tag]) if tag else "") for x, tag in sentences]
        rows.append(
            {
                **blank,
                "subject_id": sid,
                "visit_idx": v,
                "turn_idx": t + i,
                "speaker": speaker,
                "text": " ".join(x for x, _ in sentences),
                "text_tagged": " ".join(tagged),
                "event_ids": [s.tag] if any(tag for _, tag in sentences) else [],
                "visit_date": s.day.isoformat(),
                "is_noise": True,
                "source_visit_idx": -1,
            }
        )
    return rows


def _assemble(
    sid: int, recs: list[dict[str, Any]], sessions: list[_Session], blank: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The extended sequence S~: real visits with the sessions after their slot, visit_idx
    0..N'-1 and turn_idx consecutive from the patient's first turn."""
    by_slot: dict[int, list[_Session]] = {}
    for s in sessions:
        by_slot.setdefault(s.slot, []).append(s)
    by_visit: dict[int, list[dict[str, Any]]] = {}
    for r in recs:
        by_visit.setdefault(int(r["visit_idx"]), []).append(r)
    out: list[dict[str, Any]] = []
    v_new, t_new = 0, int(recs[0]["turn_idx"])
    for v in sorted(by_visit):
        for r in by_visit[v]:
            out.append(
                {
                    **r,
                    "visit_idx": v_new,
                    "turn_idx": t_new,
                    "is_noise": False,
                    "source_visit_idx": v,
                }
            )
            t_new += 1
        v_new += 1
        for s in by_slot.get(v, []):
            rows = _noise_rows(sid, s, v_new, t_new, blank)
            for f in s.facts:
                f.update(subject_id=sid, visit_idx=v_new)
            out += rows
            t_new += len(rows)
            v_new += 1
    return out


# --- entry points --------------------------------------------------------------------------

NOISE_FACT_COLUMNS: tuple[str, ...] = (
    "subject_id",
    "visit_idx",
    "tag",
    "relation",
    "donor_id",
    "kind",
    "label",
    "value_text",
    "unit",
    "route",
    "date",
)


def _check_args(turns: Any, ratio: Any, seed: Any) -> None:
    if not isinstance(turns, pd.DataFrame):
        raise NoiseError(f"dialogues: expected a DataFrame of turns, got {type(turns).__name__}")
    missing = [c for c in TURN_COLUMNS if c not in turns.columns]
    if missing:
        raise NoiseError(f"dialogues: missing column(s) {', '.join(missing)}")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float | np.number):
        raise NoiseError(f"noise ratio must be a number, got {ratio!r}")
    if not math.isfinite(float(ratio)) or float(ratio) < 0:
        raise NoiseError(f"noise ratio must be finite and >= 0, got {ratio!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise NoiseError(f"noise seed must be an integer >= 0, got {seed!r}")
    if "is_noise" in turns.columns and turns["is_noise"].fillna(False).astype(bool).any():
        raise NoiseError("dialogues: already hold noise sessions (is_noise); add noise once")


def _blank(turns: pd.DataFrame) -> dict[str, Any]:
    """Values of extra columns (e.g. the injections' ``source_turn_idx``) on noise turns:
    False, -1 (not applicable) or "" by dtype, else missing."""
    out: dict[str, Any] = {}
    for c in turns.columns:
        dt = turns[c].dtype
        if pd.api.types.is_bool_dtype(dt):
            out[c] = False
        elif pd.api.types.is_integer_dtype(dt):
            out[c] = -1
        elif pd.api.types.is_string_dtype(dt) and c != "event_ids":
            out[c] = ""
        else:
            out[c] = None
    return out


def _profiles_of(donors: pd.DataFrame | None, cohort: set[int]) -> dict[int, dict]:
    if donors is None:
        return default_profiles()
    missing = [c for c in ("subject_id", "kind", "label", "value_text", "unit") if c not in donors]
    if missing:
        raise NoiseError(f"donors: missing column(s) {', '.join(missing)}")
    inside = sorted(set(donors["subject_id"].astype(int)) & cohort)
    if inside:
        raise NoiseError(
            f"donors: subject_id {inside[0]} is a patient of the dialogues; "
            "donors must come from outside the cohort"
        )
    return donor_profiles(donors)


def _noise(turns, ratio, seed, donors) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    _check_args(turns, ratio, seed)
    base = turns.drop(columns=[c for c in NOISE_COLUMNS if c in turns.columns])
    base = base.sort_values(["subject_id", "turn_idx"], kind="stable").reset_index(drop=True)
    cohort = set(base["subject_id"].astype(int))
    profiles = _profiles_of(donors, cohort) if float(ratio) > 0 else {}
    blank = _blank(base)
    rows: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    for sid, g in base.groupby("subject_id", sort=True):
        recs = g.to_dict("records")
        sessions = _plan_patient(int(sid), recs, float(ratio), int(seed), profiles)
        rows += _assemble(int(sid), recs, sessions, blank)
        facts += [f for s in sessions for f in s.facts]
    out = pd.DataFrame.from_records(rows, columns=[*base.columns, *NOISE_COLUMNS])
    for c in base.columns:
        if c != "event_ids":
            out[c] = out[c].astype(base[c].dtype)
    out["is_noise"] = out["is_noise"].astype(bool)
    out["source_visit_idx"] = out["source_visit_idx"].astype("int64")
    return out, facts


def add_noise(
    turns: pd.DataFrame, ratio: float = 1.0, seed: int = 42, *, donors: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Insert general-health and proxy noise sessions between each patient's real visits
    (MedMemoryBench §4 "Noise Augmentation"; its Mixed mode adds about 200 sessions to about 100
    real ones, a ratio of about 2: seed facts mmb_mixed_sessions and mmb_corpus).

    Args:
        turns: dialogues.parquet rows (any number of patients; extra columns such as the
            injections' are kept, with False / -1 / "" on noise turns).
        ratio: noise sessions per real visit; each patient gets ``floor(ratio x visits + 0.5)``
            sessions (fewer only if the calendar has no free day left). 0 returns the turns
            with the two added columns.
        seed: placement, session kind, topic and relative draws; the relatives themselves
            depend on (patient, seed) only, not on ``ratio``.
        donors: events-table rows of donor patients outside the cohort (default: the
            synthetic donor pool of :mod:`clinlib.data.donors`).

    Returns:
        A new DataFrame sorted by (subject_id, turn_idx): the input columns plus ``is_noise``
        (bool) and ``source_visit_idx`` (the original visit_idx; -1 for noise turns);
        ``visit_idx`` is renumbered 0..N'-1 over the extended sequence and ``turn_idx`` runs
        consecutively per patient. ``turns`` is not modified.

    Raises:
        NoiseError: a missing column, a bad ratio or seed, donors inside the cohort, or
            turns that already hold noise.
    """
    return _noise(turns, ratio, seed, donors)[0]


def noise_facts(
    turns: pd.DataFrame, ratio: float = 1.0, seed: int = 42, *, donors: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The relatives' facts :func:`add_noise` states for the same arguments: one row per
    (session, lab or drug) with the noise session's ``visit_idx`` in the extended sequence,
    its ``tag``, the relation and donor, and the stated label, value, unit, route and date
    (columns :data:`NOISE_FACT_COLUMNS`). Input to the misattributed-memory count."""
    facts = _noise(turns, ratio, seed, donors)[1]
    out = pd.DataFrame.from_records(facts, columns=list(NOISE_FACT_COLUMNS))
    return out.astype({"subject_id": "int64", "visit_idx": "int64", "donor_id": "int64"})
