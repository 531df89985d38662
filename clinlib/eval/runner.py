"""The evaluation harness: (strategy, backbone, setting) cells over the fixed question set.

Paper §4 ("Evaluation protocol"; 200,672 predictions over 8 strategies x 4 backbones x the
T3 pre/post settings) and Appendices D-E (cost accounting from input / output / cache-read
tokens; empty completions D1 kept and scored wrong). Every question is answered with the one
fixed prompt of :mod:`clinlib.eval.prompts` and the task's output cap
(:data:`clinlib.tasks.answers.MAX_TOKENS`), at temperature 0.

Settings: under ``post`` every question is evaluated; under ``pre`` only T3 questions are,
because T3 (the staleness probe) is the only task whose context differs between the two
settings (T5's contradictions are built into the representation in both, and the other tasks
never see an injection), so re-asking them under ``pre`` would duplicate ``post`` exactly.

Artifacts: predictions are APPENDED to ``data/build/<profile>/predictions/`` as small parquet
part files, each written atomically (temp + rename), so a crash (even SIGKILL) loses at most
the batch in flight, and that batch's answers are already in the response cache
(``llm_cache.sqlite``), so a re-run neither pays for them again nor duplicates a row. On start
the harness reads the keys ``(qid, strategy, backbone, prep_model, setting)`` already predicted
and skips them; ``retry_errors=True`` re-runs the rows that ended in an error, and
:func:`load_predictions` keeps the latest row per key.

Usage::

    from clinlib.eval import runner
    runner.estimate("quick", ["full-context"], ["gpt-4o-mini"])     # USD before sending
    cells = runner.run("quick", ["no-context-blind", "full-context"], ["reference"])
    preds = runner.load_predictions("quick")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core import guards
from clinlib.core.config import build_dir, resolve_profile
from clinlib.core.io import write_parquet
from clinlib.eval import prompt_tokens
from clinlib.eval.prompts import build_messages
from clinlib.llm import (
    Backbone,
    ChatRequest,
    ChatResult,
    GenerationParams,
    LLMClient,
    ResponseCache,
    cache_key,
    check_egress,
    count_tokens,
    default_cache_path,
    get_backbone,
    tokens,
)
from clinlib.llm.types import UnknownBackboneError

log = logging.getLogger("clinlib.eval.runner")

PREDICTIONS_DIR = "predictions"
PART_PREFIX = "part-"
SETTINGS: tuple[str, ...] = ("post", "pre")
# Tasks whose context differs between the settings; only these are asked under "pre".
PRE_TASKS: tuple[str, ...] = ("T3",)
KEY_COLUMNS: tuple[str, ...] = ("qid", "strategy", "backbone", "prep_model", "setting")
DEFAULT_BATCH_SIZE = 32
OFFLINE_BATCH_SIZE = 1024
TEMPERATURE = 0.0

# Column -> pandas dtype as written; every part file has exactly these, so the dataset has
# one schema whatever a batch held (e.g. a batch of errors has no parsed answers).
PREDICTION_DTYPES: dict[str, str] = {
    "qid": "string",
    "task": "string",
    "subtype": "string",
    "strategy": "string",
    "backbone": "string",
    "prep_model": "string",
    "setting": "string",
    "response": "string",
    "parsed": "string",
    "correct": "bool",
    "parsed_lenient": "string",
    "correct_lenient": "bool",
    "parse_failed": "bool",
    "empty": "bool",
    "finish_reason": "string",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cached_tokens": "int64",
    "cost_usd": "float64",
    "latency_s": "float64",
    "from_cache": "bool",
    "error": "string",
    "context_tokens": "int64",
    "run_id": "string",
    "written_at": "datetime64[us, UTC]",
}
PREDICTION_COLUMNS: tuple[str, ...] = tuple(PREDICTION_DTYPES)

CELL_COLUMNS: tuple[str, ...] = ("strategy", "backbone", "prep_model", "setting")
SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_COLUMNS,
    "n",
    "n_predicted",
    "accuracy",
    "accuracy_lenient",
    "parse_failures",
    "empty",
    "errors",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cost_usd",
    "new_predictions",
    "api_calls",
    "cache_hits",
    "new_cost_usd",
    "stopped",
)
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
)


class RunnerError(ValueError):
    """A run is mis-specified (unknown setting / task, bad limit or budget, bad artifact)."""


# -- paths and reading back ------------------------------------------------------------------
def predictions_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/predictions/`` (not created)."""
    return build_dir(profile) / PREDICTIONS_DIR


def _claim_predictions(name: str) -> None:
    """Before a run appends: predictions made for another question set or other dialogues
    (clinlib.core.guards, "predictions basis") are moved to ``predictions.stale-<time>/`` with one
    warning line, so no stale answer counts as done; paid answers to unchanged prompts come
    back from the response cache. A folder from before bases were recorded is moved only if
    it holds answers to questions that no longer exist."""
    from clinlib.data.build import load

    directory = predictions_dir(name)
    basis = guards.predictions_basis(name)
    parts = _part_files(directory)
    recorded = guards.read_basis(directory)
    changed = guards.stale_basis(recorded, basis)
    why = f"{changed} changed since they were made" if changed else None
    if parts and recorded is None:
        current = set(load("questions", name)["qid"])
        orphans = {q for p in parts for q in pd.read_parquet(p, columns=["qid"])["qid"]} - current
        why = (
            f"{len(orphans)} answered question(s) are no longer in questions.parquet"
            if orphans
            else None
        )
    if parts and why:
        aside = directory.with_name(f"{directory.name}.stale-{time.strftime('%Y%m%dT%H%M%S')}")
        directory.rename(aside)
        log.warning("stale predictions moved to %s: %s", aside, why)
    guards.write_basis(directory, basis)


def _part_files(directory: Path) -> list[Path]:
    # Names embed a zero-padded nanosecond clock, so name order is write order.
    return sorted(directory.glob(f"{PART_PREFIX}*.parquet")) if directory.is_dir() else []


def load_predictions(profile: str | None = None, *, dedupe: bool = True) -> pd.DataFrame:
    """All predictions of a profile.

    Args:
        profile: build profile.
        dedupe: keep only the latest row per (qid, strategy, backbone, prep_model, setting)
            (a ``retry_errors`` re-run supersedes the failed row); False returns every row.

    Returns:
        DataFrame with :data:`PREDICTION_COLUMNS` (empty if nothing was predicted yet).
    """
    why = guards.stale_basis(
        guards.read_basis(predictions_dir(profile)), guards.predictions_basis(profile)
    )
    if why:
        name = resolve_profile(profile)
        raise RunnerError(
            f"predictions in {predictions_dir(profile)} are stale: {why} changed since they "
            f"were made; re-run `clintrace evaluate-offline --profile {name}` (or `run`)"
        )
    frames = []
    for path in _part_files(predictions_dir(profile)):
        try:
            frames.append(pd.read_parquet(path))
        except Exception as exc:  # parts are renamed into place whole; this is corruption
            raise RunnerError(f"unreadable predictions part file {path}: {exc}") from None
    if not frames:
        return _typed(pd.DataFrame(columns=list(PREDICTION_COLUMNS)))
    df = pd.concat(frames, ignore_index=True)
    missing = [c for c in KEY_COLUMNS if c not in df.columns]
    if missing:
        raise RunnerError(f"predictions in {predictions_dir(profile)} lack columns {missing}")
    if dedupe:
        df = df.drop_duplicates(list(KEY_COLUMNS), keep="last").reset_index(drop=True)
    return df


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(index=df.index)
    for col, dtype in PREDICTION_DTYPES.items():
        values = df[col] if col in df.columns else pd.Series([None] * len(df), index=df.index)
        out[col] = values.astype(dtype) if len(df) else pd.Series([], dtype=dtype)
    return out


def _clean_stale_temps(directory: Path) -> None:
    """Remove temporaries left by a killed writer (their pid is no longer running)."""
    if not directory.is_dir():
        return
    for tmp in directory.glob(f".{PART_PREFIX}*.tmp-*"):
        match = re.search(r"\.tmp-(\d+)$", tmp.name)
        if match is None or _pid_alive(int(match.group(1))):
            continue
        tmp.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- questions, messages and requests --------------------------------------------------------
def setting_questions(questions: pd.DataFrame, setting: str) -> pd.DataFrame:
    """The questions asked under a setting: all under ``post``, only T3 under ``pre``.

    Args:
        questions: questions.parquet rows.
        setting: ``post`` or ``pre``.

    Returns:
        The subset, in the original order.
    """
    if setting not in SETTINGS:
        raise RunnerError(f"unknown setting {setting!r}; expected one of {SETTINGS}")
    if setting == "post":
        return questions
    return questions[questions["task"].isin(PRE_TASKS)]


def select_questions(
    questions: pd.DataFrame, tasks: Iterable[str] | None = None, limit: int | None = None
) -> pd.DataFrame:
    """Restrict the question set to some tasks and / or its first ``limit`` questions.

    Args:
        questions: questions.parquet rows.
        tasks: task names to keep (None = all).
        limit: keep the first ``limit`` questions per task (None = all), so a small run
            still covers every task.

    Returns:
        The subset (index reset).
    """
    for col in ("qid", "task", "question", "gold", "subject_ids"):
        if col not in questions.columns:
            raise RunnerError(f"questions table lacks column {col!r}")
    if questions["qid"].duplicated().any():
        dup = questions.loc[questions["qid"].duplicated(), "qid"].iloc[0]
        raise RunnerError(f"questions table has duplicate qid {dup!r}")
    out = questions
    if tasks is not None:
        tasks = list(tasks)
        unknown = sorted(set(tasks) - set(questions["task"]))
        if unknown:
            raise RunnerError(
                f"no questions for task(s) {unknown}; present: {sorted(set(questions['task']))}"
            )
        out = out[out["task"].isin(tasks)]
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise RunnerError(f"limit must be a positive integer, got {limit!r}")
        out = out.groupby("task", sort=False, group_keys=False).head(limit)
    return out.reset_index(drop=True)


def generation_params(task: str) -> GenerationParams:
    """Temperature 0 and the task's output cap (Appendix E.3)."""
    from clinlib.tasks.answers import MAX_TOKENS

    if task not in MAX_TOKENS:
        raise RunnerError(f"unknown task {task!r}; known: {sorted(MAX_TOKENS)}")
    return GenerationParams(temperature=TEMPERATURE, max_tokens=MAX_TOKENS[task])


def request_id(key: Sequence[str]) -> str:
    """The request id of a prediction key (``qid|strategy|backbone|prep_model|setting``)."""
    return "|".join(str(k) for k in key)


@dataclass
class _Item:
    """One question to answer in one cell: its request and what the prediction row needs."""

    key: tuple[str, str, str, str, str]
    request: ChatRequest
    question: dict[str, Any]
    context_tokens: int


def _items(questions: pd.DataFrame, contexts: pd.DataFrame, backbone: Backbone) -> list[_Item]:
    by_qid = {q["qid"]: q for q in questions.to_dict("records")}
    records = contexts.to_dict("records")
    # Questions sharing a context run back to back (first-seen order, stable within): an
    # offline reader then parses each record once, and a provider's prompt cache sees the
    # shared prefix repeatedly.
    first: dict[str, int] = {}
    for i, ctx in enumerate(records):
        first.setdefault(ctx["context"], i)
    records.sort(key=lambda ctx: first[ctx["context"]])
    items = []
    for ctx in records:
        q = by_qid[ctx["qid"]]
        # The label (name + non-default parameters, e.g. ``dense-retrieval(k=3)``) keys the
        # prediction, so an ablation variant never collides with the default strategy.
        key = (q["qid"], ctx["label"], backbone.name, ctx["prep_model"], ctx["setting"])
        req = ChatRequest(
            request_id(key), build_messages(q, ctx["context"]), generation_params(q["task"])
        )
        items.append(_Item(key, req, q, int(ctx["context_tokens"])))
    return items


def _options(q: dict[str, Any]) -> list[str] | None:
    opts = q.get("options")
    if opts is None or (isinstance(opts, float) and np.isnan(opts)):
        return None
    return [str(o) for o in list(opts)] or None


def prediction_row(item: _Item, result: ChatResult, run_id: str) -> dict[str, Any]:
    """Score one result (strict and lenient) into a prediction row.

    Errors and empty completions (D1) parse to nothing and are scored wrong.
    """
    from clinlib.tasks import score

    q = item.question
    response = result.response if result.error is None else None
    strict = score(q["task"], response, str(q["gold"]), _options(q), lenient=False)
    lenient = score(q["task"], response, str(q["gold"]), _options(q), lenient=True)
    qid, strategy, backbone, prep_model, setting = item.key
    return {
        "qid": qid,
        "task": q["task"],
        "subtype": q.get("subtype"),
        "strategy": strategy,
        "backbone": backbone,
        "prep_model": prep_model,
        "setting": setting,
        "response": response,
        "parsed": strict.parsed,
        "correct": strict.correct,
        "parsed_lenient": lenient.parsed,
        "correct_lenient": lenient.correct,
        "parse_failed": strict.parse_failed,
        "empty": bool(result.error is None and result.empty),
        "finish_reason": result.finish_reason,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "cached_tokens": result.cached_tokens,
        "cost_usd": result.cost_usd,
        "latency_s": result.latency_s,
        "from_cache": result.from_cache,
        "error": result.error,
        "context_tokens": item.context_tokens,
        "run_id": run_id,
    }


def write_part(rows: list[dict[str, Any]], profile: str | None, run_id: str, seq: int) -> Path:
    """Append rows as one atomic part file of the predictions dataset.

    Args:
        rows: prediction rows (see :data:`PREDICTION_COLUMNS`).
        profile: build profile.
        run_id: id of the writing run.
        seq: the run's part counter.

    Returns:
        The part file's path.
    """
    now = time.time_ns()
    df = pd.DataFrame(rows)
    df["written_at"] = pd.Timestamp(now, unit="ns", tz=UTC)
    name = f"{PART_PREFIX}{now:020d}-{run_id}-{seq:05d}.parquet"
    return write_parquet(_typed(df), predictions_dir(profile) / name)


# -- backbones -------------------------------------------------------------------------------
def resolve_backbones(names: Sequence[str | Backbone], config: str | Path | None) -> list[Backbone]:
    """Backbones by name; registers the kit's offline readers if a name is not yet known.

    Args:
        names: registry names (or Backbone objects).
        config: TOML config with user endpoints.

    Returns:
        The backbones, in order.
    """
    out = []
    for name in names:
        if isinstance(name, Backbone):
            out.append(name)
            continue
        try:
            out.append(get_backbone(name, config))
        except UnknownBackboneError:
            if not _register_offline_readers():
                raise
            out.append(get_backbone(name, config))
    if len({b.name for b in out}) != len(out):
        raise RunnerError(f"backbones repeat a name: {[b.name for b in out]}")
    return out


def _register_offline_readers() -> bool:
    """Register the reference / eager / replay readers (clinlib.eval.policies), if that module exists."""
    try:
        from clinlib.eval import policies as readers
    except ImportError:
        return False
    register = getattr(readers, "register_offline_backbones", None)
    if register is None:
        return False
    try:
        register()
    except ValueError as exc:  # already registered by an earlier call
        log.debug("offline readers: %s", exc)
    return True


def is_credentialed(profile: str | None) -> bool:
    """Whether the profile was built from credentialed data (source.json)."""
    from clinlib.data.build import read_source_info

    info = read_source_info(profile)
    value = info.get("credentialed")
    if not isinstance(value, bool):
        raise RunnerError(
            f"source.json of profile {resolve_profile(profile)!r} has credentialed={value!r}; "
            "expected true or false"
        )
    return value


# -- cost estimate ---------------------------------------------------------------------------
def _prepare(
    profile: str,
    strategies: Sequence[Any],
    settings: Sequence[str],
    prep: Any,
    tasks: Iterable[str] | None,
    limit: int | None,
    questions: pd.DataFrame | None,
    done: set[tuple[str, ...]] | None = None,
    backbone_names: Sequence[str] = (),
    config: str | Path | None = None,
    bar: Any = None,
) -> list[tuple[str, pd.DataFrame, pd.DataFrame | tuple[str, str]]]:
    """(setting, questions, contexts) per (setting, strategy); contexts are built offline.

    A (setting, strategy) whose every key is already in ``done`` for every backbone gets
    ``(strategy label, prep id)`` instead of contexts: a finished cell costs no context build.
    ``bar`` (clinlib.core.progress) counts the contexts built.
    """
    from clinlib.data.build import load
    from clinlib.strategies import get_strategy, question_contexts_many
    from clinlib.strategies.prep import RULE_BASED, get_prep

    if isinstance(settings, str):
        settings = (settings,)
    bad = [s for s in settings if s not in SETTINGS]
    if bad:
        raise RunnerError(f"unknown setting(s) {bad}; expected some of {SETTINGS}")
    if not strategies:
        raise RunnerError("no strategies given")
    qs = select_questions(load("questions", profile) if questions is None else questions, tasks,
                          limit)  # fmt: skip
    resolved: dict[str, Any] = {}

    def prep_for(strat: Any) -> Any:
        # Resolved only for strategies that use one (with the user's config, so a prep
        # backbone may be defined there), and once: an LLM prep opens the response cache.
        if not strat.uses_prep:
            return None
        if "model" not in resolved:
            resolved["model"] = get_prep(prep, profile=profile, config=config)
        return resolved["model"]

    out: list[Any] = []
    for setting in dict.fromkeys(settings):
        sub = setting_questions(qs, setting)
        if sub.empty:
            continue
        todo: list[tuple[int, Any]] = []
        for strategy in strategies:
            strat = (get_strategy(strategy, profile=profile)
                     if isinstance(strategy, str) else strategy)  # fmt: skip
            if done is not None and backbone_names:
                pid = strat.prep_id(prep_for(strat))
                keys = [(str(q), strat.label(), bb, pid, setting)
                        for q in sub["qid"] for bb in backbone_names]  # fmt: skip
                if all(k in done for k in keys):
                    out.append((setting, sub, (strat.label(), pid)))
                    continue
            todo.append((len(out), strat))
            out.append(None)
        if todo:
            # One pass for every strategy: the injected dialogue variants are built once.
            strats = [strat for _, strat in todo]
            prep_arg = next((prep_for(st) for st in strats if st.uses_prep), RULE_BASED)
            frames = question_contexts_many(sub, strats, profile, setting, prep_arg, bar=bar)
            for (i, _), frame in zip(todo, frames, strict=True):
                out[i] = (setting, sub, frame)
    return out


def _prepare_cells(
    profile: str,
    strategies: Sequence[Any],
    settings: Sequence[str],
    prep: Any,
    tasks: Iterable[str] | None,
    limit: int | None,
    questions: pd.DataFrame | None,
    backbones: Sequence[Backbone],
    done: set[tuple[str, ...]] | None = None,
    config: str | Path | None = None,
    bar: Any = None,
) -> list[tuple[Backbone, str, pd.DataFrame, pd.DataFrame | tuple[str, str]]]:
    """(backbone, setting, questions, contexts) per cell.

    With ``prep="matched"`` each answering backbone is its own prep model (Appendix G.5), so
    derived representations are built once per backbone; otherwise one prep model serves all.
    """
    from clinlib.strategies.prep import MATCHED, resolve_prep

    if isinstance(prep, str) and prep == MATCHED:
        groups = [([bb], resolve_prep(MATCHED, bb.name)) for bb in backbones]
    else:
        groups = [(list(backbones), prep)]
    out = []
    for group, group_prep in groups:
        prepared = _prepare(profile, strategies, settings, group_prep, tasks, limit, questions,
                            done=done, backbone_names=[bb.name for bb in group],
                            config=config, bar=bar)  # fmt: skip
        out.extend((bb, setting, sub, ctx) for setting, sub, ctx in prepared for bb in group)
    return out


def _done_keys(profile: str, retry_errors: bool, retry_empty: bool = False) -> set[tuple[str, ...]]:
    preds = load_predictions(profile)
    if retry_errors:
        preds = preds[preds["error"].isna()]
    if retry_empty and len(preds):
        preds = preds[~preds["empty"].fillna(False).astype(bool)]
    return set(preds[list(KEY_COLUMNS)].astype(str).itertuples(index=False, name=None))


def _listed(value: Any) -> list[Any]:
    """A bare string (or a single strategy / backbone object) as a one-name list: iterating
    "full-context" would otherwise ask for strategies 'f', 'u', ... (issue 12 §4)."""
    if isinstance(value, str | Backbone) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _counted_keys(counted: pd.DataFrame, bbs: Sequence[Backbone]) -> set[tuple[str, ...]]:
    """Prediction-shaped keys (qid, label, backbone, prep, setting) whose prompt tokens under
    the backbone's encoding were recorded (clinlib.eval.prompt_tokens)."""
    keys: set[tuple[str, ...]] = set()
    for bb in bbs:
        rows = counted[counted["encoding"] == prompt_tokens.encoding_of(bb.model)]
        keys.update((q, lab, bb.name, pid, st) for q, lab, pid, st in
                    rows[["qid", "strategy", "prep_model", "setting"]].itertuples(
                        index=False, name=None))  # fmt: skip
    return keys


def _recorded_inputs(
    counted: pd.DataFrame, qids: pd.Series, cell: tuple[str, str, str], bb: Backbone
) -> list[int]:
    """The recorded input tokens of ``qids`` in one (label, prep, setting) cell for ``bb``."""
    label, pid, setting = cell
    rows = counted[(counted["strategy"] == label) & (counted["prep_model"] == pid)
                   & (counted["setting"] == setting)
                   & (counted["encoding"] == prompt_tokens.encoding_of(bb.model))]  # fmt: skip
    by_qid = dict(zip(rows["qid"], rows["input_tokens"], strict=True))
    return [int(by_qid[str(q)]) for q in qids]


def _record_counts(name: str, items: Sequence[_Item]) -> None:
    """Record the prompt token counts of one cell's items (clinlib.eval.prompt_tokens), if the
    folder holds the current basis (a run claims it; an estimate only adds to it)."""
    if items:
        _qid, label, _bb, pid, setting = items[0].key
        prompt_tokens.record(name, (label, pid, setting), [it.key[0] for it in items],
                             [it.request.messages for it in items])  # fmt: skip


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
    reads are not discounted, so ``cost_usd_max`` is a true upper bound.

    Args:
        profile: build profile.
        strategies / backbones / settings / prep: the cells (as for :func:`run`).
        config: TOML config with user endpoints.
        tasks / limit: restrict the question set (as for :func:`run`).
        questions: use these rows instead of the profile's questions.parquet.

    Returns:
        One row per cell: :data:`ESTIMATE_COLUMNS` (``pending`` = not yet predicted).
    """
    name = resolve_profile(profile)
    strategies, backbones, settings = _listed(strategies), _listed(backbones), _listed(settings)
    tasks = _listed(tasks) if tasks is not None else None
    bbs = resolve_backbones(backbones, config)
    done = _done_keys(name, retry_errors=False)
    # Cells whose every prompt was counted by an earlier run (prompt_tokens) need no context.
    # Counts are keyed by qid, so they serve (and record) the profile's own question set only.
    own = questions is None
    if own:
        prompt_tokens.claim(name)
    counted = prompt_tokens.load_counts(name) if own else prompt_tokens.no_counts()
    known = _counted_keys(counted, bbs)
    rows = []
    for bb, _setting, sub, ctx in _prepare_cells(
        name, strategies, settings, prep, tasks, limit, questions, bbs, done=known,
        config=config,
    ):  # fmt: skip
        if isinstance(ctx, tuple):
            label, pid = ctx
            keys = [(str(q), label, bb.name, pid, _setting) for q in sub["qid"]]
            n_in = _recorded_inputs(counted, sub["qid"], (label, pid, _setting), bb)
            tasks_, golds = sub["task"].tolist(), sub["gold"].astype(str).tolist()
        else:
            items = _items(sub, ctx, bb)
            if own:
                _record_counts(name, items)
            tokens.warm_message_counts([it.request.messages for it in items], bb.model)  # threads
            keys = [it.key for it in items]
            n_in = [count_tokens(it.request.messages, bb.model) for it in items]
            tasks_ = [it.question["task"] for it in items]
            golds = [str(it.question["gold"]) for it in items]
        n_max = [int(generation_params(t).max_tokens or 0) for t in tasks_]
        n_typ = [count_tokens(g, bb.model) for g in golds]
        pending = [k not in done for k in keys]
        first = keys[0]  # _prepare never yields an empty cell
        rows.append({
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
        })  # fmt: skip
    return pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))


# -- the run ---------------------------------------------------------------------------------
@dataclass
class _Tally:
    """Live counters for the progress bar and the per-cell summary."""

    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    spent_usd: float = 0.0
    per_cell: dict[tuple[str, ...], dict[str, float]] = field(default_factory=dict)

    def cell(self, key: tuple[str, ...]) -> dict[str, float]:
        return self.per_cell.setdefault(
            key, {"new_predictions": 0, "api_calls": 0, "cache_hits": 0, "new_cost_usd": 0.0}
        )


def _run_coro(make: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also from inside Jupyter's running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def _batch_upper_cost(items: list[_Item], bb: Backbone, cache: ResponseCache) -> list[float]:
    """Upper-bound new spend of each item: 0 if cached or offline, else input + output cap."""
    if bb.kind != "openai":
        return [0.0] * len(items)
    out = []
    for it in items:
        key = cache_key(bb.base_url or "", bb.model, it.request.messages,
                        it.request.params.to_dict())  # fmt: skip
        if key in cache:
            out.append(0.0)
        else:
            n_in = count_tokens(it.request.messages, bb.model)
            out.append(bb.cost(n_in, int(it.request.params.max_tokens or 0)))
    return out


def _answer_groups(
    plan: list[tuple[Backbone, tuple[str, ...], int, list[_Item]]],
) -> list[list[tuple[Backbone, tuple[str, ...], int, list[_Item]]]]:
    """Cells with something to answer, in plan order; consecutive offline-reader cells of the
    same (strategy label, prep model, setting) form one group, every other cell its own."""
    groups: list[list[tuple[Backbone, tuple[str, ...], int, list[_Item]]]] = []
    for entry in plan:
        bb, cell, _n, todo = entry
        if not todo:
            continue
        prev = groups[-1][-1] if groups else None
        if (prev is not None and bb.kind != "openai" and prev[0].kind != "openai"
                and (prev[1][0], *prev[1][2:]) == (cell[0], *cell[2:])):  # fmt: skip
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def run(
    profile: str | None = None,
    strategies: Sequence[Any] = ("no-context-blind",),
    backbones: Sequence[str | Backbone] = ("reference",),
    settings: Sequence[str] = ("post",),
    prep: Any = "rule-based",
    budget_usd: float | None = None,
    retry_errors: bool = False,
    allow_unapproved: bool = False,
    config: str | Path | None = None,
    progress: bool = True,
    limit: int | None = None,
    tasks: Iterable[str] | None = None,
    *,
    retry_empty: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    questions: pd.DataFrame | None = None,
    client_options: dict[str, Any] | None = None,
    progress_position: int | None = None,
) -> pd.DataFrame:
    """Evaluate every (strategy, backbone, setting) cell and append its predictions.

    Resumable: keys already predicted are skipped (rows with an error too, unless
    ``retry_errors``); answers already in the response cache cost no API call. Predictions
    are written every ``batch_size`` answers as atomic part files.

    Args:
        profile: build profile.
        strategies: strategy names (or instances) from :mod:`clinlib.strategies`.
        backbones: backbone names (presets, config file, or offline readers) or objects.
        settings: ``post`` (every question) and / or ``pre`` (T3 only).
        prep: the prep model of derived strategies.
        budget_usd: stop before new spend (API calls not served from the cache) could exceed
            this; checked per batch against the batch's upper-bound cost.
        retry_errors: re-run keys whose latest row has an error (the new row supersedes it).
        retry_empty: re-ask keys whose latest completion was empty, past the response cache
            (``LLMClient(refresh_empty=True)``, the paper's M1 pass); the new row supersedes.
        allow_unapproved: send credentialed data to backbones not approved for it.
        config: TOML config with user endpoints.
        progress: show progress (done, cache hits, $ spent, errors): a tqdm bar on a
            terminal, a line with counts and rate every few seconds in a log.
        limit: first ``limit`` questions per task.
        tasks: restrict to these tasks.
        batch_size: answers per part file for network backbones (a crash loses at most this
            many, all cached); offline readers write at least OFFLINE_BATCH_SIZE per file.
        questions: use these rows instead of the profile's questions.parquet.
        client_options: extra :class:`LLMClient` arguments (timeout_s, max_retries, ...).
        progress_position: this run's row among parallel runs' bars (:func:`run_parallel`).

    Returns:
        The cell summary: :data:`SUMMARY_COLUMNS` (accuracies over rows without a transport
        error; ``stopped`` says why a cell did not finish, e.g. the budget).
    """
    from clinlib.core.progress import make_progress
    from clinlib.core.progress import progress as progress_bar

    name = resolve_profile(profile)
    strategies, backbones, settings = _listed(strategies), _listed(backbones), _listed(settings)
    tasks = _listed(tasks) if tasks is not None else None
    if budget_usd is not None and (not isinstance(budget_usd, int | float) or budget_usd < 0):
        raise RunnerError(f"budget_usd must be a number >= 0, got {budget_usd!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise RunnerError(f"batch_size must be a positive integer, got {batch_size!r}")
    bbs = resolve_backbones(backbones, config)
    credentialed = is_credentialed(name)
    for bb in bbs:  # refuse before any context is built or any request is sent
        check_egress(bb, credentialed, allow_unapproved)
    _clean_stale_temps(predictions_dir(name))
    if questions is None:  # a run on a given question subset answers the profile's set too
        _claim_predictions(name)
        prompt_tokens.claim(name)
    done = _done_keys(name, retry_errors, retry_empty)
    tag = f" [{progress_position + 1}]" if progress_position is not None else ""
    with progress_bar(None, f"contexts {name}{tag}", "context", enabled=progress,
                      position=progress_position) as ctx_bar:  # fmt: skip
        prepared = _prepare_cells(name, strategies, settings, prep, tasks, limit, questions,
                                  bbs, done=done, config=config, bar=ctx_bar)  # fmt: skip

    plan: list[tuple[Backbone, tuple[str, ...], int, list[_Item]]] = []
    # cell without backbone -> its items, whose prompt counts are recorded after answering
    counted: dict[tuple[str, ...], list[_Item]] = {}
    for bb, _setting, sub, ctx in prepared:
        if isinstance(ctx, tuple):  # finished cell: nothing to build or send
            plan.append((bb, (ctx[0], bb.name, ctx[1], _setting), len(sub), []))
            continue
        items = _items(sub, ctx, bb)
        cell = (ctx["label"].iloc[0], bb.name, ctx["prep_model"].iloc[0], _setting)
        if questions is None and (cell[0], *cell[2:]) not in counted:
            counted[(cell[0], *cell[2:])] = items
        plan.append((bb, cell, len(items), [it for it in items if it.key not in done]))
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    tally = _Tally()
    stopped: dict[tuple[str, ...], str] = {}
    total = sum(len(todo) for *_, todo in plan)
    bar = make_progress(total, f"run {name}{tag}", "q", enabled=progress,
                        position=progress_position)  # fmt: skip
    opts = dict(client_options or {})
    if retry_empty:
        opts.setdefault("refresh_empty", True)

    def on_result(cell: tuple[str, ...], bb: Backbone) -> Callable[[ChatResult], None]:
        def note(res: ChatResult) -> None:
            c = tally.cell(cell)
            tally.done += 1
            if res.from_cache:
                tally.cache_hits += 1
                c["cache_hits"] += 1
            elif res.error is None and bb.kind == "openai":
                tally.spent_usd += res.cost_usd
                c["new_cost_usd"] += res.cost_usd
            tally.errors += res.error is not None
            bar.set_postfix(done=tally.done, cache=tally.cache_hits,
                            spent=f"${tally.spent_usd:.4f}", errors=tally.errors,
                            refresh=False)  # fmt: skip
            bar.update(1)

        return note

    def client_for(bb: Backbone, cache: ResponseCache) -> LLMClient:
        return LLMClient(bb, cache=cache, credentialed=credentialed,
                         allow_unapproved=allow_unapproved, config=config, **opts)  # fmt: skip

    async def answer_batch(client: LLMClient, bb: Backbone, cell: tuple[str, ...],
                           batch: list[_Item], seq: int) -> None:  # fmt: skip
        before = client.stats.api_calls
        results = await client.complete_many(
            [it.request for it in batch], on_result=on_result(cell, bb)
        )
        rows = [prediction_row(it, r, run_id) for it, r in zip(batch, results, strict=True)]
        write_part(rows, name, run_id, seq)
        c = tally.cell(cell)
        c["new_predictions"] += len(rows)
        c["api_calls"] += client.stats.api_calls - before

    async def go_offline(group: list[tuple[Backbone, tuple[str, ...], int, list[_Item]]],
                         cache: ResponseCache, seq: int) -> int:  # fmt: skip
        # The offline readers of one (strategy, prep, setting) take turns batch by batch
        # over the same context-ordered items, so each record is parsed once for all of
        # them (see readers.SCAN_CACHE_CHARS). Offline answers cost nothing to recompute,
        # so their part files are larger (fewer files for every later load to open).
        step = max(batch_size, OFFLINE_BATCH_SIZE)
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(client_for(bb, cache))
                       for bb, *_ in group]  # fmt: skip
            for bb, _cell, _n, todo in group:
                tokens.warm_message_counts([it.request.messages for it in todo], bb.model)
            longest = max(len(todo) for *_, todo in group)
            for start in range(0, longest, step):
                for client, (bb, cell, _n, todo) in zip(clients, group, strict=True):
                    batch = todo[start : start + step]
                    if batch:
                        await answer_batch(client, bb, cell, batch, seq)
                        seq += 1
        return seq

    async def go_api(bb: Backbone, cell: tuple[str, ...], todo: list[_Item],
                     cache: ResponseCache, seq: int) -> int:  # fmt: skip
        async with client_for(bb, cache) as client:
            for start in range(0, len(todo), batch_size):
                batch = todo[start : start + batch_size]
                if budget_usd is not None:
                    costs = np.cumsum(_batch_upper_cost(batch, bb, cache))
                    fits = int(np.searchsorted(costs, budget_usd - tally.spent_usd,
                                               side="right"))  # fmt: skip
                    if fits < len(batch):
                        stopped[cell] = (
                            f"budget: ${tally.spent_usd:.4f} spent of "
                            f"${budget_usd:.4f}; the next {len(batch) - fits} "
                            f"request(s) could cost up to "
                            f"${costs[-1] - (costs[fits - 1] if fits else 0):.4f}"
                        )
                        batch = batch[:fits]
                if batch:
                    await answer_batch(client, bb, cell, batch, seq)
                    seq += 1
                if cell in stopped:
                    break
        return seq

    async def go() -> None:
        seq = 0
        cache = ResponseCache(default_cache_path(name))
        try:
            for group in _answer_groups(plan):
                bb, cell, _n, todo = group[0]
                if bb.kind != "openai":
                    seq = await go_offline(group, cache, seq)
                    continue
                seq = await go_api(bb, cell, todo, cache, seq)
                if cell in stopped:
                    return
        finally:
            cache.close()

    try:
        _run_coro(go)
    finally:
        bar.close()
    for cell_items in counted.values():
        # The contexts were built anyway: their prompt counts spare later estimates a rebuild
        # (after answering, so that recording never delays the first answers).
        _record_counts(name, cell_items)
    if stopped:
        reason = next(iter(stopped.values()))
        log.warning("run %s stopped early: %s", run_id, reason)
        for _bb, cell, _n, todo in plan:  # every cell not finished says why
            if cell not in stopped and tally.cell(cell)["new_predictions"] < len(todo):
                stopped[cell] = "not started: " + reason
    return summarize(load_predictions(name), plan, tally, stopped)


def _run_group(job: tuple[str, dict[str, Any]]) -> None:
    # Runs in a child process (spawned: no torch / SQLite state is inherited); the parent's
    # build folder is passed explicitly, since a spawned child re-imports clinlib.core.config.
    from clinlib.core import config

    build, kwargs = job
    config.BUILD_DIR = Path(build)
    run(**kwargs)


def run_parallel(
    profile: str | None,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: str = "rule-based",
    workers: int | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """:func:`run` with the strategies dealt round-robin to ``workers`` processes.

    For CPU-bound backbones (the offline readers) a single event loop uses one core; each
    process here builds its strategies' contexts and answers them on its own core. Every
    process appends its own part files (distinct run ids), so resumability and de-duplication
    are those of :func:`run`. Network backbones gain nothing: use :func:`run`.

    Args:
        profile / strategies / backbones / settings / prep: as for :func:`run` (strategies
            by name or label, so they can be sent to another process).
        workers: processes (default: the CPU count, at most one per strategy).
        **kwargs: further :func:`run` keyword arguments (e.g. ``config``, ``tasks``).

    Returns:
        The cell summary of every (strategy, backbone, setting) cell run.
    """
    import multiprocessing as mp

    from clinlib.strategies import get_strategy

    name = resolve_profile(profile)
    strategies, backbones, settings = _listed(strategies), _listed(backbones), _listed(settings)
    # Canonical labels (``dense-retrieval(k=5)`` is ``dense-retrieval``): what the
    # predictions record, so the summary below finds every cell that was run.
    strats = [get_strategy(str(s), profile=name) for s in strategies]
    names = [st.label() for st in strats]
    n = max(1, min(workers or os.cpu_count() or 1, len(names)))
    groups = [names[i::n] for i in range(n)]
    progress = kwargs.pop("progress", True)
    jobs = [dict(profile=name, strategies=g, backbones=list(backbones), settings=list(settings),
                 prep=prep, progress=progress, progress_position=i if n > 1 else None, **kwargs)
            for i, g in enumerate(groups)]  # fmt: skip
    if n == 1:
        run(**jobs[0])
        return _parallel_summary(name, names, backbones, settings)
    # Embed every question once here (both cores) rather than once per child process.
    from clinlib.core import config
    from clinlib.data.build import load

    given = kwargs.get("questions")
    records = select_questions(load("questions", name) if given is None else given,
                               kwargs.get("tasks"), kwargs.get("limit")).to_dict("records")  # fmt: skip
    for strat in strats:
        if strat.query_dependent:
            strat.warm_queries(records)
    if given is None:
        _claim_predictions(name)  # once here, before the children append
        prompt_tokens.claim(name)
    ctx = mp.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(n, mp_context=ctx) as pool:
        list(pool.map(_run_group, [(str(config.BUILD_DIR), job) for job in jobs]))
    return _parallel_summary(name, names, backbones, settings)


def _parallel_summary(
    name: str, names: Sequence[str], backbones: Sequence[str], settings: Sequence[str]
) -> pd.DataFrame:
    summary = cell_summary(load_predictions(name))
    wanted = summary["strategy"].isin(names) & summary["backbone"].isin(list(backbones))
    return summary[wanted & summary["setting"].isin(list(settings))].reset_index(drop=True)


def summarize(
    preds: pd.DataFrame,
    plan: Sequence[tuple[Backbone, tuple[str, ...], int, list[_Item]]],
    tally: _Tally | None = None,
    stopped: dict[tuple[str, ...], str] | None = None,
) -> pd.DataFrame:
    """The per-cell summary of a run (see :func:`cell_summary` for any predictions)."""
    base = cell_summary(preds)
    rows = []
    for _bb, cell, n, _todo in plan:
        match = base[(base[list(CELL_COLUMNS)] == pd.Series(cell, index=list(CELL_COLUMNS)))
                     .all(axis=1)]  # fmt: skip
        row = match.iloc[0].to_dict() if len(match) else dict(zip(CELL_COLUMNS, cell, strict=True))
        row["n"] = n
        counts = tally.cell(cell) if tally is not None else {}
        for col in ("new_predictions", "api_calls", "cache_hits", "new_cost_usd"):
            row[col] = counts.get(col, 0)
        row["stopped"] = (stopped or {}).get(cell)
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for col in (
        "n_predicted",
        "parse_failures",
        "empty",
        "errors",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "new_predictions",
        "api_calls",
        "cache_hits",
    ):
        out[col] = out[col].fillna(0).astype("int64")  # fmt: skip
    for col in ("cost_usd", "new_cost_usd"):
        out[col] = out[col].fillna(0.0).astype("float64")
    return out


def cell_summary(preds: pd.DataFrame) -> pd.DataFrame:
    """Accuracy, failures, tokens and cost per cell of a predictions table.

    Accuracy (strict and lenient) is over rows without a transport error (an error is not an
    answer; ``retry_errors`` re-asks it); empty completions count as wrong (D1).

    Args:
        preds: predictions (e.g. :func:`load_predictions`).

    Returns:
        One row per (strategy, backbone, prep_model, setting) with n_predicted, accuracy,
        accuracy_lenient, parse_failures, empty, errors, input / output / cached tokens,
        cost_usd.
    """
    cols = [*CELL_COLUMNS, "n_predicted", "accuracy", "accuracy_lenient", "parse_failures",
            "empty", "errors", "input_tokens", "output_tokens", "cached_tokens", "cost_usd"]  # fmt: skip
    if preds.empty:
        return pd.DataFrame(columns=cols)
    df = preds.assign(
        ok=preds["error"].isna(),
        c=preds["correct"].astype(bool) & preds["error"].isna(),
        cl=preds["correct_lenient"].astype(bool) & preds["error"].isna(),
        pf=preds["parse_failed"].astype(bool) & preds["error"].isna(),
    )
    g = df.groupby(list(CELL_COLUMNS), sort=False, dropna=False)
    out = g.agg(
        n_predicted=("qid", "size"),
        n_ok=("ok", "sum"),
        n_correct=("c", "sum"),
        n_correct_lenient=("cl", "sum"),
        parse_failures=("pf", "sum"),
        empty=("empty", "sum"),
        input_tokens=("input_tokens", "sum"),
        output_tokens=("output_tokens", "sum"),
        cached_tokens=("cached_tokens", "sum"),
        cost_usd=("cost_usd", "sum"),
    ).reset_index()
    denom = out["n_ok"].where(out["n_ok"] > 0)
    out["accuracy"] = out["n_correct"] / denom
    out["accuracy_lenient"] = out["n_correct_lenient"] / denom
    out["errors"] = out["n_predicted"] - out["n_ok"]
    return out[cols]


__all__ = [
    "ESTIMATE_COLUMNS",
    "KEY_COLUMNS",
    "PREDICTION_COLUMNS",
    "PRE_TASKS",
    "SETTINGS",
    "SUMMARY_COLUMNS",
    "RunnerError",
    "cell_summary",
    "estimate",
    "generation_params",
    "is_credentialed",
    "load_predictions",
    "prediction_row",
    "predictions_dir",
    "request_id",
    "resolve_backbones",
    "run",
    "select_questions",
    "setting_questions",
    "write_part",
]
