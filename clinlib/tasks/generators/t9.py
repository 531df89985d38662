"""T9 abstention (paper §3 "Task suite" T9; §5.4 SP3; Appendix B.6: 1,147 lab-anchored vs 353
other-anchored, ~76 % / 24 %; Appendix G.3-G.4).

Every gold is ``insufficient information`` (clinlib.tasks.base.ABSTAIN). Subtypes:

* ``lab`` — a missed lab event (deliberately unstated by the dialogue rule) that is the only
  event of its lab on its date; asked exactly like T1 (T1's templates and T1's answer format),
  so the wording cannot tell the two tasks apart. At most :data:`MISSED_PER_LAB` per
  (patient, lab), by stable hash.
* ``lab-unmeasured`` — a panel lab the patient has elsewhere in the record but that has no
  event at all on a day of an encounter on which other panel labs were drawn (also checked
  against the raw source's lab rows, any unit, when available); asked like T1, no anchor.
  At most :data:`UNMEASURED_PER_LAB` days per (patient, lab), by stable hash.
* ``other`` — a missed medication (the dialogue rule leaves every order of a background drug in
  an encounter unstated) with no covered order in that encounter of a drug with the same head
  word (:func:`clinlib.data.drugnames.drug_head`); orders are grouped by drug key
  (:func:`clinlib.data.drugnames.drug_key`) and the question names the first order's recorded name
  as the dialogue shows it. It asks the dose (T9's value-and-unit format) or the start (a date
  format plus the shared abstention clause), by a stable hash per drug and encounter.

No template contains a cue that the answer might be absent.
"""

from __future__ import annotations

import pandas as pd

from clinlib.data.drugnames import drug_display, drug_head, drug_key
from clinlib.data.vocab import LAB_BY_KEY
from clinlib.tasks.answers.formats import VALUE_FORMAT
from clinlib.tasks.answers.kinds import ABSTENTION
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.gates.leaks import abstention_cue_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    abstain_clause,
    format_instruction,
    lab_event_meta,
    panel_itemids,
    question_row,
    stable_hash,
    thin,
    to_frame,
)
from clinlib.tasks.recompute.per_task import gold_t9
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import (
    T1_TEMPLATES,
    T9_DOSE_TEMPLATES,
    T9_START_FORMAT,
    T9_START_TEMPLATES,
)

TASK = "T9"
SUBTYPES = ("lab", "lab-unmeasured", "other")
SUBTYPE_GROUP = {"lab": "lab", "lab-unmeasured": "lab", "other": "other"}
UNMEASURED_PER_LAB = 2
MISSED_PER_LAB = 3


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T9 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = _missed_labs(inp) + _unmeasured_labs(inp) + _missed_meds(inp)
    return to_frame(rows)


def _missed_labs(inp: TaskInputs) -> list[dict]:
    rows = []
    missed = [
        e
        for e in inp.records
        if e["kind"] == "lab"
        and e["lab_key"] is not None
        and e["status"] == "missed"
        and inp.lab_day_count[(e["subject_id"], e["lab_key"], e["date"])] == 1
    ]
    missed = thin(
        missed,
        key=lambda e: (e["subject_id"], e["lab_key"]),
        ident=lambda e: e["event_id"],
        cap=MISSED_PER_LAB,
        salt="T9",
    )
    for e in missed:
        rows.append(
            question_row(
                inp,
                task=TASK,
                subtype="lab",
                subject_ids=[e["subject_id"]],
                anchors=[e["event_id"]],
                templates=T1_TEMPLATES,
                fields={"lab": e["label"], "date": e["date"]},
                gold=ABSTAIN,
                fmt=format_instruction("T1"),
                meta={
                    **lab_event_meta(e),
                    "kind": "lab",
                },
                evidence_events=[],
            )
        )
    return rows


def _unmeasured_labs(inp: TaskInputs) -> list[dict]:
    rows = []
    raw = inp.raw_lab_days
    for sid, recs in sorted(inp.by_subject.items()):
        labs = [r for r in recs if r["kind"] == "lab" and r["lab_key"] is not None]
        days: dict[str, dict] = {}
        for r in labs:
            days.setdefault(r["date"], r)
        for lab in sorted({r["lab_key"] for r in labs}):
            free = [
                d
                for d in days.values()
                if (sid, lab, d["date"]) not in inp.lab_day_count
                and (raw is None or (sid, lab, d["date"]) not in raw)
            ]
            free.sort(key=lambda d, lab=lab: stable_hash("T9-unmeasured", sid, lab, d["date"]))
            for d in free[:UNMEASURED_PER_LAB]:
                rows.append(_unmeasured_row(inp, int(sid), lab, d))
    return rows


def _unmeasured_row(inp: TaskInputs, sid: int, lab: str, d: dict) -> dict:
    label = LAB_BY_KEY[lab].label
    return question_row(
        inp,
        task=TASK,
        subtype="lab-unmeasured",
        subject_ids=[sid],
        anchors=[],
        templates=T1_TEMPLATES,
        fields={"lab": label, "date": d["date"]},
        gold=ABSTAIN,
        fmt=format_instruction("T1"),
        meta={
            "subject_id": sid,
            "kind": "lab-unmeasured",
            "lab": lab,
            "itemids": panel_itemids(lab),
            "date": d["date"],
            "hadm_id": int(d["hadm_id"]),
            "visit_idx": int(d["visit_idx"]),
            "raw_checked": inp.raw_lab_days is not None,
        },
        extra_key=[lab, d["date"]],
        evidence_events=[],
    )


def _missed_meds(inp: TaskInputs) -> list[dict]:
    rows = []
    formats = {
        "dose": format_instruction("T9"),
        "start": f"{T9_START_FORMAT} {abstain_clause()}".strip(),
    }
    for (sid, v), recs in sorted(inp.by_visit.items()):
        meds = [r for r in recs if r["kind"] == "medication" and r["label"] is not None]
        stated = {drug_head(r["label"]) for r in meds if r["status"] == "covered"}
        groups: dict[str, list[dict]] = {}
        for r in meds:
            if r["status"] == "missed":
                groups.setdefault(drug_key(r["label"]), []).append(r)
        for generic, g in sorted(groups.items()):
            head = drug_head(g[0]["label"])
            if not generic or not head or head in stated:
                continue
            asked = "dose" if stable_hash("T9-other", sid, v, generic) % 2 == 0 else "start"
            info = inp.visit_info[(sid, v)]
            rows.append(
                question_row(
                    inp,
                    task=TASK,
                    subtype="other",
                    subject_ids=[sid],
                    anchors=[r["event_id"] for r in g],
                    templates=T9_DOSE_TEMPLATES if asked == "dose" else T9_START_TEMPLATES,
                    fields={"drug": drug_display(g[0]["label"]), "date": info["date"]},
                    gold=ABSTAIN,
                    fmt=formats[asked],
                    meta={
                        "subject_id": int(sid),
                        "kind": "medication",
                        "asked": asked,
                        "event_ids": [r["event_id"] for r in g],
                        "drug": str(g[0]["label"]),
                        "hadm_id": int(info["hadm_id"]),
                        "visit_idx": int(v),
                        "date": info["date"],
                    },
                    extra_key=[asked],
                    evidence_events=[],
                )
            )
    return rows


SPEC = TaskSpec(
    name=TASK,
    title="Abstention",
    answer_format=VALUE_FORMAT,
    max_tokens=80,
    answer=ABSTENTION,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t9,
    leak=abstention_cue_leak,
    anchor_status=("missed",),
    reader_policy="clinlib.eval.readers.policies:answer_t9",
)
