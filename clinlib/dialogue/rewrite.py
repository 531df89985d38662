"""Optional LLM rewriting of a visit's template text (paper §3 "Cohort": dialogues synthesised
from each record; Fig. 2 stage 3; docs/design.md "Layout").

A :class:`Rewriter` gets each visit's tagged draft and the strings it must keep verbatim; a
rewrite is accepted only if it passes the verifier's per-turn checks
(:mod:`clinlib.dialogue.checks`), otherwise the visit keeps its template text and the fallback
is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clinlib.dialogue.checks import check_covered, check_missed, check_turns
from clinlib.dialogue.fields import required_fields
from clinlib.dialogue.matching import DrugMatcher, contains_verbatim, strip_tags, tag_ids
from clinlib.dialogue.render import SPEAKER_PREFIX

REWRITE_SYSTEM_PROMPT = """You rewrite one hospital visit of a patient-clinician dialogue so \
that it reads more naturally.
Rules:
1. Keep one line per turn, each starting with "Patient:" or "Clinician:", in the same order.
2. Keep every bracketed tag such as [LAB-123, LAB-124] right after the sentence that states
   those facts, and keep each fact in the line that carries its tag.
3. Copy every required string exactly as given: values, units, dates, codes, titles, drug
   names and routes.
4. Do not add any number, date, code, drug name or clinical fact that is not in the draft.
5. Patient lines contain no numbers.
Return only the rewritten lines."""
REWRITE_USER_TEMPLATE = "Required strings (each verbatim):\n{required}\n\nDraft:\n{draft}"


class Rewriter(Protocol):
    """Makes a visit's draft read more naturally while keeping every required string."""

    def rewrite(self, draft: str, required: list[str]) -> str:
        """Return the rewritten visit: one ``Patient:``/``Clinician:`` line per turn, tags
        kept after the sentences that carry them, every ``required`` string verbatim."""
        ...


@dataclass
class ChatRewriter:
    """Adapter from any chat function (the kit's LLM layer) to :class:`Rewriter`.

    Args:
        chat: ``chat(messages) -> reply text`` with OpenAI-style ``[{"role", "content"}]``
            messages; caching and model choice are the caller's.
    """

    chat: Callable[[list[dict[str, str]]], str]

    def rewrite(self, draft: str, required: list[str]) -> str:
        """Send the draft with :data:`REWRITE_SYSTEM_PROMPT`; return the reply."""
        user = REWRITE_USER_TEMPLATE.format(required="\n".join(required), draft=draft)
        messages = [
            {"role": "system", "content": REWRITE_SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        return self.chat(messages)


_LINE_RE = re.compile(r"^\s*(patient|clinician)\s*:\s*(.*)$", re.IGNORECASE)


def parse_visit_lines(text: str) -> list[tuple[str, str]]:
    """Parse ``Patient: ...`` / ``Clinician: ...`` lines into (speaker, text_tagged) pairs;
    other non-empty lines continue the previous turn.

    Raises:
        ValueError: text before the first speaker line, or no speaker line at all.
    """
    out: list[tuple[str, str]] = []
    for line in str(text).splitlines():
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if m:
            out.append((m.group(1).lower(), m.group(2).strip()))
        elif out:
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}")
        else:
            raise ValueError(f"text before the first speaker line: {line[:60]!r}")
    if not out:
        raise ValueError("no 'Patient:' or 'Clinician:' line")
    return out


def try_rewrite(
    rewriter: Rewriter,
    turns: list[dict[str, Any]],
    v: int,
    events_by_id: Mapping[str, Mapping[str, Any]],
    missed: Sequence[str],
    drugs: DrugMatcher,
) -> tuple[list[dict[str, Any]] | None, str]:
    """Rewrite one visit; return (turn records, "") or (None, why the template is kept)."""
    draft = "\n".join(f"{SPEAKER_PREFIX[t['speaker']]}: {t['text_tagged']}" for t in turns)
    cited = [i for t in turns for i in t["event_ids"]]
    required = sorted({s for i in cited for s in required_fields(events_by_id[i]).values()})
    try:
        out = rewriter.rewrite(draft, list(required))
        lines = parse_visit_lines(out)
    except Exception as exc:  # noqa: BLE001 - any rewriter failure falls back to the template
        return None, f"rewriter failed: {type(exc).__name__}: {exc}"[:200]
    lost = [s for s in required if not contains_verbatim(out, s)]
    if lost:
        return None, f"required field(s) lost: {', '.join(repr(s) for s in lost[:3])}"
    recs = [
        dict(turn_idx=i, visit_idx=v, speaker=sp, text=strip_tags(tt), text_tagged=tt,
             event_ids=tag_ids(tt))
        for i, (sp, tt) in enumerate(lines)
    ]  # fmt: skip
    listed = {i for r in recs for i in r["event_ids"]}
    if listed != set(cited):
        extra, gone = sorted(listed - set(cited)), sorted(set(cited) - listed)
        return None, f"tags changed (added {extra[:3]}, dropped {gone[:3]})"
    first = {}
    for r in recs:
        for i in r["event_ids"]:
            first.setdefault(i, r["turn_idx"])
    problems = check_covered(recs, events_by_id, first)
    per_turn = check_turns(recs, events_by_id, drugs)
    problems += [p for ps in per_turn.values() for p in ps]
    problems += check_missed(recs, events_by_id, missed)
    if problems:
        return None, f"rewrite fails verification: {problems[0]}"
    return recs, ""
