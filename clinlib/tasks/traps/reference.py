"""The reference material a judged trap question carries from generation to the judge's request
(MedMemoryBench Appendix D.1 "LLM-as-Judge Prompt Template": the TLA / SUA prompts read an
``<explanation>``; IG a ``<metadata_info>`` with ``required_patient_info`` and
``common_wrong_answer``; MCD ``<required_nodes_str>``, ``<hop_count>`` and
``<reasoning_pattern>``).

Every trap question has the columns :data:`REFERENCE_COLUMNS`; :func:`clinlib.eval.judge.scoring.
judge_fields` reads them into the prompt. What each type fills:

* ``judge_explanation`` (all six): where the gold comes from (the visit and the sentence that
  states it, the values and reference range, the rule and its citation).
* ``judge_metadata`` (IG): ``required_patient_info`` (each stated constraint) and
  ``common_wrong_answer`` (the generic recommendation that ignores them), as the seed's IG
  prompt names them.
* ``judge_nodes``, ``judge_hops``, ``judge_pattern`` (MCD): the chain's nodes, the number of
  expected causal links and the links themselves ("node 1 -> node 2: implies; ...").

MCD over every derived rule (:mod:`clinlib.tasks.traps.rules`), not only metformin: the nodes
are the lab value, the lab state the rule names, the order, and the contraindication. A node
that needs more than the dialogue states is made answerable by the question: the metformin
chain needs CKD-EPI 2021, which needs age and sex, so its question states them
(:func:`demographics`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

REFERENCE_COLUMNS: tuple[str, ...] = (
    "judge_explanation",
    "judge_metadata",
    "judge_nodes",
    "judge_hops",
    "judge_pattern",
)
MCD_QUESTION = (
    "Looking across the patient's visits, was there any point at which one of their "
    "medicines should not have been given? Explain the chain of evidence."
)
IG_WRONG = (
    "a generic recommendation (the usual first-line medicine for the condition, any "
    "formulation, any price) that does not mention the patient's stated {what}"
)
# the lab state each rule's chain passes through, and the unit its value is written in
RULE_STATE_NODE: dict[str, tuple[str, str]] = {
    "metformin_low_egfr": ("eGFR below 30 mL/min/1.73 m² (CKD-EPI 2021)", "mg/dL"),
    "potassium_hyperkalaemia": ("potassium above the upper reference limit", "mEq/L"),
    "anticoagulant_thrombocytopenia": ("platelets below 50 K/uL", "K/uL"),
    "nephrotoxin_aki": ("acute kidney injury by the KDIGO creatinine rise", "mg/dL"),
}
RELATIONS: tuple[tuple[int, int, str], ...] = (
    (0, 1, "implies"),
    (1, 3, "contraindicates"),
    (2, 3, "conflicts with"),
)


def reference(
    explanation: str = "",
    metadata: str = "",
    nodes: Sequence[str] = (),
    relations: Sequence[tuple[int, int, str]] = (),
) -> dict[str, Any]:
    """The :data:`REFERENCE_COLUMNS` of one question."""
    return {
        "judge_explanation": explanation,
        "judge_metadata": metadata,
        "judge_nodes": [str(n) for n in nodes],
        "judge_hops": len(relations),
        "judge_pattern": pattern_text(relations),
    }


def pattern_text(relations: Sequence[tuple[int, int, str]]) -> str:
    """``"node 1 -> node 2: implies; node 2 -> node 4: contraindicates"`` (1-based)."""
    return "; ".join(f"node {a + 1} -> node {b + 1}: {how}" for a, b, how in relations)


def parse_pattern(text: str) -> list[tuple[int, int]]:
    """The (from, to) node numbers (1-based) of a :func:`pattern_text`."""
    out = []
    for part in str(text or "").split(";"):
        left, _, _ = part.partition(":")
        a, _, b = left.partition("->")
        try:
            out.append((int(a.split()[-1]), int(b.split()[-1])))
        except (ValueError, IndexError):
            continue
    return out


def ig_metadata(constraints: Mapping[str, Mapping[str, Any]]) -> str:
    """IG's ``<metadata_info>``: each stated constraint as required_patient_info, and the
    common wrong answer."""
    info = [f"{k}: {r['statement']}" for k, r in sorted(constraints.items())]
    what = ", ".join(sorted(constraints))
    return (
        "Metadata: required_patient_info: ["
        + " | ".join(info)
        + "]; common_wrong_answer: "
        + IG_WRONG.format(what=what)
    )


def demographics(age: float, female: bool) -> str:
    """``"a 67-year-old woman"``: what CKD-EPI 2021 needs besides creatinine."""
    return f"a {int(round(age))}-year-old {'woman' if female else 'man'}"


def mcd_material(trap: Mapping[str, Any], age_sex: str = "") -> dict[str, Any]:
    """Question, gold text and reference of the MCD question on one derived trap (any rule).

    Args:
        trap: a derived trap_facts row (``rule``, ``detail`` JSON with lab, lab_value,
            lab_time, order_drug, order_time, source).
        age_sex: :func:`demographics` of the patient at the draw (needed by the metformin
            chain; "" for the other rules).
    """
    d = json.loads(trap["detail"])
    state, unit = RULE_STATE_NODE[str(trap["rule"])]
    nodes = [
        f"{str(d['lab']).lower()} {d['lab_value']} {unit} on {d['lab_time'][:10]}",
        state,
        f"{d['order_drug']} ordered on {d['order_time'][:10]}",
        f"{trap['value']} is contraindicated in that state",
    ]
    question = MCD_QUESTION if not age_sex else f"The patient is {age_sex}. {MCD_QUESTION}"
    gold = (
        "; ".join(nodes[:3]) + f" — so the order conflicts with the patient's state: "
        f"{trap['value']} is contraindicated when {state}."
    )
    explanation = (
        f"Rule {trap['rule']} ({d['source']}): the latest {d['lab']} before the order "
        f"meets '{state}', and the order falls in the class '{trap['value']}'."
    )
    return {
        "question": question,
        "gold_text": gold,
        "meta": {"nodes": nodes, "relations": [list(r) for r in RELATIONS], "rule": trap["rule"]},
        "ref": reference(explanation, "", nodes, RELATIONS),
    }
