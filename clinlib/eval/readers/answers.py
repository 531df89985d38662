"""The offline readers' answering rules per task, over a parsed record and question (paper §3
"Task suite"; §5.4 abstention (T9): ``eager=True`` guesses where the reference reader
abstains; gold rules from :mod:`clinlib.tasks.rules`).

Each ``_answer_*`` returns the answer text in the question's requested format, or None when
the record does not state the fact (the reference reader then abstains).
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from clinlib.data.vocab import Lab
from clinlib.eval.readers.prompt import (
    DATE_RE,
    TAG_RE,
    LabMention,
    Question,
    Record,
    panel_lab,
    parse_day,
    patient_sections,
    sentence_bounds,
)
from clinlib.tasks.rules import (
    MODERATE_REL,
    OPTION_LETTERS,
    SIMILAR_REL,
    STABLE_REL,
    STRONG_REL,
    T4_DIRECTION,
    T4_EVIDENCE,
    T8_MAX_AFTER_DAYS,
    T8_MAX_BEFORE_DAYS,
    T8_MIN_AFTER_DAYS,
)

# When no header gives an encounter's span, facts dated within this many days of its start
# are read as belonging to it (the paper's stays are short; memories keep only dates).
HEADERLESS_ENCOUNTER_DAYS = 30
# Emergency-department labs are drawn the day before the admission they belong to.
ED_LEAD_DAYS = 1
_CODE_RE = re.compile(r"\((?:dx\s+)?([A-Z]?\d[0-9A-Z]{1,6}|[A-Z]\d{2}[0-9A-Z]{0,5})(?=[;)])")
_NEGATION_RE = re.compile(
    r"\b(?:never|not|no|did not|didn't|denies|denied|was not|is not|without)\b", re.IGNORECASE
)

# --------------------------------------------------------------------------- rules


def trend_answer(first: float, last: float) -> str:
    """T2 trend rule (clinlib.tasks.rules): direction;magnitude of r = (last-first)/|first|."""
    if first == 0:
        return (
            "stable;none" if last == 0 else ("increased;strong" if last > 0 else "decreased;strong")
        )
    r = (last - first) / abs(first)
    if abs(r) < STABLE_REL:
        return "stable;none"
    mag = "weak" if abs(r) < MODERATE_REL else ("moderate" if abs(r) < STRONG_REL else "strong")
    return f"{'increased' if r > 0 else 'decreased'};{mag}"


def change_answer(before: float, after: float) -> str:
    """T8 rule: increased / decreased / similar (|r| < STABLE_REL)."""
    return trend_answer(before, after).split(";")[0].replace("stable", "similar")


def compare_answer(a: float, b: float, counts: bool = False) -> str:
    """T6 rule: "A", "B" or "similar" (counts equal; values within SIMILAR_REL of the max)."""
    if counts:
        return "similar" if a == b else ("A" if a > b else "B")
    if abs(a - b) <= SIMILAR_REL * max(abs(a), abs(b)):
        return "similar"
    return "A" if a > b else "B"


def format_value(value: float, lab: Lab | None) -> str:
    decimals = lab.decimals if lab else 1
    return f"{value:.{decimals}f}"


def reference_midpoint(lab: Lab) -> float:
    """The middle of a panel lab's reference range (half the upper limit when one-sided)."""
    lo = lab.ref_low if lab.ref_low is not None else 0.0
    hi = lab.ref_high if lab.ref_high is not None else 2 * lo
    return (lo + hi) / 2


# --------------------------------------------------------------------------- answering


def _same_lab(m: LabMention, label: str) -> bool:
    return m.label.lower() == label.strip().lower()


def lab_mentions(rec: Record, label: str, patient: str | None = None) -> list[LabMention]:
    return [
        m for m in rec.labs if _same_lab(m, label) and (patient is None or m.patient == patient)
    ]


def _in_encounter(rec: Record, m: LabMention, start: date, span_end: date | None) -> bool:
    if m.encounter is not None:
        return m.encounter == start
    if m.day is None:
        return False
    hi = span_end or start + timedelta(days=HEADERLESS_ENCOUNTER_DAYS)
    return start - timedelta(days=ED_LEAD_DAYS) <= m.day < hi


def _encounter_text(rec: Record, start: date, patient: str = "") -> str | None:
    for p, d, a, b in rec.encounters:
        if d == start and p == patient:
            return rec.text[a:b]
    return None


def _encounter_window_text(rec: Record, start: date) -> str:
    """Without headers: the sentences dated within the encounter window."""
    lo = start - timedelta(days=ED_LEAD_DAYS)
    hi = start + timedelta(days=HEADERLESS_ENCOUNTER_DAYS)
    bounds = sentence_bounds(rec.text)
    keep = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        sent = rec.text[a:b]
        days = [parse_day(x) for x in DATE_RE.findall(sent)]
        if any(d is not None and lo <= d < hi for d in days):
            keep.append(sent)
    return " ".join(keep)


def value_answer(m: LabMention) -> str:
    return f"{m.value_text} {m.unit}"


def read_value(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    label, day = f["lab"], parse_day(f["date"])
    hits = [m for m in lab_mentions(rec, label) if m.day == day]
    if hits:
        return value_answer(hits[0])
    if not eager:
        return None
    same = [m for m in lab_mentions(rec, label) if m.day is not None]
    if same and day is not None:
        best = min(same, key=lambda m: (abs((m.day - day).days), m.pos))
        return value_answer(best)
    lab = panel_lab(label)
    if lab:
        return f"{format_value(reference_midpoint(lab), lab)} {lab.unit}"
    return "1.0 mg/dL"


def _first_in_encounter(
    rec: Record, label: str, start: date, nxt: date | None
) -> LabMention | None:
    hits = [m for m in lab_mentions(rec, label) if _in_encounter(rec, m, start, nxt)]
    if not hits:
        return None
    return min(hits, key=lambda m: (m.day or date.max, m.pos))


def read_t2(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    days = sorted(d for d in (parse_day(x) for x in f["dates"]) if d is not None)
    if len(days) < 2:
        return None if not eager else "stable;none"
    firsts = []
    for i, d in enumerate(days):
        nxt = days[i + 1] - timedelta(days=ED_LEAD_DAYS) if i + 1 < len(days) else None
        firsts.append(_first_in_encounter(rec, f["lab"], d, nxt))
    if firsts[0] is not None and firsts[-1] is not None:
        return trend_answer(firsts[0].value, firsts[-1].value)
    if not eager:
        return None
    seen = [m for m in lab_mentions(rec, f["lab"]) if m.day is not None]
    if len(seen) >= 2:
        near = [min(seen, key=lambda m, d=d: abs((m.day - d).days)) for d in (days[0], days[-1])]
        return trend_answer(near[0].value, near[1].value)
    return "stable;none"


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9%.]+", " ", s.lower())).strip()


def read_t3(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    if rec.empty:
        return "no" if eager else None
    problem = _norm(f["problem"])
    finding = _norm(f"{f['lab']} of {f['value']} {f['unit']}")
    start = parse_day(f["date"])
    text = _encounter_text(rec, start) if rec.encounters else None
    scope = text if text is not None else rec.text
    for m in re.finditer(r"noted:?\s*(.+?) is consistent with (.+?)(?:\.\s|\.$|\n|$)", scope):
        if _norm(m.group(1)) == finding and _norm(m.group(2)).startswith(problem):
            return "yes"
    return "no"


def read_t4(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    dx_day = parse_day(f["date"])
    labels = f["labs"]
    ids = set()
    candidates = []
    for label in labels:
        lab = panel_lab(label)
        direction = _direction_for(lab)
        for m in lab_mentions(rec, label):
            # "before that encounter": an earlier encounter, or (without headers) a date
            # before the new stay's possible ED draw the day before it
            if m.encounter is not None:
                earlier = dx_day is not None and m.encounter < dx_day
            else:
                earlier = (
                    m.day is not None
                    and dx_day is not None
                    and m.day < dx_day - timedelta(days=ED_LEAD_DAYS)
                )
            if not earlier:
                continue
            candidates.append(m)
            if _is_abnormal(rec, m, lab, direction) and m.event_id:
                ids.add(m.event_id.upper())
    if ids:
        return ";".join(sorted(ids))
    if not eager:
        return None
    tagged = [m.event_id for m in candidates if m.event_id]
    if tagged:
        return tagged[0]
    any_id = re.search(r"\bLAB-\d+\b", rec.text)
    return any_id.group(0) if any_id else "LAB-1"


def _direction_for(lab: Lab | None) -> str:
    if lab is None:
        return "high"
    for family, keys in T4_EVIDENCE.items():
        if lab.key in keys:
            return T4_DIRECTION[family]
    return "high"


# Within a sentence: any character but a newline, and a full stop only as a decimal point
# ("Hematocrit of 35.0 % is below the reference range of 40.0 to 52.0 %"). The old pattern
# excluded every "." and so never reached the range past a decimal value (the
# reference reader abstained on a T4 question whose Hematocrit 35.0 % was stated at turn 3).
_IN_SENTENCE = r"(?:[^.\n]|\.(?=\d))"
_HIGH_WORDS = re.compile(r"\b(?:above|higher than|over|exceeds)\b", re.IGNORECASE)
_LOW_WORDS = re.compile(r"\b(?:below|lower than|under|falls short of)\b", re.IGNORECASE)
# how far after a mention its reaction may come (the reactions follow their chunk of values)
_REACTION_WINDOW = 1200


def _stated_range(rec: Record, label: str, start: int = 0) -> tuple[float | None, float | None]:
    """The reference range the record states for a lab (the dialogue's reaction sentences):
    the first one at or after ``start``, else the first in the record."""
    rx = re.compile(
        re.escape(label) + r"\b" + _IN_SENTENCE + r"{0,120}?(?:range(?: of|,)|limit of) "
        r"(\d+(?:\.\d+)?)(?: to (\d+(?:\.\d+)?))?",
        re.IGNORECASE,
    )
    m = rx.search(rec.text, start) or rx.search(rec.text)
    if not m:
        return None, None
    if m.group(2):
        return float(m.group(1)), float(m.group(2))
    upper = "upper" in m.group(0).lower()
    return (None, float(m.group(1))) if upper else (float(m.group(1)), None)


def _stated_direction(rec: Record, m: LabMention) -> str:
    """ "high" / "low" as the record's reaction to this very value says it ("That Hematocrit of
    35.0 % is below ...", "Hematocrit is still below its range"), "" when it says nothing."""
    window = rec.text[m.pos : m.pos + _REACTION_WINDOW]
    label = re.escape(m.label)
    value = re.escape(m.value_text) + r"\s*" + re.escape(m.unit)
    said = re.compile(
        label + _IN_SENTENCE + r"{0,40}?" + value + r"(?P<rest>" + _IN_SENTENCE + r"{0,80})"
        r"|" + label + r" (?:is still|remains|is again) (?P<still>above|below) its range",
        re.IGNORECASE,
    )
    for hit in said.finditer(window):
        if hit.group("still"):
            at = m.pos + hit.start()
            if any(o.pos > m.pos and o.pos < at and _same_lab(o, m.label) for o in rec.labs):
                continue  # a later value of the lab is the one still out of range
            return "high" if hit.group("still").lower() == "above" else "low"
        rest = hit.group("rest") or ""
        if _HIGH_WORDS.search(rest):
            return "high"
        if _LOW_WORDS.search(rest):
            return "low"
    return ""


def _is_abnormal(rec: Record, m: LabMention, lab: Lab | None, direction: str) -> bool:
    if m.flag:
        return m.flag == direction
    said = _stated_direction(rec, m)
    if said:
        return said == direction
    lo, hi = _stated_range(rec, m.label, m.pos)
    if lab is not None:
        lo = lo if lo is not None else lab.ref_low
        hi = hi if hi is not None else lab.ref_high
    if direction == "high":
        return hi is not None and m.value > hi
    return lo is not None and m.value < lo


def read_t5(rec: Record, q: Question, eager: bool) -> str | None:
    if rec.empty:
        return "no" if eager else None
    f = q.fields
    if q.kind == "lab":
        day = parse_day(f["date"])
        values = {m.value for m in lab_mentions(rec, f["lab"]) if m.day == day}
        return "yes" if len(values) >= 2 else "no"
    title = _norm(f["title"])
    denied = stated = False
    bounds = sentence_bounds(rec.text)
    for a, b in zip(bounds, bounds[1:], strict=False):
        sent = rec.text[a:b]
        norm = _norm(sent)
        if title not in norm:
            continue
        # the title itself may hold a negation ("... not stated as uncontrolled")
        if _NEGATION_RE.search(norm.replace(title, " ")):
            denied = True
        else:
            stated = True
    return "yes" if denied and stated else "no"


def read_t6(rec: Record, q: Question, eager: bool) -> str | None:
    if {p for p, _a, _b in patient_sections(rec.text)} < {"A", "B"}:
        return "A" if eager else None
    vals: dict[str, float | None] = {}
    for p in ("A", "B"):
        if q.kind == "a":
            vals[p] = _n_diagnoses(rec, p)
        else:
            ms = sorted(
                (m for m in lab_mentions(rec, q.fields["lab"], p) if m.day is not None),
                key=lambda m: (m.day, m.pos),
            )
            if not ms:
                vals[p] = None
            elif q.kind == "b":
                vals[p] = max(m.value for m in ms)
            else:
                vals[p] = abs(ms[-1].value - ms[0].value)
    if vals["A"] is None or vals["B"] is None:
        return "A" if eager else None
    return compare_answer(vals["A"], vals["B"], counts=q.kind == "a")


def _n_diagnoses(rec: Record, patient: str) -> float | None:
    """Distinct ICD diagnosis codes in a patient's section (codes tagged DX-, or written in a
    diagnosis sentence when untagged); None when the section states none."""
    span = next(((a, b) for p, a, b in patient_sections(rec.text) if p == patient), None)
    if span is None:
        return None
    text = rec.text[span[0] : span[1]]
    codes: set[str] = set()
    prev = 0
    for tag in TAG_RE.finditer(text):
        # a tag lists the facts stated since the previous tag on its line
        seg_start = max(prev, text.rfind("\n", 0, tag.start()) + 1)
        prev = tag.end()
        if "DX-" in tag.group(1):
            codes |= set(_CODE_RE.findall(text[seg_start : tag.start()]))
    if not codes and "DX-" not in text:
        for line in text.splitlines():
            if re.search(r"diagnos|problems?:|\(dx ", line, re.IGNORECASE):
                codes |= set(_CODE_RE.findall(re.sub(r"procedure code \S+", "", line)))
    return float(len(codes)) if codes else None


def option_hits(text: str, options: list[str]) -> list[tuple[int, int]]:
    """(first offset, option index) of every option named in ``text``."""
    hay = text.lower()
    hits = []
    for i, opt in enumerate(options):
        m = re.search(r"(?<![a-z0-9])" + re.escape(opt.lower()) + r"(?![a-z0-9])", hay)
        if m:
            hits.append((m.start(), i))
    return sorted(hits)


def read_t7(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    options = f["options"]
    start = parse_day(f["date"])
    scope = _encounter_text(rec, start) if rec.encounters else None
    if scope is None and not rec.encounters and start is not None:
        scope = _encounter_window_text(rec, start)
    hits = option_hits(scope or "", options)
    if len({i for _p, i in hits}) == 1:
        return OPTION_LETTERS[hits[0][1]]
    if hits and not eager:
        return None  # two options named in the encounter: the record does not decide
    if not eager:
        return None
    anywhere = option_hits(rec.text, options)
    return OPTION_LETTERS[(hits or anywhere or [(0, 0)])[0][1]]


def read_t8(rec: Record, f: dict[str, Any], eager: bool) -> str | None:
    start = parse_day(f["date"])
    dated = [m for m in lab_mentions(rec, f["lab"]) if m.day is not None]
    before = [m for m in dated if start - timedelta(days=T8_MAX_BEFORE_DAYS) <= m.day <= start]
    after = [
        m
        for m in dated
        if start + timedelta(days=T8_MIN_AFTER_DAYS)
        <= m.day
        <= start + timedelta(days=T8_MAX_AFTER_DAYS)
    ]
    if before and after:
        b = max(before, key=lambda m: (m.day, m.pos))
        a = min(after, key=lambda m: (m.day, m.pos))
        return change_answer(b.value, a.value)
    if not eager:
        return None
    pre = [m for m in dated if m.day <= start]
    post = [m for m in dated if m.day > start]
    if pre and post:
        return change_answer(pre[-1].value, post[0].value)
    return "similar"


_DOSE_UNITS = r"mg|mcg|g|mL|UNIT|units?|TAB|CAP|mEq|puff|drop|PKT|SYR|VIAL|BAG"


def read_t9_other(rec: Record, q: Question, eager: bool) -> str | None:
    drug, start = q.fields["drug"], parse_day(q.fields["date"])
    scope = _encounter_text(rec, start) if rec.encounters else None
    if scope is None and start is not None:
        scope = _encounter_window_text(rec, start)
    rx_drug = r"(?<![A-Za-z])" + re.escape(drug) + r"(?![A-Za-z])"
    if q.kind == "dose":
        rx = re.compile(
            rx_drug + r"[^\d\n;,\[]{0,40}?(\d+(?:\.\d+)?(?:-\d+)?)\s*(" + _DOSE_UNITS + r")\b",
            re.IGNORECASE,
        )
        for text in (scope or "", rec.text if eager else ""):
            m = rx.search(text)
            if m:
                return f"{m.group(1)} {m.group(2)}"
        return "500 mg" if eager else None
    for text in (scope or "", rec.text if eager else ""):
        bounds = sentence_bounds(text)
        for a, b in zip(bounds, bounds[1:], strict=False):
            sent = text[a:b]
            if re.search(rx_drug, sent, re.IGNORECASE) and DATE_RE.search(sent):
                return DATE_RE.search(sent).group(0)
    return start.isoformat() if eager and start else None
