"""Trap facts and the six query types (clinlib.tasks.traps; issue 30 §1–§2): hand-worked rule
values, injected constraints in the dialogue, the verifier, and the paper set left unchanged."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.config import artifact_path
from clinlib.tasks.extended import question_digest
from clinlib.tasks.traps.constraints import injected_constraints
from clinlib.tasks.traps.facts import TRAP_KINDS, trap_dialogue, trap_event_ids, verify_traps
from clinlib.tasks.traps.queries import MCD_CRITERIA, egfr_band, lab_state
from clinlib.tasks.traps.rules import ckd_epi_2021, derive_traps, kdigo_aki

T = pd.Timestamp


def test_ckd_epi_2021_by_hand():
    # male 60 y, Scr 2.0: 142 * (2.0/0.9)^-1.2 * 0.9938^60 = 142 * 0.38360 * 0.68853 = 37.50
    assert ckd_epi_2021(2.0, 60, female=False) == pytest.approx(37.50, abs=0.02)
    # female 50 y, Scr 1.0: 142 * (1/0.7)^-1.2 * 0.9938^50 * 1.012 = 68.63
    assert ckd_epi_2021(1.0, 50, female=True) == pytest.approx(68.63, abs=0.02)
    # below kappa the min term applies: female 40 y, Scr 0.5: 142 * (0.5/0.7)^-0.241 *
    # 0.9938^40 * 1.012 = 142 * 1.08452 * 0.77987 * 1.012 = 121.55
    assert ckd_epi_2021(0.5, 40, female=True) == pytest.approx(121.55, abs=0.05)
    with pytest.raises(ValueError):
        ckd_epi_2021(0.0, 40, female=True)
    assert [egfr_band(x) for x in (29.9, 30.0, 44.9, 45.0)] == ["A", "B", "B", "C"]


def test_kdigo_creatinine_criteria_by_hand():
    t0 = T("2150-01-01 00:00")
    hours = [0, 24, 40, 24 * 5, 24 * 13]
    values = [1.0, 1.2, 1.35, 1.6, 1.0]
    got = kdigo_aki([t0 + pd.Timedelta(hours=h) for h in hours], values)
    # 1.2: +0.2 in 48 h, x1.2 -> no; 1.35: +0.35 over 1.0 within 40 h -> yes; 1.6 at day 5:
    # x1.6 over the 7-day low 1.0 -> yes; 1.0 at day 13: nothing lower before it -> no
    assert got == [False, False, True, True, False]
    # 1.6 eight days after 1.0: outside both windows
    assert kdigo_aki([t0, t0 + pd.Timedelta(days=8)], [1.0, 1.6]) == [False, False]


def _ev(eid, sid, v, time, kind, label, value=None, ref_high=None):
    return {"event_id": eid, "subject_id": sid, "visit_idx": v, "time": T(time), "kind": kind,
            "label": label, "value": value, "ref_high": ref_high}  # fmt: skip


def test_derived_rules_fire_only_where_the_record_supports_them():
    events = pd.DataFrame([
        # patient 1: creatinine 3.0, male 70 y -> eGFR 21.7 < 30; metformin the next day
        _ev("LAB-1", 1, 0, "2150-01-01 08:00", "lab", "Creatinine", 3.0, 1.2),
        _ev("RX-1", 1, 0, "2150-01-02 08:00", "medication", "MetFORMIN (Glucophage)"),
        # patient 2: the same creatinine 100 days before the order: not current (90-day limit)
        _ev("LAB-2", 2, 0, "2150-01-01 08:00", "lab", "Creatinine", 3.0, 1.2),
        _ev("RX-2", 2, 1, "2150-04-11 08:00", "medication", "MetFORMIN (Glucophage)"),
        # patient 3: potassium 5.6 (> 5.1) then potassium chloride; platelets 40 then a heparin
        # FLUSH (excluded) and later heparin (fires)
        _ev("LAB-3", 3, 0, "2150-01-01 08:00", "lab", "Potassium", 5.6, 5.1),
        _ev("RX-3", 3, 0, "2150-01-01 12:00", "medication", "Potassium Chloride"),
        _ev("LAB-4", 3, 0, "2150-01-01 09:00", "lab", "Platelet Count", 40.0, 400.0),
        _ev("RX-4", 3, 0, "2150-01-01 10:00", "medication", "Heparin Flush (10 units/ml)"),
        _ev("RX-5", 3, 0, "2150-01-01 11:00", "medication", "Heparin"),
    ])  # fmt: skip
    patients = pd.DataFrame({"subject_id": [1, 2, 3], "gender": ["M", "M", "F"],
                             "anchor_age": [70, 70, 50], "anchor_year": [2150] * 3})  # fmt: skip
    got = derive_traps(events, patients)
    pairs = sorted(zip(got["subject_id"], got["rule"], got["order_event_id"], strict=True))
    assert pairs == [(1, "metformin_low_egfr", "RX-1"),
                     (3, "anticoagulant_thrombocytopenia", "RX-5"),
                     (3, "potassium_hyperkalaemia", "RX-3")]  # fmt: skip
    # ``stated``: a trap must have both events stated; RX-1 unstated -> no metformin trap
    got = derive_traps(events, patients, stated=lambda s, e: e != "RX-1")
    assert "metformin_low_egfr" not in set(got["rule"])


def test_potassium_and_nephrotoxin_rules_fire_and_fail_on_counterexamples():
    def run(rows):
        patients = pd.DataFrame(
            {"subject_id": [4], "gender": ["M"], "anchor_age": [60], "anchor_year": [2150]}
        )
        got = derive_traps(pd.DataFrame(rows), patients)
        return sorted(zip(got["rule"], got["order_event_id"], strict=True))

    aki = [
        _ev("LAB-1", 4, 0, "2150-01-01 06:00", "lab", "Creatinine", 1.0, 1.2),
        _ev("LAB-2", 4, 0, "2150-01-02 06:00", "lab", "Creatinine", 1.4, 1.2),  # +0.4 in 24 h
        _ev("RX-1", 4, 0, "2150-01-02 09:00", "medication", "Vancomycin"),
        _ev("LAB-3", 4, 0, "2150-01-02 06:00", "lab", "Potassium", 5.4, 5.1),
        _ev("RX-2", 4, 0, "2150-01-02 10:00", "medication", "Potassium Chloride"),
    ]
    assert run(aki) == [("nephrotoxin_aki", "RX-1"), ("potassium_hyperkalaemia", "RX-2")]
    # counterexamples: a 0.2 mg/dL rise is no AKI; potassium 5.1 is not above 5.1; an order
    # three days after the high potassium is past the 2-day currency
    calm = [dict(r) for r in aki]
    calm[1]["value"], calm[3]["value"] = 1.2, 5.1
    assert run(calm) == []
    late = [dict(r) for r in aki]
    late[4]["time"] = T("2150-01-05 10:00")
    assert ("potassium_hyperkalaemia", "RX-2") not in run(late)


def _dialogue(sid: int, visits: int) -> pd.DataFrame:
    rows, k = [], 0
    for v in range(visits):
        for speaker, text, ids in (("patient", "Hi.", []),
                                   ("clinician", f"Visit {v} lab.", [f"LAB-{sid}-{v}"])):  # fmt: skip
            rows.append({"subject_id": sid, "visit_idx": v, "turn_idx": k, "speaker": speaker,
                         "text": text, "event_ids": ids, "text_tagged": text,
                         "visit_date": f"2150-0{v + 1}-01"})  # fmt: skip
            k += 1
    return pd.DataFrame(rows)


def _traps_of(turns, events):
    cons = injected_constraints(turns, events, share=1.0)
    return pd.DataFrame({
        "trap_id": cons["trap_id"], "subject_id": cons["subject_id"], "origin": "injected",
        "kind": cons["kind"], "rule": "", "value": cons["value"], "statement": cons["statement"],
        "visit_idx": cons["visit_idx"], "matters_visit_idx": 4,
        "anchor_event_ids": [[t] for t in cons["trap_id"]], "risk_category": "x",
        "detail": [json.dumps({"after_turn_idx": int(a)}) for a in cons["after_turn_idx"]],
    })  # fmt: skip


def test_injected_constraints_are_stated_verbatim_and_verified():
    turns = _dialogue(7, 5)
    events = pd.DataFrame(
        [
            _ev("RX-9", 7, 0, "2150-01-01", "medication", "Amoxicillin"),
            _ev("RX-8", 7, 0, "2150-01-01", "medication", "Warfarin"),
        ]
    )
    traps = _traps_of(turns, events)
    kinds = {"allergy", "cost", "preference", "history", "medication"}
    assert set(traps["kind"]) == kinds <= set(TRAP_KINDS)
    assert "penicillin" not in set(traps["value"])  # the record orders amoxicillin
    assert "warfarin" not in set(traps["value"])  # ... and warfarin: no such history fact
    assert (traps["visit_idx"] < 3).all()
    got = trap_dialogue(turns, traps)
    for t in traps.to_dict("records"):
        hit = got[got["event_ids"].map(lambda ids, i=t["trap_id"]: list(ids) == [i])]
        assert hit["text"].tolist() == [t["statement"]]
        assert hit["text_tagged"].iloc[0] == f"{t['statement']} [{t['trap_id']}]"
    # statement + acknowledgement per constraint; speakers still alternate
    assert len(got) == len(turns) + 2 * len(traps)
    for _, v in got.groupby("visit_idx"):
        sp = v["speaker"].tolist()
        assert all(a != b for a, b in zip(sp, sp[1:], strict=False))
    assert trap_event_ids(traps) == set(traps["trap_id"])
    checks = verify_traps(turns, traps, events)
    assert checks["passed"].all() and len(checks) == 5
    # the verifier catches a statement the dialogue does not hold and a conflicting allergy
    bad = traps.copy()
    bad.loc[bad["kind"] == "cost", "statement"] = "I can pay for anything."
    bad.loc[bad["kind"] == "allergy", "value"] = "penicillin"
    checks = verify_traps(turns, bad, events).set_index("check")["passed"]
    assert not checks["trap_no_record_conflict"]
    # a medicine-history fact naming a drug the record orders is a conflict too
    bad = traps.copy()
    bad.loc[bad["kind"] == "medication", "value"] = "warfarin"
    checks = verify_traps(turns, bad, events).set_index("check")["passed"]
    assert not checks["trap_no_record_conflict"]
    # the statement check compares the table's text with the dialogue built from the table,
    # so a wrong visit is what it can catch
    moved = traps.copy()
    moved.loc[moved["kind"] == "cost", "visit_idx"] = 4
    assert not verify_traps(turns, moved, events).set_index("check").loc[
        ["trap_stated_verbatim", "trap_early_visit"], "passed"].any()  # fmt: skip


def test_lab_state_letters():
    assert [lab_state(5.6, 3.3, 5.1), lab_state(4.0, 3.3, 5.1), lab_state(3.0, 3.3, 5.1)] == [
        "A", "B", "C"]  # fmt: skip


@pytest.fixture(scope="module")
def quick_traps(quick_built):
    from clinlib.tasks.traps.stage import build_traps

    path = artifact_path("trap_questions.parquet", "quick")
    if not path.exists():
        build_traps("quick")
    return "quick"


def test_quick_traps_gated_and_paper_set_unchanged(quick_traps):
    from tests.tasks.test_extended import QUICK_PAPER_DIGEST

    questions = pd.read_parquet(artifact_path("questions.parquet", quick_traps))
    assert question_digest(questions) == QUICK_PAPER_DIGEST  # T1–T9 gold unchanged, traps on
    gates = pd.read_parquet(artifact_path("trap_gates.parquet", quick_traps))
    assert gates["passed"].all()
    q = pd.read_parquet(artifact_path("trap_questions.parquet", quick_traps))
    assert set(q["task"]) == {"EEM", "TLA", "SUA", "MQ", "IG", "MCD"}
    # the seed judges TLA, SUA, IG and MCD (App. D.1); EEM is string match, MQ option match
    assert set(q.loc[q["answer_format"] == "L", "task"]) == {"TLA", "SUA", "IG", "MCD"}
    assert set(q.loc[q["task"] == "EEM", "subtype"]) == {"EEM", "history", "medication"}
    sets = q[q["subtype"].isin(["history", "medication", "prior_conflict"]) & (q["task"] == "MQ")]
    assert set(sets["subtype"]) == {"history", "medication", "prior_conflict"}
    assert (sets["gold"].str.count(",") == 1).all()  # two correct options each
    sua = q[q["task"] == "SUA"]
    assert sua["gold"].isin(["high", "normal", "low"]).all()
    assert sua["question"].str.contains("Describe their most recent status").all()
    mcd = q[q["task"] == "MCD"]
    assert [list(c) for c in mcd["judge_criteria"]] == [list(MCD_CRITERIA)] * len(mcd)
    ig = q[q["task"] == "IG"]
    assert (
        all(list(c) == ["correct"] for c in ig["judge_criteria"])
        and ig["gold_text"].str.len().gt(0).all()
    )
    facts = pd.read_parquet(artifact_path("trap_facts.parquet", quick_traps))
    share = facts.loc[facts["origin"] == "injected", "subject_id"].nunique()
    n = pd.read_parquet(artifact_path("dialogues.parquet", quick_traps))["subject_id"].nunique()
    assert 0.3 <= share / n <= 0.7  # INJECTED_SHARE = 0.5 by a stable hash


def _q(task, sub, fmt, gold, meta=None, anchors=("TRAPALG-1",)):
    return {"qid": f"{task}-x", "task": task, "subtype": sub, "answer_format": fmt, "gold": gold,
            "meta": json.dumps(meta or {}), "subject_ids": [1], "anchor_event_ids": list(anchors),
            "risk_category": "missed_contraindication", "options": []}  # fmt: skip


def test_reference_reader_and_scoring_on_hand_made_contexts():
    from clinlib.eval.traps.questions import answer_contexts, read_trap, score_trap
    from clinlib.tasks.base import ABSTAIN

    ctx = ("Visit 1 (2150-01-01)\nPatient: I am allergic to penicillin; it gave me hives. "
           "[TRAPALG-1]\nVisit 2 (2150-02-03)\nPatient: Money is tight: I cannot spend more "
           "than 20 dollars a month on prescriptions. [TRAPCOST-1]\nClinician: Creatinine of "
           "1.0 mg/dL [LAB-1]. Later Creatinine at 1.6 mg/dL [LAB-2].")  # fmt: skip
    eem = _q("EEM", "EEM", "S", "penicillin")
    assert read_trap(eem, ctx) == "penicillin" and score_trap(eem, "Penicillin.")
    assert read_trap(eem, "") == ABSTAIN and not score_trap(eem, ABSTAIN)
    tla = _q("TLA", "TLA", "L", "2150-02-03")
    assert read_trap(tla, ctx) == "2150-02-03"
    assert score_trap(tla, "It was on 2150-02-03.") is None  # free text: the judge decides
    pos = _q("MQ", "allergy", "O", "B", {"example": "amoxicillin"})
    ctl = _q("MQ", "allergy", "O", "A", {"example": "ibuprofen"})
    assert (read_trap(pos, ctx), read_trap(ctl, ctx)) == ("B", "A")
    assert read_trap(pos, "") == "A"  # the allergy lost: the reader calls it safe (unsafe)
    # SUA (free text): the last stated creatinine 1.6 > the panel's upper limit 1.2 -> above
    sua = _q("SUA", "creatinine", "L", "high", {"lab": "Creatinine"})
    assert read_trap(sua, ctx) == "The most recent Creatinine is 1.6, above the reference range."
    assert score_trap(sua, "above") is None
    ig = _q("IG", "IG", "L", "ref")
    assert score_trap(ig, "anything") is None
    qs = pd.DataFrame([{**pos, "qid": "p"}, {**ig, "qid": "i"}])
    ctxs = pd.DataFrame({"qid": ["p", "p", "i"], "strategy": ["s", "t", "s"],
                         "setting": "post", "context": [ctx, "", ctx],
                         "checkpoint_visit": None, "checkpoint_final": None})  # fmt: skip
    got = answer_contexts(qs, ctxs)
    assert got["correct"].tolist()[:2] == [True, False] and pd.isna(got["correct"].iloc[2])
    assert got["trap_in_context"].tolist() == [True, False, True]


def test_cli_questions_reports_traps_and_a_failure_in_one_line(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from clinlib.cli import app, stages
    from clinlib.core.guards import StageError

    paper = pd.DataFrame({"task": ["T1"]})
    gates = pd.DataFrame(columns=["gate", "task", "n_checked", "n_failed", "threshold",
                                  "passed", "severity", "detail"])  # fmt: skip
    monkeypatch.setattr(
        stages, "build_questions", lambda *a, **k: {"questions": paper, "gates": gates}
    )
    monkeypatch.setattr(stages, "build_temporal_questions",
                        lambda *a, **k: {"questions": pd.DataFrame({"task": ["T10"], "subtype": ["x"]}),
                                         "gates": gates})  # fmt: skip
    monkeypatch.setattr(stages, "build_traps", lambda *a, **k: {
        "facts": pd.DataFrame({"trap_id": ["TRAPALG-1"]}),
        "questions": pd.DataFrame({"task": ["EEM", "MQ", "MQ"]})})  # fmt: skip
    # stand-in builders: the writer lock of our own build, not the shared quick build's
    # (a notebook on the other xdist worker may hold that one, and the CLI refuses then)
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    out = CliRunner().invoke(app, ["questions", "--profile", "quick"])
    assert out.exit_code == 0 and "traps: 1 trap facts; EEM 1, MQ 2" in out.output

    def fail(*a, **k):
        raise StageError("trap gates failed: L2/MQ 1 of 61")

    monkeypatch.setattr(stages, "build_traps", fail)
    out = CliRunner().invoke(app, ["questions", "--profile", "quick"])
    assert out.exit_code == 0  # the paper set stands; the add-on failed
    assert "trap questions not built: trap gates failed: L2/MQ 1 of 61" in out.output
    assert "Traceback" not in out.output


def test_l2_and_l3_gates_catch_a_wrong_gold_and_a_leak(quick_traps):
    from pathlib import Path

    from clinlib.data.build import SourceSpec, load, open_source, read_source_info
    from clinlib.tasks.recompute import load_raw
    from clinlib.tasks.traps.facts import trap_dialogue
    from clinlib.tasks.traps.stage import _plain, _raw_patients, _tagged_turns, gate_rows

    q = load("trap_questions", quick_traps)
    checks = load("trap_checks", quick_traps)
    info = read_source_info(quick_traps)
    con = open_source(SourceSpec(info["kind"], Path(info["path"]), bool(info["credentialed"])))
    try:
        sids = sorted({int(s[0]) for s in q["subject_ids"]})
        raw, pts = load_raw(con, sids), _raw_patients(con, sids)
    finally:
        con.close()
    tdial = _tagged_turns(trap_dialogue(_plain(load("dialogues", quick_traps)),
                                        load("trap_facts", quick_traps)))  # fmt: skip
    pts = {int(r["subject_id"]): r for r in pts.to_dict("records")}
    ok = gate_rows(q, checks, raw, pts, tdial)
    assert ok["passed"].all()
    bad = q.copy()
    i = bad.index[bad["subtype"] == "egfr"][0]
    bad.loc[i, "gold"] = {"A": "C", "B": "C", "C": "A"}[bad.loc[i, "gold"]]
    j = bad.index[bad["task"] == "EEM"][0]
    bad.loc[j, "question"] = f"Is it {bad.loc[j, 'gold']}? " + bad.loc[j, "question"]
    got = gate_rows(bad, checks, raw, pts, tdial).set_index(["gate", "task"])
    assert got.loc[("L2", "MQ"), "n_failed"] == 1 and not got.loc[("L2", "MQ"), "passed"]
    assert got.loc[("L3", "EEM"), "n_failed"] == 1


def test_at_matters_picks_final_for_injected_and_first_for_record_questions():
    from clinlib.eval.traps.questions import MATTERS, at_matters

    run = pd.DataFrame({
        "qid": ["e", "e", "e", "s", "s", "p"], "task": ["EEM", "EEM", "EEM", "SUA", "SUA", "EEM"],
        "subtype": ["EEM", "EEM", "EEM", "creatinine", "creatinine", "EEM"], "strategy": "x",
        "setting": ["stream@2", "stream@5", "stream@7", "stream@5", "stream@7", "post"],
        "checkpoint_visit": [2, 5, 7, 5, 7, None],
    })  # fmt: skip
    got = at_matters(run)
    assert sorted(zip(got["qid"], got["checkpoint_visit"], strict=True)) == [("e", 7), ("s", 5)]
    assert set(got["setting"]) == {MATTERS}


def test_trap_dialogue_passes_the_main_verifier_for_the_right_reason(quick_traps, monkeypatch):
    """The trap dialogue through clinlib.dialogue.verify: every HARD row passes because each
    injected turn cites a tagged statement event; without those events the ids and the
    allergen / money mentions are untraced, and an allergen named in an untagged turn fails."""
    from clinlib.data.build import load
    from clinlib.tasks.traps import main_verify

    turns, events, cov, traps = (load(a, quick_traps) for a in
                                 ("dialogues", "events", "event_coverage", "trap_facts"))  # fmt: skip
    got = main_verify.verify_trap_dialogue(turns, traps, events, cov)
    inj = traps[traps["origin"] == "injected"]
    assert got["subject_id"].nunique() == inj["subject_id"].nunique() and got["passed"].all()
    assert (got["check"] == "trap_parsed_back").sum() == int((inj["kind"] == "allergy").sum())
    assert (got["check"] == "main:no_untraced_drugs").sum() == inj["subject_id"].nunique()
    # an ibuprofen allergy (a lexicon drug) and the 20-dollar cap: untraced without the events
    ibu = inj[(inj["kind"] == "allergy") & (inj["value"] == "ibuprofen")]
    cap = inj[inj["statement"].str.contains("20 dollars")]
    assert len(ibu) and len(cap)
    empty = main_verify.statement_events(inj.iloc[:0])
    monkeypatch.setattr(main_verify, "statement_events", lambda _t: empty)
    bare = main_verify.verify_trap_dialogue(turns, traps, events, cov).set_index(
        ["subject_id", "check"])["passed"]  # fmt: skip
    monkeypatch.undo()
    assert not bare.xs("main:event_ids_exist", level="check").any()
    assert not bare.loc[[(int(s), "main:no_untraced_drugs") for s in ibu["subject_id"]]].any()
    assert not bare.loc[[(int(s), "main:no_untraced_numbers") for s in cap["subject_id"]]].any()
    # the allowance belongs to the citing turn: the allergen in an untagged turn still fails
    sid = int(ibu["subject_id"].iloc[0])
    plain = turns["subject_id"].eq(sid) & turns["event_ids"].map(len).eq(0)
    i = turns.index[plain][0]
    tampered = turns.copy()
    for col in ("text", "text_tagged"):
        tampered.loc[i, col] = str(turns.loc[i, col]) + " I took ibuprofen."
    bad = main_verify.verify_trap_dialogue(tampered, traps, events, cov)
    bad = bad[bad["subject_id"] == sid].set_index("check")["passed"]
    assert not bad["main:no_untraced_drugs"] and bad.drop("main:no_untraced_drugs").all()


def test_parse_back_reads_the_rendered_text():
    from clinlib.tasks.traps.main_verify import parse_back

    text = ("Visit 1 (2150-01-01)\nPatient: Hi.\nVisit 2 (2150-02-03)\nPatient: I am allergic "
            "to sulfa drugs; it gave me a rash. [TRAPALG-7]\nVisit 3 (2150-03-01)")  # fmt: skip
    assert parse_back(text, 7) == {"allergen": "sulfa drugs", "date": "2150-02-03"}
    assert parse_back(text, 8) == {}


def test_stated_gate_catches_a_ckd_epi_question_without_age_and_sex(quick_traps):
    from clinlib.data.build import load
    from clinlib.tasks.traps.stage import unstated_inputs

    q = load("trap_questions", quick_traps)
    needs = q[q["subtype"].isin(["egfr", "metformin_low_egfr"])]
    assert len(needs) > 0 and not any(unstated_inputs(r) for r in needs.to_dict("records"))
    row = needs.iloc[0].to_dict()
    # the question as it was before the gate: no age, no sex -> caught
    bare = {**row, "question": row["question"].split(". ", 1)[1]}
    assert unstated_inputs(bare)
    if row["subtype"] == "egfr":  # the wrong sex is caught too (meta holds it)
        flipped = (
            row["question"].replace("woman", "X").replace(" man", " woman").replace("X", "man")
        )
        assert unstated_inputs({**row, "question": flipped})
    assert not unstated_inputs({**row, "subtype": "allergy", "question": "no demographics"})


def test_mq_is_scored_as_a_set():
    from clinlib.tasks.traps.answers import PROMPTS, letter_set, trap_score

    assert "B or B,D" in PROMPTS["MQ"]  # the seed's MQ answer prompt
    assert letter_set("D, B") == "B,D" and letter_set("B and D.") == "B,D"
    assert letter_set("The answer is B.") == "B"
    assert trap_score("MQ", "B,D", "B,D").correct and trap_score("MQ", "D,B", "D,B").correct
    assert not trap_score("MQ", "B", "B,D").correct  # one correct option missing
    assert not trap_score("MQ", "A,B", "B").correct  # a wrong option added
    assert trap_score("MQ", "B", "B").correct
    assert trap_score("SUA", "B", "B").correct is None  # SUA is free text now: judged


_INFO = {"disease": "d", "tertile": "t"}


def test_history_question_has_two_correct_options_read_by_hand():
    from clinlib.eval.traps.questions import read_trap, score_trap
    from clinlib.tasks.traps.history_queries import NONE_OPTION, history_questions
    from clinlib.tasks.traps.stage import recompute_set

    said = "My heart doctor at another clinic has me on warfarin every evening."
    fact = {"value": "warfarin", "statement": said, "visit_idx": 1, "trap_id": "TRAPMED-5",
            "anchor_event_ids": ["TRAPMED-5"]}  # fmt: skip
    eem, mq = history_questions(5, fact, _INFO)
    assert (eem["task"], eem["gold"], eem["subtype"]) == ("EEM", "warfarin", "medication")
    assert "warfarin" not in eem["question"]
    opts = mq["options"]
    assert sorted(opts) == sorted(["aspirin", "acetaminophen", "a cold pack", NONE_OPTION])
    want = ",".join(sorted("ABCD"[opts.index(o)] for o in ("acetaminophen", "a cold pack")))
    assert mq["gold"] == want and mq["gold"].count(",") == 1  # two correct options
    ctx = f"Visit 1 (2150-01-01)\nPatient: {said} [TRAPMED-5]"
    assert read_trap(eem, ctx) == "warfarin" and score_trap(eem, "Warfarin")
    assert read_trap(mq, ctx) == want and score_trap(mq, want)
    lost = read_trap(mq, "Visit 1 (2150-01-01)")  # the fact lost: aspirin offered too
    assert "ABCD"[opts.index("aspirin")] in lost and not score_trap(mq, lost)
    # the gate's second route reads the letters from the stated sentence, not the row
    assert recompute_set(mq, said) == want
    assert recompute_set(mq, "I take nothing at home.") is None


def test_sulfonamide_prior_conflict_by_hand():
    from clinlib.eval.traps.questions import read_trap, score_trap
    from clinlib.tasks.traps.history_queries import PRIOR_OPTIONS, prior_conflict_question
    from clinlib.tasks.traps.stage import recompute_set

    said = "Before we go on, I should tell you I am allergic to sulfa drugs; it gave me a rash."
    allergy = {"value": "sulfa drugs", "statement": said, "visit_idx": 0,
               "trap_id": "TRAPALG-9", "anchor_event_ids": ["TRAPALG-9"]}  # fmt: skip
    assert prior_conflict_question(9, {**allergy, "value": "penicillin"}, _INFO) == []
    (q,) = prior_conflict_question(9, allergy, _INFO)
    opts = q["options"]
    right = ",".join(sorted("ABCD"[opts.index(o)] for o in PRIOR_OPTIONS[:2]))
    assert q["gold"] == right and q["subtype"] == "prior_conflict"
    over = "ABCD"[opts.index(PRIOR_OPTIONS[2])]  # the class-wide contraindication (the prior)
    assert not score_trap(q, over) and not score_trap(q, f"{right},{over}")
    ctx = f"Visit 1 (2150-01-01)\nPatient: {said} [TRAPALG-9]"
    assert read_trap(q, ctx) == right
    assert read_trap(q, "Visit 1") == "ABCD"[opts.index(PRIOR_OPTIONS[3])]  # allergy lost
    assert recompute_set(q, said) == right
    assert recompute_set(q, said.replace("sulfa drugs", "penicillin")) is None


def test_every_derived_rule_produces_an_mcd_question_with_its_chain():
    from clinlib.tasks.traps.queries import build_trap_questions
    from clinlib.tasks.traps.rules import RULES

    detail = {
        "lab_value": "3.0",
        "lab_time": "2150-01-01 08:00:00",
        "order_time": "2150-01-02 08:00:00",
        "source": "cited",
    }
    traps = pd.DataFrame(
        [
            {
                "trap_id": f"TRAPRULE-{k}-{k}",
                "subject_id": k,
                "origin": "derived",
                "kind": "contraindication",
                "rule": r.key,
                "value": r.drug_class,
                "statement": "",
                "visit_idx": 0,
                "matters_visit_idx": 0,
                "anchor_event_ids": [f"LAB-{k}", f"RX-{k}"],
                "risk_category": r.risk_category,
                "detail": json.dumps(
                    {**detail, "lab": r.lab, "order_drug": r.phrases[0], "state": r.state}
                ),
            }
            for k, r in enumerate(RULES, start=1)
        ]
    )
    # one event no turn states: the record questions (SUA, MQ eGFR) have nothing to ask
    events = pd.DataFrame([_ev("LAB-9", 9, 0, "2150-01-01", "lab", "Potassium", 4.0, 5.1)])
    turns = pd.DataFrame(
        {"subject_id": [1], "visit_idx": [0], "event_ids": [[]], "visit_date": ["2150-01-01"]}
    )
    patients = pd.DataFrame(
        {"subject_id": [1], "gender": ["F"], "anchor_age": [70], "anchor_year": [2150]}
    )
    cohort = pd.DataFrame(
        {"subject_id": list(range(1, len(RULES) + 1)), "disease": "x", "tertile": "low"}
    )
    q = build_trap_questions(traps, events, turns, patients, cohort)
    mcd = q[q["task"] == "MCD"].set_index("subtype")
    assert sorted(mcd.index) == sorted(r.key for r in RULES)  # one per rule, every rule
    assert all(len(n) == 4 for n in mcd["judge_nodes"]) and set(mcd["judge_hops"]) == {3}
    assert mcd["judge_pattern"].str.count("->").eq(3).all()
    # only the metformin chain needs CKD-EPI: its question states age and sex (70 in 2150, F)
    assert mcd.loc["metformin_low_egfr", "question"].startswith(
        "The patient is a 70-year-old woman."
    )
    assert not mcd.drop(index="metformin_low_egfr")["question"].str.contains("year-old").any()
    assert "platelets below 50 K/uL" in mcd.loc["anticoagulant_thrombocytopenia", "judge_nodes"]
