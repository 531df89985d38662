"""T2 trend classification over two to five visits (paper §3 "Task suite": "Direction
(increased / decreased / stable) and magnitude across two-to-five visits"; SP1 aggregation).

Per (patient, lab) the usable visits are those whose EARLIEST measurement of the lab (the
rules.py value of a visit) is covered. A question lists the admission dates of ``n`` consecutive
usable visits (2 <= n <= 5; distinct dates) and the gold is rules.py's label of
``r = (last - first) / |first|`` over the first and last of them (exact decimal arithmetic,
see generators.common). Subtype ``"<n>_visits"`` — the aggregation span.

Windows per (patient, lab, n): all ``m - n + 1`` start positions would repeat the same values
many times over, so at most :data:`MAX_WINDOWS` start(s) are kept, chosen by a stable hash
(documented subsampling; selection stratifies over what remains).
"""

from __future__ import annotations

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import TREND
from clinlib.tasks.gates.leaks import trend_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    fraction_text,
    join_dates,
    panel_itemids,
    question_row,
    relative_change,
    stable_hash,
    to_frame,
    trend_label,
)
from clinlib.tasks.recompute.per_task import gold_t2
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T2_TEMPLATES

TASK = "T2"
FORMAT = (
    "Reply as <direction>;<magnitude> with direction one of increased, decreased, stable "
    "and magnitude one of none, weak, moderate, strong (for example: decreased;weak). "
    + ABSTAIN_CLAUSE
)
SUBTYPES = tuple(f"{n}_visits" for n in range(rules.T2_MIN_VISITS, rules.T2_MAX_VISITS + 1))
MAX_WINDOWS = 1


def visit_series(inp: TaskInputs) -> dict[tuple[int, str], list[dict]]:
    """(subject, lab) -> the usable visits in order: each visit's earliest measurement of the
    lab, kept only when that measurement is covered, with ``visit_date`` added."""
    out: dict[tuple[int, str], list[dict]] = {}
    for key, series in inp.lab_series.items():
        first: dict[int, dict] = {}
        for r in series:  # by time: the first seen per visit is its earliest
            first.setdefault(r["visit_idx"], r)
        usable = [
            {**r, "visit_date": inp.visit_date(key[0], v)}
            for v, r in sorted(first.items())
            if r["status"] == "covered"
        ]
        if usable:
            out[key] = usable
    return out


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T2 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = []
    for (sid, lab), recs in sorted(visit_series(inp).items()):
        m = len(recs)
        for n in range(rules.T2_MIN_VISITS, min(rules.T2_MAX_VISITS, m) + 1):
            starts = sorted(range(m - n + 1), key=lambda s: stable_hash("T2", sid, lab, n, s))
            for s in starts[:MAX_WINDOWS]:
                win = recs[s : s + n]
                dates = [w["visit_date"] for w in win]
                if len(set(dates)) < n or float(win[0]["value"]) == 0.0:
                    continue
                rows.append(_row(inp, int(sid), str(lab), win, dates))
    return to_frame(rows)


def _row(inp: TaskInputs, sid: int, lab: str, win: list[dict], dates: list[str]) -> dict:
    first, last = win[0]["value"], win[-1]["value"]
    r = relative_change(first, last)
    n = len(win)
    return question_row(
        inp,
        task=TASK,
        subtype=f"{n}_visits",
        subject_ids=[sid],
        anchors=[w["event_id"] for w in win],
        templates=T2_TEMPLATES,
        fields={"lab": win[0]["label"], "n": _word(n), "dates": join_dates(dates)},
        gold=trend_label(first, last),
        meta={
            "subject_id": sid,
            "lab": lab,
            "itemids": panel_itemids(lab),
            "hadm_ids": [int(w["hadm_id"]) for w in win],
            "visit_idx": [int(w["visit_idx"]) for w in win],
            "visit_dates": dates,
            "event_ids": [w["event_id"] for w in win],
            "values": [float(w["value"]) for w in win],
            "first": float(first),
            "last": float(last),
            "relative_change": fraction_text(r),
            "relative_change_float": float(r),
            "rule": "earliest measurement of each visit; r = (last - first) / |first|",
        },
    )


def _word(n: int) -> str:
    return {2: "two", 3: "three", 4: "four", 5: "five"}[n]


SPEC = TaskSpec(
    name=TASK,
    title="Trend classification",
    answer_format=FORMAT,
    max_tokens=60,
    answer=TREND,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t2,
    leak=trend_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t2",
)
