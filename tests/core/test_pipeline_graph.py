"""The pipeline's stage graph (clinlib.core.guards.PIPELINE_STEPS): acyclic, every read written
upstream, the manifest stages' inputs and outputs declared, and the edges worked by hand from
what the stages' code reads; the commands and options each step runs with."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from clinlib.cli import command_index
from clinlib.cli.pipeline import STEP_COMMANDS, pipeline_jobs, step_args
from clinlib.cli.schedule import check_graph
from clinlib.core.guards import PIPELINE_STEPS, STAGES, pipeline_needs, pipeline_problems

PRE = "strategies (pre, T3-injected)"
POST = "strategies (post)"


def test_the_table_has_no_problem_and_covers_every_manifest_stage():
    assert pipeline_problems() == []
    ran = {stage for stages, _, _ in PIPELINE_STEPS.values() for stage in stages}
    assert ran == set(STAGES)
    assert list(STEP_COMMANDS) == list(PIPELINE_STEPS)


def test_the_checker_fails_on_counterexamples():
    table = dict(PIPELINE_STEPS)
    # a step that reads what only a later step writes
    table["cohort"] = (("cohort",), table["cohort"][1], ("raw/hosp", "questions"))
    assert pipeline_problems(table) == ["cohort reads questions, which no earlier step writes"]
    # a manifest input left out of the step's reads, a manifest output left out of its writes
    table = dict(PIPELINE_STEPS)
    stages, writes, reads = table["evidence"]
    table["evidence"] = (stages, writes[1:], tuple(r for r in reads if r != "dialogues"))
    assert pipeline_problems(table) == [
        "evidence runs evidence, which reads dialogues: not declared",
        "evidence runs evidence, which writes evidence_recall: not declared",
    ]
    # two writers of one thing
    table = dict(PIPELINE_STEPS)
    table["ablations"] = (("ablations",), (*table["ablations"][1], "predictions"), ())
    assert "predictions is written by evaluate-offline and ablations" in pipeline_problems(table)


def test_the_graph_is_acyclic_and_its_order_is_the_sequential_one():
    from clinlib.cli.schedule import Job

    jobs = [Job(s, (), n) for s, n in pipeline_needs().items()]
    assert check_graph(jobs) == list(PIPELINE_STEPS)


def test_edges_worked_by_hand_from_the_stages_code():
    needs = pipeline_needs()
    # population reads the cohort, its events and the source tables only: it starts after cohort
    assert needs["population"] == ("synth", "cohort")
    assert needs["population-eval"] == ("population",)
    # the post constructions need the dialogues (and events), not the questions
    assert needs[POST] == ("cohort", "dialogues")
    # pre injects T3 questions and re-uses the post constructions of uninjected patients
    assert needs[PRE] == ("cohort", "dialogues", "questions", POST)
    assert needs["evaluate-offline"] == ("dialogues", "questions", POST, PRE)
    # these append to the predictions store evaluate-offline claims; longmed reads its post rows
    for step in ("evaluate-longmed", "ablations", "trap-answers"):
        assert "evaluate-offline" in needs[step] and POST in needs[step]
        assert "population" not in needs[step] and "evidence" not in needs[step]
    # evidence labels every paper-task prediction, ablations' core-memory rows included
    assert needs["evidence"][-2:] == ("evaluate-offline", "ablations")
    # ablations deletes its variants' parts from the store after asking them, so the steps that
    # list the whole store wait for it (a concurrent trap-answers opened a part already gone)
    assert needs["trap-answers"][-1] == "ablations" and needs["evaluate-longmed"][-1] == "ablations"
    # the rest are independent of each other, so they may run side by side
    assert "trap-answers" not in needs["evidence"] and "evaluate-longmed" not in needs["evidence"]
    assert "evaluate-longmed" not in needs["trap-answers"]


def test_a_skipped_synth_leaves_the_build_tables_as_they_are():
    needs = pipeline_needs([s for s in PIPELINE_STEPS if s != "synth"])
    assert needs["cohort"] == () and needs["population"] == ("cohort",)


@pytest.mark.parametrize("step", list(STEP_COMMANDS))
def test_each_step_is_a_clintrace_command(step):
    assert STEP_COMMANDS[step][0] in command_index()


def test_step_args_carry_the_pipelines_options():
    assert step_args("cohort", "paper", 7, True, "longmedbench") == [
        "cohort",
        "--profile",
        "paper",
        "--seed",
        "7",
        "--allow-drops",
        "--cohort-rule",
        "longmedbench",
    ]
    assert step_args("evaluate-offline", "quick", 7, True, None) == [
        "evaluate-offline",
        "--profile",
        "quick",
        "--accept-errors",
    ]
    assert step_args("population", "quick", 3, True, "x") == [
        "population",
        "--profile",
        "quick",
        "--seed",
        "3",
    ]
    assert step_args(POST, "quick", None, False, None) == [
        "strategies",
        "--setting",
        "post",
        "--profile",
        "quick",
    ]
    pre = step_args(PRE, "quick", None, False, None)
    assert pre[:2] == ["strategies", "--strategies"] and pre[3:5] == ["--setting", "pre"]


def test_pipeline_jobs_skip_existing_synth(tmp_path, monkeypatch):
    from clinlib.core import config

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    assert [j.name for j in pipeline_jobs("quick")][0] == "synth"
    (tmp_path / "quick" / "raw" / "hosp").mkdir(parents=True)
    jobs = pipeline_jobs("quick")
    assert [j.name for j in jobs] == list(PIPELINE_STEPS)[1:]
    assert jobs[0].needs == () and jobs[0].argv[4:] == ("cohort", "--profile", "quick")
    assert jobs[0].argv[3] == str(tmp_path)  # the child writes where the parent does
    assert [j.name for j in pipeline_jobs("quick", skip_existing=False)][0] == "synth"


def _fake_run(fail: str | None = None):
    """run_jobs stand-in: every job 'ran' for 10 s, two at a time; ``fail`` exits 2."""

    def run(jobs, max_jobs, out, env, cwd, priority):
        from clinlib.cli.schedule import Outcome

        assert max_jobs == 2 and env["PYTHONPATH"].split(":")[0] == str(cwd)
        outs = []
        for i, job in enumerate(jobs):
            rc = 2 if job.name == fail else 0
            tail = ["error: events.parquet: column subject_id missing"] if rc else []
            outs.append(Outcome(job.name, rc, 10.0, 9.0, 5.0 * i, 5.0 * i + 10, tail))
            if rc:
                break
        return outs

    return run


def test_reproduce_writes_offsets_and_a_failure_is_one_named_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from clinlib import cli
    from clinlib.cli import pipeline as pl
    from clinlib.core import config

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    (tmp_path / "quick" / "raw" / "hosp").mkdir(parents=True)
    monkeypatch.setattr(pl, "run_jobs", _fake_run())
    monkeypatch.setattr(pl, "notebooks", lambda **_k: None)
    result = CliRunner().invoke(cli.app, ["reproduce", "--profile", "quick", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    times = pd.read_csv(tmp_path / "quick" / "reproduce_times.csv")
    assert times["stage"].tolist() == [*list(PIPELINE_STEPS)[1:], "notebooks"]
    # the stages' offsets as the scheduler measured them (shifted by the run's start)
    assert times["start"].iloc[:-1].diff().dropna().round(3).eq(5.0).all()
    assert (times["end"] - times["start"]).iloc[:-1].round(3).eq(10.0).all()
    assert "critical path" in result.output and "  wall " in result.output

    result = CliRunner().invoke(cli.app, ["pipeline", "--profile", "quick", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    written = pd.read_csv(tmp_path / "quick" / "pipeline_times.csv")  # the next run's order
    assert written["stage"].tolist() == list(PIPELINE_STEPS)[1:]

    monkeypatch.setattr(pl, "run_jobs", _fake_run(fail="questions"))
    result = CliRunner().invoke(cli.app, ["pipeline", "--profile", "quick", "--jobs", "2"])
    assert result.exit_code == 2
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert errors == [
        "error: pipeline: stage 'questions' failed (exit 2): "
        "error: events.parquet: column subject_id missing"
    ]


def test_a_previous_reproduce_table_sets_critical_path_first(tmp_path):
    from clinlib.cli.pipeline import stage_priority
    from clinlib.cli.schedule import Job, simulate

    cpu = {  # paper, CPU seconds (reproduce_times.csv of a paper reproduce at 5746e42)
        "synth": 9,
        "cohort": 12,
        "dialogues": 2,
        "questions": 138,
        "population": 262,
        "population-eval": 282,
        POST: 66,
        PRE: 12,
        "evaluate-offline": 258,
        "evaluate-longmed": 32,
        "ablations": 91,
        "evidence": 78,
        "trap-answers": 199,
    }
    path = tmp_path / "reproduce_times.csv"
    pd.DataFrame({"stage": list(cpu), "seconds": 0.0, "cpu_seconds": list(cpu.values())}).to_csv(
        path, index=False
    )
    graph = [Job(s, (), n) for s, n in pipeline_needs().items()]
    first = stage_priority(graph, tmp_path, 2)
    # trap-answers (199 s) and evidence (78) wait for ablations (91), nothing after them
    assert first["trap-answers"] == 199 and first["ablations"] == 91 + 199
    # the longest chain: cohort, dialogues, questions, pre, evaluate-offline, ablations, traps
    assert first["cohort"] == 12 + 2 + 138 + 12 + 258 + 91 + 199
    assert first["population"] == 262 + 282
    assert stage_priority(graph, tmp_path, 1) is None  # one job: the sequential order
    assert stage_priority(graph, tmp_path / "elsewhere", 2) is None  # no table
    # a newer pipeline table wins: trap-answers measured at 10 s now
    later = pd.DataFrame({"stage": list(cpu), "seconds": 0.0, "cpu_seconds": list(cpu.values())})
    later.loc[later["stage"] == "trap-answers", "cpu_seconds"] = 10.0
    later.to_csv(tmp_path / "pipeline_times.csv", index=False)
    os.utime(path, ns=(1, 1))
    assert stage_priority(graph, tmp_path, 2)["trap-answers"] == 10.0
    # on an idle 2-core machine: 819 s in declared order, 787 s critical path first (764 / 734
    # before trap-answers and evaluate-longmed waited for ablations); the chain alone is 721 s
    ends = [max(e for _, e in simulate(graph, cpu, 2, p).values()) for p in (None, first)]
    assert ends == [819, 787] and sum(cpu.values()) == 1441
    assert 9 + first["cohort"] == 721
