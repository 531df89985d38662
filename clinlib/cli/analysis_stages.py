"""``clintrace evidence`` and ``clintrace ablations``: the analysis stages that own the heavy
work notebooks 05, 11 and 13 used to do in their cells (evidence recall and loss labels; the
ablation variants' builds and encoder hit rates). Both run in ``clintrace pipeline`` after
``evaluate-offline``; each writes a manifest, so a notebook refuses a stale artifact.
"""

from __future__ import annotations

import time

import typer

from clinlib.analysis.ablation_stage import build_ablations
from clinlib.analysis.evidence_stage import build_evidence
from clinlib.cli.common import ProfileOpt, add_command, profile_name, run_stage, writer_lock


def evidence(profile: ProfileOpt = None) -> None:
    """Evidence recall of every evaluated strategy's contexts (post and pre) and where each
    offline prediction's answer was lost (representation or reading), measured once for
    notebooks 05 and 13 and the failure-explorer app (after evaluate-offline)."""
    name = profile_name(profile)
    t0 = time.perf_counter()
    with writer_lock(name):
        out = run_stage(build_evidence, name)
    recall, labels = out["evidence_recall"], out["loss_labels"]
    counts = labels["lost_in"].value_counts().sort_index()
    typer.echo(
        f"evidence: {len(recall):,} recall rows ({int(recall['measurable'].sum()):,} measured), "
        f"{len(labels):,} predictions labelled: "
        + ", ".join(f"{k} {n:,}" for k, n in counts.items())
        + f" ({time.perf_counter() - t0:.1f}s)"
    )


def ablations(profile: ProfileOpt = None) -> None:
    """Build the ablation variants (dense K, summary budget, encoder) on the stratified
    subset, measure the encoders' hit rates and answer the variants with the offline readers,
    for notebook 11 (Appendix G.6)."""
    name = profile_name(profile)
    t0 = time.perf_counter()
    with writer_lock(name):
        out = run_stage(build_ablations, name)
    builds = out["ablation_builds"]
    typer.echo(
        f"ablations: {len(builds)} variant builds over {builds['sweep'].nunique()} sweeps, "
        f"{len(out['ablation_encoder_hits'])} encoder hit rows, "
        f"{len(out['ablation_answers']):,} variant answers ({time.perf_counter() - t0:.1f}s)"
    )


def register(app: typer.Typer) -> None:
    """Add ``evidence`` and ``ablations`` to the ``clintrace`` app."""
    add_command(app, evidence)
    add_command(app, ablations)
