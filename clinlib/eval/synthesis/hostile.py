"""Hostile writers: rewriters that make exactly one clinical error, to show each verifier check
refusing the error it names (paper §3 "Cohort" and Fig. 2 stage 3: LLM text kept only when
verified; Appendix C.1).

Each writer takes a visit's draft (the tagged template lines a real rewriter receives) and the
patient's events, and returns the draft with one error, or None when the visit holds nothing
it can corrupt (no two labs in one sentence, no abnormal value, ...). They are deterministic
string rules, not language models. :func:`refusal_table` runs every writer over a corpus's
visits through :func:`clinlib.dialogue.rewrite.try_rewrites` (the acceptance path of
``clintrace dialogues --rewrite``) and counts the visits refused by the expected check;
docs/bench-verifier.md holds its table on the quick profile.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from clinlib.dialogue.conditions import condition_stems
from clinlib.dialogue.fields import group_records, present
from clinlib.dialogue.lexicon import record_text
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher, find_spans, tagged_sentences
from clinlib.dialogue.rewrite import try_rewrites

Events = Mapping[str, Mapping[str, Any]]
_ISO = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _lines(draft: str) -> list[str]:
    return draft.split("\n")


def _kind_sentence(draft: str, events: Events, kind: str, n: int = 1):
    """(line index, tagged chunk, its events) of the first sentence citing >= n events of a
    kind with distinct values."""
    for k, line in enumerate(_lines(draft)):
        for _, ids in tagged_sentences(line.partition(": ")[2]):
            evs = [events[i] for i in ids if i in events and events[i].get("kind") == kind]
            vals = {str(e.get("value_text") or e.get("code")) for e in evs}
            if len(evs) >= n and len(vals) >= n:
                return k, evs
    return None


def _replace_line(draft: str, k: int, fn: Callable[[str], str | None]) -> str | None:
    lines = _lines(draft)
    new = fn(lines[k])
    if new is None or new == lines[k]:
        return None
    lines[k] = new
    return "\n".join(lines)


def _value_span(line: str, e: Mapping[str, Any], field: str) -> tuple[int, int] | None:
    """The first occurrence of an event's value (or code) after its label in a line."""
    lab = find_spans(line, str(e["label"]), True)
    if not lab:
        return None
    for i, j in find_spans(line, str(e[field])):
        if i >= lab[0][1]:
            return i, j
    return None


def _swap(draft: str, events: Events, kind: str, field: str) -> str | None:
    found = _kind_sentence(draft, events, kind, 2)
    if not found:
        return None
    k, evs = found
    a, b = next(((x, y) for x in evs for y in evs if str(x[field]) != str(y[field])), (None, None))

    def fn(line: str) -> str | None:
        sa, sb = _value_span(line, a, field), _value_span(line, b, field)
        if not sa or not sb or sa[0] > sb[0]:
            return None
        va, vb = line[sa[0] : sa[1]], line[sb[0] : sb[1]]
        return line[: sa[0]] + vb + line[sa[1] : sb[0]] + va + line[sb[1] :]

    return _replace_line(draft, k, fn)


def swap_lab_values(draft: str, events: Events) -> str | None:
    """Two labs of one sentence exchange values ("Creatinine 14 mg/dL and Urea Nitrogen 1.1")."""
    return _swap(draft, events, "lab", "value_text")


def swap_diagnosis_codes(draft: str, events: Events) -> str | None:
    """Two diagnoses of one sentence exchange codes."""
    return _swap(draft, events, "diagnosis", "code")


def _first_sub(draft: str, pairs: tuple[tuple[str, str], ...], speaker: str = "Clinician"):
    for k, line in enumerate(_lines(draft)):
        if not line.startswith(speaker + ":"):
            continue
        for old, new in pairs:
            m = re.search(rf"\b{old}\b", line)
            if m and "[" in line[m.end() :]:
                return _replace_line(
                    draft, k, lambda s, m=m, new=new: s[: m.start()] + new + s[m.end() :]
                )
    return None


FLIPS = (
    ("above", "below"),
    ("below", "above"),
    ("higher than", "lower than"),
    ("lower than", "higher than"),
    ("is over", "is under"),
    ("is under", "is over"),
    ("exceeds", "falls short of"),
    ("falls short of", "exceeds"),
)


def flip_high_low(draft: str, events: Events) -> str | None:
    """A high value called low (or the reverse)."""
    return _first_sub(draft, FLIPS)


NEGATIONS = (
    ("we started", "we never started"),
    ("you received", "you did not receive"),
    ("the team prescribed", "the team did not prescribe"),
    ("included", "did not include"),
    ("We began", "We did not begin"),
    ("we documented", "we did not document"),
    ("were", "were not"),
    ("include", "do not include"),
    ("lists", "does not list"),
    ("we performed", "we never performed"),
    ("you underwent", "you never underwent"),
)


def negate_fact(draft: str, events: Events) -> str | None:
    """A stated medication, diagnosis or procedure negated ("we did not start ...")."""
    return _first_sub(draft, NEGATIONS)


STOPS = (
    ("we started", "we stopped"),
    ("We began", "We stopped"),
    ("you received", "you stopped"),
    ("the team prescribed", "the team discontinued"),
)


def start_to_stop(draft: str, events: Events) -> str | None:
    """A started medication told as stopped."""
    return _first_sub(draft, STOPS)


def _append_patient(draft: str, sentence: str) -> str | None:
    for k, line in enumerate(_lines(draft)):
        if line.startswith("Patient:"):
            return _replace_line(draft, k, lambda s: f"{s} {sentence}")
    return None


def invent_allergy(draft: str, events: Events) -> str | None:
    """The patient adds an allergy the record does not hold."""
    if "penicillin" in record_text(events.values()):
        return None
    return _append_patient(draft, "I am also allergic to penicillin.")


def invent_drug(draft: str, events: Events) -> str | None:
    """The clinician names a drug the record does not hold."""
    if "codeine" in record_text(events.values()):
        return None
    return _add_clinician(draft, "We also gave you codeine.")


# Conditions a writer invents (the first one the record lacks) or restates (the faithful
# control: the first one the record holds), clinlib.dialogue.conditions.CONDITIONS names.
INVENTED_CONDITIONS = ("diabetes", "heart failure", "pneumonia", "asthma", "epilepsy")
OWN_CONDITIONS = (
    "hypertension",
    "diabetes",
    "heart failure",
    "chronic kidney disease",
    "atrial fibrillation",
    "pneumonia",
    "anemia",
    "obesity",
    "depression",
)


def _add_clinician(draft: str, sentence: str) -> str | None:
    for k, line in enumerate(_lines(draft)):
        if line.startswith("Clinician:") and "[" in line:
            return _replace_line(draft, k, lambda s: f"{s} {sentence}")
    return None


def invent_condition(draft: str, events: Events) -> str | None:
    """The clinician names a diagnosis the record does not hold, without its code."""
    record = record_text(events.values())
    name = next((n for n in INVENTED_CONDITIONS if not _own(n, record)), None)
    return _add_clinician(draft, f"We also found that you have {name}.") if name else None


def restate_own_condition(draft: str, events: Events) -> str | None:
    """Faithful control: the clinician names one of the patient's own diagnoses, no code."""
    record = record_text(events.values())
    name = next((n for n in OWN_CONDITIONS if _own(n, record)), None)
    return _add_clinician(draft, f"We also talked about your {name}.") if name else None


def _own(name: str, record: str) -> bool:
    return any(s in record for s in condition_stems(name))


def number_in_patient_line(draft: str, events: Events) -> str | None:
    """A patient line with a number (the prompt's rule 5)."""
    return _append_patient(draft, "I lost 5 pounds.")


def shift_date(draft: str, events: Events) -> str | None:
    """A stated fact's date moved by one day."""
    for k, line in enumerate(_lines(draft)):
        m = _ISO.search(line)
        if m and line.startswith("Clinician:"):
            day = (pd.Timestamp(m.group(1)) + pd.Timedelta(days=1)).strftime("%Y-%m-%d")
            return _replace_line(
                draft, k, lambda s, m=m, day=day: s[: m.start()] + day + s[m.end() :]
            )
    return None


def change_unit(draft: str, events: Events) -> str | None:
    """A lab value given in another unit (same number)."""
    found = _kind_sentence(draft, events, "lab")
    if not found:
        return None
    k, evs = found
    e = evs[0]
    unit = str(e.get("unit") or "")
    other = "mmol/L" if unit != "mmol/L" else "mg/dL"
    old = f"{e['value_text']} {unit}"
    return _replace_line(draft, k, lambda s: s.replace(old, f"{e['value_text']} {other}", 1))


def admitted_to_discharged(draft: str, events: Events) -> str | None:
    """The admission told as a discharge."""
    return _first_sub(
        draft, (("You were admitted", "You were discharged"), ("admission on", "discharge on"))
    )


@dataclass(frozen=True)
class HostileWriter:
    """A writer, the error it makes and the check that must refuse it."""

    name: str
    error: str
    check: str
    fn: Callable[[str, Events], str | None]


HOSTILE_WRITERS: tuple[HostileWriter, ...] = (
    HostileWriter(
        "swap_lab_values", "two labs of one sentence swap values", "values_bound", swap_lab_values
    ),
    HostileWriter(
        "swap_diagnosis_codes",
        "two diagnoses of one sentence swap codes",
        "values_bound",
        swap_diagnosis_codes,
    ),
    HostileWriter("change_unit", "a lab value in another unit", "values_bound", change_unit),
    HostileWriter("shift_date", "a fact's date moved by one day", "values_bound", shift_date),
    HostileWriter(
        "admitted_to_discharged",
        "the admission told as a discharge",
        "values_bound",
        admitted_to_discharged,
    ),
    HostileWriter(
        "flip_high_low", "above/below (higher/lower) flipped", "polarity_kept", flip_high_low
    ),
    HostileWriter("negate_fact", "a stated fact negated", "polarity_kept", negate_fact),
    HostileWriter(
        "start_to_stop", "a started drug told as stopped", "polarity_kept", start_to_stop
    ),
    HostileWriter(
        "invent_allergy",
        "'I am also allergic to penicillin.'",
        "no_invented_entities",
        invent_allergy,
    ),
    HostileWriter(
        "invent_drug", "'We also gave you codeine.'", "no_invented_entities", invent_drug
    ),
    HostileWriter(
        "invent_condition",
        "'We also found that you have diabetes.' (no code)",
        "no_invented_conditions",
        invent_condition,
    ),
    HostileWriter(
        "number_in_patient_line",
        "'I lost 5 pounds.' in a patient line",
        "patient_lines_no_numbers",
        number_in_patient_line,
    ),
)


# Faithful controls: the same acceptance path must keep them (check "" = nothing to refuse).
CONTROL_WRITERS: tuple[HostileWriter, ...] = (
    HostileWriter(
        "restate_own_condition",
        "'We also talked about your hypertension.' (the patient's own diagnosis, no code)",
        "",
        restate_own_condition,
    ),
)


@dataclass
class _Rewriter:
    fn: Callable[[str, Events], str | None]
    events: Events
    applied: bool = False

    def rewrite(self, draft: str, required: list[str]) -> str:
        out = self.fn(draft, self.events)
        self.applied = out is not None
        return draft if out is None else out


def run_writer(
    writer: HostileWriter,
    turns: list[dict[str, Any]],
    v: int,
    events_by_id: Events,
    missed: list[str],
    drugs: DrugMatcher,
) -> dict[str, Any] | None:
    """One visit through one hostile writer: None when the writer had nothing to corrupt,
    else the visit's rewrite record (outcome, check, backbone)."""
    rw = _Rewriter(writer.fn, events_by_id)
    recs, row = try_rewrites([(writer.name, rw)], turns, v, events_by_id, missed, drugs)
    return row if rw.applied else None


def refusal_table(
    dialogues: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    writers: tuple[HostileWriter, ...] = HOSTILE_WRITERS,
) -> pd.DataFrame:
    """Every hostile writer over every visit of a corpus: visits it corrupted (N), refused
    by the expected check (n), refused by another check, accepted.

    Args:
        dialogues / events / coverage: a built corpus's artifacts (template text).
        writers: the writers to run (:data:`CONTROL_WRITERS` for the faithful controls).
    """
    meds = sorted(set(events.loc[events["kind"] == "medication", "label"].dropna()))
    drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    ev_by = group_records(events)
    cov_by = group_records(coverage)
    counts = {w.name: [0, 0, 0, 0] for w in writers}
    for sid, turns in group_records(dialogues).items():
        by_id = {str(e["event_id"]): e for e in ev_by.get(sid, [])}
        missed = [str(c["event_id"]) for c in cov_by.get(sid, []) if c["status"] == "missed"]
        by_visit: dict[int, list[dict[str, Any]]] = {}
        for t in sorted(turns, key=lambda r: int(r["turn_idx"])):
            by_visit.setdefault(int(t["visit_idx"]), []).append(
                dict(t, event_ids=list(t["event_ids"]))
            )
        for v, vt in by_visit.items():
            vt = [dict(t, turn_idx=i) for i, t in enumerate(vt)]
            miss_v = [
                m
                for m in missed
                if present(by_id.get(m, {}).get("visit_idx")) and int(by_id[m]["visit_idx"]) == v
            ]
            for w in writers:
                row = run_writer(w, vt, v, by_id, miss_v, drugs)
                if row is None:
                    continue
                c = counts[w.name]
                c[0] += 1
                c[1] += row["outcome"] == "template" and row["check"] == w.check
                c[2] += row["outcome"] == "template" and row["check"] != w.check
                c[3] += row["outcome"] != "template"
    rows = [
        dict(
            writer=w.name,
            error=w.error,
            check=w.check,
            n_visits=counts[w.name][0],
            refused_by_check=counts[w.name][1],
            refused_other=counts[w.name][2],
            accepted=counts[w.name][3],
        )
        for w in writers
    ]
    return pd.DataFrame(rows)
