"""core-memory: a Letta / MemGPT-style memory (Letta is MedMemoryBench's best-performing
baseline, MedMemoryBench §6 "Overall Performance and Main Findings"; Packer et al. 2023,
"MemGPT").

Two tiers, as in MemGPT:

* **core memory** — a small block of high-priority facts, pinned: it is in EVERY context,
  whatever the question. Sections, in priority order (the block keeps at most ``core_items``
  lines, dropping from the end):

  1. *constraints* — sentences whose WORDS state an allergy, a contraindication, a cost limit,
     a treatment preference, a past illness or a medicine prescribed elsewhere (the salience
     rule :data:`SALIENCE`, extended with
     :func:`add_salience`), verbatim with whatever provenance tags they carry. The rule reads
     the text only, never an id: a sentence is pinned the same whether or not the generator
     tagged it (a trap's ``TRAP...`` tag is the answer key of the trap questions, and a memory
     that pinned by it would measure the key, not a policy). Its word lists cover the seed's
     four constraint kinds (MedMemoryBench §4 "Disease Progression Event Generation":
     "allergy history, contraindications, economic constraints, and personal preferences")
     and its two history kinds, in the first person (*history*: a past illness the patient
     states; *medication*: a medicine a doctor elsewhere prescribes) — the seed's trap events
     are "past medical history, allergy history, contraindications, economic constraints, and
     personal preferences" (§4) and its profiles' "past medical history, allergy history, and
     medication history ... are purposefully designed as trap events" (App. "Patient Profile
     Selection Principles" (b)); Letta's Core Memory "keeps critical information persistently
     visible" (§6 "Retrieval is the main bottleneck"), so a stated history is pinned as a
     safety fact like an allergy. A relative's history ("My mother has a history of ...",
     the noise sessions) is not first person and is not pinned. All in plain clinical and lay
     wording; they were
     written knowing the kit's injected statements, so a constraint worded outside them is
     missed (a test shows one);
  2. *active problems* — the diagnoses of the last ``problem_visits`` stays that state any,
     most recent first, one line per code;
  3. *current medications* — the orders of the latest stay that states any.

  Built visit by visit: rule-based (:mod:`clinlib.strategies.facts`'s reader, labelled
  ``rule-based``: no LLM), or by an LLM prep model, which after each visit rewrites the block
  under :data:`CORE_MEMORY_PROMPT` (MemGPT's ``core_memory_append`` / ``core_memory_replace``
  folded into one rewrite; a reply that does not parse keeps the previous block and is
  recorded in ``warnings``). The LLM's requests are metered per patient into
  ``Artifact.prep_usage`` by the construction (:mod:`clinlib.strategies.build_cost`).
* **archival memory** — the rest of the history, searched per question: BM25 over one chunk
  per visit (:class:`clinlib.strategies.retrieval.BM25Retrieval`'s ranking), the top ``k``
  visits returned as their CURRENT text (ids on), in time order.

The core block is built (a sentence injected after construction is not in it); the archival
part reads the dialogue at question time, like retrieval. Streaming: every visit prefix's
block comes from one pass (:meth:`CoreMemory.build_snapshots`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.dialogue.render import render_visit
from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    question_text,
    visit_order,
)
from clinlib.strategies.facts import Fact, facts_of, split_sentences
from clinlib.strategies.prep import PrepError, PrepRequest, count_text_tokens, parse_json_reply
from clinlib.strategies.retrieval import bm25_ranking, retrieved_visits_text, visit_terms

CORE_HEADER = "Core memory (pinned):"
ARCHIVAL_HEADER = "Archival memory (retrieved visits):"
SECTIONS: tuple[str, ...] = ("constraints", "active problems", "current medications")
# The salience rule: kind -> the words that make a sentence a constraint to pin (first match
# wins, in this order). ONE registry: :func:`add_salience` adds to it.
SALIENCE: dict[str, re.Pattern[str]] = {
    "allergy": re.compile(
        r"\b(allerg\w*|anaphyla\w*|intoleran\w*|bad reaction to|reacted badly)\b", re.I
    ),
    "contraindication": re.compile(
        r"\b(contraindicat\w*|must not (take|be given)|should never (take|be given))\b", re.I
    ),
    "cost": re.compile(
        r"\b(afford\w*|insurance|dollars?|money|too expensive|out of pocket|"
        r"pay for (my|the) (medicines|drugs|prescriptions)|brand-name|generic only)\b",
        re.I,
    ),
    "preference": re.compile(
        r"\b(would rather( not)?|i prefer|i refuse|i do not want|i don't want|"
        r"forget doses|once a day|drowsy|no injections)\b",
        re.I,
    ),
    # past medical history, in the first person (MedMemoryBench App. "Patient Profile
    # Selection Principles" (b))
    "history": re.compile(
        r"\b(i was (told|diagnosed)( that)? (i have|i had|with)|"
        r"i(('ve| have))? been diagnosed with|i (have|had) a history of|"
        r"since i was a (child|kid|boy|girl|teenager|baby)|years ago i (was|had)|"
        r"i was (in|admitted to) (the )?hospital (with|for) (a|an|my)|"
        r"my (past )?medical history)\b",
        re.I,
    ),
    # medication history: a medicine prescribed outside this record (same section)
    "medication": re.compile(
        r"\b((has|have) (kept )?me on|(prescribes|prescribed|gives) me|"
        r"(at|from) (another|a different|an outside|my other) (clinic|hospital|practice)|"
        r"outside (this|the) (hospital|clinic)|"
        r"i('ve| have) been (taking|on) \w+ for (years|months|many years|a long time))\b",
        re.I,
    ),
}

CORE_MEMORY_PROMPT = """You maintain the CORE MEMORY of an assistant that follows one \
patient across many clinical encounters. The core memory is a short block that is always in \
the assistant's context, so it must hold only the facts that must never be lost:
1. constraints: allergies, contraindications, cost or preference constraints, past \
illnesses and medicines prescribed elsewhere that the patient stated;
2. active problems: the patient's current diagnoses (with codes);
3. current medications: what the patient currently takes (drug, dose, unit, route).
Everything else stays in archival memory and is searched when needed.
After each new encounter, rewrite the core memory: add what is new, replace what changed \
(e.g. a medication stopped or changed), remove what no longer holds. Keep values, units, \
dates, codes and drug names exactly as written, and keep the bracketed event ids (such as \
[RX-7]) next to the facts they support. At most {max_items} lines.
Return only JSON: {{"core": ["<section>: <fact>", ...]}} with section one of constraints, \
active problems, current medications."""
CORE_MEMORY_USER = "Current core memory:\n{core}\n\nNew encounter:\n{encounter}"


def add_salience(kind: str, pattern: str) -> None:
    """Register a salience kind (its words as a regular expression, case-insensitive); a kind
    registered again takes the new words."""
    if not str(pattern).strip():
        raise StrategyError(f"salience kind {kind!r}: empty pattern")
    SALIENCE[str(kind)] = re.compile(str(pattern), re.I)


def salient_kind(sentence: str) -> str | None:
    """The first :data:`SALIENCE` kind whose words the sentence states, else None."""
    return next((k for k, rx in SALIENCE.items() if rx.search(sentence)), None)


def _pinned_lines(turns: pd.DataFrame) -> list[tuple[int, str]]:
    """(visit_idx, "kind: sentence [ids]") of every sentence the salience rule pins; the ids
    are the sentence's own tags (none when the text is untagged)."""
    out = []
    for v, text in zip(turns["visit_idx"], turns["text_tagged"], strict=True):
        for sentence, ids in split_sentences(str(text)):
            kind = salient_kind(sentence)
            if kind is not None:
                tags = f" [{', '.join(ids)}]" if ids else ""
                out.append((int(v), f"{kind}: {sentence}{tags}"))
    return out


def rule_based_core(
    facts: Sequence[Fact], pinned: Sequence[tuple[int, str]], problem_visits: int, max_items: int
) -> list[str]:
    """The core block (lines "<section>: <fact>") from the facts and pinned sentences seen."""
    lines = [f"constraints: {s}" for _, s in pinned]
    dx_visits = sorted({f.visit_idx for f in facts if f.kind == "diagnosis"}, reverse=True)
    recent = set(dx_visits[:problem_visits])
    seen: set[str] = set()
    for f in sorted(facts, key=lambda f: (-f.visit_idx, f.turn_idx)):
        if f.kind == "diagnosis" and f.visit_idx in recent and f.code not in seen:
            seen.add(f.code)
            lines.append(f"active problems: {f.statement()}")
    rx_visits = [f.visit_idx for f in facts if f.kind == "medication"]
    if rx_visits:
        last = max(rx_visits)
        lines += [
            f"current medications: {f.statement()}"
            for f in facts
            if f.kind == "medication" and f.visit_idx == last
        ]
    return lines[:max_items]


class CoreMemory(Strategy):
    """Pinned core block + BM25 archival search over visits (see module docstring)."""

    name = "core-memory"
    family = "agentic memory"
    derived = True
    uses_prep = True
    defaults = {"k": 3, "core_items": 16, "problem_visits": 2}
    construction_keys = ("core_items", "problem_visits")

    def validate_params(self) -> None:
        for key in ("k", "core_items", "problem_visits"):
            self._positive_int(key)

    # -- construction -----------------------------------------------------------------------
    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        n = len(visit_order(turns))
        return self.build_snapshots(subject_id, turns, prep, at=[n])[n]

    def build_snapshots(
        self, subject_id: int, turns: pd.DataFrame, prep: Any, at: Sequence[int]
    ) -> dict[int, dict]:
        """The memory after the first t visits for every t in ``at``, from one pass (an LLM
        prep model rewrites the block visit by visit; the rule-based block of t visits is read
        from the facts of those visits)."""
        visits = visit_order(turns)
        wanted = sorted({int(t) for t in at if 1 <= int(t) <= len(visits)})
        terms = dict(visit_terms(turns))
        if getattr(prep, "is_llm", False):
            cores = dict(enumerate(self._llm_cores(subject_id, turns, prep), start=1))
        else:
            cores = {t: self._rule_core(turns, visits[t - 1]) for t in wanted}
        return {
            t: {
                "core": list(cores[t][0]),
                "warnings": list(cores[t][1]),
                "visits": visits[:t],
                "terms": [terms[v] for v in visits[:t]],
            }
            for t in wanted
        }

    def _rule_core(self, turns: pd.DataFrame, last: int) -> tuple[list[str], list[str]]:
        """The rule-based block after the visit ``last`` (no warnings)."""
        p = self.params
        core = rule_based_core(
            [f for f in facts_of(turns) if f.visit_idx <= last],
            [x for x in _pinned_lines(turns) if x[0] <= last],
            int(p["problem_visits"]),
            int(p["core_items"]),
        )
        return core, []

    def _llm_cores(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> Iterator[tuple]:
        core: list[str] = []
        warnings: list[str] = []
        limit = int(self.params["core_items"])
        system = CORE_MEMORY_PROMPT.format(max_items=limit)
        for v, g in turns.groupby("visit_idx", sort=True):
            user = CORE_MEMORY_USER.format(
                core="\n".join(core) or "(empty)",
                encounter=render_visit(g, with_ids=True, header=True),
            )
            reply = prep.complete(
                [
                    PrepRequest(
                        f"{self.name}|{subject_id}|v{int(v)}|core",
                        [{"role": "system", "content": system}, {"role": "user", "content": user}],
                        max_tokens=1024,
                    )
                ]
            )[0]
            try:
                parsed = parse_json_reply(reply, f"visit {int(v)} core memory")
                lines = parsed.get("core") if isinstance(parsed, Mapping) else None
                if not isinstance(lines, list):
                    raise PrepError(f"visit {int(v)} core memory: no 'core' list")
                core = [str(x).strip() for x in lines if str(x).strip()][:limit]
            except PrepError as exc:
                warnings.append(str(exc))
            yield list(core), list(warnings)

    # -- access -----------------------------------------------------------------------------
    def core_text(self, artifact: Artifact) -> str:
        """The pinned block as the context shows it."""
        lines = artifact.data.get("core", [])
        return CORE_HEADER + "\n" + ("\n".join(f"- {x}" for x in lines) or "(empty)")

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        return bm25_ranking(artifact.data, question_text(question))

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        archival = retrieved_visits_text(self, artifact, question, turns_now) or "(none)"
        return f"{self.core_text(artifact)}\n\n{ARCHIVAL_HEADER}\n{archival}"

    def store_text(self, artifact: Artifact) -> str:
        return self.core_text(artifact)

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        core = artifact.data.get("core", [])
        return {
            "n_items": len(core),
            "item": "core lines",
            "n_core": len(core),
            "n_archival_visits": len(artifact.data.get("visits", [])),
            **{
                f"n_{s.replace(' ', '_')}": sum(x.startswith(s + ":") for x in core)
                for s in SECTIONS
            },
            "store_tokens": count_text_tokens(self.core_text(artifact)),
        }
