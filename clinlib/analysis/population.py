"""Verbosity of population prompts, measured (PopMedQA App. B "Formalization of the Verbose
Context Problem": N is the prompt's context length, M the part that originates from coded
concepts; the problem is M/N large).

Per question and rendering, under each exact tokenizer (:mod:`clinlib.llm.tokens`;
``cl100k_base`` via ``gpt-4``, ``o200k_base`` via ``gpt-4o``): N (tokens of the stem and the
rendered group), M (the sum over printed concept occurrences of that concept string's tokens,
the codebook's definition lines included), M/N, tokens per code (M / coded events), and the
saving of each rendering against the descriptions baseline (1 - N / N_descriptions).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import pandas as pd

from clinlib.llm.tokens import count_tokens, encoding_for_model
from clinlib.tasks.population.questions import prompt_text

TOKENIZER_MODELS: tuple[str, ...] = ("gpt-4", "gpt-4o")
VERBOSITY_COLUMNS = ["qid", "task", "bin_tokens", "rendering", "tokenizer", "N", "M", "M_over_N",
                     "n_codes", "tokens_per_code", "saving_vs_descriptions"]  # fmt: skip


def _count(text: str, model: str) -> int:
    return count_tokens(text, model)


def verbosity(questions: pd.DataFrame, models: Sequence[str] = TOKENIZER_MODELS) -> pd.DataFrame:
    """One row per (question, rendering, tokenizer) with N, M, M/N and tokens per code."""
    rows = []
    for model in models:
        tok = functools.lru_cache(maxsize=None)(functools.partial(_count, model=model))
        for q in questions.itertuples(index=False):
            concepts = json.loads(q.concepts)
            n = count_tokens(prompt_text(q.question, q.context), model)
            m = sum(tok(c) * k for c, k in concepts.items())
            rows.append({"qid": q.qid, "task": q.task, "bin_tokens": q.bin_tokens,
                         "rendering": q.rendering, "tokenizer": encoding_for_model(model),
                         "N": n, "M": m, "M_over_N": m / n, "n_codes": q.n_codes,
                         "tokens_per_code": m / max(q.n_codes, 1)})  # fmt: skip
    out = pd.DataFrame(rows)
    base = out[out["rendering"] == "descriptions"].set_index(["qid", "tokenizer"])["N"]
    key = pd.MultiIndex.from_frame(out[["qid", "tokenizer"]])
    out["saving_vs_descriptions"] = 1.0 - out["N"].to_numpy() / base.reindex(key).to_numpy()
    return out[VERBOSITY_COLUMNS]


def verbosity_table(v: pd.DataFrame) -> pd.DataFrame:
    """Medians per (tokenizer, rendering): the table beside the seed's Fig. 1 statistics."""
    return (
        v.groupby(["tokenizer", "rendering"], sort=False)[
            ["N", "M", "M_over_N", "tokens_per_code", "saving_vs_descriptions"]
        ].median().reset_index()
    )  # fmt: skip
