"""T7I imaging retrieval (clinlib.tasks.generators.t7i) and the radiology reports it reads
(clinlib.data.sources.radiology): on quick every pair shares options and gold; each letter is
the answer equally often, so a reader that answers "the option that occurs in the context" (the
first letter whose study the memory states) is held at chance + 10 points, and so is "the
option the memory mentions first"; the reference rule answers every question; gate L2 catches a
wrong letter, L3 a stem that names the answer or a relative stem that states a number; report
sentences trace to their studies and the check fails on a changed modality, time or ghost id;
real radiology notes parse into the same events (a hand-made fixture)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from clinlib.data.build import SourceSpec, load, open_source, read_source_info
from clinlib.data.sources import radiology
from clinlib.data.sources.notes import load_mimic_notes
from clinlib.eval.readers.imaging import answer_imaging
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.gates import gate_l2
from clinlib.tasks.generators.t7i import MEMORY_HEADER, imaging_leak, recompute_t7i
from clinlib.tasks.recompute import load_raw

CHANCE = 0.25


@pytest.fixture(scope="module")
def t7i(quick_temporal):
    ext = load("temporal_questions", "quick")
    return ext[ext["task"] == "T7I"].reset_index(drop=True)


def _memory(q: str) -> str:
    return q.split(MEMORY_HEADER, 1)[1].split("Options:")[0]


def test_pairs_share_options_and_gold(t7i):
    assert len(t7i) >= 8 and set(t7i["subtype"]) == {"explicit", "relative"}
    for _, pair in t7i.groupby("meta"):
        assert len(pair) == 2
        assert pair["gold"].nunique() == 1 and pair["options"].map(tuple).nunique() == 1


def test_presence_and_first_mention_readers_are_held_at_chance(t7i):
    presence = first = 0
    for r in t7i.itertuples():
        mem, opts = _memory(r.question), list(r.options)
        assert all(o in mem for o in opts)  # every option occurs in the stated memory
        presence += next(x for x, o in zip("ABCD", opts, strict=True) if o in mem) == r.gold
        first += min(zip("ABCD", opts, strict=True), key=lambda x: mem.index(x[1]))[0] == r.gold
    assert presence / len(t7i) <= CHANCE + 0.10
    assert first / len(t7i) <= CHANCE + 0.10
    assert t7i["gold"].value_counts().max() == t7i["gold"].value_counts().min()  # balanced


def test_reference_rule_answers_by_date_and_by_rank(t7i):
    assert [answer_imaging(q, eager=False) for q in t7i["question"]] == list(t7i["gold"])


HAND = (
    "Which study was the second imaging event of the patient's second hospital stay?\n"
    f"{MEMORY_HEADER}\n"
    "2150-01-01: admitted to hospital.\n"
    "Radiology report. EXAMINATION: CT chest. DATE: 2150-01-02 10:00. FINDINGS: x IMPRESSION: y\n"
    "2150-01-03: discharged.\n"
    "2150-02-01: admitted to hospital.\n"
    "Radiology report. EXAMINATION: MRI head. DATE: 2150-02-02 10:00. FINDINGS: x IMPRESSION: y\n"
    "Radiology report. EXAMINATION: Ultrasound kidneys. DATE: 2150-02-03 09:00. FINDINGS: x\n"
    "2150-02-05: discharged.\n"
    "Options:\nA. MRI head\nB. CT chest\nC. X-ray chest\nD. Ultrasound kidneys\n"
)


def test_reference_rule_on_a_hand_written_memory():
    assert answer_imaging(HAND, eager=False) == "D"  # 2nd stay (by admission lines), 2nd report
    explicit = HAND.replace(
        HAND.split("\n", 1)[0], "Which imaging study was performed on 2150-01-02?"
    )
    assert answer_imaging(explicit, eager=False) == "B"
    absent = HAND.replace(
        HAND.split("\n", 1)[0], "Which imaging study was performed on 2150-03-09?"
    )
    assert answer_imaging(absent, eager=False) == ABSTAIN
    assert answer_imaging(absent, eager=True) == "A"


def test_l2_recomputes_and_catches_a_wrong_letter(t7i):
    info = read_source_info("quick")
    con = open_source(SourceSpec(info["kind"], Path(info["path"]), bool(info["credentialed"])))
    try:
        raw = load_raw(con, {int(s) for ids in t7i["subject_ids"] for s in ids})
    finally:
        con.close()
    cov = load("event_coverage", "quick")
    checked, fails = gate_l2(t7i, raw, cov)["T7I"]
    assert checked == len(t7i) and fails == []
    bad = t7i.assign(gold=t7i["gold"].map({"A": "B", "B": "C", "C": "D", "D": "A"}))
    assert len(gate_l2(bad, raw, cov)["T7I"][1]) == len(t7i)
    r = t7i.iloc[0].to_dict()
    meta = json.loads(r["meta"])  # a rank the stay does not have names no study
    assert recompute_t7i({**meta, "position": meta["position"] + 5}, r, raw, {}).gold is None


def test_l3_catches_a_named_answer_and_a_stated_number(t7i):
    r = t7i[t7i["subtype"] == "relative"].iloc[0].to_dict()
    assert imaging_leak(r) is None
    answer = list(r["options"])["ABCD".index(r["gold"])]
    named = {**r, "question": f"Was it the {answer}? " + r["question"]}
    assert "names the answer" in imaging_leak(named)
    numbered = {**r, "question": "Which study was imaging event 2 of stay 3?\n" + r["question"]}
    assert "states a number" in imaging_leak(numbered)


def test_reports_trace_to_their_studies_and_the_check_fails_on_changes():
    visits = pd.DataFrame(
        {
            "subject_id": [1, 1],
            "hadm_id": [10, 11],
            "visit_idx": [0, 1],
            "admit_time": pd.to_datetime(["2150-01-01 08:00", "2150-03-01 08:00"]),
            "disch_time": pd.to_datetime(["2150-01-05 12:00", "2150-03-09 12:00"]),
        }
    )
    imaging = radiology.synthetic_imaging(visits)
    assert len(imaging) >= 2
    for e in imaging.to_dict("records"):  # every study strictly inside its stay
        stay = visits[visits["hadm_id"] == e["hadm_id"]].iloc[0]
        assert stay["admit_time"] < e["time"] < stay["disch_time"]
    reports = radiology.synthetic_reports(imaging)
    assert radiology.verify_reports(reports, imaging) == []
    bad = reports.copy()
    first = imaging.iloc[0]
    other = next(m for m in radiology.MODALITIES if m != first["modality"])
    bad.loc[0, "text"] = f"EXAMINATION: {other} {first['region']}."
    assert "is not stated by" in radiology.verify_reports(bad, imaging)[0]
    bad = reports.copy()
    bad.loc[1, "text"] = "DATE: 2150-01-01 00:00."
    assert len(radiology.verify_reports(bad, imaging)) == 1
    bad = reports.copy()
    bad.at[2, "event_ids"] = ["img-ghost"]
    assert "not one known study" in radiology.verify_reports(bad, imaging)[0]


def _write(path, rows):
    cols = [
        "note_id",
        "subject_id",
        "hadm_id",
        "note_type",
        "note_seq",
        "charttime",
        "storetime",
        "text",
    ]
    with gzip.open(path, "wt") as f:
        pd.DataFrame(rows, columns=cols).to_csv(f, index=False)


def test_real_radiology_notes_parse_into_imaging_events(tmp_path):
    """A hand-made fixture in MIMIC-IV-Note's layout (no real note is committed)."""
    _write(tmp_path / "discharge.csv.gz", [])
    _write(
        tmp_path / "radiology.csv.gz",
        [
            [
                "1-RR-1",
                1,
                10,
                "RR",
                1,
                "2150-01-02 10:00:00",
                "",
                "EXAMINATION: CT ABD/PELVIS W/ CONTRAST\nFINDINGS: ...",
            ],
            [
                "1-RR-2",
                1,
                10,
                "RR",
                2,
                "2150-01-03 09:00:00",
                "",
                "EXAMINATION: CHEST (PA AND LAT)\nIMPRESSION: clear",
            ],
            ["1-RR-3", 1, "", "RR", 3, "2150-01-04 09:00:00", "", "EXAMINATION: MRI HEAD"],
            ["1-RR-4", 1, 10, "RR", 4, "2150-01-04 09:00:00", "", "EXAMINATION: BONE DENSITY"],
        ],
    )
    notes = load_mimic_notes(tmp_path, kinds=("radiology",))
    visits = pd.DataFrame({"subject_id": [1], "hadm_id": [10], "visit_idx": [0]})
    imaging, dropped = radiology.imaging_from_mimic(notes, visits)
    assert list(zip(imaging["modality"], imaging["region"], strict=True)) == [
        ("CT", "abdomen"),
        ("X-ray", "chest"),
    ]
    assert dropped == {"no hadm_id": 1, "no modality": 1, "unknown stay": 0}
    assert list(imaging["visit_idx"]) == [0, 0]
