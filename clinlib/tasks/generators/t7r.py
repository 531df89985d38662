"""T7R medication retrieval, explicit vs relative: an extended task beside T7 (LongMedBench
"event retrieval", Table 2's Medication column beside its lab columns; T1R is the lab
counterpart). Not part of the paper's 6,271 questions.

Every candidate is a PAIR built from one of T7's medication candidates (paper §3 T7: four
generic-drug options, three distractors absent from the patient's record, gold the letter of
the drug given during one encounter): the ``explicit`` twin is T7's question verbatim (the
encounter named by its admission date), the ``relative`` twin names the same encounter by its
rank in words ("the third hospital stay", :data:`clinlib.tasks.templates.
T7R_RELATIVE_TEMPLATES`). Both share the options, the gold and the anchor; ``meta["pair"]``
(the anchor) links them, so the selection is T1R's (:func:`clinlib.tasks.relative.select_t1r`)
and explicit vs relative accuracy is paired. Answers are read as T7's
(its spec's answer kind is T7's ``OPTION``); gate L2 is T7's recomputation (the drug
documented in that admission only); L3 is T7's rule, and a relative stem states no number.
"""

from __future__ import annotations

import json

import pandas as pd

from clinlib.dialogue.turns import ordinal_word
from clinlib.tasks.answers.kinds import OPTION
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates.leaks import relative_option_leak
from clinlib.tasks.generators import t7
from clinlib.tasks.generators.common import question_row, to_frame
from clinlib.tasks.generators.inputs import TaskInputs
from clinlib.tasks.recompute.per_task import gold_t7
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T7_MEDICATION_TEMPLATES, T7R_RELATIVE_TEMPLATES

TASK = "T7R"
SUBTYPES = ("explicit", "relative")


def _twins(inp: TaskInputs, row: dict) -> list[dict]:
    meta = {**json.loads(row["meta"]), "pair": row["anchor_event_ids"][0]}
    common = {
        "inp": inp,
        "task": TASK,
        "subject_ids": list(row["subject_ids"]),
        "anchors": list(row["anchor_event_ids"]),
        "gold": row["gold"],
        "meta": meta,
        "options": list(row["options"]),
        "suffix": t7.options_block(list(row["options"])),
        "fmt": t7.FORMAT,
    }
    explicit = question_row(
        subtype="explicit",
        templates=T7_MEDICATION_TEMPLATES,
        fields={"date": meta["date"]},
        **common,
    )
    relative = question_row(
        subtype="relative",
        templates=T7R_RELATIVE_TEMPLATES,
        fields={"visit": ordinal_word(int(meta["visit_idx"]) + 1)},
        **common,
    )
    if STATED_NUMBER.search(relative["_body"]):
        return []
    return [explicit, relative]


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T7R candidates: an explicit and a relative row per T7 medication candidate
    (QUESTION_COLUMNS + conflicts), sorted by qid."""
    base = t7.generate(inp)
    meds = base[base["subtype"] == "medication"]
    return to_frame([r for row in meds.to_dict("records") for r in _twins(inp, row)])


def recompute(meta, q, raw, status):
    """Gate L2 (both twins): T7's medication rule on the shared meta and options."""
    return gold_t7(meta, {**dict(q), "subtype": "medication"}, raw, status)


SPEC = TaskSpec(
    name=TASK,
    title="Medication retrieval, explicit vs relative (extended set)",
    answer_format=t7.FORMAT,
    max_tokens=80,
    answer=OPTION,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute,
    leak=relative_option_leak,
    counts={"paper": 400, "quick": 16},
    select="clinlib.tasks.relative:select_t1r",
    options="texts",
)
