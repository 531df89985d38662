"""bench/reproduce_budget.py's pure parts: the growth exponent on hand-made numbers, the
growth verdict (a quadratic stage is flagged), the budget table's verdicts, and the parsing of
`clintrace notebooks` rows and of reproduce_times.csv."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench import reproduce_budget as rb


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([10, 20, 40], 1.0),  # linear: doubling the patients doubles the cost
        ([1, 4, 16], 2.0),  # quadratic
        ([7, 7, 7], 0.0),  # constant
        ([3, 3 * 2**1.5, 3 * 4**1.5], 1.5),
    ],
)
def test_growth_exponent_is_the_log_log_slope(values, want):
    assert rb.growth_exponent([100, 200, 400], values) == pytest.approx(want, abs=1e-9)


def test_growth_exponent_needs_two_distinct_sizes_and_equal_lengths():
    assert math.isnan(rb.growth_exponent([100], [5]))
    assert math.isnan(rb.growth_exponent([100, 100], [5, 9]))
    assert math.isnan(rb.growth_exponent([100, 200], [0, 9]))  # a zero cost has no log
    with pytest.raises(rb.BenchInputError, match="2 sizes but 3 values"):
        rb.growth_exponent([1, 2], [1, 2, 3])


def test_growth_table_flags_a_quadratic_stage_and_not_a_linear_one():
    runs = pd.DataFrame(
        {
            "stage": ["cohort"] * 3 + ["questions"] * 3,
            "patients": [400, 800, 1600] * 2,
            "seconds": [8, 16, 32, 30, 120, 480],
            "peak_mb": [300, 300, 300, 500, 1000, 2000],
        }
    )
    table = rb.growth_table(runs).set_index("stage")
    assert table.loc["cohort", "exp_time"] == 1.0
    assert table.loc["cohort", "exp_memory"] == 0.0
    assert table.loc["cohort", "verdict"] == "linear or better"
    assert table.loc["questions", "exp_time"] == 2.0
    assert table.loc["questions", "exp_memory"] == 1.0
    assert table.loc["questions", "verdict"] == "worse than linear"
    assert table.loc["questions", "s@1600"] == 480


def test_budget_table_compares_each_measure_with_its_budget():
    times = pd.DataFrame(
        {"stage": ["cohort", "notebooks"], "seconds": [100.0, 550.0], "cpu_seconds": [90.0, 900.0]}
    )
    nbs = rb.notebook_times(
        "== notebooks\n  ok  05_representations                          12.0s \n"
        "  FAIL 13_failure_explorer                         45.5s boom\n"
        "  ok  05_representations                          11.0s \n"
        "[IPKernelApp] WARNING | Kernel is running over TCP without encryption.\n"
        "  ok  07_sp1_aggregation_tax.ipynb               24.5s \n"
    )
    assert nbs.to_dict("list") == {
        "notebook": ["05_representations", "13_failure_explorer", "07_sp1_aggregation_tax"],
        "ok": [True, False, True],
        "seconds": [11.0, 45.5, 24.5],
    }
    table = rb.budget_table(times, nbs, make_test_s=532.0).set_index("item")
    assert table.loc["reproduce after install", "measured_s"] == 650.0
    assert table.loc["reproduce after install", "met"] == "no"
    assert table.loc["each paper notebook", "measured_s"] == 45.5
    assert table.loc["each paper notebook", "met"] == "no"
    assert "1 of 3 over" in table.loc["each paper notebook", "note"]
    assert table.loc["make test", "met"] == "yes"
    assert table.loc[".ci/run", "met"] == "not measured"
    assert table.loc["  05_representations", "met"] == "yes"
    assert table.loc["  13_failure_explorer", "note"] == "FAILED"


def test_a_missing_times_file_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(rb, "BUILD_DIR", tmp_path)
    with pytest.raises(rb.BenchInputError, match="run `clintrace reproduce` first"):
        rb.read_stage_times(tmp_path / "nope.csv")
    assert rb.main(["--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reproduce_times.csv: no such file" in err
    (tmp_path / "bad.csv").write_text("stage,seconds\nx,1\n")
    with pytest.raises(rb.BenchInputError, match=r"missing column\(s\) \['cpu_seconds'\]"):
        rb.read_stage_times(tmp_path / "bad.csv")


def test_growth_is_fitted_on_cpu_seconds_when_measured():
    # wall time blown up by another job at the largest scale; the CPU seconds stay linear
    runs = pd.DataFrame(
        {
            "stage": ["dialogues"] * 3,
            "patients": [100, 200, 400],
            "seconds": [10.0, 20.0, 400.0],
            "cpu_seconds": [9.0, 18.0, 36.0],
            "peak_mb": [200, 400, 800],
        }
    )
    row = rb.growth_table(runs).iloc[0]
    assert row["exp_time"] == 1.0 and row["verdict"] == "linear or better"
    assert row["cpu@400"] == 36.0 and row["s@400"] == 400.0
    assert rb.growth_table(runs.drop(columns="cpu_seconds")).iloc[0]["verdict"] == (
        "worse than linear"
    )


def test_markdown_renders_without_tabulate():
    frame = pd.DataFrame({"item": ["make test", ".ci/run"], "measured_s": [532.5, float("nan")]})
    assert rb.markdown(frame) == (
        "| item | measured_s |\n|---|---|\n| make test | 532.5 |\n| .ci/run |  |"
    )


def test_reproduce_is_the_runs_wall_when_stages_overlap():
    """Two stages side by side, then the notebooks: the run took 600 s (first start to last
    end), not the 690 s their seconds add up to; that sum would miss the 10-minute budget."""
    times = pd.DataFrame(
        {
            "stage": ["population", "questions", "notebooks"],
            "seconds": [290.0, 100.0, 300.0],
            "cpu_seconds": [280.0, 95.0, 500.0],
            "start": [10.0, 0.0, 300.0],
            "end": [300.0, 100.0, 600.0],
        }
    )
    assert rb.reproduce_wall(times) == 600.0
    row = rb.budget_table(times, rb.notebook_times("")).iloc[0]
    assert (row["measured_s"], row["met"]) == (600.0, "yes")
    assert "sum of stage seconds 690" in row["note"]
    old = times.drop(columns=["start", "end"])  # a table from before: one stage after another
    assert rb.reproduce_wall(old) == 690.0
    assert rb.budget_table(old, rb.notebook_times("")).iloc[0]["met"] == "no"
    assert rb.reproduce_wall(times.iloc[:0]) is None
