"""The dialogue length budget (clinlib.dialogue.budget; paper Appendix C.1, Fig. 13) and how the
synthesis and the verifier apply it."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.dialogue import budget as B
from clinlib.dialogue import checks as C
from clinlib.dialogue import fields as F
from clinlib.dialogue import matching as M
from clinlib.dialogue import render as R
from clinlib.dialogue import synth as D
from clinlib.dialogue import templates as T
from clinlib.dialogue import verify as V
from tests.dialogue_fixtures import adm, dis, dx, frame, lab, med

SID, HADM = 7, 70


def test_budget_by_hand():
    # 13,700 * (n / 10) ** (1/3): 9.3 ** (1/3) = 2.10294 (2.103 ** 3 = 9.3008), 0.1 ** (1/3)
    # = 0.46416, 2 ** (1/3) = 1.25992.
    assert B.budget_chars(10) == 13_700
    assert B.budget_chars(93) == 28_810 <= 30_700  # under the paper's maximum
    assert B.budget_chars(1) == 6_359
    assert B.budget_chars(20) == 17_261
    assert B.budget_chars(0) == 0


def test_fair_shares_by_hand():
    # 1200 over needs 100 / 500 / 1000: 100 takes all it needs (share 400), 500 all it needs
    # (share 1100 / 2 = 550), 1000 gets the 600 left.
    assert B.fair_shares({0: 100, 1: 500, 2: 1000}, 1200) == {0: 100, 1: 500, 2: 600}
    # Everything fits: each visit keeps its need.
    assert B.fair_shares({0: 10, 1: 20}, 1000) == {0: 10, 1: 20}
    # Equal needs over budget: equal shares.
    assert B.fair_shares({3: 900, 1: 900, 2: 900}, 1500) == {1: 500, 2: 500, 3: 500}


@pytest.mark.parametrize(
    "kind,kw,tier",
    [
        ("admission", {}, 0),
        ("discharge", {}, 0),
        ("diagnosis", {"principal": True}, 0),
        ("diagnosis", {"disease": True}, 1),
        ("lab", {"first_abnormal": True}, 1),
        ("lab", {"foreshadow": True, "first_abnormal": True}, 0),
        ("diagnosis", {"disease": True, "new_condition": True}, 0),
        ("diagnosis", {}, 4),
        ("procedure", {}, 1),
        ("lab", {"key_lab": True, "abnormal": True}, 2),
        ("lab", {"key_lab": True, "first_day": True}, 2),
        ("lab", {"key_lab": True, "record_end": True}, 2),
        ("medication", {"disease": True}, 3),
        ("lab", {"key_lab": True, "last_day": True}, 5),
        ("lab", {"abnormal": True}, 5),
        ("lab", {"first_day": True}, 6),
        ("lab", {"key_lab": True}, 7),
        ("lab", {}, 7),
        ("medication", {}, 7),
        ("medication", {"safety": True}, 0),
        ("lab", {"key_lab": True, "abnormal": True, "safety": True}, 0),
    ],
)
def test_priority_tiers(kind, kw, tier):
    assert B.priority(kind, **kw) == tier


def _record() -> pd.DataFrame:
    """One visit over three days. Tiers: DX-1 principal (0), DX-2 diabetes (0: the condition's
    first diagnosis), DX-3 history code (4); creatinine day 1 (1: its first abnormal value); sodium days 1 and 3 (2: first day / record end),
    sodium day 2 (7: normal, middle day, not an end); metformin (3); chloride day 1 (6: non-key,
    admission day); senna (7)."""
    d1, d2, d3 = "2150-01-01 08:00", "2150-01-02 08:00", "2150-01-03 08:00"
    rows = [
        adm(SID, HADM, 0, "2150-01-01 07:00"),
        lab(SID, HADM, 0, d1, "creatinine", 2.4, lab_id=1),
        lab(SID, HADM, 0, d1, "sodium", 140, lab_id=2),
        lab(SID, HADM, 0, d1, "chloride", 101, lab_id=3),
        lab(SID, HADM, 0, d2, "sodium", 139, lab_id=4),
        lab(SID, HADM, 0, d3, "sodium", 141, lab_id=5),
        med(SID, HADM, 0, d1, "Metformin", "500", rx_id=1),
        med(SID, HADM, 0, d2, "Senna", "8.6", rx_id=2),
        dx(SID, HADM, 0, d3, 1, "I10", "Essential (primary) hypertension"),
        dx(SID, HADM, 0, d3, 2, "E119", "Type 2 diabetes mellitus without complications"),
        dx(SID, HADM, 0, d3, 3, "Z87891", "Personal history of nicotine dependence"),
        dis(SID, HADM, 0, "2150-01-03 12:00"),
    ]
    return frame(rows)


def _synth(monkeypatch, budget: int):
    # The missed-events rule is switched off so that only the budget leaves facts out.
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    monkeypatch.setattr(B, "budget_chars", lambda n: budget)
    ev = _record()
    res = D.synthesize_dialogue(ev)
    checks = V.verify_dialogue(res.turns, ev, res.coverage)
    hard = checks[(checks["severity"] == "hard") & ~checks["passed"]]
    assert hard.empty, hard[["check", "detail"]].to_string()
    status = dict(zip(res.coverage["event_id"], res.coverage["status"], strict=True))
    reason = dict(zip(res.coverage["event_id"], res.coverage["reason"], strict=True))
    return res, status, reason, len(R.render_dialogue(res.turns, with_ids=False))


def test_record_within_budget_is_told_whole(monkeypatch):
    res, status, _, n = _synth(monkeypatch, 100_000)
    assert set(status.values()) == {"covered"}
    assert n < 100_000


def test_tight_budget_keeps_only_tier_zero_and_drops_the_small_talk(monkeypatch):
    res, status, reason, n = _synth(monkeypatch, 50)
    covered = {e for e, s in status.items() if s == "covered"}
    assert covered == {f"ADM-{HADM}", f"DIS-{HADM}", f"DX-{HADM}-1", f"DX-{HADM}-2"}
    for eid, s in status.items():
        if s == "missed":
            assert reason[eid].startswith(B.BUDGET_REASON)
    assert "other diagnosis: diagnosis Z87891" in reason[f"DX-{HADM}-3"]
    assert "abnormal" in reason["LAB-1"]
    # Terse: the patient opens without symptoms, no greeting, no closing turn.
    first, last = res.turns.iloc[0], res.turns.iloc[-1]
    assert first["speaker"] == "patient" and len(M.tagged_sentences(first["text_tagged"])) == 1
    assert last["speaker"] == "clinician"
    assert not any(g.split(";")[0] in res.turns["text"].str.cat() for g in T.GREETINGS_FIRST)


def test_budget_between_leaves_out_the_lowest_tiers_first(monkeypatch):
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    full = len(R.render_dialogue(D.synthesize_dialogue(_record()).turns, with_ids=False))
    res, status, reason, n = _synth(monkeypatch, full - 120)
    missed = {e for e, s in status.items() if s == "missed"}
    assert missed and n <= full - 120
    # Tier 0-3 facts (admission, discharge, diagnoses I10 and E119, creatinine, the sodium of
    # days 1 and 3, metformin) are all still told; only lower tiers went.
    told_first = {f"ADM-{HADM}", f"DIS-{HADM}", f"DX-{HADM}-1", f"DX-{HADM}-2", "LAB-1",
                  "LAB-2", "LAB-5", "RX-1"}  # fmt: skip
    assert not missed & told_first
    assert missed <= {"LAB-3", "LAB-4", "RX-2", f"DX-{HADM}-3"}
    assert all(B.BUDGET_REASON in reason[e] for e in missed)


def test_budget_fit_is_deterministic(monkeypatch):
    a = _synth(monkeypatch, 900)
    b = _synth(monkeypatch, 900)
    pd.testing.assert_frame_equal(a[0].turns, b[0].turns)
    pd.testing.assert_frame_equal(a[0].coverage, b[0].coverage)


def test_verifier_refuses_a_budget_missed_admission(monkeypatch):
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    monkeypatch.setattr(B, "budget_chars", lambda n: 50)
    ev = _record()
    res = D.synthesize_dialogue(ev)
    cov = res.coverage.copy()
    cov.loc[cov["event_id"] == f"ADM-{HADM}", ["status", "reason"]] = ["missed", B.BUDGET_REASON]
    checks = V.verify_dialogue(res.turns, ev, cov).set_index("check")
    assert not checks.loc["must_cover_coverage", "passed"]
    assert "may not be left out for length" in checks.loc["must_cover_coverage", "detail"]


def test_verifier_refuses_a_visit_with_no_diagnosis_told(monkeypatch):
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    monkeypatch.setattr(B, "budget_chars", lambda n: 50)
    ev = _record()
    res = D.synthesize_dialogue(ev)
    turns = res.turns.copy()
    cov = res.coverage.copy()
    # Pretend the told diagnoses (principal, diabetes) were also left out: their sentence goes.
    gone = {f"DX-{HADM}-1", f"DX-{HADM}-2"}
    cov.loc[cov["event_id"].isin(gone), ["status", "reason", "turn_idx"]] = [
        "missed", B.BUDGET_REASON, pd.NA]  # fmt: skip
    for i, t in turns.iterrows():
        if gone & set(t["event_ids"]):
            kept = [(s, ids) for s, ids in M.tagged_sentences(t["text_tagged"])
                    if not gone & set(ids)]  # fmt: skip
            tagged = " ".join(s + (" " + M.format_tag(ids) if ids else "") for s, ids in kept)
            turns.at[i, "text_tagged"] = tagged
            turns.at[i, "text"] = M.strip_tags(tagged)
            turns.at[i, "event_ids"] = M.tag_ids(tagged)
    checks = V.verify_dialogue(turns, ev, cov).set_index("check")
    assert "none of its diagnoses is told" in checks.loc["must_cover_coverage", "detail"]
    assert checks.loc["missed_events_unstated", "passed"]


def test_budget_missed_key_lab_on_admission_day_is_allowed_rule_missed_is_not(monkeypatch):
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    monkeypatch.setattr(B, "budget_chars", lambda n: 50)
    ev = _record()
    res = D.synthesize_dialogue(ev)
    checks = V.verify_dialogue(res.turns, ev, res.coverage).set_index("check")
    assert checks.loc["must_cover_coverage", "passed"]  # LAB-1 (creatinine) left out by budget
    cov = res.coverage.copy()
    cov.loc[cov["event_id"] == "LAB-1", "reason"] = "rule: something"
    checks = V.verify_dialogue(res.turns, ev, cov).set_index("check")
    assert "key lab Creatinine may not be missed" in checks.loc["must_cover_coverage", "detail"]


def test_missed_diagnosis_whose_code_is_told_fails(monkeypatch):
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    ev = _record()
    res = D.synthesize_dialogue(ev)  # everything told
    # Claim DX-3 missed although its sentence still names the code, without citing it.
    turns = res.turns.copy()
    for i, t in turns.iterrows():
        if f"DX-{HADM}-3" in list(t["event_ids"]):
            ids = [x for x in t["event_ids"] if x != f"DX-{HADM}-3"]
            turns.at[i, "event_ids"] = ids
    by_id = {str(e["event_id"]): e for e in F.records(ev)}
    problems = C.check_missed(F.records(turns), by_id, [f"DX-{HADM}-3"])
    assert any("code Z87891 named in turn" in p for p in problems)


def test_quick_profile_lengths_follow_the_budget(quick_cohort):
    """On the quick profile every dialogue is kept and lands on its budget: no more than
    B(n) (+5 % for a visit whose bare facts overrun its share), and the corpus as a whole
    fills most of what the budget allows (records of one or two visits often need less)."""
    from clinlib.core.config import artifact_path

    events = pd.read_parquet(artifact_path("events.parquet", quick_cohort))
    cohort = pd.read_parquet(artifact_path("cohort.parquet", quick_cohort))
    out = D.synthesize_corpus(events, cohort, seed=0, workers=1)
    s = out["dialogue_summary"]
    assert s["kept"].all()
    budget = s["n_visits"].map(B.budget_chars)
    assert (s["n_chars"] <= 1.05 * budget).all(), s.loc[s["n_chars"] > 1.05 * budget]
    fill = (s["n_chars"] / budget).median()
    assert 0.9 <= fill <= 1.01
    cov = out["event_coverage"]
    budget_missed = cov["reason"].fillna("").str.startswith(B.BUDGET_REASON)
    assert budget_missed.any()
    assert set(cov.loc[budget_missed, "kind"]) <= set(C.BUDGET_MISSABLE_KINDS)
    must = cov[cov["status"] != "missed"]
    assert (must["status"] == "covered").mean() >= C.MIN_COVERAGE


def _foreshadow_record(n_creatinine: int) -> pd.DataFrame:
    """Visit 0: ``n_creatinine`` high creatinines and five high glucoses on days 1-5; CKD
    (N18.3) first coded in visit 1, diabetes never."""
    rows = [adm(SID, HADM, 0, "2150-01-01 07:00")]
    for d in range(1, 6):
        day = f"2150-01-0{d} 08:00"
        if d <= n_creatinine:
            rows.append(lab(SID, HADM, 0, day, "creatinine", 2.0 + d / 10, lab_id=10 + d))
        rows.append(lab(SID, HADM, 0, day, "glucose", 200 + d, lab_id=20 + d))
    rows += [dx(SID, HADM, 0, "2150-01-05", 1, "I10", "Essential (primary) hypertension"),
             dis(SID, HADM, 0, "2150-01-05 12:00"),
             adm(SID, HADM + 1, 1, "2150-03-01 07:00"),
             dx(SID, HADM + 1, 1, "2150-03-02", 1, "N183", "Chronic kidney disease, stage 3"),
             dis(SID, HADM + 1, 1, "2150-03-02 12:00")]  # fmt: skip
    return frame(rows)


def _told(ev: pd.DataFrame) -> set[str]:
    res = D.synthesize_dialogue(ev)
    return set(res.coverage.loc[res.coverage["status"] == "covered", "event_id"])


def test_findings_that_foreshadow_a_later_diagnosis_are_told_first(monkeypatch):
    """Four high creatinines before CKD is coded are always told (tier 0) whatever the
    budget; the glucoses (only news) as the budget allows. A run of five is not news: under a
    tight budget it goes like any other lab."""
    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    creat = {f"LAB-{10 + d}" for d in range(1, 6)}
    glucose = {f"LAB-{20 + d}" for d in range(1, 6)}
    ev = _foreshadow_record(4)
    seen = set()
    for budget in range(300, 3000, 100):
        monkeypatch.setattr(B, "budget_chars", lambda n, b=budget: b)
        told = _told(ev)
        assert creat - {"LAB-15"} <= told, (budget, sorted(told))
        seen.add(len(told & glucose))
    assert 0 in seen and max(seen) > 0  # the sweep crosses the glucoses' tier
    monkeypatch.setattr(B, "budget_chars", lambda n: 300)
    assert not creat <= _told(_foreshadow_record(5))


def test_the_keep_key_what_if_tells_every_diagnosis_the_budget_would_drop(monkeypatch):
    # budget 50: the kit's corpus leaves the "other diagnosis" Z87891 out; the what-if corpus
    # (diagnoses and procedures never left out) tells it, and still drops the labs
    from clinlib.dialogue.whatif import KIT, PAPER, WHATIF, keep_key_whatif

    monkeypatch.setattr(D, "missed_events", lambda *a, **k: {})
    monkeypatch.setattr(B, "budget_chars", lambda n: 50)
    ev = _record()
    kit = D.synthesize_corpus(ev, workers=1)
    alt = D.synthesize_corpus(ev, workers=1, keep_kinds=("diagnosis", "procedure"))
    status = kit["event_coverage"].set_index("event_id")["status"].to_dict()
    alt_status = alt["event_coverage"].set_index("event_id")["status"].to_dict()
    assert status[f"DX-{HADM}-3"] == "missed" and alt_status[f"DX-{HADM}-3"] == "covered"
    assert alt_status["LAB-1"] == "missed"
    assert alt["dialogue_summary"]["kept"].all()
    table = keep_key_whatif(
        ev, None, kit["dialogue_summary"], kit["event_coverage"], workers=1
    ).set_index("corpus")
    assert table.loc[KIT, "diagnoses coverage"] == pytest.approx(2 / 3)
    assert table.loc[WHATIF, "diagnoses coverage"] == 1.0
    assert table.loc[WHATIF, "kchars_max"] > table.loc[KIT, "kchars_max"]
    assert table.loc[PAPER, "kchars_median"] == 13.7 and table.loc[PAPER, "patients"] == 385


def _conflict_record() -> pd.DataFrame:
    """_record plus potassium 5.8 (above 5.1) on day 2 and potassium chloride an hour later:
    a contraindication conflict (clinlib.data.contraindications, potassium_hyperkalaemia)."""
    extra = [
        lab(SID, HADM, 0, "2150-01-02 06:00", "potassium", 5.8, lab_id=8),
        med(SID, HADM, 0, "2150-01-02 07:00", "Potassium Chloride", "20", unit="mEq", rx_id=8),
    ]
    return pd.concat([_record(), frame(extra)], ignore_index=True)


def test_a_contraindication_conflict_is_always_told(monkeypatch):
    ev = _conflict_record()
    # under a budget that keeps only tier 0, the conflict's lab and order are still told
    monkeypatch.setattr(B, "budget_chars", lambda n: 50)
    res = D.synthesize_dialogue(ev)
    status = dict(zip(res.coverage["event_id"], res.coverage["status"], strict=True))
    assert status["LAB-8"] == status["RX-8"] == "covered"
    assert status["LAB-4"] == "missed"  # a normal middle-day sodium is not protected
    checks = V.verify_dialogue(res.turns, ev, res.coverage)
    assert checks[(checks["severity"] == "hard") & ~checks["passed"]].empty
    # counterexample: potassium 4.8 (in range) is no conflict, and the order goes at tier 7
    calm = ev.copy()
    calm.loc[calm["event_id"] == "LAB-8", ["value", "value_text", "flag"]] = [4.8, "4.8", None]
    res = D.synthesize_dialogue(calm)
    status = dict(zip(res.coverage["event_id"], res.coverage["status"], strict=True))
    assert status["RX-8"] == "missed"
