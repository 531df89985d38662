"""Evaluation-set build: quotas, stratified selection, shortfalls, profile targets, registry,
and (when the pipeline has run) the quick profile covering every task and subtype."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.core.config import artifact_path
from clinlib.tasks import rules
from clinlib.tasks.base import ABSTAIN, QUESTION_COLUMNS, TASKS
from clinlib.tasks.build import (
    QUICK_COUNTS,
    allocate,
    build_question_set,
    select_task,
    shortfall_gate_rows,
    subtype_plan,
    target_counts,
)
from clinlib.tasks.generate import SUBTYPES
from tests import task_fixture as F

# --------------------------------------------------------------------------- quotas


def test_allocate_by_hand():
    eq = {"a": (1, "a"), "b": (1, "b"), "c": (1, "c")}
    assert allocate(10, eq, {"a": 100, "b": 100, "c": 100}) == {"a": 4, "b": 3, "c": 3}
    # b has only one candidate: its remainder goes to the others
    assert allocate(10, eq, {"a": 100, "b": 1, "c": 100}) == {"a": 5, "b": 1, "c": 4}
    # every available subtype gets one even with a tiny weight
    t5 = subtype_plan("T5")
    q = allocate(15, t5, dict.fromkeys(t5, 100))
    assert sum(q.values()) == 15 and min(q.values()) >= 1
    assert q["controlled_control"] == q["natural_c2_lab_non_glucose"] == 1
    # a short "no" subtype is refilled inside the "no" group first
    q = allocate(495, t5, {**dict.fromkeys(t5, 1000), "controlled_control": 5})
    assert q["controlled_control"] == 5 and q["natural_c2_lab_non_glucose"] == 35
    assert sum(q.values()) == 495
    # not enough candidates at all
    assert allocate(10, eq, {"a": 2, "b": 1, "c": 0}) == {"a": 2, "b": 1, "c": 0}


def test_paper_targets_and_subtype_quotas():
    assert target_counts("paper") == rules.PAPER_COUNTS
    assert sum(target_counts("paper").values()) == 6271
    assert target_counts("mimic") == rules.PAPER_COUNTS
    assert target_counts("quick") == QUICK_COUNTS
    plenty = 10**6
    t5 = allocate(495, subtype_plan("T5"), dict.fromkeys(subtype_plan("T5"), plenty))
    yes = sum(t5[k] for k in ("controlled_dx_presence", "controlled_procedure",
                              "controlled_lab_value"))  # fmt: skip
    assert t5["controlled_control"] + t5["natural_c2_lab_non_glucose"] == 40
    assert yes == 455
    t9 = allocate(1500, subtype_plan("T9"), dict.fromkeys(subtype_plan("T9"), plenty))
    assert t9["lab"] + t9["lab-unmeasured"] == 1147 and t9["other"] == 353
    t3 = allocate(600, subtype_plan("T3"), dict.fromkeys(subtype_plan("T3"), plenty))
    assert set(t3.values()) == {150}
    for task, n in rules.PAPER_COUNTS.items():
        plan = subtype_plan(task)
        assert set(plan) == set(SUBTYPES[task])
        assert sum(allocate(n, plan, dict.fromkeys(plan, plenty)).values()) == n


# --------------------------------------------------------------------------- selection


def _cands(n_patients: int, per_patient: int, subtypes=("x", "y")) -> pd.DataFrame:
    rows = []
    for p in range(n_patients):
        for j in range(per_patient):
            rows.append(
                {
                    "qid": f"T1-{p:04d}{j:04d}",
                    "task": "T1",
                    "subtype": subtypes[j % len(subtypes)],
                    "subject_ids": [p],
                    "disease": ("diabetes", "ckd")[p % 2],
                    "tertile": ("low", "medium", "high")[p % 3],
                    "conflicts": [f"c{p}"] if j < 2 else [],
                }
            )
    return pd.DataFrame(rows)


def test_selection_spreads_over_patients_and_strata(monkeypatch):
    monkeypatch.setitem(SUBTYPES, "T1", ("x", "y"))
    cand = _cands(12, 10)
    sel, avail, short = select_task(cand, "T1", 24, seed=0)
    assert len(sel) == 24 and short is None and sel["qid"].is_unique
    per_patient = sel["subject_ids"].map(lambda s: s[0]).value_counts()
    assert per_patient.max() == 2 and per_patient.min() == 2  # 24 over 12 patients
    assert sel["disease"].value_counts().to_dict() == {"diabetes": 12, "ckd": 12}
    assert sel["subtype"].value_counts().to_dict() == {"x": 12, "y": 12}
    assert avail.set_index("subtype")["selected"].to_dict() == {"x": 12, "y": 12}
    # conflicts: candidates 0 and 1 of a patient share a key, so never both
    keys = sel[sel["conflicts"].map(len) > 0]["conflicts"].map(tuple)
    assert keys.is_unique
    # deterministic for a seed, independent of row order
    again, _, _ = select_task(cand.sample(frac=1, random_state=3), "T1", 24, seed=0)
    assert again["qid"].tolist() == sel["qid"].tolist()


def test_shortfall_is_recorded_never_padded(monkeypatch):
    monkeypatch.setitem(SUBTYPES, "T1", ("x", "y"))
    cand = _cands(3, 2)
    sel, _, short = select_task(cand, "T1", 10, seed=0)
    assert len(sel) == 3  # 6 candidates, but each patient's two share a conflict key
    assert sel["qid"].is_unique
    assert short["target"] == 10 and short["selected"] == 3 and short["missing"] == 7
    rows = shortfall_gate_rows({"T1": 10, "T2": 5}, [short])
    assert rows.set_index("task").loc["T1", "n_failed"] == 7
    assert bool(rows.set_index("task").loc["T2", "passed"])
    assert set(rows["severity"]) == {"soft"} and set(rows["gate"]) == {"question_shortfalls"}


def test_build_on_the_fixture_covers_every_task():
    counts = dict.fromkeys(rules.PAPER_COUNTS, 3)
    q, avail, short = build_question_set(F.inputs(), counts, seed=0)
    assert list(q.columns) == list(QUESTION_COLUMNS)
    assert q["qid"].is_unique
    assert q["task"].value_counts().to_dict() == dict.fromkeys(rules.PAPER_COUNTS, 3)
    assert not short
    assert q["task"].tolist() == sorted(q["task"])  # grouped in task order
    again, _, _ = build_question_set(F.inputs(shuffle_seed=5), counts, seed=0)
    pd.testing.assert_frame_equal(q, again)
    other_seed, _, _ = build_question_set(F.inputs(), counts, seed=1)
    assert set(other_seed["qid"]) != set(q["qid"])


# --------------------------------------------------------------------------- registry


def test_registry_has_nine_tasks_with_generators():
    assert sorted(TASKS) == [f"T{i}" for i in range(1, 10)]
    for name, task in TASKS.items():
        assert task.subtypes == SUBTYPES[name]
        assert task.generate is not None and task.max_tokens > 0 and task.answer_format
    assert TASKS["T4"].max_tokens == 120 and TASKS["T1"].max_tokens == 60


def test_registry_parsers_delegate_to_answers():
    from clinlib.tasks import answers

    assert TASKS["T3"].answer_format == answers.ANSWER_FORMATS["T3"]
    from clinlib.tasks.base import score

    assert score("T3", "yes", "yes").correct
    assert not score("T3", "no", "yes").correct
    assert score("T9", "insufficient information", ABSTAIN).correct


# --------------------------------------------------------------------------- quick profile


@pytest.mark.slow
def test_quick_profile_covers_every_task_and_subtype(quick_built):
    """On the pipeline's quick artifacts: every task is present and every subtype the cohort
    can supply is selected (a subtype without candidates must show as a recorded gap)."""
    dialogues = artifact_path("dialogues.parquet", "quick")
    built = [artifact_path(f, "quick") for f in ("questions.parquet", "gates.parquet",
                                                 "question_availability.parquet")]  # fmt: skip
    if all(p.exists() and p.stat().st_mtime >= dialogues.stat().st_mtime for p in built):
        # the pipeline's own artifacts (fast path)
        q, gates, avail = (pd.read_parquet(p) for p in built)
        short = [json.loads(d) for d in gates.loc[gates["gate"] == "question_shortfalls",
                                                  "detail"] if d]  # fmt: skip
    else:
        from clinlib.tasks.generate import load_inputs

        q, avail, short = build_question_set(load_inputs("quick"), QUICK_COUNTS, seed=0)
    assert q["qid"].is_unique
    assert set(q["task"]) == set(QUICK_COUNTS)
    for row in avail.itertuples():
        if row.candidates > 0:
            assert row.selected >= 1, (row.task, row.subtype)
    missing = avail[avail["candidates"] == 0]
    short_tasks = {s["task"] for s in short}
    for row in missing.itertuples():  # a gap is only acceptable as a recorded shortfall
        assert (
            row.task in short_tasks or q[q["task"] == row.task].shape[0] == QUICK_COUNTS[row.task]
        ), (row.task, row.subtype)
    gaps = {(r.task, r.subtype) for r in missing.itertuples()}
    # every subtype of every task except T4's families is available on quick
    assert {t for t, _ in gaps} <= {"T4"}, gaps
