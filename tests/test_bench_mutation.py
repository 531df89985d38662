"""bench.mutation's bookkeeping (not the mutation run itself, which is `make bench-mutation`):
mutant names to modules, mutmut's result lines, the per-module score and the scratch config."""

from __future__ import annotations

import tomllib

import pytest

from bench import mutation as M

RESULTS = """\
    clinlib.tasks.gates.common.x__passed__mutmut_1: killed
    clinlib.tasks.gates.common.x__passed__mutmut_2: survived
    clinlib.tasks.gates.common.x__rows_for__mutmut_4: timeout
    clinlib.llm.tokens.xǁTokenCounterǁcount__mutmut_3: killed
    clinlib.llm.tokens.x_estimate_cost__mutmut_1: survived
noise line without a mutant
"""


def test_module_of_function_and_method_mutants():
    assert M.module_of("clinlib.tasks.gates.common.x__passed__mutmut_1") == (
        "clinlib.tasks.gates.common"
    )
    assert M.module_of("clinlib.llm.tokens.xǁTokenCounterǁcount__mutmut_3") == "clinlib.llm.tokens"


def test_scores_per_module_worked_by_hand():
    statuses = M.parse_results(RESULTS)
    assert len(statuses) == 5
    rows = {r["module"]: r for r in M.score_table(statuses)}
    # gates.common: 1 killed, 1 survived, 1 timeout -> 1 / 3
    g = rows["clinlib.tasks.gates.common"]
    assert (g["mutants"], g["killed"], g["survived"], g["other"]) == (3, 1, 1, 1)
    assert g["score"] == pytest.approx(1 / 3)
    t = rows["clinlib.llm.tokens"]
    assert (t["mutants"], t["killed"], t["survived"], t["score"]) == (2, 1, 1, 0.5)


def test_prepare_writes_a_scratch_copy_with_the_groups_config(tmp_path):
    scratch = M.prepare("guards", tmp_path)
    assert (scratch / "clinlib" / "core" / "guards.py").exists()
    assert not list(scratch.rglob("__pycache__"))
    conf = tomllib.loads((scratch / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert conf["only_mutate"] == ["clinlib/core/guards.py"]
    assert conf["pytest_add_cli_args_test_selection"] == list(M.GROUPS["guards"][1])
    assert "-k" in conf["pytest_add_cli_args"]


def test_every_group_names_existing_modules_and_tests():
    for modules, tests in M.GROUPS.values():
        for pattern in modules:
            assert list(M.REPO.glob(pattern)), pattern
        for test in tests:
            assert (M.REPO / test).exists(), test


def test_unknown_group_is_refused(capsys):
    assert M.main(["--groups", "nope"]) == 2
    assert "unknown group(s) nope" in capsys.readouterr().err


def test_split_diffs_keeps_each_mutants_section():
    text = "=== a.x_f__mutmut_1\n--- f.py\n+++ f.py\n-x = 1\n+x = 2\n=== a.x_g__mutmut_2\n-y\n+z\n"
    assert M.split_diffs(text) == {
        "a.x_f__mutmut_1": "--- f.py\n+++ f.py\n-x = 1\n+x = 2",
        "a.x_g__mutmut_2": "-y\n+z",
    }
    assert M.split_diffs("") == {}


def test_mutants_globs_select_the_scored_mutants():
    statuses = {
        "clinlib.analysis.stats.x_holm_bonferroni__mutmut_1": "killed",
        "clinlib.analysis.stats.x_holm_bonferroni__mutmut_2": "survived",
        "clinlib.analysis.stats.x_wilson_ci__mutmut_1": "not checked",
        "clinlib.analysis.stats.x_pearson__mutmut_1": "killed",
    }
    got = M.selected(statuses, ["clinlib.analysis.stats.x_holm*", "*x_wilson_ci__*"])
    assert sorted(got) == sorted(list(statuses)[:3])
    assert M.selected(statuses, []) == statuses  # no globs: every mutant
    # only the selected are scored: 1 killed of 3
    (row,) = M.score_table(got)
    assert (row["mutants"], row["killed"], row["survived"], row["other"]) == (3, 1, 1, 1)
