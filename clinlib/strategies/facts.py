"""The rule-based prep model's reader: atomic facts from the dialogue TEXT (paper §4 "Memory
prep model", offline stand-in for the DeepSeek-V3 prep; §3 "preserving structured fields
(dates, lab values, ICD / procedure codes, medications) inside narrative turns").

It reads only what an LLM reading the dialogue would read — the rendered turns — never the
events table. Two kinds of pattern:

* entity patterns that work on any wording: a lab name of the fixed panel followed by a value
  and a unit (``Creatinine of 1.9 mg/dL``, ``the Creatinine on 2150-01-02 was 2.5 mg/dL``),
  with ``above`` / ``below`` / ``flagged ... abnormal`` in the same sentence giving the flag;
* sentence frames compiled from the dialogue templates' own constants
  (:mod:`clinlib.dialogue.templates` ``ADMISSION_FRAMES``, ``MED_FRAMES``, ``PROCEDURE_FRAMES``,
  ``DIAGNOSIS_FRAMES``, ``DISCHARGE_FRAMES``, ``SYMPTOM_LEADS``), so the reader follows the
  templates if their wording changes; a generic ``Title (CODE)`` pattern catches diagnosis
  lists in other wording.

Dates come from the sentence, else the last date stated earlier in the same turn, else an
earlier mention of the same value in the visit, else the visit header's date. Provenance tags
(``[LAB-123]``) after a sentence become the fact's ``ids``. Sentences with no structured
field — greetings, reactions' explanations, and free-text clinical assertions such as an
injected "Physician noted: <finding> is consistent with <problem>." — yield no fact beyond the
lab value they may mention; a clinician sentence with a negation cue ("never", "not", "no
history of") and no structured field becomes a ``negation`` fact, which Mem0's update step can
turn into a DELETE.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

import pandas as pd

from clinlib.data.vocab import LAB_PANEL
from clinlib.dialogue import templates
from clinlib.dialogue.matching import TAG_RE
from clinlib.strategies.base import check_turns, dialogue_hash

FACT_KINDS: tuple[str, ...] = (
    "admission",
    "lab",
    "medication",
    "procedure",
    "diagnosis",
    "discharge",
    "symptom",
    "negation",
)
# MIMIC d_labitems labels of panel itemids that differ from the panel's display label.
EXTRA_LAB_LABELS: tuple[str, ...] = ("Cholesterol, LDL, Calculated",)
DATE = r"\d{4}-\d{2}-\d{2}"
DATE_RE = re.compile(rf"(?<!\d){DATE}(?!\d)")
CODE = r"[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)?"
# MIMIC-IV admission types that end in an abbreviation's period ("EW EMER.", "DIRECT EMER."):
# the template drops the sentence's own period after them, so the reader puts it back.
ABBREVIATED_ENDINGS: tuple[str, ...] = ("EMER",)
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")

_LAB_LABELS = sorted(
    {lab.label for lab in LAB_PANEL} | set(EXTRA_LAB_LABELS), key=len, reverse=True
)
LAB_RE = re.compile(
    r"(?<![A-Za-z])(?P<label>" + "|".join(re.escape(x) for x in _LAB_LABELS) + r")(?![A-Za-z])"
    r"(?P<gap>(?:\s*(?:,|:|\bresult\b|\bwas\b|\bat\b|\bof\b|\bmeasured\b|\bis\b|\bcame back at\b"
    rf"|\bon\s+(?P<gdate>{DATE})))*)"
    # Lab units are concentrations or percentages (mg/dL, mEq/L, K/uL, %): a dose unit (mg, mEq,
    # UNIT) after a lab-like word is a drug such as "Potassium Chloride 20 mEq".
    r"\s*(?P<value>[<>]?\d+(?:\.\d+)?)\s*(?P<unit>%|[A-Za-z\u00b5]+/[A-Za-z0-9]+)"
)
HIGH_RE = re.compile(r"\b(?:above|higher than|over|exceeds)\b")
LOW_RE = re.compile(r"\b(?:below|lower than|under|falls short of)\b")
FLAGGED_RE = re.compile(r"\bflagged\b.*\babnormal\b")
NEGATION_RE = re.compile(
    r"\b(?:never|not|no history of|no longer|did not|denies|ruled out|discontinued|stopped)\b",
    re.IGNORECASE,
)
MED_ITEM_RE = re.compile(
    r"(?P<drug>.+?) (?P<dose>\d[\d.,/]*(?:-\d[\d.,]*)?) (?P<unit>[^\s()]+?)"
    r"(?: \((?P<r1>[^()]+)\)| (?P<r2>[A-Z][A-Z0-9/_\-]*(?: [A-Z][A-Z0-9/_\-]*)*))?"
    r"(?=, | and |$)"
)
DX_ITEM_RE = re.compile(r"^(?:and )?(?P<title>.+) \((?P<code>[A-Z0-9][A-Z0-9.]{2,7})\)$")
DX_GENERIC_RE = re.compile(r"(?P<title>[A-Z][^;()]*?) \((?P<code>[A-Z]?\d[A-Z0-9.]{2,6})\)")
DX_GENERIC_CUES = ("diagnos", "chart lists", "documented", "recorded")


def _frame_regexes(frames: Iterable[str], groups: dict[str, str]) -> list[re.Pattern]:
    """Compile template frames into anchored regexes (placeholders -> named groups)."""
    out = []
    for frame in frames:
        if not set(re.findall(r"\{(\w+)\}", frame)) <= set(groups):
            continue  # a placeholder we do not know: skip rather than mis-parse
        pat = re.escape(frame.rstrip("."))
        for name, sub in groups.items():
            pat = pat.replace(re.escape("{" + name + "}"), f"(?P<{name}>{sub})", 1)
        out.append(re.compile("^" + pat + r"\.?$"))
    return out


def _frames(name: str) -> tuple[str, ...]:
    value = getattr(templates, name, ())
    return tuple(value) if isinstance(value, tuple | list) else ()


ADMISSION_RES = _frame_regexes(_frames("ADMISSION_FRAMES"), {"date": DATE, "code": r".+?"})
MED_RES = _frame_regexes(_frames("MED_FRAMES"), {"date": DATE, "items": r".+?"})
PROCEDURE_RES = _frame_regexes(
    _frames("PROCEDURE_FRAMES"), {"date": DATE, "title": r".+?", "code": CODE}
)
DIAGNOSIS_RES = _frame_regexes(
    _frames("DIAGNOSIS_FRAMES") + _frames("DIAGNOSIS_MORE_FRAMES"), {"date": DATE, "items": r".+?"}
)
DISCHARGE_RES = _frame_regexes(
    _frames("DISCHARGE_FRAMES") + _frames("DISCHARGE_NO_LOCATION"), {"date": DATE, "code": r".+?"}
)
SYMPTOM_RES = _frame_regexes(_frames("SYMPTOM_LEADS"), {"s": r".+?"})


@dataclass(frozen=True)
class Fact:
    """One atomic fact read from the dialogue.

    Attributes:
        kind: one of :data:`FACT_KINDS`.
        visit_idx / turn_idx: where it was first stated.
        date: ISO date it refers to ("" if none could be read).
        name: lab label, drug, diagnosis / procedure title, admission type, discharge
            location, symptom phrase, or the sentence (negation).
        value / unit: lab value and unit, or medication dose and dose unit.
        code: ICD code (diagnosis / procedure).
        route: medication route.
        flag: lab flag read from the text: ``high``, ``low``, ``abnormal`` or "".
        ids: provenance tags of the sentence(s) that stated it.
        sentence: the first sentence that stated it (plain text).
    """

    kind: str
    visit_idx: int
    turn_idx: int
    date: str
    name: str
    value: str = ""
    unit: str = ""
    code: str = ""
    route: str = ""
    flag: str = ""
    ids: tuple[str, ...] = ()
    sentence: str = ""

    @property
    def attribute(self) -> str:
        """What the fact is about (Mem0's "same memory" test): a newer value of the same
        attribute updates the old one."""
        key = {
            "lab": self.name.lower(),
            "medication": " ".join(self.name.lower().split()),
            "diagnosis": self.code.upper(),
            "procedure": self.code.upper(),
            "symptom": self.name.lower(),
            "negation": self.sentence.lower(),
        }.get(self.kind, "")
        return f"{self.kind}:{key}" if key else self.kind

    @property
    def signature(self) -> tuple[str, ...]:
        """The value part: equal attribute + equal signature = the same fact (Mem0 NONE)."""
        return {
            "lab": (self.value, self.unit),
            "medication": (self.value, self.unit, self.route),
            "diagnosis": (self.code,),
            "procedure": (self.code, self.date),
            "admission": (self.date, self.name),
            "discharge": (self.date, self.name),
        }.get(self.kind, (self.name,))

    def statement(self, with_ids: bool = True) -> str:
        """One-line natural-language fact (what a Mem0 memory / timeline cell says)."""
        flag = f" ({self.flag})" if self.flag else ""
        on = f" on {self.date}" if self.date else ""
        text = {
            "lab": f"{self.name} was {self.value} {self.unit}{flag}{on}",
            "medication": f"{self.name} {self.value} {self.unit}"
            + (f" {self.route}" if self.route else "")
            + (f" started {self.date}" if self.date else ""),
            "diagnosis": f"Diagnosis {self.name} ({self.code}) recorded{on}",
            "procedure": f"Procedure {self.name} (code {self.code}){on}",
            "admission": f"Admitted{on} (admission type {self.name})",
            "discharge": f"Discharged{on}" + (f" to {self.name}" if self.name else ""),
            "symptom": f"Patient reported that {self.name}"
            + (f" (visit of {self.date})" if self.date else ""),
            "negation": self.sentence,
        }.get(self.kind, self.sentence)
        if with_ids and self.ids:
            text += " [" + ", ".join(self.ids) + "]"
        return text

    def to_dict(self) -> dict:
        """Plain dict (ids as a list)."""
        d = asdict(self)
        d["ids"] = list(self.ids)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Fact:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "ids": tuple(d.get("ids", ()))})


def split_sentences(text_tagged: str) -> list[tuple[str, list[str]]]:
    """Split a (tagged) turn into (plain sentence, ids) pairs.

    A tag ``[LAB-1, LAB-2]`` belongs to the sentence right before it; sentences without a
    tag get no ids. Works on untagged text too.
    """
    out: list[tuple[str, list[str]]] = []
    pos = 0
    for m in TAG_RE.finditer(text_tagged):
        sentences = _sentences(text_tagged[pos : m.start()])
        ids = m.group(1).split(", ")
        for i, s in enumerate(sentences):
            out.append((s, ids if i == len(sentences) - 1 else []))
        if not sentences and out:  # a tag right after another tag: same sentence
            out[-1] = (out[-1][0], out[-1][1] + [i for i in ids if i not in out[-1][1]])
        pos = m.end()
    out += [(s, []) for s in _sentences(text_tagged[pos:])]
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_SPLIT_RE.split(text.strip()) if s.strip()]


def _match(regexes: list[re.Pattern], sentence: str) -> re.Match | None:
    for rx in regexes:
        m = rx.match(sentence)
        if m:
            return m
    return None


def _split_items(items: str, sep_re: str) -> list[str]:
    return [p for p in re.split(sep_re, items.strip()) if p]


def _med_items(items: str) -> list[tuple[str, str, str, str]]:
    out, pos = [], 0
    while pos < len(items):
        m = MED_ITEM_RE.match(items, pos)
        if not m:
            break
        drug = re.sub(r"^(?:and )", "", m.group("drug").strip())
        out.append((drug, m.group("dose"), m.group("unit"), m.group("r1") or m.group("r2") or ""))
        pos = m.end()
        sep = re.match(r", (?:and )?| and ", items[pos:])
        pos += sep.end() if sep else 1
    return out


def _own_ids(ids: tuple[str, ...], i: int, n: int) -> tuple[str, ...]:
    # A list sentence cites its items' ids in item order: one id per item when they pair.
    return (ids[i],) if n > 1 and len(ids) == n else ids


def _lab_facts(sentence: str, base: dict) -> list[Fact]:
    mentions = list(LAB_RE.finditer(sentence))
    flag = ""
    if len(mentions) == 1:
        if FLAGGED_RE.search(sentence):
            flag = "abnormal"
        elif HIGH_RE.search(sentence):
            flag = "high"
        elif LOW_RE.search(sentence):
            flag = "low"
    out = []
    for i, m in enumerate(mentions):
        date = m.group("gdate") or base["date"]
        own = _own_ids(base["ids"], i, len(mentions))
        out.append(
            Fact(
                kind="lab",
                name=m.group("label"),
                value=m.group("value"),
                unit=m.group("unit"),
                flag=flag,
                **{**base, "date": date, "ids": own},
            )
        )
    return out


def _structured(sentence: str, speaker: str, base: dict) -> list[Fact]:
    """Facts of one sentence (labs are read in every sentence, frames only where they fit)."""
    if speaker == "patient":
        m = _match(SYMPTOM_RES, sentence)
        if not m:
            return []
        return [
            Fact(kind="symptom", name=p.strip(), **base)
            for p in m.group("s").split(" and ")
            if p.strip()
        ]
    med = _match(MED_RES, sentence)
    # Drug names can contain lab words ("Sodium Chloride 0.9% Flush"): no labs in drug lists.
    facts = [] if med else _lab_facts(sentence, base)
    if m := _match(ADMISSION_RES, sentence):
        code = m.group("code").strip()
        if code.endswith(ABBREVIATED_ENDINGS):
            code += "."
        facts.append(Fact(kind="admission", name=code, **{**base, "date": m.group("date")}))
    elif m := _match(DISCHARGE_RES, sentence):
        code = m.groupdict().get("code") or ""
        facts.append(Fact(kind="discharge", name=code.strip(), **{**base, "date": m.group("date")}))
    elif m := med:
        items = _med_items(m.group("items"))
        for i, (drug, dose, unit, route) in enumerate(items):
            facts.append(
                Fact(
                    kind="medication",
                    name=drug,
                    value=dose,
                    unit=unit,
                    route=route,
                    **{
                        **base,
                        "date": m.group("date"),
                        "ids": _own_ids(base["ids"], i, len(items)),
                    },
                )
            )
    elif m := _match(PROCEDURE_RES, sentence):
        facts.append(
            Fact(
                kind="procedure",
                name=m.group("title").strip(),
                code=m.group("code"),
                **{**base, "date": m.group("date")},
            )
        )
    elif m := _match(DIAGNOSIS_RES, sentence):
        items = [
            dm
            for item in _split_items(m.group("items"), r";\s+(?:and\s+)?")
            if (dm := DX_ITEM_RE.match(item.strip()))
        ]
        for i, dm in enumerate(items):
            facts.append(
                Fact(
                    kind="diagnosis",
                    name=dm.group("title").strip(),
                    code=dm.group("code"),
                    **{
                        **base,
                        "date": m.group("date"),
                        "ids": _own_ids(base["ids"], i, len(items)),
                    },
                )
            )
    elif not facts and any(c in sentence.lower() for c in DX_GENERIC_CUES):
        for dm in DX_GENERIC_RE.finditer(sentence):
            facts.append(
                Fact(
                    kind="diagnosis", name=dm.group("title").strip(), code=dm.group("code"), **base
                )
            )
    if not facts and NEGATION_RE.search(sentence):
        facts.append(Fact(kind="negation", name=sentence, **base))
    return facts


def _visit_dates(turns: pd.DataFrame) -> dict[int, str]:
    out: dict[int, str] = {}
    for v, g in turns.groupby("visit_idx", sort=True):
        date = ""
        if "visit_date" in g.columns:
            vals = [str(x) for x in g["visit_date"] if isinstance(x, str) and DATE_RE.search(x)]
            date = DATE_RE.search(vals[0]).group(0) if vals else ""
        if not date:
            for text in g["text"]:
                m = DATE_RE.search(str(text))
                if m:
                    date = m.group(0)
                    break
        out[int(v)] = date
    return out


def extract_facts(turns: pd.DataFrame) -> list[Fact]:
    """Every atomic fact of one patient's dialogue, in order of first statement.

    Args:
        turns: one patient's dialogue turns (``text_tagged`` used when present, for ids).

    Returns:
        Facts, de-duplicated within a visit (a lab value restated by the clinician's reaction
        is one fact carrying the flag the reaction gives).
    """
    turns = check_turns(turns, "extract_facts")
    visit_date = _visit_dates(turns)
    facts: list[Fact] = []
    index: dict[tuple, int] = {}
    seen_value_dates: dict[tuple, str] = {}
    for row in turns.itertuples(index=False):
        v, t = int(row.visit_idx), int(row.turn_idx)
        running = ""
        for sentence, ids in split_sentences(str(row.text_tagged)):
            dates = DATE_RE.findall(sentence)
            if dates:
                running = dates[0]
            inferred = not running
            base = {
                "visit_idx": v,
                "turn_idx": t,
                "date": running or visit_date.get(v, ""),
                "ids": tuple(ids),
                "sentence": sentence,
            }
            for f in _structured(sentence, str(row.speaker), base):
                if f.kind == "lab":
                    vk = (v, f.name, f.value, f.unit)
                    if inferred and vk in seen_value_dates:
                        f = replace(f, date=seen_value_dates[vk])
                    seen_value_dates.setdefault(vk, f.date)
                if f.kind == "symptom":
                    f = replace(f, date=visit_date.get(v, f.date))
                key = (v, f.kind, f.attribute, f.signature, f.date)
                if key in index:
                    old = facts[index[key]]
                    merged_ids = old.ids + tuple(i for i in f.ids if i not in old.ids)
                    facts[index[key]] = replace(old, ids=merged_ids, flag=old.flag or f.flag)
                else:
                    index[key] = len(facts)
                    facts.append(f)
    return facts


def facts_frame(facts: Iterable[Fact]) -> pd.DataFrame:
    """Facts as a DataFrame (one row per fact; columns = Fact fields + attribute)."""
    rows = [f.to_dict() | {"attribute": f.attribute} for f in facts]
    cols = [*Fact.__dataclass_fields__, "attribute"]
    return pd.DataFrame(rows, columns=cols)


_MEMO: OrderedDict[str, list[Fact]] = OrderedDict()
_MEMO_SIZE = 512


def facts_of(turns: pd.DataFrame) -> list[Fact]:
    """:func:`extract_facts`, memoised by the dialogue's content hash (the timeline, summary,
    Mem0 and A-Mem constructors read the same dialogue once)."""
    checked = check_turns(turns, "facts_of")
    key = dialogue_hash(checked)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    facts = extract_facts(checked)
    _MEMO[key] = facts
    if len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return facts
