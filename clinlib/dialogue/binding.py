"""Fact binding: every stated fact is checked as a (label, value, unit, date, polarity) tuple
against its event, inside the clause or sentence that states it (paper §3 "Cohort": structured
fields preserved "inside narrative turns"; Fig. 2 stage 3 verifier; Appendix C.1).

``covered_fields_verbatim`` only asks that each required string occurs somewhere in the turn
that cites the event; a turn that states several labs in one sentence (the templates do) can
then swap two labs' values and still pass. The checks here bind each value to its label:

* ``values_bound`` — in every sentence, each value of a cited event (a lab's value, a dose, a
  diagnosis or procedure code) is attached to the nearest label of a cited event inside its
  clause (else its sentence), and that label's events must explain it (value, code or
  reference bound); each cited event must be stated at least once as label + value + unit
  (+ route) in one clause, in a sentence whose date (or the turn's last date before it) is
  its own; an admission's sentence is no discharge sentence and a discharge's names the
  discharge ("discharged", "ended").
* ``polarity_kept`` — a sentence about one lab does not say the opposite of its direction
  (above/higher/elevated for a low or normal value, below/lower for a high or normal one),
  in the whole sentence or in its comparison before the template's ", which ..." explanation;
  and no sentence that names a cited fact is negated ("no", "not", "never", "no history of")
  or turns a start into a stop ("stopped", "discontinued") before that explanation; an
  admission or discharge sentence is never negated.

Clauses are split at ``; , :`` and at " and ", " but ", " while ", " whereas ", outside the
labels themselves ("Calcium, Total" stays whole) and outside numbers ("25,000 UNIT" stays whole).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from clinlib.dialogue.fields import STATEMENT_KIND, EventIndex, fmt_date, fmt_number, present
from clinlib.dialogue.matching import DATE_RE, find_spans, strip_tags, tagged_sentences
from clinlib.dialogue.turns import lab_direction

BINDING_CHECK_NAMES: tuple[str, str] = ("values_bound", "polarity_kept")
# Direction words (word-bounded, case-insensitive) for a lab's value against its range.
HIGH_CUES = re.compile(
    r"\b(?:above|higher than|over (?:the|its)|exceed(?:s|ed|ing)?|elevated|raised|high)\b", re.I
)
LOW_CUES = re.compile(
    r"\b(?:below|lower than|under (?:the|its)|falls? short|low|decreased|reduced)\b", re.I
)
NEGATION_CUES = re.compile(
    r"\b(?:no|not|never|without|den(?:y|ies|ied)|none|nor|negative for)\b|n't\b", re.I
)
STOP_CUES = re.compile(
    r"\b(?:stop(?:s|ped)?|discontinu\w*|held|ceased|withdr[ae]wn?|halted)\b", re.I
)
DISCHARGE_CUES = re.compile(r"\b(?:discharg\w*|ended|went home|died)\b", re.I)
# A unit-like word right after a number: a slash unit, a percent sign or a common unit word.
_UNIT_AFTER = re.compile(
    r"\s*(%|[A-Za-z\u00b5]+/[A-Za-z0-9]+|(?:mg|g|mcg|mEq|mmol|units?|UNIT|mL|L|IU)\b)"
)
# A comma between a digit and three more ("25,000") is a thousands separator, not a clause end.
_CLAUSE_SEP = re.compile(r"[;:]|(?<!\d),|,(?!\d{3}(?!\d))|\s(?:and|but|while|whereas)\s", re.I)
_VALUE_KINDS = ("lab", "medication", "diagnosis", "procedure")


def _anchors(sentence: str, labels: Sequence[str]) -> list[tuple[int, int, str]]:
    """Label spans (case-insensitive) in a sentence, a span inside a longer one dropped."""
    spans = [(i, j, lab.lower()) for lab in labels for i, j in find_spans(sentence, lab, True)]
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: list[tuple[int, int, str]] = []
    for s in spans:
        if out and s[0] < out[-1][1]:
            continue
        out.append(s)
    return out


def _clause_ids(sentence: str, anchors: Sequence[tuple[int, int, str]]) -> list[int]:
    """Clause number of every character (separators inside a label do not split)."""
    inside = [False] * len(sentence)
    for i, j, _ in anchors:
        for k in range(i, j):
            inside[k] = True
    ids, cur, last = [], 0, 0
    for m in _CLAUSE_SEP.finditer(sentence):
        if inside[m.start()]:
            continue
        ids += [cur] * (m.start() - last)
        cur += 1
        last = m.start()
    ids += [cur] * (len(sentence) - last)
    return ids


def _nearest(pos: tuple[int, int], anchors, clause: list[int]) -> tuple[int, int, str] | None:
    """The anchor nearest a value span, inside its clause first, else in the sentence."""

    def gap(a: tuple[int, int, str]) -> int:
        return pos[0] - a[1] if a[1] <= pos[0] else a[0] - pos[1]

    same = [a for a in anchors if clause[a[0]] == clause[pos[0]]]
    pool = same or list(anchors)
    return min(pool, key=gap) if pool else None


def _event_label(e: Mapping[str, Any]) -> str:
    return str(e.get("label") or "").strip()


def _event_value(e: Mapping[str, Any]) -> str:
    if e.get("kind") in ("diagnosis", "procedure"):
        return str(e.get("code") or "").strip()
    return str(e.get("value_text") or "").strip() if present(e.get("value_text")) else ""


def _explains(events: Sequence[Mapping[str, Any]], value: str) -> bool:
    for e in events:
        if _event_value(e) == value:
            return True
        for col in ("ref_low", "ref_high"):
            if present(e.get(col)) and fmt_number(e[col]) == value:
                return True
    return False


def _sentence_dates(text_tagged: str) -> list[tuple[str, list[str], set[str]]]:
    """(sentence, ids, its dates — else the turn's last date before it) per sentence."""
    merged: list[tuple[str, list[str]]] = []
    for s, ids in tagged_sentences(text_tagged):
        # A title ending in "]" ("... angioplasty [PTCA]") is no sentence end.
        if merged and merged[-1][0].endswith("]") and not merged[-1][1]:
            s, ids = f"{merged.pop()[0]} {s}", ids
        merged.append((s, ids))
    out: list[tuple[str, list[str], set[str]]] = []
    last: set[str] = set()
    for s, ids in merged:
        dates = set(DATE_RE.findall(s))
        if dates:
            last = dates
        out.append((s, ids, dates or last))
    return out


def _unit_follows(sentence: str, end: int, unit: str) -> bool:
    rest = sentence[end:].lstrip()
    return not unit or rest.lower().startswith(unit.lower())


def _bind_sentence(
    s: str, dates: set[str], cited: Sequence[Mapping[str, Any]], done: set[str], tid: int
) -> list[str]:
    """One sentence's binding problems; adds the ids of events stated whole to ``done``."""
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for e in cited:
        if e.get("kind") in _VALUE_KINDS and _event_label(e):
            by_label.setdefault(_event_label(e).lower(), []).append(e)
    anchors = _anchors(s, [_event_label(es[0]) for es in by_label.values()])
    if not anchors:
        return []
    clause = _clause_ids(s, anchors)
    date_spans = [m.span() for m in DATE_RE.finditer(s)]
    bad: list[str] = []
    values = {_event_value(e) for es in by_label.values() for e in es} - {""}
    found = sorted(
        ((i, j, v) for v in values for i, j in find_spans(s, v)), key=lambda x: (x[0], x[0] - x[1])
    )
    for k, (i, j, v) in enumerate(found):
        if any(a <= i < b for a, b, _ in anchors) or any(a <= i < b for a, b in date_spans):
            continue
        if any(a <= i and j <= b and (a, b) != (i, j) for a, b, _ in found[:k] + found[k + 1 :]):
            continue  # the "2" of a dose "1-2"
        near = _nearest((i, j), anchors, clause)
        if near is None or not _explains(by_label.get(near[2], []), v):
            where = repr(s[near[0] : near[1]]) if near else "no label"
            bad.append(f"turn {tid}: {v!r} is stated with {where}")
            continue
        own = [e for e in by_label[near[2]] if _event_value(e) == v]
        for e in own:
            if _stated_whole(e, s, (i, j), near, clause, dates):
                done.add(str(e["event_id"]))
        unit = _UNIT_AFTER.match(s, j)
        units = {str(e.get("unit") or "").strip().lower() for e in own} - {""}
        if own and unit and units and unit.group(1).lower() not in units:
            if not any(s[j:].lstrip().lower().startswith(u) for u in units):
                bad.append(
                    f"turn {tid}: {v!r} given in {unit.group(1)!r}, not {sorted(units)[0]!r}"
                )
    for a in anchors:  # a medication without a dose: the drug and its route in one clause
        for e in by_label.get(a[2], []):
            if e.get("kind") == "medication" and not _event_value(e):
                if _route_ok(e, s, clause, clause[a[0]]) and _date_ok(e, dates):
                    done.add(str(e["event_id"]))
    return bad


def _date_ok(e: Mapping[str, Any], dates: set[str]) -> bool:
    return not present(e.get("time")) or fmt_date(e["time"]) in dates


def _route_ok(e: Mapping[str, Any], s: str, clause: list[int], c: int) -> bool:
    route = str(e.get("route") or "").strip()
    if not route or e.get("kind") != "medication":
        return True
    return any(clause[i] == c for i, _ in find_spans(s, route))


def _stated_whole(e, s, span, anchor, clause, dates) -> bool:
    """The value sits with its own label; unit right after it (labs, doses), the route in
    the same clause, the event's date in the sentence (or carried from the turn)."""
    unit = str(e.get("unit") or "").strip() if e.get("kind") in ("lab", "medication") else ""
    c = clause[span[0]]
    return (
        _unit_follows(s, span[1], unit)
        and _route_ok(e, s, clause, c)
        and _date_ok(e, dates)
        and (e.get("kind") in ("diagnosis", "procedure") or clause[anchor[0]] == c)
    )


def _visit_events_ok(e: Mapping[str, Any], sentences) -> bool:
    """An admission or discharge: stated in a sentence with its date (and its type or
    location); an admission's sentence is no discharge sentence, a discharge's is one."""
    want = fmt_date(e["time"]) if present(e.get("time")) else ""
    code = str(e.get("code") or "").strip()
    for s, _, _ in sentences:
        if want and want not in s:
            continue
        if code and not find_spans(s, code):
            continue
        is_dis = DISCHARGE_CUES.search(s) is not None
        if is_dis == (e.get("kind") == "discharge"):
            return True
    return False


def check_binding(
    turns: Sequence[Mapping[str, Any]], events_by_id: EventIndex | Mapping[str, Mapping[str, Any]]
) -> dict[str, list[str]]:
    """``values_bound`` and ``polarity_kept`` problems of some turns.

    Args:
        turns: turn records (turn_idx, text_tagged, event_ids).
        events_by_id: the patient's events keyed by event_id (or an :class:`EventIndex`).

    Returns:
        ``{"values_bound": [...], "polarity_kept": [...]}``, empty lists when both pass.
    """
    by_id = events_by_id.by_id if isinstance(events_by_id, EventIndex) else events_by_id
    out: dict[str, list[str]] = {c: [] for c in BINDING_CHECK_NAMES}
    for t in turns:
        tid = int(t["turn_idx"])
        cited = [by_id[i] for i in t["event_ids"] if i in by_id]
        if not cited:
            continue
        sentences = _sentence_dates(str(t["text_tagged"]))
        done: set[str] = set()
        for s, _, dates in sentences:
            out["values_bound"] += _bind_sentence(s, dates, cited, done, tid)
            out["polarity_kept"] += _polarity(s, cited, tid)
        for e in cited:
            eid, kind = str(e["event_id"]), e.get("kind")
            if kind in ("admission", "discharge"):
                when = fmt_date(e["time"]) if present(e.get("time")) else None
                for s, _, _ in sentences:
                    m = NEGATION_CUES.search(s) if when and when in s else None
                    if m:
                        out["polarity_kept"].append(f"turn {tid}: {m.group(0)!r} on the {kind}")
                if not _visit_events_ok(e, sentences):
                    out["values_bound"].append(
                        f"turn {tid}: {eid} ({kind}) not stated with its date"
                    )
            elif kind in _VALUE_KINDS and eid not in done:
                out["values_bound"].append(
                    f"turn {tid}: {eid} ({_event_label(e)}) is never stated with its value, "
                    "unit and date in one clause"
                )
    return out


def _polarity(s: str, cited: Sequence[Mapping[str, Any]], tid: int) -> list[str]:
    """Direction words against a lone lab's direction; negation or stop words in a clause
    that names a cited fact."""
    labels = {_event_label(e).lower(): e for e in cited if _event_label(e)}
    anchors = _anchors(s, list(labels))
    if not anchors:
        return []
    bad = []
    masked = list(s)
    for i, j, _ in anchors:
        masked[i:j] = "#" * (j - i)
    plain = "".join(masked)
    lab_labels = {a[2] for a in anchors if labels[a[2]].get("kind") == "lab"}
    if len(lab_labels) == 1 and len({a[2] for a in anchors}) == 1:
        label = lab_labels.pop()
        dirs = {lab_direction(e) for e in cited if _event_label(e).lower() == label}
        # the comparison itself, before the template's ", which ..." explanation
        head = plain.split(", which", 1)[0]
        for part in (plain, head):
            high, low = HIGH_CUES.search(part), LOW_CUES.search(part)
            if dirs == {"high"} and low and not high or dirs == {"low"} and high and not low:
                bad.append(f"turn {tid}: {label} is {next(iter(dirs))} but the text says otherwise")
                break
            if dirs == {None} and (high or low):
                bad.append(f"turn {tid}: {label} is within range but called {(high or low)[0]!r}")
                break
    head = plain.split(", which", 1)[0]  # the fact itself, before any explanation
    for cue in (NEGATION_CUES, STOP_CUES):
        for m in cue.finditer(head):
            bad.append(f"turn {tid}: {m.group(0)!r} in a sentence stating a cited fact")
    return bad


NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


def patient_number_problems(
    turns: Sequence[Mapping[str, Any]], by_id: Mapping[str, Mapping[str, Any]] | None = None
) -> list[str]:
    """``patient_lines_no_numbers``: the rewrite prompt's rule 5 — no digit in a patient
    line (the templates never give the patient one). The one exception is a number the turn's
    own cited patient statement states (``by_id``: event id -> event; an injected constraint
    such as a monthly cost limit is the patient's own words, MedMemoryBench §4 "Data
    Construction Pipeline")."""
    bad = []
    for t in turns:
        if str(t.get("speaker")) != "patient":
            continue
        allowed = _stated_numbers(t, by_id or {})
        for m in NUMBER_RE.finditer(strip_tags(str(t["text_tagged"]))):
            if m.group(0) not in allowed:
                bad.append(f"turn {t['turn_idx']}: patient line holds {m.group(0)!r}")
                break
    return bad


def _stated_numbers(turn: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The numbers the turn's cited patient statements (kind ``statement``) state verbatim."""
    ids = turn.get("event_ids")
    cited = [by_id.get(str(e)) for e in ([] if ids is None else list(ids))]
    labels = [str(e.get("label", "")) for e in cited if e and e.get("kind") == STATEMENT_KIND]
    return {m.group(0) for label in labels for m in NUMBER_RE.finditer(label)}
