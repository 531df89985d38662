"""Shared machinery of the T1–T9 question generators (paper §3 "Task suite", Fig. 1;
Appendix A gates L1–L3).

Every generator reads one :class:`~clinlib.tasks.generators.inputs.TaskInputs` (the kept
patients' events with their dialogue coverage, the dialogue turns and the cohort strata,
validated by :func:`~clinlib.tasks.generators.inputs.make_inputs`) and returns its task's
candidate questions as a DataFrame with :data:`clinlib.tasks.base.QUESTION_COLUMNS` plus the
internal ``conflicts`` column the selection uses (dropped before questions.parquet is
written). Pools far larger than any target are thinned per patient series by :func:`thin` (a
stable hash, so the thinning does not depend on row order); each generator documents its cap.

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
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.vocab import INDEX_DISEASE_ICD, LAB_BY_KEY
from clinlib.tasks import registry, rules
from clinlib.tasks.answers import ABSTAIN_CLAUSE
from clinlib.tasks.base import QUESTION_COLUMNS

# TaskInputs is imported from here by every generator and by clinlib.tasks.build
from clinlib.tasks.generators.inputs import TaskInputs
from clinlib.tasks.source_text import as_data_fields

DISEASE_NAMES: dict[str, str] = {
    "diabetes": "diabetes",
    "hypertension": "hypertension",
    "ckd": "chronic kidney disease",
    "cad": "coronary artery disease",
}

INTERNAL_COLUMNS = ("conflicts",)


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


def thin(
    items: Sequence[Any],
    key: Callable[[Any], Any],
    ident: Callable[[Any], Any],
    cap: int,
    salt: str,
) -> list:
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


def lab_event_meta(e: Mapping[str, Any]) -> dict[str, Any]:
    """The meta fields naming one lab event (T1, T9's lab absences, T1R): who, which lab and
    itemids, when and in which visit; the L2 recomputation reads them back."""
    return {
        "subject_id": int(e["subject_id"]),
        "event_id": e["event_id"],
        "lab": e["lab_key"],
        "itemid": int(e["code"]),
        "itemids": panel_itemids(e["lab_key"]),
        "date": e["date"],
        "hadm_id": int(e["hadm_id"]),
        "visit_idx": int(e["visit_idx"]),
    }


# --------------------------------------------------------------------------- text helpers


def format_instruction(task: str) -> str:
    """The answer-format statement of ``task`` (its spec's ``answer_format``)."""
    return registry.get_spec(task).answer_format


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
    """The abstention clause every answer format of clinlib.tasks.answers ends with, so T9's
    own formats read like every other task's."""
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
    # source text is data: every free-text field on one line, bounded, quoted if instruction-shaped
    body = templates[template_id].format(**as_data_fields(fields))
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
