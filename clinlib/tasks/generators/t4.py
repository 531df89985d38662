"""T4 retrospective propagation (paper §3 "Task suite" T4: "Given a later diagnosis, list the
earlier findings constituting its evidence"; Appendix B.4, Fig. 10).

For each kept patient and each family of rules.T4_EVIDENCE (ICD prefixes from
clinlib.data.vocab.INDEX_DISEASE_ICD or rules.T4_EXTRA_FAMILIES): the family's first visit v is the
earliest visit with any diagnosis row of the family (whatever its coverage). With v >= 1, the
evidence is every lab event of the family's labs in visits < v that is flagged abnormal on the
family's side of the range (rules.T4_DIRECTION). A question needs T4_MIN_EVIDENCE..
T4_MAX_EVIDENCE evidence events, ALL of them covered (otherwise the dialogue could not show the
full gold set, and a recomputation from the raw tables would disagree), and a covered anchor
diagnosis in visit v (the first of the family's rows there by event order). Gold = the
evidence event ids sorted and joined by ";". Subtype = the family (Fig. 10A). The context must
be rendered with event-id tags (clinlib.dialogue.render.render_dialogue(with_ids=True)).
"""

from __future__ import annotations

import pandas as pd

from clinlib.data.vocab import LAB_BY_KEY
from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import EVENT_IDS
from clinlib.tasks.gates.leaks import ids_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    families_of,
    family_prefixes,
    lab_direction,
    panel_itemids,
    question_row,
    to_frame,
)
from clinlib.tasks.generators.inputs import event_sort_key
from clinlib.tasks.recompute.per_task import gold_t4
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T4_TEMPLATES

TASK = "T4"
FORMAT = (
    "Reply with the event ids only, separated by semicolons (for example: "
    "LAB-101;LAB-202). " + ABSTAIN_CLAUSE
)
SUBTYPES = tuple(rules.T4_EVIDENCE)


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T4 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = []
    for sid, recs in sorted(inp.by_subject.items()):
        dxs = [
            (r, families_of(r["code"], r["icd_version"], rules.T4_EVIDENCE))
            for r in recs
            if r["kind"] == "diagnosis"
        ]
        labs = [
            r
            for r in recs
            if r["kind"] == "lab" and r["lab_key"] is not None and r["flag"] == "abnormal"
        ]
        for fam in rules.T4_EVIDENCE:
            fdx = [r for r, fams in dxs if fam in fams]
            if not fdx:
                continue
            v = min(r["visit_idx"] for r in fdx)
            if v < 1:
                continue
            at_v = sorted((r for r in fdx if r["visit_idx"] == v), key=event_sort_key)
            anchor = next((r for r in at_v if r["status"] == "covered"), None)
            if anchor is None:
                continue
            evid = [
                r
                for r in labs
                if r["visit_idx"] < v
                and r["lab_key"] in rules.T4_EVIDENCE[fam]
                and lab_direction(r) == rules.T4_DIRECTION[fam]
            ]
            if not rules.T4_MIN_EVIDENCE <= len(evid) <= rules.T4_MAX_EVIDENCE:
                continue
            if any(r["status"] != "covered" for r in evid):
                continue
            rows.append(_row(inp, int(sid), fam, v, anchor, evid))
    return to_frame(rows)


def _row(inp: TaskInputs, sid: int, fam: str, v: int, anchor: dict, evid: list[dict]) -> dict:
    ids = sorted(str(e["event_id"]) for e in evid)
    date = inp.visit_date(sid, v)
    vis = inp.visits
    earlier = sorted(
        int(h) for h in vis.loc[(vis["subject_id"] == sid) & (vis["visit_idx"] < v), "hadm_id"]
    )
    return question_row(
        inp,
        task=TASK,
        subtype=fam,
        subject_ids=[sid],
        anchors=[anchor["event_id"], *ids],
        templates=T4_TEMPLATES,
        fields={
            "date": date,
            "problem": anchor["label"],
            "code": anchor["code"],
            "labs": " or ".join(LAB_BY_KEY[k].label for k in rules.T4_EVIDENCE[fam]),
        },
        gold=";".join(ids),
        meta={
            "subject_id": sid,
            "family": fam,
            "icd_prefixes": {str(k): list(p) for k, p in family_prefixes(fam).items()},
            "dx_event_id": anchor["event_id"],
            "dx_code": str(anchor["code"]),
            "dx_version": int(anchor["icd_version"]),
            "dx_hadm_id": int(anchor["hadm_id"]),
            "dx_visit_idx": v,
            "dx_date": date,
            "labs": list(rules.T4_EVIDENCE[fam]),
            "itemids": [i for lab in rules.T4_EVIDENCE[fam] for i in panel_itemids(lab)],
            "direction": rules.T4_DIRECTION[fam],
            "earlier_hadm_ids": earlier,
            "evidence": [
                {
                    "event_id": str(e["event_id"]),
                    "lab": e["lab_key"],
                    "itemid": int(e["code"]),
                    "date": e["date"],
                    "hadm_id": int(e["hadm_id"]),
                    "value": float(e["value"]),
                }
                for e in sorted(evid, key=lambda e: str(e["event_id"]))
            ],
        },
    )


SPEC = TaskSpec(
    name=TASK,
    title="Retrospective propagation",
    answer_format=FORMAT,
    max_tokens=120,
    answer=EVENT_IDS,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t4,
    leak=ids_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t4",
)
