"""``clintrace judge``: judge a profile's answers with any backbone and audit the judge against
the deterministic scorer (MedMemoryBench Appendix D.1 prompts)."""

from __future__ import annotations

from typing import Annotated

import typer

from clinlib.analysis.judge_audit import (
    agreement_by_kind,
    audit_of_verdicts,
    judge_audit,
    labelled_questions,
)
from clinlib.cli.common import (
    ConfigOpt,
    ProfileOpt,
    add_command,
    csv_list,
    profile_name,
    run_stage,
    writer_lock,
)
from clinlib.core.config import build_dir
from clinlib.eval.judge.audit_set import load_audit_set, save_verdicts, scenario_of
from clinlib.eval.judge.run import judge_profile, judge_traps
from clinlib.eval.judge.scoring import LEXICAL_JUDGE, judge_predictions
from clinlib.eval.synthesis.calls import MODES, Calls
from clinlib.llm import get_backbone
from clinlib.llm.local_server import check_local_reachable
from clinlib.tasks.traps.answers import JUDGED_TRAP_TASKS

AUDIT_SHOWN = [
    "judge_backbone",
    "task",
    "n",
    "n_patients",
    "agreement",
    "agree_boot_low",
    "agree_boot_high",
    "kappa",
    "precision",
    "recall",
    "f1",
    "parse_failed",
]


def judge_cmd(
    profile: ProfileOpt = None,
    judge: Annotated[
        str, typer.Option(help=f"judge backbone (offline: {LEXICAL_JUDGE}, not an LLM)")
    ] = LEXICAL_JUDGE,
    strategies: Annotated[str, typer.Option(help="comma-separated strategies")] = "full-context",
    backbones: Annotated[
        str, typer.Option(help="comma-separated answering backbones")
    ] = "reference,eager",
    settings: Annotated[str, typer.Option(help="comma-separated settings")] = "post",
    tasks: Annotated[str | None, typer.Option(help="comma-separated tasks (default all)")] = None,
    limit: Annotated[int | None, typer.Option(help="at most this many rows per task")] = None,
    budget: Annotated[float | None, typer.Option(help="cap on new spend, USD")] = None,
    mode: Annotated[str, typer.Option(help=f"one of {', '.join(MODES)}")] = "live",
    audit_set: Annotated[
        bool,
        typer.Option(
            "--audit-set", help="audit the judge on the shipped labelled free-text pairs instead"
        ),
    ] = False,
    ship: Annotated[
        bool,
        typer.Option(
            "--ship",
            help="with --audit-set: also write the verdicts to data/judge_audit/verdicts/ (what "
            "notebook 18 shows)",
        ),
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """Judge the selected predictions, write data/build/<profile>/judge/<judge>.parquet, and
    print the judge's agreement with the deterministic scorer (kappa, precision / recall / F1
    per task; agreement with its patient-clustered interval). The free-text trap tasks (IG,
    MCD: no deterministic scorer) are judged when named in --tasks; their verdicts are counted."""
    name = profile_name(profile)
    for note in run_stage(check_local_reachable, [judge], config, name, "cli"):
        typer.echo(f"local: {note}")  # a serve-local record followed (its port)
    calls = run_stage(Calls, name, budget_usd=budget, mode=mode, config=config)
    if audit_set:
        _audit_labelled(name, judge, calls, ship, limit, csv_list(tasks))
        return
    named = csv_list(tasks)
    free = [t for t in named or [] if t in JUDGED_TRAP_TASKS]
    scored = [t for t in named or [] if t not in JUDGED_TRAP_TASKS]
    select = dict(
        strategies=csv_list(strategies),
        backbones=csv_list(backbones),
        settings=csv_list(settings) or ["post"],
        limit=limit,
    )
    with writer_lock(name):
        if free:
            _report_free(run_stage(judge_traps, name, judge, calls=calls, tasks=free, **select))
        if scored or not free:
            judged, preds, questions, path = run_stage(
                judge_profile, name, judge, calls=calls, tasks=scored or None, **select
            )
    if not (scored or not free):
        return
    if judged["error"].notna().all():
        typer.secho(f"error: every judge request failed, e.g. {judged['error'].iat[0]}", err=True)
        raise typer.Exit(code=2)
    audit = run_stage(judge_audit, judged, preds, questions)
    typer.echo(audit[AUDIT_SHOWN].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    typer.echo(
        f"{len(judged)} verdicts ({int(judged['parse_failed'].sum())} unparsed, "
        f"${judged['cost_usd'].sum():.4f}) -> {path}"
    )


def _audit_labelled(
    name: str,
    judge: str,
    calls: Calls,
    ship: bool = False,
    limit: int | None = None,
    tasks: list[str] | None = None,
) -> None:
    """The judge against the labelled free-text set (MedMemoryBench §6 "Response Quality and
    Hallucination Analysis", Table 5)."""
    pairs = run_stage(load_audit_set)
    if tasks:  # only these judged types
        pairs = pairs[pairs["task"].isin(tasks)].reset_index(drop=True)
    if limit is not None:  # the first `limit` scenarios of each type: every kind of each
        pairs = pairs[scenario_of(pairs) < limit].reset_index(drop=True)
        typer.echo(f"audit subset: scenarios 0-{limit - 1} of each type, {len(pairs)} pairs")
    questions, predictions = labelled_questions(pairs)
    judged = run_stage(judge_predictions, questions, predictions, judge, profile=name, calls=calls)
    if judged["error"].notna().all():
        typer.secho(f"error: every judge request failed, e.g. {judged['error'].iat[0]}", err=True)
        raise typer.Exit(code=2)
    table, rows = run_stage(audit_of_verdicts, pairs, judged)
    model = str(get_backbone(judge, calls.config).model)
    path = save_verdicts(judged, judge, model, build_dir(name) / "judge" / "audit_set")
    if ship:
        path = save_verdicts(judged, judge, model)
    typer.echo(table[AUDIT_SHOWN].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    typer.echo(agreement_by_kind(rows).round(2).to_string())
    typer.echo(f"{len(pairs)} labelled pairs, {int(pairs['spot_checked'].sum())} read by hand")
    failed = int(judged["error"].notna().sum())
    typer.echo(f"verdicts ({failed} failed requests) -> {path}")


def _report_free(judged) -> None:
    """Per free-text task: verdicts, judged correct, unparsed (nothing to agree with)."""
    if judged["error"].notna().all():
        typer.secho(f"error: every judge request failed, e.g. {judged['error'].iat[0]}", err=True)
        raise typer.Exit(code=2)
    for task, g in judged.groupby("task", sort=True):
        ok = g["error"].isna()
        correct = int((g["verdict"].astype("boolean").fillna(False) & ok).sum())
        typer.echo(
            f"{task}: {len(g)} verdicts, {correct} judged correct, "
            f"{int(g['parse_failed'].sum())} unparsed, "
            f"{int((~ok).sum())} failed (${g['cost_usd'].sum():.4f})"
        )


def register(app: typer.Typer) -> None:
    """Add ``judge`` to the ``clintrace`` app."""
    add_command(app, judge_cmd, "judge")
