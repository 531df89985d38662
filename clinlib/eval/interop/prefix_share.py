"""How much of the kit's prompts a prefix cache can reuse (for a self-hosted vLLM behind
the OpenAI-compatible entry; the record-first prompt order of :mod:`clinlib.eval.harness.prompts`).

vLLM's automatic prefix caching keeps the KV blocks of earlier prompts, keyed by the hash of
each full block of ``block`` tokens (16 by default) and every token before it; a new prompt
reuses its leading blocks whose chain was seen before. :func:`block_hits` counts that, for a
cache that never evicts (an upper bound: a real cache holds as many blocks as GPU memory
allows). Prompts are tokenised with the kit's tokenizer (:mod:`clinlib.llm.tokens`; tiktoken's
encoding for the model named, not the served model's own tokenizer) over the message contents
joined by role markers (a chat template's exact special tokens differ; they shift, not break,
what two prompts share). :func:`profile_prefix_share` measures a profile's prompts per strategy
in the kit's order (record, then question) and with the question first, for contrast.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.data.build import load
from clinlib.eval.harness.prompts import (
    QUESTION_HEADER,
    RECORD_HEADER,
    SYSTEM_PROMPT,
    build_messages,
)
from clinlib.llm.tokens import encoding_for_model, get_encoding
from clinlib.strategies.construction import question_contexts_many

VLLM_BLOCK = 16  # vLLM's default KV block size (tokens)
ORDERS: tuple[str, ...] = ("record-first", "question-first")
SHARE_COLUMNS: tuple[str, ...] = (
    "strategy",
    "order",
    "prompts",
    "prompt_tokens",
    "shared_tokens",
    "share",
)


def block_hits(prompts: Sequence[Sequence[int]], block: int = VLLM_BLOCK) -> list[int]:
    """Tokens of each prompt served from the cache: its leading full blocks whose hash chain
    an earlier prompt (in order) already put there. Pure; a cache that never evicts."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    seen: set[bytes] = set()
    out = []
    for ids in prompts:
        chain, hit, hitting = b"", 0, True
        for start in range(0, len(ids) - len(ids) % block, block):
            blob = ",".join(map(str, ids[start : start + block])).encode()
            chain = hashlib.sha256(chain + blob).digest()
            if hitting and chain in seen:
                hit += block
            else:
                hitting = False
                seen.add(chain)
        out.append(hit)
    return out


def prompt_ids(messages: Sequence[Mapping[str, Any]], model: str = "gpt-4o-mini") -> list[int]:
    """The token ids of a chat prompt: each message as ``<|role|>\\n`` + content (module note)."""
    enc = get_encoding(encoding_for_model(model))
    ids: list[int] = []
    for m in messages:
        ids += enc.encode(f"<|{m['role']}|>\n{m['content']}\n", disallowed_special=())
    return ids


def question_first(question: Mapping[str, Any], context: str) -> list[dict[str, str]]:
    """The kit's messages with the question before the record (the order NOT used)."""
    record = context.strip() or "(no patient record is provided)"
    user = f"{QUESTION_HEADER}\n{str(question['question']).strip()}\n\n{RECORD_HEADER}\n{record}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def share_row(prompts: Sequence[Sequence[int]], block: int = VLLM_BLOCK) -> dict[str, float]:
    """prompts, prompt_tokens, shared_tokens and their share for prompts sent in this order."""
    total = sum(len(p) for p in prompts)
    shared = sum(block_hits(prompts, block))
    return {
        "prompts": len(prompts),
        "prompt_tokens": total,
        "shared_tokens": shared,
        "share": shared / total if total else float("nan"),
    }


def profile_prefix_share(
    profile: str | None = None,
    strategies: Sequence[str] = ("full-context", "dense-retrieval", "mem0"),
    setting: str = "post",
    model: str = "gpt-4o-mini",
    block: int = VLLM_BLOCK,
    questions: pd.DataFrame | None = None,
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The shared-prefix share of a profile's answering prompts, per strategy and order
    (questions in questions.parquet order, as a run sends them: :data:`SHARE_COLUMNS`);
    ``questions`` / ``dialogues`` default to the profile's."""
    name = resolve_profile(profile)
    qs = questions if questions is not None else load("questions", name)
    frames = question_contexts_many(qs, list(strategies), name, setting, dialogues=dialogues)
    by_qid = {str(r["qid"]): r for r in qs.to_dict("records")}
    rows = []
    for label, frame in zip(strategies, frames, strict=True):
        pairs = [(by_qid[str(q)], c) for q, c in zip(frame["qid"], frame["context"], strict=True)]
        for order in ORDERS:
            build = build_messages if order == "record-first" else question_first
            ids = [prompt_ids(build(q, c), model) for q, c in pairs]
            rows.append({"strategy": label, "order": order, **share_row(ids, block)})
    return pd.DataFrame(rows, columns=list(SHARE_COLUMNS))
