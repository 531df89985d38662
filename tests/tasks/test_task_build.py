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
    MAX_PER_PATIENT,
    QUICK_COUNTS,
    allocate,
    build_question_set,
    per_patient_cap,
    select_task,
    shortfall_gate_rows,
    subtype_plan,
    target_counts,
)
from clinlib.tasks.generate import SUBTYPES
from clinlib.tasks.generators.common import stable_hash
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
    # cap = 10 % of 24 -> 2, and 12 patients x 2 = 24: the cap forces exactly 2 each
    assert per_patient.max() == 2 and per_patient.min() == 2
    assert sel["disease"].value_counts().to_dict() == {"diabetes": 12, "ckd": 12}
    assert sel["subtype"].value_counts().to_dict() == {"x": 12, "y": 12}
    assert avail.set_index("subtype")["selected"].to_dict() == {"x": 12, "y": 12}
    # conflicts: candidates 0 and 1 of a patient share a key, so never both
    keys = sel[sel["conflicts"].map(len) > 0]["conflicts"].map(tuple)
    assert keys.is_unique
    # deterministic for a seed, independent of row order
    again, _, _ = select_task(cand.sample(frac=1, random_state=3), "T1", 24, seed=0)
    assert again["qid"].tolist() == sel["qid"].tolist()


def test_per_patient_cap_by_hand():
    # 12 = Fig. 13C's max; tasks of >= 20 questions: at most 10 % of the count (L4's share)
    assert MAX_PER_PATIENT == 12
    assert per_patient_cap(1500) == 12 and per_patient_cap(134) == 12  # 150 / 13.4 -> 12
    assert per_patient_cap(120) == 12 and per_patient_cap(119) == 11
    assert per_patient_cap(60) == 6  # exact: 0.1 x 60 is not 6.000000000000001 or 5.99...
    assert per_patient_cap(53) == 5 and per_patient_cap(24) == 2 and per_patient_cap(20) == 2
    assert per_patient_cap(19) == 12 and per_patient_cap(6) == 12  # L4 does not check < 20


def _one_cell(sizes: dict[int, int]) -> pd.DataFrame:
    """One (disease, tertile) stratum, one subtype; patient p has sizes[p] candidates."""
    rows = [
        {"qid": f"T1-{p:03d}{j:03d}", "task": "T1", "subtype": "x", "subject_ids": [p],
         "disease": "ckd", "tertile": "high", "conflicts": []}
        for p, n in sizes.items()
        for j in range(n)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_within_a_stratum_the_draw_is_uniform_over_candidates(monkeypatch):
    # below the cap, the selection is the k candidates with the smallest seeded hash of the
    # qid (an independent statement of a uniform draw without replacement)
    monkeypatch.setitem(SUBTYPES, "T1", ("x",))
    cand = _one_cell({0: 10, 1: 2, 2: 1})
    for seed in range(5):
        sel, _, short = select_task(cand, "T1", 3, seed=seed)
        expected = sorted(cand["qid"], key=lambda q: stable_hash(seed, q))[:3]
        assert short is None and sorted(sel["qid"]) == sorted(expected)


def test_a_patient_with_more_candidates_gets_more_questions(monkeypatch):
    # 30 vs 10 candidates, 4 questions (cap 12 does not bind): patient 0 expects 4 x 30/40 = 3
    # per draw; the old levelling sampler gave exactly 2 and 2 every time
    monkeypatch.setitem(SUBTYPES, "T1", ("x",))
    cand = _one_cell({0: 30, 1: 10})
    share = []
    for seed in range(200):
        sel, _, _ = select_task(cand, "T1", 4, seed=seed)
        share.append(sel["subject_ids"].map(lambda s: s[0]).eq(0).mean())
    assert 0.70 <= sum(share) / len(share) <= 0.80
    assert max(share) == 1.0  # some draws take all four from the long record


def test_cap_binds_then_is_lifted_only_to_reach_the_count(monkeypatch):
    # patient 0 has 50 candidates, patients 1..9 one each; 20 questions -> cap 2. Capped pass:
    # patient 0 gets 2, patients 1..9 one each = 11; the remaining 9 can only come from patient
    # 0, so the cap is lifted for them: 11 for patient 0, exactly the count in all.
    monkeypatch.setitem(SUBTYPES, "T1", ("x",))
    cand = _one_cell({0: 50, **dict.fromkeys(range(1, 10), 1)})
    sel, _, short = select_task(cand, "T1", 20, seed=0)
    per = sel["subject_ids"].map(lambda s: s[0]).value_counts().to_dict()
    assert short is None and len(sel) == 20
    assert per == {0: 11, **dict.fromkeys(range(1, 10), 1)}
    # with 20 other patients of one candidate each the cap holds: patient 0 gets at most 2
    cand = _one_cell({0: 50, **dict.fromkeys(range(1, 21), 1)})
    sel, _, _ = select_task(cand, "T1", 20, seed=0)
    assert sel["subject_ids"].map(lambda s: s[0]).value_counts().get(0, 0) <= 2


def test_cap_counts_both_patients_of_a_pair(monkeypatch):
    # T6-like pairs: patient 0 is in every pair of the first 30, pairs of others follow; 20
    # questions -> cap 2, and a pair counts for both of its patients
    monkeypatch.setitem(SUBTYPES, "T1", ("x",))
    rows = [{"qid": f"T1-a{j:03d}", "subject_ids": [0, 100 + j]} for j in range(30)]
    rows += [{"qid": f"T1-b{j:03d}", "subject_ids": [200 + j, 300 + j]} for j in range(30)]
    cand = pd.DataFrame(rows).assign(task="T1", subtype="x", disease="ckd", tertile="low")
    cand["conflicts"] = [[] for _ in range(len(cand))]
    sel, _, short = select_task(cand, "T1", 20, seed=0)
    assert short is None and len(sel) == 20
    assert int(sel["subject_ids"].map(lambda s: 0 in s).sum()) == 2


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
    # the paper's nine, plus the extended T10, T1R, T11, T11O, T1F, T7R and T7I (paper=False)
    assert sorted(t for t, task in TASKS.items() if task.paper) == [f"T{i}" for i in range(1, 10)]
    assert [t for t, task in TASKS.items() if not task.paper] == [
        "T10",
        "T1R",
        "T11",
        "T11O",
        "T1F",
        "T7R",
        "T7I",
    ]
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


def _t5_cands(n_encounters: int) -> pd.DataFrame:
    """Every encounter has one candidate of each T5 subtype, all sharing its conflict key (as
    clinlib.tasks.generators.t5 makes them): 2 encounters per patient."""
    from clinlib.tasks.generators.t5 import SUBTYPES as T5_SUBTYPES
    from clinlib.tasks.generators.t5 import YES_SUBTYPES

    rows = []
    for e in range(n_encounters):
        for sub in T5_SUBTYPES:
            rows.append({"qid": f"T5-{e:04d}{sub}", "task": "T5", "subtype": sub,
                         "subject_ids": [e // 2], "disease": ("diabetes", "ckd")[e % 2],
                         "tertile": ("low", "medium", "high")[e % 3],
                         "gold": "yes" if sub in YES_SUBTYPES else "no",
                         "conflicts": [f"enc{e}"]})  # fmt: skip
    return pd.DataFrame(rows)


def test_t5_selection_keeps_its_controls_when_encounters_are_scarce():
    """Issue 26 §3: 60 encounters for 100 wanted questions (quotas 100 x (152, 151, 152, 20,
    20) / 495 by largest remainder = 31, 30, 31, 4, 4). Filled subtype after subtype, dx took
    31 encounters, procedure the other 29, and lab value and both "no" subtypes found every
    encounter taken: 60 x "yes". Interleaved (the subtype with the smallest picked / quota
    next, ties in plan order), subtype s gets floor(q_s t) + 1 questions for the t at which the
    sum reaches 60: t = 17/30 gives 18 + 18 + 18 + 3 + 3 = 60."""
    cand = _t5_cands(60)
    sel, avail, short = select_task(cand, "T5", 100, seed=0)
    assert len(sel) == 60 and short["selected"] == 60
    assert sel["conflicts"].map(tuple).is_unique  # still one question per encounter
    assert avail.set_index("subtype")["selected"].to_dict() == {
        "controlled_dx_presence": 18, "controlled_procedure": 18, "controlled_lab_value": 18,
        "controlled_control": 3, "natural_c2_lab_non_glucose": 3,
    }  # fmt: skip
    assert sel["gold"].value_counts().to_dict() == {"yes": 54, "no": 6}
    from clinlib.tasks.gates import binary_collapse

    assert binary_collapse(sel) == []


def test_a_collapsed_binary_task_is_a_hard_gate_failure():
    from clinlib.tasks import gates

    cand = _t5_cands(30)
    yes = cand[cand["subtype"] == "controlled_dx_presence"].head(20)
    # all "yes", all one subtype: both hard checks fail
    assert binary_collapse_msgs(yes) == ["gold balance collapsed", "subtype coverage collapsed"]
    (row,) = [r for r in gates.gate_l4(_as_questions(yes), ["T5"])]
    assert (row["severity"], row["passed"]) == ("hard", False)
    with pytest.raises(gates.GateError, match="gold balance collapsed"):
        gates.check_gates(pd.DataFrame([row]))
    # 19 yes + 1 no: 5% >= 4%, subtypes spread: holds (soft L4 only)
    mixed = pd.concat([cand[cand["gold"] == "yes"].head(19), cand[cand["gold"] == "no"].head(1)])
    assert gates.binary_collapse(mixed) == []
    # 1 "no" in 30 is 3.3% < 4%: collapsed; under MIN_N_BINARY (10) questions: not judged
    thin = pd.concat([cand[cand["gold"] == "yes"].head(29), cand[cand["gold"] == "no"].head(1)])
    assert binary_collapse_msgs(thin) == ["gold balance collapsed"]
    assert gates.binary_collapse(yes.head(9)) == []


def binary_collapse_msgs(q: pd.DataFrame) -> list[str]:
    from clinlib.tasks.gates import binary_collapse

    return [m.split(":")[0] for m in binary_collapse(q)]


def _as_questions(q: pd.DataFrame) -> pd.DataFrame:
    return q.assign(anchor_event_ids=[["DX-1-1"]] * len(q))


@pytest.mark.slow
def test_real_data_scale_keeps_every_subtype_and_binary_balance(quick_built):
    """Issue 26 §3 (f): real data gives the paper's counts far fewer candidates than they ask
    for (on real MIMIC-IV, 174 T5 questions for a target of 495). The quick profile's
    candidates (the synthetic generator with real MIMIC-IV shapes, synthetic_shapes) selected
    for ten times the paper's counts reproduce that scarcity for every task: every subtype
    with candidates must still be selected, and no binary task may collapse (all "yes", one
    subtype)."""
    from clinlib.tasks.gates import BINARY_TASKS, binary_collapse
    from clinlib.tasks.generate import load_inputs

    counts = {t: 10 * n for t, n in rules.PAPER_COUNTS.items()}
    q, avail, short = build_question_set(load_inputs("quick"), counts, seed=0)
    scarce = {s["task"] for s in short}
    assert scarce == set(counts)  # the real-data condition: fewer candidates than asked for
    for row in avail.itertuples():
        if row.candidates > 0:
            assert row.selected >= 1, (row.task, row.subtype, row.candidates)
    for task in BINARY_TASKS:
        assert binary_collapse(q[q["task"] == task]) == [], task
    t5 = q[q["task"] == "T5"]
    assert (t5["gold"] == "no").sum() >= 0.04 * len(t5)


def test_a_task_selected_in_parts_keeps_the_whole_tasks_patient_cap(monkeypatch):
    # 12 patients x 10 candidates; parts of 18 and 6 (T11 selects its subtypes apart). The
    # first part under the whole task's cap (10 % of 24 -> 2) gives 6 patients 2 and 6 one;
    # told what it took, the second part goes to those 6 only: 2 each, 12 x 2 = 24.
    monkeypatch.setitem(SUBTYPES, "T1", ("x", "y"))
    cand = _cands(12, 10, subtypes=("x",))
    cand["conflicts"] = [[] for _ in range(len(cand))]
    first, _, _ = select_task(cand.iloc[::2], "T1", 18, seed=0, cap=2)
    taken = first["subject_ids"].map(lambda s: s[0]).value_counts().to_dict()
    second, _, short = select_task(cand.iloc[1::2], "T1", 6, seed=0, cap=2, taken=taken)
    both = pd.concat([first, second])["subject_ids"].map(lambda s: s[0]).value_counts()
    assert short is None and len(both) == 12 and both.max() == 2 and both.min() == 2
