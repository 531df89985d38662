"""neopatient (PopMedQA §3): recipe sampling and length bins, the vector-index matching step, and
every verification check failing on a record corrupted for it.

Expected values are worked out by hand from the recipe (event counts, planned codes) or from an
encoder whose vectors are written out here; the real matching runs on the kit's shipped static
encoder (offline).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime

import numpy as np
import pytest

from clinlib.cli.neopatient import static_encoder
from clinlib.data.neopatient import CHECKS, CodeIndex, RecipeError, sample_recipe, verify_record
from clinlib.data.neopatient.generate import (
    GenerationError,
    TextEvent,
    parse_segment,
    rule_based_events,
    surface_form,
)
from clinlib.data.neopatient.match import MIN_SCORE, VocabEntry
from clinlib.data.neopatient.pipeline import generate_cohort, vocabulary_accuracy
from clinlib.data.neopatient.recipes import (
    COHORTS,
    DX,
    LAB,
    LENGTH_BINS,
    RX,
    Concept,
    Segment,
    dx_concept,
    lab_concept,
    rx_concept,
)
from clinlib.data.sources.synthetic_vocab import ICD10_DX_TITLES


@pytest.fixture(scope="module")
def index() -> CodeIndex:
    return CodeIndex(static_encoder())


def _events(recipe):
    return rule_based_events(recipe, COHORTS[recipe.cohort].shifts)


def _verify(index, recipe, events):
    return verify_record(recipe, events, index.match_many([(e.system, e.text) for e in events]))


# --------------------------------------------------------------------------- sampling


def test_a_segments_event_count_by_hand():
    seg = Segment(
        index=0,
        admit=datetime(2150, 1, 1, 10),
        los_days=2,
        admission_type="URGENT",
        diagnoses=(dx_concept("htn"), dx_concept("cad"), dx_concept("gerd")),
        procedures=(),
        medications=((rx_concept("aspirin"), "81"),) * 4,
        labs=tuple(lab_concept(k) for k in ("sodium", "potassium", "creatinine", "bun", "wbc")),
    )
    # admission + discharge, 3 diagnoses, 4 orders, 5 labs on each of days 0, 1, 2
    assert seg.n_events == 2 + 3 + 4 + 3 * 5 == 24
    assert seg.discharge == datetime(2150, 1, 3, 14)


def test_unknown_recipe_and_bin_are_refused_in_one_line():
    with pytest.raises(RecipeError, match="unknown neopatient recipe 'nope'; known: t2dm-ckd"):
        sample_recipe("nope", 1)
    with pytest.raises(RecipeError, match="unknown length bin 'huge'"):
        sample_recipe("cad-pci", 1, "huge")


@pytest.mark.parametrize("length_bin", list(LENGTH_BINS))
def test_every_bin_is_reached_by_adding_stays(length_bin):
    low, high = LENGTH_BINS[length_bin]
    for sid in range(1, 21):
        r = sample_recipe("cad-pci", sid, length_bin)
        assert low <= r.n_events < high, (sid, r.n_events)
        # the bin is reached by stays, never by cutting: without its last stay it is short
        assert r.n_events - r.segments[-1].n_events < low or len(r.segments) == 2
        gen = _events(r)
        assert len(gen) + 2 * len(r.segments) == r.n_events  # every planned event generated


def test_recipes_are_deterministic_per_patient_and_stays_apart():
    a, b = sample_recipe("t2dm-ckd", 7, "medium", seed=3), sample_recipe("t2dm-ckd", 7, "medium", 3)
    assert a == b and a != sample_recipe("t2dm-ckd", 7, "medium", seed=4)
    for s, t in zip(a.segments, a.segments[1:], strict=False):
        assert (t.admit - s.discharge).days >= 30


# --------------------------------------------------------------------------- matching


def test_index_mechanics_on_written_out_vectors():
    """An encoder of hand-written vectors: the nearest description of the query's own system
    wins, another system's is never returned, an orthogonal query is no match."""
    vecs = {
        "aspirin tablet": [1, 0, 0],
        "heparin vial": [0, 1, 0],
        "aspirin": [0.9, 0.1, 0],
        "ldl": [1, 0, 0],
        "zzz": [0, 0, 1],
    }
    entries = [
        VocabEntry(RX, "aspirin", "aspirin tablet"),
        VocabEntry(RX, "heparin", "heparin vial"),
        VocabEntry(LAB, "50906", "ldl"),
    ]

    def encode(texts):
        return np.array([vecs[t] for t in texts], dtype=float)

    idx = CodeIndex(encode, entries)
    hit = idx.match_many([(RX, "aspirin")])[0]
    # cosine 0.9/|(0.9, 0.1)| = 0.9939 plus 0.5 x (1 of 1 query word in the description)
    assert hit.code == "aspirin" and hit.runner_up == "heparin"
    assert hit.score == pytest.approx(0.9 / np.hypot(0.9, 0.1) + 0.5)
    assert idx.match_many([(RX, "zzz")])[0].code is None  # 0.0 < MIN_SCORE
    assert MIN_SCORE > 0
    assert idx.match_many([(DX, "aspirin")])[0].code is None  # no DX entries at all


def test_rule_based_descriptions_match_their_planned_codes(index):
    """The measured accuracy: every rule-based description of a 100-record run, and the whole
    index in both surface forms (four misses, all of the abbreviated form)."""
    run = generate_cohort("t2dm-ckd", 100, index.encode, index=index)
    assert run.match["accuracy"] == 1.0 and run.match["events"] == 16_549
    right, total, misses = vocabulary_accuracy(index)
    assert (right, total) == (214, 218)
    assert ("ckd, stage 5", "N185", "I120") in misses
    assert all(t == surface_form(Concept(DX, c, ICD10_DX_TITLES[c]), 1) for t, c, _ in misses)


# --------------------------------------------------------------------------- verification


def test_a_generated_record_passes_every_check(index):
    for cohort in COHORTS:
        r = sample_recipe(cohort, 11, "short")
        assert _verify(index, r, _events(r)) == dict.fromkeys(CHECKS)


def _first(events, pred):
    return next(i for i, e in enumerate(events) if pred(e))


def test_a_description_matched_to_another_code_fails_traces_to_recipe(index):
    """A real matching error: 'chest pain' (the title without 'unspecified') is nearer to
    R0789 'Other chest pain' than to the planned R079 'Chest pain, unspecified'."""
    sid = next(
        s
        for s in range(1, 200)
        if any(c.code == "R079" for c in sample_recipe("cad-pci", s).segments[0].diagnoses)
    )
    r = sample_recipe("cad-pci", sid)
    events = _events(r)
    i = _first(events, lambda e: e.planned == "R079")
    events[i] = dataclasses.replace(events[i], text="chest pain")
    assert index.match_many([(DX, "chest pain")])[0].code == "R0789"
    result = _verify(index, r, events)
    assert result["traces_to_recipe"] == "segment 0 ICD10-CM 'chest pain'"
    assert result["complete"] == "segment 0: planned ('ICD10-CM', 'R079') not generated"


def _corrupt(recipe, events, check):
    ev = list(events)
    if check == "generated":
        return [TextEvent(-1, "", "segment 0: the reply holds no JSON array", 0, None)]
    if check == "matched":
        i = _first(ev, lambda e: e.system == RX)
        ev[i] = dataclasses.replace(ev[i], system="SNOMED")  # a system the index does not hold
    if check == "complete":
        ev = [e for e in ev if not (e.segment == 1 and e.planned == "N183")]
    if check == "exclusion":
        i = _first(ev, lambda e: e.system == DX)
        ev.insert(i, dataclasses.replace(ev[i], text="Unstable angina", planned="I200"))
    if check == "inclusion":
        ev = [e for e in ev if not (e.segment > 0 and e.planned in ("E1122", "N183"))]
    if check == "consistent_doses":
        i = _first(ev, lambda e: e.segment == 1 and e.planned == "metformin")
        ev[i] = dataclasses.replace(ev[i], value=1000.0)
    if check == "chronology":
        i = _first(ev, lambda e: e.system == LAB)
        ev[i] = dataclasses.replace(ev[i], day=recipe.segments[0].los_days + 1)
    if check == "lab_values":
        i = _first(ev, lambda e: e.system == LAB)
        ev[i] = dataclasses.replace(ev[i], value=-5.0)
    if check == "length_bin":
        ev = [e for e in ev if not (e.system == LAB and e.day > 0)]
    return ev


@pytest.mark.parametrize("check", [c for c in CHECKS if c != "traces_to_recipe"])
def test_each_check_fails_on_a_record_corrupted_for_it(index, check):
    r = sample_recipe("t2dm-ckd", 5, "short")
    result = _verify(index, r, _corrupt(r, _events(r), check))
    assert result[check] is not None, result
    if check in ("consistent_doses", "chronology", "lab_values", "length_bin"):
        assert [c for c, why in result.items() if why] == [check]


def test_a_run_whose_writer_drops_unspecified_rejects_every_mismatched_record(index, monkeypatch):
    """The writer's first version dropped "unspecified": its "chest pain" matched R0789, not the
    planned R079. The run counts each such event, rejects every record holding one and writes
    none of them."""
    from clinlib.data.neopatient import generate

    monkeypatch.setattr(generate, "DROP_WORDS", re.compile(r"\b(unspecified)\b,?\s*"))
    run = generate_cohort("cad-pci", 30, index.encode, index=index)
    assert run.mismatches and set(run.mismatches) == {("chest pain", "R079", "R0789")}
    assert run.mismatches_kept == 0 and run.rejections["traces_to_recipe"] > 0
    assert run.attempts > 30 and "R0789" not in set(run.events["code"])
    assert run.match["correct"] == run.match["events"] - len(run.mismatches)


def test_a_second_result_of_a_lab_on_one_day_fails_lab_values(index):
    r = sample_recipe("t2dm-ckd", 5, "short")
    ev = _events(r)
    i = _first(ev, lambda e: e.system == LAB)
    result = _verify(index, r, [*ev[: i + 1], ev[i], *ev[i + 1 :]])
    assert result["lab_values"] == f"segment 0 {ev[i].text!r}: a second result on day 0"


@pytest.mark.parametrize(
    "reply, message",
    [
        (None, "the reply holds no JSON array"),
        ("I cannot help with that.", "the reply holds no JSON array"),
        ("[{'system': 'LAB'}]", "reply is not JSON"),
        ('[{"system": "LOINC", "text": "x", "day": 0}]', "event 0 is not a valid event"),
        ('[{"system": "LAB", "text": "sodium", "day": 99, "value": 140}]', "is not a valid"),
        ('[{"system": "LAB", "text": "sodium", "day": 0, "value": "high"}]', "no numeric value"),
    ],
)
def test_a_backbone_reply_that_cannot_be_read_names_its_fault(reply, message):
    seg = sample_recipe("cad-pci", 1).segments[0]
    with pytest.raises(GenerationError, match=message):
        parse_segment(reply, seg)
    ok = '[{"system": "LAB", "text": "sodium", "day": 0, "value": 140}]'
    assert parse_segment(ok, seg) == [TextEvent(0, LAB, "sodium", 0, 140.0)]
