"""The evaluate-longmed stage (clinlib.analysis.longmed): notebook 15 reads its tables and runs
nothing over the question set; a build made before the stage gets one line naming the command;
a profile without LongMedBench questions is refused; the selection asks both twins of a pair."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.analysis import longmed
from clinlib.core import config
from clinlib.core.config import NOTEBOOKS_DIR
from clinlib.core.guards import PRODUCER, StageError

HEAVY = ("runner.run", "score_table(", "decision_table(", "memory_table(", "profile_long_cohort")


def test_notebook_15_only_reads_the_stage():
    nb = json.loads((NOTEBOOKS_DIR / "15_temporal_reasoning.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "longmed.tables(PROFILE)" in code
    assert [h for h in HEAVY if h in code] == []


def test_every_table_is_a_registered_artifact_of_the_stage():
    assert {PRODUCER[t] for t in longmed.TABLES} == {longmed.STAGE}


def test_old_build_gets_one_line_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    (tmp_path / "oldbuild").mkdir()
    with pytest.raises(FileNotFoundError) as err:
        longmed.tables("oldbuild")
    text = str(err.value)
    assert "\n" not in text
    assert "clintrace evaluate-longmed --profile oldbuild" in text


def test_no_longmed_question_is_refused(monkeypatch):
    empty = pd.DataFrame(columns=["qid", "task", "subtype", "meta"])
    monkeypatch.setattr(longmed, "load_questions", lambda *a, **k: empty)
    with pytest.raises(StageError, match="no LongMedBench question"):
        longmed.build("quick")


def test_selection_keeps_pairs_and_caps_per_subtype():
    rows = []
    for i in range(5):  # five T7R pairs: explicit + relative twins share meta
        for sub in ("explicit", "relative"):
            rows.append({"qid": f"m{i}{sub}", "task": "T7R", "subtype": sub, "meta": f"p{i}"})
    for i in range(7):
        rows.append({"qid": f"t{i}", "task": "T11", "subtype": "discharge", "meta": "{}"})
    chosen = longmed.select(pd.DataFrame(rows), longmed.Sizes(t7r_pairs=2, t11_per_subtype=3))
    assert sorted(chosen["T7R"]["qid"]) == ["m0explicit", "m0relative", "m1explicit", "m1relative"]
    assert list(chosen["T11"]["qid"]) == ["t0", "t1", "t2"]
    assert chosen["T10"].empty and chosen["T1R"].empty


def test_decision_tables_are_labelled_by_the_contextual_memory_writer(monkeypatch):
    one = lambda *a, **k: pd.DataFrame({"mean_score": [0.5]})  # noqa: E731
    monkeypatch.setattr(longmed.decisions, "decision_table", one)
    monkeypatch.setattr(longmed.decisions, "memory_table", one)
    preds = pd.DataFrame({"qid": pd.Series([], dtype=str)})

    def chosen(t11_meta: dict, t11o_meta: dict) -> dict:
        return {
            "T11": pd.DataFrame([{"qid": "a", "meta": json.dumps(t11_meta)}]),
            "T11O": pd.DataFrame([{"qid": "b", "meta": json.dumps(t11o_meta)}]),
        }

    offline = longmed.decision_tables(preds, chosen({}, {"mc_writer": "rule-based"}))
    assert set(offline) == {"longmed_decisions", "longmed_table4", "longmed_table5"}
    assert all(t["mc_writer"].tolist() == ["rule-based"] for t in offline.values())
    fell_back = {"mc_writer": "rule-based (fallback from fake-mc)", "mc_problem": "x"}
    mixed = longmed.decision_tables(preds, chosen({"mc_writer": "fake-mc"}, fell_back))
    assert {t["mc_writer"].iloc[0] for t in mixed.values()} == {
        "fake-mc; rule-based (fallback from fake-mc)"
    }
