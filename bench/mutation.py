"""Mutation score of the kit's pure core (issue 33 §3): ``make bench-mutation``.

The tool is mutmut 3 (maintained, PyPI ``mutmut``). Why mutmut rather than cosmic-ray: mutmut
3 forks each mutant from one warmed-up pytest process and runs only the tests that reached the
mutated function (it records them in a first, clean pass), so a mutant costs a fork, not a
fresh interpreter importing pandas and DuckDB; cosmic-ray runs its test command once per
mutant. On this 2-core machine that is the difference between minutes and hours.

Each group names the modules it mutates and the test files that cover them. A group runs in
its own scratch copy of the repository (``data/build/_mutation/<group>``: clinlib, tests,
conftest.py and pyproject.toml with a ``[tool.mutmut]`` table added), so the working tree is
never touched and its ``mutants/`` folder never lands in git. Tests that need the quick
profile build are left out (they cover the pipeline, not these functions).

Left out of the core on purpose: the event-id derivation is SQL inside Python strings
(clinlib.data.events), where a string mutant only breaks the query; its boundaries are pinned
by tests/data/test_event_windows.py instead.

Usage::

    python -m bench.mutation                    # every group
    python -m bench.mutation --groups gates,bins --out /tmp/mut
    python -m bench.mutation --groups stats --mutants 'clinlib.analysis.stats.question.x_holm*'

``--mutants`` narrows a group to the mutants whose names match its comma-separated globs
(mutmut's own names, ``<module>.x_<function>__mutmut_<n>``): on a loaded 2-core machine a
whole group can take an hour, so a group is measured function by function; the score then
counts only the selected mutants.

Prints, per module, mutants / killed / survived / other (timeout, suspicious, segfault) and
the score = killed / (killed + survived + other); then every survivor with its diff. The same
text goes to ``<out>/report.md``.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.scratch import REPO, copy_repo

DEFAULT_OUT = REPO / "data" / "build" / "_mutation"

# group -> (modules to mutate, test files that cover them)
GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "answers": (
        ("clinlib/tasks/answers/*",),
        (
            "tests/tasks/test_answers.py",
            "tests/tasks/test_parser_cases.py",
            "tests/tasks/test_order.py",  # T10's order parser (answers/order.py)
            "tests/tasks/test_parser_readings.py",  # the readings' edges (issue 33 §3)
            "tests/tasks/test_t11.py",  # T11's decision scoring (answers/decision.py)
            "tests/tasks/test_overlap.py",  # token F1 / the judge's overlap (answers/overlap.py)
        ),
    ),
    "gates": (
        (
            "clinlib/tasks/gates/common.py",
            "clinlib/tasks/gates/content.py",
            "clinlib/tasks/gates/leaks.py",  # L3 per answer shape
            "clinlib/tasks/gates/structure.py",
            "clinlib/tasks/gates/gold.py",  # L2 gold recompute
            "clinlib/tasks/gates/ordering.py",  # L3 for T10 / T11
            # run_gates, check_gates, the report, and _load_inputs (parquet and the source,
            # patched in tests/tasks/test_gate_inputs.py)
            "clinlib/tasks/gates/run.py",
            "clinlib/tasks/gates/__init__.py",  # re-exports only: no function, no mutant
        ),
        (
            "tests/tasks/test_gates.py",
            "tests/tasks/test_thresholds.py",
            "tests/tasks/test_gate_l4_edges.py",  # L4 at every threshold (issue 33 §3)
            "tests/tasks/test_gate_l3_edges.py",  # L3 at its edges (issue 33 §3)
            "tests/tasks/test_t11.py",  # t11_leak (ordering.py); T10's need the quick build
            "tests/tasks/test_gate_run_edges.py",  # ordering.py and run.py (issue 33 §3)
            "tests/tasks/test_gate_inputs.py",  # run.py's _load_inputs (issue 33 §3)
            "tests/tasks/test_gate_rows.py",  # L0 rows, L1 exclusions, helpers (issue 33 §3)
        ),
    ),
    "bins": (
        ("clinlib/tasks/recompute/arithmetic.py", "clinlib/tasks/generators/common.py"),
        (
            "tests/tasks/test_thresholds.py",
            "tests/tasks/test_gates.py",
            "tests/tasks/test_task_generators.py",
            "tests/tasks/test_bins_edges.py",  # common.py / arithmetic.py edges (issue 33 §3)
        ),
    ),
    "stats": (
        ("clinlib/analysis/stats/question.py",),
        (
            "tests/analysis/test_stats.py",
            "tests/analysis/test_stats_edges.py",
            "tests/analysis/test_stats_mut.py",  # bootstrap, Pearson, pairwise (issue 33 §3)
        ),
    ),
    "checks": (
        ("clinlib/dialogue/checks.py",),
        (
            "tests/dialogue/test_verify.py",
            "tests/dialogue/test_check_boundaries.py",
            "tests/dialogue/test_noise.py",  # check_noise_facts
            "tests/dialogue/test_check_details.py",  # branches and messages (issue 33)
        ),
    ),
    "guards": (
        ("clinlib/core/guards.py",),
        (
            "tests/core/test_guards.py",
            "tests/core/test_guard_boundaries.py",
            "tests/core/test_guard_manifests.py",  # manifests, basis, messages (issue 33)
        ),
    ),
    "cost": (
        ("clinlib/llm/tokens.py",),
        (
            "tests/llm/test_llm_tokens.py",
            "tests/llm/test_tokens_mut.py",  # the counting functions' edges (issue 33 §3)
            "tests/llm/test_tokens_vocab.py",  # vocabulary loading, registration, warming
        ),
    ),
}
# the quick-profile tests build the pipeline (minutes) and exercise none of these functions
DESELECT = "not quick_build and not bare_strategy_string"
OTHER = ("timeout", "suspicious", "segfault", "no tests", "check was interrupted by user")


def _toml_list(items) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def prepare(group: str, out: Path) -> Path:
    """A scratch copy of the repository configured to mutate ``group``."""
    modules, tests = GROUPS[group]
    scratch = copy_repo(out / group, ("clinlib", "tests"))
    config = (
        "\n[tool.mutmut]\n"
        'source_paths = ["clinlib"]\n'
        f"only_mutate = {_toml_list(modules)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        f'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-k", "{DESELECT}"]\n'
        'also_copy = ["tests", "conftest.py"]\n'
    )
    with open(scratch / "pyproject.toml", "a", encoding="utf-8") as fh:
        fh.write(config)
    return scratch


def _mutmut(scratch: Path, *args: str, log: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    extra = os.environ.get("MUTMUT_PATH")  # where mutmut is, when not in this interpreter
    if extra:
        env["PYTHONPATH"] = extra
    cmd = [sys.executable, "-m", "mutmut", *args]
    if log is None:
        return subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    with open(log, "w", encoding="utf-8") as fh:
        subprocess.run(cmd, cwd=scratch, env=env, stdout=fh, stderr=subprocess.STDOUT,
                       check=True)  # fmt: skip
    return ""


_RESULT = re.compile(r"^\s*(\S+): (.+)$")


def module_of(mutant: str) -> str:
    """``clinlib.a.b.x_func__mutmut_3`` / ``clinlib.a.b.xǁClsǁmeth__mutmut_3`` -> ``clinlib.a.b``."""
    return re.split(r"\.x(?:_|ǁ)", mutant, maxsplit=1)[0]


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true`` lines -> {mutant: status}."""
    out = {}
    for line in text.splitlines():
        m = _RESULT.match(line)
        if m and "__mutmut_" in m.group(1):
            out[m.group(1)] = m.group(2).strip()
    return out


def score_table(statuses: dict[str, str]) -> list[dict]:
    """Per module: mutants, killed, survived, other and the score."""
    by_module: dict[str, Counter] = defaultdict(Counter)
    for mutant, status in statuses.items():
        kind = status if status in ("killed", "survived") else "other"
        by_module[module_of(mutant)][kind] += 1
    rows = []
    for module in sorted(by_module):
        c = by_module[module]
        n = c["killed"] + c["survived"] + c["other"]
        rows.append({"module": module, "mutants": n, "killed": c["killed"],
                     "survived": c["survived"], "other": c["other"],
                     "score": c["killed"] / n if n else float("nan")})  # fmt: skip
    return rows


def selected(statuses: dict[str, str], globs: list[str]) -> dict[str, str]:
    """The statuses of the mutants matching ``globs`` (all of them when there are none)."""
    if not globs:
        return statuses
    return {m: s for m, s in statuses.items() if any(fnmatch.fnmatchcase(m, g) for g in globs)}


def run_group(
    group: str, out: Path, globs: list[str] | None = None
) -> tuple[list[dict], dict[str, str], float]:
    """Run one group (only the mutants matching ``globs``, if given); returns its score rows,
    its survivors' diffs and the wall time."""
    globs = list(globs or [])
    scratch = prepare(group, out)
    t0 = time.perf_counter()
    _mutmut(scratch, "run", *globs, log=out / f"{group}.log")
    seconds = time.perf_counter() - t0
    statuses = selected(parse_results(_mutmut(scratch, "results", "--all", "true")), globs)
    survivors = diffs(scratch, [m for m, s in statuses.items() if s == "survived"])
    return score_table(statuses), survivors, seconds


# One interpreter prints every survivor's diff (``mutmut show`` would start one per mutant).
_DIFFS = """
import sys
from mutmut.__main__ import find_mutant
from mutmut.mutation.diff_apply import get_diff_for_mutant
for name in sys.argv[1:]:
    print("=== " + name)
    print(get_diff_for_mutant(name, path=find_mutant(name).path))
"""


def diffs(scratch: Path, names: list[str]) -> dict[str, str]:
    """{mutant: its diff} for ``names`` (mutmut 3's own diff of each mutant)."""
    if not names:
        return {}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("MUTMUT_PATH"):
        env["PYTHONPATH"] = os.environ["MUTMUT_PATH"]
    text = subprocess.run([sys.executable, "-c", _DIFFS, *names], cwd=scratch, env=env,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    return split_diffs(text)


def split_diffs(text: str) -> dict[str, str]:
    """The ``=== name`` sections of :data:`_DIFFS`' output."""
    out, name, body = {}, None, []
    for line in text.splitlines():
        if line.startswith("=== "):
            if name is not None:
                out[name] = "\n".join(body).strip()
            name, body = line[4:].strip(), []
        else:
            body.append(line)
    if name is not None:
        out[name] = "\n".join(body).strip()
    return out


def render(results: dict[str, tuple[list[dict], dict[str, str], float]]) -> str:
    lines = ["| group | module | mutants | killed | survived | other | score |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for group, (rows, _, _) in results.items():
        for r in rows:
            lines.append(f"| {group} | {r['module']} | {r['mutants']} | {r['killed']} | "
                         f"{r['survived']} | {r['other']} | {r['score']:.1%} |")  # fmt: skip
    for group, (_, _, seconds) in results.items():
        lines.append(f"\n{group}: {seconds:.0f} s")
    for group, (_, survivors, _) in results.items():
        if survivors:
            lines.append(f"\n## surviving mutants: {group} ({len(survivors)})\n")
        for name, diff in survivors.items():
            lines.append(f"```diff\n# {name}\n{diff.strip()}\n```")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help=f"comma-separated, of: {', '.join(GROUPS)}")  # fmt: skip
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--mutants", default="",
                        help="comma-separated globs of mutant names to run (default: all)")  # fmt: skip
    args = parser.parse_args(argv)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        print(f"bench.mutation: unknown group(s) {', '.join(unknown)}; "
              f"known: {', '.join(GROUPS)}", file=sys.stderr)  # fmt: skip
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for group in groups:
        print(f"bench.mutation: {group} ...", flush=True)
        globs = [g.strip() for g in args.mutants.split(",") if g.strip()]
        results[group] = run_group(group, args.out, globs)
    text = render(results)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
