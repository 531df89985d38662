"""The front door names nothing that is not there: every repository path README.md and
docs/guide.md name (files, folders, dotted module names, ``make`` targets, notebooks)
resolves, and README.md stays a front door (at most 250 lines, the notebook map complete)."""

import re
from itertools import pairwise
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["README.md", "docs/guide.md"]
README_MAX_LINES = 250

# Paths the kit creates rather than ships: each must be git-ignored by the pattern named,
# and a path under it is not looked up on disk (a clean clone has none of it).
# data/build without a slash: a worktree links it to a shared build, and a link is not a folder
GENERATED = {".venv": ".venv/", "data/build": "data/build", "figures": "figures/*/"}
# the stage packages, which the notebook map names relative to clinlib/ ("dialogue/stats.py")
STAGES = ("core", "data", "dialogue", "tasks", "strategies", "llm", "eval", "analysis")
PLACEHOLDER = re.compile(r"[<>*{}]|NN|\.\.\.|…")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
NOTEBOOKS = re.compile(
    r"\bnotebooks?\s+(\d{2}(?:(?:\s*[–-]\s*|,\s*|\s+and\s+|\s+or\s+)\d{2})*)", re.I
)
MAP_ROW = re.compile(r"^\|\s*(\d{2}) ([a-z0-9_]+)\s*\|", re.M)
APP_ROW = re.compile(r"^\|\s*apps/([a-z0-9_]+)\b", re.M)


def _roots() -> set[str]:
    return {p.name for p in REPO.iterdir() if not p.name.startswith(".git")} - {".venv"}


def _code_chunks(text: str) -> list[list[str]]:
    """The words of each code span and fenced block: where the docs name paths and commands."""
    chunks = CODE_SPAN.findall(FENCE.sub("", text)) + FENCE.findall(text)
    return [[t for t in re.split(r"[\s()\[\],;=\"'|]+", c) if t] for c in chunks]


def _generated(path: str) -> bool:
    return any(path == g or path.startswith(g + "/") for g in GENERATED)


def _path_problem(token: str, roots: set[str]) -> str | None:
    path = token.rstrip(".,:;")
    head = path.split("/", 1)[0]
    if "/" not in path and head not in roots or head in ("", "http:", "https:"):
        return None
    if head not in roots and head not in STAGES and not _generated(path):
        return None  # an artifact inside a build folder (raw/hosp/...), not a repository path
    concrete = []
    for part in path.rstrip("/").split("/"):
        if PLACEHOLDER.search(part):
            break
        concrete.append(part)
    path = "/".join(concrete)
    if _generated(path) or not path:
        return None
    here = [REPO / path] + ([REPO / "clinlib" / path] if head in STAGES else [])
    return None if any(p.exists() for p in here) else f"`{token}`: no such file or folder"


def _dotted_problem(token: str) -> str | None:
    name = token.rstrip(".,:;")
    if not re.fullmatch(r"(clinlib|bench)(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
        return None
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:n])
        module = next(
            (p for p in (base / "__init__.py", base.with_suffix(".py")) if p.exists()), None
        )
        if module is None:
            continue
        rest = parts[n:]
        if not rest or (len(rest) == 1 and re.search(rf"\b{rest[0]}\b", module.read_text())):
            return None
        break
    return f"`{token}`: no such module or name"


def _make_problems(chunks: list[list[str]], targets: set[str]) -> list[str]:
    pairs = [(a, b) for words in chunks for a, b in pairwise(words)]
    named = {b for a, b in pairs if a == "make" and re.fullmatch(r"[a-z][\w-]*", b)}
    return [f"`make {t}`: no such Makefile target" for t in sorted(named - targets)]


def _notebook_problems(text: str) -> list[str]:
    have = {p.name[:2] for p in (REPO / "notebooks").glob("*.ipynb")}
    cited = {n for m in NOTEBOOKS.finditer(text) for n in re.findall(r"\d{2}", m.group(1))}
    return [f"notebook {n}: no notebooks/{n}_*.ipynb" for n in sorted(cited - have)]


def stale_references(text: str, where: Path) -> list[str]:
    """What ``text`` (a Markdown file at ``where``) names that the repository does not hold."""
    roots = _roots()
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", makefile, re.M))
    chunks = _code_chunks(text)
    tokens = [t for words in chunks for t in words]
    found = [_path_problem(t, roots) for t in tokens] + [_dotted_problem(t) for t in tokens]
    for target in LINK.findall(text):
        target = target.split("#", 1)[0]
        if target and not re.match(r"[a-z]+:", target) and not (where.parent / target).exists():
            found.append(f"link ({target}): no such file or folder")
    found += _make_problems(chunks, targets) + _notebook_problems(text)
    return sorted({f for f in found if f})


@pytest.mark.parametrize("name", CHECKED)
def test_every_path_named_resolves(name):
    path = REPO / name
    assert not (bad := stale_references(path.read_text(), path)), "\n".join(bad)


def test_the_checker_finds_planted_stale_paths():
    planted = (
        "Answers live in `clinlib/tasks/answers.py` and `clinlib/cli_nothing.py`; see\n"
        "[the guide](docs/no-such-guide.md), `clinlib.tasks.nowhere`, `clinlib.core.pages.NO_NAME`,\n"
        "`dialogue/missing.py`, notebooks 07 and 99, and\n\n```bash\nmake no-such-target\n```\n"
    )
    bad = stale_references(planted, REPO / "README.md")
    assert len(bad) == 8, bad
    for name in (
        "answers.py",
        "cli_nothing",
        "no-such-guide",
        "tasks.nowhere",
        "NO_NAME",
        "missing.py",
        "notebook 99",
        "make no-such-target",
    ):
        assert any(name in b for b in bad), (name, bad)
    # and what exists, or is generated, or is a build artifact, passes
    fine = (
        "`clinlib/core/` `clinlib.core.pages.PAGE_SIZE` `figures/<profile>/NN_slug.png`\n"
        "`data/build/<p>/site/` `raw/hosp/*.csv.gz` `core/charts.py` [design](docs/design.md)\n"
        "notebooks 04, 06 and 11, `make test`, `.venv/bin/clintrace`, `bench.prefix_share`\n"
    )
    assert stale_references(fine, REPO / "README.md") == []


def test_generated_paths_are_git_ignored():
    ignored = (REPO / ".gitignore").read_text().splitlines()
    for root, pattern in GENERATED.items():
        assert pattern in ignored, f"{root} is treated as generated but .gitignore lacks {pattern}"


def test_readme_is_a_front_door():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    first_block = FENCE.search(readme).group(1).splitlines()
    assert [ln.split("#")[0].strip() for ln in first_block[:2]] == ["make reproduce", "make test"]
    # the notebook map names every notebook and both apps, each by its file's own name
    mapped = {f"{n}_{slug}.ipynb" for n, slug in MAP_ROW.findall(readme)}
    assert mapped == {p.name for p in (REPO / "notebooks").glob("*.ipynb")}
    assert set(APP_ROW.findall(readme)) == {p.stem for p in (REPO / "notebooks/apps").glob("*.py")}
