"""The template turns of one visit (paper §3 "Cohort": structured fields "inside narrative
turns"; Fig. 2 stage 3; docs/design.md "Layout").

The patient opens with symptoms consistent with the visit's diagnoses and asks questions, never
with a number; the clinician states the admission, each day's labs, medications, procedures,
diagnoses and the discharge with their structured fields verbatim, each fact-bearing sentence
followed by its event ids. Phrasings (:mod:`clinlib.dialogue.templates`) are chosen by a hash of
(seed, patient, visit, slot).

The clinician explains the first abnormal value of each lab and direction in a visit and notes
repeats briefly (at most :data:`MAX_REACTIONS` per lab day), which keeps dialogues compact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clinlib.data.vocab import EVENT_KINDS, LAB_PANEL
from clinlib.dialogue.fields import fmt_date, fmt_number, present
from clinlib.dialogue.matching import format_tag
from clinlib.dialogue.selection import condition_of, lab_key, natural_key, stable_hash
from clinlib.dialogue.templates import (
    ADMISSION_FRAMES,
    ALL_NORMAL,
    ASK_DIAGNOSES,
    ASK_DISCHARGE,
    ASK_LABS_FIRST,
    ASK_LABS_LATER,
    ASK_MEDS,
    ASK_PROCEDURES,
    CLOSINGS,
    DIAGNOSIS_FRAMES,
    DIAGNOSIS_MORE_FRAMES,
    DISCHARGE_FRAMES,
    DISCHARGE_NEUTRAL_FRAMES,
    DISCHARGE_NO_LOCATION,
    FLAGGED_FRAMES,
    GREETINGS_FIRST,
    GREETINGS_LATER,
    HIGH_FRAMES,
    LAB_FRAMES,
    LAB_MEANING,
    LAB_MORE_FRAMES,
    LOW_FRAMES,
    MEANING_DEFAULT,
    MED_FRAMES,
    MED_ITEM_NAME_ONLY,
    MED_ITEM_NO_ROUTE,
    MED_ITEMS,
    MED_ITEMS_NO_DOSE,
    NEUTRAL_LOCATIONS,
    NO_FACTS,
    OPENERS_FIRST,
    OPENERS_LATER,
    OTHERS_WATCH,
    PROCEDURE_FRAMES,
    RANGE_BOTH,
    RANGE_HIGH_ONLY,
    RANGE_LOW_ONLY,
    SOME_NORMAL,
    STILL_FRAMES,
    STILL_STATE,
    SYMPTOM_LEADS,
    SYMPTOMS,
    WORRY,
)

LAB_CHUNK = 5
# The clinician explains the first abnormal value of each lab and direction in a visit and
# notes a repeat briefly, at most MAX_REACTIONS abnormal values per lab day (keeps length down).
MAX_REACTIONS = 2
MED_CHUNK = 2
DX_CHUNK = 3
_PANEL_ORDER = {lab.key: i for i, lab in enumerate(LAB_PANEL)}


def _pick(options: Sequence[Any], seed: int, *parts: object) -> Any:
    return options[stable_hash(seed, *parts) % len(options)]


def _sentence(text: str) -> str:
    # A verbatim field ending in "." (admission type "EW EMER.") already closes the sentence.
    return text[:-1] if text.endswith("..") else text


_ONES = (
    "",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}


def ordinal_word(n: int) -> str:
    """``3 -> "third"``, ``21 -> "twenty-first"`` (1..99); ``"next"`` beyond.

    Visit ordinals are words so that no digit in a turn escapes the hallucination check.
    """
    if not 1 <= n <= 99:
        return "next"
    tens, ones = divmod(n, 10)
    if n < 20:
        word = _ONES[n]
        return _ORDINAL_IRREGULAR.get(word, word + "th")
    if ones == 0:
        return _TENS[tens][:-1] + "ieth"
    last = _ONES[ones]
    return f"{_TENS[tens]}-{_ORDINAL_IRREGULAR.get(last, last + 'th')}"


def _join(items: Sequence[str], sep: str = ", ") -> str:
    if len(items) <= 1:
        return "".join(items)
    return sep.join(items[:-1]) + (f"{sep}and " if sep != ", " else " and ") + items[-1]


def _chunks(seq: Sequence[Any], n: int) -> list[Sequence[Any]]:
    return [seq[i : i + n] for i in range(0, len(seq), n)]


def _med_item(e: Mapping[str, Any], p, day: str, c_i: int) -> str:
    """One medication as told: drug, dose, unit and route as recorded ("1-2" stays a range);
    without a dose just the drug and route, so a sentence says it was started."""
    route = present(e.get("route"))
    if present(e.get("value_text")):
        fmt = p(MED_ITEMS, "med_item", day, c_i) if route else MED_ITEM_NO_ROUTE
    else:
        fmt = p(MED_ITEMS_NO_DOSE, "med_item", day, c_i) if route else MED_ITEM_NAME_ONLY
    return fmt.format(drug=e["label"], dose=e["value_text"], unit=e["unit"], route=e.get("route"))


# --- sentence builders ---------------------------------------------------------------------


def _lab_range(e: Mapping[str, Any], seed: int, key: tuple) -> str | None:
    lo, hi, unit = e.get("ref_low"), e.get("ref_high"), e["unit"]
    if present(lo) and present(hi):
        frame = _pick(RANGE_BOTH, seed, *key, "range")
        return frame.format(lo=fmt_number(lo), hi=fmt_number(hi), unit=unit)
    if present(hi):
        return RANGE_HIGH_ONLY[0].format(hi=fmt_number(hi), unit=unit)
    if present(lo):
        return RANGE_LOW_ONLY[0].format(lo=fmt_number(lo), unit=unit)
    return None


def lab_direction(e: Mapping[str, Any]) -> str | None:
    """``high``/``low`` against the event's own reference range; ``flagged`` when the lab
    marked it abnormal without a range that says which way; None when normal."""
    val, lo, hi = e.get("value"), e.get("ref_low"), e.get("ref_high")
    if present(val):
        if present(hi) and float(val) > float(hi):
            return "high"
        if present(lo) and float(val) < float(lo):
            return "low"
    return "flagged" if e.get("flag") == "abnormal" else None


def _lab_reaction(e: Mapping[str, Any], direction: str, seed: int, key: tuple) -> str:
    lk = lab_key(e) or ""
    rng = _lab_range(e, seed, key)
    if direction == "flagged" or rng is None:
        meanings = LAB_MEANING.get(lk, {}).get("high" if direction == "flagged" else direction)
        frame = _pick(FLAGGED_FRAMES, seed, *key, "frame")
    else:
        meanings = LAB_MEANING.get(lk, {}).get(direction)
        frame = _pick(HIGH_FRAMES if direction == "high" else LOW_FRAMES, seed, *key, "frame")
    meaning = _pick(meanings or MEANING_DEFAULT, seed, *key, "meaning")
    return frame.format(
        label=e["label"], value=e["value_text"], unit=e["unit"], range=rng, meaning=meaning
    )


def _symptom_sentence(dx: Sequence[Mapping[str, Any]], seed: int, key: tuple) -> str:
    conds: list[str] = []
    for e in dx:
        c = condition_of(str(e["code"]))
        if c and c not in conds:
            conds.append(c)
    conds = conds[:2] or ["generic"]
    phrases = [_pick(SYMPTOMS[c], seed, *key, "symptom", c) for c in conds]
    lead = _pick(SYMPTOM_LEADS, seed, *key, "lead")
    return lead.format(s=" and ".join(phrases))


@dataclass
class _Turn:
    speaker: str
    sentences: list[tuple[str, list[str]]]

    def tagged(self) -> str:
        return " ".join(s + (" " + format_tag(ids) if ids else "") for s, ids in self.sentences)

    def plain(self) -> str:
        return " ".join(s for s, _ in self.sentences)

    def ids(self) -> list[str]:
        out: dict[str, None] = {}
        for _, ids in self.sentences:
            for i in ids:
                out.setdefault(i, None)
        return list(out)


@dataclass
class _Visit:
    """A visit's turns as they are written, with the state one section hands the next."""

    seed: int
    key: tuple[int, int]  # (subject_id, visit_idx): every template choice hashes it
    terse: bool
    turns: list[_Turn] = field(default_factory=list)
    worried: bool = False  # the clinician just reacted to a result: the patient worries

    def pick(self, options: Sequence[Any], *parts: object) -> Any:
        return _pick(options, self.seed, *self.key, *parts)

    def ask(self, text: str, slot: str) -> None:
        """The patient's question (after a worried remark if the last answer called for one)."""
        self.turns.append(_patient_turn(text, self.worried, self.seed, self.key, slot))
        self.worried = False

    def say(self, sentences: list[tuple[str, list[str]]]) -> None:
        self.turns.append(_Turn("clinician", sentences))


def visit_turns(
    sid: int,
    v: int,
    stated: Sequence[Mapping[str, Any]],
    diagnoses: Sequence[Mapping[str, Any]],
    seed: int,
    terse: bool = False,
) -> list[_Turn]:
    """Template turns of one visit: the patient opens with symptoms; the clinician states the
    admission, each day's labs (reacting to abnormal values), medications, procedures,
    diagnoses and the discharge, each answering a patient question. ``terse`` (a visit short
    of time, clinlib.dialogue.budget.TERSE_SHARE) leaves out the small talk: symptoms, greeting,
    worries and the closing."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {k: [] for k in EVENT_KINDS}
    for e in stated:
        by_kind[e["kind"]].append(e)
    w = _Visit(seed, (sid, v), terse)
    _open_visit(w, v, by_kind["admission"], diagnoses)
    _tell_labs(w, by_kind["lab"])
    if by_kind["medication"]:
        _tell_medications(w, by_kind["medication"])
    if by_kind["procedure"]:
        _tell_procedures(w, by_kind["procedure"])
    if by_kind["diagnosis"]:
        _tell_diagnoses(w, by_kind["diagnosis"])
    died = _tell_discharge(w, by_kind["discharge"]) if by_kind["discharge"] else False
    if len(w.turns) == 2 and not any(ids for _, ids in w.turns[1].sentences):
        w.turns[1].sentences.append((w.pick(NO_FACTS, "nofacts"), []))
    if not died and not terse:
        w.ask(w.pick(CLOSINGS, "closing"), "closing")
    return w.turns


def _open_visit(
    w: _Visit, v: int, admissions: list[Mapping[str, Any]], diagnoses: Sequence[Mapping[str, Any]]
) -> None:
    """The patient's opener (with symptoms unless terse); the clinician's greeting (left out
    when terse and an admission is told) and the admission."""
    opener = w.pick(OPENERS_FIRST if v == 0 else OPENERS_LATER, "opener")
    symptoms = [] if w.terse else [(_symptom_sentence(diagnoses, w.seed, w.key), [])]
    w.turns.append(_Turn("patient", [(opener, []), *symptoms]))
    greet = w.pick(GREETINGS_FIRST, "greet") if v == 0 else w.pick(GREETINGS_LATER, "greet")
    clinician = [(greet.format(ordinal=ordinal_word(v + 1)), [])]
    if w.terse and admissions:
        clinician = []
    for e in admissions:
        s = w.pick(ADMISSION_FRAMES, "adm").format(date=fmt_date(e["time"]), code=e["code"])
        s = _sentence(s)
        clinician.append((s, [e["event_id"]]))
    w.say(clinician)


def _tell_labs(w: _Visit, labs: list[Mapping[str, Any]]) -> None:
    """One question and answer per lab day; the patient worries after a reaction."""
    reacted: set[tuple[str | None, str]] = set()  # react once per (lab, direction) a visit
    labs_by_day: dict[str, list[Mapping[str, Any]]] = {}
    for e in labs:
        labs_by_day.setdefault(fmt_date(e["time"]), []).append(e)
    for d_i, day in enumerate(sorted(labs_by_day)):
        day_labs = sorted(
            labs_by_day[day],
            key=lambda e: (_PANEL_ORDER.get(lab_key(e), 99), natural_key(str(e["event_id"]))),
        )
        w.ask(w.pick(ASK_LABS_FIRST if d_i == 0 else ASK_LABS_LATER, "ask_labs", day), day)
        sentences, n_abnormal, n_said = _lab_sentences(w, day, day_labs, reacted)
        if n_abnormal == 0:
            sentences.append((w.pick(ALL_NORMAL, "normal", day), []))
        elif n_abnormal > n_said:
            sentences.append((w.pick(OTHERS_WATCH, "normal", day), []))
        elif n_abnormal < len(day_labs):
            sentences.append((w.pick(SOME_NORMAL, "normal", day), []))
        w.say(sentences)
        w.worried = n_said > 0 and not w.terse


def _lab_sentences(
    w: _Visit, day: str, labs: list[Mapping[str, Any]], reacted: set[tuple[str | None, str]]
) -> tuple[list[tuple[str, list[str]]], int, int]:
    """A lab day's values in chunks, each chunk followed by reactions to its abnormal values
    (at most :data:`MAX_REACTIONS` a day). Returns (sentences, abnormal values, reactions)."""
    sentences: list[tuple[str, list[str]]] = []
    n_abnormal = n_said = 0
    for c_i, chunk in enumerate(_chunks(labs, LAB_CHUNK)):
        frame, item = w.pick(LAB_FRAMES if c_i == 0 else LAB_MORE_FRAMES, "lab", day, c_i)
        items = [
            item.format(label=e["label"], value=e["value_text"], unit=e["unit"]) for e in chunk
        ]
        sentences.append(
            (frame.format(date=day, items=_join(items)), [e["event_id"] for e in chunk])
        )
        for e in chunk:
            direction = lab_direction(e)
            if not direction:
                continue
            n_abnormal += 1
            if n_said >= MAX_REACTIONS:
                continue
            n_said += 1
            sentences.append((_react(w, e, direction, reacted), [e["event_id"]]))
    return sentences, n_abnormal, n_said


def _react(
    w: _Visit, e: Mapping[str, Any], direction: str, reacted: set[tuple[str | None, str]]
) -> str:
    """The first abnormal value of a lab and direction is explained; a repeat noted briefly."""
    eid = e["event_id"]
    if (lab_key(e), direction) in reacted:
        still = w.pick(STILL_FRAMES, "still", eid)
        return still.format(label=e["label"], state=STILL_STATE[direction])
    reacted.add((lab_key(e), direction))
    return _lab_reaction(e, direction, w.seed, (*w.key, eid))


def _tell_medications(w: _Visit, meds: list[Mapping[str, Any]]) -> None:
    w.ask(w.pick(ASK_MEDS, "ask_meds"), "meds")
    meds_by_day: dict[str, list[Mapping[str, Any]]] = {}
    for e in meds:
        meds_by_day.setdefault(fmt_date(e["time"]), []).append(e)
    sentences = []
    for day in sorted(meds_by_day):
        day_meds = sorted(
            meds_by_day[day],
            key=lambda e: (str(e["label"]).lower(), natural_key(str(e["event_id"]))),
        )
        for c_i, chunk in enumerate(_chunks(day_meds, MED_CHUNK)):
            items = [_med_item(e, w.pick, day, c_i) for e in chunk]
            frame = w.pick(MED_FRAMES, "med", day, c_i)
            sentences.append(
                (frame.format(date=day, items=_join(items)), [e["event_id"] for e in chunk])
            )
    w.say(sentences)


def _tell_procedures(w: _Visit, procedures: list[Mapping[str, Any]]) -> None:
    w.ask(w.pick(ASK_PROCEDURES, "ask_px"), "px")
    pxs = sorted(procedures, key=lambda e: (e["time"], natural_key(e["event_id"])))
    w.say(
        [
            (
                w.pick(PROCEDURE_FRAMES, "px", e["event_id"]).format(
                    date=fmt_date(e["time"]), title=e["label"], code=e["code"]
                ),
                [e["event_id"]],
            )
            for e in pxs
        ]
    )


def _tell_diagnoses(w: _Visit, diagnoses: list[Mapping[str, Any]]) -> None:
    w.ask(w.pick(ASK_DIAGNOSES, "ask_dx"), "dx")
    dx_by_day: dict[str, list[Mapping[str, Any]]] = {}
    for e in diagnoses:
        dx_by_day.setdefault(fmt_date(e["time"]), []).append(e)
    sentences: list[tuple[str, list[str]]] = []
    for day in sorted(dx_by_day):
        dxs = sorted(dx_by_day[day], key=lambda e: natural_key(str(e["event_id"])))
        for chunk in _chunks(dxs, DX_CHUNK):
            frames = DIAGNOSIS_MORE_FRAMES if sentences else DIAGNOSIS_FRAMES
            frame = w.pick(frames, "dx", chunk[0]["event_id"])
            items = [f"{e['label']} ({e['code']})" for e in chunk]
            sentences.append(
                (frame.format(date=day, items=_join(items, "; ")), [e["event_id"] for e in chunk])
            )
    w.say(sentences)


def _tell_discharge(w: _Visit, discharges: list[Mapping[str, Any]]) -> bool:
    """The discharge; True if the patient died or went to hospice (no cheerful frame, no
    closing remark)."""
    w.ask(w.pick(ASK_DISCHARGE, "ask_dis"), "dis")
    died = False
    sentences = []
    for e in discharges:
        date = fmt_date(e["time"])
        loc = e.get("code")
        if not present(loc):
            s = w.pick(DISCHARGE_NO_LOCATION, "dis").format(date=date)
        else:
            died = died or str(loc).strip().upper() in NEUTRAL_LOCATIONS
            frames = DISCHARGE_NEUTRAL_FRAMES if died else DISCHARGE_FRAMES
            s = _sentence(w.pick(frames, "dis").format(date=date, code=loc))
        sentences.append((s, [e["event_id"]]))
    w.say(sentences)
    return died


def _patient_turn(text: str, worried: bool, seed: int, key: tuple, slot: str) -> _Turn:
    sentences = [(_pick(WORRY, seed, *key, "worry", slot), [])] if worried else []
    return _Turn("patient", [*sentences, (text, [])])


# --- turn records ----------------------------------------------------------------------------


def _as_records(sid: int, v: int, vturns: list[_Turn]) -> list[dict[str, Any]]:
    return [
        dict(
            turn_idx=i,
            visit_idx=v,
            speaker=t.speaker,
            text=t.plain(),
            text_tagged=t.tagged(),
            event_ids=t.ids(),
        )
        for i, t in enumerate(vturns)
    ]


def visit_records(
    sid: int, v: int, dx: list[Mapping[str, Any]], seed: int, stated: list, terse: bool
) -> list[dict[str, Any]]:
    """Turn records of one visit (turn_idx counted within the visit) from its stated events."""
    return _as_records(sid, v, visit_turns(sid, v, stated, dx, seed, terse))
