"""Fig. 13 data (clinlib.analysis.paper.load_corpus_figure) and our corpus beside it
(clinlib.analysis.corpus_shape)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from clinlib.analysis import corpus_shape as C
from clinlib.analysis import paper
from clinlib.dialogue.stats import PAPER_DIALOGUE_STATS


def test_figure13_as_printed_in_appendix_c1():
    df = paper.load_corpus_figure().set_index(["distribution", "statistic"])["value"]
    assert len(df) == 9
    assert df["visits_per_patient"].tolist() == [10.0, 16.0, 93.0]
    assert df["dialogue_kchars"].tolist() == [13.7, 15.0, 30.7]
    assert df["questions_per_patient"].tolist() == [4.0, 4.3, 12.0]
    # The dialogue module's copy (used by corpus_stats) says the same.
    for stat, v in PAPER_DIALOGUE_STATS["characters per dialogue (k)"].items():
        assert df[("dialogue_kchars", stat)] == v


def _figure13_lines() -> list[str]:
    return (paper.PAPER_DATA_DIR / paper.CORPUS_FIGURE_FILE).read_text().splitlines()


@pytest.mark.parametrize(
    "edit,msg",
    [
        (lambda ls: [line.rsplit(",", 1)[0] for line in ls], "missing ['unit']"),
        (lambda ls: ls[:1] + [ls[1].replace("median", "mode")] + ls[2:], "line 2: column 'statistic' has 'mode'"),
        (lambda ls: ls[:-1], "has 8 rows; Figure 13 has 9"),
        (lambda ls: ls[:2] + [ls[2].replace("mean", "median")] + ls[3:], "line 2: duplicate row"),
        (lambda ls: ls[:1] + [ls[1].replace(",10,", ",ten,")] + ls[2:], "line 2"),
    ],
)  # fmt: skip
def test_bad_figure13_file_names_file_and_line(tmp_path, edit, msg):
    (tmp_path / paper.CORPUS_FIGURE_FILE).write_text("\n".join(edit(_figure13_lines())) + "\n")
    with pytest.raises(paper.PaperTableError, match=re.escape(msg)):
        paper.load_corpus_figure(tmp_path)


def test_missing_figure13_file(tmp_path):
    with pytest.raises(paper.PaperTableError, match="missing"):
        paper.load_corpus_figure(tmp_path)


def test_compare_by_hand():
    summary = pd.DataFrame(
        {"subject_id": [1, 2, 3, 4], "kept": [True, True, True, False],
         "n_visits": [2, 4, 9, 50], "n_chars": [1000, 3000, 20000, 99000]}
    )  # fmt: skip
    questions = pd.DataFrame({"subject_ids": [[1], [1, 2], [2], [2], [4]]})
    df = C.compare(summary, questions)
    ours = df[df["source"] == "ours"].set_index(["distribution", "statistic"])["value"]
    # kept 1..3: visits 2, 4, 9; chars 1k, 3k, 20k; questions 2, 3, 0 (patient 4 dropped).
    assert ours[("visits_per_patient", "median")] == 4
    assert ours[("visits_per_patient", "mean")] == pytest.approx(5.0)
    assert ours[("dialogue_kchars", "max")] == 20.0
    assert ours[("dialogue_kchars", "mean")] == pytest.approx(8.0)
    assert ours[("questions_per_patient", "median")] == 2
    assert ours[("questions_per_patient", "mean")] == pytest.approx(5 / 3)
    assert len(df) == 18 and set(df["source"]) == {"ours", "paper"}
    spec = C.bars(df).to_dict()
    assert len(spec["hconcat"]) == 3


def test_compare_without_questions_has_two_of_our_distributions():
    summary = pd.DataFrame({"subject_id": [1], "kept": [True], "n_visits": [3], "n_chars": [500]})
    df = C.compare(summary)
    assert set(df.loc[df["source"] == "ours", "distribution"]) == {
        "visits_per_patient", "dialogue_kchars"}  # fmt: skip
    assert len(C.bars(df).to_dict()["hconcat"]) == 3  # the paper's questions panel stays
