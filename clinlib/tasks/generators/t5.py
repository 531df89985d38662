"""T5 controlled contradiction detection (paper §3 "Task suite" T5: "Does the chart contain a
controlled self-contradictory statement?"; contradicts-skewed 455 / 40; Appendix B.3, Fig. 9).

Subtypes (the paper's names):

* ``controlled_dx_presence`` — a covered diagnosis; a clinician statement denying it is injected
  right after the turn that documents it. Gold ``yes``.
* ``controlled_procedure`` — a covered procedure; a statement that it was not performed.
  Gold ``yes``.
* ``controlled_lab_value`` — a covered lab, the only one of its lab on its date; a statement
  restating it on its date with a different value (:func:`contradicting_value`). Gold ``yes``.
* ``controlled_control`` — a covered diagnosis / procedure / lab chosen like the above, nothing
  injected. Gold ``no``.
* ``natural_c2_lab_non_glucose`` — a covered non-glucose lab whose value differs at another
  visit (natural variation across encounters, not a contradiction). Gold ``no``.

All questions name their topic in the same form ("the diagnosis of X in the encounter that
began on D", "the procedure X ...", "the <lab> result of D"), so the wording does not reveal the
subtype. At most one candidate per (patient, encounter, subtype) is generated (a stable hash
picks the anchor), and every question lists the encounters it touches in ``conflicts`` so the
selection keeps at most one T5 question per encounter: a control topic is never the target of
another question's injection in the patient's injected dialogue.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pandas as pd

from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import CONTRADICTION
from clinlib.tasks.gates.leaks import injection_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    exact,
    panel_itemids,
    pick_index,
    question_row,
    stable_hash,
    to_frame,
)
from clinlib.tasks.injections import Injection
from clinlib.tasks.recompute.per_task import gold_t5
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import (
    T5_STATEMENTS_DX,
    T5_STATEMENTS_LAB,
    T5_STATEMENTS_PROCEDURE,
    T5_TEMPLATES,
    T5_TOPIC_DX,
    T5_TOPIC_LAB,
    T5_TOPIC_PROCEDURE,
)

TASK = "T5"
FORMAT = "Reply yes or no. " + ABSTAIN_CLAUSE
SUBTYPES = (
    "controlled_dx_presence",
    "controlled_procedure",
    "controlled_lab_value",
    "controlled_control",
    "natural_c2_lab_non_glucose",
)
YES_SUBTYPES = frozenset(SUBTYPES[:3])
# Multipliers tried (in a per-question rotation) for a contradicting lab value.
VALUE_FACTORS = (
    Fraction(6, 10),
    Fraction(7, 10),
    Fraction(13, 10),
    Fraction(14, 10),
    Fraction(3, 2),
    Fraction(1, 2),
    Fraction(2),
)
MIN_REL_DIFF = Fraction(1, 5)


def decimals_of(value_text: str) -> int:
    """Decimals of a reported value (``"1.30"`` -> 2)."""
    s = str(value_text).strip()
    return len(s.split(".", 1)[1]) if "." in s else 0


def contradicting_value(value: float, value_text: str, qid: str) -> str:
    """A clearly different, positive value in the lab's reporting precision.

    Tries :data:`VALUE_FACTORS` starting at a qid-dependent position and returns the first
    result that differs from the true value by at least 20 %; falls back to adding units of
    the last decimal. Deterministic per question.
    """
    d = decimals_of(value_text)
    v = exact(value)
    start = pick_index(qid, len(VALUE_FACTORS), "factor")
    for i in range(len(VALUE_FACTORS)):
        w = v * VALUE_FACTORS[(start + i) % len(VALUE_FACTORS)]
        text = f"{float(w):.{d}f}"
        wv = Fraction(text)
        if wv > 0 and text != str(value_text).strip() and abs(wv - v) >= MIN_REL_DIFF * abs(v):
            return text
    step = Fraction(1, 10**d)
    k = 1
    while True:
        text = f"{float(v + k * step):.{d}f}"
        if abs(Fraction(text) - v) >= MIN_REL_DIFF * abs(v) and text != str(value_text).strip():
            return text
        k += 1


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T5 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = []
    for (sid, v), recs in sorted(inp.by_visit.items()):
        if sid not in inp.strata:
            continue
        info = inp.visit_info[(sid, v)]
        cov = [r for r in recs if r["status"] == "covered"]
        dxs = [r for r in cov if r["kind"] == "diagnosis"]
        pxs = [r for r in cov if r["kind"] == "procedure"]
        labs = [
            r
            for r in cov
            if r["kind"] == "lab"
            and r["lab_key"] is not None
            and r["value"] is not None
            and r["unit"] is not None
            and inp.lab_day_count[(sid, r["lab_key"], r["date"])] == 1
        ]
        if (dx := _choose(dxs, "dx", sid, v)) is not None:
            rows.append(_controlled(inp, info, "controlled_dx_presence", dx))
        if (px := _choose(pxs, "px", sid, v)) is not None:
            rows.append(_controlled(inp, info, "controlled_procedure", px))
        if (lab := _choose(labs, "lab", sid, v)) is not None:
            rows.append(_controlled(inp, info, "controlled_lab_value", lab))
        pools = [p for p in (dxs, pxs, labs) if p]
        if pools:
            pool = pools[stable_hash("T5-control-kind", sid, v) % len(pools)]
            rows.append(_control(inp, info, _choose(pool, "control", sid, v)))
        # natural: the first non-glucose lab (stable hash order) whose value differs elsewhere
        for e1 in sorted(labs, key=lambda r: stable_hash("T5-natural", r["event_id"])):
            if e1["lab_key"] == "glucose":
                continue
            e2 = _other_visit_value(inp, e1)
            if e2 is not None:
                rows.append(_natural(inp, info, e1, e2))
                break
    return to_frame(rows)


def _choose(records: list[dict], *salt) -> dict | None:
    if not records:
        return None
    return min(records, key=lambda r: stable_hash("T5", *salt, r["event_id"]))


def _other_visit_value(inp: TaskInputs, e: dict) -> dict | None:
    """The nearest covered value of the same lab in another visit that differs from ``e``
    (the only one of its lab on its day)."""
    sid, v = e["subject_id"], e["visit_idx"]
    others = [
        o
        for o in inp.lab_series.get((sid, e["lab_key"]), [])
        if o["visit_idx"] != v
        and o["status"] == "covered"
        and o["unit"] is not None
        and float(o["value"]) != float(e["value"])
        and inp.lab_day_count[(sid, o["lab_key"], o["date"])] == 1
    ]
    if not others:
        return None
    return min(others, key=lambda o: (abs(o["visit_idx"] - v), o["visit_idx"], o["t"]))


def _topic(info: dict, e: dict) -> tuple[str, dict]:
    """Question topic and meta fields of an anchor event."""
    kind = e["kind"]
    if kind == "lab":
        return T5_TOPIC_LAB.format(lab=e["label"], date=e["date"]), {
            "kind": "lab",
            "lab": e["lab_key"],
            "itemid": int(e["code"]),
            "itemids": panel_itemids(e["lab_key"]),
            "lab_date": e["date"],
            "value_text": str(e["value_text"]).strip(),
            "unit": str(e["unit"]).strip(),
        }
    tpl = T5_TOPIC_DX if kind == "diagnosis" else T5_TOPIC_PROCEDURE
    return tpl.format(title=e["label"], date=info["date"]), {
        "kind": kind,
        "code": str(e["code"]),
        "icd_version": int(e["icd_version"]),
        "title": str(e["label"]),
    }


def _base_meta(info: dict, e: dict) -> dict:
    return {
        "subject_id": int(info["subject_id"]),
        "hadm_id": int(info["hadm_id"]),
        "visit_idx": int(info["visit_idx"]),
        "date": info["date"],
        "event_id": e["event_id"],
    }


def _controlled(inp: TaskInputs, info: dict, subtype: str, e: dict) -> dict:
    sid, v = int(info["subject_id"]), int(info["visit_idx"])
    topic, tmeta = _topic(info, e)
    row = question_row(
        inp,
        task=TASK,
        subtype=subtype,
        subject_ids=[sid],
        anchors=[e["event_id"]],
        templates=T5_TEMPLATES,
        fields={"topic": topic},
        gold="yes",
        meta={**_base_meta(info, e), **tmeta},
        conflicts=[f"visit:{sid}:{v}"],
    )
    qid = row["qid"]
    if subtype == "controlled_lab_value":
        wrong = contradicting_value(float(e["value"]), str(e["value_text"]), qid)
        tpl = T5_STATEMENTS_LAB[pick_index(qid, len(T5_STATEMENTS_LAB), "statement")]
        text = tpl.format(lab=e["label"], date=e["date"], value=wrong, unit=tmeta["unit"])
        extra = {"stated_value": wrong}
    else:
        pool = T5_STATEMENTS_DX if subtype == "controlled_dx_presence" else T5_STATEMENTS_PROCEDURE
        tpl = pool[pick_index(qid, len(pool), "statement")]
        text = tpl.format(title=e["label"], code=e["code"])
        extra = {}
    meta = {**_base_meta(info, e), **tmeta, **extra, "statement": text}
    row["meta"] = json.dumps(meta, sort_keys=True)
    row["injection"] = Injection(
        kind="t5",
        subject_id=sid,
        visit_idx=v,
        after_turn_idx=int(e["turn"]),
        speaker="clinician",
        text=text,
        qid=qid,
    ).to_json()
    return row


def _control(inp: TaskInputs, info: dict, e: dict) -> dict:
    sid, v = int(info["subject_id"]), int(info["visit_idx"])
    topic, tmeta = _topic(info, e)
    return question_row(
        inp,
        task=TASK,
        subtype="controlled_control",
        subject_ids=[sid],
        anchors=[e["event_id"]],
        templates=T5_TEMPLATES,
        fields={"topic": topic},
        gold="no",
        meta={**_base_meta(info, e), **tmeta},
        conflicts=[f"visit:{sid}:{v}"],
    )


def _natural(inp: TaskInputs, info: dict, e1: dict, e2: dict) -> dict:
    sid, v = int(info["subject_id"]), int(info["visit_idx"])
    topic, tmeta = _topic(info, e1)
    return question_row(
        inp,
        task=TASK,
        subtype="natural_c2_lab_non_glucose",
        subject_ids=[sid],
        anchors=[e1["event_id"], e2["event_id"]],
        templates=T5_TEMPLATES,
        fields={"topic": topic},
        gold="no",
        meta={
            **_base_meta(info, e1),
            **tmeta,
            "other_event_id": e2["event_id"],
            "other_date": e2["date"],
            "other_hadm_id": int(e2["hadm_id"]),
            "other_value_text": str(e2["value_text"]).strip(),
        },
        extra_key=[f"topic={e1['event_id']}"],  # the anchors alone do not say which is asked
        conflicts=[f"visit:{sid}:{v}", f"visit:{sid}:{int(e2['visit_idx'])}"],
    )


SPEC = TaskSpec(
    name=TASK,
    title="Controlled contradiction detection",
    answer_format=FORMAT,
    max_tokens=80,
    answer=CONTRADICTION,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t5,
    leak=injection_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t5",
)
