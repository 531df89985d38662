"""mem0: atomic-fact memory with Mem0's extract -> ADD / UPDATE / DELETE / NONE pipeline and
top-K retrieval (paper §4 "Agentic memory. Mem0 (extracted facts, DeepSeek-prepared, top-K=5)";
§5.2 SP1 the aggregation bottleneck; §5.5 / Table 3; Appendix C.3 "Mem0 facts per patient";
Appendix G.5 matched prep; Chhikara et al. 2025, "Mem0").

Two engines:

* ``builtin`` (default): Mem0's two-phase pipeline implemented in the kit. The dialogue is fed
  visit by visit, like a conversation that grows. Extraction: the facts of the visit (an LLM
  prep model under :data:`FACT_EXTRACTION_PROMPT`, or the rule-based reader). Update: for each
  new fact the most similar existing memories are consulted and one of ADD / UPDATE / DELETE /
  NONE is applied — by the LLM under :data:`MEMORY_UPDATE_PROMPT` (existing memories shown
  with temporary integer ids, as Mem0 does), or offline by the deterministic rule: the
  memories "similar" to a fact are those about the same attribute (the same lab, drug,
  diagnosis code, ...); an identical value is NONE, a different value UPDATEs the memory in
  place, a clinician statement negating a remembered diagnosis / procedure / drug / lab
  DELETEs it, anything else is ADDed. So a newer creatinine replaces the older one: the
  memory keeps one value per attribute — the mechanism behind the paper's aggregation tax.
* ``mem0ai``: the real ``mem0ai`` library (optional extra ``pip install clintrace-kit[mem0]``),
  configured with the prep backbone as an OpenAI-compatible LLM, a ``huggingface``
  (sentence-transformers) embedder — so it needs ``embedding_model='all-MiniLM-L6-v2'`` (the
  packaged folder, 384 dimensions) or another sentence-transformers model, not the static
  default — and an on-disk FAISS store under
  ``data/build/<profile>/mem0ai/`` (``MEM0_TELEMETRY=False``, ``MEM0_DIR`` set there). The
  memories it keeps are copied into the artifact. Not exercised by the kit's offline tests.

Access embeds the question and returns the K memories closest by cosine (default K = 5), most
relevant first. Memory embeddings are computed at construction (cached by text hash) over the
memory text without its provenance tags.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.config import build_dir
from clinlib.dialogue.matching import TAG_RE
from clinlib.dialogue.render import render_visit
from clinlib.llm import check_egress
from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    question_text,
    visit_order,
)
from clinlib.strategies.embed import (
    DEFAULT_EMBEDDING_MODEL,
    TRANSFORMER_MODEL,
    EmbedsQueries,
    resolve_model_path,
)
from clinlib.strategies.facts import Fact, facts_of
from clinlib.strategies.prep import PrepError, PrepRequest, count_text_tokens, parse_json_reply

ENGINES = ("builtin", "mem0ai")
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")
MEMORY_HEADER = "Memories (most relevant first):"
# Kinds a clinician's negation can remove from memory (Mem0 DELETE on contradiction).
DELETABLE = ("diagnosis", "procedure", "medication", "lab")

FACT_EXTRACTION_PROMPT = """You are a Clinical Information Organizer, specialised in \
accurately storing facts about a patient from a conversation between the patient and a \
clinician. Extract the relevant pieces of information and organise them into distinct, \
manageable facts, so they can be retrieved later when questions about this patient are asked.

Types of information to remember:
1. Diagnoses and conditions, with their ICD codes.
2. Lab results: test name, value, unit and date.
3. Medications: drug, dose, unit, route and start date.
4. Procedures, with their codes and dates.
5. Admissions and discharges: dates, admission type, discharge location.
6. Symptoms and complaints the patient reports.

Here are some few-shot examples:

Input: Patient: Hello, doctor. Clinician: Good morning, let's review your stay.
Output: {"facts": []}

Input: Clinician: On 2150-01-02, your Creatinine was 1.9 mg/dL. [LAB-11]
Output: {"facts": ["Creatinine was 1.9 mg/dL on 2150-01-02 [LAB-11]"]}

Input: Patient: I've been thirsty all the time. Clinician: We began Metformin 500 mg PO on \
2150-01-03. [RX-7]
Output: {"facts": ["Reports being thirsty all the time", "Started Metformin 500 mg PO on \
2150-01-03 [RX-7]"]}

Remember the following:
- Keep values, units, dates, codes and drug names exactly as written.
- Keep the bracketed event ids a sentence carries with the fact taken from it.
- If nothing is worth remembering, return an empty list for "facts".
- Return only JSON with the key "facts" whose value is a list of strings."""
FACT_EXTRACTION_USER = "Input:\n{conversation}"

MEMORY_UPDATE_PROMPT = """You are a smart memory manager which controls the memory of a \
system. You can perform four operations: (1) add into the memory, (2) update the memory, \
(3) delete from the memory, and (4) no change.

Compare newly retrieved facts with the existing memory. For each new fact, decide whether to:
- ADD: add it to the memory as a new element, with a new id;
- UPDATE: an existing element is about the same thing but the information differs or is less \
complete: rewrite that element, keeping its id;
- DELETE: the new fact contradicts an existing element: delete that element;
- NONE: the fact is already present (or irrelevant): make no change.

Example: Old memory: [{"id": "0", "text": "Takes Lisinopril 10 mg PO"}]; retrieved facts: \
["Lisinopril 20 mg PO started 2150-04-01", "Diagnosis Essential hypertension (I10)"]. New \
memory: {"memory": [{"id": "0", "text": "Lisinopril 20 mg PO started 2150-04-01", "event": \
"UPDATE", "old_memory": "Takes Lisinopril 10 mg PO"}, {"id": "1", "text": "Diagnosis Essential \
hypertension (I10)", "event": "ADD"}]}

Return every existing element (with event NONE if unchanged) and every added one. Use only the \
ids given for existing elements. Return only JSON of the form {"memory": [{"id": "...", \
"text": "...", "event": "ADD|UPDATE|DELETE|NONE", "old_memory": "..."}]}."""
MEMORY_UPDATE_USER = "Old memory:\n{old}\n\nRetrieved facts:\n{facts}"


def retrieval_text(text: str) -> str:
    """The text a memory is embedded by (provenance tags removed: noise for a retriever)."""
    return TAG_RE.sub("", text).strip()


class MemoryStore:
    """An ordered store of memories with Mem0's four operations and an event log."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.counts: Counter = Counter()
        self._next = 0

    def add(self, text: str, visit_idx: int, attribute: str = "", kind: str = "") -> str:
        """ADD a memory; returns its id."""
        mid = f"m{self._next}"
        self._next += 1
        self.items[mid] = {
            "id": mid,
            "text": text,
            "attribute": attribute,
            "kind": kind,
            "created_visit": int(visit_idx),
            "updated_visit": int(visit_idx),
        }
        self._log("ADD", mid, text, visit_idx)
        return mid

    def update(self, mid: str, text: str, visit_idx: int) -> None:
        """UPDATE memory ``mid`` in place (same id, new text)."""
        old = self.items[mid]["text"]
        self.items[mid].update(text=text, updated_visit=int(visit_idx))
        self._log("UPDATE", mid, text, visit_idx, old)

    def delete(self, mid: str, visit_idx: int, reason: str = "") -> None:
        """DELETE memory ``mid``."""
        old = self.items.pop(mid)["text"]
        self._log("DELETE", mid, reason, visit_idx, old)

    def none(self) -> None:
        """NONE: count it (the event log keeps only the changes)."""
        self.counts["NONE"] += 1

    def by_attribute(self, attribute: str) -> str | None:
        """The id of the memory about ``attribute`` (rule-based similarity), if any."""
        for mid, item in self.items.items():
            if item["attribute"] == attribute:
                return mid
        return None

    def _log(self, event: str, mid: str, text: str, visit_idx: int, old: str = "") -> None:
        self.counts[event] += 1
        rec = {"visit_idx": int(visit_idx), "event": event, "id": mid, "text": text}
        if old:
            rec["old_memory"] = old
        self.events.append(rec)


def rule_based_update(store: MemoryStore, facts: Sequence[Fact], with_ids: bool = True) -> None:
    """Apply the deterministic update rule (module docstring) to one visit's facts."""
    for f in facts:
        if f.kind == "negation":
            hit = None
            low = f.sentence.lower()
            for mid, item in store.items.items():
                name = item.get("name", "").lower()
                if item["kind"] in DELETABLE and name and name in low:
                    hit = mid
                    break
            if hit:
                store.delete(hit, f.visit_idx, reason=f.sentence)
            else:
                store.none()
            continue
        text = f.statement(with_ids=with_ids)
        mid = store.by_attribute(f.attribute)
        if mid is None:
            new = store.add(text, f.visit_idx, f.attribute, f.kind)
            store.items[new]["name"] = f.name
            store.items[new]["signature"] = list(f.signature)
        elif store.items[mid].get("signature") == list(f.signature):
            store.none()
        else:
            store.update(mid, text, f.visit_idx)
            store.items[mid]["signature"] = list(f.signature)


class Mem0Memory(EmbedsQueries, Strategy):
    """Mem0-style fact memory with top-K retrieval (derived; built by the prep model)."""

    name = "mem0"
    family = "agentic memory"
    derived = True
    uses_prep = True
    defaults = {
        "k": 5,
        "engine": "builtin",
        "search_k": 5,
        "with_ids": True,
        "embedding_model": DEFAULT_EMBEDDING_MODEL,
        "embedding_dir": None,
        "mem0ai_dir": None,
    }
    construction_keys = ("engine", "search_k", "with_ids", "embedding_model")

    def validate_params(self) -> None:
        self._positive_int("k")
        self._positive_int("search_k")
        if self.params["engine"] not in ENGINES:
            raise StrategyError(
                f"{self.name}: engine must be one of {ENGINES}, got {self.params['engine']!r}"
            )

    # -- construction -----------------------------------------------------------------------
    def prepare(self, jobs: Sequence[tuple[int, pd.DataFrame]], prep: Any) -> None:
        self._built: dict[int, dict] = {}
        if self.params["engine"] != "builtin" or getattr(prep, "is_llm", False):
            return
        # Rule-based: run every patient's pipeline first, then embed all memories in one batch.
        for sid, turns in jobs:
            self._built[sid] = self._rule_based(turns)
        self.embedder.ensure(
            [retrieval_text(m["text"]) for d in self._built.values() for m in d["memories"]]
        )

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        data = getattr(self, "_built", {}).pop(subject_id, None)
        if data is None:
            if self.params["engine"] == "mem0ai":
                data = self._mem0ai(subject_id, turns, prep)
            else:
                data = self._finish(*list(self._states(subject_id, turns, prep))[-1][1:])
            self.embedder.ensure([retrieval_text(m["text"]) for m in data["memories"]])
        return data

    def build_snapshots(
        self, subject_id: int, turns: pd.DataFrame, prep: Any, at: Sequence[int]
    ) -> dict[int, dict] | None:
        """The store after the first t visits for every t in ``at`` (one visit-by-visit pass;
        the streaming protocol, MedMemoryBench §5 "Evaluation Protocol"). None for the mem0ai engine (rebuilt)."""
        if self.params["engine"] != "builtin":
            return None
        wanted = {int(t) for t in at}
        out = {
            t: self._finish(store, n, list(warnings))
            for t, store, n, warnings in self._states(subject_id, turns, prep)
            if t in wanted
        }
        self.embedder.ensure(
            [retrieval_text(m["text"]) for d in out.values() for m in d["memories"]]
        )
        return out

    def _finish(self, store: MemoryStore, n_extracted: int, warnings: list[str]) -> dict:
        memories = [
            {
                k: v
                for k, v in m.items()
                if k in ("id", "text", "kind", "created_visit", "updated_visit")
            }
            for m in store.items.values()
        ]
        return {
            "engine": self.params["engine"],
            "memories": memories,
            "events": list(store.events),
            "event_counts": {e: int(store.counts.get(e, 0)) for e in EVENTS},
            "n_extracted": int(n_extracted),
            "warnings": list(warnings),
        }

    def _states(
        self, subject_id: int, turns: pd.DataFrame, prep: Any
    ) -> Iterator[tuple[int, MemoryStore, int, list[str]]]:
        """(visits seen, store, facts extracted so far, warnings) after each visit, in order:
        the builtin engine builds visit by visit, so every prefix is a snapshot."""
        if getattr(prep, "is_llm", False):
            yield from self._llm_states(subject_id, turns, prep)
            return
        store = MemoryStore()
        facts = facts_of(turns)
        by_visit: dict[int, list[Fact]] = {}
        for f in facts:
            by_visit.setdefault(f.visit_idx, []).append(f)
        n = 0
        for i, v in enumerate(visit_order(turns), start=1):
            if by_visit.get(v):
                n += len(by_visit[v])
                rule_based_update(store, by_visit[v], bool(self.params["with_ids"]))
            yield i, store, n, []

    def _rule_based(self, turns: pd.DataFrame) -> dict:
        return self._finish(*list(self._states(0, turns, None))[-1][1:])

    def _llm(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        return self._finish(*list(self._llm_states(subject_id, turns, prep))[-1][1:])

    def _llm_states(
        self, subject_id: int, turns: pd.DataFrame, prep: Any
    ) -> Iterator[tuple[int, MemoryStore, int, list[str]]]:
        store = MemoryStore()
        warnings: list[str] = []
        n_extracted = 0
        for i, (v, g) in enumerate(turns.groupby("visit_idx", sort=True), start=1):
            v = int(v)
            convo = render_visit(g, with_ids=bool(self.params["with_ids"]), header=True)
            reply = prep.complete(
                [
                    PrepRequest(
                        f"{self.name}|{subject_id}|v{v}|extract",
                        [
                            {"role": "system", "content": FACT_EXTRACTION_PROMPT},
                            {
                                "role": "user",
                                "content": FACT_EXTRACTION_USER.format(conversation=convo),
                            },
                        ],
                        max_tokens=4096,
                    )
                ]
            )[0]
            try:
                parsed = parse_json_reply(reply, f"visit {v} fact extraction")
                facts = [str(x).strip() for x in parsed.get("facts", []) if str(x).strip()]
            except (PrepError, AttributeError) as exc:
                warnings.append(str(exc))
                yield i, store, n_extracted, warnings
                continue
            n_extracted += len(facts)
            if facts:
                self._llm_update(store, facts, v, subject_id, prep, warnings)
            yield i, store, n_extracted, warnings

    def _similar(self, store: MemoryStore, facts: Sequence[str]) -> list[str]:
        """Ids of the existing memories most similar to any new fact (Mem0's search step)."""
        if not store.items:
            return []
        ids = list(store.items)
        mem = self.embedder.encode([retrieval_text(store.items[i]["text"]) for i in ids])
        new = self.embedder.encode([retrieval_text(f) for f in facts])
        keep: dict[str, None] = {}
        k = int(self.params["search_k"])
        for q in new:
            for j in np.argsort(-(mem @ q), kind="stable")[:k]:
                keep.setdefault(ids[int(j)], None)
        return list(keep)

    def _llm_update(
        self,
        store: MemoryStore,
        facts: Sequence[str],
        v: int,
        subject_id: int,
        prep: Any,
        warnings: list[str],
    ) -> None:
        similar = self._similar(store, facts)
        # Mem0 shows existing memories with temporary integer ids so the model cannot invent
        # or garble real ids.
        temp = {str(i): mid for i, mid in enumerate(similar)}
        old = [{"id": t, "text": store.items[mid]["text"]} for t, mid in temp.items()]
        reply = prep.complete(
            [
                PrepRequest(
                    f"{self.name}|{subject_id}|v{v}|update",
                    [
                        {"role": "system", "content": MEMORY_UPDATE_PROMPT},
                        {
                            "role": "user",
                            "content": MEMORY_UPDATE_USER.format(
                                old=json.dumps(old, ensure_ascii=False),
                                facts=json.dumps(list(facts), ensure_ascii=False),
                            ),
                        },
                    ],
                    max_tokens=4096,
                )
            ]
        )[0]
        try:
            parsed = parse_json_reply(reply, f"visit {v} memory update")
            actions = parsed.get("memory", []) if isinstance(parsed, Mapping) else []
        except PrepError as exc:
            warnings.append(str(exc))
            return
        for act in actions:
            if not isinstance(act, Mapping):
                continue
            event = str(act.get("event", "")).upper()
            text = str(act.get("text", "")).strip()
            mid = temp.get(str(act.get("id", "")))
            if event == "ADD" and text:
                store.add(text, v)
            elif event == "UPDATE" and mid in store.items and text:
                store.update(mid, text, v)
            elif event == "DELETE" and mid in store.items:
                store.delete(mid, v)
            elif event == "NONE":
                store.none()
            else:
                warnings.append(f"visit {v}: ignored memory action {dict(act)!r}")

    def _mem0ai(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        if not getattr(prep, "is_llm", False) or getattr(prep.backbone, "kind", "") != "openai":
            raise StrategyError(
                "mem0 engine 'mem0ai' needs an OpenAI-compatible LLM prep model (a backbone "
                "name), not the rule-based or an offline prep"
            )
        try:
            from mem0 import Memory
        except ImportError:
            raise StrategyError(
                "mem0 engine 'mem0ai' needs the mem0ai library: pip install clintrace-kit[mem0]"
            ) from None
        check_egress(prep.backbone, prep.credentialed)
        root = Path(self.params["mem0ai_dir"] or build_dir(None) / "mem0ai")
        config = mem0ai_config(prep, root, self.params["embedding_model"], self.embedder)
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = str(root)
        memory = Memory.from_config(config)
        user = f"patient-{subject_id}"
        memory.delete_all(user_id=user)  # each construction starts from an empty memory
        for v, g in turns.groupby("visit_idx", sort=True):
            messages = [
                {"role": "user" if s == "patient" else "assistant", "content": str(t)}
                for s, t in zip(g["speaker"], g["text_tagged"], strict=True)
            ]
            memory.add(messages, user_id=user, metadata={"visit_idx": int(v)})
        got = memory.get_all(user_id=user)
        rows = got.get("results", got) if isinstance(got, Mapping) else got
        store = MemoryStore()
        for r in rows:
            store.add(str(r.get("memory", "")), int((r.get("metadata") or {}).get("visit_idx", -1)))
        store.events, store.counts = [], Counter()  # mem0ai keeps its own history db
        return self._finish(store, len(rows), [])

    # -- access -----------------------------------------------------------------------------
    def ranked_memories(self, artifact: Artifact, query: str) -> list[dict[str, Any]]:
        """All memories by descending cosine to the query (ties: insertion order)."""
        memories = artifact.data.get("memories", [])
        if not memories:
            return []
        mat = self.embedder.encode([retrieval_text(m["text"]) for m in memories])
        q = self.embedder.encode([query])[0]
        order = np.argsort(-(mat @ q), kind="stable")
        return [memories[int(i)] for i in order]

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        top = self.ranked_memories(artifact, question_text(question))[: int(self.params["k"])]
        if not top:
            return MEMORY_HEADER + "\n(none)"
        return MEMORY_HEADER + "\n" + "\n".join(f"- {m['text']}" for m in top)

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int]:
        seen: dict[int, None] = {}
        for m in self.ranked_memories(artifact, question_text(question)):
            seen.setdefault(int(m.get("updated_visit", -1)), None)
        return [v for v in seen if v >= 0]

    def store_text(self, artifact: Artifact) -> str:
        return "\n".join(f"- {m['text']}" for m in artifact.data.get("memories", []))

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        memories = artifact.data.get("memories", [])
        counts = artifact.data.get("event_counts", {})
        return {
            "n_items": len(memories),
            "item": "facts",
            "n_facts": len(memories),
            "memory_chars": sum(len(m["text"]) for m in memories),
            "n_extracted": artifact.data.get("n_extracted", 0),
            **{f"n_{e.lower()}": int(counts.get(e, 0)) for e in EVENTS},
            "store_tokens": count_text_tokens(self.store_text(artifact)),
        }


def mem0ai_config(prep: Any, root: Path, embedding_model: str, embedder: Any) -> dict[str, Any]:
    """The ``Memory.from_config`` dict for the real mem0ai library (documented config keys:
    llm/openai, embedder/huggingface, vector_store/faiss, history_db_path)."""
    backbone = prep.backbone
    if embedder.static:
        raise StrategyError(
            f"mem0 engine 'mem0ai' embeds through sentence-transformers, which would cut the "
            f"static model {embedding_model!r} at 512 pieces; pass "
            f"embedding_model={TRANSFORMER_MODEL!r} or another sentence-transformers folder"
        )
    dims = embedder.dim
    return {
        "llm": {
            "provider": "openai",
            "config": {
                "model": backbone.model,
                "openai_base_url": backbone.base_url,
                "api_key": backbone.api_key(),
                "temperature": 0.0,
                "max_tokens": 2000,
            },
        },
        "embedder": {
            "provider": "huggingface",
            "config": {"model": resolve_model_path(embedding_model), "embedding_dims": dims},
        },
        "vector_store": {
            "provider": "faiss",
            "config": {
                "collection_name": "clintrace",
                "path": str(root / "faiss"),
                "distance_strategy": "cosine",
                "embedding_model_dims": dims,
            },
        },
        "history_db_path": str(root / "history.db"),
        "custom_fact_extraction_prompt": FACT_EXTRACTION_PROMPT,
    }
