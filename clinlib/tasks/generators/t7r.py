"""T7R medication retrieval, explicit vs relative: an extended task beside T7 (LongMedBench,
the retrieval task of its Table 2, Medication column: "a ground truth event E^k_i ∈ V_i is
randomly sampled ... Explicit tasks include t^k_i in the query text ... Relative questions
provide only relative temporal relationships without timestamp (e.g. the medicine name in the
2nd medication event of V_i)"). Not part of the paper's 6,271 questions.

The sampled event is a MEDICATION EVENT of a visit, named by its rank k among the visit's
medication events in time order. Every candidate is a PAIR over one such event:

* ``relative``: "the <k-th> medication event of the patient's <N-th> hospital stay" (both
  ranks in words; the stem states no number, gate L3);
* ``explicit``: "which of these medications was ordered on <date>" (t^k_i at the resolution
  the dialogue states: a date).

Eligibility (so that both names pick ONE event from what the dialogue shows — it states dates,
not minutes, and lists a day's orders alphabetically): the event's drug has a generic name
(:func:`clinlib.tasks.generators.treatments.drug_match`); it is the ONLY medication event of its
visit on its calendar day, so its rank k = 1 + the visit's medication events on earlier days,
whatever their order within a day; every medication event of the visit up to it is covered in
the dialogue; k <= :data:`MAX_POSITION`.

Options = the answer's generic name + three DISTRACTORS THAT OCCUR ELSEWHERE IN THE RECORD: the
generic names of the patient's other COVERED medication events (so each is stated in the
dialogue) — the same visit's other ranks first,
then the other visits nearest in rank (a stable-hash order within a group) — never ordered on
the target's day, never the answer's generic, no substring relation with the answer, each
other or the target's recorded name. So the presence of an option in the context says nothing
about which one is the answer (T7's distractors, absent from the record, made presence the
answer); ``tests/tasks/test_t7r.py`` holds a presence reader at chance. A candidate without
three such distractors is dropped. Events are thinned to MAX_PER_VISIT per visit by a stable
hash. The answer's LETTER rotates A, B, C, D over the pairs in a stable-hash order (the
distractors fill the other letters in a stable-hash order), so a reader that always picks one
letter, or the first option it finds, is held at chance over the set. ``meta["pair"]`` (the anchor) links the twins; selection is T1R's
(:func:`clinlib.tasks.relative.select_t1r`). Gate L2: :func:`clinlib.tasks.recompute.t1r.
recompute_t7r` from the raw prescriptions.
"""

from __future__ import annotations

import pandas as pd

from clinlib.data.drugnames import drug_words, has_phrase
from clinlib.dialogue.turns import ordinal_word
from clinlib.tasks import rules
from clinlib.tasks.answers.kinds import OPTION
from clinlib.tasks.base import STATED_NUMBER
from clinlib.tasks.gates.leaks import relative_option_leak
from clinlib.tasks.generators import t7
from clinlib.tasks.generators.common import (
    TaskInputs,
    make_qid,
    question_row,
    stable_hash,
    thin,
    to_frame,
)
from clinlib.tasks.generators.inputs import timestamp
from clinlib.tasks.generators.treatments import display_name, drug_match, leaks
from clinlib.tasks.recompute.t1r import recompute_t7r
from clinlib.tasks.spec import TaskSpec

TASK = "T7R"
SUBTYPES = ("explicit", "relative")
MAX_POSITION = 10
MAX_PER_VISIT = 2
EXPLICIT_TEMPLATES: tuple[str, ...] = (
    "Which of these medications was ordered for the patient on {date}?",
    "On {date}, which of these medications did the patient receive?",
    "Which drug was started for the patient on {date}?",
)
RELATIVE_TEMPLATES: tuple[str, ...] = (
    "Which medication was the {rank} medication event of the patient's {visit} hospital stay?",
    "During the patient's {visit} hospital stay, which drug was the {rank} medication event?",
    "What was the medicine in the {rank} medication event of the {visit} hospital stay?",
)


def medication_events(recs: list[dict]) -> list[dict]:
    """A visit's medication events in time order (the records' order)."""
    return [r for r in recs if r["kind"] == "medication" and r["label"] is not None]


def eligible(meds: list[dict]) -> list[tuple[dict, int]]:
    """(event, 1-based rank) of every eligible event of one visit (module docstring)."""
    per_day: dict[str, int] = {}
    for r in meds:
        per_day[r["date"]] = per_day.get(r["date"], 0) + 1
    out, covered = [], True
    for k, r in enumerate(meds, start=1):
        covered = covered and r["status"] == "covered"
        if k > MAX_POSITION or not covered:
            break
        if per_day[r["date"]] == 1 and drug_match(str(r["label"])) is not None:
            out.append((r, k))
    return out


def _generic(r: dict) -> str | None:
    m = drug_match(str(r["label"]))
    return display_name(m[1]) if m else None


def distractors(qid: str, target: dict, visits: dict[int, list[dict]]) -> list[str] | None:
    """Three generic names of the patient's other medication events (module docstring), the
    target's visit first, then by distance in rank; None when fewer than three qualify."""
    answer, own_words = _generic(target), drug_words(target["label"])
    on_day = {
        g
        for recs in visits.values()
        for r in recs
        if r["date"] == target["date"] and (g := _generic(r))
    }
    v0 = int(target["visit_idx"])
    chosen: list[str] = []
    for v in sorted(visits, key=lambda v: (abs(v - v0), v)):
        names = {g for r in visits[v] if r["status"] == "covered" and (g := _generic(r))}
        for cand in sorted(names, key=lambda c: stable_hash(qid, "distractor", c)):
            if (
                cand in on_day
                or leaks(cand, answer)
                or any(leaks(cand, c) for c in chosen)
                or has_phrase(own_words, drug_words(cand))
            ):
                continue
            chosen.append(cand)
            if len(chosen) == t7.N_DISTRACTORS:
                return chosen
    return None


def _pair(inp: TaskInputs, e: dict, k: int, visits: dict[int, list[dict]], slot: int) -> list[dict]:
    sid, v = int(e["subject_id"]), int(e["visit_idx"])
    qid = make_qid(TASK, [sid], [e["event_id"]], "pair")
    wrong = distractors(qid, e, visits)
    if wrong is None:
        return []
    answer = _generic(e)
    options = t7.order_options(qid, wrong)
    options.insert(slot, answer)
    gold = rules.OPTION_LETTERS[slot]
    info = inp.visit_info[(sid, v)]
    meta = {
        "subject_id": sid,
        "hadm_id": int(info["hadm_id"]),
        "visit_idx": v,
        "date": e["date"],
        "event_id": e["event_id"],
        "position": k,
        "kind": "medication",
        "drug": str(e["label"]),
        "answer": answer,
        "distractors": wrong,
        "options": options,
        "start": timestamp(e["t"]).isoformat(),
        "pair": e["event_id"],
    }
    common = {
        "inp": inp,
        "task": TASK,
        "subject_ids": [sid],
        "anchors": [e["event_id"]],
        "gold": gold,
        "meta": meta,
        "options": options,
        "suffix": t7.options_block(options),
        "fmt": t7.FORMAT,
    }
    explicit = question_row(
        subtype="explicit", templates=EXPLICIT_TEMPLATES, fields={"date": e["date"]}, **common
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
    """All T7R candidates: an explicit and a relative row per eligible medication event
    (QUESTION_COLUMNS + conflicts), sorted by qid."""
    per_patient: dict[int, dict[int, list[dict]]] = {}
    for (sid, v), recs in inp.by_visit.items():
        per_patient.setdefault(int(sid), {})[int(v)] = medication_events(recs)
    cands = [
        (e, k)
        for visits in per_patient.values()
        for meds in visits.values()
        for e, k in eligible(meds)
    ]
    keys = thin(
        [(int(e["subject_id"]), int(e["visit_idx"]), e["event_id"]) for e, _ in cands],
        key=lambda x: (x[0], x[1]),
        ident=lambda x: x[2],
        cap=MAX_PER_VISIT,
        salt=TASK,
    )
    kept = {x[2] for x in keys}
    chosen = sorted(
        ((e, k) for e, k in cands if e["event_id"] in kept),
        key=lambda p: stable_hash(TASK, "slot", p[0]["event_id"]),
    )
    rows: list[dict] = []
    for e, k in chosen:  # the answer's letter rotates over the pairs (module docstring)
        found = _pair(inp, e, k, per_patient[int(e["subject_id"])], len(rows) // 2 % 4)
        rows += found
    return to_frame(rows)


SPEC = TaskSpec(
    name=TASK,
    title="Medication retrieval by event rank, explicit vs relative (extended set)",
    answer_format=t7.FORMAT,
    max_tokens=80,
    answer=OPTION,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute_t7r,
    leak=relative_option_leak,
    counts={"paper": 400, "quick": 16},
    select="clinlib.tasks.relative:select_t1r",
    options="texts",
)
