"""``clintrace`` commands that build one pipeline stage each (docs/design.md artifact
contract): ``synth``, ``cohort``, ``export-meds``, ``dialogues``, ``questions``,
``strategies``, ``evaluate-offline``, ``evaluate-longmed`` and the L5 ``audit``. ``population`` lives in
:mod:`clinlib.cli.population`; ``pipeline`` and ``reproduce`` run them in order
(:mod:`clinlib.cli.pipeline`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli import rewrite as cr
from clinlib.cli.common import (
    AcceptErrorsOpt,
    AllowDropsOpt,
    BudgetOpt,
    ConfigOpt,
    ProfileOpt,
    SeedOpt,
    add_command,
    prep_from,
    profile_name,
    run_stage,
    strategy_list,
    writer_lock,
)
from clinlib.core.guards import check_constructions
from clinlib.data.build import build_cohort, load, report_lines, resolve_source
from clinlib.data.sources.meds import write_meds
from clinlib.data.sources.synthetic import synthesize
from clinlib.dialogue.synth import build_dialogues
from clinlib.eval.harness.outcomes import check_run
from clinlib.eval.harness.parallel import run_parallel
from clinlib.eval.harness.records import RunSpec
from clinlib.eval.traps.stage import build_trap_answers, trap_answers_current
from clinlib.llm.presets import OFFLINE_READER_NAMES
from clinlib.strategies import EVALUATION_STRATEGIES, build_all
from clinlib.tasks.audit import build_audit_sheet, score_audit_sheet
from clinlib.tasks.build import build_questions
from clinlib.tasks.extended import build_temporal_questions
from clinlib.tasks.gates import gate_report
from clinlib.tasks.traps.stage import build_traps

CohortRuleOpt = Annotated[
    str | None,
    typer.Option(
        help="clintracebench (the paper's cohort) or longmedbench (>= 15 complete "
        "hospitalisations, abnormal labs only); default: the profile's"
    ),
]


def synth(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    fmt: Annotated[str, typer.Option(help="csv.gz (PhysioNet layout) or parquet")] = "csv.gz",
) -> None:
    """Write the synthetic MIMIC-IV-shaped hosp tables (data/build/<profile>/raw/hosp/)."""
    t0 = time.perf_counter()
    name = profile_name(profile)
    with writer_lock(name):
        out = run_stage(synthesize, name, seed=seed, fmt=fmt)
    typer.echo(f"synthetic hosp tables -> {out} ({time.perf_counter() - t0:.1f}s)")


def cohort(
    profile: ProfileOpt = None,
    mimic_dir: Annotated[
        Path | None, typer.Option(help="real MIMIC-IV directory holding hosp/ (credentialed)")
    ] = None,
    meds_dir: Annotated[Path | None, typer.Option(help="a MEDS dataset root")] = None,
    seed: SeedOpt = None,
    per_disease: Annotated[int | None, typer.Option(help="patients per index disease")] = None,
    allow_drops: AllowDropsOpt = False,
    cohort_rule: CohortRuleOpt = None,
) -> None:
    """Select the cohort and extract its events (cohort/attrition/eligible/events.parquet)."""
    t0 = time.perf_counter()
    name, _ = run_stage(resolve_source, profile, mimic_dir, meds_dir)
    with writer_lock(name):
        out = run_stage(
            build_cohort,
            name,
            mimic_dir=mimic_dir,
            meds_dir=meds_dir,
            seed=seed,
            per_disease=per_disease,
            allow_drops=allow_drops,
            rule=cohort_rule,
        )
    att = out["attrition"]
    for row in att.itertuples():
        typer.echo(f"  {row.step:<40} {row.n_patients:>9,}")
    for line in report_lines(out):  # excluded source rows (never stated); MEDS code families
        typer.echo(f"  {line}")
    typer.echo(
        f"cohort: {len(out['cohort'])} patients, {len(out['events']):,} events "
        f"({time.perf_counter() - t0:.1f}s)"
    )


def export_meds(
    out_dir: Annotated[Path, typer.Argument(help="MEDS dataset root to write")],
    profile: ProfileOpt = None,
) -> None:
    """Export the cohort's events as a MEDS dataset (data/*.parquet + metadata/)."""
    events = run_stage(load, "events", profile)
    run_stage(write_meds, events, out_dir)
    typer.echo(f"MEDS dataset -> {out_dir}")


def dialogues(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    allow_drops: AllowDropsOpt = False,
    rewrite: cr.RewriteOpt = None,
    rescue: cr.RescueOpt = None,
    into: cr.IntoOpt = None,
    budget: BudgetOpt = None,
    batch: cr.BatchOpt = False,
    estimate: cr.EstimateOpt = False,
    config: cr.WriterConfigOpt = None,
    allow_unapproved: cr.UnapprovedOpt = False,
) -> None:
    """Synthesise and verify one dialogue per cohort patient (dialogues.parquet + checks);
    with --rewrite, each visit rewritten by a backbone into a variant profile
    (clinlib.cli.rewrite)."""
    t0 = time.perf_counter()
    name = profile_name(profile)
    if rewrite:
        cr.rewrite_command(
            name,
            rewrite,
            rescue,
            into=into,
            budget=budget,
            batch=batch,
            estimate_only=estimate,
            config=config,
            allow_unapproved=allow_unapproved,
            allow_drops=allow_drops,
        )
        return
    with writer_lock(name):
        out = run_stage(build_dialogues, name, seed=seed, allow_drops=allow_drops)
    summary = out["dialogue_summary"]
    kept = int(summary["kept"].sum())
    typer.echo(
        f"dialogues: {kept}/{len(summary)} kept, {len(out['dialogues']):,} turns "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    dropped = summary[~summary["kept"]]
    for row in dropped.itertuples():
        typer.echo(f"  dropped {row.subject_id}: {row.drop_reason}")


def questions(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    allow_drops: AllowDropsOpt = False,
    paraphrase: cr.ParaphraseOpt = None,
    into: cr.IntoOpt = None,
    budget: BudgetOpt = None,
    batch: cr.BatchOpt = False,
    estimate: cr.EstimateOpt = False,
    config: cr.WriterConfigOpt = None,
    allow_unapproved: cr.UnapprovedOpt = False,
) -> None:
    """Generate T1–T9 questions and run the L0–L4 gates (questions.parquet + gates.parquet),
    then the extended set (T10; temporal_questions.parquet + temporal_gates.parquet; a failure
    there is reported in one line and does not fail the command). With --paraphrase, the
    questions reworded by a backbone into a variant profile (clinlib.cli.rewrite)."""
    name = profile_name(profile)
    if paraphrase:
        cr.paraphrase_command(
            name,
            paraphrase,
            into=into,
            budget=budget,
            batch=batch,
            estimate_only=estimate,
            config=config,
            allow_unapproved=allow_unapproved,
        )
        return
    with writer_lock(name):
        _questions(name, seed, allow_drops)


def _questions(name: str, seed: int | None, allow_drops: bool) -> None:
    t0 = time.perf_counter()
    out = run_stage(build_questions, name, seed=seed, allow_drops=allow_drops)
    typer.echo(gate_report(out["gates"]))
    counts = out["questions"]["task"].value_counts().sort_index()
    typer.echo("questions: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    typer.echo(f"{len(out['questions']):,} questions ({time.perf_counter() - t0:.1f}s)")
    t0 = time.perf_counter()
    try:  # the extended set is an add-on: its failure must not stop the paper's pipeline
        ext = build_temporal_questions(name, seed=seed)
    except (ValueError, FileNotFoundError) as exc:  # StageError, GateError: one line
        # one line, naming the failing gates (a GateError lists them on the lines below)
        reason = " ".join(ln.strip() for ln in str(exc).strip().splitlines()) or type(exc).__name__
        typer.echo(f"extended set (T10) not built: {reason}", err=True)
        _traps(name)
        return
    typer.echo(gate_report(ext["gates"]))
    subtypes = ext["questions"].groupby(["task", "subtype"]).size()
    typer.echo("extended: " + ", ".join(f"{t}/{s} {n}" for (t, s), n in subtypes.items()))
    typer.echo(f"{len(ext['questions']):,} extended questions ({time.perf_counter() - t0:.1f}s)")
    _traps(name)


def _traps(name: str) -> None:
    """The trap facts and the six query types (clinlib.tasks.traps): an add-on like the
    extended set, its failure is one line and does not fail the command."""
    t0 = time.perf_counter()
    try:
        out = build_traps(name)
    except (ValueError, FileNotFoundError) as exc:
        reason = " ".join(ln.strip() for ln in str(exc).strip().splitlines()) or type(exc).__name__
        typer.echo(f"trap questions not built: {reason}", err=True)
        return
    counts = out["questions"]["task"].value_counts().sort_index()
    typer.echo(
        f"traps: {len(out['facts'])} trap facts; "
        + ", ".join(f"{t} {n}" for t, n in counts.items())
        + f" ({time.perf_counter() - t0:.1f}s)"
    )


def trap_answers(
    profile: ProfileOpt = None,
    force: Annotated[bool, typer.Option("--force", help="run even when current")] = False,
) -> None:
    """Ask every trap question with the reference reader (a deterministic policy) through the
    harness and judge the free-text answers with the lexical judge: trap_answers.parquet and
    trap_judged.parquet (notebook 18 reads them; skipped when current)."""
    name = profile_name(profile)
    if not force and trap_answers_current(name):
        typer.echo("trap answers: current (--force to run again)")
        return
    t0 = time.perf_counter()
    with writer_lock(name):
        out = run_stage(build_trap_answers, name)
    typer.echo(
        f"trap answers: {len(out['answers']):,} rows, {len(out['judged']):,} free-text verdicts "
        f"({time.perf_counter() - t0:.1f}s)"
    )


def strategies(
    profile: ProfileOpt = None,
    names: Annotated[
        str | None, typer.Option("--strategies", help="comma-separated (default: all)")
    ] = None,
    setting: Annotated[str, typer.Option(help="T3 injection: post or pre")] = "post",
    prep: Annotated[str, typer.Option(help="prep model: rule-based or a backbone")] = "rule-based",
    task: Annotated[str, typer.Option(help="whose injections 'pre' applies: T3 or T5")] = "T3",
    config: ConfigOpt = None,
) -> None:
    """Build (or re-use) every strategy's per-patient constructions."""
    chosen = strategy_list(names)  # a comma inside a label's parentheses is the label's
    name = profile_name(profile)
    prep_model = run_stage(prep_from, prep, name, config)  # a prep backbone may be the config's
    with writer_lock(name):
        summary = run_stage(
            build_all,
            name,
            chosen,
            setting=setting,
            prep=prep_model,
            task=task,
            progress=True,
        )
    typer.echo(summary.to_string(index=False))
    run_stage(check_constructions, summary)


OFFLINE_READERS = OFFLINE_READER_NAMES  # the reference and eager offline readers


def evaluate_offline(profile: ProfileOpt = None, accept_errors: AcceptErrorsOpt = False) -> None:
    """Answer every question with the offline readers under the paper's eight strategies and
    the diagnostic controls event-table and oracle, both T3 settings (the predictions the
    analysis notebooks read; resumable)."""
    # The readers are CPU-bound Python: one process per core, strategies dealt between them.
    name = profile_name(profile)
    with writer_lock(name):
        spec = RunSpec(name, EVALUATION_STRATEGIES, OFFLINE_READERS, ["post", "pre"])
        summary = run_stage(run_parallel, spec)
    typer.echo(summary.to_string(index=False))
    for line in run_stage(check_run, "evaluate-offline", summary, accept_errors) or []:
        typer.echo(line, err=True)


def evaluate_longmed(profile: ProfileOpt = None) -> None:
    """Ask LongMedBench's cells (retrieval windows, T10 ordering, T11 decisions under each
    memory) with the offline readers and write the tables notebook 15 reads (cached)."""
    name = profile_name(profile)
    t0 = time.perf_counter()
    # imported here: the analysis chain pulls in altair (~1.5 CPU-s), which no other stage
    # command needs, and every pipeline stage starts this module in its own process
    from clinlib.analysis import longmed

    with writer_lock(name):
        out = run_stage(longmed.build, name)
    preds = out["longmed_predictions"]
    counts = preds.groupby("task").size()
    typer.echo("longmed: " + ", ".join(f"{t} {n}" for t, n in counts.items()) + " predictions")
    typer.echo(f"{len(out)} tables ({time.perf_counter() - t0:.1f}s)")


def audit_cmd(
    profile: ProfileOpt = None,
    score: Annotated[
        Path | None, typer.Option(help="a filled L5 sheet to score (default: build the sheet)")
    ] = None,
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
    allow_blank: Annotated[
        bool, typer.Option("--allow-blank", help="score a partly filled sheet (blanks skipped)")
    ] = False,
) -> None:
    """L5 human audit (Appendix A): write the stratified sheet a human fills (sampled question,
    gold, anchor events and dialogue turns), or score a filled sheet against the automated gold
    per task and overall, with the paper's figures beside."""
    p = profile_name(profile)
    if score is None:
        sheet, path = run_stage(build_audit_sheet, p, seed)
        by_task = sheet.groupby("task", sort=True)["risk"]
        typer.echo(", ".join(f"{t} {len(r)} ({r.iat[0]} risk)" for t, r in by_task))
        typer.echo(f"{len(sheet)} questions to audit -> {path}")
        typer.echo("fill auditor_verdict (agree|disagree), then: clintrace audit --score <sheet>")
        return
    table = run_stage(score_audit_sheet, score, p, allow_blank=allow_blank)
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))


def register(app: typer.Typer) -> None:
    """Add the stage commands to the ``clintrace`` app, in pipeline order."""
    add_command(app, synth)
    add_command(app, cohort)
    add_command(app, export_meds, "export-meds")
    add_command(app, dialogues)
    add_command(app, questions)
    add_command(app, strategies)
    add_command(app, evaluate_offline, "evaluate-offline")
    add_command(app, evaluate_longmed, "evaluate-longmed")
    add_command(app, trap_answers, "trap-answers")
    add_command(app, audit_cmd, "audit")
