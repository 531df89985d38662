"""LongMedBench's note memory (clinlib.strategies.note_memory) and the notes source
(clinlib.data.sources.notes): every synthetic note sentence passes the dialogue verifier's
per-turn checks on the quick profile and a tampered one fails them; ``note-memory`` shows the
notes of the visits before the target only; real MIMIC-IV-Note loading on a hand-made fixture
(the real files are credentialed and never committed), with bad input named in one line."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from clinlib.data.build import load
from clinlib.data.sources.notes import (
    NotesError,
    load_mimic_notes,
    split_discharge,
    synthetic_notes,
)
from clinlib.strategies import get_strategy
from clinlib.strategies.note_memory import verify_notes


@pytest.fixture(scope="module")
def events(quick_built):
    return load("events", quick_built)


def test_every_note_sentence_traces_to_its_events(events):
    notes = synthetic_notes(events)
    assert (
        notes.groupby(["subject_id", "visit_idx"]).ngroups
        == events.groupby(["subject_id", "visit_idx"]).ngroups
    )  # one note per admission
    assert set(notes["part"]) == {"adm", "dis"}
    for sid, g in notes.groupby("subject_id"):
        res = verify_notes(
            g.to_dict("records"), events[events["subject_id"] == sid].to_dict("records")
        )
        assert not any(res.values()), (sid, {k: v for k, v in res.items() if v})


def test_the_verifier_catches_tampered_sentences(events):
    notes = synthetic_notes(events)
    sid = int(notes["subject_id"].iloc[0])
    own = events[events["subject_id"] == sid].to_dict("records")
    sents = notes[notes["subject_id"] == sid].to_dict("records")
    lab = next(s for s in sents if s["text"].startswith("Abnormal results"))
    wrong_value = {**lab, "text": lab["text"].replace(" on ", " (was 987) on ", 1)}
    assert verify_notes([wrong_value], own)["no_untraced_numbers"]
    drug = {**lab, "text": lab["text"] + " Warfarin was added."}
    assert verify_notes([drug], own)["no_untraced_drugs"]
    untagged = {**lab, "event_ids": []}
    assert verify_notes([untagged], own)["no_untraced_dates"]
    ghost = {**lab, "event_ids": [*lab["event_ids"], "RX-999999999"]}
    assert verify_notes([ghost], own)["event_ids_exist"]


def test_note_memory_shows_earlier_notes_only(quick_built, events):
    d = load("dialogues", quick_built)
    sid = int(d.groupby("subject_id")["visit_idx"].nunique().idxmax())
    turns = d[d["subject_id"] == sid].reset_index(drop=True)
    s = get_strategy("note-memory", profile=quick_built)
    assert s.label() == "note-memory(m=inf)" and s.history_only
    art = s.construct(sid, turns)
    visits = sorted(set(turns["visit_idx"]))
    t = visits[len(visits) // 2]
    q = {"qid": "q", "question": "?", "subject_ids": [sid], "meta": json.dumps({"visit_idx": t})}
    shown = s.access(art, q, turns)
    adm = events[(events["subject_id"] == sid) & (events["kind"] == "admission")]
    days = dict(zip(adm["visit_idx"], adm["time"].dt.strftime("%Y-%m-%d"), strict=True))
    assert shown.count("Admitted on ") == len([v for v in visits if v < t])
    assert all(f"Admitted on {days[v]}" in shown for v in visits if v < t)
    assert all(f"Admitted on {days[v]}" not in shown for v in visits if v >= t)
    one = get_strategy("note-memory(m=1)", profile=quick_built)
    assert one.access(art, q, turns).count("Admitted on ") == 1


HEADER = "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text\n"
DISCHARGE = (
    "10000032-DS-21,10000032,22595853,DS,21,2180-05-07 00:00:00,2180-05-09 15:26:00,"
    '"Chief Complaint: worsening ABD distension. History of Present Illness: ... '
    'Brief Hospital Course: paracentesis ... Discharge Disposition: Home"\n'
)
RADIOLOGY = (
    "10000032-RR-14,10000032,22595853,RR,14,2180-05-06 22:25:00,2180-05-06 23:10:00,"
    '"EXAMINATION: CHEST (PA AND LAT). IMPRESSION: No acute process."\n'
)


def _write(path, text: str) -> None:
    with gzip.open(path, "wt") as f:
        f.write(text)


def test_mimic_note_loader_on_a_hand_made_fixture(tmp_path):
    note = tmp_path / "note"
    note.mkdir()
    _write(note / "discharge.csv.gz", HEADER + DISCHARGE)
    _write(note / "radiology.csv.gz", HEADER + RADIOLOGY)
    df = load_mimic_notes(tmp_path)
    assert list(df["note_type"]) == ["DS", "RR"] and df["hadm_id"].tolist() == [22595853] * 2
    assert df["charttime"].iloc[1] == pd.Timestamp("2180-05-06 22:25")
    adm, dis = split_discharge(df["text"].iloc[0])
    assert adm.endswith("History of Present Illness: ...")
    assert dis.startswith("Brief Hospital Course:") and "Home" in dis
    assert split_discharge("no headings") == ("no headings", "")


def test_mimic_note_loader_names_bad_input(tmp_path):
    _write(tmp_path / "discharge.csv.gz", HEADER.replace("hadm_id,", "") + "x\n")
    with pytest.raises(NotesError, match=r"discharge.csv.gz: column 'hadm_id' missing"):
        load_mimic_notes(tmp_path, kinds=["discharge"])
    _write(tmp_path / "discharge.csv.gz", HEADER + DISCHARGE.replace("10000032,2259", "abc,2259"))
    with pytest.raises(NotesError, match=r"column 'subject_id' row 2: 'abc' is no id"):
        load_mimic_notes(tmp_path, kinds=["discharge"])
    with pytest.raises(NotesError, match="radiology.csv.gz: not found"):
        load_mimic_notes(tmp_path, kinds=["radiology"])
