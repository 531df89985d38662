"""The construction fast paths give what the direct computations give: per-visit chunks read
from one record pass equal one render per visit ``groupby``, and an artifact's JSON written
from its fields equals the JSON of :func:`dataclasses.asdict` (the deep copy it skips)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pandas as pd
import pytest

from clinlib.dialogue.render import render_visit
from clinlib.strategies.base import Artifact, dialogue_hash
from clinlib.strategies.retrieval import visit_chunks


def _turns() -> pd.DataFrame:
    # turns out of order, visits out of order, one tie on turn_idx inside a visit
    rows = [
        (7, 2, 5, "patient", "Back again, the cough is worse.", "2150-05-02"),
        (7, 0, 1, "clinician", "Creatinine 1.4 mg/dL today.", "2150-01-03"),
        (7, 0, 0, "patient", "I feel tired.", "2150-01-03"),
        (7, 2, 4, "clinician", "Start amoxicillin 500 mg.", "2150-05-02"),
        (7, 1, 2, "patient", "Sodium was low last time?", "2150-03-09"),
        (7, 1, 2, "clinician", "Sodium 131 mmol/L.", "2150-03-09"),
    ]
    df = pd.DataFrame(
        rows, columns=["subject_id", "visit_idx", "turn_idx", "speaker", "text", "visit_date"]
    )
    df["text_tagged"] = df["text"] + " [EV-" + df["turn_idx"].astype(str) + "]"
    return df.astype({"speaker": "string", "text": "string", "text_tagged": "string"})


def test_visit_chunks_equal_one_render_per_visit() -> None:
    turns = _turns()
    expected = [
        (v, render_visit(g, with_ids=False, header=True))
        for v, g in turns.groupby("visit_idx", sort=True)
    ]
    got = visit_chunks(turns)
    assert got == expected
    assert [v for v, _ in got] == [0, 1, 2]
    assert all(type(v) is int for v, _ in got)
    # the tie keeps the input order, the header is the visit's
    assert got[1][1] == (
        "Visit 2 (2150-03-09)\nPatient: Sodium was low last time?\nClinician: Sodium 131 mmol/L."
    )


def test_visit_chunks_of_a_reordered_copy_are_the_same() -> None:
    turns = _turns()
    assert visit_chunks(turns.iloc[::-1].reset_index(drop=True))[0] == visit_chunks(turns)[0]


@dataclass
class _Inner:
    name: str
    values: tuple[int, ...]


def _artifact(data: dict) -> Artifact:
    return Artifact(
        strategy="timeline",
        subject_id=7,
        params={"k": 5},
        prep_model="rule-based",
        dialogue_hash=dialogue_hash(_turns().sort_values("turn_idx", kind="stable")),
        data=data,
        key="abc",
        build_seconds=0.25,
        prep_usage={"requests": 1.0},
    )


def test_artifact_json_equals_asdict_json() -> None:
    data = {
        "rows": [{"b": 1, "a": [1.5, None, True]}, ("x", 2)],
        "é": "naïve",
        "nested": _Inner("n", (1, 2)),
    }
    art = _artifact(data)
    expected = json.dumps(asdict(art), sort_keys=True, ensure_ascii=False)
    assert art.to_json() == expected
    assert json.loads(art.to_json())["data"]["nested"] == {"name": "n", "values": [1, 2]}
    assert Artifact.from_dict(json.loads(art.to_json())).data["é"] == "naïve"


def test_artifact_json_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        _artifact({"bad": {1, 2}}).to_json()
