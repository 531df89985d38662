"""core-memory (clinlib.strategies.core_memory): the pinned block of patient 7001 worked out by
hand from tests/strategy_fixtures.py's table, pinned kinds, archival search over the current
text, streaming snapshots equal to truncated builds, and the LLM prep path with its metered
usage."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.strategies import core_memory as cm
from clinlib.strategies import get_prep, get_strategy
from clinlib.strategies.build_cost import attach_usage, metered
from clinlib.strategies.prep import RuleBasedPrep
from tests import strategy_fixtures as F

RULE = RuleBasedPrep()
CODE_RE = re.compile(r"\((\w+)\) recorded")


def _codes(core):
    return [CODE_RE.search(x)[1] for x in core if x.startswith("active problems:")]


@pytest.fixture(scope="module")
def turns() -> pd.DataFrame:
    return F.dialogue(F.events_7001())


def _core(turns, **params):
    return get_strategy("core-memory", **params).construct(7001, turns, RULE).data["core"]


def test_rule_based_core_block_by_hand(turns):
    core = _core(turns)
    problems = [x for x in core if x.startswith("active problems:")]
    meds = [x for x in core if x.startswith("current medications:")]
    # the last two stays with diagnoses: visit 2 (N183, E119), then visit 1 (I214; E119 seen)
    assert _codes(problems) == ["N183", "E119", "I214"]
    assert not any("(I10)" in x for x in core)  # visit 0's hypertension only: not active
    # the latest stay's orders only: Lisinopril 20 mg (not Metformin 500, not Lisinopril 10)
    assert len(meds) == 1 and "Lisinopril 20 mg PO" in meds[0] and "[RX-" in meds[0]
    assert not any(x.startswith("constraints:") for x in core)  # no pinned sentence stated
    assert _codes(_core(turns, problem_visits=1)) == ["N183", "E119"]
    assert len(_core(turns, core_items=2)) == 2  # cut from the end (medications go first)


def _say(turns, sentence, tag=""):
    """``turns`` with ``sentence`` appended to visit 0's first turn (tagged when ``tag``)."""
    stated = turns.copy()
    i = stated.index[stated["visit_idx"] == 0][0]
    stated.loc[i, "text"] = f"{stated.loc[i, 'text']} {sentence}"
    suffix = f" [{tag}]" if tag else ""
    stated.loc[i, "text_tagged"] = f"{stated.loc[i, 'text_tagged']} {sentence}{suffix}"
    if tag:
        stated.at[i, "event_ids"] = [*stated.loc[i, "event_ids"], tag]
    return stated


def _untagged(lines):
    return [re.sub(r" \[[^\]]*\]$", "", x) for x in lines]


def _strip_tags(turns):
    return turns.assign(
        text_tagged=[
            re.sub(r" ?\[[A-Z]+-[0-9-]+(?:, [A-Z]+-[0-9-]+)*\]", "", t)
            for t in turns["text_tagged"]
        ],
        event_ids=[[] for _ in range(len(turns))],
    )


def test_salience_rule_pins_by_what_the_text_says(turns, monkeypatch):
    monkeypatch.setattr(cm, "SALIENCE", dict(cm.SALIENCE))
    sentence = "I am allergic to ibuprofen; it gave me hives."
    core = _core(_say(turns, sentence, "TRAPALG-7001"))
    assert core[0] == f"constraints: allergy: {sentence} [TRAPALG-7001]"
    assert sum(x.startswith("constraints:") for x in core) == 1
    # a TRAP tag on a sentence that states no constraint pins nothing: the tag is not read
    plain = _core(_say(turns, "The weather was fine today.", "TRAPALG-7001"))
    assert not any(x.startswith("constraints:") for x in plain)
    # a constraint worded outside the rule's words is missed (the rule's known limit)
    missed = _core(_say(turns, "Pills with a smaller price tag, please."))
    assert not any(x.startswith("constraints:") for x in missed)
    cm.add_salience("procedure", r"\bno more scopes\b")
    got = _core(_say(turns, "No more scopes for me."))[0]
    assert got == "constraints: procedure: No more scopes for me."
    with pytest.raises(ValueError, match="empty pattern"):
        cm.add_salience("x", " ")


@pytest.mark.parametrize(
    "sentence",
    [
        "Before we go on, I should tell you I am allergic to penicillin; it gave me hives.",
        "Money is tight: I cannot spend more than 20 dollars a month on prescriptions.",
        "I drive a bus for work, so I cannot take anything that makes me drowsy.",
        "Years ago I was in hospital with a bleeding stomach ulcer.",
        "A psychiatrist outside this hospital has kept me on lithium for many years.",
    ],
)
def test_stripping_every_tag_gives_the_same_core_block(turns, sentence):
    tagged = _say(turns, sentence, "TRAPCOST-7001")
    a, b = _core(tagged), _core(_strip_tags(tagged))
    assert not any("[" in x for x in b)  # no tag left anywhere
    assert _untagged(a) == b  # the same block, line for line, once ids are set aside
    assert any(sentence in x for x in b if x.startswith("constraints:"))


@pytest.mark.parametrize(
    "sentence,kind",
    [
        # the seed's past-medical-history and medication-history trap events (App. "Patient
        # Profile Selection Principles" (b)), in wording the kit's injections do not use
        ("I was diagnosed with gout in my forties.", "history"),
        ("I have had migraines since I was a teenager.", "history"),
        ("My GP from a different practice prescribes me allopurinol.", "medication"),
        ("I've been taking tamsulosin for years.", "medication"),
    ],
)
def test_history_statements_are_pinned(turns, sentence, kind):
    core = _core(_say(turns, sentence))
    assert core[0] == f"constraints: {kind}: {sentence}"


def test_a_relatives_history_is_not_pinned(turns):
    # the noise sessions' proxy consultations speak of a relative, not the patient
    for sentence in (
        "My mother has a history of heart failure.",
        "My brother was diagnosed with asthma last year.",
        "I had a cold last week.",
    ):
        core = _core(_say(turns, sentence))
        assert not any(x.startswith("constraints:") for x in core), sentence


def test_context_is_core_plus_current_text_of_top_visits(turns):
    strat = get_strategy("core-memory", k=1)
    art = strat.construct(7001, turns, RULE)
    q = {"qid": "q", "subject_ids": [7001], "question": "What was the Troponin T on 2150-03-02?"}
    assert strat.rank_visits(art, q)[0] == 1  # only visit 1 states Troponin T
    now = turns.copy()
    i = now.index[(now["visit_idx"] == 1)][-1]
    now.loc[i, "text"] = now.loc[i, "text"] + " Physician noted: injected after construction."
    now.loc[i, "text_tagged"] = now.loc[i, "text"]
    ctx = strat.access(art, q, now)
    head, archival = ctx.split(cm.ARCHIVAL_HEADER)
    assert head.startswith(cm.CORE_HEADER) and "Lisinopril 20 mg PO" in head
    assert "injected after construction" in archival and "injected" not in head
    assert "Visit 2 (2150-03-02)" in archival and "Visit 1 (" not in archival
    other = {"qid": "r", "subject_ids": [7001], "question": "Hemoglobin on 2150-06-20?"}
    assert strat.access(art, other, turns).split(cm.ARCHIVAL_HEADER)[0] == head  # always pinned


def test_snapshots_equal_builds_of_the_truncated_dialogue(turns):
    snaps = F.assert_snapshots_equal_truncated_builds(
        get_strategy("core-memory"), 7001, turns, RULE, at=[1, 2, 3]
    )
    assert [x for x in snaps[1]["core"] if "medications" in x][0].count("Metformin") == 1


def _scripted(messages, params):
    system, user = messages[0]["content"], messages[-1]["content"]
    assert "CORE MEMORY" in system and "At most 16 lines" in system
    if "(empty)" in user:  # the first encounter
        return json.dumps({"core": ["current medications: Metformin 500 mg PO [RX-1]"]})
    if "Metformin 500 mg PO [RX-1]" in user and "2150-03-02" in user:
        return "I cannot comply."  # visit 1: not JSON -> the block is kept, a warning recorded
    return '```json\n{"core": ["active problems: CKD stage 3 (N183)"]}\n```'


@pytest.fixture()
def scripted_prep():
    register_backbone(Backbone(name="scripted-core", model="scripted", kind="offline",
                               policy=_scripted), replace_existing=True)  # fmt: skip
    yield get_prep("scripted-core", cache=None, credentialed=False)
    unregister_backbone("scripted-core")


def test_llm_prep_rewrites_the_block_and_is_metered(turns, scripted_prep):
    strat = get_strategy("core-memory")
    prep, sink = metered(scripted_prep)
    [art] = strat.construct_many([(7001, turns)], prep)
    assert [rid for rid, _ in sink] == [f"core-memory|7001|v{v}|core" for v in (0, 1, 2)]
    attach_usage([art], sink)
    assert art.prep_model == "scripted-core" and art.prep_usage["requests"] == 3
    assert art.prep_usage["input_tokens"] > 0
    assert art.data["core"] == ["active problems: CKD stage 3 (N183)"]
    assert len(art.data["warnings"]) == 1 and "visit 1 core memory" in art.data["warnings"][0]
    snaps = strat.build_snapshots(7001, turns, scripted_prep, at=[2])
    assert snaps[2]["core"] == ["current medications: Metformin 500 mg PO [RX-1]"]  # kept


def test_footprint_counts_sections(turns):
    strat = get_strategy("core-memory")
    fp = strat.footprint(strat.construct(7001, turns, RULE))
    assert fp["n_core"] == 4 and fp["n_active_problems"] == 3
    assert fp["n_current_medications"] == 1 and fp["n_archival_visits"] == 3
    assert fp["store_tokens"] > 0
