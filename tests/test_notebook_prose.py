"""Every notebook's hand-written Markdown (and the literal text of its md() / claim()
templates) states no number the kit computes (issue 25 §1).

A number in a Markdown cell must be structural (an id of a notebook, task, table, figure,
section or step; a parameter the code sets) or a seed citation matching the seed-facts table
(clinlib.core.seed_facts) in a sentence that names its source; the kit's own results appear
only in output rendered by code (``clinlib.md``) or in checked claims (``clinlib.claim``),
which run on the profile the notebook runs on: nbmake on quick (``make test``) and
``make reproduce`` on paper. The rule is ``clinlib.core.prose.prose_numbers``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from clinlib.core.prose import prose_numbers
from clinlib.core.seed_facts import SEEDS
from clinlib.core.seed_sections import SECTIONS

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _params():
    for path in NOTEBOOKS:
        yield pytest.param(path, id=path.stem)


def test_all_eighteen_notebooks_are_checked():
    assert len(NOTEBOOKS) == 18  # 01-18


def _templates(source: str) -> list[str]:
    """The literal text of the templates a code cell passes to md() and claim(), fields blanked
    (a typed number in a template is prose too; what a field renders is computed)."""
    if source.lstrip().startswith("%%"):
        return []
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name in ("md", "claim", "Markdown"):
            out.extend(_literal_text(node.args[0]))
    return out


def _literal_text(node: ast.expr) -> list[str]:
    """A template's typed text: a string constant's (fields blanked), an f-string's literal
    parts (what it interpolates is computed), and both sides of a ``+`` or implicit join."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.sub(r"\{[^{}]*\}", " FIELD ", node.value)]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else " FIELD " for v in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [" FIELD ".join(_literal_text(node.left) + _literal_text(node.right))]
    return []


def _prose_of(cell: dict) -> list[str]:
    source = "".join(cell["source"])
    return [source] if cell["cell_type"] == "markdown" else _templates(source)


def test_templates_are_scanned_too():
    cell = {"cell_type": "code", "source": ['md("~140 questions per cell; {n:,} here", n=3)']}
    assert [p.number for t in _prose_of(cell) for p in prose_numbers(t)] == ["140"]


def test_f_string_templates_are_scanned_too():
    # Markdown(f"...") renders computed fields; its literal text is hand-written prose
    src = 'Markdown(f"{len(q):,} questions; the kit " + f"keeps 12 of {n} tasks")'
    cell = {"cell_type": "code", "source": [src]}
    assert [p.number for t in _prose_of(cell) for p in prose_numbers(t)] == ["12"]


@pytest.mark.parametrize("path", list(_params()))
def test_markdown_states_no_uncomputed_number(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [
        f"cell {cell.get('id', i)}: {number}"
        for i, cell in enumerate(cells)
        for text in _prose_of(cell)
        for number in prose_numbers(text)
    ]
    assert not found, f"{path.name}: numbers in prose nothing renders or cites:\n" + "\n".join(
        found
    )


_BARE_SECTION = re.compile(r"(?<![\w.])§(\d+\.\d+)")
_OTHER_SEED = re.compile(
    "|".join(re.escape(n) for stem, n in SEEDS.items() if stem != "clintracebench")
)


def bare_section_errors(text: str) -> list[str]:
    """A bare "§5.5" in a notebook is ClinTraceBench's (unless its line names another seed):
    the section must exist (``clinlib.core.seed_sections.SECTIONS``)."""
    out = []
    for m in _BARE_SECTION.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        if not _OTHER_SEED.search(line) and ("clintracebench", m[1]) not in SECTIONS:
            out.append(f"§{m[1]}: ClinTraceBench has no such section")
    return out


def test_bare_section_check():
    assert bare_section_errors("(§5.5, Table 3); §5.1–5.2") == []
    assert bare_section_errors("as §5.9 shows") == ["§5.9: ClinTraceBench has no such section"]
    assert bare_section_errors("PopMedQA §2.1 bins") == []


@pytest.mark.parametrize("path", list(_params()))
def test_bare_section_numbers_are_the_papers(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [msg for c in cells for t in _prose_of(c) for msg in bare_section_errors(t)]
    assert not found, f"{path.name}: " + "; ".join(found)
