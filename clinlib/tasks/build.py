"""The evaluation-set build (paper §3 "Evaluation set": the fixed 6,271-question stratified set;
Fig. 2 stage 4; Appendix A gates L0–L4; Appendix B subtype strata).

``build_questions(profile)`` generates every candidate per task (clinlib.tasks.generate),
selects per task its target count, runs the validation gates and writes
``data/build/<profile>/questions.parquet`` and ``gates.parquet`` atomically (plus
``question_availability.parquet``: candidates, quota and selected per task x subtype).

Selection (deterministic for a seed, independent of input row order):

1. Subtype quotas: the task's count split over its subtypes by :data:`SUBTYPE_WEIGHTS` (equal
   weights unless listed: T3 balanced Y/N x admit/er, T5 contradicts-skewed 455 / 40 as in the
   paper, T9 ~76 % lab / 24 % other as Appendix B.6), largest remainder, at least one per
   available subtype when the count allows. A subtype with too few candidates gives its
   remainder to subtypes of the same group first (T3 yes/no, T5 yes/no, T9 lab/other), then
   to any other.
2. Within a subtype, step by step: the (disease, tertile) cell whose disease and then cell
   hold the fewest questions of the TASK so far (counted across its subtypes) — the
   stratification the paper names (§3 "Cohort", Appendix A L4, Appendix F.3) — and inside it
   the next candidate in a seeded random order (a seeded hash of the qid): a uniform draw
   within the stratum, so a patient's share of a task follows its share of the task's
   candidates (a long record with more evidence gets more questions) rather than being
   levelled. A patient gets at most :func:`per_patient_cap` questions of a task: 12, the
   maximum of the paper's eval questions per patient (Fig. 13C: median 4, mean 4.3, max 12,
   the shape of a 1,500-question task over ~350 patients), lowered to the L4 patient share
   (10 %) for tasks L4 checks. Only when the patients below the cap cannot fill the count is
   the cap lifted for the rest (the per-task counts are fixed). A candidate sharing a
   ``conflicts`` key with a selected one is skipped (T5: one question per encounter); when
   candidates conflict, the subtype quotas are filled one question at a time, the subtype
   furthest below its quota first, so that no subtype (T5's controls) finds every encounter
   already taken.
3. If a task still cannot reach its count, it is NOT padded with duplicates: a warning is
   logged and a ``question_shortfalls`` row (target, available, selected) is written to
   gates.parquet. Profiles: ``paper`` (and real-data profiles) use rules.PAPER_COUNTS
   (6,271); ``quick`` uses :data:`QUICK_COUNTS`, small but covering every subtype.

If a HARD gate fails, gates.parquet is still written, the set goes to
``questions_rejected.parquet`` (not questions.parquet), a previous questions.parquet is removed
and the GateError is raised, so nothing downstream runs on a failed (or an older) set. No
question at all, or a task with none, is a guards.StageError.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import pandas as pd

from clinlib.core.config import PROFILES, base_profile, question_counts, resolve_profile
from clinlib.core.guards import StageError, stage_run
from clinlib.core.io import Staging
from clinlib.tasks import rules
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.gates import check_gates, run_gates
from clinlib.tasks.gates.content import MAX_PATIENT_SHARE, MIN_N_FOR_PATIENT_SHARE
from clinlib.tasks.generate import SUBTYPES, generate_candidates, load_inputs
from clinlib.tasks.generators.common import INTERNAL_COLUMNS, TaskInputs, stable_hash
from clinlib.tasks.registry import get_spec
from clinlib.tasks.source_text import source_text_gate_rows

log = logging.getLogger(__name__)

TASK_ORDER: tuple[str, ...] = tuple(rules.PAPER_COUNTS)

# Small but complete: every task and (available) subtype, a few questions each.
QUICK_COUNTS: dict[str, int] = {
    "T1": 24,
    "T2": 16,
    "T3": 16,
    "T4": 6,
    "T5": 15,
    "T6": 12,
    "T7": 12,
    "T8": 14,
    "T9": 24,
}

# subtype -> (weight, group). Tasks not listed: equal weights, each subtype its own group.
SUBTYPE_WEIGHTS: dict[str, dict[str, tuple[float, str]]] = {
    "T3": {
        "Y-admit": (1, "yes"),
        "Y-er": (1, "yes"),
        "N-admit": (1, "no"),
        "N-er": (1, "no"),
    },
    # 455 yes / 40 no (paper §3), yes split evenly over the three controlled kinds.
    "T5": {
        "controlled_dx_presence": (152, "yes"),
        "controlled_procedure": (151, "yes"),
        "controlled_lab_value": (152, "yes"),
        "controlled_control": (20, "no"),
        "natural_c2_lab_non_glucose": (20, "no"),
    },
    # 1,147 lab / 353 other (Appendix B.6); lab = 3 missed : 1 never measured.
    "T9": {"lab": (860, "lab"), "lab-unmeasured": (287, "lab"), "other": (353, "other")},
    # Extended T1R: pairs are selected on their relative row; the explicit twin follows
    # (clinlib.tasks.relative).
    "T1R": {"relative": (1, "relative")},
    "T7R": {"relative": (1, "relative")},  # T7R pairs, selected the same way
}

# Fig. 13C: eval questions per patient, max 12 (median 4, mean 4.3).
MAX_PER_PATIENT = 12

AVAILABILITY_COLUMNS = ("task", "subtype", "candidates", "quota", "selected")
GATE_COLUMNS = (
    "gate",
    "task",
    "n_checked",
    "n_failed",
    "threshold",
    "passed",
    "severity",
    "detail",
)


def target_counts(profile: str | None = None) -> dict[str, int]:
    """Per-task question counts of a profile: QUICK_COUNTS for ``quick``, else the paper's."""
    name = resolve_profile(profile)
    return dict(QUICK_COUNTS if question_counts(name) == "quick" else rules.PAPER_COUNTS)


def subtype_plan(task: str) -> dict[str, tuple[float, str]]:
    """``{subtype: (weight, group)}`` of a task."""
    if task in SUBTYPE_WEIGHTS:
        return SUBTYPE_WEIGHTS[task]
    return {s: (1.0, s) for s in SUBTYPES.get(task) or get_spec(task).subtypes}


# --------------------------------------------------------------------------- quotas


def allocate(
    total: int, plan: Mapping[str, tuple[float, str]], available: Mapping[str, int]
) -> dict[str, int]:
    """Split ``total`` over subtypes (see module docstring, step 1).

    Args:
        total: questions wanted.
        plan: ``{subtype: (weight, group)}``.
        available: candidates per subtype.

    Returns:
        ``{subtype: quota}`` with ``quota <= available`` and sum = min(total, sum(available)).
    """
    subs = list(plan)
    wsum = sum(plan[s][0] for s in subs)
    raw = {s: total * plan[s][0] / wsum for s in subs}
    quota = {s: int(raw[s]) for s in subs}
    rest = total - sum(quota.values())
    for s in sorted(subs, key=lambda s: (-(raw[s] - quota[s]), subs.index(s)))[:rest]:
        quota[s] += 1
    avail = {s: int(available.get(s, 0)) for s in subs}
    present = [s for s in subs if avail[s] > 0]
    if total >= len(present):
        for s in present:
            if quota[s] == 0:
                donor = max(subs, key=lambda d: (quota[d], -subs.index(d)))
                quota[donor] -= 1
                quota[s] += 1
    wanted = dict(quota)
    quota = {s: min(quota[s], avail[s]) for s in subs}
    overflow = sum(wanted.values()) - sum(quota.values())
    lost_groups = {plan[s][1] for s in subs if avail[s] < wanted[s]}
    for scope in ("group", "any"):
        while overflow > 0:
            eligible = [
                s
                for s in subs
                if quota[s] < avail[s] and (scope == "any" or plan[s][1] in lost_groups)
            ]
            if not eligible:
                break
            # the subtype furthest below its weight share gets the next question
            s = min(eligible, key=lambda s: (quota[s] / plan[s][0], subs.index(s)))
            quota[s] += 1
            overflow -= 1
    return quota


# --------------------------------------------------------------------------- selection


def per_patient_cap(count: int) -> int:
    """Most questions of one task a patient may get (module docstring, step 2): 12 (Fig. 13C's
    max), and for a task of at least ``MIN_N_FOR_PATIENT_SHARE`` questions no more than the L4
    patient share of its count (at least 1)."""
    if count >= MIN_N_FOR_PATIENT_SHARE:
        # exact: 0.1 x 60 must give 6, not the float 6.000000000000001 or 5.999...
        return max(1, min(MAX_PER_PATIENT, int(Fraction(str(MAX_PATIENT_SHARE)) * count)))
    return MAX_PER_PATIENT


@dataclass
class _State:
    """Selection state of one task: questions per patient, per disease and per (disease,
    tertile) cell so far, the conflict keys already taken, and the per-patient cap (None =
    lifted)."""

    counts: dict[int, int] = field(default_factory=dict)
    diseases: dict[str, int] = field(default_factory=dict)
    cells: dict[tuple[str, str], int] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    cap: int | None = None

    def blocked(self, subjects: Sequence[int], conflicts: Sequence[str]) -> bool:
        """A patient of the candidate is at the cap, or one of its conflict keys is taken."""
        if self.cap is not None and any(self.counts.get(int(s), 0) >= self.cap for s in subjects):
            return True
        return any(c in self.used for c in conflicts)

    def take(self, cell: tuple[str, str], subjects: Sequence[int], conflicts: Sequence[str]):
        """Record one selected question."""
        self.used.update(conflicts)
        for s in subjects:
            self.counts[int(s)] = self.counts.get(int(s), 0) + 1
        self.diseases[cell[0]] = self.diseases.get(cell[0], 0) + 1
        self.cells[cell] = self.cells.get(cell, 0) + 1


def _pick(cand: pd.DataFrame, idx: Sequence[int], k: int, state: _State, seed: int) -> list[int]:
    """Pick up to ``k`` rows of ``cand`` (positions ``idx``), stratified by (disease, tertile).

    Each step takes the cell whose disease, then cell, has the fewest questions of the task so
    far (ties: a seeded order of the cells), and from it the next candidate in the seeded
    order of ``stable_hash(seed, qid)`` that is not blocked (:meth:`_State.blocked`; a
    blocked candidate stays blocked within the pass, so it is dropped).
    """
    if k <= 0 or not len(idx):
        return []
    subjects = cand["subject_ids"].tolist()
    conflicts = cand["conflicts"].tolist()
    qids = cand["qid"].tolist()
    diseases = cand["disease"].astype(str).tolist()
    tertiles = cand["tertile"].astype(str).tolist()
    cells: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for i in idx:
        cells.setdefault((diseases[i], tertiles[i]), []).append((stable_hash(seed, qids[i]), i))
    for order in cells.values():
        order.sort(reverse=True)  # pop() from the end = smallest hash first
    tie = {c: stable_hash(seed, "cell", *c) for c in cells}
    picked: list[int] = []
    while len(picked) < k and cells:
        cell = min(
            cells,
            key=lambda c: (state.diseases.get(c[0], 0), state.cells.get(c, 0), tie[c]),
        )
        order = cells[cell]
        chosen = None
        while order:
            _, i = order.pop()
            if not state.blocked(subjects[i], conflicts[i]):
                chosen = i
                break
        if not order:
            del cells[cell]
        if chosen is None:
            continue
        picked.append(chosen)
        state.take(cell, subjects[chosen], conflicts[chosen])
    return picked


def _pick_interleaved(
    cand: pd.DataFrame,
    by_sub: Mapping[str, list[int]],
    quota: Mapping[str, int],
    state: _State,
    seed: int,
) -> dict[str, list[int]]:
    """Subtype quotas filled one question at a time, the subtype furthest below its quota
    first (then plan order), for tasks whose candidates conflict (T5: one question per
    encounter). Filled one subtype after the other, the first subtypes took every encounter
    and the last ones (T5's controls, listed last) found all theirs blocked: on real MIMIC-IV
    all 174 T5 golds were "yes"."""
    order = list(by_sub)
    picked: dict[str, list[int]] = {s: [] for s in order}
    rest = {s: list(by_sub[s]) for s in order}
    while True:
        open_ = [s for s in order if len(picked[s]) < quota[s] and rest[s]]
        if not open_:
            return picked
        s = min(open_, key=lambda t: (Fraction(len(picked[t]), quota[t]), order.index(t)))
        got = _pick(cand, rest[s], 1, state, seed)
        if not got:
            rest[s] = []  # every remaining candidate of the subtype is blocked
            continue
        picked[s].append(got[0])
        rest[s].remove(got[0])


def select_task(
    cand: pd.DataFrame,
    task: str,
    count: int,
    seed: int,
    *,
    cap: int | None = None,
    taken: Mapping[int, int] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """Select ``count`` questions of one task.

    Args:
        cand: the task's candidates (QUESTION_COLUMNS + conflicts).
        task: task name.
        count: target number of questions.
        seed: selection seed.
        cap: per-patient cap (default :func:`per_patient_cap` of ``count``); a task selected
            in parts (T11's subtypes) passes the whole task's cap.
        taken: questions each patient already holds from the task's other parts.

    Returns:
        (selected rows sorted by qid, availability rows, shortfall dict or None).
    """
    cand = cand.sort_values("qid", kind="stable").reset_index(drop=True)
    plan = subtype_plan(task)
    by_sub = {s: list(cand.index[cand["subtype"] == s]) for s in plan}
    unknown = sorted(set(cand["subtype"]) - set(plan))
    if unknown:
        raise ValueError(f"{task}: candidates with unknown subtype(s) {unknown}")
    quota = allocate(count, plan, {s: len(v) for s, v in by_sub.items()})
    state = _State(cap=per_patient_cap(count) if cap is None else cap)
    state.counts.update({int(k): int(v) for k, v in (taken or {}).items()})
    if any(len(c) for c in cand["conflicts"]):
        picked = _pick_interleaved(cand, by_sub, quota, state, seed)
    else:
        picked = {s: _pick(cand, by_sub[s], quota[s], state, seed) for s in plan}
    # fill what conflicts or the cap left open: same group first, then any subtype, and only
    # then with the per-patient cap lifted (the per-task counts are fixed)
    missing = count - sum(len(v) for v in picked.values())
    for scope in ("group", "any", "uncapped"):
        if scope == "uncapped":
            state.cap = None
        for s in plan:
            if missing <= 0:
                break
            short_groups = {plan[t][1] for t in plan if len(picked[t]) < quota[t]}
            if scope == "group" and plan[s][1] not in short_groups:
                continue
            done = set(picked[s])
            rest = [i for i in by_sub[s] if i not in done]
            more = _pick(cand, rest, missing, state, seed)
            picked[s] += more
            missing -= len(more)
    rows = sorted(i for v in picked.values() for i in v)
    selected = cand.loc[rows].sort_values("qid", kind="stable").reset_index(drop=True)
    avail = pd.DataFrame(
        [(task, s, len(by_sub[s]), quota[s], len(picked[s])) for s in plan],
        columns=list(AVAILABILITY_COLUMNS),
    )
    shortfall = None
    if len(selected) < count:
        shortfall = {
            "task": task,
            "target": int(count),
            "available": int(len(cand)),
            "selected": int(len(selected)),
            "missing": int(count - len(selected)),
            "by_subtype": {s: [int(quota[s]), len(picked[s])] for s in plan},
        }
        log.warning(
            "%s: only %d of %d questions can be generated honestly (%d candidates); "
            "recorded as a question_shortfalls gate row, no duplicates added",
            task,
            len(selected),
            count,
            len(cand),
        )
    return selected, avail, shortfall


def build_question_set(
    inp: TaskInputs, counts: Mapping[str, int], seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """Generate and select the question set (no gates, nothing written).

    Args:
        inp: generator inputs.
        counts: ``{task: target count}``.
        seed: selection seed.

    Returns:
        (questions with QUESTION_COLUMNS sorted by task then qid, availability, shortfalls).
    """
    tasks = [t for t in TASK_ORDER if t in counts]
    cands = generate_candidates(inp, tasks)
    parts, avails, shortfalls = [], [], []
    for t in tasks:
        sel, avail, short = select_task(cands[t], t, int(counts[t]), seed)
        parts.append(sel)
        avails.append(avail)
        if short:
            shortfalls.append(short)
    questions = pd.concat(parts, ignore_index=True).drop(columns=list(INTERNAL_COLUMNS))
    questions = questions[list(QUESTION_COLUMNS)].reset_index(drop=True)
    if questions["qid"].duplicated().any():
        raise AssertionError("duplicate qid in the question set")
    return questions, pd.concat(avails, ignore_index=True), shortfalls


def shortfall_gate_rows(counts: Mapping[str, int], shortfalls: list[dict]) -> pd.DataFrame:
    """One ``question_shortfalls`` row per task (soft): n_checked = target, n_failed = missing."""
    by_task = {s["task"]: s for s in shortfalls}
    rows = []
    for t, n in counts.items():
        s = by_task.get(t)
        rows.append(
            {
                "gate": "question_shortfalls",
                "task": t,
                "n_checked": int(n),
                "n_failed": int(s["missing"]) if s else 0,
                "threshold": 0.0,
                "passed": s is None,
                "severity": "soft",
                "detail": json.dumps(s, sort_keys=True) if s else "",
            }
        )
    return pd.DataFrame(rows, columns=list(GATE_COLUMNS))


def run_validation_gates(questions: pd.DataFrame, profile: str | None) -> pd.DataFrame:
    """L0–L4 through :func:`clinlib.tasks.gates.run_gates` (Appendix A)."""
    return run_gates(questions, profile)


def _hard_failure(gates: pd.DataFrame) -> Exception | None:
    try:
        check_gates(gates)
    except ValueError as exc:  # GateError subclasses ValueError
        return exc
    return None


def build_questions(
    profile: str | None = None,
    seed: int | None = None,
    counts: Mapping[str, int] | None = None,
    allow_drops: bool = False,
) -> dict[str, pd.DataFrame]:
    """Build, gate and write a profile's evaluation set.

    Args:
        profile: build profile (default $CLINTRACE_PROFILE, else quick).
        seed: selection seed (default: the profile's seed, else 0).
        counts: per-task targets (default :func:`target_counts`).
        allow_drops: accept a task with 0 questions (0 questions in all is always an error).

    Returns:
        ``{"questions", "gates", "availability"}``.

    Raises:
        FileNotFoundError: a stage artifact is missing (names the command to run).
        GateError (a ValueError): a hard gate failed; gates.parquet and
            questions_rejected.parquet are written for inspection, and any previous
            questions.parquet is removed (the stage manifest records the failure).
        StageError (a ValueError): no questions, or a task without any.
    """
    name = resolve_profile(profile)
    counts = dict(counts) if counts is not None else target_counts(name)
    unknown = sorted(set(counts) - set(TASK_ORDER))
    if unknown:
        raise ValueError(f"counts: unknown task(s) {unknown}; known: {', '.join(TASK_ORDER)}")
    if seed is None:
        seed = PROFILES[base].seed if (base := base_profile(name)) in PROFILES else 0
    # A failed build removes the previous set (questions, gates, availability) as one unit:
    # no reader may pick up the previous questions; a failed gate commits its own report.
    with stage_run("questions", name, remove_on_failure=PAPER_FILES[:3]) as staging:
        inp = load_inputs(name, seed=seed)
        questions, availability, shortfalls = build_question_set(inp, counts, seed)
        _check_nonempty(questions, counts, availability, allow_drops)
        gates = pd.concat(
            [
                run_validation_gates(questions, name),
                shortfall_gate_rows(counts, shortfalls),
                source_text_gate_rows(questions, GATE_COLUMNS),
            ],
            ignore_index=True,
        )
        write_gated(staging, questions, gates, availability, PAPER_FILES)
    return {"questions": questions, "gates": gates, "availability": availability}


# (questions, gates, availability, rejected) artifact names of the paper's set.
PAPER_FILES: tuple[str, str, str, str] = (
    "questions",
    "gates",
    "question_availability",
    "questions_rejected",
)


def write_gated(
    staging: Staging,
    questions: pd.DataFrame,
    gates: pd.DataFrame,
    availability: pd.DataFrame,
    files: tuple[str, str, str, str],
) -> None:
    """Stage a gated question set: gates and availability always; the questions only when no
    HARD gate failed (else the ``rejected`` file: the report and the rejected set are
    committed at once and the GateError is raised), so a failed set never sits where
    readers look.

    Args:
        staging: the stage's staging folder (from :func:`clinlib.core.guards.stage_run`).
        files: the (questions, gates, availability, rejected) artifact names, without suffix.
    """
    q_file, gates_file, avail_file, rejected_file = files
    gates.to_parquet(staging.path(f"{gates_file}.parquet"), index=False)
    availability.to_parquet(staging.path(f"{avail_file}.parquet"), index=False)
    failure = _hard_failure(gates)
    if failure is not None:
        questions.to_parquet(staging.path(f"{rejected_file}.parquet"), index=False)
        staging.commit()
        raise failure
    questions.to_parquet(staging.path(f"{q_file}.parquet"), index=False)


def _check_nonempty(
    questions: pd.DataFrame,
    counts: Mapping[str, int],
    availability: pd.DataFrame,
    allow_drops: bool,
) -> None:
    """No questions at all is a StageError; so is a task left with none (unless
    ``allow_drops``), naming its candidate count."""
    if questions.empty:
        raise StageError(f"questions: 0 of {sum(counts.values())} target questions generated")
    have = questions["task"].value_counts()
    empty = [t for t, n in counts.items() if n > 0 and have.get(t, 0) == 0]
    if empty and not allow_drops:
        cands = availability.groupby("task")["candidates"].sum()
        detail = ", ".join(f"{t} ({int(cands.get(t, 0))} candidates)" for t in empty)
        raise StageError(
            f"questions: 0 questions for {detail}; fix the input, or pass --allow-drops to accept"
        )
