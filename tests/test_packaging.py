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


def test_environment_yml_matches_pyproject():
    py, env = _pyproject_requirements(), _environment_requirements()
    assert set(py) == set(env), (
        f"only in pyproject: {set(py) - set(env)}; only in env: {set(env) - set(py)}"
    )
    mismatched = {k: (py[k], env[k]) for k in py if py[k] != env[k]}
    assert not mismatched, f"version bounds disagree: {mismatched}"


def test_every_dependency_has_a_lower_bound():
    for name, spec in _pyproject_requirements().items():
        assert ">=" in spec or "==" in spec, f"{name} has no lower bound"


def test_environment_yml_detects_a_mismatch(tmp_path):
    # The comparison itself must be able to fail: drop one dependency and compare again.
    py = _pyproject_requirements()
    env = dict(_environment_requirements())
    env.pop("duckdb")
    assert set(py) != set(env)


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
    assert commands[-1].strip() == "make test"
    readme = (REPO_ROOT / "README.md").read_text()
    head = readme[:800]
    assert "make reproduce" in head and "make test" in head


def test_notebooks_are_committed_without_outputs():
    notebooks = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs"), f"{path.name} has outputs"
                assert cell.get("execution_count") is None, f"{path.name} has execution counts"


def test_notebooks_are_numbered_and_write_their_figure():
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        assert re.match(r"^\d{2}_[a-z0-9_]+\.ipynb$", path.name), path.name
        source = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        assert "savefig(" in source and path.stem[:3] in source, f"{path.name} writes no figure"
