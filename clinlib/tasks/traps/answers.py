"""How a trap question is asked and scored by the kit's harness (MedMemoryBench
Appendix D.1 answer prompts, §5 "Query Design" answer formats).

The six query types are task names of the harness (:data:`TRAP_TASK_NAMES`): ``clintrace run
--tasks EEM,TLA,SUA,MQ,IG,MCD`` loads ``trap_questions.parquet`` (:func:`clinlib.tasks.extended.
load_questions`), builds contexts over the trap dialogue and stores the predictions like every
other task's. All six are asked (:data:`HARNESS_TRAP_TASKS`); TLA, SUA, IG and MCD (L, free
text, judged in the seed) are stored like the others, but no deterministic scorer
decides them: their ``correct`` is stored NA (never False) with ``parse_problem``
:data:`NEEDS_JUDGE`, and :func:`clinlib.eval.judge.run.judge_traps` scores them with the judge.

The question text a backbone sees is MedMemoryBench's Appendix D.1 answer prompt for the type, the
question embedded and, for the O types, the options listed (:func:`trap_prompt`). Scoring
(:func:`trap_score`, pure; strict and lenient are the same rule):

* S, EEM: the response, lower-cased with punctuation dropped, equals the gold entity.
* L, TLA / SUA / IG / MCD: ``correct`` NA (:data:`NEEDS_JUDGE`); the judge decides.
* O, MQ: multi-select scored as a set (:func:`letter_set`: "B,D" and "D and B" are the same
  answer; "B" is wrong when the gold is "B,D").

An exact abstention (``insufficient information``) parses to ``ABSTAIN`` and is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clinlib.tasks.base import ABSTAIN, Score
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.traps.rows import ANSWER_FORMAT, QUERY_TYPES

TRAP_TASK_NAMES: tuple[str, ...] = QUERY_TYPES
HARNESS_TRAP_TASKS: tuple[str, ...] = QUERY_TYPES  # all six are asked; L rows store correct NA
JUDGED_TRAP_TASKS: tuple[str, ...] = tuple(t for t in QUERY_TYPES if ANSWER_FORMAT[t] == "L")
TRAP_ARTIFACT = "trap_questions"
# The seed's decoding settings for every MedMemoryBench model (its appendix "Implementation
# Details": temperature 0.3, at most 10,240 completion tokens) and its shared system prompt
# (MedMemoryBench Appendix D.1 "Query Answering"), the defaults of this set: the spec's
# max_tokens, system_prompt and temperature, which the harness reads (eval.harness.prompts /
# cells.generation_params).
SEED_TEMPERATURE = 0.3
SEED_MAX_TOKENS = 10_240
SEED_SYSTEM_PROMPT = (
    "You are the patient's personalized medical assistant, capable of accurately memorizing "
    "the patient's complete medical history. Please reason and respond based on patient "
    "information in memory, maintain a warm yet professional tone, answer directly, and avoid "
    "unnecessarily long explanations."
)
TRAP_MAX_TOKENS: dict[str, int] = dict.fromkeys(QUERY_TYPES, SEED_MAX_TOKENS)
LETTERS = "ABCDEFGH"

EEM_PROMPT = (
    "Context: Based on the memory below, accurately answer the following question. "
    "Question: {question} Answer Requirements: 1. Provide the target entity name "
    "directly. 2. Keep the answer brief and precise. 3. Do not include lengthy "
    "explanations. Answer:"
)
TLA_PROMPT = (
    "Context: Based on the memory below, accurately answer the following question. "
    "Question: {question} Answer Requirements: 1. If the question asks about a time, "
    "answer in YYYY-MM-DD format (e.g., 2024-01-15). 2. If the question asks about an "
    "event at a specific time, clearly describe the event content and key details. "
    "3. Keep the answer concise and directly grounded in memory. Answer:"
)
MQ_PROMPT = (
    "Context: Based on the memory below, and considering the patient's allergy "
    "history, medical history, medications, and personal preferences, answer the "
    "following question. Question: {question} Options: {options} Answer "
    "Requirements: 1. Select all correct options. 2. Output only the option letter(s), "
    "such as B or B,D. 3. Do not provide any explanation. Answer:"
)
SUA_PROMPT = (
    "Context: Based on the memory below, accurately answer the following question. "
    "Question: {question} Answer Requirements: 1. Describe the patient's most recent "
    "status. 2. Reflect important changes over time when necessary. 3. Maintain a warm yet "
    "professional tone. 4. Be concise and direct. Answer:"
)
IG_PROMPT = (
    "Context: Based on the memory below, and considering the patient's allergy history, "
    "medical history, medications, and personal preferences, answer the following "
    "question. Question: {question} Answer Requirements: 1. Reason from this patient's "
    "specific remembered information; do not give generic medical advice. 2. Maintain a "
    "warm yet professional tone. 3. Be concise, direct, and avoid boilerplate. 4. If "
    "recommending or advising against something, briefly explain the reason based on "
    "the patient's specific situation. Answer:"
)
MCD_PROMPT = (
    "Context: Based on the memory below, carefully review the patient's complete "
    "medical history and conduct a comprehensive analysis by combining information "
    "from multiple visits. Question: {question} Answer Requirements: 1. Clearly list "
    "the memory content you draw upon. 2. Present a clear reasoning path from evidence "
    "to conclusions. 3. Provide a final comprehensive judgment. Answer:"
)
PROMPTS = {
    "EEM": EEM_PROMPT,
    "TLA": TLA_PROMPT,
    "SUA": SUA_PROMPT,
    "MQ": MQ_PROMPT,
    "IG": IG_PROMPT,
    "MCD": MCD_PROMPT,
}

NEEDS_JUDGE = "free text: needs the LLM judge"  # the marker of an L row's NA correct
_LETTER = re.compile(r"\b([A-H])\b")
_LETTER_LIST = re.compile(r"^\W*([A-H](?:\s*(?:,|and|&)\s*[A-H])*)\W*$")
_ABSTAIN = re.compile(r"^\W*insufficient\s+information\W*$", re.IGNORECASE)


def is_trap_task(task: Any) -> bool:
    """Whether a task name is one of the six query types."""
    return str(task) in TRAP_TASK_NAMES


def trap_prompt(question: Mapping[str, Any]) -> str:
    """The question a backbone sees: the type's MedMemoryBench Appendix D.1 prompt, options lettered."""
    raw = question.get("options")
    options = [] if raw is None or isinstance(raw, float) else [str(o) for o in list(raw)]
    opts = " ".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return PROMPTS[str(question["task"])].format(question=question["question"], options=opts)


def norm_text(text: Any) -> str:
    """Lower case, punctuation to spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", str(text).lower()).split())


def parse_trap(task: str, response: str | None) -> str | None:
    """The canonical answer of a trap response (module docstring), None when nothing parses."""
    text = str(response or "").strip()
    if not text:
        return None
    if _ABSTAIN.match(text):
        return ABSTAIN
    fmt = ANSWER_FORMAT[task]
    if fmt == "L":
        return None
    if fmt == "S":
        return norm_text(text) or None
    if task == "MQ":
        return letter_set(text)
    m = _LETTER.search(text)
    return m.group(1) if m else None


def letter_set(text: str) -> str | None:
    """MQ's answer as a set (the seed: "such as B or B,D"): a response that is only a list of
    letters gives them all, sorted and comma-joined ("D, B" -> "B,D"); otherwise the first
    letter standing alone; None when there is none."""
    m = _LETTER_LIST.match(text.strip())
    if m:
        return ",".join(sorted(set(re.findall(r"[A-H]", m.group(1)))))
    m = _LETTER.search(text)
    return m.group(1) if m else None


def trap_score(task: str, response: str | None, gold: str) -> Score:
    """Score one trap response against its gold (pure; module docstring). An L type's
    ``correct`` is None (NA: undecided, not wrong) and its problem :data:`NEEDS_JUDGE`."""
    if ANSWER_FORMAT[task] == "L":
        return Score(None, None, False, float("nan"), NEEDS_JUDGE)  # type: ignore[arg-type]
    parsed = parse_trap(task, response)
    if parsed is None:
        return Score(None, False, True, 0.0, None)
    want = norm_text(gold) if ANSWER_FORMAT[task] == "S" else str(gold)
    if task == "MQ":  # scored as a set: every correct option and nothing else
        want = ",".join(sorted({x.strip() for x in str(gold).split(",") if x.strip()}))
    correct = parsed != ABSTAIN and parsed == want
    return Score(parsed, correct, False, float(correct))


def _spec(task: str) -> TaskSpec:
    return TaskSpec(
        name=task,
        title=f"MedMemoryBench {task} query ({ANSWER_FORMAT[task]} format, trap set)",
        answer_format=PROMPTS[task],
        max_tokens=TRAP_MAX_TOKENS[task],
        family="trap",
        scorer=trap_score,
        reader_policy=f"clinlib.eval.readers.trap:read_{task.lower()}",
        system_prompt=SEED_SYSTEM_PROMPT,
        temperature=SEED_TEMPERATURE,
    )


SPECS: tuple[TaskSpec, ...] = tuple(_spec(t) for t in QUERY_TYPES)
"""The six query types as tasks of the harness (one scorer, both parser modes)."""
