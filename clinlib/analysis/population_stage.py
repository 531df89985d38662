"""The population evaluation stage (``clintrace population-eval``): every computation over the
whole population question set, cached, so notebook 17 only loads, shows and explains.

It answers every (question, rendering) with the three offline readers (deterministic policies,
not LLMs: the group reader, the per-patient baseline, the code-overlap baseline) through the
harness a real backbone uses (direct prompt: :data:`READER_PROMPTS`); then, over
``population_predictions.parquet`` (the readers' rows and any backbone's rows that
``clintrace run --tasks population`` added), it writes one parquet per scoreboard:

- ``population_verbosity``: N, M, M/N and tokens per code per (question, rendering, tokenizer)
  (App. B);
- ``population_decomposition``: per (question, rendering) the score of chance, the per-patient
  baseline and the group reader (decomposition resistance, §2);
- ``population_formats``: Fig. 6's two means per (task, backbone, rendering, prompt);
- ``population_clustered``: per (task, backbone, rendering) with question-level, group-clustered
  and shared-patient intervals;
- ``population_wins``: Fig. 3's win rates by maximum question length;
- ``population_ablations``: Fig. 5's dots (renderings, chain of thought);
- ``population_eval_basis``: one row: the sha256 of the question set and predictions it
  scored, the stage's seconds, the counts.

Cached: a rerun whose question set and predictions are the ones the basis recorded (and whose
outputs are unchanged, :func:`clinlib.core.guards.check_artifact`) does nothing.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.analysis.population import (
    clustered_scoreboard,
    decomposition_from_answers,
    not_built,
    verbosity,
)
from clinlib.analysis.population_scores import ablation_effects, format_means, win_rates
from clinlib.core.config import build_dir, resolve_profile
from clinlib.core.guards import StageError, check_artifact, read_manifest, stage_run
from clinlib.core.io import write_parquet
from clinlib.eval.population.answer import (
    PREDICTIONS_FILE,
    answer_population,
    load_population,
    load_predictions,
)
from clinlib.eval.population.readers import OVERLAP_READER, PER_PATIENT_READER, SOLVER_READER
from clinlib.tasks.population.build import QUESTIONS_FILE
from clinlib.tasks.population.questions import BIN_TOLERANCE

EVAL_STAGE = "population_eval"
EVAL_OUTPUTS: tuple[str, ...] = (
    "population_verbosity",
    "population_decomposition",
    "population_formats",
    "population_clustered",
    "population_wins",
    "population_ablations",
    "population_eval_basis",
)
READERS: tuple[str, ...] = (SOLVER_READER, PER_PATIENT_READER, OVERLAP_READER)
# The offline readers ignore the system prompt, so a chain-of-thought run of them would repeat
# their direct answers: they answer the direct prompt only; a backbone run with
# `population-run --prompts direct,cot` fills Fig. 5's Reasoning family.
READER_PROMPTS: tuple[str, ...] = ("direct",)
RUN_HINT = "clintrace population-eval --profile {profile}"


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def eval_missing(profile: str | None = None) -> str | None:
    """One line naming the command to run when ``profile`` has no current evaluation (a build
    made before this stage existed, or one whose questions changed since); None when it has."""
    name = resolve_profile(profile)
    hint = RUN_HINT.format(profile=name)
    if read_manifest(EVAL_STAGE, name) is None:
        return f"no population evaluation on the {name} build yet: run `{hint}`"
    try:
        for art in EVAL_OUTPUTS:
            check_artifact(art, name)
    except StageError as exc:
        return f"{exc}; run `{hint}`"
    basis = pd.read_parquet(build_dir(name) / "population_eval_basis.parquet").iloc[0]
    if basis["questions_sha256"] != _sha(build_dir(name) / QUESTIONS_FILE):
        return f"the population questions changed after the evaluation: run `{hint}`"
    return None


def load_eval(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Every output of the stage, by short name (``verbosity``, ``decomposition``, ...)."""
    name = resolve_profile(profile)
    return {
        art.removeprefix("population_"): pd.read_parquet(build_dir(name) / f"{art}.parquet")
        for art in EVAL_OUTPUTS
    }


def _cached(name: str) -> bool:
    if eval_missing(name) is not None:
        return False
    basis = pd.read_parquet(build_dir(name) / "population_eval_basis.parquet").iloc[0]
    preds = build_dir(name) / PREDICTIONS_FILE
    return preds.exists() and basis["predictions_sha256"] == _sha(preds)


def evaluate_population(profile: str | None = None, force: bool = False) -> dict[str, Any]:
    """Run the stage on ``profile``; returns its basis row (``status``: ``ok``, ``cached`` or
    ``not_applicable``)."""
    name = resolve_profile(profile)
    reason = not_built(name)
    if reason:
        return {"status": "not_applicable", "reason": reason}
    if not (build_dir(name) / QUESTIONS_FILE).exists():
        raise StageError(
            f"population-eval: no {QUESTIONS_FILE} on {name}: run `clintrace population --profile {name}` first"
        )
    if not force and _cached(name):
        return {**load_eval(name)["eval_basis"].iloc[0].to_dict(), "status": "cached"}
    t0 = time.perf_counter()
    with stage_run(EVAL_STAGE, name, remove_on_failure=EVAL_OUTPUTS) as staging:
        questions = load_population(name)
        # measured first: N is counted line by line (clinlib.eval.population.counts), and the
        # readers' usage counts of the same prompts (cl100k_base) look the same lines up
        v = verbosity(questions)
        answer_population(name, list(READERS), prompts=READER_PROMPTS)
        preds = load_predictions(name)
        qids = set(questions["qid"])
        preds = preds[preds["qid"].isin(qids)]  # answers to an older question set are not scored
        lengths = v[
            (v["tokenizer"] == "cl100k_base") & (v["rendering"] == "descriptions")
        ].set_index("qid")["N"]
        limits = sorted({int(b * BIN_TOLERANCE[1]) for b in questions["bin_tokens"].unique()})
        direct = preds[preds["prompt"] == "direct"]
        out = {
            "population_verbosity": v,
            "population_decomposition": decomposition_from_answers(questions, preds),
            "population_formats": format_means(preds),
            "population_clustered": clustered_scoreboard(direct, questions),
            "population_wins": win_rates(preds, lengths, limits),
            "population_ablations": ablation_effects(preds),
        }
        basis = {
            "status": "ok",
            "questions_sha256": _sha(build_dir(name) / QUESTIONS_FILE),
            "predictions_sha256": _sha(build_dir(name) / PREDICTIONS_FILE),
            "n_questions": int(questions["qid"].nunique()),
            "n_rows": int(len(questions)),
            "n_predictions": int(len(preds)),
            "backbones": ",".join(sorted(preds["backbone"].unique())),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        out["population_eval_basis"] = pd.DataFrame([basis])
        for art, df in out.items():
            if df.empty and art != "population_ablations":
                raise StageError(f"population-eval: {art} is empty on {name}")
            write_parquet(df, staging.path(f"{art}.parquet"))
    return basis
