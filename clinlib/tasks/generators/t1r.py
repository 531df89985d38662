"""T1R relative-time retrieval, an extended task beside the paper's T1 (LongMedBench "event
retrieval": explicit questions give the event's time, relative ones only its position, "the
2nd medication event of V_i"; ClinTraceBench §3 T1 for the value format). Not part of the
paper's 6,271 questions.

Every candidate is a PAIR over one lab event: a ``relative`` question naming the event by
position ("the second Potassium measurement of the third hospital stay") and its
``explicit`` twin, a T1-style question naming it by date (T1's templates verbatim), with the
same gold ``"<value_text> <unit>"`` and the same anchor, so explicit vs relative accuracy is a
paired comparison. ``meta["pair"]`` (the anchor event id) links the twins.

Eligible event e of patient p, lab L, visit v: covered in the dialogue, numeric value with a
unit, and the visit holds at least two measurements of L, ALL covered and on distinct
calendar days, each the only L of its day in the record (so the position counts what the
dialogue shows, the date names exactly one value, and both name the same event). Position
k = rank of e among the visit's L measurements by (time, event id), at most
:data:`MAX_POSITION`; the visit is named by its rank ``visit_idx + 1`` (the dialogue's
"Visit N" header, and its "your N-th hospital stay" greeting). Ordinals are words, so no
number is stated in the relative stem (gate L3 refuses one). Pools are thinned to
MAX_PER_SERIES events per (patient, lab) by a stable hash, as for T1.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.dialogue.turns import ordinal_word
from clinlib.tasks.answers.formats import VALUE_FORMAT
from clinlib.tasks.answers.kinds import VALUE
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates.leaks import relative_value_leak
from clinlib.tasks.generators.common import (
    NUMERIC_TEXT,
    TaskInputs,
    lab_event_meta,
    make_qid,
    mentions_number,
    question_row,
    thin,
    to_frame,
)
from clinlib.tasks.recompute.t1r import recompute_t1r
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T1_TEMPLATES, T1R_RELATIVE_TEMPLATES

TASK = "T1R"
SUBTYPES = ("explicit", "relative")
MAX_PER_SERIES = 2
MAX_POSITION = 10


def visit_series(inp: TaskInputs) -> dict[tuple[int, int, str], list[dict]]:
    """(subject_id, visit_idx, lab_key) -> the visit's measurements of that lab with a value,
    by (time, event id) — what the position counts."""
    out: dict[tuple[int, int, str], list[dict]] = {}
    for series in inp.lab_series.values():
        for r in series:
            out.setdefault((r["subject_id"], r["visit_idx"], r["lab_key"]), []).append(r)
    return out


def series_ok(inp: TaskInputs, series: Sequence[dict]) -> bool:
    """At least two measurements, all covered, each alone on its day (module docstring)."""
    return (
        len(series) >= 2
        and all(r["status"] == "covered" for r in series)
        and all(inp.lab_day_count[(r["subject_id"], r["lab_key"], r["date"])] == 1 for r in series)
        and len({r["date"] for r in series}) == len(series)
    )


def _eligible(inp: TaskInputs) -> list[tuple[dict, int, int]]:
    """(event, 1-based position, measurements in the visit) of every eligible event."""
    out = []
    for series in visit_series(inp).values():
        if not series_ok(inp, series):
            continue
        for k, e in enumerate(series, start=1):
            text = e["value_text"]
            if k > MAX_POSITION or text is None or e["unit"] is None:
                continue
            if NUMERIC_TEXT.fullmatch(str(text).strip()):
                out.append((e, k, len(series)))
    return out


def visit_counts(inp: TaskInputs) -> dict[int, int]:
    """subject_id -> number of visits in the record (the anchor-position denominator)."""
    out: dict[int, int] = {}
    for s, _v in inp.visit_info:
        out[s] = out.get(s, 0) + 1
    return out


def _meta(e: dict, k: int, n: int, n_visits: int) -> dict:
    value_text = str(e["value_text"]).strip()
    return {
        "pair": e["event_id"],
        **lab_event_meta(e),
        "n_visits": int(n_visits),
        "position": int(k),
        "n_in_visit": int(n),
        "value": float(e["value"]),
        "value_text": value_text,
        "unit": str(e["unit"]).strip(),
    }


def _pair(inp: TaskInputs, e: dict, k: int, n: int, n_visits: int) -> list[dict]:
    """The explicit and relative question of one event (empty when either would state its
    own value)."""
    meta = _meta(e, k, n, n_visits)
    gold = f"{meta['value_text']} {meta['unit']}"
    common = {
        "inp": inp,
        "task": TASK,
        "subject_ids": [e["subject_id"]],
        "anchors": [e["event_id"]],
        "gold": gold,
        "meta": meta,
        "fmt": VALUE_FORMAT,
    }
    explicit = question_row(
        subtype="explicit",
        templates=T1_TEMPLATES,
        fields={"lab": e["label"], "date": e["date"]},
        **common,
    )
    relative = question_row(
        subtype="relative",
        templates=T1R_RELATIVE_TEMPLATES,
        fields={
            "lab": e["label"],
            "ordinal": ordinal_word(k),
            "visit": ordinal_word(int(e["visit_idx"]) + 1),
        },
        **common,
    )
    rows = [explicit, relative]
    if any(mentions_number(r["_body"], meta["value_text"]) for r in rows):
        return []
    if STATED_NUMBER.search(relative["_body"]):  # gate L3: the position is the only cue
        return []
    return rows


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T1R candidates: one explicit and one relative row per eligible event
    (QUESTION_COLUMNS + conflicts), sorted by qid."""
    picked = thin(
        _eligible(inp),
        key=lambda c: (c[0]["subject_id"], c[0]["lab_key"]),
        ident=lambda c: c[0]["event_id"],
        cap=MAX_PER_SERIES,
        salt=TASK,
    )
    visits = visit_counts(inp)
    rows = [row for e, k, n in picked for row in _pair(inp, e, k, n, visits[e["subject_id"]])]
    return to_frame(rows)


def pair_qids(subject_id: int, event_id: str) -> dict[str, str]:
    """subtype -> qid of the two questions of one pair (the generator's qids)."""
    return {s: make_qid(TASK, [subject_id], [event_id], s) for s in SUBTYPES}


SPEC = TaskSpec(
    name=TASK,
    title="Relative-time retrieval (extended set)",
    answer_format=VALUE_FORMAT,
    max_tokens=60,
    answer=VALUE,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute_t1r,
    leak=relative_value_leak,
    counts={"paper": 600, "quick": 24},
    select="clinlib.tasks.relative:select_t1r",
)
