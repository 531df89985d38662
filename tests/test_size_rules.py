"""Size rules kept honestly (docs/design.md "Layout"): the formatter lays code out, helpers used
across modules have public names, and the package root holds modules, not command files.

The caps below are the kit's own rule, not a measurement: a `# fmt: skip` is allowed only where
layout carries meaning (a table), with a reason on the line above; a module that needs another's
helper imports a public name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import clinlib

ROOT = Path(clinlib.__file__).resolve().parent
MAX_FMT_SKIP = 50
MAX_PRIVATE_IMPORTS = 20


def fmt_skips(text: str) -> list[tuple[int, bool]]:
    """(line number, justified) of each `# fmt: skip` or `# fmt: off`; justified = a reason comment
    right above."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if "# fmt: skip" not in line and "# fmt: off" not in line:
            continue
        above = lines[i - 1].strip() if i else ""
        out.append((i + 1, above.startswith("#") and len(above) > 10))
    return out


def private_imports(text: str, mod: str) -> list[str]:
    """`from clinlib.x import _name` of another module's private name (dunders are not private)."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("clinlib"):
            continue
        if node.module == mod:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                out.append(f"{mod}: {node.module}.{alias.name}")
    return out


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)


def _sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_fmt_skip_is_rare_and_each_one_justified():
    found = [(p, n, ok) for p in _sources() for n, ok in fmt_skips(p.read_text())]
    unjustified = [f"{p.relative_to(ROOT.parent)}:{n}" for p, n, ok in found if not ok]
    assert not unjustified, f"`# fmt: skip` without a reason comment above: {unjustified}"
    assert len(found) <= MAX_FMT_SKIP, f"{len(found)} `# fmt: skip` lines (cap {MAX_FMT_SKIP})"


def test_the_fmt_skip_counter_sees_an_unjustified_skip():
    text = "x = 1\ny = [1,2]  # fmt: skip\n# layout: a table of rows\nz = [1,2]  # fmt: skip\n# fmt: off\n"
    assert fmt_skips(text) == [(2, False), (4, True), (5, False)]


def test_few_cross_module_private_imports():
    found = [hit for p in _sources() for hit in private_imports(p.read_text(), _module(p))]
    assert len(found) <= MAX_PRIVATE_IMPORTS, f"{len(found)} imports:\n" + "\n".join(found)


def test_the_private_import_counter_counts_only_other_modules_privates():
    text = (
        "from clinlib.core.io import _tmp_name, public, __all__\n"
        "from clinlib.fake import _own\n"
        "from pandas import _private\n"
    )
    assert private_imports(text, "clinlib.fake") == ["clinlib.fake: clinlib.core.io._tmp_name"]


def test_the_package_root_holds_no_command_files():
    assert not sorted(ROOT.glob("cli_*.py"))
    assert (ROOT / "cli" / "__init__.py").exists()


ISSUE_CITATION = re.compile(r"\bissues? \d+")


def test_no_docstring_or_comment_cites_an_issue_number():
    # history lives in docs/changelog.md; a student reading the code cannot look up "issue 30"
    hits = [
        f"{p.relative_to(ROOT.parent)}:{i}"
        for p in _sources()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if ISSUE_CITATION.search(line)
    ]
    assert not hits, hits


def test_the_issue_citation_pattern_matches_the_old_forms():
    cited = ["(issue 30 §3)", "issue 27; notebook 16", "issues 24 and 26"]
    assert all(ISSUE_CITATION.search(s) for s in cited)
    assert not ISSUE_CITATION.search("the tissue 3 samples")
