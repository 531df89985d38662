"""LongMedBench's contextual memory M_C written by a backbone (optional; rule-based by default).

The seed (``longmedbench.txt``, "Contextual Memory"): M_C "is constructed by rewriting the
event stream of current V_j into an LLM-style trajectory. Only events E_j^k with t_j^k < T are
retained. Each E_j^k is transformed into a action–feedback pair using LLM: {(assistant,
{a, t, p}), (user, {f, t'})}, where f and t' denote simulated clinic feedback inferred from o
and corresponding timestamp." The T11 / T11O questions state M_C written by the rule-based
writer (:func:`clinlib.tasks.generators.t10_text.contextual_memory`); this module has a prep
model (:func:`clinlib.strategies.prep.get_prep`: a backbone of the kit's registry, called
through the kit's client and its response cache, so a re-run sends nothing) write it instead:

* the prompt (:data:`WRITER_PROMPT`) states the seed's instruction, the events before T (one
  line each, with their observation) and the line format the rule-based writer uses
  (``YYYY-MM-DD HH:MM <kind>: <role> — <text>``), so readers and the cut gate read both alike;
* the reply is verified against the source events (:func:`verify_written`): the same turns as
  the events before T (one action and one feedback per event, the labs of one minute as one;
  nothing at or after T), each turn checked with the dialogue verifier's own per-turn checks
  through :func:`clinlib.strategies.note_memory.verify_notes` (no number, date, code or drug
  that the turn's events do not hold; ids exist), no lab named that its events do not hold,
  and every lab result kept in its feedback;
* a reply that fails is rejected and the rule-based memory used, labelled
  ``rule-based (fallback from <backbone>)`` with the problem kept (:class:`WrittenMemory`).

:func:`with_contextual_memory` gives T11 / T11O question rows whose M_C is the written one: the
qid carries the requested writer (``~mc=<name>``: a prediction is never shared with the
rule-based question) and ``meta`` the writer that wrote it (``mc_writer``), so every table
built from the predictions can be labelled by writer. Ask them with
``runner.run(RunSpec(..., questions=rows))``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from clinlib.dialogue.matching import labels_mentioned
from clinlib.strategies.note_memory import verify_notes
from clinlib.strategies.prep import RULE_BASED, PrepModel, PrepRequest, get_prep
from clinlib.tasks.generators.t10_text import (
    ACTION_FEEDBACK,
    contextual_memory,
    event_line,
    lab_text,
    stamp,
)
from clinlib.tasks.generators.t11 import MC_LEAD, OPEN_TASK, TASK, context_records

WRITER_PROMPT = """You rewrite a hospital stay's event stream into an LLM-style trajectory \
(LongMedBench's contextual memory). Only the events listed are retained (those before the \
current time). Each event is transformed into an action–feedback pair: first the care team's \
action, role "assistant", stating the action kind, its time and its argument (the lab tests \
drawn, the drug with dose and route, the procedure, the admission type); then the clinical \
feedback, role "user", inferred from the event's result, with its time. The labs drawn at \
one minute are one action and one feedback.
Write exactly two lines per action, in time order, each in the form
YYYY-MM-DD HH:MM <kind>: <role> — <text>
where <kind> is lab, medication, procedure or admission and <role> is assistant or user.
Copy every name, value, unit, dose and time exactly as given; add no fact, value, drug, test \
or time that is not listed. Reply with the lines only."""
WRITER_USER_TEMPLATE = "Events of the current stay before {now}:\n{events}"
WRITER_MAX_TOKENS = 2048
_LINE_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) (lab|medication|procedure|admission): "
    r"(assistant|user) — (.+)$"
)
QID_MARK = "~mc="


@dataclass(frozen=True)
class WrittenMemory:
    """One contextual memory and who wrote it.

    Attributes:
        text: the memory (turn lines).
        writer: ``rule-based``, the backbone's name, or ``rule-based (fallback from <name>)``.
        problem: why the backbone's reply was rejected ("" when it was not).
    """

    text: str
    writer: str
    problem: str = ""


def writer_messages(records: Sequence[Mapping[str, Any]], now: str) -> list[dict[str, str]]:
    """The chat messages asking a backbone for the contextual memory of ``records``."""
    lines = [event_line(r) for r in records if r["kind"] in ACTION_FEEDBACK]
    user = WRITER_USER_TEMPLATE.format(now=now, events="\n".join(lines))
    return [{"role": "system", "content": WRITER_PROMPT}, {"role": "user", "content": user}]


def _turns(text: str) -> list[tuple[str, str, str, str]] | str:
    out = []
    for line in (x.strip() for x in str(text).splitlines()):
        if not line:
            continue
        m = _LINE_RE.match(line)
        if m is None:
            return f"unreadable line {line[:80]!r}"
        out.append((m.group(1), m.group(2), m.group(3), m.group(4)))
    return out


def verify_written(text: str, records: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a written contextual memory does not state ``records`` faithfully (module
    docstring); None when it does."""
    got, want = _turns(text), _turns(contextual_memory(records))
    if isinstance(got, str):
        return got
    assert not isinstance(want, str)  # the rule-based writer's lines always parse
    shape = [t[:3] for t in got]
    if shape != [t[:3] for t in want]:
        return f"turns {shape[:3]}... differ from the events' {[t[:3] for t in want][:3]}..."
    for at, kind, role, body in got:
        group = [r for r in records if r["kind"] == kind and stamp(r) == at]
        ids = [str(r["event_id"]) for r in group]
        found = verify_notes([{"text": body, "event_ids": ids}], group)
        bad = [f"{c}: {p[0]}" for c, p in found.items() if p]
        if bad:
            return f"{at} {kind} {role}: {bad[0]}"
        rest = body  # a lab named outside the group's own labels (a drug may hold "Sodium")
        for label in sorted({str(r["label"] or "") for r in group}, key=len, reverse=True):
            rest = rest.replace(label, " ") if label else rest
        extra = sorted(labels_mentioned(rest))
        if extra:
            return f"{at} {kind} {role}: names {extra[0]!r}, not among its events"
        if role == "user" and kind == "lab":
            lost = [lab_text(r) for r in group if str(r["value_text"] or "") not in body]
            if lost:
                return f"{at} lab user: drops the result {lost[0]!r}"
    return None


def write_memories(
    batch: Mapping[str, tuple[Sequence[Mapping[str, Any]], str]], prep: PrepModel
) -> dict[str, WrittenMemory]:
    """The contextual memory of each ``key -> (records before T, now)``: rule-based for a
    rule-based prep; else the backbone's (one request per key, in one batch), verified, with
    the rule-based one as the labelled fallback."""
    rule = {k: contextual_memory(recs) for k, (recs, _now) in batch.items()}
    if not getattr(prep, "is_llm", False):
        return {k: WrittenMemory(v, RULE_BASED) for k, v in rule.items()}
    keys = sorted(batch)
    replies = prep.complete(
        [
            PrepRequest(f"contextual|{k}", writer_messages(*batch[k]), WRITER_MAX_TOKENS)
            for k in keys
        ]
    )
    out = {}
    for k, reply in zip(keys, replies, strict=True):
        text = "\n".join(x.strip() for x in str(reply).strip().splitlines() if x.strip())
        problem = verify_written(text, batch[k][0])
        out[k] = (
            WrittenMemory(text, prep.name)
            if problem is None
            else WrittenMemory(rule[k], f"{RULE_BASED} (fallback from {prep.name})", problem)
        )
    return out


def _meta(row: Mapping[str, Any]) -> dict:
    meta = row["meta"]
    return dict(json.loads(meta) if isinstance(meta, str) else meta)


def with_contextual_memory(
    questions: pd.DataFrame, inputs: Any, prep: str | PrepModel | None = RULE_BASED, **kw
) -> pd.DataFrame:
    """The T11 / T11O rows of ``questions`` with their contextual memory written by ``prep``
    (a backbone name, a prep model, or ``rule-based``; ``kw`` goes to :func:`get_prep`):
    the stem's memory replaced, ``qid`` marked with the requested writer, ``meta.mc_writer``
    (and ``mc_problem`` on a fallback) set. ``inputs``: the profile's task inputs
    (:func:`clinlib.tasks.generate.load_inputs`), whose records the questions were built from."""
    model = get_prep(prep, **kw)
    rows = questions[questions["task"].isin([TASK, OPEN_TASK])].to_dict("records")
    batch = {}
    for row in rows:
        meta = _meta(row)
        recs = inputs.by_visit[(int(meta["subject_id"]), int(meta["visit_idx"]))]
        cut = next(r for r in recs if str(r["event_id"]) == str(meta["cut_event_id"]))
        batch[str(row["qid"])] = (context_records(recs, cut["t"]), stamp(cut))
    written = write_memories(batch, model)
    out = []
    for row in rows:
        qid, meta = str(row["qid"]), _meta(row)
        old = MC_LEAD + contextual_memory(batch[qid][0])
        if str(row["question"]).count(old) != 1:
            raise ValueError(f"question {qid}: its contextual memory is not stated once")
        w = written[qid]
        meta |= {"mc_writer": w.writer, **({"mc_problem": w.problem} if w.problem else {})}
        out.append(
            {
                **row,
                "qid": f"{qid}{QID_MARK}{model.name}",
                "question": str(row["question"]).replace(old, MC_LEAD + w.text),
                "meta": json.dumps(meta, sort_keys=True) if isinstance(row["meta"], str) else meta,
            }
        )
    return pd.DataFrame(out, columns=questions.columns)


def writer_of(question: Mapping[str, Any]) -> str:
    """The writer of a question's contextual memory: ``meta.mc_writer``, else rule-based."""
    try:
        return str(_meta(question).get("mc_writer", RULE_BASED))
    except (TypeError, ValueError):
        return RULE_BASED
