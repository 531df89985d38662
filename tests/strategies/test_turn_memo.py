"""The context-assembly memo (clinlib.strategies.turnmemo) gives what the direct computations
give: a frozen frame renders, orders its visits and finds a question's evidence visits exactly
as an unfrozen one does, the evidence index equals the row-by-row scan worked out by hand, and
only frames declared frozen are memoised (an unfrozen frame modified in place is read afresh).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clinlib.dialogue.render import render_dialogue
from clinlib.strategies.base import render, visit_order
from clinlib.strategies.evidence import evidence_visits
from clinlib.strategies.turnmemo import freeze, frozen_turns, turn_records


def _turns() -> pd.DataFrame:
    # turns out of order; one turn number shared by two visits; ids as lists and arrays
    rows = [
        (7, 2, 5, "patient", "Back again, the cough is worse.", None),
        (7, 0, 1, "clinician", "Creatinine 1.4 mg/dL today.", ["LAB-1"]),
        (7, 0, 0, "patient", "I feel tired.", None),
        (7, 2, 4, "clinician", "Start amoxicillin 500 mg.", np.array(["RX-2", "LAB-9"])),
        (7, 1, 2, "patient", "Sodium was low last time?", []),
        (7, 1, 3, "clinician", "Sodium 131 mmol/L.", ["LAB-9"]),
        (7, 3, 3, "clinician", "Sodium fine now.", ["LAB-12"]),
    ]
    df = pd.DataFrame(
        rows, columns=["subject_id", "visit_idx", "turn_idx", "speaker", "text", "event_ids"]
    )
    df["text_tagged"] = df["text"] + " [EV-" + df["turn_idx"].astype(str) + "]"
    df["visit_date"] = "2150-01-0" + df["visit_idx"].astype(str)
    return df.astype(
        {"speaker": "string", "text": "string", "text_tagged": "string", "visit_date": "string"}
    )


QUESTIONS = [
    # by hand: LAB-9 is stated in visits 1 and 2; turn 3 is in visits 1 and 3
    ({"anchor_event_ids": ["LAB-9"]}, {1, 2}),
    ({"anchor_event_ids": ["LAB-1", "RX-2"]}, {0, 2}),
    ({"evidence_turns": ["7:3"]}, {1, 3}),
    ({"evidence_turns": ["8:0", "7:0"], "anchor_event_ids": ["LAB-12"]}, {0, 3}),
    ({"anchor_event_ids": ["LAB-1"], "injection": None}, {0}),
    ({"anchor_event_ids": []}, set()),
    ({"anchor_event_ids": ["LAB-77"]}, set()),
]


@pytest.mark.parametrize(("question", "expected"), QUESTIONS)
def test_evidence_visits_frozen_and_not(question: dict, expected: set[int]) -> None:
    turns = _turns()
    assert evidence_visits(question, 7, turns) == expected
    with frozen_turns():
        freeze(turns)
        assert evidence_visits(question, 7, turns) == expected
        assert evidence_visits(question, 7, turns) == expected  # from the memo


def test_render_and_visit_order_equal_the_direct_ones() -> None:
    turns = _turns()
    direct = [
        render_dialogue(turns, with_ids=w, visits=v) for w in (True, False) for v in (None, [2, 0])
    ]
    with frozen_turns():
        freeze(turns)
        memo = [render(turns, with_ids=w, visits=v) for w in (True, False) for v in (None, [2, 0])]
        order = visit_order(turns)
        order.append(99)  # a caller's list is its own
        assert visit_order(turns) == [0, 1, 2, 3]
    assert memo == direct


def test_only_frozen_frames_are_memoised() -> None:
    turns = _turns()
    with frozen_turns():
        before = render(turns)
        turns.loc[turns["turn_idx"] == 0, "text_tagged"] = "I feel better."  # not frozen
        assert render(turns) != before
        assert "Patient: I feel better." in render(turns)
        frozen = _turns()
        freeze(frozen)
        assert turn_records(frozen) is turn_records(frozen)
    # outside the block nothing is memoised, even for a frame frozen inside it
    assert turn_records(frozen) is not turn_records(frozen)


def test_a_non_list_id_cell_takes_the_row_scan() -> None:
    turns = _turns()
    turns["event_ids"] = turns["event_ids"].astype(object)
    turns.at[2, "event_ids"] = 5  # not a list: the scan raises as it always did
    with frozen_turns():
        freeze(turns)
        assert evidence_visits({"evidence_turns": ["7:3"]}, 7, turns) == {1, 3}
        with pytest.raises(TypeError):
            evidence_visits({"anchor_event_ids": ["LAB-9"]}, 7, turns)
