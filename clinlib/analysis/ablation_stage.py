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

It also answers core-memory with the ``reference`` reader under ``post`` (notebook 05's extra
representation beside the paper's eight, :data:`EXTRA_CELLS`), which notebook 05 answered in a
cell before.

The variants' *answers* stay with notebook 11: they are written to the predictions folder that
notebooks 04 and 06–10 summarise whole, and these must run before them
(:data:`clinlib.cli.notebooks.AFTER`).
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
from clinlib.core.guards import StageError, check_artifact, evaluable_patients, stage_run
from clinlib.data.build import load
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import run
from clinlib.eval.harness.store import load_predictions
from clinlib.strategies.construction import build_all

ABLATION_STAGE = "ablations"
BUILDS_ARTIFACT, HITS_ARTIFACT = "ablation_builds", "ablation_encoder_hits"
OUTPUTS: tuple[str, ...] = (BUILDS_ARTIFACT, HITS_ARTIFACT)
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
        builds.to_parquet(staging.path(f"{BUILDS_ARTIFACT}.parquet"), index=False)
        hits.to_parquet(staging.path(f"{HITS_ARTIFACT}.parquet"), index=False)
    return {BUILDS_ARTIFACT: builds, HITS_ARTIFACT: hits}


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
