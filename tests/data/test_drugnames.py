"""Drug-name normalisation (clinlib.data.drugnames) and T6 / T7 / T8 with their L2 recompute on real
MIMIC-IV drug names (fixture: tests/drug_fixture.py, golds worked out by hand there
and below)."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from clinlib.data.drugnames import drug_display, drug_head, drug_key, drug_words, has_phrase
from clinlib.tasks import gates, recompute
from clinlib.tasks.generate import generate_candidates
from clinlib.tasks.generators import t7
from clinlib.tasks.generators.inputs import make_inputs
from clinlib.tasks.generators.t8 import treatment_key
from clinlib.tasks.generators.treatments import drug_match
from tests import drug_fixture as F

# real MIMIC-IV prescriptions.drug strings (docs/real-data.md) -> expected key
KEYS = {
    "HYDROmorphone (Dilaudid)": "hydromorphone",
    "OxyCODONE (Immediate Release) ": "oxycodone",
    "Albumin 25% (12.5g / 50mL)": "albumin",
    "Potassium Chloride Replacement (Critical Care and Oncology) ": (
        "potassium chloride replacement"
    ),
    "Heparin (Porcine)": "heparin",
    "Insulin (Regular) for Hyperkalemia": "insulin for hyperkalemia",
    "Sodium Chloride 0.9%  Flush": "sodium chloride flush",
    "OxyCODONE--Acetaminophen (5mg-325mg)": "oxycodone acetaminophen",
    "MetFORMIN (Glucophage)": "metformin",
    "metFORMIN XR (Glucophage XR)": "metformin xr",
    "glipiZIDE": "glipizide",
    "Lisinopril 10 mg Tab": "lisinopril tab",
    "Potassium Chloride 20 mEq": "potassium chloride",
    "Heparin 5000 units": "heparin",
    "Fentanyl Patch 25 mcg/hr": "fentanyl patch",
    "Magnesium Sulfate (2 g/50 mL)": "magnesium sulfate",
    "Piperacillin-Tazobactam": "piperacillin tazobactam",
    "Vancomycin (": "vancomycin",
    "Insulin [Humulin R]": "insulin",
    # BASE diluent rows
    "Bag": "bag",
    "NS": "ns",
    "D5W": "d5w",
    "0.9% Sodium Chloride": "sodium chloride",
    "5% Dextrose": "dextrose",
    "Iso-Osmotic Dextrose": "iso osmotic dextrose",
    "Vitamin B12": "vitamin b12",
    "  ": "",
}  # fmt: skip


@pytest.mark.parametrize("name, key", KEYS.items())
def test_drug_key_on_real_names(name, key):
    assert drug_key(name) == key


def test_words_keep_qualifiers_and_display_collapses_spaces():
    assert drug_words("HYDROmorphone (Dilaudid)") == "hydromorphone dilaudid"
    assert drug_words("OxyCODONE--Acetaminophen (5mg-325mg)") == "oxycodone acetaminophen 5mg 325mg"
    assert drug_display("OxyCODONE (Immediate Release) ") == "OxyCODONE (Immediate Release)"
    # inner runs of spaces are collapsed (issue 26 §3), case and qualifiers kept
    assert drug_display("Sodium Chloride 0.9%  Flush") == "Sodium Chloride 0.9% Flush"
    assert drug_display("Heparin \t (Porcine)\n") == "Heparin (Porcine)"
    assert drug_head("Insulin (Regular) for Hyperkalemia") == "insulin"
    assert drug_head("0.9% Sodium Chloride") == "sodium"
    assert drug_head("D5W") == "" and drug_head("5% Dextrose") == "dextrose"
    assert has_phrase("potassium chloride replacement", "potassium chloride")
    assert not has_phrase("darbepoetin alfa", "epoetin")


def test_the_sql_recompute_normalises_names_the_same_way():
    names = [*KEYS, "İnsulin", "Café Au Lait", "A/B  C--D (x) [y] 1.5 mg/kg", "10mcg 5mg drug"]
    con = duckdb.connect()
    con.register("names", pd.DataFrame({"drug": names}))
    got = con.execute(
        f"SELECT drug, {recompute.drug_key_sql('drug')} AS k, "
        f"{recompute.drug_words_sql('drug')} AS w FROM names"
    ).df()
    for name, k, w in zip(got["drug"], got["k"], got["w"], strict=True):
        assert (k, w) == (drug_key(name), drug_words(name)), name


@pytest.mark.parametrize(
    "name, match, t8",
    [
        ("Insulin (Regular) for Hyperkalemia", ("antidiabetic", "insulin"), None),
        ("metFORMIN XR (Glucophage XR)", ("antidiabetic", "metformin"), "metformin"),
        ("OxyCODONE--Acetaminophen (5mg-325mg)", ("analgesic", "acetaminophen"), None),
        ("HYDROmorphone (Dilaudid)", ("analgesic", "hydromorphone"), None),
        ("Potassium Chloride Replacement (Critical Care and Oncology) ",
         ("electrolyte", "potassium chloride"), "potassium chloride"),
        ("Potassium  Chloride", ("electrolyte", "potassium chloride"), "potassium chloride"),
        ("Heparin (Porcine)", ("antithrombotic", "heparin"), None),
        ("Insulin Glargine (Lantus)", ("antidiabetic", "insulin glargine"), "insulin glargine"),
        ("Darbepoetin Alfa", None, None),  # not "epoetin": whole words only
        ("Sodium Chloride 0.9%  Flush", None, None),
        ("NS", None, None),
    ],
)  # fmt: skip
def test_class_lookup_and_t8_treatment_on_real_names(name, match, t8):
    assert drug_match(name) == match
    assert treatment_key(name) == t8


def test_short_recorded_names_only_match_whole_words():
    ok = t7.absent_from_record("", ["ns", "metoprolol tartrate"], ["ns", "metoprolol"])
    assert ok("Insulin Glargine")  # "ns" is inside "insulin", but not a word of it
    assert not ok("Metoprolol Succinate")  # shares the head word
    assert not ok("Tartrate")  # a substring of a recorded name


# --------------------------------------------------------------------------- tasks on the fixture


@pytest.fixture(scope="module")
def world():
    a = F.artifacts()
    inp = make_inputs(a["events"], a["coverage"], a["dialogues"], a["cohort"], a["summary"])
    cands = generate_candidates(inp, ["T6", "T7", "T8"])
    return {**a, "cands": cands, "con": F.connect()}


def _meta(df: pd.DataFrame) -> list[dict]:
    return [json.loads(m) for m in df["meta"]]


def test_events_hold_one_main_row_per_order(world):
    rx = world["events"][world["events"]["kind"] == "medication"]
    assert rx["event_id"].is_unique and len(rx) == 13
    assert "NS" not in set(rx["label"])


# T7 by hand (module docstring of tests/drug_fixture.py): one question per (encounter, generic);
# the answer is the class phrase the recorded name contains, never the recorded name
T7_ANSWERS = {
    ("RX-7001", 1101): "Metformin",  # RX-7004 "Metformin" is the same drug: no second question
    ("RX-7002", 1101): "Insulin",  # not "Insulin For Hyperkalemia" (the demo's L2 failure)
    ("RX-7003", 1101): "Potassium Chloride",
    ("RX-7005", 1101): "Hydromorphone",
    ("RX-7006", 1101): "Heparin",
    ("RX-7007", 1101): "Acetaminophen",  # the longest class phrase of the combination
    ("RX-7009", 1102): "Metformin",
    ("RX-7101", 1201): "Glipizide",
    ("RX-7102", 1201): "Oxycodone",
    ("RX-7103", 1201): "Lisinopril",
    ("RX-7104", 1201): "Furosemide",
}


def test_t7_answers_are_class_phrases_of_the_recorded_names(world):
    q = world["cands"]["T7"]
    got = {(m["event_id"], m["hadm_id"]): m["answer"] for m in _meta(q)}
    assert got == T7_ANSWERS
    for (_, row), m in zip(q.iterrows(), _meta(q), strict=True):
        options = list(row["options"])
        assert options[options.index(m["answer"])] == m["answer"]
        assert row["gold"] == "ABCD"[options.index(m["answer"])]
    by_event = {m["event_id"]: set(m["distractors"]) for m in _meta(q)}
    # the analgesics left once the record's acetaminophen, oxycodone and hydromorphone are out
    left = {"Ibuprofen", "Ketorolac", "Morphine", "Tramadol"}
    assert by_event["RX-7005"] < left and by_event["RX-7007"] < left
    # potassium / sodium phosphate share a head word with the record's KCl / NaCl flush
    assert by_event["RX-7003"] == {"Magnesium Sulfate", "Magnesium Oxide", "Calcium Gluconate"}
    # patient 11 has insulin: no insulin distractor, whatever its spelling
    assert not any("Insulin" in d for e in ("RX-7001", "RX-7002", "RX-7009") for d in by_event[e])


# T8 by hand: (subject, drug as the dialogue shows it, lab) -> (gold, bin)
T8_GOLDS = {
    (11, "MetFORMIN (Glucophage)", "glucose"): ("decreased", "M-"),  # 250 -> 180: -0.28
    (11, "MetFORMIN (Glucophage)", "hba1c"): ("decreased", "S-"),  # 9.0 -> 8.1: -0.10
    # 3.2 -> 4.2: +0.3125; the BASE row listed first on the same pharmacy_id is not the drug
    (11, "Potassium Chloride Replacement (Critical Care and Oncology)", "potassium"):
        ("increased", "L+"),
    (12, "glipiZIDE", "glucose"): ("decreased", "M-"),  # 240 -> 200: -0.167
    (12, "glipiZIDE", "hba1c"): ("decreased", "S-"),  # 7.0 -> 6.6: -0.057
    (12, "Lisinopril 10 mg Tab", "potassium"): ("increased", "S+"),  # 4.0 -> 4.4: +0.10
    (12, "Furosemide 40 mg", "potassium"): ("increased", "S+"),
    # no (12, "Furosemide 40 mg", "bun"): BUN 40 -> 30 would be stated by the name itself
}  # fmt: skip


def test_t8_golds_and_the_drug_as_the_dialogue_states_it(world):
    q = world["cands"]["T8"]
    got = {
        (m["subject_id"], drug_display(m["drug"]), m["lab"]): (row["gold"], row["subtype"])
        for (_, row), m in zip(q.iterrows(), _meta(q), strict=True)
    }
    assert got == T8_GOLDS  # RX-7004 "Metformin" resolves to RX-7001's pair: asked once
    said = " ".join(world["dialogues"]["text"])
    for (_, row), m in zip(q.iterrows(), _meta(q), strict=True):
        shown = drug_display(m["drug"])
        assert f"{shown} " in row["question"] and shown in said
        assert f"{shown}  " not in row["question"]  # no trailing space of the raw name


def test_t6_golds(world):
    q = world["cands"]["T6"]
    got = {
        (row["subtype"], m.get("lab")): row["gold"]
        for (_, row), m in zip(q.iterrows(), _meta(q), strict=True)
    }
    assert {tuple(s) for s in q["subject_ids"]} == {(11, 12)}
    assert got == {
        ("a_n_diagnoses", None): "A",  # {E119, E875, I10} vs {E119, N183}
        ("b_max_value", "glucose"): "similar",  # 250 vs 240: within 5% of 250
        ("b_max_value", "hba1c"): "A",  # 9.0 vs 7.0
        ("b_max_value", "potassium"): "A",  # 5.9 vs 4.4
        ("c_delta_value", "glucose"): "A",  # 70 vs 40
        ("c_delta_value", "hba1c"): "A",  # 0.9 vs 0.4
        ("c_delta_value", "potassium"): "A",  # 1.7 vs 0.4
    }


def test_recompute_reads_the_main_row_of_each_order(world):
    raw = recompute.load_raw(world["con"], list(F.SUBJECTS))
    rx = raw.records("rx", 11)
    assert {r["event_id"] for r in rx} == {f"RX-{p}" for p in range(7001, 7010)}
    first = {}
    for r in rx:
        first.setdefault(r["event_id"], r)
    assert first["RX-7003"]["drug_key"] == "potassium chloride replacement"
    assert first["RX-7002"]["drug_key"] == "insulin for hyperkalemia"


def test_every_hard_gate_passes_with_every_question_recomputed(world):
    q = pd.concat([world["cands"][t] for t in ("T6", "T7", "T8")], ignore_index=True)
    g = gates.run_gates(
        q.drop(columns=["conflicts"]),
        events=world["events"],
        coverage=world["coverage"],
        raw_con=world["con"],
    )
    assert gates.failed_hard(g).empty, gates.gate_report(g)
    l2 = g[g["gate"] == "L2"].set_index("task")["n_checked"]
    assert (l2["T6"], l2["T7"], l2["T8"]) == (7, 11, 7)


def test_t8_skips_a_drug_name_that_states_its_own_lab_value(world, monkeypatch):
    from clinlib.tasks.generators import t8

    a = F.artifacts()
    inp = make_inputs(a["events"], a["coverage"], a["dialogues"], a["cohort"], a["summary"])
    monkeypatch.setattr(t8, "states_value", lambda drug, *points: False)
    unchecked = t8.generate(inp)
    extra = unchecked[~unchecked["qid"].isin(world["cands"]["T8"]["qid"])]
    assert [json.loads(m)["lab"] for m in extra["meta"]] == ["bun"]
    # "Furosemide 40 mg" next to a BUN of 40: gate L3 would block the whole set
    fails = gates.gate_l3(extra.drop(columns=["conflicts"]))["T8"][1]
    assert len(fails) == 1 and "before/after value" in fails[0][1]
