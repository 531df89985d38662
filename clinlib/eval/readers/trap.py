"""The offline readers on the trap questions (MedMemoryBench §5 "Query Design"):
deterministic policies, NOT language models.

:func:`read_trap` answers from what the context states and abstains otherwise: EEM the
allergen after "allergic to"; TLA the last date written before the sentence that states a
money limit; MQ (allergy) B when the context states an allergy whose class covers the proposed
drug, else A (so a context that lost the allergy answers "safe": the failure the safety
evaluation counts); MQ (eGFR) abstains (the dialogue states no age or sex, which the CKD-EPI
equation needs); SUA the option letter of the last stated value of the lab against the panel's
reference range. The free-text L types get a quoting policy (no reasoning; a judge scores
them): IG quotes every sentence of the context that states a patient constraint
(an allergy, a money limit, a preference: :mod:`clinlib.tasks.traps.constraints`' statements);
MCD quotes the last sentence naming creatinine and the first naming metformin; each abstains
when the context has no such sentence.

Inside the harness the reader sees only the prompt (:func:`clinlib.eval.harness.prompts.
build_messages`): :func:`recognise_trap` recovers the query type and what the reading needs
(the proposed drug, the lab) from the question's wording, as the T1–T11 readers do.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clinlib.data.vocab import LAB_PANEL
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.registry import get_spec
from clinlib.tasks.spec import resolve
from clinlib.tasks.traps.constraints import ALLERGENS, COSTS, PREFERENCES
from clinlib.tasks.traps.queries import ANSWER_FORMAT, lab_state

READER = "reference"
_ALLERGY = re.compile(r"allergic to ([A-Za-z][A-Za-z ]*?);")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONEY = re.compile(r"(afford|money|dollars|insurance|pay for)", re.IGNORECASE)
# the wording of each query type (clinlib.tasks.traps.queries), most specific first
_RECOGNISE: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("EEM", "EEM", re.compile(r"did the patient say they are allergic to\?")),
    ("TLA", "TLA", re.compile(r"tell you about their financial limits")),
    (
        "MQ",
        "allergy",
        re.compile(
            r"A clinician now proposes (?P<example>.+?) for this patient\. "
            r"Considering only the allergies"
        ),
    ),
    ("MQ", "egfr", re.compile(r"Metformin was ordered for the patient on \d{4}-\d{2}-\d{2}\.")),
    ("SUA", "", re.compile(r"Going by the patient's most recent (?P<lab>.+?) result, is their")),
    ("IG", "IG", re.compile(r"What should you keep in mind when choosing it for this patient")),
    ("MCD", "MCD", re.compile(r"one of their medicines should not have been given\?")),
)
_STATED = tuple(text for _, text in (*COSTS, *PREFERENCES))
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
IG_LEAD = "Keep in mind what the patient stated: "
MCD_LEAD = "Evidence in the record (quoted, not reasoned over): "


def read_trap(question: dict, context: str) -> str:
    """The reference reader's answer to one trap question (module docstring); ``question``
    needs task, subtype and meta (``example`` for MQ allergy, ``lab`` for SUA). The type's
    own reading is named by its spec (``reader_policy``, clinlib.tasks.traps.answers)."""
    policy = resolve(get_spec(str(question["task"])).reader_policy)
    return policy(question, str(context or ""))


def read_eem(question: dict, text: str) -> str:
    m = _ALLERGY.findall(text)
    return m[-1] if m else ABSTAIN


def read_tla(question: dict, text: str) -> str:
    for line in text.splitlines():
        if _MONEY.search(line):
            dates = _DATE.findall(text[: text.index(line)])
            return dates[-1] if dates else ABSTAIN
    return ABSTAIN


def read_mq(question: dict, text: str) -> str:
    if question["subtype"] != "allergy":
        return ABSTAIN  # MQ eGFR (no age / sex stated)
    example = json.loads(question["meta"])["example"]
    names = {n.strip().lower() for n in _ALLERGY.findall(text)}
    covers = any(a.name in names and a.example == example for a in ALLERGENS)
    return "B" if covers else "A"


def read_sua(question: dict, text: str) -> str:
    return _read_state(question, text)


def read_ig(question: dict, text: str) -> str:
    """IG quotes the constraint sentences in context order (module docstring)."""
    sentences = _sentences(text)
    quoted = [x for x in sentences if _ALLERGY.search(x + ";") or any(st in x for st in _STATED)]
    return _quote(IG_LEAD, quoted)


def read_mcd(question: dict, text: str) -> str:
    """MCD quotes the last creatinine and the first metformin sentence (module docstring)."""
    sentences = _sentences(text)
    creat = [x for x in sentences if "creatinine" in x.lower()]
    metf = [x for x in sentences if "metformin" in x.lower()]
    return _quote(MCD_LEAD, [*creat[-1:], *metf[:1]] if metf else [])


def _sentences(text: str) -> list[str]:
    return [x.strip() for x in _SENTENCE.split(text) if x.strip()]


def _quote(lead: str, quoted: list[str]) -> str:
    quoted = list(dict.fromkeys(quoted))
    return lead + " ".join(quoted) if quoted else ABSTAIN


def _read_state(question: dict, text: str) -> str:
    lab = json.loads(question["meta"])["lab"]
    panel = next((p for p in LAB_PANEL if p.label == lab), None)
    values = re.findall(rf"{re.escape(lab)}(?: of| at| was|)\s+(\d+(?:\.\d+)?)", text)
    if panel is None or not values:
        return ABSTAIN
    return lab_state(float(values[-1]), panel.ref_low, panel.ref_high)


def recognise_trap(question_text: str) -> dict[str, Any] | None:
    """task, subtype and meta of a trap question from its wording; None for any other task."""
    text = str(question_text)
    for task, sub, pattern in _RECOGNISE:
        m = pattern.search(text)
        if m is not None:
            meta = {k: v for k, v in m.groupdict().items() if v is not None}
            return {
                "task": task,
                "subtype": sub or meta.get("lab", "").lower(),
                "meta": json.dumps(meta),
            }
    return None


def answer_trap(record: str, question_text: str, eager: bool = False) -> str | None:
    """The reader's answer to a trap prompt, or None when the prompt is no trap question.
    ``eager`` never abstains on an O type: it guesses option A (the S types stay abstained:
    there is no stated value to guess from)."""
    q = recognise_trap(question_text)
    if q is None:
        return None
    out = read_trap(q, record)
    if eager and out == ABSTAIN and ANSWER_FORMAT[q["task"]] == "O":
        return "A"
    return out
