"""``clintrace dialogues --rewrite`` and ``clintrace questions --paraphrase``: the corpus written
by a backbone into a variant profile (paper Fig. 2 stages 3-4;
:mod:`clinlib.eval.synthesis.rewrite`, :mod:`clinlib.eval.synthesis.paraphrase`). The options live
here; the two commands in
:mod:`clinlib.cli.stages` hand over to :func:`rewrite_command` / :func:`paraphrase_command`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from clinlib.cli.common import run_stage, writer_lock
from clinlib.eval.synthesis.calls import calls_frame
from clinlib.eval.synthesis.paraphrase import estimate_paraphrase, paraphrase_questions
from clinlib.eval.synthesis.rewrite import estimate_rewrite, rewrite_dialogues
from clinlib.eval.synthesis.variants import variant_name
from clinlib.llm.batch import BatchPending
from clinlib.tasks.build import build_questions
from clinlib.tasks.gates import gate_report

RewriteOpt = Annotated[
    str | None,
    typer.Option(
        "--rewrite",
        help="rewrite every visit with this backbone, kept only when "
        "verified, into the variant profile <profile>+rw-<backbone>",
    ),
]
RescueOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--rescue",
        help="backbone(s) a visit that failed goes to, in order "
        "(repeat the option or separate by commas)",
    ),
]
ParaphraseOpt = Annotated[
    str | None,
    typer.Option(
        "--paraphrase",
        help="paraphrase every question with this backbone, kept "
        "only when checked, into the variant profile <profile>+pp-<backbone>",
    ),
]
IntoOpt = Annotated[str | None, typer.Option("--into", help="the variant's profile name")]
BatchOpt = Annotated[
    bool, typer.Option("--batch", help="send through the provider's batch API (batch price)")
]
EstimateOpt = Annotated[
    bool, typer.Option("--estimate", help="print what it would cost and send nothing")
]
UnapprovedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unapproved", help="send credentialed records to a backbone not approved for them"
    ),
]
WriterConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML with user backbones ($CLINTRACE_CONFIG)")
]


def _names(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


def _sending(fn, *args, **kwargs):
    """Run a sending stage: provider batch jobs still running exit 3 (rerun to collect, as
    ``clintrace run --batch``); other refusals one line and exit 2 (:func:`run_stage`)."""

    def guarded():
        try:
            return fn(*args, **kwargs)
        except BatchPending as exc:  # a ValueError: caught before run_stage turns it into exit 2
            typer.echo(f"batch jobs still running: {exc} (rerun the command to collect)", err=True)
            raise typer.Exit(code=3) from None

    return run_stage(guarded)


def _echo_table(df: pd.DataFrame) -> None:
    typer.echo(df.to_string(index=False))


def rewrite_command(
    name: str,
    backbone: str,
    rescue: list[str] | None,
    *,
    into: str | None,
    budget: float | None,
    batch: bool,
    estimate_only: bool,
    config: Path | None,
    allow_unapproved: bool,
    allow_drops: bool,
) -> None:
    """The body of ``clintrace dialogues --rewrite``."""
    chain = [backbone, *_names(rescue)]
    if estimate_only:
        _echo_table(run_stage(estimate_rewrite, name, chain, config, into))
        return
    t0 = time.perf_counter()
    dst = into or run_stage(variant_name, name, "rewrite", chain)
    with writer_lock(name), writer_lock(dst):
        out = _sending(
            rewrite_dialogues,
            name,
            backbone,
            chain[1:],
            into=dst,
            budget_usd=budget,
            mode="batch" if batch else "live",
            config=config,
            allow_unapproved=allow_unapproved,
            allow_drops=allow_drops,
        )
        log = out["frames"]["dialogue_rewrites"]
        typer.echo(
            log["outcome"]
            .value_counts()
            .reindex(["accepted", "rescued", "template"], fill_value=0)
            .to_string()
        )
        _echo_table(calls_frame(out["calls"]))
        typer.echo(
            f"rewritten dialogues -> profile {out['profile']} (${out['spent_usd']:.4f} "
            f"spent, {time.perf_counter() - t0:.1f}s); questions and gates on it:"
        )
        qs = run_stage(build_questions, dst, allow_drops=allow_drops)
    typer.echo(gate_report(qs["gates"]))
    typer.echo(f"{len(qs['questions']):,} questions on {dst}")


def paraphrase_command(
    name: str,
    backbone: str,
    *,
    into: str | None,
    budget: float | None,
    batch: bool,
    estimate_only: bool,
    config: Path | None,
    allow_unapproved: bool,
) -> None:
    """The body of ``clintrace questions --paraphrase``."""
    if estimate_only:
        _echo_table(run_stage(estimate_paraphrase, name, backbone, config, into))
        return
    dst = into or run_stage(variant_name, name, "paraphrase", [backbone])
    with writer_lock(name), writer_lock(dst):
        out = _sending(
            paraphrase_questions,
            name,
            backbone,
            into=dst,
            budget_usd=budget,
            mode="batch" if batch else "live",
            config=config,
            allow_unapproved=allow_unapproved,
        )
    log = out["paraphrases"]
    by_task = log.groupby("task")["accepted"].agg(["size", "sum"])
    typer.echo(
        "kept paraphrases: "
        + ", ".join(f"{t} {int(r['sum'])}/{int(r['size'])}" for t, r in by_task.iterrows())
    )
    checks = log.loc[~log["accepted"], "check"].value_counts()
    if len(checks):
        typer.echo("template kept: " + ", ".join(f"{c} x{n}" for c, n in checks.items()))
    typer.echo(gate_report(out["gates"]))
    typer.echo(f"paraphrased questions -> profile {out['profile']} (${out['spent_usd']:.4f} spent)")
