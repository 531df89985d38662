"""T3 controlled attribution detection (paper §3 "Task suite" T3; §5.5 SP4; Appendix B.2).

Candidates are same-encounter (finding, problem) pairs: a covered abnormal lab and a covered
diagnosis of the same visit, clinically linked — the diagnosis belongs to a family of
:data:`FAMILY_LABS` (rules.T4_EVIDENCE plus hyperlipidemia) and the lab lies on the family's
side of its reference range (rules.T4_DIRECTION; lipids high). Pairs that the synthesised
dialogue may already link in its own words (one sentence of the encounter naming the lab and
the problem title or its condition, e.g. "... HbA1c ... your diabetes control needs
tightening") are skipped, so that a negative is really unattributed.

Each encounter is either a "Y" encounter (its pairs become positives: the sentence
``Physician noted: <finding> is consistent with <problem>.`` is injected as a clinician turn
right after the finding's turn) or an "N" encounter (nothing injected), by a stable hash of
(patient, visit) — so a positive and a negative never share an encounter and the injected
dialogue of a patient is unambiguous. At most :data:`MAX_PER_VISIT` pairs per encounter are
kept (stable hash; documented thinning). Gold ``yes`` / ``no``. Subtypes (Appendix B.2, Fig. 8):
``Y-admit``, ``Y-er``, ``N-admit``, ``N-er`` where ``er`` = emergency admission types
(generators.inputs.ER_ADMISSION_TYPES) and ``admit`` = the rest.
"""

from __future__ import annotations

import re

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import ATTRIBUTION
from clinlib.tasks.gates.leaks import injection_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    families_of,
    lab_direction,
    question_row,
    stable_hash,
    thin,
    to_frame,
)
from clinlib.tasks.injections import Injection
from clinlib.tasks.recompute.per_task import gold_t3
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T3_INJECTION, T3_TEMPLATES

TASK = "T3"
FORMAT = "Reply yes or no. " + ABSTAIN_CLAUSE
SUBTYPES = ("Y-admit", "Y-er", "N-admit", "N-er")
MAX_PER_VISIT = 3

FAMILY_LABS: dict[str, tuple[str, ...]] = {
    **rules.T4_EVIDENCE,
    "hyperlipidemia": ("ldl", "total_cholesterol", "triglycerides"),
}
FAMILY_DIRECTION: dict[str, str] = {**rules.T4_DIRECTION, "hyperlipidemia": "high"}
HYPERLIPIDEMIA_ICD: dict[int, tuple[str, ...]] = {9: ("2720", "2721", "2722", "2724"), 10: ("E78",)}
# Words that name a family's condition in a sentence (lay and clinical spellings).
FAMILY_WORDS: dict[str, tuple[str, ...]] = {
    "diabetes": ("diabet",),
    "ckd": ("chronic kidney disease", "ckd"),
    "cad": ("coronary", "myocardial infarction", "angina"),
    "hyperkalemia": ("hyperkal",),
    "anemia": ("anemi", "anaemi"),
    "hyponatremia": ("hyponatr",),
    "hyperlipidemia": ("hyperlipid",),
}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def pair_families(code: str, version: int | None) -> list[str]:
    """T3 families of a diagnosis code (T4 families + hyperlipidemia)."""
    fams = families_of(code, version, rules.T4_EVIDENCE)
    if version is not None and not pd.isna(version):
        c = str(code).strip().upper()
        if any(c.startswith(p) for p in HYPERLIPIDEMIA_ICD.get(int(version), ())):
            fams.append("hyperlipidemia")
    return fams


def visit_class(subject_id: int, visit_idx: int) -> str:
    """``Y`` or ``N``: whether an encounter's pairs are injected (stable hash)."""
    return "Y" if stable_hash("T3-class", int(subject_id), int(visit_idx)) % 2 == 0 else "N"


def natural_attribution(texts: list[str], lab_label: str, problem: str, family: str) -> bool:
    """True when one sentence of the encounter names the lab together with the problem title
    or a word for its condition (e.g. "That % Hemoglobin A1c of 7.6 % is above the normal
    range, which means your diabetes control needs tightening."): the dialogue may already
    link the two, so the pair is not a clean "no"."""
    lab, prob = lab_label.lower(), problem.lower()
    words = FAMILY_WORDS.get(family, ()) + (prob,)
    for t in texts:
        for sentence in _SENTENCE.split(t.lower()):
            if lab in sentence and any(w in sentence for w in words):
                return True
    return False


def finding_text(lab: dict) -> str:
    """``"<lab label> of <value> <unit>"``."""
    return f"{lab['label']} of {str(lab['value_text']).strip()} {str(lab['unit']).strip()}"


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T3 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = []
    for (sid, v), recs in sorted(inp.by_visit.items()):
        cov = [r for r in recs if r["status"] == "covered"]
        labs = [
            r
            for r in cov
            if r["kind"] == "lab" and r["lab_key"] is not None and r["flag"] == "abnormal"
        ]
        dxs = [r for r in cov if r["kind"] == "diagnosis"]
        if not labs or not dxs:
            continue
        info = inp.visit_info[(sid, v)]
        cls = visit_class(sid, v)
        texts = inp.visit_texts.get((sid, v), [])
        pairs: list[tuple[dict, dict, str]] = []
        for dx in dxs:
            fams = pair_families(dx["code"], dx["icd_version"])
            if not fams:
                continue
            for lab in labs:
                direction = lab_direction(lab)
                fam = next(
                    (
                        f
                        for f in fams
                        if lab["lab_key"] in FAMILY_LABS[f] and direction == FAMILY_DIRECTION[f]
                    ),
                    None,
                )
                if fam is None or natural_attribution(
                    texts, str(lab["label"]), str(dx["label"]), fam
                ):
                    continue
                pairs.append((lab, dx, fam))
        pairs = thin(
            pairs,
            key=lambda p: 0,
            ident=lambda p: (p[0]["event_id"], p[1]["event_id"]),
            cap=MAX_PER_VISIT,
            salt="T3",
        )
        rows += [_row(inp, int(sid), int(v), info, cls, lab, dx, fam) for lab, dx, fam in pairs]
    return to_frame(rows)


def _row(
    inp: TaskInputs, sid: int, v: int, info: dict, cls: str, lab: dict, dx: dict, fam: str
) -> dict:
    subtype = f"{cls}-{info['encounter']}"
    finding = finding_text(lab)
    problem = str(dx["label"])
    row = question_row(
        inp,
        task=TASK,
        subtype=subtype,
        subject_ids=[sid],
        anchors=[lab["event_id"], dx["event_id"]],
        templates=T3_TEMPLATES,
        fields={
            "date": info["date"],
            "lab": lab["label"],
            "value": str(lab["value_text"]).strip(),
            "unit": str(lab["unit"]).strip(),
            "problem": problem,
        },
        gold="yes" if cls == "Y" else "no",
        meta={
            "subject_id": sid,
            "hadm_id": int(info["hadm_id"]),
            "visit_idx": v,
            "date": info["date"],
            "admission_type": info["admission_type"],
            "encounter": info["encounter"],
            "lab_event_id": lab["event_id"],
            "lab": lab["lab_key"],
            "itemid": int(lab["code"]),
            "lab_date": lab["date"],
            "value_text": str(lab["value_text"]).strip(),
            "unit": str(lab["unit"]).strip(),
            "direction": lab_direction(lab),
            "dx_event_id": dx["event_id"],
            "dx_code": str(dx["code"]),
            "dx_version": int(dx["icd_version"]),
            "dx_title": problem,
            "family": fam,
            "injected": cls == "Y",
        },
    )
    if cls == "Y":
        row["injection"] = Injection(
            kind="t3",
            subject_id=sid,
            visit_idx=v,
            after_turn_idx=int(lab["turn"]),
            speaker="clinician",
            text=T3_INJECTION.format(finding=finding, problem=problem),
            qid=row["qid"],
        ).to_json()
    return row


SPEC = TaskSpec(
    name=TASK,
    title="Controlled attribution detection",
    answer_format=FORMAT,
    max_tokens=80,
    answer=ATTRIBUTION,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t3,
    leak=injection_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t3",
    example_column="injection",
)
