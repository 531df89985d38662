"""Noise augmentation (clinlib.dialogue.noise; MedMemoryBench §3 "Noise Augmentation") and the
verifier's noise check. The fixture patient 1001 has three visits (2150-01-10..13,
2150-03-02..05, 2150-06-20..22) and hand-made donors 9001-9004 outside the cohort."""

from __future__ import annotations

import re
from datetime import date

import numpy as np
import pandas as pd
import pytest

from clinlib.dialogue import noise as N
from clinlib.dialogue import synth as D
from clinlib.dialogue import verify as V
from clinlib.dialogue.checks import NOISE_CHECKS, check_noise_facts
from clinlib.dialogue.matching import format_tag, strip_tags
from clinlib.dialogue.noise_topics import GH_TOPICS, RELATIONS
from clinlib.dialogue.render import render_dialogue
from tests.dialogue_fixtures import make_events


def _donor_rows(sid: int, k: int) -> list[dict]:
    lab = dict(subject_id=sid, kind="lab", route=None)
    return [
        {**lab, "label": "Potassium", "value_text": f"5.{k}", "unit": "mEq/L", "flag": "abnormal"},
        {**lab, "label": "Sodium", "value_text": f"13{k}", "unit": "mEq/L", "flag": None},
        {**lab, "label": "Glucose", "value_text": f"9{k}", "unit": "mg/dL", "flag": None},
        dict(subject_id=sid, kind="medication", label="Lisinopril", value_text=f"{k}0",
             unit="mg", route="PO", flag=None),
        dict(subject_id=sid, kind="diagnosis", label="Essential (primary) hypertension",
             value_text=None, unit=None, route=None, flag=None),
    ]  # fmt: skip


DONORS = pd.DataFrame([r for k, sid in enumerate((9001, 9002, 9003, 9004), 1)
                       for r in _donor_rows(sid, k)])  # fmt: skip


@pytest.fixture(scope="module")
def case():
    ev = make_events()
    ev = ev[ev["subject_id"] == 1001].reset_index(drop=True)
    res = D.synthesize_dialogue(ev, seed=0)
    return ev, res.turns, res.coverage


def noisy(turns, ratio=1.0, seed=42):
    return N.add_noise(turns, ratio, seed, donors=DONORS)


def sessions(out):
    return {v: g for v, g in out[out["is_noise"]].groupby("visit_idx")}


def test_ratio_zero_is_the_input_plus_two_columns(case):
    _, turns, _ = case
    out = noisy(turns, 0)
    assert list(out.columns) == [*turns.columns, "is_noise", "source_visit_idx"]
    pd.testing.assert_frame_equal(out[list(turns.columns)], turns)
    assert not out["is_noise"].any()
    assert (out["source_visit_idx"] == out["visit_idx"]).all()
    assert render_dialogue(out) == render_dialogue(turns)  # byte-identical context


@pytest.mark.parametrize("ratio, n_noise", [(0.5, 2), (1.0, 3), (2.0, 6), (0.1, 0)])
def test_number_of_sessions_and_renumbering(case, ratio, n_noise):
    _, turns, _ = case
    out = noisy(turns, ratio)
    assert len(sessions(out)) == n_noise  # floor(ratio x 3 visits + 0.5)
    assert sorted(out["visit_idx"].unique()) == list(range(3 + n_noise))
    assert out["turn_idx"].tolist() == list(range(len(out)))
    real = out[~out["is_noise"]]
    assert real["text"].tolist() == turns["text"].tolist()
    assert real["source_visit_idx"].tolist() == turns["visit_idx"].tolist()
    assert (out.loc[out["is_noise"], "source_visit_idx"] == -1).all()
    assert out.iloc[0]["source_visit_idx"] == 0  # never before the first visit


def test_noise_dates_lie_between_their_neighbours(case):
    _, turns, _ = case
    out = noisy(turns, 2.0)
    ends = {0: date(2150, 1, 13), 1: date(2150, 3, 5), 2: date(2150, 6, 22)}
    starts = {0: date(2150, 1, 10), 1: date(2150, 3, 2), 2: date(2150, 6, 20)}
    prev = None
    for _, g in out.groupby("visit_idx", sort=True):
        d = date.fromisoformat(g["visit_date"].iloc[0])
        src = int(g["source_visit_idx"].iloc[0])
        if src >= 0:
            prev = src
            continue
        assert d > ends[prev]
        if prev + 1 in starts:
            assert d < starts[prev + 1] - pd.Timedelta(days=1)


def test_pure_and_deterministic(case):
    _, turns, _ = case
    before = turns.copy()
    a, b = noisy(turns, 1.0, 7), noisy(turns, 1.0, 7)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(turns, before)
    assert not a.equals(noisy(turns, 1.0, 8))


def test_general_health_sessions_have_no_patient_facts(case):
    _, turns, _ = case
    out = noisy(turns, 2.0, seed=3)
    slugs = {t[0] for t in GH_TOPICS}
    n_gh = 0
    for g in sessions(out).values():
        tags = {i for ids in g["event_ids"] for i in ids}
        if not any("-GH-" in t for t in tags):
            continue
        n_gh += 1
        assert len(g) in (4, 6, 8)
        assert g["speaker"].tolist()[:2] == ["patient", "clinician"]
        assert not any(re.search(r"\d", t) for t in g["text"])  # no value, no date
        (tag,) = tags
        kind, slug, n = re.fullmatch(r"NOISE-(GH)-(\w+)-(\d+)", tag).groups()
        assert slug in slugs
    assert n_gh >= 1


def test_proxy_sessions_name_the_relative_and_state_the_facts(case):
    _, turns, _ = case
    out = noisy(turns, 2.0, seed=3)
    facts = N.noise_facts(turns, 2.0, 3, donors=DONORS)
    assert len(facts) >= 1
    rels = {r.relation: r.donor_id for r in N.relatives_of(1001, 3, N.donor_profiles(DONORS))}
    assert 2 <= len(rels) <= 4
    for f in facts.itertuples():
        assert rels[f.relation] == f.donor_id  # stable identity: one donor per relation
        text = " ".join(out.loc[out["visit_idx"] == f.visit_idx, "text"])
        stated = [s for s in re.split(r"(?<=\.) ", text) if f.date in s and f.label in s]
        assert len(stated) == 1
        assert f"your {f.relation}" in stated[0].lower()
        assert f"{f.value_text} {f.unit}" in stated[0]
        assert f.tag == f"NOISE-PROXY-{f.relation}-{int(f.tag.rsplit('-', 1)[1])}"


def test_relatives_do_not_depend_on_the_ratio(case):
    _, turns, _ = case
    profiles = N.donor_profiles(DONORS)
    rels = N.relatives_of(1001, 11, profiles)
    assert len({r.relation for r in rels}) == len(rels)
    assert {r.relation for r in rels} <= set(RELATIONS)
    for s in range(30):  # one spouse at most
        assert (
            len({r.relation for r in N.relatives_of(1001, s, profiles)} & {"husband", "wife"}) <= 1
        )
    for ratio in (1.0, 2.0):
        f = N.noise_facts(turns, ratio, 11, donors=DONORS)
        assert set(zip(f["relation"], f["donor_id"], strict=True)) <= {
            (r.relation, r.donor_id) for r in rels
        }


def test_a_relative_fact_is_moved_off_a_day_the_patient_has_it():
    day = date(2150, 2, 1)
    said = {"2150-02-01": ["On 2150-02-01, your Potassium was 4.1 mEq/L."]}
    free = {day, date(2150, 1, 31)}
    for s in range(20):
        got = N._fact_day(day, free, ["Potassium"], said, np.random.default_rng(s))
        assert got in (None, date(2150, 1, 31))
    assert N._fact_day(day, free, ["Sodium"], said, np.random.default_rng(0)) in free


def test_verifier_passes_noisy_dialogue_and_adds_the_noise_row(case):
    ev, turns, cov = case
    checks = V.verify_dialogue(noisy(turns, 2.0), ev, cov).set_index("check")
    assert checks["passed"].all(), checks.loc[~checks["passed"], "detail"].to_dict()
    (name,) = NOISE_CHECKS
    assert checks.loc[name, "severity"] == "hard"
    assert checks.loc[name, "detail"] == "6 noise sessions checked"
    clean = V.verify_dialogue(turns, ev, cov).set_index("check")
    assert name not in clean.index
    # the stored-dialogue checks see exactly the real turns: same rows, same details
    pd.testing.assert_frame_equal(checks.drop(index=name), clean)


@pytest.mark.parametrize(
    "sentence, eid",
    [("On 2150-03-02, your father's Potassium was 5.9 mEq/L.", "LAB-43"),
     ("Your father's doctor started Aspirin 81 mg PO on 2150-03-02.", "RX-51")],
)  # fmt: skip
def test_verifier_fails_a_noise_turn_stating_a_patient_fact(case, sentence, eid):
    ev, turns, cov = case
    out = noisy(turns, 1.0)
    i = out.index[out["is_noise"] & (out["speaker"] == "clinician")][0]
    tag = "NOISE-PROXY-father-1"
    out.at[i, "text"] = sentence
    out.at[i, "text_tagged"] = f"{sentence} {format_tag([tag])}"
    out.at[i, "event_ids"] = [tag]
    checks = V.verify_dialogue(out, ev, cov).set_index("check")
    assert sorted(checks.index[~checks["passed"]]) == ["noise_states_no_patient_fact"]
    assert eid in checks.loc["noise_states_no_patient_fact", "detail"]
    assert check_noise_facts([out.loc[i].to_dict()], ev.to_dict("records"))
    # the same sentence in a real turn is not this check's business
    assert not check_noise_facts([{**out.loc[i].to_dict(), "is_noise": False,
                                   "event_ids": []}], ev.to_dict("records"))  # fmt: skip


def test_context_and_strategy_view_hide_noise_tags(case):
    _, turns, _ = case
    out = noisy(turns, 1.0)
    assert any("NOISE-" in t for t in out["text_tagged"])
    text = render_dialogue(out)
    assert "NOISE-" not in text and "[LAB-" in text
    view = N.hide_noise_tags(out)
    assert not any("NOISE-" in t for t in view["text_tagged"])
    assert not any(ids for ids in view.loc[view["is_noise"], "event_ids"])
    real = ~out["is_noise"]
    pd.testing.assert_frame_equal(view[real], out[real])
    assert (view["text"] == out["text"]).all()
    assert all(strip_tags(t) == x for t, x in zip(out["text_tagged"], out["text"], strict=True))


def test_extra_columns_are_kept(case):
    _, turns, _ = case
    t = turns.assign(source_turn_idx=turns["turn_idx"], injected=False)
    out = noisy(t, 1.0)
    assert (out.loc[out["is_noise"], "source_turn_idx"] == -1).all()
    assert not out["injected"].any()


@pytest.mark.parametrize(
    "kwargs, msg",
    [({"ratio": -1.0}, "ratio"), ({"ratio": float("nan")}, "ratio"), ({"ratio": True}, "ratio"),
     ({"seed": -1}, "seed"), ({"donors": DONORS.assign(subject_id=1001)}, "outside the cohort")],
)  # fmt: skip
def test_bad_arguments(case, kwargs, msg):
    _, turns, _ = case
    with pytest.raises(N.NoiseError, match=msg):
        N.add_noise(turns, **{"donors": DONORS, **kwargs})


def test_bad_turns(case):
    _, turns, _ = case
    with pytest.raises(N.NoiseError, match="missing column"):
        N.add_noise(turns.drop(columns="visit_date"), donors=DONORS)
    with pytest.raises(N.NoiseError, match="already"):
        N.add_noise(noisy(turns), donors=DONORS)


def test_quick_profile_noise_verifies(quick_built):
    from clinlib.data.build import load

    turns, events, cov = load("dialogues"), load("events"), load("event_coverage")
    sids = sorted(turns["subject_id"].unique())[:4]
    t = turns[turns["subject_id"].isin(sids)]
    out = N.add_noise(t, 1.0, 42)  # the default synthetic donor pool
    real = t.groupby("subject_id")["visit_idx"].nunique()
    got = out[out["is_noise"]].groupby("subject_id")["visit_idx"].nunique()
    assert got.reindex(real.index, fill_value=0).tolist() == real.tolist()
    ids = {i for ids in out["event_ids"] for i in ids if i.startswith("NOISE-PROXY")}
    assert ids  # some proxy sessions
    checks = V.verify_corpus(out, events[events["subject_id"].isin(sids)],
                             cov[cov["subject_id"].isin(sids)])  # fmt: skip
    assert checks["passed"].all(), checks.loc[~checks["passed"]].to_dict("records")
    assert (checks["check"] == "noise_states_no_patient_fact").sum() == len(sids)
