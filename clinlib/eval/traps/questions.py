"""The trap questions asked: contexts over the trap dialogue, an offline reader for the S/O
query types, scoring, and trap retention (MedMemoryBench §5 "Query Design",
§5 "Evaluation Protocol").

:func:`trap_contexts` builds every strategy's context for the trap questions under any setting
of :mod:`clinlib.tasks.settings` (``post``, ``stream``, ``mixed``, ``stream+mixed``) from the
TRAP dialogue (:func:`clinlib.tasks.traps.facts.trap_dialogue`: dialogues.parquet plus the
injected constraints), through the same construction path as T1–T11
(:func:`clinlib.strategies.construction.question_contexts_many` with ``dialogues=``), so the
injected facts reach every constructor before construction, as T5's do.

:func:`read_trap` (:mod:`clinlib.eval.readers.trap`) is the ``reference`` offline reader for
the trap questions: a deterministic policy, NOT a language model. The harness asks the S/O
types like any task (:mod:`clinlib.eval.traps.ask`); :func:`run_traps` here applies the reader
directly to the contexts, without a prompt or the store (the second route the harness test
compares the stored rows with).

:func:`score_trap` scores S (normalised string / date match) and O (option letter) answers;
L rows get ``correct`` NA. :func:`run_traps` joins contexts, answers, scores and retention
(measurable per strategy and setting: a representation that names ids in some context;
evidence recall decides per context, which under ``mixed`` would drop a context holding only
untagged noise sessions instead of counting its missing trap):
``trap_in_context`` is evidence recall's ``all_present``
(:func:`clinlib.analysis.evidence.recall_of_contexts` is the same matcher;
:func:`clinlib.strategies.evidence.anchor_presence` here, as eval may not import analysis):
every anchor of the question (a trap's ``TRAP...`` id, or the lab and order events) is named
by the context at the checkpoint asked; :func:`at_matters` keeps, under ``stream``, the
checkpoint where each question's trap matters.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.data.build import load
from clinlib.eval.readers.trap import READER, read_trap
from clinlib.strategies.construction import question_contexts_many
from clinlib.strategies.evidence import anchor_ids, context_ids, has_tags
from clinlib.tasks.traps.answers import trap_score
from clinlib.tasks.traps.facts import trap_dialogue

RUN_COLUMNS = [
    "qid",
    "task",
    "subtype",
    "answer_format",
    "risk_category",
    "subject_id",
    "strategy",
    "backbone",
    "setting",
    "checkpoint_visit",
    "checkpoint_final",
    "response",
    "correct",
    "trap_in_context",
    "measurable",
]


def score_trap(question: dict, response: str) -> bool | None:
    """Whether a response is correct (:func:`clinlib.tasks.traps.answers.trap_score`, the
    harness's rule); None for L (a judge decides)."""
    if question["answer_format"] == "L":
        return None
    return trap_score(question["task"], response, str(question["gold"])).correct


def trap_contexts(
    profile: str | None,
    strategies: Sequence[str],
    setting: str = "post",
    prep: str = "rule-based",
    *,
    questions: pd.DataFrame | None = None,
    turns: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every strategy's context for every trap question under ``setting`` (module docstring):
    CONTEXT_COLUMNS of :func:`question_contexts_many`, all strategies stacked. ``questions``
    and ``turns`` (the trap dialogue) are read from the build unless given (a caller asking
    several settings reads them once)."""
    if questions is None:
        questions = load("trap_questions", profile)
    if turns is None:
        turns = trap_dialogue(load("dialogues", profile), load("trap_facts", profile))
    frames = question_contexts_many(
        questions, list(strategies), profile, setting, prep, dialogues=turns
    )
    return pd.concat(frames, ignore_index=True)


def answer_contexts(
    questions: pd.DataFrame, contexts: pd.DataFrame, *, read: bool = True
) -> pd.DataFrame:
    """Read, score and measure retention for given contexts (pure): :data:`RUN_COLUMNS`.
    With ``read=False`` only retention is measured (``response`` empty, ``correct`` NA): for
    a caller that takes the answers from the predictions store."""
    qs = {r["qid"]: r for r in questions.to_dict("records")}
    names = contexts["label"] if "label" in contexts.columns else contexts["strategy"]
    # measurable per (strategy, setting): a representation that names ids somewhere; one of its
    # contexts without any tag (e.g. only noise sessions retrieved) then holds no trap anchor
    tagged = {
        (n, st)
        for n, st, ctx in zip(names, contexts["setting"], contexts["context"], strict=True)
        if has_tags(str(ctx or ""))
    }
    rows = []
    for c, name in zip(contexts.to_dict("records"), names, strict=True):
        q = qs[c["qid"]]
        text = str(c["context"] or "")
        ids, anchors = set(context_ids(text)), anchor_ids(q)
        measurable = (name, c["setting"]) in tagged or not text.strip()
        resp = read_trap(q, text) if read and q["answer_format"] != "L" else ""
        rows.append(
            {
                "qid": q["qid"],
                "task": q["task"],
                "subtype": q["subtype"],
                "answer_format": q["answer_format"],
                "risk_category": q["risk_category"],
                "subject_id": int(list(q["subject_ids"])[0]),
                "strategy": name,
                "backbone": READER,
                "setting": c["setting"],
                "checkpoint_visit": c["checkpoint_visit"],
                "checkpoint_final": c["checkpoint_final"],
                "response": resp,
                "correct": score_trap(q, resp) if read and q["answer_format"] != "L" else None,
                "trap_in_context": all(a in ids for a in anchors) if measurable else None,
                "measurable": measurable,
            }
        )
    out = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return out.astype({"correct": "boolean", "trap_in_context": "boolean"})


def run_traps(
    profile: str | None,
    strategies: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
) -> pd.DataFrame:
    """The reference reader applied directly (no prompt, nothing stored) over every strategy
    and setting: :data:`RUN_COLUMNS` (one row per question, strategy and setting value; under
    ``stream`` one per checkpoint)."""
    questions = load("trap_questions", profile)
    parts = [
        answer_contexts(questions, trap_contexts(profile, strategies, s, prep)) for s in settings
    ]
    return pd.concat(parts, ignore_index=True)


INJECTED_TYPES = ("EEM", "TLA", "IG")  # and MQ's allergy subtype: built on injected constraints
MATTERS = "stream (when it matters)"


def at_matters(run: pd.DataFrame) -> pd.DataFrame:
    """The ``stream`` rows at the checkpoint where each question's trap matters: for a question
    on an injected constraint (EEM, TLA, IG, MQ allergy: a decision after the last visit) its
    final checkpoint; for a record question (SUA, MQ eGFR, MCD) its first checkpoint, the one
    at which its order or current value has just arrived. ``setting`` becomes :data:`MATTERS`.
    """
    st = run[run["setting"].astype(str).str.startswith("stream")].copy()
    if st.empty:
        return st
    cp = st["checkpoint_visit"].astype(int)
    grp = cp.groupby(
        [
            st["qid"],
            st["strategy"],
            st["setting"].str.split("@").str[0].str.replace(r"^stream", "", regex=True),
        ]
    )
    injected = st["task"].isin(INJECTED_TYPES) | (
        (st["task"] == "MQ") & (st["subtype"] == "allergy")
    )
    keep = (injected & (cp == grp.transform("max"))) | (~injected & (cp == grp.transform("min")))
    return st[keep.to_numpy()].assign(setting=MATTERS)
