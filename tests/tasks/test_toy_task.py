"""A task from its spec alone (docs/extending.md "Add a task"): the toy task of
tests/tasks/toy_task.py, registered, runs through generation (on the hand-built fixture,
tests/task_fixture.py), strict and lenient parsing, grading, gate-L2 recomputation and the
gates L0, L1 and L3, then leaves the registry as it found it. And no module outside a task's
own branches on a task's name."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from clinlib.tasks import TASKS, answers, register, score, unregister
from clinlib.tasks.answers import parse_lenient, parse_strict
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.extended import extended_counts
from clinlib.tasks.gates import gate_l0, gate_l1, gate_l2, gate_l3
from clinlib.tasks.generate import generate_candidates
from tests import task_fixture as F
from tests.tasks import toy_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy():
    register(toy_task.SPEC)
    try:
        yield toy_task.SPEC
    finally:
        unregister(toy_task.TASK)


@pytest.fixture(scope="module")
def inp():
    return F.inputs()


@pytest.fixture(scope="module")
def questions(toy, inp) -> pd.DataFrame:
    return generate_candidates(inp, tasks=[toy.name])[toy.name]


def _coverage(inp) -> pd.DataFrame:
    ev = inp.events
    return pd.DataFrame(
        {
            "event_id": ev["event_id"].astype(str),
            "subject_id": ev["subject_id"],
            "status": ev["status"].astype(str),
        }
    )


def test_the_spec_alone_registers_the_task(toy):
    assert TASKS[toy.name] is toy
    assert toy.name in answers.EXTENDED_TASK_NAMES  # the views follow the registry
    assert answers.ANSWER_FORMATS[toy.name] == toy.answer_format
    assert extended_counts("quick")[toy.name] == 4


def test_generation_states_the_format_and_a_count_gold(questions, toy):
    assert len(questions) == 4  # one per kept patient of the fixture
    assert set(questions["task"]) == {toy.name}
    assert all(toy.answer_format in q for q in questions["question"])
    assert all(re.fullmatch(r"\d+", g) for g in questions["gold"])


def test_parsing_and_grading(toy):
    assert parse_strict(toy.name, "4") == "4"
    assert parse_strict(toy.name, "There are 4.") is None
    assert parse_lenient(toy.name, "There are 4 lab results.") == "4"
    assert parse_lenient(toy.name, "Not documented.") == ABSTAIN
    assert score(toy.name, "4", "4").correct
    lenient = score(toy.name, "I count 4 of them", "4", lenient=True)
    assert lenient.correct and lenient.value == 1.0
    assert score(toy.name, "five", "4").parse_failed


def test_the_gates_pass(questions, inp):
    coverage = _coverage(inp)
    assert gate_l0(questions).get(toy_task.TASK, (0, []))[1] == []
    assert gate_l1(questions, inp.events, coverage).get(toy_task.TASK, (0, []))[1] == []
    assert gate_l2(questions, None, coverage).get(toy_task.TASK, (0, []))[1] == []
    assert gate_l3(questions).get(toy_task.TASK, (0, []))[1] == []


def test_gate_l2_catches_a_wrong_gold(questions, inp):
    bad = questions.assign(gold="999")
    failures = gate_l2(bad, None, _coverage(inp))[toy_task.TASK][1]
    assert len(failures) == len(bad)


def test_unregistering_restores_the_registry():
    register(toy_task.SPEC.__class__(**{**toy_task.SPEC.__dict__, "name": "TY"}))
    assert "TY" in TASKS
    unregister("TY")
    assert "TY" not in TASKS and "TY" not in answers.EXTENDED_TASK_NAMES


# --------------------------------------------------------------------------- no task branches

BRANCH = re.compile(r'task ?== ?"|task in \(|task in \{|task != "')
# A family's own modules may name its tasks (the trap types' scorer, the population questions).
FAMILY_MODULES = (
    "clinlib/tasks/traps/",
    "clinlib/tasks/population/",
)


def test_no_task_name_branch_outside_a_task_module():
    hits = []
    for path in sorted((ROOT / "clinlib").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(FAMILY_MODULES):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if BRANCH.search(code) and not code.lstrip().startswith(("(", '"', "`", "for ")):
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == []
