"""T1–T9 generators on the hand-built fixture (tests/task_fixture.py): every gold below is
worked out by hand from the fixture's docstring table."""

from __future__ import annotations

import json
from fractions import Fraction

import pandas as pd
import pytest

from clinlib.tasks import generators, rules
from clinlib.tasks.base import ABSTAIN, QUESTION_COLUMNS
from clinlib.tasks.generate import generate_candidates
from clinlib.tasks.generators import common, t3
from clinlib.tasks.generators.inputs import TaskInputError, make_inputs
from clinlib.tasks.generators.treatments import PROCEDURE_POOLS, THERAPEUTIC_AREAS, display_name
from clinlib.tasks.injections import Injection
from clinlib.tasks.templates import T1_TEMPLATES
from tests import task_fixture as F

CAPS = {  # the generators' candidate-thinning caps; the hand-worked golds need them all off
    "t1": "MAX_PER_SERIES",
    "t2": "MAX_WINDOWS",
    "t3": "MAX_PER_VISIT",
    "t7": "MAX_ENCOUNTERS_PER_DRUG",
    "t8": "MAX_PER_SERIES",
    "t9": "MISSED_PER_LAB",
}


@pytest.fixture(scope="module", autouse=True)
def uncapped():
    with pytest.MonkeyPatch.context() as mp:
        for mod, name in CAPS.items():
            mp.setattr(getattr(generators, mod), name, 10**6)
        yield


@pytest.fixture(scope="module")
def cands(uncapped) -> dict[str, pd.DataFrame]:
    return generate_candidates(F.inputs())


def _by_anchor(df: pd.DataFrame) -> dict[tuple, pd.Series]:
    return {tuple(r["anchor_event_ids"]): r for _, r in df.iterrows()}


def _meta(row) -> dict:
    return json.loads(row["meta"])


# --------------------------------------------------------------------------- inputs


def test_inputs_keep_only_kept_patients_and_join_coverage():
    inp = F.inputs()
    assert sorted(inp.strata) == [1001, 1002, 1003, 1004]
    assert 1005 not in set(inp.events["subject_id"])
    st = dict(zip(inp.events["event_id"], inp.events["status"], strict=True))
    assert st["LAB-5"] == "missed" and st["LAB-16"] == "unusable" and st["LAB-1"] == "covered"
    assert inp.visit_info[(1002, 0)]["encounter"] == "er"  # URGENT
    assert inp.visit_info[(1004, 0)]["encounter"] == "er"  # DIRECT EMER.
    assert inp.visit_info[(1001, 1)]["encounter"] == "admit"  # ELECTIVE
    assert inp.visit_date(1003, 1) == "2150-05-10"


def test_inputs_bad_artifacts_raise_clear_errors():
    a = F.artifacts()
    with pytest.raises(TaskInputError, match="event_coverage: missing column.*status"):
        make_inputs(a["events"], a["coverage"].drop(columns="status"), a["dialogues"],
                    a["cohort"], a["summary"])  # fmt: skip
    bad = a["coverage"].copy()
    bad.loc[0, "status"] = "maybe"
    with pytest.raises(TaskInputError, match="status has value.*maybe"):
        make_inputs(a["events"], bad, a["dialogues"], a["cohort"], a["summary"])
    with pytest.raises(TaskInputError, match=r"cohort: kept patient\(s\) \[1004\]"):
        make_inputs(a["events"], a["coverage"], a["dialogues"],
                    a["cohort"][a["cohort"]["subject_id"] != 1004], a["summary"])  # fmt: skip
    dup = pd.concat([a["coverage"], a["coverage"].iloc[[3]]])
    with pytest.raises(TaskInputError, match="more than one row"):
        make_inputs(a["events"], dup, a["dialogues"], a["cohort"], a["summary"])


def test_every_candidate_has_the_question_columns(cands):
    for task, df in cands.items():
        assert list(df.columns[: len(QUESTION_COLUMNS)]) == list(QUESTION_COLUMNS), task
        assert df["qid"].str.startswith(f"{task}-").all()
        assert df["qid"].is_unique
        assert set(df["subtype"]) <= set(F_SUBTYPES[task]), task
        for _, r in df.iterrows():
            json.loads(r["meta"])
            assert r["evidence_turns"] == [] or all(":" in t for t in r["evidence_turns"])


F_SUBTYPES = {
    "T1": ("abnormal", "normal"),
    "T2": ("2_visits", "3_visits", "4_visits", "5_visits"),
    "T3": ("Y-admit", "Y-er", "N-admit", "N-er"),
    "T4": tuple(rules.T4_EVIDENCE),
    "T5": (
        "controlled_dx_presence",
        "controlled_procedure",
        "controlled_lab_value",
        "controlled_control",
        "natural_c2_lab_non_glucose",
    ),  # fmt: skip
    "T6": ("a_n_diagnoses", "b_max_value", "c_delta_value"),
    "T7": ("medication", "procedure"),
    "T8": rules.T8_BINS,
    "T9": ("lab", "lab-unmeasured", "other"),
}


# --------------------------------------------------------------------------- T1


def test_t1_only_unique_covered_lab_days(cands):
    t1 = cands["T1"]
    # independent count: covered labs that are alone on their (patient, lab, day)
    labs = [x for x in F.LABS if x[1] != 1005]
    day = {}
    for lid, sid, _, _, t, lab, *_ in labs:
        day.setdefault((sid, lab, t[:10]), []).append(lid)
    expect = {f"LAB-{x[0]}" for x in labs
              if x[-1] == "covered" and len(day[(x[1], x[5], x[4][:10])]) == 1}  # fmt: skip
    assert {a[0] for a in t1["anchor_event_ids"]} == expect
    assert len(t1) == 29
    by = _by_anchor(t1)
    assert by[("LAB-13",)]["gold"] == "300 mg/dL"  # the later glucose of 2150-06-02
    assert by[("LAB-3",)]["gold"] == "1.0 mg/dL" and by[("LAB-3",)]["subtype"] == "normal"
    assert by[("LAB-41",)]["gold"] == "0.50 ng/mL" and by[("LAB-41",)]["subtype"] == "abnormal"
    for missing in ("LAB-5", "LAB-14", "LAB-15", "LAB-16"):  # missed / shared day / unusable
        assert (missing,) not in by
    q = by[("LAB-4",)]
    assert "Potassium" in q["question"] and "2150-01-02" in q["question"]
    assert q["evidence_turns"] and q["evidence_turns"][0].startswith("1001:")
    assert _meta(q)["itemids"] == [50971] and _meta(q)["date"] == "2150-01-02"


def test_t1_question_never_states_its_value(cands):
    for _, r in cands["T1"].iterrows():
        value = r["gold"].split(" ")[0]
        stem = r["question"].split("?")[0].split(". ")[0]
        assert not common.mentions_number(stem, value)


# --------------------------------------------------------------------------- T2


def test_trend_label_thresholds_are_exact():
    assert common.trend_label(1.0, 1.04) == "stable;none"
    assert common.trend_label(1.0, 1.05) == "increased;weak"  # r = 0.05 exactly
    assert common.trend_label(1.0, 1.15) == "increased;moderate"  # float would say 0.1499..
    assert common.trend_label(40, 52) == "increased;strong"  # r = 0.30 exactly
    assert common.trend_label(100, 85) == "decreased;moderate"
    assert common.trend_label(100, 70.01) == "decreased;moderate"
    assert common.trend_label(100, 70) == "decreased;strong"
    assert common.relative_change(1.0, 1.15) == Fraction(3, 20)


def test_t2_windows_use_the_first_value_of_each_visit(cands):
    t2 = cands["T2"]
    assert len(t2) == 17
    by = _by_anchor(t2)
    # 1001 glucose: 180 (v0), 150 (v1), 120 (v2, not the later 300 of 06-02)
    assert by[("LAB-1", "LAB-6")]["gold"] == "decreased;moderate"  # -1/6
    assert by[("LAB-6", "LAB-10")]["gold"] == "decreased;moderate"  # -0.2
    three = by[("LAB-1", "LAB-6", "LAB-10")]
    assert three["gold"] == "decreased;strong" and three["subtype"] == "3_visits"
    assert ("LAB-13",) not in {a[-1:] for a in by}
    # creatinine 1.0 -> 1.05 -> 1.15: the two thresholds hit exactly
    assert by[("LAB-3", "LAB-8")]["gold"] == "increased;weak"
    assert by[("LAB-3", "LAB-8", "LAB-12")]["gold"] == "increased;moderate"
    assert by[("LAB-8", "LAB-12")]["gold"] == "increased;weak"
    assert by[("LAB-4", "LAB-9")]["gold"] == "stable;none"  # 5.8 -> 5.9
    assert by[("LAB-2", "LAB-7", "LAB-11")]["gold"] == "decreased;moderate"  # 8.0 -> 6.5
    m = _meta(three)
    assert m["hadm_ids"] == [2001, 2002, 2003]
    assert m["visit_dates"] == ["2150-01-01", "2150-03-01", "2150-06-01"]
    assert "2150-01-01, 2150-03-01 and 2150-06-01" in three["question"]
    # sodium: visit 1's earliest value is unusable, so sodium has no two usable visits
    assert not any("Sodium" in q for q in t2["question"])


# --------------------------------------------------------------------------- T3

T3_PAIRS = {
    ("LAB-1", "DX-2001-1"), ("LAB-2", "DX-2001-1"),
    ("LAB-6", "DX-2002-1"), ("LAB-7", "DX-2002-1"), ("LAB-9", "DX-2002-2"),
    ("LAB-10", "DX-2003-1"), ("LAB-11", "DX-2003-1"), ("LAB-13", "DX-2003-1"),
    ("LAB-22", "DX-2101-1"), ("LAB-24", "DX-2102-1"),
    ("LAB-34", "DX-2202-1"), ("LAB-36", "DX-2203-1"),
    ("LAB-42", "DX-2301-1"),
}  # fmt: skip


def test_t3_pairs_classes_and_injections(cands):
    t3df = cands["T3"]
    assert {tuple(a) for a in t3df["anchor_event_ids"]} == T3_PAIRS
    # troponin's own turn already attributes it to the NSTEMI: no question about it
    assert ("LAB-41", "DX-2301-1") not in {tuple(a) for a in t3df["anchor_event_ids"]}
    turns, _ = F.dialogue_and_coverage()
    for _, r in t3df.iterrows():
        m = _meta(r)
        sid, v = r["subject_ids"][0], m["visit_idx"]
        cls = t3.visit_class(sid, v)
        enc = "er" if m["admission_type"] in ("EW EMER.", "URGENT", "DIRECT EMER.") else "admit"
        assert r["subtype"] == f"{cls}-{enc}"
        assert r["gold"] == ("yes" if cls == "Y" else "no")
        if cls == "N":
            assert r["injection"] == ""
            continue
        inj = Injection.from_json(r["injection"])
        lab_turn = int(r["evidence_turns"][0].split(":")[1])
        assert (inj.kind, inj.subject_id, inj.visit_idx, inj.qid) == ("t3", sid, v, r["qid"])
        assert inj.after_turn_idx == lab_turn
        assert inj.text.startswith("Physician noted: ") and " is consistent with " in inj.text
        assert m["value_text"] in inj.text and m["dx_title"] in inj.text
        # the question never contains the injected sentence
        assert "Physician noted" not in r["question"]
    # both classes and both encounter kinds occur in the fixture
    assert {s[0] for s in t3df["subtype"]} == {"Y", "N"}


# --------------------------------------------------------------------------- T4


def test_t4_evidence_sets(cands):
    got = {(r["subject_ids"][0], r["subtype"]): r for _, r in cands["T4"].iterrows()}
    assert set(got) == {(1001, "hyperkalemia"), (1002, "anemia"), (1003, "ckd")}
    assert got[(1001, "hyperkalemia")]["gold"] == "LAB-4"  # K 5.8 H in visit 0
    # anemia: Hb 10.0 L counts, Hct 55.0 H is on the wrong side of the range
    assert got[(1002, "anemia")]["gold"] == "LAB-25"
    assert got[(1003, "ckd")]["gold"] == "LAB-31;LAB-32"
    assert got[(1003, "ckd")]["anchor_event_ids"] == ["DX-2202-1", "LAB-31", "LAB-32"]
    # 1003's hyperkalemia (visit 1) has only a LOW potassium before it: no question
    assert (1003, "hyperkalemia") not in got
    m = _meta(got[(1003, "ckd")])
    assert m["dx_visit_idx"] == 1 and m["earlier_hadm_ids"] == [2201]
    for r in got.values():
        assert not any(e in r["question"] for e in r["gold"].split(";"))


# --------------------------------------------------------------------------- T5


def test_t5_statements_and_controls(cands):
    t5df = cands["T5"]
    counts = t5df["subtype"].value_counts().to_dict()
    assert counts == {
        "controlled_dx_presence": 10,  # one per encounter with a covered diagnosis
        "controlled_lab_value": 10,
        "controlled_control": 10,
        "natural_c2_lab_non_glucose": 10,
        "controlled_procedure": 2,  # 1003 v1 and 1004 v0
    }
    for _, r in t5df.iterrows():
        m = _meta(r)
        if r["subtype"].startswith("controlled_") and r["subtype"] != "controlled_control":
            assert r["gold"] == "yes"
            inj = Injection.from_json(r["injection"])
            assert inj.kind == "t5" and inj.text == m["statement"]
            assert inj.after_turn_idx == int(r["evidence_turns"][0].split(":")[1])
            if r["subtype"] == "controlled_lab_value":
                true, said = Fraction(m["value_text"]), Fraction(m["stated_value"])
                assert said > 0 and abs(said - true) >= true / 5
                assert m["stated_value"] in inj.text and m["lab_date"] in inj.text
            else:
                assert m["title"] in inj.text
        else:
            assert r["gold"] == "no" and r["injection"] == ""
        assert f"visit:{r['subject_ids'][0]}:{m['visit_idx']}" in r["conflicts"]
    nat = t5df[t5df["subtype"] == "natural_c2_lab_non_glucose"]
    for _, r in nat.iterrows():
        m = _meta(r)
        assert m["lab"] != "glucose" and m["value_text"] != m["other_value_text"]
    # 1003 visit 0: potassium 3.0 equals its other value (3.0): never the natural topic
    v0 = [r for _, r in nat.iterrows() if _meta(r)["hadm_id"] == 2201]
    assert len(v0) == 1 and v0[0]["anchor_event_ids"][0] in ("LAB-31", "LAB-32")


def test_contradicting_value_is_clearly_different():
    from clinlib.tasks.generators.t5 import contradicting_value

    for value, text in ((0.01, "0.01"), (1.3, "1.3"), (140.0, "140"), (0.5, "0.50")):
        for qid in ("T5-a", "T5-b", "T5-c", "T5-d"):
            out = contradicting_value(value, text, qid)
            assert out != text and Fraction(out) > 0
            assert abs(Fraction(out) - Fraction(text)) >= Fraction(text) / 5
            assert len(out.split(".")[-1]) == len(text.split(".")[-1]) or "." not in text


# --------------------------------------------------------------------------- T6


def test_t6_golds(cands):
    t6 = cands["T6"]
    assert len(t6) == 7
    assert all(sorted(s) == [1001, 1002] for s in t6["subject_ids"])

    def letter(row, winner):
        return "A" if row["subject_ids"][0] == winner else "B"

    for _, r in t6.iterrows():
        m = _meta(r)
        if r["subtype"] == "a_n_diagnoses":
            # 1001: E119, E875 = 2 codes; 1002: E119, I10, D649 = 3
            assert r["gold"] == letter(r, 1002)
        elif m["lab"] == "creatinine" and r["subtype"] == "b_max_value":
            assert r["gold"] == "similar"  # 1.15 vs 1.12: within 5 % of 1.15
        else:  # glucose / HbA1c maxima and every delta are larger for 1001
            assert r["gold"] == letter(r, 1001), (r["subtype"], m["lab"])
    assert "5%" in t6["question"].iloc[-1] or "5%" in t6["question"].iloc[0]


def test_compare_ab_similar_rule():
    assert common.compare_ab(3, 3, count=True) == "similar"
    assert common.compare_ab(4, 3, count=True) == "A"
    assert common.compare_ab(100, 95) == "similar"  # |5| <= 0.05 * 100
    assert common.compare_ab(100, 94.9) == "A"
    assert common.compare_ab(94.9, 100) == "B"
    assert common.compare_ab(Fraction(3, 20), Fraction(1, 50)) == "A"


# --------------------------------------------------------------------------- T7


def test_t7_options_never_leak(cands):
    t7 = cands["T7"]
    assert len(t7) == 13
    assert t7["subtype"].value_counts().to_dict() == {"medication": 10, "procedure": 3}
    record = F.inputs().record_text
    for _, r in t7.iterrows():
        opts, m = list(r["options"]), _meta(r)
        assert len(opts) == 4 and len(set(o.lower() for o in opts)) == 4
        assert opts[rules.OPTION_LETTERS.index(r["gold"])] == m["answer"]
        for i, a in enumerate(opts):
            for b in opts[i + 1 :]:
                assert a.lower() not in b.lower() and b.lower() not in a.lower()
        for d in m["distractors"]:
            assert d.lower() not in record[r["subject_ids"][0]]
            if r["subtype"] == "medication":
                assert d in [display_name(x) for x in THERAPEUTIC_AREAS[m["area"]]]
            else:
                assert d in PROCEDURE_POOLS[(m["domain"], m["icd_version"])].values()
        # the options block is part of the question; the answer is not named before it
        assert r["question"].split("Options:")[0].lower().count(m["answer"].lower()) == 0
    answers = set(t7["meta"].map(lambda s: json.loads(s)["answer"]))
    assert {"Metformin", "Glargine", "Heparin", "Metoprolol", "Hemodialysis"} <= answers
    assert "Procedure on single vessel" not in answers  # ICD-9 adjunct code 0040
    cath = t7[t7["meta"].str.contains('"answer": "Left heart cardiac catheterization"')]
    assert len(cath) == 1
    # the superstring "Combined right and left heart ..." would leak the answer
    assert not any("combined right and left" in o.lower() for o in cath["options"].iloc[0])
    met = t7[t7["meta"].str.contains('"answer": "Metformin"')].iloc[0]
    assert "Insulin Glargine" not in met["options"]  # the record has Glargine


def test_t7_option_order_is_fixed_per_question(cands):
    again = generate_candidates(F.inputs(), ["T7"])["T7"]
    pd.testing.assert_series_equal(again["options"], cands["T7"]["options"])


# --------------------------------------------------------------------------- T8


def test_t8_bins(cands):
    got = {tuple(r["anchor_event_ids"]): (r["gold"], r["subtype"]) for _, r in
           cands["T8"].iterrows()}  # fmt: skip
    assert got == {
        ("RX-1", "LAB-2", "LAB-7"): ("decreased", "S-"),  # HbA1c 8.0 -> 7.2: -0.10
        ("RX-1", "LAB-1", "LAB-6"): ("decreased", "M-"),  # glucose 180 -> 150: -1/6
        ("RX-31", "LAB-33", "LAB-35"): ("similar", "0"),  # K 3.0 -> 3.0
        ("RX-31", "LAB-32", "LAB-36"): ("increased", "L+"),  # BUN 40 -> 52: +0.30
        ("RX-42", "LAB-42", "LAB-43"): ("decreased", "L-"),  # LDL 160 -> 96: -0.40
        # "Glargine" is MIMIC's spelling of insulin glargine (rules.T8_TREATMENT_TARGETS)
        ("RX-3", "LAB-7", "LAB-11"): ("decreased", "S-"),  # HbA1c 7.2 -> 6.5: -0.097
        ("RX-3", "LAB-6", "LAB-10"): ("decreased", "M-"),  # glucose 150 -> 120: -0.20
    }
    # lisinopril has no value after
    assert not any("RX-21" in k for k in got)


def test_t8_label_rule():
    assert common.t8_label(100, 104.9) == ("similar", "0")
    assert common.t8_label(100, 105) == ("increased", "S+")
    assert common.t8_label(100, 115) == ("increased", "M+")
    assert common.t8_label(100, 130) == ("increased", "L+")
    assert common.t8_label(100, 70) == ("decreased", "L-")


# --------------------------------------------------------------------------- T9


def test_t9_anchors_are_missed_and_worded_like_t1(cands):
    t9 = cands["T9"]
    st = F.status_of()
    assert (t9["gold"] == ABSTAIN).all()
    lab = t9[t9["subtype"] == "lab"]
    assert [list(a) for a in lab["anchor_event_ids"]] == [["LAB-5"]]  # LAB-15 shares its day
    row = lab.iloc[0]
    assert row["question"].startswith(T1_TEMPLATES[row["template_id"]].format(
        lab="Chloride", date="2150-01-02"))  # fmt: skip
    t1_fmt = common.format_instruction("T1")
    assert row["question"].endswith(t1_fmt)
    other = t9[t9["subtype"] == "other"]
    assert [list(a) for a in other["anchor_event_ids"]] == [["RX-2"]]  # not Heparin (RX-5)
    for _, r in t9.iterrows():
        assert all(st.get(a) == "missed" for a in r["anchor_event_ids"])
        assert r["evidence_turns"] == []
        stem = r["question"].replace(common.abstain_clause(), "")
        for cue in ("insufficient", "not documented", "unknown", "missing"):
            assert cue not in stem.lower()


def test_t9_never_measured_days(cands):
    un = cands["T9"][cands["T9"]["subtype"] == "lab-unmeasured"]
    days = {(x[1], x[5], x[4][:10]) for x in F.LABS}
    for _, r in un.iterrows():
        m = _meta(r)
        assert r["anchor_event_ids"] == []
        assert (r["subject_ids"][0], m["lab"], m["date"]) not in days
    # a raw labevents row on a day (e.g. a row in another unit) rules that day out
    pick = _meta(un.iloc[0])
    raw = {(int(pick["subject_id"]), pick["lab"], pick["date"])}
    again = generate_candidates(F.inputs(raw_lab_days=raw), ["T9"])["T9"]
    keys = {(_meta(r)["subject_id"], _meta(r).get("lab"), _meta(r)["date"])
            for _, r in again.iterrows()}  # fmt: skip
    assert (int(pick["subject_id"]), pick["lab"], pick["date"]) not in keys


# --------------------------------------------------------------------------- ids


def test_qids_are_stable_across_runs_and_row_orders(cands):
    shuffled = generate_candidates(F.inputs(shuffle_seed=7))
    for task, df in cands.items():
        pd.testing.assert_frame_equal(df, shuffled[task], check_like=False, obj=task)


def test_make_qid_is_content_based():
    a = common.make_qid("T2", [1], ["LAB-2", "LAB-1"], "2_visits")
    assert a == common.make_qid("T2", [1], ["LAB-1", "LAB-2"], "2_visits")
    assert a != common.make_qid("T2", [1], ["LAB-1", "LAB-2"], "3_visits")
    assert a.startswith("T2-") and len(a) == 15


def test_templates_are_varied_and_recorded(cands):
    from clinlib.tasks import templates as T

    for name in ("T1", "T2", "T3", "T4", "T5", "T6A", "T6B", "T6C", "T7_MEDICATION",
                 "T7_PROCEDURE", "T8", "T9_DOSE", "T9_START"):  # fmt: skip
        assert len(getattr(T, f"{name}_TEMPLATES")) >= 3, name
    t1 = cands["T1"]
    assert t1["template_id"].nunique() >= 3
    for _, r in t1.iterrows():
        m = _meta(r)
        body = T1_TEMPLATES[r["template_id"]].format(lab=F.LABEL[m["lab"]][0], date=m["date"])
        assert r["question"] == f"{body} {common.format_instruction('T1')}"


def test_t3_skips_pairs_the_dialogue_already_links():
    hba1c = (
        "That % Hemoglobin A1c of 7.6 % is above the normal range, 4.8 to 5.9 %, which "
        "means your diabetes control needs tightening. Also on 2150-01-01: Sodium 140 mEq/L."
    )
    glucose = "The Glucose result, 189 mg/dL, exceeds the normal range, which fits with poorly "
    glucose += "controlled blood sugar. Your diabetes medicines are listed below."
    dx = "Type 2 diabetes mellitus without complications"
    assert t3.natural_attribution([hba1c], "% Hemoglobin A1c", dx, "diabetes")
    assert not t3.natural_attribution([hba1c], "Sodium", "Hyponatremia", "hyponatremia")
    # the glucose sentence and the diabetes sentence are different sentences
    assert not t3.natural_attribution([glucose], "Glucose", dx, "diabetes")
    assert t3.natural_attribution(["Your Hemoglobin at 9.1 g/dL means you are anaemic."],
                                  "Hemoglobin", "Anemia, unspecified", "anemia")  # fmt: skip


def test_thinning_caps_each_series(cands, monkeypatch):
    for mod, name in CAPS.items():
        monkeypatch.setattr(getattr(generators, mod), name, 1)
    thin = generate_candidates(F.inputs())
    for task in ("T1", "T2", "T3", "T7", "T8", "T9"):
        assert set(thin[task]["qid"]) <= set(cands[task]["qid"]), task
        assert 0 < len(thin[task]) <= len(cands[task]), task
    # T1: one value per (patient, lab, subtype); 1001's four abnormal glucoses -> one
    t1 = thin["T1"]
    keys = t1["meta"].map(lambda m: (json.loads(m)["subject_id"], json.loads(m)["lab"]))
    assert (pd.Series(list(zip(keys, t1["subtype"], strict=True))).value_counts() == 1).all()
    # T8: RX-1's and RX-3's two HbA1c / glucose series stay (different labs), one per series
    assert len(thin["T8"]) == len(cands["T8"]) == 7
    assert common.thin([3, 1, 2], key=lambda x: 0, ident=lambda x: x, cap=2, salt="s") == [
        x for x in [3, 1, 2] if x in common.thin([1, 2, 3], lambda x: 0, lambda x: x, 2, "s")
    ]
