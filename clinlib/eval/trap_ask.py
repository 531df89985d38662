"""Trap questions answered by any backbone (issue 30 §2; MedMemoryBench Appendix D.1 answer
prompts, §5 "Query Design").

:func:`ask_traps` builds each strategy's contexts over the trap dialogue
(:func:`clinlib.eval.traps.trap_contexts`, any setting), sends one user message per (question,
context) to each backbone through the kit's client (:func:`clinlib.llm.run_batch`: response
cache for endpoint backbones, retries, accounting; offline policies in process) and scores the
reply with :func:`clinlib.eval.traps.score_trap` (S / O; L rows keep ``correct`` NA for the
judge). The answer prompts are the seed's Appendix D.1 templates, ``<memory_source>`` being
the context and an option list added to the O types (SUA is free text in the seed; here it
has options). The backbone ``reference`` is the trap reader of :mod:`clinlib.eval.traps` (a
deterministic policy, not a language model).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.data.build import load
from clinlib.eval.traps import READER, RUN_COLUMNS, answer_contexts, score_trap, trap_contexts
from clinlib.llm import ChatRequest, ResponseCache, default_cache_path, get_backbone, run_batch
from clinlib.llm.types import GenerationParams

MAX_TOKENS = {"S": 64, "O": 16, "L": 512}
_LETTERS = "ABCDEFGH"
EEM_PROMPT = ("Context: Based on the memory below, accurately answer the following question. "
              "Question: {question} Answer Requirements: 1. Provide the target entity name "
              "directly. 2. Keep the answer brief and precise. 3. Do not include lengthy "
              "explanations. Answer:")  # fmt: skip
TLA_PROMPT = ("Context: Based on the memory below, accurately answer the following question. "
              "Question: {question} Answer Requirements: 1. If the question asks about a time, "
              "answer in YYYY-MM-DD format (e.g., 2024-01-15). 2. If the question asks about an "
              "event at a specific time, clearly describe the event content and key details. "
              "3. Keep the answer concise and directly grounded in memory. Answer:")  # fmt: skip
OPTION_PROMPT = ("Context: Based on the memory below, and considering the patient's allergy "
                 "history, medical history, medications, and personal preferences, answer the "
                 "following question. Question: {question} Options: {options} Answer "
                 "Requirements: 1. Select the correct option. 2. Output only the option letter, "
                 "such as B. 3. Do not provide any explanation. Answer:")  # fmt: skip
IG_PROMPT = ("Context: Based on the memory below, and considering the patient's allergy history, "
             "medical history, medications, and personal preferences, answer the following "
             "question. Question: {question} Answer Requirements: 1. Reason from this patient's "
             "specific remembered information; do not give generic medical advice. 2. Maintain a "
             "warm yet professional tone. 3. Be concise, direct, and avoid boilerplate. 4. If "
             "recommending or advising against something, briefly explain the reason based on "
             "the patient's specific situation. Answer:")  # fmt: skip
MCD_PROMPT = ("Context: Based on the memory below, carefully review the patient's complete "
              "medical history and conduct a comprehensive analysis by combining information "
              "from multiple visits. Question: {question} Answer Requirements: 1. Clearly list "
              "the memory content you draw upon. 2. Present a clear reasoning path from evidence "
              "to conclusions. 3. Provide a final comprehensive judgment. Answer:")  # fmt: skip
PROMPTS = {"EEM": EEM_PROMPT, "TLA": TLA_PROMPT, "SUA": OPTION_PROMPT, "MQ": OPTION_PROMPT,
           "IG": IG_PROMPT, "MCD": MCD_PROMPT}  # fmt: skip


def trap_messages(question: dict, context: str) -> list[dict[str, str]]:
    """The one user message for a trap question: the memory, then the seed's answer prompt."""
    opts = " ".join(f"{_LETTERS[i]}. {o}" for i, o in enumerate(list(question["options"])))
    prompt = PROMPTS[question["task"]].format(question=question["question"], options=opts)
    return [{"role": "user", "content": f"Memory:\n{context or '(empty)'}\n\n{prompt}"}]


def ask_traps(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
) -> pd.DataFrame:
    """Every (trap question, strategy, setting) answered by every backbone: :data:`RUN_COLUMNS`
    plus error, input_tokens, output_tokens, cost_usd (NA for the reference reader)."""
    name = resolve_profile(profile)
    questions = load("trap_questions", name)
    qs = {r["qid"]: r for r in questions.to_dict("records")}
    parts = []
    for setting in settings:
        contexts = trap_contexts(name, strategies, setting, prep)
        measured = answer_contexts(questions, contexts)  # retention + the reference reader
        if READER in backbones:
            parts.append(measured)
        for bb_name in (b for b in backbones if b != READER):
            parts.append(_ask(bb_name, qs, contexts, measured, name))
    return pd.concat(parts, ignore_index=True)


def _ask(bb_name, qs, contexts, measured, profile) -> pd.DataFrame:
    bb = get_backbone(bb_name)
    recs = contexts.to_dict("records")
    reqs = [ChatRequest(f"{c['qid']}|{c['label']}|{c['setting']}|{bb.name}",
                        trap_messages(qs[c["qid"]], c["context"]),
                        GenerationParams(max_tokens=MAX_TOKENS[qs[c["qid"]]["answer_format"]],
                                         temperature=0.0))
            for c in recs]  # fmt: skip
    cache = None if bb.kind == "offline" else ResponseCache(default_cache_path(profile))
    results = run_batch(bb, reqs, cache=cache)
    out = measured.copy()
    out["backbone"] = bb.name
    out["response"] = [r.response or "" for r in results]
    out["correct"] = pd.array([score_trap(qs[c["qid"]], r.response or "") for c, r in
                               zip(recs, results, strict=True)], dtype="boolean")  # fmt: skip
    for col in ("error", "input_tokens", "output_tokens", "cost_usd"):
        out[col] = [getattr(r, col) for r in results]
    return out[[*RUN_COLUMNS, "error", "input_tokens", "output_tokens", "cost_usd"]]
