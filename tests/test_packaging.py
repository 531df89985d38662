"""The kit's own packaging: pyproject vs environment.yml, Makefile, CI, README, notebooks."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import yaml
from packaging.requirements import Requirement

from clinlib.core.config import REPO_ROOT


def _pyproject_requirements() -> dict[str, str]:
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    reqs = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["dev"]
    return {Requirement(r).name.lower(): str(Requirement(r).specifier) for r in reqs}


def _environment_requirements() -> dict[str, str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    out = {}
    for entry in pip:
        if entry.startswith("-e"):
            continue
        req = Requirement(entry)
        out[req.name.lower()] = str(req.specifier)
    return out


def _disagreements(py: dict[str, str], env: dict[str, str]) -> list[str]:
    """What differs between two requirement maps (name -> specifier), one line each."""
    out = [f"only in pyproject: {n}" for n in sorted(set(py) - set(env))]
    out += [f"only in environment.yml: {n}" for n in sorted(set(env) - set(py))]
    out += [f"{n}: {py[n]} vs {env[n]}" for n in sorted(set(py) & set(env)) if py[n] != env[n]]
    return out


def test_environment_yml_matches_pyproject():
    assert _disagreements(_pyproject_requirements(), _environment_requirements()) == []


def test_every_dependency_has_a_lower_bound():
    for name, spec in _pyproject_requirements().items():
        assert ">=" in spec or "==" in spec, f"{name} has no lower bound"


def test_the_comparison_names_each_disagreement():
    py = {"duckdb": ">=1.1", "pandas": ">=2.2", "altair": ">=5.4"}
    env = {"pandas": ">=2.0", "altair": ">=5.4", "scipy": ">=1.13"}
    assert _disagreements(py, env) == [
        "only in pyproject: duckdb",
        "only in environment.yml: scipy",
        "pandas: >=2.2 vs >=2.0",
    ]


def test_console_script_declared():
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert data["project"]["scripts"]["clintrace"] == "clinlib.cli:app"


def test_make_help_lists_every_target():
    makefile = (REPO_ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z][a-zA-Z_-]*):", makefile, re.M))
    described = set(re.findall(r"^([a-zA-Z][a-zA-Z_-]*):.*## ", makefile, re.M))
    assert targets == described, f"targets without a description: {targets - described}"
    out = subprocess.run(["make", "-s", "help"], cwd=REPO_ROOT, capture_output=True, text=True)
    for target in ("reproduce", "test", "bench-cohort"):
        assert re.search(rf"^\s+{target}\s", out.stdout, re.M), out.stdout


def test_ci_runs_the_readme_test_command():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    commands = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")]
    # the unit suite + notebooks, then the real local model (its source build does not fit
    # make test's budget on a fresh machine)
    assert [c.strip() for c in commands[-2:]] == ["make test", "make test-local"]
    readme = (REPO_ROOT / "README.md").read_text()
    head = readme[:800]
    assert "make reproduce" in head and "make test" in head
    assert "make test-local" in readme


def test_notebooks_are_committed_without_outputs():
    notebooks = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs"), f"{path.name} has outputs"
                assert cell.get("execution_count") is None, f"{path.name} has execution counts"


CHECKS_CELL = "# Checks of this notebook's headline results"


def test_notebooks_are_numbered_and_end_by_writing_their_figure():
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        assert re.match(r"^\d{2}_[a-z0-9_]+\.ipynb$", path.name), path.name
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        # a final cell of checks of the headline results (clinlib.headline) may follow
        if code[-1].startswith(CHECKS_CELL):
            code = code[:-1]
        # the last other code cell saves figures/<its own stem>.png
        assert re.search(rf'savefig\([^\n]*"{path.stem}"', code[-1]), f"{path.name} ends without it"
        assert not any(c.startswith(CHECKS_CELL) for c in code), f"{path.name}: checks not last"


def test_test_local_runs_every_notebook_with_a_local_model_section():
    # make test runs before the local model is installed, so a notebook's local-model section
    # only prints "skipped" there; make test-local runs those notebooks again with the model
    # required, and their last cell fails when the section did not run
    makefile = (REPO_ROOT / "Makefile").read_text().replace("\\\n", " ")
    listed = re.search(r"^LOCAL_NOTEBOOKS\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    recipe = makefile.split("\ntest-local:", 1)[1].split("\n\n", 1)[0]
    assert "--nbmake" in recipe and "$(LOCAL_NOTEBOOKS)" in recipe
    assert recipe.count("CLINTRACE_REQUIRE_LOCAL_MODEL=1") == 2
    # and make test switches the sections off even where the model is installed: it runs two
    # notebooks at a time, and both would serve on the local model's one port
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "CLINTRACE_LOCAL_MODEL=off" in test_recipe and "CLINTRACE_LOCAL_MODEL=off" not in recipe
    with_local = []
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        if any("local_available()" in "".join(c["source"]) for c in cells):
            with_local.append(f"notebooks/{path.name}")
            assert "headline.require_local(" in "".join(cells[-1]["source"]), path.name
    assert listed == with_local
