"""One trap question as a row, and the query types' answer formats (MedMemoryBench §5
"Query Design", Table 1: S string match, O option match, L LLM-as-judge).

The seed judges TLA, SUA, IG and MCD (MedMemoryBench Appendix D.1 "LLM-as-Judge Prompt Template": "we use
LLM-as-Judge for four query types ... TLA, SUA, IG, and MCD"), so those four are ``L`` here;
EEM is a string match and MQ an option match scored as a set ("Select all correct options",
the seed's MQ prompt).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from clinlib.tasks.generators.common import make_qid, stable_hash
from clinlib.tasks.traps.reference import reference

QUERY_TYPES: tuple[str, ...] = ("EEM", "TLA", "SUA", "MQ", "IG", "MCD")
ANSWER_FORMAT: dict[str, str] = {
    "EEM": "S",
    "TLA": "L",
    "SUA": "L",
    "MQ": "O",
    "IG": "L",
    "MCD": "L",
}
LETTERS = "ABCDEFGH"


def trap_question(
    qtype,
    sid,
    anchors,
    question,
    gold,
    options,
    risk,
    trap_id,
    meta,
    info,
    sub="",
    gold_text="",
    criteria=(),
    ref=None,
) -> dict:
    """One trap question row (QUESTION_COLUMNS + the trap columns). An L question's ``gold``
    is its key for the second-route gate (a date, a lab state) or, when none is given, its
    reference answer ``gold_text``; an O question's ``gold_text`` is its options' texts."""
    qid = make_qid(
        qtype, [sid], anchors, sub or qtype, [json.dumps(meta, sort_keys=True, default=str)]
    )
    gold = gold or gold_text
    if not gold_text and options:  # O: the correct options' text, not their letters
        picked = [x.strip() for x in str(gold).split(",") if x.strip()]
        gold_text = "; ".join(f"{x}. {options[LETTERS.index(x)]}" for x in picked)
    if ANSWER_FORMAT[qtype] == "L" and not criteria:
        criteria = ["correct"]
    return {
        "qid": qid,
        "task": qtype,
        "subtype": sub or qtype,
        "subject_ids": [int(sid)],
        "question": question,
        "gold": gold,
        "options": list(options),
        "anchor_event_ids": list(anchors),
        "evidence_turns": [],
        "disease": info["disease"],
        "tertile": info["tertile"],
        "template_id": 0,
        "injection": "",
        "meta": json.dumps(meta, sort_keys=True, default=str),
        "query_type": qtype,
        "answer_format": ANSWER_FORMAT[qtype],
        "risk_category": risk,
        "trap_id": trap_id,
        "gold_text": gold_text or gold,
        "judge_criteria": [str(c) for c in criteria],
        **(ref or reference()),
    }


def shuffled(options: Sequence[str], correct: Sequence[int], *key) -> tuple[list[str], str]:
    """``options`` in a stable hash order of ``key`` and the comma-joined letters of the
    ``correct`` ones there (sorted): a multi-select question whose gold letters vary from
    patient to patient (the ``distribution`` gate)."""
    order = sorted(range(len(options)), key=lambda i: stable_hash("mq-order", *key, i))
    out = [options[i] for i in order]
    letters = sorted(LETTERS[order.index(i)] for i in correct)
    return out, ",".join(letters)
