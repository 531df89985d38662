"""Batch builds of the strategies' constructions (paper §4 "Memory prep model": artifacts are
extracted "once before any question is asked"; Appendix G.5–G.6 ablations rebuild only what
changed). The artifacts are cached by :class:`clinlib.strategies.cache.ConstructionCache`.

:func:`build_all` builds a profile's dialogues for several strategies and returns a summary
frame (built / cached / seconds); :func:`question_contexts` gives the runner the prompt context
of every question under one strategy and setting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import check_artifact
from clinlib.core.progress import progress as progress_bar
from clinlib.data.build import load
from clinlib.strategies.base import (
    Artifact,
    Strategy,
    StrategyError,
    check_turns,
    context_for,
    dialogue_hash,
    subject_ids_of,
    turns_of,
)
from clinlib.strategies.build_cost import attach_usage, metered
from clinlib.strategies.cache import CONSTRUCTIONS_DIR, ConstructionCache, constructions_dir
from clinlib.strategies.prep import PrepModel, count_text_tokens_many, get_prep
from clinlib.strategies.registry import (
    EMBEDDINGS_DIR,
    LOCAL_STRATEGIES,
    SERVICE_STRATEGIES,
    get_strategy,
)
from clinlib.strategies.streaming import (
    Prefixes,
    Unit,
    checkpoint_plan,
    fill_snapshots,
    question_units,
    snapshot_needs,
)
from clinlib.strategies.turnmemo import freeze, frozen_turns
from clinlib.tasks.injections import answer_dialogue, construction_dialogue
from clinlib.tasks.settings import (
    STATIC_SETTINGS,
    Setting,
    asked_questions,
    noise_transform,
    parse_setting,
)

log = logging.getLogger("clinlib.strategies")

SETTINGS: tuple[str, ...] = STATIC_SETTINGS  # the settings build_all / construction_turns take
INJECTION_TASKS: tuple[str, ...] = ("T3", "T5")
ALWAYS_PRE_TASKS: tuple[str, ...] = ("T5",)  # built from the injected dialogue in every setting
BATCH = 64
SUMMARY_COLUMNS: tuple[str, ...] = (
    "strategy",
    "label",
    "prep_model",
    "setting",
    "n_dialogues",
    "built",
    "cached",
    "repaired",
    "seconds",
)
CONTEXT_COLUMNS: tuple[str, ...] = (
    "qid",
    "task",
    "strategy",
    "label",
    "prep_model",
    "setting",
    "context",
    "context_tokens",
    "checkpoint_visit",
    "checkpoint_final",
    "memory_items",
)


def split_dialogues(
    turns: pd.DataFrame, subjects: Iterable[int] | None = None
) -> dict[int, pd.DataFrame]:
    """subject_id -> that patient's turns (sorted), optionally restricted to ``subjects``."""
    if "subject_id" not in turns.columns:
        raise StrategyError("dialogues: missing column 'subject_id'")
    if subjects is not None:
        wanted = {int(s) for s in subjects}
        unknown = wanted - set(turns["subject_id"].astype(int))
        if unknown:
            raise StrategyError(f"dialogues: no turns for subject_id(s) {sorted(unknown)[:5]}")
        turns = turns[turns["subject_id"].isin(wanted)]
    return {
        int(s): g.sort_values("turn_idx", kind="stable").reset_index(drop=True)
        for s, g in turns.groupby("subject_id", sort=True)
    }


def _load_questions(profile: str, questions: pd.DataFrame | None) -> pd.DataFrame:
    if questions is not None:
        return questions
    path = artifact_path("questions.parquet", profile)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist; build the question set first (the 'pre' setting and "
            "question contexts need it)"
        )
    check_artifact("questions", profile)  # not a failed or stale set
    return pd.read_parquet(path)


def construction_turns(
    turns: pd.DataFrame, questions: pd.DataFrame | None, setting: str, task: str = "T3"
) -> pd.DataFrame:
    """The dialogues representations are BUILT from in a setting: the original for ``post``;
    for ``pre`` each patient's dialogue with all of its ``task`` injections (equal input)."""
    if setting not in SETTINGS:
        raise StrategyError(f"setting {setting!r} not in {SETTINGS}")
    if setting == "post":
        return turns
    if questions is None:
        raise StrategyError("the 'pre' setting needs the question set (its injections)")
    return construction_dialogue(turns, questions, task, "pre")


def _as_strategy(spec: str | Strategy, profile: str, root: Path | None = None) -> Strategy:
    if isinstance(spec, Strategy):
        return spec
    strategy = get_strategy(str(spec), profile=profile)
    if root is not None and "embedding_dir" in strategy.params:
        strategy = get_strategy(
            str(spec), profile=profile, embedding_dir=str(Path(root) / EMBEDDINGS_DIR)
        )
    return strategy


def build_strategy(
    strategy: Strategy,
    dialogues: Mapping[int, pd.DataFrame],
    prep: PrepModel | None,
    cache: ConstructionCache,
    hashes: Mapping[int, str] | None = None,
    workers: int = 1,
    bar: Any = None,
) -> dict[str, Any]:
    """Build (or find cached) one strategy's artifacts for many dialogues; ``bar``
    (:func:`clinlib.core.progress.make_progress`) counts the dialogues done.

    Returns:
        ``{"built", "cached", "repaired", "seconds"}`` (repaired: unreadable cached files
        found and rebuilt; they count as built).
    """
    t0 = time.perf_counter()
    hashes = dict(hashes or {})
    keys = {}
    for sid, turns in dialogues.items():
        sha = hashes.get(sid) or dialogue_hash(check_turns(turns, f"patient {sid}"))
        hashes[sid] = sha
        keys[sid] = ConstructionCache.key(strategy, sid, sha, prep)
    present = [sid for sid in dialogues if cache.exists(strategy.name, sid, keys[sid])]
    # A cached file that does not load (truncated, edited) is found here, by the strategies
    # stage, and rebuilt — not left for `run` to trip over.
    corrupt = {sid for sid in present if cache.get(strategy.name, sid, keys[sid]) is None}
    if corrupt:
        log.warning(
            "%s: %d cached construction(s) unreadable, rebuilt (patients %s)",
            strategy.label(),
            len(corrupt),
            sorted(corrupt)[:5],
        )
    cached = set(present) - corrupt
    missing = [sid for sid in dialogues if sid not in cached]
    llm = bool(getattr(prep, "is_llm", False)) and strategy.uses_prep
    prep, sink = metered(prep) if llm else (prep, None)  # records each patient's prep usage
    # An outside memory commits each dialogue as it is built, so a failure midway keeps every
    # dialogue the service acknowledged (the rerun sends only the rest).
    size = 1 if strategy.name in SERVICE_STRATEGIES else BATCH
    batches = [missing[i : i + size] for i in range(0, len(missing), size)]
    if bar is not None:
        bar.update(len(dialogues) - len(missing))
    for batch in batches:
        jobs = [(sid, dialogues[sid]) for sid in batch]
        if llm and workers > 1:
            # LLM prep: patients are independent; their requests overlap in threads.
            with ThreadPoolExecutor(max_workers=workers) as pool:
                arts = list(pool.map(lambda j: strategy.construct(j[0], j[1], prep), jobs))
        else:
            arts = strategy.construct_many(jobs, prep, {sid: hashes[sid] for sid in batch})
        attach_usage(arts, sink)
        for art in arts:
            art.key = keys[art.subject_id]
            cache.put(art)
        if bar is not None:
            bar.update(len(batch))
    return {
        "built": len(missing),
        "cached": len(dialogues) - len(missing),
        "repaired": len(corrupt),
        "seconds": time.perf_counter() - t0,
    }


def build_all(
    profile: str | None = None,
    strategies: Sequence[str | Strategy] | None = None,
    setting: str = "post",
    prep: str | PrepModel | None = "rule-based",
    *,
    task: str = "T3",
    subjects: Iterable[int] | None = None,
    questions: pd.DataFrame | None = None,
    dialogues: pd.DataFrame | None = None,
    workers: int = 4,
    progress: bool = False,
    root: str | Path | None = None,
) -> pd.DataFrame:
    """Build every strategy's artifacts for a profile's dialogues (cached ones are reused).

    Args:
        profile: build profile (default: $CLINTRACE_PROFILE, else quick).
        strategies: names or instances (default: every registered strategy that needs no
            outside service, :data:`~clinlib.strategies.registry.LOCAL_STRATEGIES`).
        setting: ``post`` (original dialogues) or ``pre`` (dialogues with the ``task``
            injections; patients without injections share the ``post`` entries).
        prep: ``rule-based``, a backbone name, or a PrepModel (fixed prep; for matched prep
            call once per answering backbone with :func:`clinlib.strategies.prep.resolve_prep`).
        task: the injection task of the ``pre`` setting (T3, or T5).
        subjects: restrict to these patients (e.g. the paper's 20-patient ablation subset).
        questions: the question set (default: the profile's questions.parquet; only the
            ``pre`` setting needs it).
        dialogues: the turns (default: the profile's dialogues.parquet).
        workers: threads for LLM prep (rule-based prep runs in one batch).
        progress: show progress (a bar on a terminal, periodic lines in a log) over every
            (strategy, dialogue) construction.
        root: folder holding ``constructions/`` and ``embeddings/`` (default: the profile's
            build folder; the benchmark uses a scratch folder).

    Returns:
        One row per strategy: :data:`SUMMARY_COLUMNS`.
    """
    name = resolve_profile(profile)
    turns = dialogues if dialogues is not None else load("dialogues", name)
    if setting == "pre":
        turns = construction_turns(turns, _load_questions(name, questions), setting, task)
    elif setting not in SETTINGS:
        raise StrategyError(f"setting {setting!r} not in {SETTINGS}")
    groups = split_dialogues(turns, subjects)
    hashes = {sid: dialogue_hash(g) for sid, g in groups.items()}
    prep_model = get_prep(prep, profile=name)
    root = Path(root) if root is not None else None
    cache = ConstructionCache(root / CONSTRUCTIONS_DIR if root else constructions_dir(name))
    specs = list(strategies) if strategies is not None else list(LOCAL_STRATEGIES)
    rows = []
    with progress_bar(
        len(specs) * len(groups), f"strategies {name} {setting}", "dialogue", enabled=progress
    ) as bar:
        for spec in specs:
            strategy = _as_strategy(spec, name, root)
            bar.set_postfix(strategy=strategy.label())
            stats = build_strategy(strategy, groups, prep_model, cache, hashes, workers, bar)
            rows.append(
                {
                    "strategy": strategy.name,
                    "label": strategy.label(),
                    "prep_model": strategy.prep_id(prep_model),
                    "setting": setting,
                    "n_dialogues": len(groups),
                    **stats,
                }
            )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def load_artifacts(
    strategy: str | Strategy,
    profile: str | None = None,
    prep: str | PrepModel | None = "rule-based",
    *,
    setting: str = "post",
    task: str = "T3",
    subjects: Iterable[int] | None = None,
    questions: pd.DataFrame | None = None,
    dialogues: pd.DataFrame | None = None,
) -> dict[int, Artifact]:
    """subject_id -> artifact for one strategy (built and cached first where missing)."""
    name = resolve_profile(profile)
    strat = _as_strategy(strategy, name)
    turns = dialogues if dialogues is not None else load("dialogues", name)
    if setting == "pre":
        turns = construction_turns(turns, _load_questions(name, questions), setting, task)
    groups = split_dialogues(turns, subjects)
    prep_model = get_prep(prep, profile=name)
    cache = ConstructionCache(constructions_dir(name))
    return {sid: cache.get_or_build(strat, sid, g, prep_model) for sid, g in groups.items()}


def question_contexts(
    questions: pd.DataFrame,
    strategy: str | Strategy,
    profile: str | None = None,
    setting: str | Setting = "post",
    prep: str | PrepModel | None = "rule-based",
    *,
    dialogues: pd.DataFrame | None = None,
    token_model: str | None = None,
) -> pd.DataFrame:
    """The prompt context of every question under one strategy and injection setting.

    T3 / T5 questions see their task's injected dialogue at answer time. T3's
    representation is built from it in the ``pre`` setting and from the original in
    ``post`` (the staleness probe); T5's is always built from it (its contradictions are part
    of the record, not an update). Other tasks use the original dialogue throughout.

    Args: the questions.parquet rows, a strategy name or instance, the profile, a setting spec
    (:mod:`clinlib.tasks.settings`), the prep model, the turns (default: the profile's
    dialogues) and the model whose tokenizer counts ``context_tokens`` (default: the prep's).

    Returns:
        One row per question (per checkpoint under ``stream``): :data:`CONTEXT_COLUMNS`.
    """
    return question_contexts_many(
        questions, [strategy], profile, setting, prep, dialogues=dialogues, token_model=token_model
    )[0]


def _checked_now(
    checked: dict[tuple[str, int], pd.DataFrame],
    variant: str,
    now: Mapping[int, pd.DataFrame],
    sids: Sequence[int],
) -> dict[int, pd.DataFrame]:
    """The question-time turns of ``sids``, each validated once per dialogue variant."""
    if isinstance(now, Prefixes):  # prefixes of checked dialogues
        return {sid: now[sid] for sid in sids}
    out = {}
    for sid in sids:
        if (variant, sid) not in checked:
            # only read from here on: their records are converted once (turnmemo)
            checked[(variant, sid)] = freeze(check_turns(turns_of(now, sid), f"patient {sid}"))
        out[sid] = checked[(variant, sid)]
    return out


def injection_source(asked: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The question rows whose injections make the T3 / T5 dialogue variants of a run: when
    the asked T3 / T5 questions are drawn from the profile's questions.parquet, every T3 / T5
    row of it; otherwise (a hand-made set, or no questions.parquet) the asked rows.

    A patient's variant holds ALL of that patient's injections of the task in the question set
    (:func:`clinlib.tasks.injections.injected_dialogue`), so a question's context must not
    depend on which other questions a run happens to ask (a subset, ``--limit``, one
    question): otherwise the same prediction key is answered over different text by a full
    run and a subset run, and a stream's final checkpoint differs from the static answer.
    """
    tasks = [t for t in INJECTION_TASKS if (asked["task"] == t).any()]
    if not tasks or not artifact_path("questions.parquet", profile).exists():
        return asked
    full = _load_questions(profile, None)
    full = full[full["task"].isin(tasks)]
    drawn = set(asked.loc[asked["task"].isin(tasks), "qid"]) <= set(full["qid"])
    return full if drawn else asked


def _injected_variants(
    turns: pd.DataFrame,
    questions: pd.DataFrame,
    setting: Setting,
    base: dict[int, pd.DataFrame],
    noisy: Callable[[pd.DataFrame], pd.DataFrame],
    source: pd.DataFrame,
) -> dict[str, tuple[dict[int, pd.DataFrame], dict[int, pd.DataFrame]]]:
    """Per injection task asked: (dialogues the construction sees, dialogues as of the question).
    ``noisy`` transforms a dialogue after its injections (``mixed``; the identity otherwise);
    ``source`` holds the injections (:func:`injection_source`)."""
    variants: dict[str, tuple[dict[int, pd.DataFrame], dict[int, pd.DataFrame]]] = {}
    for task in INJECTION_TASKS:
        if (questions["task"] == task).any():
            now = split_dialogues(noisy(answer_dialogue(turns, source, task)))
            # T5's controlled contradictions are part of the record before construction in
            # both settings (the paper's compressed strategies do see them, §B.3); only T3 is
            # the staleness probe whose injection follows construction in ``post``.
            built = now if (setting.base == "pre" or task in ALWAYS_PRE_TASKS) else base
            variants[task] = (built, now)
    return variants


def _artifact(
    q: dict[str, Any],
    sid: int,
    strat: Strategy,
    variant: str,
    built: Mapping[int, pd.DataFrame],
    shas: dict[tuple[str, int], str],
    memo: dict[tuple[str, int], Artifact],
    cache: ConstructionCache,
    prep_model: PrepModel,
) -> Artifact:
    """One patient's constructed artifact for a question, hashing each dialogue variant once
    (``shas``) and building or loading each (hash, patient) once per strategy (``memo``)."""
    if sid not in built:
        raise StrategyError(f"question {q.get('qid')}: no dialogue for patient {sid}")
    if (variant, sid) not in shas:
        shas[(variant, sid)] = (
            built.sha(sid) if isinstance(built, Prefixes) else dialogue_hash(built[sid])
        )
    sha = shas[(variant, sid)]
    if (sha, sid) not in memo:
        memo[(sha, sid)] = cache.get_or_build(strat, sid, built[sid], prep_model, sha)
    return memo[(sha, sid)]


def _context_rows(
    strat: Strategy,
    units: list[Unit],
    cache: ConstructionCache,
    prep_model: PrepModel,
    shas: dict,
    checked: dict,
    setting: Setting,
) -> list[dict[str, Any]]:
    """The context row of every unit under one strategy."""
    memo: dict[tuple[str, int], Artifact] = {}
    # A question-independent context (full dialogue, summary, timeline ...) is the same for
    # every question of a patient: render it once per (dialogue variant, patients).
    shared: dict[tuple[str, tuple[int, ...]], tuple[str, Any]] = {}
    label, pid = strat.label(), strat.prep_id(prep_model)
    rows = []
    for q, variant, built, now, row in units:
        sids = subject_ids_of(q)
        key = (variant, tuple(sids))
        if not strat.query_dependent and key in shared:
            ctx, size = shared[key]
        else:
            arts = {
                sid: _artifact(q, sid, strat, variant, built, shas, memo, cache, prep_model)
                for sid in sids
            }
            ctx = context_for(
                q, strat, arts, _checked_now(checked, variant, now, sids), prechecked=True
            )
            size = strat.footprint(arts[sids[0]]).get("n_items") if row is not None else None
            if not strat.query_dependent:
                shared[key] = (ctx, size)
        rows.append(
            {
                "qid": q.get("qid"),
                "task": q.get("task"),
                "strategy": strat.name,
                "label": label,
                "prep_model": pid,
                "setting": setting.value() if row is None else row.setting,
                "context": ctx,
                "checkpoint_visit": None if row is None else row.checkpoint_visit,
                "checkpoint_final": None if row is None else row.checkpoint_final,
                "memory_items": size,
            }
        )
    return rows


def _setting_dialogues(
    questions: pd.DataFrame,
    turns: pd.DataFrame,
    setting: Setting,
    variants: bool = True,
    source: pd.DataFrame | None = None,
) -> tuple[dict, pd.DataFrame | None]:
    """(dialogue variants: ``base`` and, if ``variants``, T3 / T5 with the injections of
    ``source`` (default: ``questions``); checkpoint plan or None)."""
    noisy = noise_transform(setting)
    original = split_dialogues(turns)
    base = split_dialogues(noisy(turns)) if setting.mixed else original
    out: dict[str, Any] = {"base": (base, base)}
    if variants:
        src = questions if source is None else source
        out.update(_injected_variants(turns, questions, setting, base, noisy, src))
    plan = checkpoint_plan(questions, original, base, setting) if setting.stream else None
    return out, plan


def setting_plan(
    questions: pd.DataFrame,
    setting: str | Setting,
    profile: str | None = None,
    *,
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The (qid, setting value) pairs a setting asks, with :data:`streaming.PLAN_COLUMNS`:
    one per question (checkpoint columns NA) for a static setting, one per (question,
    checkpoint) for ``stream``. The keys a run needs before building any context."""
    st = parse_setting(setting)
    qs = asked_questions(questions, st)
    if not st.stream:
        return pd.DataFrame(
            {
                "qid": qs["qid"].tolist(),
                "setting": st.value(),
                "checkpoint_visit": pd.array([None] * len(qs), dtype="Int64"),
                "checkpoint_final": pd.array([None] * len(qs), dtype="boolean"),
            }
        )
    turns = dialogues if dialogues is not None else load("dialogues", resolve_profile(profile))
    wanted = {sid for q in qs.to_dict("records") for sid in subject_ids_of(q)}
    turns = turns[turns["subject_id"].isin(wanted)]
    return _setting_dialogues(qs, turns, st, variants=False)[1]


def question_contexts_many(
    questions: pd.DataFrame,
    strategies: Sequence[str | Strategy],
    profile: str | None = None,
    setting: str | Setting = "post",
    prep: str | PrepModel | None = "rule-based",
    *,
    dialogues: pd.DataFrame | None = None,
    token_model: str | None = None,
    bar: Any = None,
) -> list[pd.DataFrame]:
    """:func:`question_contexts` for several strategies at once, sharing the dialogue split
    and the injected variants (the costly part of a harness run's preparation). ``bar``
    (clinlib.core.progress) counts the contexts built, per strategy.

    A T3 / T5 question's answer-time dialogue holds its patient's injections of the whole
    question set (:func:`injection_source`), whichever questions are asked with it.

    Under ``stream`` a question yields one row per checkpoint (:mod:`.streaming`), with
    ``checkpoint_visit``, ``checkpoint_final`` and ``memory_items`` (the footprint's item
    count at that checkpoint) filled; they are NA under static settings. Questions the
    setting does not ask (T6 under ``stream``) yield no row.

    Returns:
        One :data:`CONTEXT_COLUMNS` frame per strategy, in order.
    """
    st = parse_setting(setting)
    name = resolve_profile(profile)
    strats = [_as_strategy(s, name) for s in strategies]
    turns = dialogues if dialogues is not None else load("dialogues", name)
    qs = asked_questions(questions, st) if st.stream else questions
    records = qs.to_dict("records")
    wanted = {sid for q in records for sid in subject_ids_of(q)}
    turns = turns[turns["subject_id"].isin(wanted)]
    prep_model = get_prep(prep, profile=name)
    cache = ConstructionCache(constructions_dir(name))
    # the whole question set's injections, not only the asked ones' (injection_source)
    variants, plan = _setting_dialogues(qs, turns, st, source=injection_source(qs, name))
    units = question_units(records, variants, plan)
    shas: dict[tuple[str, int], str] = {}
    checked: dict[tuple[str, int], pd.DataFrame] = {}
    tm = token_model or prep_model.token_model
    frames = []
    with frozen_turns():  # the checked frames (_checked_now) converted to records once
        for strat in strats:
            if plan is not None:
                fill_snapshots(strat, snapshot_needs(units), prep_model, cache)
            if strat.query_dependent:
                strat.warm_queries(records)
            rows = _context_rows(strat, units, cache, prep_model, shas, checked, st)
            if bar is not None:
                bar.update(len(rows))
            frame = pd.DataFrame(
                rows, columns=[c for c in CONTEXT_COLUMNS if c != "context_tokens"]
            )
            frame["context_tokens"] = count_text_tokens_many(frame["context"].tolist(), tm)
            frame["checkpoint_visit"] = frame["checkpoint_visit"].astype("Int64")
            frame["checkpoint_final"] = frame["checkpoint_final"].astype("boolean")
            frame["memory_items"] = frame["memory_items"].astype("Int64")
            frames.append(frame[list(CONTEXT_COLUMNS)])
    return frames
