"""llm-summary: one summary of the whole dialogue within a token budget (paper §4 "llm-summary
(single 500-token DeepSeek summary; doubling the budget to 1,000 tokens does not remove the
aggregation tax)"; Appendix G.6 / Table 12; Appendix C.3 "LLM-summary words per patient").

With an LLM prep model the dialogue (ids on) is summarised under :data:`SUMMARY_PROMPT` with
the output capped at the budget; a dialogue longer than the model's input window is summarised
hierarchically (groups of visits first, then the group summaries). Offline, the rule-based
prep writes an extractive budgeted summary from the facts the reader finds
(:mod:`clinlib.strategies.facts`): encounter span, problem list (diagnoses by number of
encounters), the latest value of each lab (with its first value when it changed), medications
with their latest dose, procedures and reported symptoms, filled in priority order until the
budget (counted with :func:`clinlib.strategies.prep.count_text_tokens`) is reached.

Either way one value per attribute survives at best, so per-visit value pairs are lost — the
aggregation tax — and a free-text attribution sentence has no slot in it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from clinlib.data.vocab import LAB_PANEL
from clinlib.strategies.base import (
    Artifact,
    StoredTextStrategy,
    render,
    visit_order,
)
from clinlib.strategies.facts import EXTRA_LAB_LABELS, Fact, facts_of
from clinlib.strategies.prep import PrepRequest, count_text_tokens

SUMMARY_PROMPT = """You are a clinical documentation assistant. Summarise the patient's \
longitudinal record below (a patient-clinician dialogue over several hospital encounters) for a \
clinician who will answer questions about this patient later without seeing the dialogue.
Keep what matters clinically: diagnoses with ICD codes, lab results with values, units and \
dates, medications with doses, procedures, and how things changed over time.
The summary must not exceed {budget} tokens. Write plain prose, no preamble."""
SUMMARY_USER = "Dialogue:\n{dialogue}"
MERGE_PROMPT = """You merge partial summaries of consecutive parts of one patient's record \
into a single summary for a clinician. Keep diagnoses with codes, lab values with units and \
dates, medications, procedures and changes over time. The summary must not exceed {budget} \
tokens. Write plain prose, no preamble."""
MERGE_USER = "Partial summaries, in chronological order:\n{parts}"
DEFAULT_INPUT_WINDOW = 60_000
FLAG_WORD = {"high": "high", "low": "low", "abnormal": "flagged abnormal"}
PANEL_RANK: dict[str, int] = {
    **{lab.label: i for i, lab in enumerate(LAB_PANEL)},
    **{
        label: i
        for i, lab in enumerate(LAB_PANEL)
        for label in EXTRA_LAB_LABELS
        if lab.key == "ldl"
    },
}


def _lab_item(latest: Fact, first: Fact | None) -> str:
    flag = f", {FLAG_WORD[latest.flag]}" if latest.flag in FLAG_WORD else ""
    text = f"{latest.name} {latest.value} {latest.unit} on {latest.date}{flag}"
    if first is not None and (first.value, first.unit) != (latest.value, latest.unit):
        text += f" (first {first.value} {first.unit} on {first.date})"
    return text


def summary_items(facts: Sequence[Fact], n_visits: int) -> list[tuple[str, str, int]]:
    """(section, item text, priority) candidates of the rule-based summary.

    Priority 0 is the header, 1 the core (top problems, abnormal latest labs, top drugs),
    2 the rest of each list, 3 procedures and symptoms; earlier items win within a priority.
    """
    by_kind: dict[str, list[Fact]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, []).append(f)
    dates = sorted(f.date for f in facts if f.date)
    adm_types = Counter(f.name for f in by_kind.get("admission", []) if f.name)
    header = f"{n_visits} encounter(s)"
    if dates:
        header += f" from {dates[0]} to {dates[-1]}"
    if adm_types:
        header += " (" + ", ".join(f"{t} x{n}" for t, n in adm_types.most_common()) + ")"
    items: list[tuple[str, str, int]] = [("header", header, 0)]

    dx_visits: dict[str, set[int]] = {}
    dx_first: dict[str, Fact] = {}
    for f in by_kind.get("diagnosis", []):
        dx_visits.setdefault(f.code, set()).add(f.visit_idx)
        dx_first.setdefault(f.code, f)
    ranked_dx = sorted(dx_visits, key=lambda c: (-len(dx_visits[c]), dx_first[c].date, c))
    for i, code in enumerate(ranked_dx):
        f = dx_first[code]
        n = len(dx_visits[code])
        text = f"{f.name} ({code}; first {f.date}; {n} encounter{'s' if n > 1 else ''})"
        items.append(("problems", text, 1 if i < 5 else 2))

    labs: dict[str, list[Fact]] = {}
    for f in by_kind.get("lab", []):
        labs.setdefault(f.name, []).append(f)
    lab_items = []
    for name, fs in labs.items():
        ordered = sorted(fs, key=lambda f: (f.date, f.visit_idx, f.turn_idx))
        latest, first = ordered[-1], ordered[0]
        lab_items.append((0 if latest.flag else 1, name, _lab_item(latest, first)))
    # Abnormal latest values first, then the panel's order (creatinine, potassium, sodium, ...).
    for abnormal, _, text in sorted(
        lab_items, key=lambda t: (t[0], PANEL_RANK.get(t[1], 99), t[1])
    ):
        items.append(("labs", text, 1 if abnormal == 0 else 2))

    meds: dict[str, list[Fact]] = {}
    for f in by_kind.get("medication", []):
        meds.setdefault(" ".join(f.name.lower().split()), []).append(f)
    ranked_meds = sorted(
        meds.values(), key=lambda fs: (-len({f.visit_idx for f in fs}), fs[0].name.lower())
    )
    for i, fs in enumerate(ranked_meds):
        last = max(fs, key=lambda f: (f.date, f.visit_idx))
        route = f" {last.route}" if last.route else ""
        text = f"{last.name} {last.value} {last.unit}{route} (latest {last.date})"
        items.append(("medications", text, 1 if i < 5 else 2))

    pxs: dict[str, list[str]] = {}
    px_title: dict[str, str] = {}
    for f in by_kind.get("procedure", []):
        pxs.setdefault(f.code, []).append(f.date)
        px_title.setdefault(f.code, f.name)
    for code, ds in pxs.items():
        items.append(
            ("procedures", f"{px_title[code]} ({code}) on {', '.join(sorted(set(ds)))}", 3)
        )
    symptoms = Counter(f.name for f in by_kind.get("symptom", []))
    for s, _ in symptoms.most_common():
        items.append(("symptoms", s, 3))
    return items


SECTION_LABELS = {
    "header": "Record",
    "problems": "Problems",
    "labs": "Labs (latest value)",
    "medications": "Medications",
    "procedures": "Procedures",
    "symptoms": "Reported symptoms",
}


def compose(chosen: Sequence[tuple[str, str]]) -> str:
    """Render the chosen (section, item) pairs, sections in fixed order."""
    lines = []
    for section, label in SECTION_LABELS.items():
        texts = [t for s, t in chosen if s == section]
        if texts:
            lines.append(f"{label}: " + "; ".join(texts) + ".")
    return "\n".join(lines)


def budgeted_summary(
    facts: Sequence[Fact], n_visits: int, budget: int, token_model: str
) -> tuple[str, int]:
    """The rule-based extractive summary within ``budget`` tokens.

    Returns:
        (summary text, number of candidate items left out).
    """
    items = summary_items(facts, n_visits)
    # Within a priority, take the sections in turn (a problem, a lab, a drug, a problem, ...)
    # so one long list cannot crowd the others out of the budget.
    rank: dict[int, int] = {}
    seen: dict[tuple[str, int], int] = {}
    for i, (section, _, prio) in enumerate(items):
        rank[i] = seen.get((section, prio), 0)
        seen[(section, prio)] = rank[i] + 1
    sections = list(SECTION_LABELS)
    order = sorted(
        range(len(items)), key=lambda i: (items[i][2], rank[i], sections.index(items[i][0]))
    )
    chosen_idx: list[int] = []
    used = 0
    for i in order:
        section, text, _ = items[i]
        # "; " or a new line + label costs a few tokens; count the item with its separator.
        cost = count_text_tokens("; " + text, token_model)
        if used + cost + 2 * len(SECTION_LABELS) > budget:
            continue
        chosen_idx.append(i)
        used += cost
    chosen_idx.sort()
    chosen = [(items[i][0], items[i][1]) for i in chosen_idx]
    text = compose(chosen)
    # The exact count decides: drop the lowest-priority items until it fits.
    while chosen and count_text_tokens(text, token_model) > budget:
        worst = max(range(len(chosen)), key=lambda j: (items[chosen_idx[j]][2], j))
        chosen.pop(worst)
        chosen_idx.pop(worst)
        text = compose(chosen)
    return text, len(items) - len(chosen)


def truncate_to_budget(text: str, budget: int, token_model: str) -> tuple[str, bool]:
    """Cut a text at a sentence (else word) boundary so it fits the budget."""
    if count_text_tokens(text, token_model) <= budget:
        return text, False
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # longest word prefix within budget
        mid = (lo + hi + 1) // 2
        if count_text_tokens(" ".join(words[:mid]), token_model) <= budget:
            lo = mid
        else:
            hi = mid - 1
    cut = " ".join(words[:lo])
    end = max(cut.rfind(". "), cut.rfind(".\n"))
    return (cut[: end + 1] if end > len(cut) // 2 else cut), True


class LLMSummary(StoredTextStrategy):
    """One summary within a token budget (derived; built by the prep model)."""

    text_key = "summary"

    name = "llm-summary"
    query_dependent = False
    family = "compression"
    derived = True
    uses_prep = True
    defaults = {"budget_tokens": 500, "input_window": None}
    construction_keys = ("budget_tokens", "input_window")

    def validate_params(self) -> None:
        self._positive_int("budget_tokens")

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        budget = int(self.params["budget_tokens"])
        token_model = prep.token_model
        left_out = 0
        if getattr(prep, "is_llm", False):
            text = self._llm_summary(subject_id, turns, prep, budget)
        else:
            text, left_out = budgeted_summary(
                facts_of(turns), len(visit_order(turns)), budget, token_model
            )
        text, truncated = truncate_to_budget(text.strip(), budget, token_model)
        return {
            "summary": text,
            "tokens": count_text_tokens(text, token_model),
            "words": len(text.split()),
            "budget_tokens": budget,
            "token_model": token_model,
            "truncated": truncated,
            "items_left_out": left_out,
        }

    def _window(self, prep: Any) -> int:
        if self.params["input_window"]:
            return int(self.params["input_window"])
        window = getattr(getattr(prep, "backbone", None), "context_window", None)
        if not window:
            return DEFAULT_INPUT_WINDOW
        # Leave room for the instructions and the summary itself.
        return int(window) - 2 * int(self.params["budget_tokens"]) - 2000

    def _llm_summary(self, subject_id: int, turns: pd.DataFrame, prep: Any, budget: int) -> str:
        dialogue = render(turns, with_ids=True)
        limit = self._window(prep)
        system = SUMMARY_PROMPT.format(budget=budget)
        if count_text_tokens(dialogue, prep.token_model) <= limit:
            req = PrepRequest(
                f"{self.name}|{subject_id}|all",
                [
                    {"role": "system", "content": system},
                    {"role": "user", "content": SUMMARY_USER.format(dialogue=dialogue)},
                ],
                max_tokens=budget,
            )
            return prep.complete([req])[0]
        # Too long for one call: summarise groups of whole visits, then merge (hierarchical).
        groups: list[list[int]] = [[]]
        used = 0
        for v in visit_order(turns):
            n = count_text_tokens(render(turns, visits=[v]), prep.token_model)
            if groups[-1] and used + n > limit:
                groups.append([])
                used = 0
            groups[-1].append(v)
            used += n
        parts = prep.complete(
            [
                PrepRequest(
                    f"{self.name}|{subject_id}|part{i}",
                    [
                        {"role": "system", "content": system},
                        {
                            "role": "user",
                            "content": SUMMARY_USER.format(dialogue=render(turns, visits=g)),
                        },
                    ],
                    max_tokens=budget,
                )
                for i, g in enumerate(groups)
            ]
        )
        merged = "\n\n".join(f"Part {i + 1}: {p.strip()}" for i, p in enumerate(parts))
        req = PrepRequest(
            f"{self.name}|{subject_id}|merge",
            [
                {"role": "system", "content": MERGE_PROMPT.format(budget=budget)},
                {"role": "user", "content": MERGE_USER.format(parts=merged)},
            ],
            max_tokens=budget,
        )
        return prep.complete([req])[0]

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        return {
            "n_items": int(artifact.data.get("words", 0)),
            "item": "words",
            "summary_words": int(artifact.data.get("words", 0)),
        }
