"""Hostile writers (clinlib.eval.synthesis.hostile): each makes exactly one clinical error in
a visit's draft, and the rewrite acceptance path (clinlib.dialogue.rewrite.try_rewrites)
refuses every corrupted visit with the check that names that error, keeping the template text
(outcome "template", backbone "template")."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.dialogue import synth as D
from clinlib.eval.synthesis.hostile import CONTROL_WRITERS, HOSTILE_WRITERS, refusal_table
from tests.dialogue_fixtures import make_events


@pytest.fixture(scope="module")
def table():
    ev = make_events()
    ev = ev[ev["subject_id"].isin([1001, 1002])]
    parts = [D.synthesize_dialogue(ev[ev["subject_id"] == s]) for s in (1001, 1002)]
    turns = pd.concat([p.turns for p in parts], ignore_index=True)
    cov = pd.concat([p.coverage for p in parts], ignore_index=True)
    return refusal_table(turns, ev, cov).set_index("writer")


@pytest.mark.parametrize("writer", [w.name for w in HOSTILE_WRITERS])
def test_every_corrupted_visit_is_refused_by_its_check(table, writer):
    row = table.loc[writer]
    assert row["n_visits"] > 0, f"{writer} found nothing to corrupt in the fixture"
    assert row["refused_by_check"] == row["n_visits"], row.to_dict()
    assert row["accepted"] == 0 and row["refused_other"] == 0


def test_the_refused_visit_keeps_its_template_text_and_says_so():
    ev = make_events()
    ev = ev[ev["subject_id"] == 1001]
    swap = next(w for w in HOSTILE_WRITERS if w.name == "swap_lab_values")

    class Writer:
        def rewrite(self, draft, required):
            by_id = {str(e["event_id"]): e for e in ev.to_dict("records")}
            return swap.fn(draft, by_id) or draft

    template = D.synthesize_dialogue(ev)
    res = D.synthesize_dialogue(ev, rewriter=[("hostile", Writer())])
    swapped = res.rewrites[res.rewrites["check"] == "values_bound"]
    assert len(swapped) > 0
    assert (swapped["outcome"] == "template").all()
    assert (swapped["backbone"] == "template").all()
    assert swapped["reason"].str.contains("is stated with").all(), swapped["reason"].tolist()
    assert res.turns["text"].tolist() == template.turns["text"].tolist()


def test_the_faithful_condition_control_is_accepted():
    # the patient's own diagnosis restated without its code passes every check
    ev = make_events()
    ev = ev[ev["subject_id"].isin([1001, 1002])]
    parts = [D.synthesize_dialogue(ev[ev["subject_id"] == s]) for s in (1001, 1002)]
    turns = pd.concat([p.turns for p in parts], ignore_index=True)
    cov = pd.concat([p.coverage for p in parts], ignore_index=True)
    row = (
        refusal_table(turns, ev, cov, CONTROL_WRITERS)
        .set_index("writer")
        .loc["restate_own_condition"]
    )
    assert row["n_visits"] > 0
    assert row["accepted"] == row["n_visits"], row.to_dict()
