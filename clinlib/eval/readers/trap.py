"""The offline readers on the trap questions (MedMemoryBench §5 "Query Design"):
deterministic policies, NOT language models.

:func:`read_trap` answers from what the context states and abstains otherwise: EEM the
allergen after "allergic to"; TLA (free text) the last date written before the sentence that states a
money limit; MQ (allergy) B when the context states an allergy whose class covers the proposed
drug, else A (so a context that lost the allergy answers "safe": the failure the safety
evaluation counts); MQ (eGFR) abstains (the dialogue states no age or sex, which the CKD-EPI
equation needs); SUA (free text) the last stated value of the lab and where it stands against
the panel's reference range; EEM on a past illness or a medicine taken elsewhere the entity of
the stated sentence; a multi-select MQ the options the stated facts leave open
(:func:`_read_set`). The free-text L types get a quoting policy (no reasoning; a judge scores
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
from clinlib.tasks.traps.constraints import (
    ALLERGENS,
    COSTS,
    HISTORY_FACTS,
    HISTORY_KINDS,
    PREFERENCES,
)
from clinlib.tasks.traps.history_queries import NONE_OPTION, PRIOR_OPTIONS
from clinlib.tasks.traps.queries import lab_state
from clinlib.tasks.traps.rows import ANSWER_FORMAT, LETTERS

READER = "reference"
_ALLERGY = re.compile(r"allergic to ([A-Za-z][A-Za-z ]*?);")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONEY = re.compile(r"(afford|money|dollars|insurance|pay for)", re.IGNORECASE)
# the wording of each query type (clinlib.tasks.traps.queries), most specific first
_RECOGNISE: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("EEM", "EEM", re.compile(r"did the patient say they are allergic to\?")),
    ("EEM", "history", re.compile(r"What illness did the patient say they had in the past\?")),
    ("EEM", "medication", re.compile(r"did the patient say a doctor outside this hospital")),
    ("MQ", "prior_conflict", re.compile(r"a clinician might consider glimepiride")),
    ("MQ", "history", re.compile(r"Considering only the patient's past medical history")),
    ("MQ", "medication", re.compile(r"Considering only the medicines the patient said they take")),
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
    ("SUA", "", re.compile(r"now, going by their (?P<lab>\w+) results\?")),
    ("IG", "IG", re.compile(r"What should you keep in mind when choosing it for this patient")),
    ("MCD", "MCD", re.compile(r"one of their medicines should not have been given\?")),
)
_STATED = (
    *(text for _, text in (*COSTS, *PREFERENCES)),
    *(h.statement for h in HISTORY_FACTS),
)
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
    if question["subtype"] in HISTORY_KINDS:  # the entity of a stated history sentence
        said = [h for h in HISTORY_FACTS if h.kind == question["subtype"] and h.statement in text]
        return said[-1].name if said else ABSTAIN
    m = _ALLERGY.findall(text)
    return m[-1] if m else ABSTAIN


def read_tla(question: dict, text: str) -> str:
    for line in text.splitlines():
        if _MONEY.search(line):
            dates = _DATE.findall(text[: text.index(line)])
            return dates[-1] if dates else ABSTAIN
    return ABSTAIN


def read_mq(question: dict, text: str) -> str:
    if question["subtype"] in ("history", "medication", "prior_conflict"):
        return _read_set(question, text)
    if question["subtype"] != "allergy":
        return ABSTAIN  # MQ eGFR (the reader does not compute CKD-EPI)
    example = json.loads(question["meta"])["example"]
    names = {n.strip().lower() for n in _ALLERGY.findall(text)}
    covers = any(a.name in names and a.example == example for a in ALLERGENS)
    return "B" if covers else "A"


def read_sua(question: dict, text: str) -> str:
    """SUA in free text: the last stated value of the lab and where it stands against the
    panel's reference range (no trajectory: the earlier value is not restated)."""
    lab = json.loads(question["meta"])["lab"]
    state = _read_state(question, text)
    if state == ABSTAIN:
        return ABSTAIN
    value = re.findall(rf"{re.escape(lab)}(?: of| at| was|)\s+(\d+(?:\.\d+)?)", text)[-1]
    where = {"A": "above", "B": "within", "C": "below"}[state]
    return f"The most recent {lab} is {value}, {where} the reference range."


def _read_set(question: dict, text: str) -> str:
    """A multi-select MQ: the options the context's stated facts leave open. A reader that
    trusts its context: with the fact stated, every option but the drug it rules out and
    "none of these" (the sulfonamide question: the two statements that weigh the allergy);
    with the fact lost, every drug option (it gives the unsafe one too) or, for the
    sulfonamide question, "no drug allergy"."""
    options = _options(question)
    if not options:
        return ABSTAIN
    if question["subtype"] == "prior_conflict":
        stated = "sulfa drugs" in {n.strip().lower() for n in _ALLERGY.findall(text)}
        keep = PRIOR_OPTIONS[:2] if stated else PRIOR_OPTIONS[3:]
    else:
        said = [h for h in HISTORY_FACTS if h.statement in text]
        avoid = {h.avoid for h in said}
        keep = [o for o in options if o != NONE_OPTION and o not in avoid]
    letters = [LETTERS[i] for i, o in enumerate(options) if o in keep]
    return ",".join(letters) if letters else ABSTAIN


def _options(question: dict) -> list[str]:
    """The options of a question: its row's, or read back from the prompt (``A. ... B. ...``)."""
    raw = question.get("options")
    if raw is not None and not isinstance(raw, float) and len(list(raw)):
        return [str(o) for o in raw]
    m = re.search(r"Options: (.*?) Answer Requirements:", str(question.get("prompt", "")))
    if m is None:
        return []
    return [x.strip() for x in re.split(r"(?:^| )[A-H]\. ", m.group(1)) if x.strip()]


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
                "prompt": text,
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
