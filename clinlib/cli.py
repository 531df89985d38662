"""``clintrace`` command line: one command per pipeline stage (docs/design.md artifact contract).

Every command takes ``--profile`` (else $CLINTRACE_PROFILE, else ``quick``). Errors from bad
input are printed as one clear line (file, column, value) and exit with status 2. A command
that writes into a profile's build folder holds that profile's writer lock
(:mod:`clinlib.core.lock`): a second writer refuses with one line naming the holder, or waits
(``clintrace --wait-for-lock SECONDS <command>``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from clinlib import (
    cli_endpoints,  # noqa: F401  (registers its commands on app)
    cli_judge,  # noqa: F401  (registers `judge` on app)
    cli_memory,  # noqa: F401  (registers `memory-serve` on app)
    cli_population,  # noqa: F401  (registers `population` on app)
    cli_score,  # noqa: F401  (registers `score`, `export` on app)
    cli_site,  # noqa: F401  (registers `site` on app)
)
from clinlib import cli_rewrite as cr
from clinlib.cli_common import (
    AcceptErrorsOpt,
    AllowDropsOpt,
    ProfileOpt,
    SeedOpt,
    _profile,
    _run,
    _strategies,
    _writer,
    app,
)
from clinlib.core.config import NOTEBOOKS_DIR, build_dir, figures_dir
from clinlib.core.guards import check_constructions
from clinlib.data.build import build_cohort, load, report_lines, resolve_source
from clinlib.data.sources.meds import write_meds
from clinlib.data.sources.synthetic import synthesize
from clinlib.dialogue.synth import build_dialogues
from clinlib.eval.outcomes import check_run
from clinlib.eval.parallel import run_parallel
from clinlib.eval.records import RunSpec
from clinlib.notebooks import execute_all
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


@app.command()
def synth(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    fmt: Annotated[str, typer.Option(help="csv.gz (PhysioNet layout) or parquet")] = "csv.gz",
) -> None:
    """Write the synthetic MIMIC-IV-shaped hosp tables (data/build/<profile>/raw/hosp/)."""
    t0 = time.perf_counter()
    name = _profile(profile)
    with _writer(name):
        out = _run(synthesize, name, seed=seed, fmt=fmt)
    typer.echo(f"synthetic hosp tables -> {out} ({time.perf_counter() - t0:.1f}s)")


@app.command()
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
    name, _ = _run(resolve_source, profile, mimic_dir, meds_dir)
    with _writer(name):
        out = _run(build_cohort, name, mimic_dir=mimic_dir, meds_dir=meds_dir, seed=seed,
                   per_disease=per_disease, allow_drops=allow_drops,
                   rule=cohort_rule)  # fmt: skip
    att = out["attrition"]
    for row in att.itertuples():
        typer.echo(f"  {row.step:<40} {row.n_patients:>9,}")
    for line in report_lines(out):  # excluded source rows (never stated); MEDS code families
        typer.echo(f"  {line}")
    typer.echo(
        f"cohort: {len(out['cohort'])} patients, {len(out['events']):,} events "
        f"({time.perf_counter() - t0:.1f}s)"
    )


@app.command("export-meds")
def export_meds(
    out_dir: Annotated[Path, typer.Argument(help="MEDS dataset root to write")],
    profile: ProfileOpt = None,
) -> None:
    """Export the cohort's events as a MEDS dataset (data/*.parquet + metadata/)."""
    events = _run(load, "events", profile)
    _run(write_meds, events, out_dir)
    typer.echo(f"MEDS dataset -> {out_dir}")


@app.command()
def dialogues(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    allow_drops: AllowDropsOpt = False,
    rewrite: cr.RewriteOpt = None,
    rescue: cr.RescueOpt = None,
    into: cr.IntoOpt = None,
    budget: cr.BudgetOpt = None,
    batch: cr.BatchOpt = False,
    estimate: cr.EstimateOpt = False,
    config: cr.WriterConfigOpt = None,
    allow_unapproved: cr.UnapprovedOpt = False,
) -> None:
    """Synthesise and verify one dialogue per cohort patient (dialogues.parquet + checks);
    with --rewrite, each visit rewritten by a backbone into a variant profile (clinlib.cli_rewrite)."""
    t0 = time.perf_counter()
    name = _profile(profile)
    if rewrite:
        cr.rewrite_command(name, rewrite, rescue, into=into, budget=budget, batch=batch,
                           estimate_only=estimate, config=config,
                           allow_unapproved=allow_unapproved, allow_drops=allow_drops)  # fmt: skip
        return
    with _writer(name):
        out = _run(build_dialogues, name, seed=seed, allow_drops=allow_drops)
    summary = out["dialogue_summary"]
    kept = int(summary["kept"].sum())
    typer.echo(
        f"dialogues: {kept}/{len(summary)} kept, {len(out['dialogues']):,} turns "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    dropped = summary[~summary["kept"]]
    for row in dropped.itertuples():
        typer.echo(f"  dropped {row.subject_id}: {row.drop_reason}")


@app.command()
def questions(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    allow_drops: AllowDropsOpt = False,
    paraphrase: cr.ParaphraseOpt = None,
    into: cr.IntoOpt = None,
    budget: cr.BudgetOpt = None,
    batch: cr.BatchOpt = False,
    estimate: cr.EstimateOpt = False,
    config: cr.WriterConfigOpt = None,
    allow_unapproved: cr.UnapprovedOpt = False,
) -> None:
    """Generate T1–T9 questions and run the L0–L4 gates (questions.parquet + gates.parquet),
    then the extended set (T10; temporal_questions.parquet + temporal_gates.parquet; a failure
    there is reported in one line and does not fail the command). With --paraphrase, the
    questions reworded by a backbone into a variant profile (clinlib.cli_rewrite)."""
    name = _profile(profile)
    if paraphrase:
        cr.paraphrase_command(name, paraphrase, into=into, budget=budget, batch=batch,
                              estimate_only=estimate, config=config,
                              allow_unapproved=allow_unapproved)  # fmt: skip
        return
    with _writer(name):
        _questions(name, seed, allow_drops)


def _questions(name: str, seed: int | None, allow_drops: bool) -> None:
    t0 = time.perf_counter()
    out = _run(build_questions, name, seed=seed, allow_drops=allow_drops)
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


@app.command()
def strategies(
    profile: ProfileOpt = None,
    names: Annotated[
        str | None, typer.Option("--strategies", help="comma-separated (default: all)")
    ] = None,
    setting: Annotated[str, typer.Option(help="T3 injection: post or pre")] = "post",
    prep: Annotated[str, typer.Option(help="prep model: rule-based or a backbone")] = "rule-based",
    task: Annotated[str, typer.Option(help="whose injections 'pre' applies: T3 or T5")] = "T3",
) -> None:
    """Build (or re-use) every strategy's per-patient constructions."""
    chosen = _strategies(names)  # a comma inside a label's parentheses is the label's
    name = _profile(profile)
    with _writer(name):
        summary = _run(
            build_all, name, chosen, setting=setting, prep=prep, task=task, progress=True,
        )  # fmt: skip
    typer.echo(summary.to_string(index=False))
    _run(check_constructions, summary)


# (stage, wall seconds, CPU seconds) of the stages run by this process, for reproduce's
# closing time table.
STAGE_TIMES: list[tuple[str, float, float]] = []


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (stage worker processes,
    notebook kernels): unlike wall time, it does not grow when other jobs share the cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def _stage(label: str) -> Iterator[None]:
    """Announce a stage and record its wall and CPU time in :data:`STAGE_TIMES` (also on
    failure)."""
    typer.secho(f"== {label}", bold=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        yield
    finally:
        STAGE_TIMES.append((label, time.perf_counter() - t0, _cpu_seconds() - c0))


def stage_table(times: list[tuple]) -> str:
    """A per-stage wall-time table with shares and a total line; with (stage, wall, cpu)
    entries also each stage's CPU seconds (stage processes and kernels included)."""
    total = sum(t[1] for t in times) or 1.0
    width = max([len(t[0]) for t in times] + [len("total")])
    cpu = bool(times) and all(len(t) > 2 for t in times)

    def row(label: str, sec: float, share: str, c: float | None) -> str:
        return f"  {label:<{width}} {sec:8.1f}s{share}" + (f"  cpu {c:8.1f}s" if cpu else "")

    lines = [row(t[0], t[1], f" {100 * t[1] / total:5.1f}%", t[2] if cpu else None)
             for t in times]  # fmt: skip
    total_cpu = sum(t[2] for t in times) if cpu else None
    lines.append(row("total", sum(t[1] for t in times), "       " if cpu else "", total_cpu))
    return "\n".join(lines)


STAGES = (
    "synth",
    "cohort",
    "dialogues",
    "questions",
    "population",
    "strategies",
    "evaluate-offline",
)
OFFLINE_READERS = ("reference", "eager")


@app.command()
def pipeline(
    profile: ProfileOpt = None,
    seed: SeedOpt = None,
    skip_existing: Annotated[
        bool, typer.Option(help="skip synth when its tables already exist")
    ] = True,
    allow_drops: AllowDropsOpt = False,
    cohort_rule: CohortRuleOpt = None,
) -> None:
    """Run every stage in order on the embedded synthetic default."""
    name = _profile(profile)
    with _writer(name):
        _pipeline(name, seed, skip_existing, allow_drops, cohort_rule)


def _pipeline(name: str, seed: int | None, skip_existing: bool, allow_drops: bool,
              cohort_rule: str | None = None) -> None:  # fmt: skip
    if not (skip_existing and (build_dir(name) / "raw" / "hosp").exists()):
        with _stage("synth"):
            synth(profile=name, seed=seed)
    with _stage("cohort"):
        cohort(profile=name, seed=seed, allow_drops=allow_drops, cohort_rule=cohort_rule)
    with _stage("dialogues"):
        dialogues(profile=name, seed=seed, allow_drops=allow_drops)
    with _stage("questions"):
        questions(profile=name, seed=seed, allow_drops=allow_drops)
    with _stage("population"):  # PopMedQA group questions (issue 29): cohort + events only
        cli_population.population(profile=name, seed=seed)
    with _stage("strategies (post)"):
        strategies(profile=name, setting="post")  # the original dialogues
    with _stage("strategies (pre, T3-injected)"):
        # The equal-input probe. Only the harness reads `pre` constructions, and only the
        # paper's eight + the diagnostic controls (evaluate-offline: EVALUATION_STRATEGIES),
        # so the extras are not built on injected dialogues
        # (`strategies --setting pre` builds them all); nor are T5-injected constructions
        # (the harness's `pre` setting is the T3 probe): `strategies --setting pre --task T5`.
        strategies(profile=name, names=",".join(EVALUATION_STRATEGIES), setting="pre")
    with _stage("evaluate-offline"):
        evaluate_offline(profile=name, allow_drops=allow_drops)


@app.command("evaluate-offline")
def evaluate_offline(profile: ProfileOpt = None, allow_drops: AcceptErrorsOpt = False) -> None:
    """Answer every question with the offline readers under the paper's eight strategies and
    the diagnostic controls event-table and oracle, both T3 settings (the predictions the
    analysis notebooks read; resumable)."""
    # The readers are CPU-bound Python: one process per core, strategies dealt between them.
    name = _profile(profile)
    with _writer(name):
        spec = RunSpec(name, EVALUATION_STRATEGIES, OFFLINE_READERS, ["post", "pre"])
        summary = _run(run_parallel, spec)
    typer.echo(summary.to_string(index=False))
    for line in _run(check_run, "evaluate-offline", summary, allow_drops) or []:
        typer.echo(line, err=True)


@app.command("audit")
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
    p = _profile(profile)
    if score is None:
        sheet, path = _run(build_audit_sheet, p, seed)
        by_task = sheet.groupby("task", sort=True)["risk"]
        typer.echo(", ".join(f"{t} {len(r)} ({r.iat[0]} risk)" for t, r in by_task))
        typer.echo(f"{len(sheet)} questions to audit -> {path}")
        typer.echo("fill auditor_verdict (agree|disagree), then: clintrace audit --score <sheet>")
        return
    table = _run(score_audit_sheet, score, p, allow_blank=allow_blank)
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))


@app.command()
def notebooks(
    profile: ProfileOpt = None,
    timeout: Annotated[int, typer.Option(help="seconds per notebook")] = 1200,
    workers: Annotated[
        int | None, typer.Option(help="notebooks run at once (default: 2 on 2+ cores)")
    ] = None,
) -> None:
    """Execute every numbered notebook on a profile (outputs under data/build/<p>/notebooks/)."""
    name = _profile(profile)

    def line(r: dict) -> None:  # as each notebook finishes: the stage's progress
        mark = "ok " if r["ok"] else "FAIL"
        typer.echo(f"  {mark} {r['notebook']:<40} {r['seconds']:6.1f}s {r.get('error', '')}")

    with _writer(name):  # the notebooks append predictions (04, 06, 11) and write figures
        results = _run(execute_all, name, timeout=timeout, workers=workers, on_done=line)
    failed = [r for r in results if not r["ok"]]
    if failed:
        raise typer.Exit(code=1)
    typer.echo(f"figures -> {figures_dir(name)}")


@app.command()
def reproduce(profile: ProfileOpt = "paper", seed: SeedOpt = None) -> None:
    """The main job: the whole pipeline + every notebook on a profile (default: paper)."""
    t0 = time.perf_counter()
    name = _profile(profile)
    STAGE_TIMES.clear()
    with _writer(name):
        try:
            pipeline(profile=name, seed=seed)
            with _stage("notebooks"):
                notebooks(profile=name, workers=None)
        finally:
            typer.echo(f"reproduce ({name}): time per stage\n{stage_table(STAGE_TIMES)}")
    typer.echo(
        f"reproduce ({name}) done in {time.perf_counter() - t0:.0f}s; "
        f"figures in {figures_dir(name)}"
    )


@app.command()
def info(profile: ProfileOpt = None) -> None:
    """Show which artifacts exist for a profile and where the notebooks are."""
    name = _profile(profile)
    root = build_dir(name)
    typer.echo(f"profile {name}: {root}")
    for path in sorted(root.glob("*.parquet")):
        typer.echo(f"  {path.name}")
    src = root / "source.json"
    if src.exists():
        typer.echo(json.dumps(json.loads(src.read_text()), indent=2))
    typer.echo(f"notebooks: {NOTEBOOKS_DIR}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
