"""Questions paraphrased by any backbone, kept only when checked (paper Fig. 2 stage 4:
questions paraphrased by an LLM from templates; Appendix A gate L3).

``paraphrase_questions(profile, B)`` (``clintrace questions --paraphrase B``) writes the variant
profile ``<profile>+pp-B`` (:mod:`clinlib.eval.synthesis.variants`): the profile's cohort, events and
dialogues, and its question set in which each question's wording is ``B``'s paraphrase when
every check of :data:`clinlib.tasks.paraphrase.PARAPHRASE_CHECKS` passes (answer format still
asked for, slots verbatim, gate L3 on the new wording), else the template wording.
``question_paraphrases.parquet`` records every question's outcome and failing check. Gates
L0-L4 then run on the new set (gold recomputed from the raw tables, L3 on the new wording); qids,
golds and anchors are the template's, so predictions join question by question
(:mod:`clinlib.analysis.paraphrase_robustness`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.core.guards import stage_run
from clinlib.data.build import load
from clinlib.eval.harness.cells import (
    build_items,
    is_credentialed,
    prediction_row,
    prepare,
    resolve_backbones,
)
from clinlib.eval.harness.session import run_coro
from clinlib.eval.harness.store import RunnerError
from clinlib.eval.synthesis.calls import PRICE_COLUMNS, Calls, price_requests
from clinlib.eval.synthesis.rewrite import resolve_writers
from clinlib.eval.synthesis.variants import derive_profile, variant_name
from clinlib.llm import (
    Backbone,
    ChatRequest,
    ChatResult,
    GenerationParams,
    LLMClient,
    ResponseCache,
    count_tokens,
    default_cache_path,
)
from clinlib.strategies.prep import RULE_BASED
from clinlib.tasks.build import PAPER_FILES, write_gated
from clinlib.tasks.gates import run_gates
from clinlib.tasks.paraphrase import check_paraphrase, first_problem, paraphrase_messages

PARAPHRASE_COLUMNS: dict[str, str] = {
    "qid": "string",
    "task": "string",
    "template_id": "int64",
    "backbone": "string",
    "accepted": "bool",
    "check": "string",  # the first failing check ("" when accepted)
    "detail": "string",
    "template": "string",  # the template wording
    "paraphrase": "string",  # the backbone's reply ("" on error)
}
# Output cap of a paraphrase: the question's own tokens twice over, at least this many.
MIN_PARAPHRASE_TOKENS = 128


def paraphrase_request(bb: Backbone, qid: str, question: str) -> ChatRequest:
    """The chat request for one question (temperature 0)."""
    cap = max(MIN_PARAPHRASE_TOKENS, 2 * count_tokens(question, bb.model))
    return ChatRequest(
        f"pp-{qid}",
        paraphrase_messages(question),
        GenerationParams(temperature=0.0, max_tokens=cap),
    )


def judge_paraphrases(
    questions: pd.DataFrame, replies: dict[str, ChatResult], backbone: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check every reply; (questions with the kept wording, the per-question record)."""
    rows, kept = [], []
    for q in questions.to_dict("records"):
        res = replies.get(f"pp-{q['qid']}")
        reply = None if res is None or res.error else res.response
        check, detail = first_problem(check_paraphrase(q, reply))
        if res is not None and res.error:
            detail = f"{res.error_kind}: {res.error}"[:200]
        rows.append(
            dict(
                qid=q["qid"],
                task=q["task"],
                template_id=int(q["template_id"]),
                backbone=backbone,
                accepted=not check,
                check=check,
                detail=detail,
                template=q["question"],
                paraphrase=reply or "",
            )
        )
        kept.append(str(reply).strip() if not check else q["question"])
    out = questions.copy()
    out["question"] = pd.Series(kept, index=out.index, dtype=questions["question"].dtype)
    log = pd.DataFrame(rows, columns=list(PARAPHRASE_COLUMNS)).astype(
        {c: t for c, t in PARAPHRASE_COLUMNS.items()}
    )
    return out, log


def paraphrase_questions(
    profile: str | None,
    backbone: str,
    *,
    into: str | None = None,
    budget_usd: float | None = None,
    mode: str = "live",
    config: str | Path | None = None,
    allow_unapproved: bool = False,
    concurrency: int | None = None,
    on_result: Callable[[ChatResult], None] | None = None,
    batch_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Paraphrase a profile's questions with ``backbone`` into a variant profile.

    Args:
        profile: the profile whose questions.parquet is paraphrased (a rewrite variant too).
        backbone: the paraphrasing backbone.
        into / budget_usd / mode / config / allow_unapproved / concurrency / on_result /
            batch_options: as for :func:`clinlib.eval.synthesis.rewrite.rewrite_dialogues`.

    Returns:
        ``{"profile", "questions", "paraphrases", "gates", "calls", "spent_usd"}``.

    Raises:
        GateError: a hard gate failed on the paraphrased set (its report is written).
    """
    name = resolve_profile(profile)
    questions = load("questions", name)
    (bb,) = resolve_writers([backbone], config)
    calls = Calls(
        name,
        is_credentialed(name),
        allow_unapproved,
        budget_usd,
        mode,
        config,
        concurrency,
        dict(batch_options or {}),
        on_result,
    )
    calls.guard([bb])
    dst = into or variant_name(name, "paraphrase", [backbone])
    derive_profile(
        name, dst, ["cohort", "dialogues"], {"kind": "paraphrase", "backbones": [backbone]}
    )
    calls.profile = dst
    reqs = [
        paraphrase_request(bb, str(q), str(t))
        for q, t in zip(questions["qid"], questions["question"], strict=True)
    ]
    replies = calls.send(bb, reqs)
    new, log = judge_paraphrases(questions, replies, bb.name)
    if not len(new):
        raise RunnerError(f"profile {name!r} has no questions to paraphrase")
    availability = load("question_availability", name)
    with stage_run("questions", dst, remove_on_failure=PAPER_FILES[:3]) as staging:
        log.to_parquet(staging.path("question_paraphrases.parquet"), index=False)
        gates = run_gates(new, dst)
        write_gated(staging, new, gates, availability, PAPER_FILES)
    return {
        "profile": dst,
        "questions": new,
        "paraphrases": log,
        "gates": gates,
        "calls": calls,
        "spent_usd": calls.spent_usd,
    }


def estimate_paraphrase(
    profile: str | None, backbone: str, config: str | Path | None = None, into: str | None = None
) -> pd.DataFrame:
    """What paraphrasing every question would cost, before sending (typical output: the
    question's own length). One :data:`PRICE_COLUMNS` row."""
    questions = load("questions", profile)
    (bb,) = resolve_writers([backbone], config)
    reqs = [
        paraphrase_request(bb, str(q), str(t))
        for q, t in zip(questions["qid"], questions["question"], strict=True)
    ]
    typical = [count_tokens(str(t), bb.model) for t in questions["question"]]
    path = default_cache_path(into or variant_name(profile, "paraphrase", [backbone]))
    if path.exists():
        with ResponseCache(path, readonly=True) as cache:
            row = price_requests(bb, reqs, typical, cache)
    else:
        row = price_requests(bb, reqs, typical, {})
    return pd.DataFrame([row], columns=list(PRICE_COLUMNS))


def paraphrase_frame(
    questions: pd.DataFrame,
    backbone: str,
    calls: Calls | None = None,
    config: str | Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Paraphrase and check a question table in memory (no profile written): the notebooks'
    path. Returns (questions with the kept wording, the per-question record)."""
    (bb,) = resolve_writers([backbone], config)
    # without a profile to say where the questions come from, they count as credentialed
    calls = calls or Calls("", credentialed=True, cache=False)
    reqs = [
        paraphrase_request(bb, str(q), str(t))
        for q, t in zip(questions["qid"], questions["question"], strict=True)
    ]
    return judge_paraphrases(questions, calls.send(bb, reqs), bb.name)


def answer_in_memory(
    profile: str | None,
    questions: pd.DataFrame,
    strategy: str = "full-context",
    backbone: str = "reference",
) -> pd.DataFrame:
    """Answer ``questions`` (any wording) under one strategy with one backbone, ``post``
    setting, without writing predictions: prediction rows as the harness scores them. For an
    offline reader or a cached backbone; a paid backbone belongs in ``runner.run`` on the
    variant profile (its own predictions folder)."""
    name = resolve_profile(profile)
    (bb,) = resolve_backbones([backbone], None)
    entries = prepare(name, [strategy], ["post"], RULE_BASED, None, None, questions)
    items = [it for _v, sub, ctx in entries for it in build_items(sub, ctx, bb)]

    async def go() -> list[ChatResult]:
        async with LLMClient(bb, credentialed=is_credentialed(name)) as client:
            return await client.complete_many([it.request for it in items])

    results = run_coro(go)
    return pd.DataFrame(
        [prediction_row(it, r, "in-memory") for it, r in zip(items, results, strict=True)]
    )
