"""The bugs issue 33 found surviving, seeded again: ``make bench-seeded``.

Issue 33 ("Tests that catch the bugs that matter") seeded small bugs into a scratch copy and
listed the ones the suite missed: thresholds moved by one step, a skipped branch, the lenient
parser skipping its strict pass, and two analysis bugs under which notebooks 07, 09 and 10
still passed. Its "Done means" asks that ``make test`` catch each of them. This bench applies
each bug, one at a time, to a scratch copy (``data/build/_seeded``: clinlib, tests, notebooks,
data) and runs the part of ``make test`` that covers it: the named test files, or the named
notebooks under nbmake. A bug is *caught* when that run fails with failing tests (pytest exit
1); it is *missed* when the run passes; anything else (collection error, a patch whose text
is no longer in the source) is reported as an error and makes the bench exit 1.

First, unpatched, the same test files and notebooks must pass (the baseline): a test that
fails without the bug would make "caught" meaningless.

Usage::

    python -m bench.seeded                 # every seeded bug
    python -m bench.seeded --only passed_at_threshold,holm_zero
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.scratch import REPO, copy_repo

DEFAULT_OUT = REPO / "data" / "build" / "_seeded"


@dataclass(frozen=True)
class Seed:
    """One bug: replace ``old`` (exactly one occurrence in ``path``) with ``new``."""

    name: str
    what: str  # the words for it
    path: str
    old: str
    new: str
    tests: tuple[str, ...] = ()
    notebooks: tuple[str, ...] = ()


# the issue names 07, 09 and 10; 08 and 13 also state accuracies from accuracy_table
_NB_ACCURACY = tuple(f"notebooks/{n}.ipynb" for n in (
    "07_sp1_aggregation_tax", "08_sp2_backbone_profiles", "09_sp3_abstention", "10_pareto_cost",
    "13_failure_explorer"))  # fmt: skip
# the notebooks whose output reads Holm-adjusted p-values (09 and 10 compute none, so a Holm
# bug cannot change what they say: the "07, 09 and 10" holds for accuracy only)
_NB_HOLM = ("notebooks/07_sp1_aggregation_tax.ipynb", "notebooks/11_ablations.ipynb")

SEEDS: tuple[Seed, ...] = (
    Seed("passed_at_threshold", "gates._passed `<` -> `<=` at the failure threshold",
         "clinlib/tasks/gates/common.py",
         "n_failed / n_checked < t", "n_failed / n_checked <= t",
         tests=("tests/tasks/test_thresholds.py",)),
    Seed("l4_patient_cap", "the L4 patient-share cap `<=` -> `<`",
         "clinlib/tasks/gates/content.py",
         "share <= MAX_PATIENT_SHARE", "share < MAX_PATIENT_SHARE",
         tests=("tests/tasks/test_gate_l4_edges.py", "tests/tasks/test_thresholds.py")),
    Seed("lab_window_discharge", "the lab window at discharge, `<= dischtime` -> `<`",
         "clinlib/data/events.py",
         "AND r.charttime <= v.dischtime", "AND r.charttime < v.dischtime",
         tests=("tests/data/test_event_windows.py",)),
    Seed("must_cover_98", "must-cover coverage at exactly 98 % (checks.py)",
         "clinlib/dialogue/checks.py",
         "if ratio < Fraction(str(MIN_COVERAGE)):", "if ratio <= Fraction(str(MIN_COVERAGE)):",
         tests=("tests/dialogue/test_check_boundaries.py",)),
    Seed("repeated_at_3", "the repeated-sentence check at exactly 3",
         "clinlib/dialogue/checks.py",
         "n >= REPEAT_MIN_COUNT and", "n > REPEAT_MIN_COUNT and",
         tests=("tests/dialogue/test_check_boundaries.py",)),
    Seed("visits_same_start", "two visits with the same start time accepted by the time order",
         "clinlib/dialogue/checks.py",
         "if not starts[a] < starts[b]:", "if not starts[a] <= starts[b]:",
         tests=("tests/dialogue/test_check_boundaries.py",)),
    Seed("t5_lenient_swapped", "T5's lenient yes/no reading swapped",
         "clinlib/tasks/answers/readings.py",
         'for m in _T5_CONTRA.finditer(norm):\n'
         '                found.add("no" if negated(norm, m.start(), window=8) else "yes")',
         'for m in _T5_CONTRA.finditer(norm):\n'
         '                found.add("yes" if negated(norm, m.start(), window=8) else "no")',
         tests=("tests/tasks/test_parser_cases.py",)),
    Seed("pending_cost_done_keys", "the pending cost of an interrupted run summed over done keys",
         "clinlib/eval/harness/estimate.py",
         "sum(i for i, p in zip(n_in, pending, strict=True) if p),\n"
         "            sum(m for m, p in zip(n_max, pending, strict=True) if p),",
         "sum(i for i, p in zip(n_in, pending, strict=True) if not p),\n"
         "            sum(m for m, p in zip(n_max, pending, strict=True) if not p),",
         tests=("tests/eval/test_budget_boundaries.py",)),
    Seed("budget_searchsorted_side", "the budget's `searchsorted` side",
         "clinlib/eval/harness/session.py",
         'self.budget_usd - spent, side="right"', 'self.budget_usd - spent, side="left"',
         tests=("tests/eval/test_budget_boundaries.py",)),
    Seed("l1_raw_labevents_removed", "gate L1's raw-labevents branch removed",
         "clinlib/tasks/gates/structure.py",
         "if raw_days is not None and key in raw_days:", "if False:",
         tests=("tests/tasks/test_thresholds.py",)),
    Seed("lenient_skips_strict", "lenient parsing skipping the strict pass",
         "clinlib/tasks/answers/parse.py",
         "    strict = read_strict(kind, response, options)\n"
         "    if strict is not None:\n        return strict\n",
         "", tests=("tests/tasks/test_answers.py",)),
    Seed("accuracy_inverted", "`accuracy_table` returning 1 - accuracy (notebooks 07-10, 13)",
         "clinlib/analysis/metrics/accuracy.py",
         'out["accuracy"] = out["k"] / out["n"]', 'out["accuracy"] = 1 - out["k"] / out["n"]',
         notebooks=_NB_ACCURACY),
    Seed("holm_zero", "every Holm-adjusted p set to 0 (notebooks 07, 11)",
         "clinlib/analysis/stats/question.py",
         "p_adj[order] = adj_sorted", "p_adj[order] = 0.0 * adj_sorted",
         notebooks=_NB_HOLM),
)  # fmt: skip


class SeedError(Exception):
    """A seed whose text is not in the source exactly once."""


def apply(seed: Seed, root: Path) -> str:
    """Patch ``root/seed.path``; returns the original text (to restore)."""
    target = root / seed.path
    text = target.read_text(encoding="utf-8")
    n = text.count(seed.old)
    if n != 1:
        raise SeedError(f"{seed.name}: its text occurs {n} times in {seed.path}, not once")
    target.write_text(text.replace(seed.old, seed.new), encoding="utf-8")
    return text


def prepare(out: Path) -> Path:
    """A scratch copy of what the covering tests and notebooks read."""
    scratch = copy_repo(out / "repo", ("clinlib", "tests", "notebooks", "data"))
    (scratch / "figures").mkdir()
    return scratch


def _env(scratch: Path) -> dict[str, str]:
    # PYTHONPATH first, so the scratch clinlib wins over the editable install (the notebook
    # kernels inherit it too); the quick build was copied beside it.
    env = {**os.environ, "PYTHONPATH": str(scratch), "CLINTRACE_PROFILE": "quick",
           "CLINTRACE_LOCAL_MODEL": "off"}  # fmt: skip
    return env


def pytest_run(scratch: Path, tests=(), notebooks=(), stop_first=True) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not local",
           *(["-x"] if stop_first else []), *tests]  # fmt: skip
    if notebooks:
        cmd += ["--nbmake", "--nbmake-timeout=900", *notebooks]
    proc = subprocess.run(cmd, cwd=scratch, env=_env(scratch), capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_WHY = re.compile(r"^(?:E\s+)?[\w.]*(?:Error|Exception|Failed): .*$", re.MULTILINE)
_FAILED = re.compile(r"^FAILED (.+?)(?: - .*)?$", re.MULTILINE)  # a node id may hold spaces


def first_reason(output: str) -> str:
    """The first failing test and its first error line (what a reader sees first)."""
    output = _ANSI.sub("", output)
    test = _FAILED.search(output)
    why = _WHY.search(output)
    parts = [test.group(1) if test else "", re.sub(r"^E\s+", "", why.group(0)) if why else ""]
    return ": ".join(p for p in parts if p)[:240]


def verdict(seed: Seed, rc: int, output: str) -> str:
    """caught: the run failed with failing tests, and every named notebook failed."""
    if rc == 0:
        return "MISSED"
    if rc != 1:
        return f"error (pytest exit {rc})"
    failed = _FAILED.findall(_ANSI.sub("", output))
    passed = [n for n in seed.notebooks if not any(f.startswith(n) for f in failed)]
    return f"MISSED by {', '.join(passed)}" if passed else "caught"


def _check_seeded_module(scratch: Path) -> None:
    probe = subprocess.run([sys.executable, "-c", "import clinlib; print(clinlib.__file__)"],
                           cwd=scratch / "notebooks", env=_env(scratch), capture_output=True,
                           text=True, check=True)  # fmt: skip
    if not probe.stdout.strip().startswith(str(scratch)):
        raise SeedError(f"clinlib resolves to {probe.stdout.strip()}, not the scratch copy")


def run(seeds: list[Seed], out: Path) -> list[dict]:
    scratch = prepare(out)
    _check_seeded_module(scratch)
    tests = sorted({t for s in seeds for t in s.tests})
    notebooks = sorted({n for s in seeds for n in s.notebooks})
    t0 = time.perf_counter()
    rc, output = pytest_run(scratch, tests, notebooks, stop_first=False)
    rows = [{"name": "baseline (no bug)", "what": "the covering tests and notebooks, unpatched",
             "result": "passed" if rc == 0 else f"FAILED (exit {rc})",
             "why": first_reason(output) if rc else "", "seconds": time.perf_counter() - t0}]  # fmt: skip
    print(f"bench.seeded: baseline {rows[0]['result']} ({rows[0]['seconds']:.0f} s)", flush=True)
    if rc != 0:
        (out / "baseline.log").write_text(output, encoding="utf-8")
        return rows
    for seed in seeds:
        t0 = time.perf_counter()
        original = apply(seed, scratch)
        try:
            # every named notebook must fail on its own, so no -x there
            rc, output = pytest_run(scratch, seed.tests, seed.notebooks, not seed.notebooks)
        finally:
            (scratch / seed.path).write_text(original, encoding="utf-8")
        (out / f"{seed.name}.log").write_text(output, encoding="utf-8")
        row = {"name": seed.name, "what": seed.what, "result": verdict(seed, rc, output),
               "why": first_reason(output) if rc == 1 else "",
               "seconds": time.perf_counter() - t0}  # fmt: skip
        print(f"bench.seeded: {seed.name}: {row['result']} ({row['seconds']:.0f} s) {row['why']}",
              flush=True)  # fmt: skip
        rows.append(row)
    return rows


def render(rows: list[dict]) -> str:
    lines = ["| seeded bug | result | first failure | s |", "| --- | --- | --- | ---: |"]
    for r in rows:
        why = r["why"].replace("|", "\\|")
        lines.append(f"| {r['what']} (`{r['name']}`) | {r['result']} | {why} | "
                     f"{r['seconds']:.0f} |")  # fmt: skip
    caught = sum(r["result"] == "caught" for r in rows[1:])
    lines.append(f"\ncaught {caught} of {len(rows) - 1}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated seed names (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    known = {s.name for s in SEEDS}
    if unknown := [n for n in names if n not in known]:
        print(f"bench.seeded: unknown seed(s) {', '.join(unknown)}; known: "
              f"{', '.join(sorted(known))}", file=sys.stderr)  # fmt: skip
        return 2
    seeds = [s for s in SEEDS if not names or s.name in names]
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        rows = run(seeds, args.out)
    except SeedError as exc:
        print(f"bench.seeded: {exc}", file=sys.stderr)
        return 2
    text = render(rows)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    ok = rows[0]["result"] == "passed" and all(r["result"] == "caught" for r in rows[1:])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
