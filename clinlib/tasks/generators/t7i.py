"""T7I imaging retrieval, explicit vs relative: an extended task beside T7R (LongMedBench, the
retrieval task of its Table 2, whose event E^k_i has as argument p "the modality (CT, X-ray,
MRI) of an imaging event" and as observation o "the radiology report"; "Explicit tasks include
t^k_i in the query text ... Relative questions provide only relative temporal relationships
without timestamp"). Not part of the paper's 6,271 questions.

The sampled event is an IMAGING EVENT (:mod:`clinlib.data.sources.radiology`: synthetic studies
of the stay, one report each) named by its rank k among the stay's imaging events in time
order; the answer is the study, modality and region ("CT abdomen"). Every candidate is a PAIR:

* ``relative``: "the <k-th> imaging event of the patient's <N-th> hospital stay" (ranks in
  words; the first line states no number, gate L3);
* ``explicit``: "which imaging study was performed on <date>".

Deviation, named here: the kit's dialogues carry no imaging turns (the synthetic hosp tables
hold no imaging), so the question states the imaging part of the event memory itself: the
patient's stays as admission and discharge lines and every radiology report between them, in
one chronological sequence WITHOUT visit numbers (the seed's flattened M_E), the whole record
(the seed's m = inf window). A relative question is answered by counting admissions and
reports, an explicit one by the report's date.

Eligibility: the study is the only imaging study of the patient on its calendar day (so the
date names it). Options = the answer + three DISTRACTORS THAT OCCUR IN THE SAME MEMORY: other
studies of the patient (the same stay's other ranks first, then the nearest stays; a stable
hash within a stay), never one on the target's day, never the answer's own study; a candidate
without three is dropped. So "the option that occurs in the context" says nothing about the
answer (``tests/tasks/test_t7i.py``). The answer's letter rotates A-D over the pairs.
Anchor: the stay's admission event (the imaging event id is ``meta.image_event_id``). Gate L2:
:func:`recompute_t7i` from the raw admissions table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import pandas as pd

from clinlib.data.sources.radiology import (
    report_sentences,
    stay_studies,
    studies_by_stay,
    study,
)
from clinlib.dialogue.turns import ordinal_word
from clinlib.tasks import rules
from clinlib.tasks.answers.kinds import OPTION
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.generators import t7
from clinlib.tasks.generators.common import (
    TaskInputs,
    make_qid,
    question_row,
    stable_hash,
    to_frame,
)
from clinlib.tasks.recompute.per_task import Recomputed, meta_get
from clinlib.tasks.source_text import as_data
from clinlib.tasks.spec import TaskSpec

TASK = "T7I"
SUBTYPES = ("explicit", "relative")
MEMORY_HEADER = "Imaging memory (hospital stays and radiology reports in time order):"
EXPLICIT_TEMPLATES: tuple[str, ...] = (
    "Which imaging study was performed for the patient on {date}?",
    "On {date}, which imaging study did the patient have?",
)
RELATIVE_TEMPLATES: tuple[str, ...] = (
    "Which study was the {rank} imaging event of the patient's {visit} hospital stay?",
    "During the patient's {visit} hospital stay, which study was the {rank} imaging event?",
)


def memory_lines(stays: list[Mapping], studies: Mapping[int, list[Mapping]]) -> list[str]:
    """The flattened imaging memory: per stay (in order) an admission line, its reports, a
    discharge line; no visit numbers."""
    lines = []
    for s in stays:
        lines.append(f"{pd.Timestamp(s['admit']).strftime('%Y-%m-%d')}: admitted to hospital.")
        for e in studies.get(int(s["visit_idx"]), []):
            lines.append("Radiology report. " + " ".join(map(as_data, report_sentences(e))))
        lines.append(f"{pd.Timestamp(s['disch']).strftime('%Y-%m-%d')}: discharged.")
    return lines


def _day(e: Mapping) -> str:
    return pd.Timestamp(e["time"]).strftime("%Y-%m-%d")


def distractors(
    qid: str, target: Mapping, studies: Mapping[int, list[Mapping]]
) -> list[str] | None:
    """Three other studies of the patient's memory (module docstring); None if fewer."""
    answer, v0 = study(target["modality"], target["region"]), int(target["visit_idx"])
    on_day = {
        study(e["modality"], e["region"])
        for es in studies.values()
        for e in es
        if _day(e) == _day(target)
    }
    chosen: list[str] = []
    for v in sorted(studies, key=lambda v: (abs(v - v0), v)):
        names = {study(e["modality"], e["region"]) for e in studies[v]}
        for cand in sorted(names, key=lambda c: stable_hash(qid, "distractor", c)):
            if cand == answer or cand in on_day or cand in chosen:
                continue
            chosen.append(cand)
            if len(chosen) == t7.N_DISTRACTORS:
                return chosen
    return None


def _patient(inp: TaskInputs, sid: int) -> tuple[list[dict], dict[int, list[Mapping]]]:
    stays = [
        {
            "visit_idx": int(v),
            "hadm_id": int(r["hadm_id"]),
            "admit": r["admit_time"],
            "disch": r["disch_time"],
        }
        for (s, v), r in sorted(inp.visit_info.items())
        if s == sid
    ]
    events = [
        e
        for st in stays
        for e in stay_studies(sid, st["hadm_id"], st["visit_idx"], st["admit"], st["disch"])
    ]
    return stays, studies_by_stay(events)


def _pair(inp: TaskInputs, sid: int, e: Mapping, k: int, patient, slot: int) -> list[dict]:
    stays, studies = patient
    v = int(e["visit_idx"])
    adm = next((r for r in inp.by_visit.get((sid, v), []) if r["kind"] == "admission"), None)
    qid = make_qid(TASK, [sid], [e["event_id"]], "pair")
    wrong = distractors(qid, e, studies)
    if adm is None or wrong is None:
        return []
    answer = study(e["modality"], e["region"])
    options = t7.order_options(qid, wrong)
    options.insert(slot, answer)
    meta = {
        "subject_id": sid,
        "hadm_id": int(e["hadm_id"]),
        "visit_idx": v,
        "date": _day(e),
        "image_event_id": e["event_id"],
        "position": k,
        "kind": "imaging",
        "answer": answer,
        "distractors": wrong,
        "options": options,
        "pair": e["event_id"],
    }
    memory = "\n".join([MEMORY_HEADER, *memory_lines(stays, studies)])
    common = {
        "inp": inp,
        "task": TASK,
        "subject_ids": [sid],
        "anchors": [str(adm["event_id"])],
        "gold": rules.OPTION_LETTERS[slot],
        "meta": meta,
        "options": options,
        "suffix": memory + "\n" + t7.options_block(options),
        "fmt": t7.FORMAT,
        "extra_key": [e["event_id"]],
    }
    explicit = question_row(
        subtype="explicit", templates=EXPLICIT_TEMPLATES, fields={"date": _day(e)}, **common
    )
    relative = question_row(
        subtype="relative",
        templates=RELATIVE_TEMPLATES,
        fields={"visit": ordinal_word(v + 1), "rank": ordinal_word(k)},
        **common,
    )
    if STATED_NUMBER.search(relative["_body"]):
        return []
    return [explicit, relative]


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T7I candidates: an explicit and a relative row per eligible imaging event."""
    rows: list[dict] = []
    cands = []
    for sid in sorted({int(s) for s, _ in inp.visit_info}):
        patient = _patient(inp, sid)
        days = pd.Series([_day(e) for es in patient[1].values() for e in es]).value_counts()
        for es in patient[1].values():
            cands += [(sid, e, k, patient) for k, e in enumerate(es, start=1) if days[_day(e)] == 1]
    cands.sort(key=lambda c: stable_hash(TASK, "slot", c[1]["event_id"]))
    for sid, e, k, patient in cands:  # the answer's letter rotates over the pairs
        rows += _pair(inp, sid, e, k, patient, len(rows) // 2 % 4)
    return to_frame(rows)


def recompute_t7i(meta, q, raw, status: Mapping[str, str]) -> Recomputed:
    """L2: the studies of the raw admission of rank ``meta.visit_idx`` (same synthesis, from
    raw admittime / dischtime); ``explicit``: the patient's one study on ``meta.date``;
    ``relative``: the stay's study of rank ``meta.position``, which must be the same. Exactly
    one option names it; every other option names a study elsewhere in the record."""
    sid, want = int(meta_get(meta, "subject_id")), int(meta_get(meta, "visit_idx"))
    every = []
    for v in raw.records("visits", sid):
        every += stay_studies(
            sid, int(v["hadm_id"]), int(v["visit_idx"]), v["admittime"], v["dischtime"]
        )
    by_stay, date = studies_by_stay(every), str(meta_get(meta, "date"))
    on_day = [e for e in every if _day(e) == date]
    stay, k = by_stay.get(want, []), int(meta_get(meta, "position"))
    if (
        len(on_day) != 1
        or not 1 <= k <= len(stay)
        or stay[k - 1]["event_id"] != on_day[0]["event_id"]
    ):
        return Recomputed(
            None, problem=f"rank {k} of stay {want} and date {date} do not name one study"
        )
    options = [str(o) for o in json.loads(json.dumps(list(q["options"])))]
    answer = study(on_day[0]["modality"], on_day[0]["region"])
    names = {study(e["modality"], e["region"]) for e in every}
    if options.count(answer) != 1 or not set(options) <= names:
        return Recomputed(
            None, problem="the options do not name the study once, or name one absent"
        )
    return Recomputed(rules.OPTION_LETTERS[options.index(answer)])


def imaging_leak(row: Mapping) -> str | None:
    """L3: the question's first line (before the memory) states a number (relative) or names
    the answer."""
    first = str(row["question"]).split("\n", 1)[0]
    if str(row["subtype"]) == "relative" and STATED_NUMBER.search(first):
        return "the relative stem states a number"
    options = list(row.get("options") if row.get("options") is not None else [])
    gold = str(row["gold"])
    if gold in rules.OPTION_LETTERS and len(options) == 4:
        answer = str(options[rules.OPTION_LETTERS.index(gold)])
        if re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", first, re.I):
            return f"the stem names the answer {answer!r}"
    return None


SPEC = TaskSpec(
    name=TASK,
    title="Imaging retrieval by event rank, explicit vs relative (extended set)",
    answer_format=t7.FORMAT,
    max_tokens=80,
    answer=OPTION,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute_t7i,
    leak=imaging_leak,
    counts={"paper": 400, "quick": 16},
    select="clinlib.tasks.generators.t7i_select:select_t7i",
    options="texts",
    anchor_status=("covered", "missed"),
)
