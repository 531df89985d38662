"""The ``ablations`` stage: the ablation variants' constructions and the encoder hit rates,
built once per build (paper Appendix G.6, Tables 10–12; notebook 11).

Building the variants (the transformer encoder embeds every visit of the stratified subset;
the summary budgets rebuild the summaries) was the slowest part of notebook 11. This stage
builds them through the construction cache, so the notebook's answering runs read cached
artifacts, and writes two artifacts under the stage-manifest contract
(:mod:`clinlib.core.guards`):

* ``ablation_builds.parquet`` — :func:`clinlib.strategies.construction.build_all`'s table of
  every sweep's variants, with the ``sweep`` (the parameter varied);
* ``ablation_encoder_hits.parquet`` — :func:`clinlib.analysis.ablations.encoder_hits` on the
  subset's questions.

* ``ablation_answers.parquet`` — the offline readers' answers to the subset's questions under
  every non-default variant (:func:`variant_answers`; prediction rows, the predictions store's
  columns), asked through the harness like any cell.

It also answers core-memory with the ``reference`` reader under ``post`` (notebook 05's extra
representation beside the paper's eight, :data:`EXTRA_CELLS`), which notebook 05 answered in a
cell before.

The variants' answers leave the predictions folder once the stage has them: notebooks 04 and
06–10 (and the ``evidence`` stage) summarise that folder whole and must not see them, as when
notebook 11 answered them after those (:data:`clinlib.cli.notebooks.AFTER`). Notebook 11
puts them back (:func:`publish_answers`, one part file, no answering), so 13 and later read
the folder as before.
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis.ablations import (
    DENSE_K,
    ENCODERS,
    SUMMARY_BUDGETS,
    encoder_hits,
    stratified_subset,
    subset_questions,
    variant_labels,
)
from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import (
    StageError,
    check_artifact,
    evaluable_patients,
    read_manifest,
    stage_run,
)
from clinlib.data.build import load
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import run
from clinlib.eval.harness.store import load_predictions, part_files, predictions_dir, write_part
from clinlib.llm.presets import OFFLINE_READER_NAMES
from clinlib.strategies.construction import build_all

ABLATION_STAGE = "ablations"
BUILDS_ARTIFACT, HITS_ARTIFACT = "ablation_builds", "ablation_encoder_hits"
ANSWERS_ARTIFACT = "ablation_answers"
OUTPUTS: tuple[str, ...] = (BUILDS_ARTIFACT, HITS_ARTIFACT, ANSWERS_ARTIFACT)
READERS: tuple[str, ...] = OFFLINE_READER_NAMES  # who answers the variants (notebook 11's)
PUBLISHED_RUN = "ablations"  # the run id of the part publish_answers writes
# sweep (the parameter varied) -> (strategy, values): Appendix G.6's three sweeps
SWEEPS: dict[str, tuple[str, tuple]] = {
    "k": ("dense-retrieval", DENSE_K),
    "budget_tokens": ("llm-summary", SUMMARY_BUDGETS),
    "embedding_model": ("dense-retrieval", ENCODERS),
}

# (strategy, backbone, setting) cells answered here for notebook 05
EXTRA_CELLS: tuple[tuple[str, str, str], ...] = (("core-memory", "reference", "post"),)


def ablation_subset(profile: str | None = None) -> tuple[list[int] | None, pd.DataFrame]:
    """The stratified patient subset of the ablations and its questions (only patients with a
    kept dialogue and a question can be evaluated)."""
    name = resolve_profile(profile)
    questions = load("questions", name)
    usable = evaluable_patients(load("cohort", name), load("dialogue_summary", name), questions)
    subjects = stratified_subset(usable)
    return subjects, subset_questions(questions, subjects)


def build_ablations(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Build every sweep's variants on the subset and measure the encoders' hit rates.

    Raises:
        StageError: a sweep built nothing, or no hit rate could be measured.
    """
    name = resolve_profile(profile)
    with stage_run(ABLATION_STAGE, name, remove_on_failure=OUTPUTS) as staging:
        subjects, sub_q = ablation_subset(name)
        frames = []
        for sweep, (strategy, values) in SWEEPS.items():
            labels = variant_labels(strategy, sweep, values)
            built = build_all(name, labels, subjects=subjects)
            if built.empty:
                raise StageError(f"{BUILDS_ARTIFACT}: the {sweep} sweep built no variant")
            frames.append(built.assign(sweep=sweep))
        builds = pd.concat(frames, ignore_index=True)
        for strategy, backbone, setting in EXTRA_CELLS:
            run(RunSpec(name, [strategy], [backbone], [setting]), RunOptions(progress=False))
        hits = encoder_hits(sub_q, name)
        if hits.empty:
            raise StageError(f"{HITS_ARTIFACT}: no hit rate for {len(sub_q)} subset questions")
        answers = variant_answers(name, sub_q)
        builds.to_parquet(staging.path(f"{BUILDS_ARTIFACT}.parquet"), index=False)
        hits.to_parquet(staging.path(f"{HITS_ARTIFACT}.parquet"), index=False)
        answers.to_parquet(staging.path(f"{ANSWERS_ARTIFACT}.parquet"), index=False)
    return {BUILDS_ARTIFACT: builds, HITS_ARTIFACT: hits, ANSWERS_ARTIFACT: answers}


def variant_labels_all() -> list[str]:
    """Every sweep's non-default variant labels (a default's label is the bare strategy name,
    answered by the main evaluation)."""
    labels = [
        lab
        for sweep, (strategy, values) in SWEEPS.items()
        for lab in variant_labels(strategy, sweep, values)
        if lab != strategy
    ]
    return list(dict.fromkeys(labels))


def variant_answers(profile: str, sub_q: pd.DataFrame) -> pd.DataFrame:
    """The offline readers' answers to ``sub_q`` under every non-default variant, asked
    through the harness (resumable), then taken out of the predictions folder (module
    docstring): the stored rows, :func:`load_predictions`' columns.

    Raises:
        StageError: a variant without an answer.
    """
    labels = variant_labels_all()
    before = set(part_files(predictions_dir(profile)))
    run(RunSpec(profile, labels, list(READERS), questions=sub_q), RunOptions(progress=False))
    preds = load_predictions(profile)
    rows = preds[preds["strategy"].isin(labels) & preds["qid"].isin(set(sub_q["qid"]))]
    missing = sorted(set(labels) - set(rows["strategy"]))
    if missing:
        raise StageError(f"{ANSWERS_ARTIFACT}: no answer under {missing}")
    for path in set(part_files(predictions_dir(profile))) - before:
        # only this run's parts (every row a variant): a stage running beside this one
        # (trap-answers, evaluate-longmed: clinlib.cli.schedule) appends its own parts meanwhile
        if pd.read_parquet(path, columns=["strategy"])["strategy"].isin(labels).all():
            path.unlink()
    return rows.reset_index(drop=True)


class MissingAblationAnswers(StageError):
    """The build has no (current) ablation answers; shown as its one line in a notebook."""

    def _render_traceback_(self) -> list[str]:  # IPython: the message, not a traceback
        return [str(self)]


def publish_answers(profile: str | None = None) -> int:
    """Put the stage's variant answers into the predictions folder, as notebook 11 appended
    them when it answered them itself: one part file (run id :data:`PUBLISHED_RUN`), written
    once per stage run. Returns the rows written (0: already there).

    Raises:
        MissingAblationAnswers: one line naming the command (no artifact, or a stale one).
    """
    name = resolve_profile(profile)
    try:
        answers = _read(ANSWERS_ARTIFACT, name)
    except StageError as exc:
        raise MissingAblationAnswers(str(exc)) from None
    manifest = read_manifest(ABLATION_STAGE, name) or {}
    sha = str(manifest.get("outputs", {}).get(ANSWERS_ARTIFACT, {}).get("sha256", ""))[:12]
    run_id = f"{PUBLISHED_RUN}-{sha}"
    if any(run_id in p.name for p in part_files(predictions_dir(name))):
        return 0
    write_part(answers.to_dict("records"), name, run_id, 0)
    return len(answers)


def _read(artifact: str, profile: str) -> pd.DataFrame:
    path = artifact_path(f"{artifact}.parquet", profile)
    if not path.exists():
        raise StageError(
            f"{path.name} does not exist (a build made before the ablations stage); "
            f"run `clintrace ablations --profile {profile}`"
        )
    check_artifact(artifact, profile)
    return pd.read_parquet(path)


def stage_builds(profile: str | None, sweep: str) -> pd.DataFrame:
    """One sweep's rows of the stage's build table (the ``sweep`` column dropped).

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    if sweep not in SWEEPS:
        raise StageError(f"{BUILDS_ARTIFACT}: no sweep {sweep!r} (one of {sorted(SWEEPS)})")
    builds = _read(BUILDS_ARTIFACT, resolve_profile(profile))
    return builds[builds["sweep"] == sweep].drop(columns="sweep").reset_index(drop=True)


def stage_encoder_hits(profile: str | None = None) -> pd.DataFrame:
    """The stage's encoder hit rates (:func:`clinlib.analysis.ablations.encoder_hits`).

    Raises:
        StageError: one line naming the command to run (no artifact, or a stale one).
    """
    return _read(HITS_ARTIFACT, resolve_profile(profile))


def require_predictions(profile: str | None, strategy: str, backbone: str, setting: str) -> None:
    """Refuse, in one line naming the command, a build without the stage's answers of one
    :data:`EXTRA_CELLS` cell (a build made before the stage existed).

    Raises:
        StageError: no prediction of (strategy, backbone, setting).
    """
    name = resolve_profile(profile)
    preds = load_predictions(name)
    mask = (
        (preds["strategy"] == strategy)
        & (preds["backbone"] == backbone)
        & (preds["setting"] == setting)
    )
    if not mask.any():
        raise StageError(
            f"no {strategy} x {backbone} x {setting} predictions (a build made before the "
            f"ablations stage); run `clintrace ablations --profile {name}`"
        )
