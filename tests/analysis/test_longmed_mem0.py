"""Why ``history-mem0`` scores 0 on T11 discharge under ``reference`` (docs/bench-longmed.md,
Table 5): the store keeps the stays' admission and discharge (one of each: Mem0's update rule
replaces them stay by stay), but top-k access by similarity to the question never shows them,
so the reader's usual-stay rule finds no stay and abstains — as with no memory at all."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from clinlib.data.build import load
from clinlib.eval.readers.decision import answer_decision, usual_stay_days
from clinlib.strategies import get_prep, get_strategy
from clinlib.strategies.event_memory import before_target
from clinlib.tasks.base import ABSTAIN


@pytest.fixture(scope="module")
def discharge(quick_temporal):
    questions = load("temporal_questions", "quick")
    rows = questions[(questions["task"] == "T11") & (questions["subtype"] == "discharge")]
    dialogues = load("dialogues", "quick")
    strat, prep = get_strategy("history-mem0"), get_prep("rule-based")
    out = []
    for row in rows.to_dict("records"):
        sid = int(list(row["subject_ids"])[0])
        turns = dialogues[dialogues["subject_id"] == sid]
        art = strat.construct(sid, turns, prep)
        memories = art.data["snapshots"][str(len(before_target(row, turns)))]
        out.append((row, strat.access(art, row, turns), memories))
    return strat, out


def test_the_store_keeps_one_admission_and_one_discharge_that_access_never_shows(discharge):
    strat, rows = discharge
    assert len(rows) == 8  # quick's T11 discharge questions
    for row, context, memories in rows:
        kinds = Counter(m["kind"] for m in memories)
        assert kinds["admission"] == kinds["discharge"] == 1  # updated in place, stay by stay
        assert "Admitted on" not in context and "Discharged on" not in context
        assert usual_stay_days(context) is None
        assert answer_decision(context, row["question"]) == ABSTAIN
        ranked = strat.ranked_memories(
            SimpleNamespace(data={"memories": memories}), row["question"]
        )
        first = min(i for i, m in enumerate(ranked) if m["kind"] in ("admission", "discharge"))
        assert first >= int(strat.params["k"])  # ranked below the k shown
        # the counterfactual: shown every memory, the rule finds the earlier stay
        every = "\n".join(f"- {m['text']}" for m in memories)
        assert usual_stay_days(every) is not None
