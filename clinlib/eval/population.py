"""Answering population questions with any backbone, and pricing them before anything is sent
(issue 29 §3; PopMedQA §4: answers in each task's schema, Fig. 5's "answered properly").

:func:`answer_population` sends each (question, rendering) of ``population_questions.parquet``
to each backbone as one system + one user message (the records, then the question), through the
kit's client (:func:`clinlib.llm.run_batch`: response cache, retries, offline policies), parses
the reply strictly (the whole reply is the JSON answer) and leniently (the first JSON value,
``true``/``false`` or number in it), scores both with the task's App. C metric and appends the
rows to ``population_predictions.parquet`` (atomic; the latest row per key kept). A reply that
does not parse is recorded with ``parse_failed`` and scored at the task's worst (0, or NaN for
the ATE's absolute error, which has no worst value).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from clinlib.core.config import build_dir, resolve_profile
from clinlib.core.io import read_artifact, write_parquet
from clinlib.eval.population_readers import register_population_readers
from clinlib.llm import ChatRequest, ResponseCache, default_cache_path, get_backbone, run_batch
from clinlib.llm.tokens import count_tokens
from clinlib.llm.types import GenerationParams
from clinlib.tasks.population.build import QUESTIONS_FILE
from clinlib.tasks.population.questions import prompt_text, score

PREDICTIONS_FILE = "population_predictions.parquet"
KEY = ["qid", "rendering", "backbone"]
MAX_TOKENS = 512
SYSTEM_PROMPT = (
    "You are a population-health analyst. You are given the longitudinal records of a group of "
    "patients, then a question about the group. Answer from the records only, in exactly the "
    "format the question asks for, and reply with the answer only."
)
_JSON_START = re.compile(r"[\[{]|-?\d+(?:\.\d+)?|true|false", re.IGNORECASE)


def messages_for(question: str, context: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt_text(question, context)}]  # fmt: skip


def _schema_ok(task: str, value: Any) -> bool:
    if task in ("P-CLQ", "P-OUT", "P-SIM", "P-TOP", "P-SRT"):
        return isinstance(value, list) and all(isinstance(x, str | int) for x in value)
    if task in ("P-ICC", "P-CLS"):
        return isinstance(value, dict)
    if task == "P-CLU":
        return isinstance(value, list) and all(isinstance(c, list) for c in value)
    if task == "P-IPW":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, bool)  # P-TST


def parse_strict(task: str, text: str | None) -> Any:
    """The reply as the task's JSON answer, or None."""
    try:
        value = json.loads((text or "").strip())
    except ValueError:
        return None
    return value if _schema_ok(task, value) else None


def parse_lenient(task: str, text: str | None) -> Any:
    """The first JSON value of the task's schema anywhere in the reply, or None."""
    dec = json.JSONDecoder()
    for m in _JSON_START.finditer(text or ""):
        chunk = text[m.start() :]
        if chunk[:4].lower() == "true" or chunk[:5].lower() == "false":
            chunk = chunk.lower()
        try:
            value, _ = dec.raw_decode(chunk)
        except ValueError:
            continue
        if _schema_ok(task, value):
            return value
    return None


def _score(task: str, value: Any, gold: Any) -> float:
    if value is None:
        return math.nan if task == "P-IPW" else 0.0
    try:
        return score(task, value, gold)
    except (TypeError, ValueError):
        return math.nan if task == "P-IPW" else 0.0


def load_population(profile: str | None = None) -> pd.DataFrame:
    return read_artifact(build_dir(resolve_profile(profile)) / QUESTIONS_FILE, "population")


def answer_population(
    profile: str | None,
    backbones: Sequence[str],
    renderings: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """Ask every selected (question, rendering) of every backbone; returns the new rows."""
    name = resolve_profile(profile)
    register_population_readers(name)
    qs = _select(load_population(name), renderings, tasks, limit)
    rows = []
    for bb_name in backbones:
        bb = get_backbone(bb_name)
        reqs = [ChatRequest(f"{q.qid}|{q.rendering}|{bb.name}", messages_for(q.question, q.context),
                            GenerationParams(max_tokens=MAX_TOKENS, temperature=0.0))
                for q in qs.itertuples()]  # fmt: skip
        cache = None if bb.kind == "offline" else ResponseCache(default_cache_path(name))
        for q, r in zip(qs.itertuples(), run_batch(bb, reqs, cache=cache), strict=True):
            rows.append(_row(q, bb.name, r))
    new = pd.DataFrame(rows)
    path = build_dir(name) / PREDICTIONS_FILE
    old = pd.read_parquet(path) if path.exists() else new.iloc[0:0]
    merged = pd.concat([old, new], ignore_index=True).drop_duplicates(KEY, keep="last")
    write_parquet(merged, path)
    return new


def _select(qs: pd.DataFrame, renderings, tasks, limit) -> pd.DataFrame:
    if renderings:
        qs = qs[qs["rendering"].isin(renderings)]
    if tasks:
        qs = qs[qs["task"].isin(tasks)]
    if limit:
        keep = qs["qid"].drop_duplicates().head(limit)
        qs = qs[qs["qid"].isin(keep)]
    if qs.empty:
        raise ValueError("population: no question matches the selection (renderings / tasks)")
    return qs


def _row(q: Any, backbone: str, r: Any) -> dict[str, Any]:
    gold = json.loads(q.gold)
    strict, lenient = parse_strict(q.task, r.response), parse_lenient(q.task, r.response)
    return {
        "qid": q.qid, "rendering": q.rendering, "backbone": backbone, "task": q.task,
        "bin_tokens": q.bin_tokens, "response": r.response, "error": r.error,
        "parse_failed": strict is None, "parse_failed_lenient": lenient is None,
        "score": _score(q.task, strict, gold), "score_lenient": _score(q.task, lenient, gold),
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "cost_usd": r.cost_usd,
    }  # fmt: skip


def estimate_population(
    backbones: Sequence[str],
    n_questions: int,
    tokens_per_question: int,
    output_tokens: int = MAX_TOKENS,
) -> pd.DataFrame:
    """Upper-bound USD of a population set before anything is sent: ``n_questions`` prompts of
    ``tokens_per_question`` input tokens (e.g. the seed's 256K bin) and ``output_tokens`` each,
    at each backbone's list prices; notes whether the prompt fits its context window."""
    rows = []
    for name in backbones:
        bb = get_backbone(name)
        ctx = bb.context_window
        per_q = bb.cost(tokens_per_question, output_tokens)
        rows.append({"backbone": bb.name, "n_questions": n_questions,
                     "input_tokens": n_questions * tokens_per_question,
                     "usd_upper": round(per_q * n_questions, 2),
                     "fits_context": None if not ctx else tokens_per_question + output_tokens <= ctx})  # fmt: skip
    return pd.DataFrame(rows)


def prompt_tokens(question: str, context: str, model: str) -> int:
    """Exact input tokens of one population prompt for ``model`` (chat accounting)."""
    return count_tokens(messages_for(question, context), model)
