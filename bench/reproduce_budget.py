"""``make bench-reproduce``: the time budgets of a fresh user, and how each stage's cost grows
with the cohort.

1. **Budget table.** Reads what ``clintrace reproduce`` left in the build folder
   (``data/build/<profile>/reproduce_times.csv``: stage, seconds, cpu_seconds, and start, end:
   offsets from the run's start, since stages run side by side) and the
   per-notebook lines ``clintrace notebooks`` prints (``--notebook-log``, or the notebooks'
   own rows of a ``--run``), and sets them beside the budgets: reproduce after install
   <= 10 min, every paper notebook <= 30 s, ``make test`` <= 10 min, ``.ci/run`` <= 30 min.
   ``make test`` and ``.ci/run`` are not run here (they are the suite itself): pass their
   measured wall seconds (``--make-test-s``, ``--ci-s``) or they read "not measured".
2. **Growth table** (``--growth``): the stages ``cohort`` .. ``--until`` run at several
   ``cohort --per-disease`` values (default 100, 200, 400: 1x, 2x, 4x the paper cohort), each
   stage in its own process (wall seconds and peak RSS from ``wait4``), on variant profiles
   ``<profile>+g<N>`` whose synthetic hosp tables are hard links to the profile's; then the
   growth exponent of time and memory per stage, the slope of a least-squares fit of
   log(cost) on log(patients). An exponent above :data:`LINEAR_TOL` is "worse than linear".

Measured times depend on the machine: the table says the load average it ran under.

Usage: ``python -m bench.reproduce_budget [--profile paper] [--run] [--growth]
[--per-disease 100,200,400] [--until strategies] [--make-test-s S] [--ci-s S]``
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from clinlib.core.config import BUILD_DIR, REPO_ROOT

# seconds (issue "every notebook opens in seconds": the idle 2-core budgets)
BUDGETS: dict[str, float] = {
    "reproduce after install": 600.0,
    "each paper notebook": 30.0,
    "make test": 600.0,
    ".ci/run": 1800.0,
}
TIMES_FILE = "reproduce_times.csv"
# the stages of `clintrace pipeline`, in order, as the growth run calls them
GROWTH_STAGES: tuple[str, ...] = (
    "cohort",
    "dialogues",
    "questions",
    "population",
    "strategies",
    "evaluate-offline",
    "evidence",
    "ablations",
)
# a fitted exponent up to this counts as linear (timing noise on a shared machine)
LINEAR_TOL = 1.15
# `clintrace notebooks` prints the file name ("  ok  05_representations.ipynb   46.4s")
_NB_LINE = re.compile(r"^\s*(ok|FAIL)\s+(\d\d_[\w-]+)(?:\.ipynb)?\s+([\d.]+)s")


class BenchInputError(ValueError):
    """A times file or log the benchmark cannot read (one line naming it)."""


def read_stage_times(path: Path) -> pd.DataFrame:
    """``reproduce_times.csv`` (stage, seconds, cpu_seconds).

    Raises:
        BenchInputError: no such file, or a column missing.
    """
    if not Path(path).exists():
        raise BenchInputError(f"{path}: no such file; run `clintrace reproduce` first")
    frame = pd.read_csv(path)
    missing = [c for c in ("stage", "seconds", "cpu_seconds") if c not in frame.columns]
    if missing:
        raise BenchInputError(f"{path}: missing column(s) {missing}")
    return frame


def reproduce_wall(stage_times: pd.DataFrame) -> float | None:
    """The run's wall seconds: from the first stage's start to the last one's end when the
    table has start / end offsets (``clintrace reproduce`` runs independent stages side by
    side, so their seconds overlap), else the sum of the stages' seconds (an older table, run
    one stage after another). None: no stage."""
    if not len(stage_times):
        return None
    if {"start", "end"} <= set(stage_times.columns):
        spans = stage_times[["start", "end"]]
        if spans.notna().to_numpy().all():
            return float(spans["end"].max() - spans["start"].min())
    return float(stage_times["seconds"].sum())


def notebook_times(log_text: str) -> pd.DataFrame:
    """The per-notebook rows ``clintrace notebooks`` prints (``  ok  05_x   12.3s``):
    notebook, ok, seconds (the last row of a notebook wins)."""
    rows = {}
    for line in log_text.splitlines():
        m = _NB_LINE.match(line)
        if m:
            rows[m.group(2)] = {
                "notebook": m.group(2),
                "ok": m.group(1) == "ok",
                "seconds": float(m.group(3)),
            }
    return pd.DataFrame(list(rows.values()), columns=["notebook", "ok", "seconds"])


def budget_table(
    stage_times: pd.DataFrame,
    notebooks: pd.DataFrame,
    make_test_s: float | None = None,
    ci_s: float | None = None,
    budgets: Mapping[str, float] = BUDGETS,
) -> pd.DataFrame:
    """Measured vs budget: one row per budget (the notebooks' row is the slowest notebook,
    with how many are over), plus one row per notebook.

    Returns:
        item, measured_s, budget_s, met ("yes" / "no" / "not measured"), note.
    """
    reproduce, note = reproduce_wall(stage_times), "pipeline + notebooks, install not"
    if reproduce is not None and {"start", "end"} <= set(stage_times.columns):
        note += f"; stages side by side (sum of stage seconds {stage_times['seconds'].sum():.0f})"
    rows = [_row("reproduce after install", reproduce, budgets, note)]
    if len(notebooks):
        worst = notebooks.loc[notebooks["seconds"].idxmax()]
        over = int((notebooks["seconds"] > budgets["each paper notebook"]).sum())
        note = f"slowest {worst['notebook']}; {over} of {len(notebooks)} over"
        rows.append(_row("each paper notebook", float(worst["seconds"]), budgets, note))
    else:
        rows.append(_row("each paper notebook", None, budgets, "no notebook times"))
    rows.append(_row("make test", make_test_s, budgets, "pass --make-test-s"))
    rows.append(_row(".ci/run", ci_s, budgets, "pass --ci-s"))
    for nb in notebooks.itertuples():
        rows.append(
            _row("each paper notebook", nb.seconds, budgets, "" if nb.ok else "FAILED")
            | {"item": f"  {nb.notebook}"}
        )
    return pd.DataFrame(rows, columns=["item", "measured_s", "budget_s", "met", "note"])


def _row(item: str, measured: float | None, budgets: Mapping[str, float], note: str) -> dict:
    budget = budgets[item]
    if measured is None or (isinstance(measured, float) and np.isnan(measured)):
        return {
            "item": item,
            "measured_s": np.nan,
            "budget_s": budget,
            "met": "not measured",
            "note": note,
        }
    met = "yes" if measured <= budget else "no"
    return {
        "item": item,
        "measured_s": round(float(measured), 1),
        "budget_s": budget,
        "met": met,
        "note": note if met == "no" or item != "make test" else "",
    }


def growth_exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """Slope of the least-squares line through (log size, log value): cost ~ size^slope
    (1 linear, 2 quadratic, 0 constant). NaN with fewer than two usable points.

    Raises:
        BenchInputError: sizes and values of different lengths.
    """
    if len(sizes) != len(values):
        raise BenchInputError(f"growth_exponent: {len(sizes)} sizes but {len(values)} values")
    x = np.asarray(sizes, dtype=float)
    y = np.asarray(values, dtype=float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return float("nan")
    slope, _ = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
    return float(slope)


def growth_table(runs: pd.DataFrame, tol: float = LINEAR_TOL) -> pd.DataFrame:
    """Per stage: seconds and peak MB at each scale, the growth exponents of both and a
    verdict.

    Args:
        runs: one row per (stage, per_disease, patients) with seconds and peak_mb, and
            cpu_seconds when measured (then the time exponent is fitted on CPU seconds, which
            other jobs on the machine barely move).

    Returns:
        stage, ``s@<patients>`` (wall), ``cpu@<patients>`` and ``MB@<patients>`` columns,
        exp_time, exp_memory, verdict.
    """
    rows = []
    order = list(dict.fromkeys(runs["stage"]))
    for stage in order:
        grp = runs[runs["stage"] == stage].sort_values("patients")
        row: dict = {"stage": stage}
        for r in grp.itertuples():
            row[f"s@{r.patients}"] = round(float(r.seconds), 1)
            if "cpu_seconds" in grp:
                row[f"cpu@{r.patients}"] = round(float(r.cpu_seconds), 1)
            row[f"MB@{r.patients}"] = round(float(r.peak_mb))
        cost = grp["cpu_seconds"] if "cpu_seconds" in grp else grp["seconds"]
        row["exp_time"] = round(growth_exponent(grp["patients"], cost), 2)
        row["exp_memory"] = round(growth_exponent(grp["patients"], grp["peak_mb"]), 2)
        row["verdict"] = (
            "n/a"
            if np.isnan(row["exp_time"])
            else "worse than linear"
            if row["exp_time"] > tol
            else "linear or better"
        )
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a GitHub table (no tabulate dependency); NaN prints as an empty cell."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "" if np.isnan(v) else f"{v:g}"
        return str(v)

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


# --------------------------------------------------------------------------- measuring


def _cli(args: Sequence[str]) -> tuple[float, float, float, int]:
    """Run ``clintrace <args>`` in a child process: (wall s, CPU s, peak RSS MB from
    ``wait4``: the child's own or its largest waited-for descendant's, return code). CPU
    seconds barely move when other jobs share the cores; wall seconds do."""
    import tempfile

    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "CLINTRACE_LOCAL_MODEL": "off"}
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "clinlib.cli", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=REPO_ROOT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        if rc:
            err.seek(0)
            print(f"  {' '.join(args)}: rc {rc}: {err.read().strip().splitlines()[-1:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, rc


def _stage_args(stage: str, profile: str, per_disease: int) -> list[str]:
    if stage == "cohort":
        return ["cohort", "--profile", profile, "--per-disease", str(per_disease)]
    if stage == "strategies":
        return ["strategies", "--profile", profile, "--setting", "post"]
    return [stage, "--profile", profile]


def measure_growth(profile: str, per_disease: Sequence[int], until: str) -> pd.DataFrame:
    """Run cohort .. ``until`` at each ``per_disease`` on ``<profile>+g<N>`` (module
    docstring), smallest first; a failed stage ends that scale."""
    return pd.concat([one_scale(profile, n, until) for n in per_disease], ignore_index=True)


def one_scale(profile: str, per_disease: int, until: str) -> pd.DataFrame:
    """One scale of :func:`measure_growth`: stage, per_disease, seconds, peak_mb, rc,
    patients (the cohort's size)."""
    name = f"{profile}+g{per_disease}"
    src, dst = BUILD_DIR / profile / "raw", BUILD_DIR / name / "raw"
    if not (src / "hosp").exists():
        raise BenchInputError(
            f"{src}/hosp: no synthetic tables; run `clintrace synth --profile {profile}`"
        )
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst, copy_function=os.link)  # hard links: no copy of the tables
    rows = []
    for stage in GROWTH_STAGES[: GROWTH_STAGES.index(until) + 1]:
        wall, cpu, peak, rc = _cli(_stage_args(stage, name, per_disease))
        rows.append(
            {
                "stage": stage,
                "per_disease": per_disease,
                "seconds": wall,
                "cpu_seconds": cpu,
                "peak_mb": peak,
                "rc": rc,
            }
        )
        print(
            f"  {name:<16} {stage:<18} {wall:8.1f}s cpu {cpu:8.1f}s {peak:6.0f} MB rc {rc}",
            flush=True,
        )
        if rc:
            break
    frame = pd.DataFrame(rows)
    cohort = BUILD_DIR / name / "cohort.parquet"
    n = len(pd.read_parquet(cohort, columns=["subject_id"])) if cohort.exists() else 0
    frame["patients"] = n or per_disease
    frame.to_csv(BUILD_DIR / name / "growth_times.csv", index=False)
    return frame


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--run", action="store_true", help="run `clintrace reproduce` first")
    ap.add_argument("--notebook-log", type=Path, help="a log with `clintrace notebooks` rows")
    ap.add_argument("--make-test-s", type=float, help="measured wall seconds of `make test`")
    ap.add_argument("--ci-s", type=float, help="measured wall seconds of `.ci/run`")
    ap.add_argument("--growth", action="store_true", help="also the 1x/2x/4x growth table")
    ap.add_argument("--per-disease", default="100,200,400")
    ap.add_argument("--until", default="strategies", choices=GROWTH_STAGES)
    args = ap.parse_args(argv)
    try:
        return _report(args)
    except BenchInputError as exc:
        print(f"bench-reproduce: {exc}", file=sys.stderr)
        return 2


def _report(args: argparse.Namespace) -> int:
    log_text = args.notebook_log.read_text() if args.notebook_log else ""
    if args.run:
        proc = subprocess.run(
            [sys.executable, "-m", "clinlib.cli", "reproduce", "--profile", args.profile],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        log_text += proc.stdout
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    times = read_stage_times(BUILD_DIR / args.profile / TIMES_FILE)
    table = budget_table(times, notebook_times(log_text), args.make_test_s, args.ci_s)
    print(
        f"## budgets ({args.profile}; load average now {load}; the budgets are for an idle "
        "2-core machine)\n"
    )
    print(markdown(table))
    print("\n## per stage (reproduce_times.csv)\n")
    print(markdown(times))
    if args.growth:
        sizes = [int(v) for v in args.per_disease.split(",")]
        runs = measure_growth(args.profile, sizes, args.until)
        print(f"\n## growth (cohort .. {args.until}; --per-disease {args.per_disease})\n")
        print(markdown(growth_table(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
