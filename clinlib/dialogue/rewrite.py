"""LLM rewriting of a visit's template text, kept only when verified (paper §3 "Cohort":
dialogues synthesised from each record; Fig. 2 stage 3: written by an LLM, checked by the
verifier, rescued by other models; docs/design.md "Layout").

A :class:`Rewriter` gets each visit's tagged draft and the strings it must keep verbatim. A
rewrite is accepted only if every per-turn check passes (:data:`REWRITE_CHECKS`: two
rewrite-only checks, then the verifier's own per-turn checks of
:mod:`clinlib.dialogue.checks`). A visit may be offered to a chain of rewriters (the primary,
then rescues in order, :func:`try_rewrites`); when all fail it keeps its template text. Each
visit's outcome (accepted / rescued / template) is recorded with the first failing check of
every attempt (:data:`REWRITE_COLUMNS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clinlib.dialogue.binding import check_binding, patient_number_problems
from clinlib.dialogue.checks import check_covered, check_missed, check_turns
from clinlib.dialogue.conditions import invented_condition_problems
from clinlib.dialogue.fields import required_fields
from clinlib.dialogue.lexicon import invented_entity_problems, record_text
from clinlib.dialogue.matching import DrugMatcher, strip_tags, tag_ids
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

# The checks a rewrite must pass, in the order they are reported (the first failing one names
# the rejection). The first two exist only for rewrites; the rest are the verifier's HARD
# per-turn checks (clinlib.dialogue.checks.HARD_CHECKS and BINDING_CHECKS), run on the
# rewritten visit alone; the binding checks come before the verbatim ones, so a swapped or
# re-united value is refused by the check that names the error.
REWRITE_CHECKS: dict[str, str] = {
    "rewriter_error": "the backbone returned a reply (no error, not empty)",
    "speaker_lines": "the reply is Patient:/Clinician: lines only, one per draft turn, the "
    "same speakers in the same order",
    "tags_consistent": "the same provenance tags as the draft, each listed by its turn",
    "patient_lines_no_numbers": "the prompt's rule 5: no digit in a patient line",
    "no_invented_entities": "no drug, allergen or allergy outside the patient's record "
    "(clinlib.dialogue.lexicon)",
    "no_invented_conditions": "no diagnosis or condition name outside the patient's record "
    "(clinlib.dialogue.conditions)",
    "values_bound": "each value bound to its own label in its clause, with its unit, route "
    "and date (clinlib.dialogue.binding)",
    "polarity_kept": "no high/low flip, negation or stop word on a cited fact",
    "covered_fields_verbatim": "every required string of each cited event is in the turn "
    "that carries its tag",
    "no_untraced_numbers": "every number traces to an event its turn cites",
    "no_untraced_dates": "every date is the date of an event its turn cites",
    "no_untraced_codes": "every ICD-like code belongs to an event its turn cites",
    "no_untraced_drugs": "every known drug name belongs to a medication its turn cites",
    "missed_events_unstated": "the visit's missed events stay unstated",
}
OUTCOMES: tuple[str, ...] = ("accepted", "rescued", "template")
REWRITE_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "visit_idx": "int64",
    "accepted": "bool",  # the visit's text is a verified rewrite (by any backbone)
    "reason": "string",  # why the template was kept ("" when accepted)
    "outcome": "string",  # accepted (first backbone) | rescued (a later one) | template
    "backbone": "string",  # who wrote the kept text ("template" on fallback)
    "check": "string",  # the first attempt's failing check ("" when it was accepted)
    "attempts": "list",  # "<backbone>: <check>" per rejected attempt, in order
    "n_attempts": "int64",
}


class Rewriter(Protocol):
    """Makes a visit's draft read more naturally while keeping every required string."""

    def rewrite(self, draft: str, required: list[str]) -> str:
        """Return the rewritten visit: one ``Patient:``/``Clinician:`` line per turn, tags
        kept after the sentences that carry them, every ``required`` string verbatim."""
        ...


def rewrite_messages(draft: str, required: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages asking for one visit's rewrite."""
    user = REWRITE_USER_TEMPLATE.format(required="\n".join(required), draft=draft)
    return [
        {"role": "system", "content": REWRITE_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


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
        return self.chat(rewrite_messages(draft, required))


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


def visit_draft(turns: Sequence[Mapping[str, Any]]) -> str:
    """A visit's template turns as the draft a rewriter receives (tags kept)."""
    return "\n".join(f"{SPEAKER_PREFIX[t['speaker']]}: {t['text_tagged']}" for t in turns)


def draft_required(
    turns: Sequence[Mapping[str, Any]], events_by_id: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """The strings a rewrite of these turns must keep verbatim (sorted, without repeats)."""
    cited = [i for t in turns for i in t["event_ids"]]
    return sorted({s for i in cited for s in required_fields(events_by_id[i]).values()})


def check_rewrite(
    reply: str,
    turns: Sequence[Mapping[str, Any]],
    v: int,
    events_by_id: Mapping[str, Mapping[str, Any]],
    missed: Sequence[str],
    drugs: DrugMatcher,
) -> tuple[list[dict[str, Any]] | None, dict[str, list[str]]]:
    """Every rewrite check on one reply (the verifier rows of a visit's rewrite).

    Args:
        reply: the rewriter's text.
        turns: the visit's template turn records (speaker, text_tagged, event_ids).
        v: the visit index.
        events_by_id: the patient's usable events.
        missed: ids of the patient's missed events in this visit.
        drugs: known drug names.

    Returns:
        (the rewritten turn records, or None when the reply is not speaker lines;
        ``{check: problems}`` for every check of :data:`REWRITE_CHECKS`, empty when it passes).
    """
    problems: dict[str, list[str]] = {c: [] for c in REWRITE_CHECKS}
    if not str(reply or "").strip():
        problems["rewriter_error"].append("empty reply")
        return None, problems
    try:
        lines = parse_visit_lines(reply)
    except ValueError as exc:
        problems["speaker_lines"].append(str(exc))
        return None, problems
    want = [str(t["speaker"]) for t in turns]
    got = [sp for sp, _ in lines]
    if got != want:
        problems["speaker_lines"].append(
            f"{len(got)} lines ({'/'.join(s[0] for s in got)}) for "
            f"{len(want)} turns ({'/'.join(s[0] for s in want)})"
        )
    recs = [
        dict(
            turn_idx=i,
            visit_idx=v,
            speaker=sp,
            text=strip_tags(tt),
            text_tagged=tt,
            event_ids=tag_ids(tt),
        )
        for i, (sp, tt) in enumerate(lines)
    ]
    cited = {i for t in turns for i in t["event_ids"]}
    listed = {i for r in recs for i in r["event_ids"]}
    if listed != cited:
        extra, gone = sorted(listed - cited), sorted(cited - listed)
        problems["tags_consistent"].append(f"tags changed (added {extra[:3]}, dropped {gone[:3]})")
    known = {i: e for i, e in events_by_id.items() if i in cited}
    first: dict[str, int] = {}
    for r in recs:
        for i in r["event_ids"]:
            if i in known:
                first.setdefault(i, r["turn_idx"])
    problems["patient_lines_no_numbers"] = patient_number_problems(recs)
    record = record_text(events_by_id.values())
    problems["no_invented_entities"] = invented_entity_problems(
        recs, events_by_id.values(), events_by_id, record
    )
    problems["no_invented_conditions"] = invented_condition_problems(recs, record, events_by_id)
    problems |= check_binding(recs, known)
    problems["covered_fields_verbatim"] = check_covered(recs, known, first)
    for check, found in check_turns(recs, known, drugs).items():
        problems[check] += found
    problems["missed_events_unstated"] = check_missed(recs, events_by_id, missed)
    return recs, problems


def first_failure(problems: Mapping[str, list[str]]) -> tuple[str, str]:
    """(check, its first problem) of the first failing check, or ("", "")."""
    for check in REWRITE_CHECKS:
        if problems.get(check):
            return check, problems[check][0]
    return "", ""


def try_rewrite(
    rewriter: Rewriter,
    turns: list[dict[str, Any]],
    v: int,
    events_by_id: Mapping[str, Mapping[str, Any]],
    missed: Sequence[str],
    drugs: DrugMatcher,
) -> tuple[list[dict[str, Any]] | None, str, str]:
    """Rewrite one visit; (turn records, "", "") or (None, failing check, detail)."""
    draft = visit_draft(turns)
    try:
        out = rewriter.rewrite(draft, draft_required(turns, events_by_id))
    except Exception as exc:  # noqa: BLE001 - any rewriter failure falls back to the template
        return None, "rewriter_error", f"{type(exc).__name__}: {exc}"[:200]
    recs, problems = check_rewrite(out, turns, v, events_by_id, missed, drugs)
    check, detail = first_failure(problems)
    return (None, check, detail) if check else (recs, "", "")


def as_chain(rewriter: Rewriter | Sequence[tuple[str, Rewriter]]) -> list[tuple[str, Rewriter]]:
    """A rewriter or a (name, rewriter) chain as a chain (a lone rewriter is "rewriter")."""
    if isinstance(rewriter, Sequence) and not isinstance(rewriter, str):
        return [(str(n), r) for n, r in rewriter]
    return [("rewriter", rewriter)]


def try_rewrites(
    chain: Sequence[tuple[str, Rewriter]],
    turns: list[dict[str, Any]],
    v: int,
    events_by_id: Mapping[str, Mapping[str, Any]],
    missed: Sequence[str],
    drugs: DrugMatcher,
) -> tuple[list[dict[str, Any]] | None, dict[str, Any]]:
    """Offer one visit to each rewriter in turn until one's rewrite passes every check.

    Returns:
        (the accepted turn records or None, the visit's :data:`REWRITE_COLUMNS` record
        without subject_id).
    """
    attempts: list[str] = []
    first_check, detail = "", ""
    for k, (name, rw) in enumerate(chain):
        recs, check, why = try_rewrite(rw, turns, v, events_by_id, missed, drugs)
        if recs is not None:
            return recs, dict(
                visit_idx=v,
                accepted=True,
                reason="",
                outcome="accepted" if k == 0 else "rescued",
                backbone=name,
                check=first_check,
                attempts=attempts,
                n_attempts=k + 1,
            )
        first_check = first_check or check
        attempts.append(f"{name}: {check}")
        detail = f"{check}: {why}"
    return None, dict(
        visit_idx=v,
        accepted=False,
        reason=detail,
        outcome="template",
        backbone="template",
        check=first_check,
        attempts=attempts,
        n_attempts=len(chain),
    )
