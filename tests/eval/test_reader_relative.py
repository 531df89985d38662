"""The offline readers on relative-time (T1R) questions: every template is recognised, the
k-th measurement of the N-th visit is read from a hand-written record, and a record without
that visit makes the reference reader abstain and the eager one guess."""

from __future__ import annotations

import pytest

from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.readers.policies import eager_policy, reference_policy
from clinlib.eval.readers.prompt import numbered_encounters
from clinlib.eval.readers.relative import RelativeQuestion, recognise_relative
from clinlib.tasks import TASKS
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T1R_RELATIVE_TEMPLATES

RECORD = """Visit 1 (2150-01-10)
Clinician: On 2150-01-10, your Potassium was 4.1 mEq/L. [LAB-1]

Visit 2 (2150-03-02)
Clinician: On 2150-03-02, your Potassium was 5.4 mEq/L and Calcium, Total was 8.1 mg/dL. [LAB-2, LAB-3]
Clinician: Your Potassium of 5.4 mEq/L is above the usual range. [LAB-2]
Clinician: On 2150-03-04, your Potassium was 4.6 mEq/L. [LAB-4]
Clinician: On 2150-03-05, your Potassium was 3.9 mEq/L. [LAB-5]"""


def _ask(template: str, lab: str, ordinal: str, visit: str, record: str = RECORD, eager=False):
    q = template.format(lab=lab, ordinal=ordinal, visit=visit)
    q = f"{q} {TASKS['T1R'].answer_format}"
    policy = eager_policy if eager else reference_policy
    return policy(build_messages({"question": q}, record))


@pytest.mark.parametrize("template", T1R_RELATIVE_TEMPLATES)
def test_every_template_is_recognised(template):
    q = template.format(lab="Calcium, Total", ordinal="third", visit="twenty-first")
    assert recognise_relative(q) == RelativeQuestion("Calcium, Total", 3, 21)


@pytest.mark.parametrize("template", T1R_RELATIVE_TEMPLATES)
def test_kth_measurement_of_the_nth_visit(template):
    # visit 2's potassium days: 03-02 (5.4, restated once), 03-04 (4.6), 03-05 (3.9)
    assert _ask(template, "Potassium", "first", "second") == "5.4 mEq/L"
    assert _ask(template, "Potassium", "second", "second") == "4.6 mEq/L"
    assert _ask(template, "Potassium", "third", "second") == "3.9 mEq/L"
    assert _ask(template, "Potassium", "first", "first") == "4.1 mEq/L"
    assert _ask(template, "Calcium, Total", "first", "second") == "8.1 mg/dL"


def test_absent_visit_or_position_abstains_or_guesses():
    t = T1R_RELATIVE_TEMPLATES[0]
    assert _ask(t, "Potassium", "first", "third") == ABSTAIN
    assert _ask(t, "Potassium", "fourth", "second") == ABSTAIN
    assert _ask(t, "Potassium", "fourth", "second", eager=True) == "3.9 mEq/L"  # the last one
    guess = _ask(t, "Potassium", "first", "third", eager=True)
    assert guess != ABSTAIN and guess.endswith("mEq/L")


def test_t1_wording_is_not_taken_for_a_relative_question():
    assert recognise_relative("What was the patient's Potassium on 2150-03-04?") is None


# --- every representation's encounter numbering ----------------------------------------------
# Patient 7001 (tests/strategy_fixtures.py): stay 1 Potassium 4.1 (within range), Creatinine 1.3;
# stay 2 Creatinine 1.5; stay 3 Creatinine 1.7, Hemoglobin 10.9. Each question asks the FIRST
# measurement of a lab in the N-th stay; the expected answer is read off that table and what
# each representation keeps: verbatim views number encounters "Visit N (date)", the timeline
# numbers its rows "| N | date", A-Mem its notes "[nN | date]" (and keeps only abnormal labs, so
# stay 1's within-range Potassium is gone); llm-summary and Mem0 number no encounter.
RELATIVE_ASKS = (("Creatinine", "second"), ("Creatinine", "third"), ("Hemoglobin", "third"),
                 ("Potassium", "first"))  # fmt: skip
ALL = ("1.5 mg/dL", "1.7 mg/dL", "10.9 g/dL", "4.1 mEq/L")
NONE = (ABSTAIN,) * 4
EXPECTED_BY_REPRESENTATION = {
    "no-context-blind": NONE,
    "last-visit-only": (ABSTAIN, "1.7 mg/dL", "10.9 g/dL", ABSTAIN),  # only "Visit 3"
    "full-context": ALL,
    "dense-retrieval": ALL,  # k = 3 visits of a 3-visit record
    "structured-timeline": ALL,
    "llm-summary": NONE,
    "mem0": NONE,
    "a-mem": ("1.5 mg/dL", "1.7 mg/dL", "10.9 g/dL", ABSTAIN),
    "last-n-visits": ALL,
    "bm25": ALL,
    "hybrid": ALL,
    "codebook": ALL,
    "window-visits": ALL,
    # no anchor: the target is the last stay, and only the two stays before it are shown
    "history-visits": ("1.5 mg/dL", ABSTAIN, ABSTAIN, "4.1 mEq/L"),
    "event-table": NONE,  # dated rows, no encounter numbering
    "oracle": NONE,  # these questions name no anchor or dated visit: an empty history
    # archival k = 3 visits of a 3-visit record, numbered "Visit N"; the pinned block holds no lab
    "core-memory": ALL,
    # flattened (no "Visit N" header): the N-th stay is found by its admission sentence
    "flat-window": ALL,
    "flat-history": ("1.5 mg/dL", ABSTAIN, ABSTAIN, "4.1 mEq/L"),
    # history-bounded retrieval: no visit named, so the last stay is the target (as above)
    "history-dense-retrieval": ("1.5 mg/dL", ABSTAIN, ABSTAIN, "4.1 mEq/L"),
    "history-mem0": NONE,
    "note-memory": NONE,  # notes name no stay by number; no admission sentence of the dialogue's
}


@pytest.fixture(scope="module")
def record_7001(tmp_path_factory):
    from clinlib.strategies import STRATEGIES, context_for, get_strategy
    from clinlib.strategies.names import SERVICE_STRATEGIES
    from clinlib.strategies.prep import RuleBasedPrep
    from tests import strategy_fixtures as F

    events = F.events_7001()
    turns = F.dialogue(events)
    emb = str(tmp_path_factory.mktemp("embeddings"))
    ev_dir = tmp_path_factory.mktemp("events")
    events.to_parquet(ev_dir / "events.parquet")
    dirs = {"embedding_dir": emb, "events_dir": str(ev_dir)}
    out = {}
    for name, cls in STRATEGIES.items():
        if name in SERVICE_STRATEGIES:  # remote-memory: tests/strategies/test_remote_memory.py
            continue
        strat = get_strategy(name, **{k: v for k, v in dirs.items() if k in cls.defaults})
        art = strat.construct(7001, turns, RuleBasedPrep())
        for lab, visit in RELATIVE_ASKS:
            q = T1R_RELATIVE_TEMPLATES[0].format(lab=lab, ordinal="first", visit=visit)
            row = {"qid": "q", "task": "T1R", "subject_ids": [7001], "question": q}
            out[name, lab, visit] = context_for(row, strat, {7001: art}, {7001: turns})
    return out


def test_every_registered_representation_has_an_expectation():
    from clinlib.strategies.registry import LOCAL_STRATEGIES

    assert set(EXPECTED_BY_REPRESENTATION) == set(LOCAL_STRATEGIES)


@pytest.mark.parametrize("name", sorted(EXPECTED_BY_REPRESENTATION))
def test_relative_questions_read_each_representations_numbering(record_7001, name):
    got = tuple(
        _ask(T1R_RELATIVE_TEMPLATES[0], lab, "first", visit, record=record_7001[name, lab, visit])
        for lab, visit in RELATIVE_ASKS
    )
    assert got == EXPECTED_BY_REPRESENTATION[name]


def test_numbered_encounters_in_timeline_rows_and_amem_notes():
    timeline = (
        "Structured timeline (one row per encounter)\n"
        "| # | encounter | labs | medications | diagnoses | procedures |\n"
        "|---|---|---|---|---|---|\n"
        "| 1 | date not stated | Potassium 4.1 mEq/L | - | - | - |\n"
        "| 2 | 2150-03-02 to 2150-03-05 | 2150-03-02: Potassium 5.4 mEq/L H; "
        "2150-03-04: Potassium 4.6 mEq/L | - | - | - |"
    )
    rows = numbered_encounters(timeline)
    assert [n for n, _, _ in rows] == [1, 2]  # the undated row is still encounter 1
    assert timeline[rows[0][1] : rows[0][2]].startswith("| 1 | date not stated")
    # relevance order, a linked note: numbers are read as written, not by position
    notes = (
        "Memory notes (most relevant first; linked notes follow):\n"
        "[n3 | 2150-06-20] Potassium 3.9 mEq/L on 2150-06-20.\n"
        "[n1 (linked) | 2150-01-10] Potassium 4.1 mEq/L on 2150-01-10."
    )
    assert [n for n, _, _ in numbered_encounters(notes)] == [3, 1]
    t = T1R_RELATIVE_TEMPLATES[1]
    assert _ask(t, "Potassium", "second", "second", record=timeline) == "4.6 mEq/L"
    assert _ask(t, "Potassium", "first", "first", record=timeline) == "4.1 mEq/L"
    assert _ask(t, "Potassium", "first", "first", record=notes) == "4.1 mEq/L"
    assert _ask(t, "Potassium", "first", "third", record=notes) == "3.9 mEq/L"
    assert _ask(t, "Potassium", "first", "second", record=notes) == ABSTAIN
