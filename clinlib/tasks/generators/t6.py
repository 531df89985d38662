"""T6 cross-patient comparison (paper §3 "Task suite" T6: "Three subtypes T6a / T6b / T6c
(number of diagnoses, max lab value, delta value)"; SP1 Fig. 3B).

Two kept patients A and B with the same primary disease; the context is both dialogues
(labelled A and B by the harness). Per patient:

* ``a_n_diagnoses`` — distinct (ICD version, code) diagnosis codes over all encounters; usable
  only when every diagnosis event of the patient is covered.
* ``b_max_value`` — the maximum of a lab over all encounters; usable when every event of that
  lab is covered.
* ``c_delta_value`` — ``|last - first|`` of a lab (first and last measurement by time, at least
  two); usable when those two are covered.

Gold (rules.py): ``A`` / ``B`` for the larger quantity, ``similar`` when equal (counts) or
within rules.SIMILAR_REL of the larger magnitude (values). Pairs: within each disease the
patients are put in a stable hashed order and each is paired with the next :data:`PARTNERS`
(so every patient appears in about 2 x PARTNERS pairs); which one is A is a stable hash. For
b/c at most :data:`LABS_PER_PAIR` shared labs per pair are used (stable hash choice).
"""

from __future__ import annotations

from fractions import Fraction

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import PATIENT
from clinlib.tasks.gates.leaks import comparison_leak
from clinlib.tasks.generators.common import (
    DISEASE_NAMES,
    TaskInputs,
    compare_ab,
    exact,
    fraction_text,
    panel_itemids,
    question_row,
    stable_hash,
    to_frame,
)
from clinlib.tasks.recompute.per_task import gold_t6
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T6A_TEMPLATES, T6B_TEMPLATES, T6C_TEMPLATES

TASK = "T6"
FORMAT = "Reply A, B or similar. " + ABSTAIN_CLAUSE
SUBTYPES = ("a_n_diagnoses", "b_max_value", "c_delta_value")
PARTNERS = 4
LABS_PER_PAIR = 3


def patient_profiles(inp: TaskInputs) -> dict[int, dict]:
    """Per kept patient: diagnosis codes (or None) and per-lab max / delta facts."""
    out: dict[int, dict] = {sid: {"codes": None, "max": {}, "delta": {}} for sid in inp.strata}
    for sid, recs in inp.by_subject.items():
        dx = [r for r in recs if r["kind"] == "diagnosis"]
        if dx and all(r["status"] == "covered" for r in dx):
            out[sid]["codes"] = {
                "events": sorted(r["event_id"] for r in dx),
                "codes": sorted({f"{r['icd_version']}:{r['code']}" for r in dx}),
            }
    for (sid, lab), recs in inp.lab_series.items():  # by time, then numeric source id
        if sid not in out:
            continue
        if all(r["status"] == "covered" for r in recs):
            # the largest value; ties -> the earliest measurement
            top = max(enumerate(recs), key=lambda ir: (exact(ir[1]["value"]), -ir[0]))[1]
            out[sid]["max"][lab] = top
        if len(recs) >= 2 and recs[0]["status"] == "covered" and recs[-1]["status"] == "covered":
            d = abs(exact(recs[-1]["value"]) - exact(recs[0]["value"]))
            out[sid]["delta"][lab] = (recs[0], recs[-1], d)
    return out


def patient_pairs(inp: TaskInputs) -> list[tuple[int, int]]:
    """(A, B) pairs of same-disease patients (see module docstring)."""
    pairs: set[tuple[int, int]] = set()
    by_disease: dict[str, list[int]] = {}
    for sid, (disease, _) in inp.strata.items():
        by_disease.setdefault(disease, []).append(sid)
    for disease, sids in sorted(by_disease.items()):
        order = sorted(sids, key=lambda s: stable_hash("T6-order", disease, s))
        n = len(order)
        for i, s in enumerate(order):
            for k in range(1, min(PARTNERS, n - 1) + 1):
                t = order[(i + k) % n]
                lo, hi = min(s, t), max(s, t)
                if stable_hash("T6-ab", lo, hi) % 2 == 0:
                    pairs.add((lo, hi))
                else:
                    pairs.add((hi, lo))
    return sorted(pairs)


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T6 candidates (QUESTION_COLUMNS + conflicts)."""
    prof = patient_profiles(inp)
    rows = []
    for a, b in patient_pairs(inp):
        pa, pb = prof[a], prof[b]
        if pa["codes"] is not None and pb["codes"] is not None:
            rows.append(_row_a(inp, a, b, pa["codes"], pb["codes"]))
        for kind in ("max", "delta"):
            shared = sorted(set(pa[kind]) & set(pb[kind]))
            shared = sorted(shared, key=lambda lab, k=kind: stable_hash("T6-lab", a, b, k, lab))
            for lab in shared[:LABS_PER_PAIR]:
                if kind == "max":
                    rows.append(_row_b(inp, a, b, lab, pa["max"][lab], pb["max"][lab]))
                else:
                    rows.append(_row_c(inp, a, b, lab, pa["delta"][lab], pb["delta"][lab]))
    return to_frame(rows)


def _disease(inp: TaskInputs, sid: int) -> str:
    d = inp.strata[sid][0]
    return DISEASE_NAMES.get(d, d)


def _row_a(inp: TaskInputs, a: int, b: int, ca: dict, cb: dict) -> dict:
    na, nb = len(ca["codes"]), len(cb["codes"])
    return question_row(
        inp,
        task=TASK,
        subtype="a_n_diagnoses",
        subject_ids=[a, b],
        anchors=ca["events"] + cb["events"],
        templates=T6A_TEMPLATES,
        fields={"disease": _disease(inp, a)},
        gold=compare_ab(na, nb, count=True),
        meta={
            "subject_ids": [a, b],
            "measure": "distinct diagnosis codes (icd_version:icd_code)",
            "value_a": na,
            "value_b": nb,
            "codes_a": ca["codes"],
            "codes_b": cb["codes"],
        },
        evidence_events=[(a, e) for e in ca["events"]] + [(b, e) for e in cb["events"]],
    )


def _pct() -> str:
    return f"{rules.SIMILAR_REL * 100:g}"


def _row_b(inp: TaskInputs, a: int, b: int, lab: str, ea: dict, eb: dict) -> dict:
    return question_row(
        inp,
        task=TASK,
        subtype="b_max_value",
        subject_ids=[a, b],
        anchors=[ea["event_id"], eb["event_id"]],
        templates=T6B_TEMPLATES,
        fields={"disease": _disease(inp, a), "lab": ea["label"], "pct": _pct()},
        gold=compare_ab(ea["value"], eb["value"]),
        meta={
            "subject_ids": [a, b],
            "measure": "maximum value over all encounters",
            "lab": lab,
            "itemids": panel_itemids(lab),
            "value_a": float(ea["value"]),
            "value_b": float(eb["value"]),
            "event_a": ea["event_id"],
            "event_b": eb["event_id"],
            "date_a": ea["date"],
            "date_b": eb["date"],
        },
        evidence_events=[(a, ea["event_id"]), (b, eb["event_id"])],
    )


def _row_c(inp: TaskInputs, a: int, b: int, lab: str, da: tuple, db: tuple) -> dict:
    (fa, la, xa), (fb, lb, xb) = da, db
    return question_row(
        inp,
        task=TASK,
        subtype="c_delta_value",
        subject_ids=[a, b],
        anchors=[fa["event_id"], la["event_id"], fb["event_id"], lb["event_id"]],
        templates=T6C_TEMPLATES,
        fields={"disease": _disease(inp, a), "lab": fa["label"], "pct": _pct()},
        gold=compare_ab(xa, xb),
        meta={
            "subject_ids": [a, b],
            "measure": "|last - first| over all encounters (by time)",
            "lab": lab,
            "itemids": panel_itemids(lab),
            "first_a": float(fa["value"]),
            "last_a": float(la["value"]),
            "first_b": float(fb["value"]),
            "last_b": float(lb["value"]),
            "value_a": fraction_text(Fraction(xa)),
            "value_b": fraction_text(Fraction(xb)),
            "value_a_float": float(xa),
            "value_b_float": float(xb),
            "events_a": [fa["event_id"], la["event_id"]],
            "events_b": [fb["event_id"], lb["event_id"]],
            "dates_a": [fa["date"], la["date"]],
            "dates_b": [fb["date"], lb["date"]],
        },
        evidence_events=[
            (a, fa["event_id"]),
            (a, la["event_id"]),
            (b, fb["event_id"]),
            (b, lb["event_id"]),
        ],
    )


SPEC = TaskSpec(
    name=TASK,
    title="Cross-patient comparison",
    answer_format=FORMAT,
    max_tokens=80,
    answer=PATIENT,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t6,
    leak=comparison_leak,
    patients=2,
    reader_policy="clinlib.eval.readers.policies:answer_t6",
)
