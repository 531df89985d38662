"""Answering population questions with any backbone, and pricing them before anything is sent
(PopMedQA §4: answers in each task's schema, Fig. 5's "answered properly").

:func:`answer_population` sends each (question, rendering) of ``population_questions.parquet``
to each backbone as one system + one user message (the records, then the question), through the
kit's client (:func:`clinlib.llm.run_batch`: response cache, retries, offline policies), parses
the reply strictly (the whole reply is the JSON answer) and leniently (the first JSON value,
``true``/``false`` or number in it), scores both with the task's App. C metric and appends the
rows to ``population_predictions.parquet`` (atomic; the latest row per key kept). A reply that
does not parse is recorded with ``parse_failed``; ``score`` is then the task's worst (0, or NaN
for the ATE's absolute error) and ``score_all`` counts it as Fig. 6's mean over all questions
does (:func:`failed_score`: 0, or the ATE error of the null answer 0).

Two prompts (Fig. 5's "Reasoning" family): ``direct`` (answer only) and ``cot`` (chain of
thought, Wei et al. 2022: reason step by step, then the answer alone after ``Answer:`` on the
last line; strictly parsed from the text after the last ``Answer:``). Generation: temperature 0
and :data:`MAX_TOKENS` answer tokens, a backbone flagged ``reasoning`` at its default
temperature and uncapped (§4).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import build_dir, resolve_profile
from clinlib.core.guards import StageError
from clinlib.core.io import read_artifact, write_parquet
from clinlib.eval.harness.cells import is_credentialed
from clinlib.eval.population.readers import register_population_readers
from clinlib.eval.synthesis.calls import Calls, price_requests
from clinlib.llm import Backbone, ChatRequest, ResponseCache, default_cache_path, get_backbone
from clinlib.llm.tokens import count_tokens
from clinlib.llm.types import GenerationParams
from clinlib.tasks.population.build import QUESTIONS_FILE, population_status
from clinlib.tasks.population.questions import population_answer, prompt_text, score
from clinlib.tasks.population.spec import TASK_IDS
from clinlib.tasks.population.tasks import MAX_TOKENS

PREDICTIONS_FILE = "population_predictions.parquet"
KEY = ["qid", "rendering", "prompt", "backbone"]
POPULATION_ALIAS = "population"  # `--tasks population`: all ten P- tasks
SYSTEM_PROMPT = (
    "You are a population-health analyst. You are given the longitudinal records of a group of "
    "patients, then a question about the group. Answer from the records only, in exactly the "
    "format the question asks for, and reply with the answer only."
)
COT_SYSTEM_PROMPT = (
    "You are a population-health analyst. You are given the longitudinal records of a group of "
    "patients, then a question about the group. Answer from the records only. Think step by "
    "step: write out your reasoning first, then give the answer alone on the last line, after "
    "'Answer:', in exactly the format the question asks for."
)
PROMPTS: tuple[str, ...] = ("direct", "cot")
ANSWER_MARK = "Answer:"
_JSON_START = re.compile(r"[\[{]|-?\d+(?:\.\d+)?|true|false", re.IGNORECASE)


def messages_for(question: str, context: str, prompt: str = "direct") -> list[dict[str, str]]:
    """The system prompt of ``prompt`` (``direct`` or ``cot``), then the records and question."""
    if prompt not in PROMPTS:
        raise ValueError(f"unknown population prompt {prompt!r}; known: {', '.join(PROMPTS)}")
    return [
        {"role": "system", "content": SYSTEM_PROMPT if prompt == "direct" else COT_SYSTEM_PROMPT},
        {"role": "user", "content": prompt_text(question, context)},
    ]


def _schema_ok(task: str, value: Any) -> bool:
    return population_answer(task).schema(value)


def final_answer(text: str | None) -> str:
    """The text after the reply's last ``Answer:`` (the whole reply when it has none)."""
    text = text or ""
    i = text.rfind(ANSWER_MARK)
    return text if i < 0 else text[i + len(ANSWER_MARK) :]


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


def failed_score(task: str, gold: float | None = None) -> float:
    """The score an unparsed answer counts at in the mean over all answers (Fig. 6's filled
    bars average "all the questions in the task", so every unparsed answer is in the mean):
    0 for a share metric (precision, accuracy, Rand index, F1, Kendall's tau); for the ATE's
    absolute error (lower is better; the seed states no value for it), the error of the null
    answer 0, i.e. ``|gold|`` (named here: the only answer-free estimate)."""
    if population_answer(task).lower_is_better:
        return abs(float(gold)) if gold is not None else math.nan
    return 0.0


def _score(task: str, value: Any, gold: Any) -> float:
    # an unscored error metric (lower is better) is NaN, never a perfect 0
    failed = math.nan if population_answer(task).lower_is_better else 0.0
    if value is None:
        return failed
    try:
        return score(task, value, gold)
    except (TypeError, ValueError):
        return failed


def load_population(profile: str | None = None) -> pd.DataFrame:
    """The built population rows; on a source the stage does not apply to, a one-line
    :class:`StageError` with the manifest's reason."""
    status = population_status(profile)
    if status.get("status") == "not_applicable":
        raise StageError(f"population: no questions on this build: {status['reason']}")
    return read_artifact(build_dir(resolve_profile(profile)) / QUESTIONS_FILE, "population")


def population_tasks(tasks: Sequence[str] | None) -> list[str] | None:
    """The population tasks a ``--tasks`` list asks for, or None when it names none.

    ``population`` stands for all ten (:data:`TASK_IDS`); ``P-...`` ids are checked. A list
    that mixes population and T-tasks is refused: the two sets have different questions,
    contexts (renderings, not strategies) and prediction files.
    """
    asked = [t.strip() for t in tasks or () if t.strip()]
    pop = [t for t in asked if t == POPULATION_ALIAS or t.startswith("P-")]
    if not pop:
        return None
    if len(pop) < len(asked):
        other = [t for t in asked if t not in pop]
        raise ValueError(f"--tasks mixes population tasks {pop} with {other}: run them apart")
    unknown = [t for t in pop if t != POPULATION_ALIAS and t not in TASK_IDS]
    if unknown:
        raise ValueError(f"unknown population task {unknown[0]!r}; known: {', '.join(TASK_IDS)}")
    return list(TASK_IDS) if POPULATION_ALIAS in pop else pop


def generation_params(bb: Backbone) -> GenerationParams:
    """Temperature 0 and :data:`MAX_TOKENS`; a ``reasoning`` backbone: its default temperature,
    no cap (PopMedQA §4)."""
    if bb.reasoning:
        return GenerationParams(max_tokens=None, temperature=None)
    return GenerationParams(max_tokens=MAX_TOKENS, temperature=0.0)


def request_key(qid: str, rendering: str, backbone: str, prompt: str = "direct") -> str:
    """``qid|rendering|backbone`` (a ``cot`` request: ``qid|rendering|cot|backbone``)."""
    mid = rendering if prompt == "direct" else f"{rendering}|{prompt}"
    return f"{qid}|{mid}|{backbone}"


def population_requests(
    qs: pd.DataFrame, bb: Backbone, prompt: str = "direct"
) -> list[ChatRequest]:
    """One request per (question, rendering) row, keyed by :func:`request_key`."""
    params = generation_params(bb)
    return [
        ChatRequest(
            request_key(q.qid, q.rendering, bb.name, prompt),
            messages_for(q.question, q.context, prompt),
            params,
        )
        for q in qs.itertuples()
    ]


def answer_population(
    profile: str | None,
    backbones: Sequence[str],
    renderings: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
    *,
    mode: str = "live",
    batch_options: dict[str, Any] | None = None,
    budget_usd: float | None = None,
    config: str | Path | None = None,
    allow_unapproved: bool = False,
    prompts: Sequence[str] = ("direct",),
) -> pd.DataFrame:
    """Ask every selected (question, rendering) of every backbone, once per prompt of
    ``prompts`` (:data:`PROMPTS`); returns the new rows.

    Requests go through :class:`clinlib.eval.synthesis.calls.Calls`, as the harness's other LLM
    calls do: the profile's response cache (a rerun asks nothing it has), the credentialed
    egress guard (refused before anything is sent), ``budget_usd`` and ``mode="batch"``
    (provider batch jobs at the batch price, for the long bins; a job still running raises
    :class:`~clinlib.llm.batch.BatchPending` after the finished backbones' rows are saved).
    """
    name = resolve_profile(profile)
    register_population_readers(name)
    qs = select_population(name, renderings, tasks, limit)
    bbs = [get_backbone(b, config) for b in backbones]
    calls = {
        kind: Calls(
            name,
            credentialed=is_credentialed(name),
            allow_unapproved=allow_unapproved,
            budget_usd=budget_usd,
            mode=mode,
            config=config,
            batch_options=dict(batch_options or {}),
            cache=kind != "offline",
        )
        for kind in ("offline", "openai")
    }
    calls["openai"].guard(bbs)  # every backbone refused or accepted before anything is sent
    rows: list[dict[str, Any]] = []
    try:
        for bb, prompt in ((b, p) for b in bbs for p in prompts):
            got = calls["offline" if bb.kind == "offline" else "openai"].send(
                bb, population_requests(qs, bb, prompt)
            )
            rows += [
                _row(q, bb.name, got[request_key(q.qid, q.rendering, bb.name, prompt)], prompt)
                for q in qs.itertuples()
            ]
    finally:
        _save(name, rows)
    return pd.DataFrame(rows)


def _save(name: str, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to the predictions file (atomic; the latest row per key kept)."""
    if not rows:
        return
    new = pd.DataFrame(rows)
    path = build_dir(name) / PREDICTIONS_FILE
    old = load_predictions(name) if path.exists() else new.iloc[0:0]
    merged = pd.concat([old, new], ignore_index=True).drop_duplicates(KEY, keep="last")
    write_parquet(merged, path)


def load_predictions(profile: str | None = None) -> pd.DataFrame:
    """``population_predictions.parquet``; rows written before prompts and ``score_all``
    existed read as ``direct`` with ``score_all`` recounted from their gold."""
    name = resolve_profile(profile)
    df = pd.read_parquet(build_dir(name) / PREDICTIONS_FILE)
    if "prompt" not in df.columns:
        df["prompt"] = "direct"
    if "score_all" not in df.columns:
        gold = load_population(name).drop_duplicates("qid").set_index("qid")["gold"]
        df["score_all"] = [
            s if not f else failed_score(t, json.loads(gold[q]) if q in gold.index else None)
            for s, f, t, q in zip(
                df["score"], df["parse_failed"], df["task"], df["qid"], strict=True
            )
        ]
    return df


def select_population(profile, renderings=None, tasks=None, limit=None) -> pd.DataFrame:
    """The built population rows a run or an estimate asks (renderings, tasks, the first
    ``limit`` questions of each task); refused when nothing matches."""
    return _select(load_population(profile), renderings, tasks, limit)


def _select(qs: pd.DataFrame, renderings, tasks, limit) -> pd.DataFrame:
    if renderings:
        qs = qs[qs["rendering"].isin(renderings)]
    if tasks:
        qs = qs[qs["task"].isin(tasks)]
    if limit:  # as `run --limit`: the first ``limit`` questions of each task
        firsts = qs.drop_duplicates("qid").groupby("task", sort=False).head(limit)
        qs = qs[qs["qid"].isin(firsts["qid"])]
    if qs.empty:
        raise ValueError("population: no question matches the selection (renderings / tasks)")
    return qs


def _row(q: Any, backbone: str, r: Any, prompt: str = "direct") -> dict[str, Any]:
    gold = json.loads(q.gold)
    reply = final_answer(r.response) if prompt == "cot" else r.response
    strict, lenient = parse_strict(q.task, reply), parse_lenient(q.task, reply)
    scored = _score(q.task, strict, gold)
    return {
        "qid": q.qid,
        "rendering": q.rendering,
        "prompt": prompt,
        "backbone": backbone,
        "task": q.task,
        "bin_tokens": q.bin_tokens,
        "response": r.response,
        "error": r.error,
        "parse_failed": strict is None,
        "parse_failed_lenient": lenient is None,
        "score": scored,
        "score_all": failed_score(q.task, gold) if strict is None else scored,
        "score_lenient": _score(q.task, lenient, gold),
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "cost_usd": r.cost_usd,
    }


def estimate_population(
    profile: str | None,
    backbones: Sequence[str],
    renderings: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
    config: str | Path | None = None,
) -> pd.DataFrame:
    """What the built population set costs per (backbone, rendering, length bin) before
    anything is sent: exact input tokens of the real messages under each backbone's tokenizer,
    output at the cap (``_max``) or the gold's length (``_typical``), live and batch prices
    (:func:`clinlib.eval.synthesis.calls.price_requests`; ``cached`` requests cost nothing), and
    ``overflow``: prompts that do not fit the backbone's stated context window."""
    name = resolve_profile(profile)
    register_population_readers(name)
    qs = select_population(name, renderings, tasks, limit)
    rows = []
    with ResponseCache(default_cache_path(name)) as cache:
        for b in backbones:
            bb = get_backbone(b, config)
            for (rendering, bin_tokens), sub in qs.groupby(["rendering", "bin_tokens"]):
                reqs = population_requests(sub, bb)
                typical = [count_tokens(g, bb.model) for g in sub["gold"]]
                row = price_requests(bb, reqs, typical, cache)
                window = bb.context_window if bb.kind == "openai" else None
                n_in = [count_tokens(r.messages, bb.model) for r in reqs]
                rows.append(
                    {
                        **row,
                        "rendering": rendering,
                        "bin_tokens": int(bin_tokens),
                        "overflow": pd.NA
                        if not window
                        else sum(i + MAX_TOKENS > window for i in n_in),
                    }
                )
    out = pd.DataFrame(rows)
    first = ["backbone", "rendering", "bin_tokens"]
    return out[first + [c for c in out.columns if c not in first]]


def price_population(
    backbones: Sequence[str],
    n_questions: int,
    tokens_per_question: int,
    output_tokens: int = MAX_TOKENS,
    config: str | Path | None = None,
) -> pd.DataFrame:
    """Upper-bound USD of a population set of a given size, built or not: ``n_questions``
    prompts of ``tokens_per_question`` input tokens (e.g. the seed's 256K bin) and
    ``output_tokens`` each, at each backbone's live and batch list prices; ``fits_context``
    says whether one prompt fits its stated context window."""
    if n_questions < 1 or tokens_per_question < 1:
        raise ValueError(
            f"population set: questions ({n_questions}) and tokens per question "
            f"({tokens_per_question}) must be >= 1"
        )
    rows = []
    for name in backbones:
        bb = get_backbone(name, config)
        ctx = bb.context_window
        n_in, n_out = n_questions * tokens_per_question, n_questions * output_tokens
        rows.append(
            {
                "backbone": bb.name,
                "n_questions": n_questions,
                "input_tokens": n_in,
                "usd_upper": round(bb.cost(n_in, n_out), 2),
                "batch_usd_upper": round(bb.batch_cost(n_in, n_out), 2),
                "fits_context": None if not ctx else tokens_per_question + output_tokens <= ctx,
            }
        )
    return pd.DataFrame(rows)


def prompt_tokens(question: str, context: str, model: str) -> int:
    """Exact input tokens of one population prompt for ``model`` (chat accounting)."""
    return count_tokens(messages_for(question, context), model)
