"""T10 through the harness (LongMedBench "Temporal reasoning", Table 3; docs/design.md
"Extended question set"): ``run(..., tasks=["T10"])`` asks the extended set, Kendall's tau
lands in the predictions' ``score`` column, paper-facing loads leave T10 out, and the offline
readers score what reader_order documents (cloze tau = 1 from the timestamps; sorting:
reference abstains, eager follows its diagnosis-count heuristic)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from scipy.stats import kendalltau

from clinlib.analysis.metrics import score_table
from clinlib.core import config
from clinlib.core.config import artifact_path
from clinlib.eval.harness import runner
from clinlib.eval.readers.order import answer_order
from clinlib.tasks.answers.order import split_order
from clinlib.tasks.base import ABSTAIN

COPIED = ("dialogues", "questions", "temporal_questions")


@pytest.fixture(scope="module")
def runs(quick_temporal, tmp_path_factory):
    """A copy of the quick profile's questions and dialogues, answered on T10 by both offline
    readers under two strategies."""
    src = {a: artifact_path(f"{a}.parquet", "quick") for a in COPIED}
    src["source"] = artifact_path("source.json", "quick")
    root = tmp_path_factory.mktemp("build")
    mp = pytest.MonkeyPatch()
    mp.setattr(config, "BUILD_DIR", root)
    (root / "tq").mkdir()
    for path in src.values():
        shutil.copy(path, root / "tq" / path.name)
    summary = runner.run(runner.RunSpec("tq", ["no-context-blind", "full-context"], ["reference", "eager"], tasks=["T10"]),
                         runner.RunOptions(progress=False))  # fmt: skip
    gold = pd.read_parquet(src["temporal_questions"]).set_index("qid")["gold"]
    first = (summary, runner.load_predictions("tq", extended=True), runner.load_predictions("tq"),
             gold)  # fmt: skip
    # a re-rendered question gets a new qid (its qid hashes its content): its old answers are
    # orphaned and re-asked; a rebuilt extended set makes no prediction folder stale
    path = root / "tq" / "temporal_questions.parquet"
    questions = pd.read_parquet(path)
    old_qid = questions.loc[0, "qid"]
    questions.loc[0, "qid"] = "T10-rerendered"
    questions.to_parquet(path, index=False)
    left = runner.load_predictions("tq", extended=True)
    again = runner.run(
        runner.RunSpec("tq", ["no-context-blind"], ["reference"], tasks=["T10"]),
        runner.RunOptions(progress=False),
    )
    second = (old_qid, left, again, runner.load_predictions("tq", extended=True))
    yield first, second
    mp.undo()


def test_summary_covers_t10_only_with_mean_tau(t10_run):
    summary, preds, paper_view, _ = t10_run
    assert set(preds["task"]) == {"T10"} and len(preds) == 4 * 32
    assert paper_view.empty  # paper-facing loads never see extended rows
    ref = summary[summary["backbone"] == "reference"]
    # reference: 8 cloze at tau 1, 24 sorting abstentions at 0 -> 8 / 32
    assert list(ref["n"]) == [32, 32] and list(ref["mean_score"]) == pytest.approx([1 / 4] * 2)
    assert (summary["parse_failures"] == 0).all()


def test_scores_are_kendall_tau(t10_run):
    _, preds, _, gold = t10_run
    ref = preds[preds["backbone"] == "reference"]
    cloze = ref[ref["subtype"] == "visit_cloze"]
    assert (cloze["score"] == 1.0).all() and cloze["correct"].all()
    sorting = ref[ref["subtype"] != "visit_cloze"]
    assert (sorting["parsed"] == ABSTAIN).all() and (sorting["score"] == 0.0).all()
    eager = preds[(preds["backbone"] == "eager") & (preds["subtype"] != "visit_cloze")]
    assert eager["parsed"].str.fullmatch(r"[A-J](,[A-J])+").all()
    for row in eager.itertuples():
        want, got = split_order(gold[row.qid]), split_order(row.parsed)
        expected = kendalltau([want.index(x) for x in want], [got.index(x) for x in want])
        assert row.score == pytest.approx(expected.statistic)
        assert row.score_lenient == pytest.approx(row.score)


def test_score_table_per_subtype(t10_run):
    _, preds, _, _ = t10_run
    table = score_table(preds, by=["backbone", "subtype"], n_boot=200)
    ref = table[table["backbone"] == "reference"].set_index("subtype")
    assert ref.loc["visit_cloze", "mean_score"] == 1.0
    assert ref.loc["visit_sorting", "mean_score"] == 0.0
    assert ref.loc["visit_cloze", "ci_low"] == ref.loc["visit_cloze", "ci_high"] == 1.0
    assert (table["n"] == 16).all() and (table["parse_failure_rate"] == 0).all()


def test_eager_sorting_heuristic_by_hand():
    question = (
        "Five consecutive hospital visits of the patient are shown below, shuffled, with "
        "their dates and visit numbers removed. Order them chronologically from the clinical "
        "course alone.\n"
        "A. Admission type: URGENT. Diagnoses: a; b; c. Discharged to: HOME.\n"
        "B. Admission type: URGENT. Diagnoses: a. Discharged to: HOME.\n"
        "C. Admission type: URGENT. Diagnoses: none coded. Discharged to: HOME.\n"
        "D. Admission type: URGENT. Diagnoses: a; b. Discharged to: HOME.\n"
        "E. Admission type: URGENT. Diagnoses: a; b. Discharged to: HOME.\n"
        "Reply with the letters only."
    )
    assert answer_order(question, eager=False) == ABSTAIN
    assert answer_order(question, eager=True) == "C, B, D, E, A"  # ties keep shown order
    cloze = (
        "Some treatment events (medications or procedures) were removed from one hospital "
        "visit of the patient. The rest of that visit, in time order:\n...\n"
        "A. 2150-01-02 09:00 medication: Aspirin 81 mg PO\n"
        "B. 2150-01-01 23:10 medication: Heparin 5000 UNIT SC\n"
        "C. 2150-01-02 08:59 procedure: Hemodialysis\n"
    )
    assert answer_order(cloze) == answer_order(cloze, eager=True) == "B, C, A"


@pytest.fixture(scope="module")
def t10_run(runs):
    return runs[0]


def test_a_rerendered_question_is_re_asked_alone(runs):
    old_qid, left, again, after = runs[1]
    assert old_qid not in set(left["qid"]) and len(left) == 4 * 31
    assert list(again["new_predictions"]) == [1]  # only the new question was answered
    assert "T10-rerendered" in set(after["qid"])
