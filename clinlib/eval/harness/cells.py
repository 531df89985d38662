"""Cells of the evaluation: the questions of a setting, backbones, requests and prediction rows.

Paper §4 ("Backbones"): every question is answered with the one fixed prompt of
:mod:`clinlib.eval.harness.prompts` and the task's output cap (:data:`clinlib.tasks.answers.MAX_TOKENS`),
at temperature 0; errors and empty completions (Appendix D1) are kept and scored wrong. Under
``post`` every question is evaluated; under ``pre`` only T3 questions are, because T3 (the
staleness probe) is the only task whose context differs between the two settings. The
accumulation settings of :mod:`clinlib.tasks.settings` (MedMemoryBench §5 "Evaluation Protocol") run through the same
cells: ``stream`` asks each single-patient question at every checkpoint (one cell per
``stream@t`` value), ``mixed`` asks every question over noisy dialogues.
Contexts are built offline per (setting, strategy) (:func:`prepare`). Design: docs/design.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.data.build import load, read_source_info
from clinlib.eval.harness import prompt_tokens
from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.harness.records import Cell, Item, PredictionKey, RunSpec
from clinlib.eval.harness.store import RunnerError
from clinlib.eval.readers.policies import register_offline_backbones
from clinlib.eval.readers.version import reader_version
from clinlib.llm import Backbone, ChatRequest, ChatResult, GenerationParams, get_backbone
from clinlib.llm.types import UnknownBackboneError
from clinlib.strategies import STRATEGIES, get_strategy, question_contexts_many, setting_plan
from clinlib.strategies.prep import MATCHED, RULE_BASED, get_prep, resolve_prep
from clinlib.strategies.remote_memory import context_sha
from clinlib.tasks import SPECS, score
from clinlib.tasks.answers import CUT_TASKS
from clinlib.tasks.extended import load_questions
from clinlib.tasks.settings import (
    STATIC_SETTINGS,
    Setting,
    SettingError,
    asked_questions,
    parse_settings,
)
from clinlib.tasks.traps.answers import is_trap_task
from clinlib.tasks.traps.facts import trap_dialogue

log = logging.getLogger("clinlib.eval.harness.runner")

SETTINGS: tuple[str, ...] = STATIC_SETTINGS
TEMPERATURE = 0.0
# Prediction columns a context row carries through to its prediction (NA unless ``stream``).
CHECKPOINT_COLUMNS: tuple[str, ...] = ("checkpoint_visit", "checkpoint_final", "memory_items")


def run_settings(settings: str | Setting | Iterable[str | Setting]) -> list[Setting]:
    """Parsed settings (:mod:`clinlib.tasks.settings`); a bad spec is a RunnerError."""
    try:
        return parse_settings(settings)
    except SettingError as exc:
        raise RunnerError(str(exc)) from None


def setting_questions(questions: pd.DataFrame, setting: str | Setting) -> pd.DataFrame:
    """The questions asked under a setting: all under ``post`` and ``mixed``, only T3 under
    ``pre``, the single-patient ones under ``stream`` (each at several checkpoints).

    Args:
        questions: questions.parquet rows.
        setting: a setting spec (:func:`clinlib.tasks.settings.parse_setting`).

    Returns:
        The subset, in the original order.
    """
    return asked_questions(questions, run_settings(setting)[0])


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


def run_questions(
    profile: str, tasks: Iterable[str] | None, given: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``given``, else the questions a run on ``tasks`` asks
    (:func:`clinlib.tasks.extended.load_questions`); an unknown task, or a judged trap type
    (IG, MCD), is a RunnerError."""
    if given is not None:
        return given
    try:
        return load_questions(profile, tasks)
    except ValueError as exc:
        raise RunnerError(str(exc)) from None


def generation_params(task: str) -> GenerationParams:
    """The task's spec's decoding settings: its ``temperature`` (None: the harness's 0,
    Appendix E.3) and its output cap ``max_tokens`` (the trap set's are the seed's: 0.3 and
    10,240)."""
    if task not in SPECS:
        raise RunnerError(f"unknown task {task!r}; known: {sorted(SPECS)}")
    spec = SPECS[task]
    temperature = TEMPERATURE if spec.temperature is None else float(spec.temperature)
    return GenerationParams(temperature=temperature, max_tokens=spec.max_tokens)


def request_id(key: Sequence[str]) -> str:
    """The request id of a prediction key (``qid|strategy|backbone|prep_model|setting``)."""
    return "|".join(str(k) for k in key)


def _rows(df: pd.DataFrame, memo: dict[int, tuple[pd.DataFrame, list[dict]]] | None) -> list[dict]:
    """``df.to_dict("records")``, converted once per frame in ``memo`` (fresh dicts each call)."""
    if memo is None:
        return df.to_dict("records")
    if id(df) not in memo or memo[id(df)][0] is not df:
        memo[id(df)] = (df, df.to_dict("records"))
    return [dict(r) for r in memo[id(df)][1]]


def build_items(
    questions: pd.DataFrame,
    contexts: pd.DataFrame,
    backbone: Backbone,
    memo: dict[int, tuple[pd.DataFrame, list[dict]]] | None = None,
) -> list[Item]:
    """The items of one cell: each context's question as a request, questions sharing a
    context back to back. ``memo`` (a dict the caller keeps while the frames are unchanged)
    converts a frame shared by several backbones' cells to records once."""
    by_qid = {q["qid"]: q for q in _rows(questions, memo)}
    records = _rows(contexts, memo)
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
        key = PredictionKey(
            q["qid"], ctx["label"], backbone.name, ctx["prep_model"], ctx["setting"]
        )
        req = ChatRequest(
            request_id(key), build_messages(q, ctx["context"]), generation_params(q["task"])
        )
        items.append(
            Item(
                key,
                req,
                q,
                int(ctx["context_tokens"]),
                {c: ctx[c] for c in CHECKPOINT_COLUMNS if c in ctx}
                | {"context_sha": context_sha(str(ctx["context"]))},
            )
        )
    return items


def question_options(q: dict[str, Any]) -> list[str] | None:
    opts = q.get("options")
    if opts is None or (isinstance(opts, float) and np.isnan(opts)):
        return None
    return [str(o) for o in list(opts)] or None


def prediction_row(item: Item, result: ChatResult, run_id: str) -> dict[str, Any]:
    """Score one result (strict and lenient) into a prediction row.

    Errors and empty completions (D1) parse to nothing and are scored wrong. ``score`` /
    ``score_lenient`` are the graded scores (1.0 / 0.0 = correct / wrong; Kendall's tau for
    T10) and ``parse_problem`` says why a response did not parse, where the task can (T10).
    """
    q = item.question
    response = result.response if result.error is None else None
    qid, strategy, backbone, prep_model, setting = item.key
    return {
        "qid": qid,
        "task": q["task"],
        "subtype": q.get("subtype"),
        "strategy": strategy,
        "backbone": backbone,
        "prep_model": prep_model,
        "setting": setting,
        **scored_fields(q, response),
        "empty": bool(result.error is None and result.empty),
        "finish_reason": result.finish_reason,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "cached_tokens": result.cached_tokens,
        "cost_usd": result.cost_usd,
        "latency_s": result.latency_s,
        "from_cache": result.from_cache,
        "error": result.error,
        "error_kind": result.error_kind if result.error is not None else None,
        "context_tokens": item.context_tokens,
        **{c: item.checkpoint.get(c) for c in CHECKPOINT_COLUMNS},
        "context_sha": item.checkpoint.get("context_sha"),
        "reader_version": reader_version(backbone),
        "run_id": run_id,
    }


def scored_fields(q: dict[str, Any], response: str | None) -> dict[str, Any]:
    """The scoring columns of a prediction row: ``response`` parsed and scored strictly and
    leniently against question ``q``'s gold with the task's own parsers (also used by
    ``clintrace score`` for predictions made elsewhere, :mod:`clinlib.eval.interop.external`)."""
    # a family with one rule for both modes (traps) scores through its spec's scorer
    strict = score(q["task"], response, str(q["gold"]), question_options(q), lenient=False)
    lenient = score(q["task"], response, str(q["gold"]), question_options(q), lenient=True)
    return {
        "response": response,
        "parsed": strict.parsed,
        "correct": strict.correct,
        "parsed_lenient": lenient.parsed,
        "correct_lenient": lenient.correct,
        "score": strict.value,
        "score_lenient": lenient.value,
        "parse_failed": strict.parse_failed,
        "parse_problem": strict.problem,
    }


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
            _register_offline_readers()
            out.append(get_backbone(name, config))
    if len({b.name for b in out}) != len(out):
        raise RunnerError(f"backbones repeat a name: {[b.name for b in out]}")
    return out


def _register_offline_readers() -> None:
    """Register the reference / eager / replay readers (clinlib.eval.readers.policies)."""
    try:
        register_offline_backbones()
    except ValueError as exc:  # already registered by an earlier call
        log.debug("offline readers: %s", exc)


def is_credentialed(profile: str | None) -> bool:
    """Whether the profile was built from credentialed data (source.json)."""
    info = read_source_info(profile)
    value = info.get("credentialed")
    if not isinstance(value, bool):
        raise RunnerError(
            f"source.json of profile {resolve_profile(profile)!r} has credentialed={value!r}; "
            "expected true or false"
        )
    return value


def refuse_leaking(questions: pd.DataFrame, strategies: Sequence[Any]) -> None:
    """Refuse, in one line, to ask a cut task (T11: the target visit cut at a moment,
    :data:`clinlib.tasks.answers.CUT_TASKS`) under a strategy whose context shows the target
    visit: its events after the cut are the answer (LongMedBench, its decision task: the
    memory is the history BEFORE the current visit V_n). Every ``history_only`` strategy is
    allowed — the history windows, and retrieval and Mem0 bounded to the visits before the
    target (``history-dense-retrieval``, ``history-mem0``: the RAG and Mem0 rows of its
    Table 5). Checked before any context is built.

    Raises:
        RunnerError: naming the cut tasks asked, the strategies refused and the ones allowed.
    """
    asked = sorted(set(questions["task"].astype(str)) & set(CUT_TASKS))
    leaking = [s.label() for s in strategies if not s.history_only]
    if asked and leaking:
        allowed = sorted(n for n, cls in STRATEGIES.items() if cls.history_only)
        raise RunnerError(
            f"{', '.join(asked)} cannot be asked under {', '.join(leaking)}: their context "
            f"shows the current stay past the decision's cut (the answer); ask {', '.join(asked)} "
            f"under a history-only strategy: {', '.join(allowed)}"
        )


class Prepared(NamedTuple):
    """One (setting value, strategy) of a run: its questions and contexts, or None when every
    key of it is already predicted for every backbone (a finished cell builds no context)."""

    setting: str
    questions: pd.DataFrame
    strategy: str
    prep_model: str
    contexts: pd.DataFrame | None


def prepare(
    profile: str,
    strategies: Sequence[Any],
    settings: Sequence[str | Setting],
    prep: Any,
    tasks: Iterable[str] | None,
    limit: int | None,
    questions: pd.DataFrame | None,
    config: str | Path | None = None,
    bar: Any = None,
) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(setting value, questions, contexts) per (setting value, strategy), every context built
    (see :func:`prepare_contexts`)."""
    spec = RunSpec(
        profile,
        strategies,
        settings=settings,
        prep=prep,
        tasks=tasks,
        limit=limit,
        questions=questions,
    )
    return [
        (p.setting, p.questions, p.contexts)
        for p in prepare_contexts(profile, spec, prep, config=config, bar=bar)
    ]


def prepare_contexts(
    profile: str,
    spec: RunSpec,
    prep: Any,
    done: set[tuple[str, ...]] | None = None,
    backbone_names: Sequence[str] = (),
    config: str | Path | None = None,
    bar: Any = None,
) -> list[Prepared]:
    """One :class:`Prepared` per (setting value, strategy) of ``spec`` under ``prep``;
    contexts are built offline. A static setting has one value (its label); ``stream`` one per
    checkpoint (``stream@6``: 6 sessions seen), so every downstream cell is one checkpoint.

    A (setting, strategy) whose every key is already in ``done`` for every backbone is
    prepared without contexts (finished). ``bar`` (clinlib.core.progress) counts the contexts
    built.
    """
    parsed = run_settings(spec.settings)
    if not spec.strategies:
        raise RunnerError("no strategies given")
    # load_questions: the paper's set, plus the extended set only when an extended task is named
    qs = select_questions(
        run_questions(profile, spec.tasks, spec.questions), spec.tasks, spec.limit
    )
    refuse_leaking(qs, [_strategy(s, profile) for s in spec.strategies])
    prep_for = _prep_resolver(prep, profile, config)
    out: list[Any] = []
    for setting, (group, turns) in (
        (st, g) for st in parsed for g in _dialogue_groups(qs, profile)
    ):
        sub = asked_questions(group, setting)
        if sub.empty:
            continue
        plan = setting_plan(sub, setting, profile, dialogues=turns)
        values = list(dict.fromkeys(plan.sort_values("checkpoint_visit", kind="stable")["setting"]))
        sub_of = {v: sub[sub["qid"].isin(set(g["qid"]))] for v, g in plan.groupby("setting")}
        todo: list[tuple[int, Any]] = []
        for strat in (_strategy(s, profile) for s in spec.strategies):
            if done is not None and backbone_names:
                pid = strat.prep_id(prep_for(strat))
                keys = [
                    (str(q), strat.label(), bb, pid, v)
                    for q, v in zip(plan["qid"], plan["setting"], strict=True)
                    for bb in backbone_names
                ]
                if all(k in done for k in keys):
                    out.append([Prepared(v, sub_of[v], strat.label(), pid, None) for v in values])
                    continue
            todo.append((len(out), strat))
            out.append(None)
        if todo:
            # One pass for every strategy: the injected dialogue variants are built once.
            strats = [strat for _, strat in todo]
            prep_arg = next((prep_for(st) for st in strats if st.uses_prep), RULE_BASED)
            frames = question_contexts_many(
                sub, strats, profile, setting, prep_arg, bar=bar, dialogues=turns
            )
            for (i, strat), frame in zip(todo, frames, strict=True):
                out[i] = [_built(v, sub_of[v], frame[frame["setting"] == v], strat) for v in values]
    return [entry for group in out for entry in group]


def _strategy(strategy: Any, profile: str) -> Any:
    # a name is resolved afresh per (setting, dialogue group), as each context build expects
    return get_strategy(strategy, profile=profile) if isinstance(strategy, str) else strategy


def _prep_resolver(prep: Any, profile: str, config: str | Path | None) -> Any:
    """The prep model of a strategy: resolved only for strategies that use one (with the
    user's config, so a prep backbone may be defined there), and once: an LLM prep opens the
    response cache."""
    resolved: dict[str, Any] = {}

    def prep_for(strat: Any) -> Any:
        if not strat.uses_prep:
            return None
        if "model" not in resolved:
            resolved["model"] = get_prep(prep, profile=profile, config=config)
        return resolved["model"]

    return prep_for


def _built(value: str, questions: pd.DataFrame, frame: pd.DataFrame, strat: Any) -> Prepared:
    """A prepared (setting value, strategy) with its contexts, keyed as its rows are."""
    frame = frame.reset_index(drop=True)
    if frame.empty:  # nothing to ask: the key is never read
        return Prepared(value, questions, strat.label(), "", frame)
    return Prepared(value, questions, frame["label"].iloc[0], frame["prep_model"].iloc[0], frame)


def _dialogue_groups(
    questions: pd.DataFrame, profile: str
) -> list[tuple[pd.DataFrame, pd.DataFrame | None]]:
    """(questions, dialogues) groups: the trap questions over the trap dialogue (dialogues
    plus the injected constraints, clinlib.tasks.traps.facts), the others over the profile's
    dialogues (None: the construction loads them), so no trap turn reaches T1–T11."""
    trap = questions["task"].map(is_trap_task).astype(bool)
    out: list[tuple[pd.DataFrame, pd.DataFrame | None]] = []
    if (~trap).any():
        out.append((questions[~trap], None))
    if trap.any():
        turns = trap_dialogue(load("dialogues", profile), load("trap_facts", profile))
        out.append((questions[trap], turns))
    return out


def prepare_cells(
    name: str,
    spec: RunSpec,
    backbones: Sequence[Backbone],
    done: set[tuple[str, ...]] | None = None,
    config: str | Path | None = None,
    bar: Any = None,
) -> list[Cell]:
    """One :class:`Cell` per (backbone, setting value, strategy) of ``spec`` on profile
    ``name`` (finished when ``done`` holds every key of it).

    With ``prep="matched"`` each answering backbone is its own prep model (Appendix G.5), so
    derived representations are built once per backbone; otherwise one prep model serves all.
    """
    if isinstance(spec.prep, str) and spec.prep == MATCHED:
        groups = [([bb], resolve_prep(MATCHED, bb.name)) for bb in backbones]
    else:
        groups = [(list(backbones), spec.prep)]
    out = []
    for group, group_prep in groups:
        prepared = prepare_contexts(
            name,
            spec,
            group_prep,
            done=done,
            config=config,
            bar=bar,
            backbone_names=[bb.name for bb in group],
        )
        out.extend(
            Cell(bb, p.setting, p.questions, p.strategy, p.prep_model, p.contexts)
            for p in prepared
            for bb in group
        )
    return out


def record_counts(name: str, items: Sequence[Item]) -> None:
    """Record the prompt token counts of one cell's items (clinlib.eval.harness.prompt_tokens), if the
    folder holds the current basis (a run claims it; an estimate only adds to it)."""
    if items:
        _qid, label, _bb, pid, setting = items[0].key
        prompt_tokens.record(
            name,
            (label, pid, setting),
            [it.key[0] for it in items],
            [it.request.messages for it in items],
        )
