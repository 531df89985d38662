"""Rule-based stand-ins for the LLM rewriter and paraphraser (offline backbones, no model).

They let the rewrite and paraphrase paths (:mod:`clinlib.eval.synthesis.rewrite`,
:mod:`clinlib.eval.synthesis.paraphrase`) run offline in notebooks and tests, through the same
client, checks and artifacts as a real backbone. They are deterministic string rules, not
language models: their acceptance rates measure the rules, never an LLM.

* ``rule-based-rewriter`` adds a short spoken opener to each line ("Right.", "Well,") and
  keeps every other character: a rewrite that follows the rules.
* ``rule-based-dates`` does the same and also spells dates out ("10 January 2150"), the most
  common way a fluent rewrite breaks verbatim provenance; the verifier rejects those visits,
  so it exercises rescue and fallback.
* ``rule-based-paraphraser`` rewords fixed opening phrases of the question templates and
  keeps everything else.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from clinlib.dialogue.rewrite import REWRITE_USER_TEMPLATE
from clinlib.llm import Backbone, register_policy_backbone
from clinlib.tasks.paraphrase import PARAPHRASE_USER_TEMPLATE

RULE_MODEL_PREFIX = "rule-based/"
REWRITER, DATES, PARAPHRASER = "rule-based-rewriter", "rule-based-dates", "rule-based-paraphraser"
OPENERS: dict[str, tuple[str, ...]] = {
    "Clinician": ("Right.", "Okay.", "I see.", "Thank you."),
    "Patient": ("Well.", "Okay.", "Hmm."),
}
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# (template phrase, its rewording): opening phrases of clinlib.tasks.templates.
PHRASES: tuple[tuple[str, str], ...] = (
    ("What was the patient's ", "Tell me the patient's "),
    ("Report the patient's ", "Give the patient's "),
    ("What did the ", "What result did the "),
    ("In the encounter that began on ", "During the encounter beginning "),
    ("During the encounter starting ", "In the encounter that started on "),
    ("At the encounter that began on ", "In the encounter starting "),
    ("Which procedure was performed", "Which procedure did the patient undergo"),
    ("Compare the last ", "Take the last "),
    ("Regarding ", "Concerning "),
    ("Across the ", "Over the "),
    ("Take the first ", "Consider the first "),
    ("Comparing the patient's ", "When comparing the patient's "),
    ("The diagnosis ", "The condition "),
    ("Looking back from ", "Going back from "),
)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _after(text: str, template: str) -> str:
    """What follows the template's fixed lead-in in a user message."""
    head = template.split("{", 1)[0]
    return text.split(head, 1)[1] if head in text else text


def _user(messages: Sequence[Mapping[str, Any]]) -> str:
    return next(
        (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
    )


def _draft(messages: Sequence[Mapping[str, Any]]) -> str:
    # REWRITE_USER_TEMPLATE ends with "\n\nDraft:\n{draft}"
    return _user(messages).split(REWRITE_USER_TEMPLATE.split("{draft}")[0][-9:], 1)[-1]


def _opener(line: str, speaker: str) -> str:
    choices = OPENERS[speaker]
    return choices[int(hashlib.sha1(line.encode()).hexdigest(), 16) % len(choices)]


def rewrite_lines(draft: str, spell_dates: bool = False) -> str:
    """The rule-based rewrite of a draft (see the module docstring)."""
    out = []
    for line in draft.splitlines():
        speaker, sep, rest = line.partition(": ")
        if sep and speaker in OPENERS:
            line = f"{speaker}: {_opener(line, speaker)} {rest}"
        if spell_dates:
            line = _ISO.sub(lambda m: f"{int(m[3])} {MONTHS[int(m[2]) - 1]} {m[1]}", line)
        out.append(line)
    return "\n".join(out)


def rewriter_policy(messages: Sequence[Mapping[str, Any]], params: Any) -> str:
    """``rule-based-rewriter``: openers only."""
    return rewrite_lines(_draft(messages))


def dates_policy(messages: Sequence[Mapping[str, Any]], params: Any) -> str:
    """``rule-based-dates``: openers and spelled-out dates."""
    return rewrite_lines(_draft(messages), spell_dates=True)


def paraphrase_text(question: str) -> str:
    """The rule-based paraphrase of a question: the first template phrase it holds, reworded."""
    for old, new in PHRASES:
        if old in question:
            return question.replace(old, new, 1)
    return question


def paraphraser_policy(messages: Sequence[Mapping[str, Any]], params: Any) -> str:
    """``rule-based-paraphraser``."""
    return paraphrase_text(_after(_user(messages), PARAPHRASE_USER_TEMPLATE))


_POLICIES = {REWRITER: rewriter_policy, DATES: dates_policy, PARAPHRASER: paraphraser_policy}
RULE_WRITERS: tuple[str, ...] = tuple(_POLICIES)


def register_rule_writers() -> list[Backbone]:
    """Register the three rule-based writers (kind="offline", price 0); idempotent."""
    return [
        register_policy_backbone(
            name,
            policy,
            model=f"{RULE_MODEL_PREFIX}{name}",
            label=f"{name} (rule-based, not an LLM)",
        )
        for name, policy in _POLICIES.items()
    ]
