"""T8 observed post-treatment lab change (paper §3 "Task suite" T8, exploratory: "Did a lab
increase, decrease, or stay similar after a documented treatment event?"; Appendix B.5,
Fig. 11; Table 6).

A treatment event is a covered prescription whose drug name contains a key of
rules.T8_TREATMENT_TARGETS as whole words of its clinlib.data.drugnames key (tall-man, qualifiers,
strengths and spacing do not matter; the question shows the recorded name, trimmed); each of
the key's target labs gives one candidate when

* before = the latest measurement of the lab at or before the prescription's start, at most
  rules.T8_MAX_BEFORE_DAYS earlier, and
* after = the first measurement at least rules.T8_MIN_AFTER_DAYS after the start, at most
  rules.T8_MAX_AFTER_DAYS after it,

both exist and both are covered (a missed one is not replaced by another, which would change the
rule's answer), and the drug name does not itself state one of the two values
(:func:`states_value`). Gold: rules.py direction of ``r = (after - before) / |before|`` —
"similar" when |r| < STABLE_REL; subtype = the magnitude x direction bin (L-, M-, S-, 0, S+, M+,
L+). Repeated orders of the same drug that resolve to the same (before, after) pair give one
question (the earliest order), and at most :data:`MAX_PER_SERIES` questions are kept per
(patient, treatment, lab) by stable hash (documented thinning). This is observed change, not a
causal effect (no concurrent-medication adjustment, as in the paper).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import pandas as pd

from clinlib.data.drugnames import drug_display, drug_key, has_phrase
from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import DIRECTION
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates.leaks import response_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    exact,
    fraction_text,
    panel_itemids,
    question_row,
    relative_change,
    t8_label,
    thin,
    to_frame,
)
from clinlib.tasks.generators.inputs import event_sort_key, timestamp
from clinlib.tasks.recompute.per_task import gold_t8
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T8_TEMPLATES

TASK = "T8"
FORMAT = "Reply increased, decreased or similar. " + ABSTAIN_CLAUSE
SUBTYPES = rules.T8_BINS
MAX_PER_SERIES = 3


def treatment_key(drug: str) -> str | None:
    """The T8_TREATMENT_TARGETS key found in a drug name (whole words of its
    clinlib.data.drugnames key; the longest wins), else None."""
    key = drug_key(drug)
    hits = [k for k in rules.T8_TREATMENT_TARGETS if has_phrase(key, k)]
    return max(hits, key=len) if hits else None


_DAY_US = 86_400_000_000


def states_value(drug: str, *points: dict) -> bool:
    """Whether the drug name, as the question shows it, states one of the lab values
    (a strength in the name such as "Furosemide 40 mg" next to a BUN of 40): such a question
    would state its own before / after value (gate L3), so it is not generated."""
    stated = {exact(m.group(0)) for m in STATED_NUMBER.finditer(drug_display(drug))}
    return any(exact(p["value"]) in stated for p in points)


def before_after(series: list[dict], start_us: int) -> tuple[dict | None, dict | None]:
    """The rules.py before / after measurements of one patient's lab around a start.

    Args:
        series: the patient's records of one lab (any coverage status), by time.
        start_us: the treatment start (microseconds since the epoch).
    """
    times = [r["t"] for r in series]
    i = bisect_right(times, start_us)  # series[:i] are at or before the start
    before = (
        series[i - 1]
        if i and times[i - 1] >= start_us - rules.T8_MAX_BEFORE_DAYS * _DAY_US
        else None
    )
    j = bisect_left(times, start_us + rules.T8_MIN_AFTER_DAYS * _DAY_US)
    after = (
        series[j]
        if j < len(series) and times[j] <= start_us + rules.T8_MAX_AFTER_DAYS * _DAY_US
        else None
    )
    return before, after


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T8 candidates (QUESTION_COLUMNS + conflicts)."""
    found, seen = [], set()
    meds = [
        (r, treatment_key(r["label"]))
        for r in inp.records
        if r["kind"] == "medication" and r["status"] == "covered" and r["label"] is not None
    ]
    meds = sorted(
        ((r, k) for r, k in meds if k is not None),
        key=lambda rk: (rk[0]["subject_id"], rk[0]["t"], event_sort_key(rk[0])),
    )
    for rx, tkey in meds:
        for lab in rules.T8_TREATMENT_TARGETS[tkey]:
            series = inp.lab_series.get((rx["subject_id"], lab))
            if not series:
                continue
            before, after = before_after(series, rx["t"])
            if before is None or after is None:
                continue
            if before["status"] != "covered" or after["status"] != "covered":
                continue
            if float(before["value"]) == 0.0 or states_value(rx["label"], before, after):
                continue
            key = (rx["subject_id"], tkey, lab, before["event_id"], after["event_id"])
            if key in seen:
                continue
            seen.add(key)
            found.append((rx, tkey, lab, before, after))
    found = thin(
        found,
        key=lambda f: (f[0]["subject_id"], f[1], f[2]),
        ident=lambda f: f[0]["event_id"],
        cap=MAX_PER_SERIES,
        salt="T8",
    )
    rows = [_row(inp, *f) for f in found]
    return to_frame(rows)


def _row(inp: TaskInputs, rx: dict, tkey: str, lab: str, before: dict, after: dict) -> dict:
    direction, bin_ = t8_label(before["value"], after["value"])
    r = relative_change(before["value"], after["value"])
    sid = int(rx["subject_id"])
    start = timestamp(rx["t"])
    return question_row(
        inp,
        task=TASK,
        subtype=bin_,
        subject_ids=[sid],
        anchors=[rx["event_id"], before["event_id"], after["event_id"]],
        templates=T8_TEMPLATES,
        fields={
            "drug": drug_display(rx["label"]),
            "date": start.strftime("%Y-%m-%d"),
            "lab": before["label"],
            "min_days": rules.T8_MIN_AFTER_DAYS,
        },
        gold=direction,
        meta={
            "subject_id": sid,
            "rx_event_id": rx["event_id"],
            "drug": str(rx["label"]),
            "treatment": tkey,
            "hadm_id": int(rx["hadm_id"]),
            "start": start.isoformat(),
            "lab": lab,
            "itemids": panel_itemids(lab),
            "before": _point(before),
            "after": _point(after),
            "relative_change": fraction_text(r),
            "relative_change_float": float(r),
            "bin": bin_,
        },
    )


def _point(r: dict) -> dict:
    return {
        "event_id": r["event_id"],
        "time": timestamp(r["t"]).isoformat(),
        "value": float(r["value"]),
        "hadm_id": int(r["hadm_id"]),
    }


SPEC = TaskSpec(
    name=TASK,
    title="Observed treatment response",
    answer_format=FORMAT,
    max_tokens=120,
    answer=DIRECTION,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t8,
    leak=response_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t8",
)
