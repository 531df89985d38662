"""The answering prompt (paper §4: one fixed prompt per question; per-task output caps in
Appendix D/E). Every backbone — an LLM or an offline reader — receives exactly the messages
built here: a system message and one user message holding the patient record (the strategy's
context) followed by the question, which states its own answer format. The record comes
first so that questions about the same patient share a cacheable prompt prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clinlib.tasks import SPECS
from clinlib.tasks.traps.answers import is_trap_task, trap_prompt

SYSTEM_PROMPT = (
    "You are a careful clinical assistant answering questions about one or two patients' "
    "hospital records, given as patient-clinician dialogues or representations derived from "
    "them. Answer only from the record provided. Bracketed tags such as [LAB-123] are event "
    "ids of the facts they follow. Follow the answer format the question asks for exactly and "
    "reply with the answer only."
)
RECORD_HEADER = "PATIENT RECORD"
NO_RECORD = "(no patient record is provided)"
QUESTION_HEADER = "QUESTION"

USER_TEMPLATE = "{record_header}\n{record}\n\n{question_header}\n{question}"


def build_messages(question: Mapping[str, Any], context: str) -> list[dict[str, str]]:
    """The chat messages for one question under one strategy.

    Args:
        question: a questions.parquet row (uses ``question``; a trap question's ``task`` and
            ``options`` too: it is asked with MedMemoryBench's Appendix D.1 prompt,
            :func:`clinlib.tasks.traps.answers.trap_prompt`).
        context: the strategy's context for it ("" for no-context-blind).

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``; the system message is the task
        spec's ``system_prompt`` when it sets one (the trap set: MedMemoryBench's shared
        system prompt), else :data:`SYSTEM_PROMPT`.
    """
    record = context.strip() if context and context.strip() else NO_RECORD
    user = USER_TEMPLATE.format(
        record_header=RECORD_HEADER,
        record=record,
        question_header=QUESTION_HEADER,
        question=(
            trap_prompt(question)
            if is_trap_task(question.get("task"))
            else str(question["question"])
        ).strip(),
    )
    return [
        {"role": "system", "content": system_prompt(question.get("task"))},
        {"role": "user", "content": user},
    ]


def system_prompt(task: Any) -> str:
    """The system message of a task's questions: its spec's ``system_prompt``, else
    :data:`SYSTEM_PROMPT` (a task the registry does not know, too)."""
    spec = SPECS.get(str(task)) if task is not None else None
    return (spec.system_prompt if spec is not None else "") or SYSTEM_PROMPT


def split_user_message(messages: list[Mapping[str, Any]]) -> tuple[str, str]:
    """Recover (record, question) from messages built by :func:`build_messages`.

    Offline readers use this: they read only what an LLM would read.
    """
    user = next(m for m in reversed(messages) if m.get("role") == "user")
    text = str(user.get("content", ""))
    head = f"{RECORD_HEADER}\n"
    sep = f"\n\n{QUESTION_HEADER}\n"
    if not text.startswith(head) or sep not in text:
        return "", text.strip()
    record, question = text[len(head) :].rsplit(sep, 1)
    return ("" if record == NO_RECORD else record), question.strip()
