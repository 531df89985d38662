"""Every notebook on a MIMIC-IV-shaped and a MEDS-shaped fixture carrying real-data shapes:
``make test-real``.

Two sources are written from the quick profile's SYNTHETIC hosp tables (not MIMIC data):

* ``mimic``: the CSV tables with the shapes of
  :mod:`clinlib.data.sources.synthetic.real_shapes` (creatinine in µmol/L, labs with no unit,
  doses 10,000 x the order's strength, instruction-shaped drug names);
* ``meds``: the same shaped tables exported as MIMIC-derived MEDS with every shape of
  :data:`clinlib.data.sources.meds_fixture.REAL_SHAPES` (unnamed drugs, unused code families,
  bad values, three splits in shards, µmol/L creatinine codes, duplicated admission rows).

Each becomes a profile (``<prefix>-mimic``, ``<prefix>-meds``) built stage by stage as a user
with real data builds one (``clintrace cohort --mimic-dir/--meds-dir --per-disease N``, then
dialogues, questions, population, strategies post and pre, evaluate-offline), then
``clintrace notebooks`` runs all 18. Per stage and per notebook: seconds and the outcome,
printed and written to ``data/build/<profile>/real_fixture_report.csv``. Exit 1 when a stage
or a notebook failed.

Usage::

    python -m bench.real_profiles                       # both, --per-disease 10
    python -m bench.real_profiles --only mimic --per-disease 6
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.scratch import REPO

STAGES: tuple[tuple[str, ...], ...] = (
    ("dialogues",),
    ("questions",),
    ("population",),
    ("strategies", "--setting", "post"),
    ("strategies", "--setting", "pre", "--strategies", "{evaluation}"),
    ("evaluate-offline",),
)
KINDS = ("mimic", "meds")


def _clintrace(*args: str) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "clinlib.cli", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=os.environ.copy())
    tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
    return proc.returncode, time.perf_counter() - t0, tail[0] if proc.returncode else ""


def write_sources(quick_raw: Path, out: Path) -> dict[str, Path]:
    """The two shaped sources under ``out`` (module docstring)."""
    from clinlib.data.sources.meds_fixture import REAL_SHAPES, mimic_to_meds
    from clinlib.data.sources.synthetic.real_shapes import write_real_shapes

    mimic = write_real_shapes(quick_raw, out / "mimic")
    meds = mimic_to_meds(mimic, out / "meds", shapes=REAL_SHAPES)
    return {"mimic": mimic, "meds": meds}


def build_profile(kind: str, source: Path, profile: str, per_disease: int) -> list[dict]:
    """Every stage of ``profile`` from ``source``, then every notebook: one row each."""
    from clinlib.strategies import EVALUATION_STRATEGIES

    rows = []
    flag = "--mimic-dir" if kind == "mimic" else "--meds-dir"
    steps = [("cohort", flag, str(source), "--per-disease", str(per_disease))]
    steps += [
        tuple(a.format(evaluation=",".join(EVALUATION_STRATEGIES)) for a in s) for s in STAGES
    ]
    for step in steps:
        rc, sec, err = _clintrace(*step, "--profile", profile)
        rows.append(
            {
                "profile": profile,
                "step": " ".join(step[:1] + step[1:2]),
                "seconds": round(sec, 1),
                "ok": rc == 0,
                "error": err,
            }
        )
        print(
            f"  {'ok ' if rc == 0 else 'FAIL'} {profile} {step[0]:<18} {sec:7.1f}s {err}",
            flush=True,
        )
        if rc != 0:
            return rows
    rows += run_notebooks(profile)
    return rows


def run_notebooks(profile: str) -> list[dict]:
    """All numbered notebooks on ``profile`` (clinlib.cli.notebooks.execute_all)."""
    from clinlib.cli.notebooks import execute_all

    def line(r: dict) -> None:
        mark = "ok " if r["ok"] else "FAIL"
        print(
            f"  {mark} {profile} {r['notebook']:<36} {r['seconds']:7.1f}s {r.get('error') or ''}",
            flush=True,
        )

    results = execute_all(profile, timeout=1500, on_done=line)
    return [
        {
            "profile": profile,
            "step": r["notebook"],
            "seconds": round(r["seconds"], 1),
            "ok": bool(r["ok"]),
            "error": r.get("error") or "",
        }
        for r in results
    ]


def write_report(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=["profile", "step", "seconds", "ok", "error"])
        out.writeheader()
        out.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    from clinlib.core.config import build_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", default="realq")
    parser.add_argument("--per-disease", type=int, default=10)
    parser.add_argument("--only", choices=KINDS, default=None)
    parser.add_argument("--quick-raw", type=Path, default=build_dir("quick") / "raw")
    args = parser.parse_args(argv)
    if not (args.quick_raw / "hosp").is_dir():
        print(
            f"error: no synthetic hosp tables in {args.quick_raw}/hosp; run `make pipeline-quick`"
        )
        return 2
    t0 = time.perf_counter()
    sources = write_sources(args.quick_raw, build_dir("quick").parent / f"_{args.prefix}-sources")
    print(f"sources written in {time.perf_counter() - t0:.1f}s", flush=True)
    failed = 0
    for kind in [args.only] if args.only else KINDS:
        profile = f"{args.prefix}-{kind}"
        rows = build_profile(kind, sources[kind], profile, args.per_disease)
        write_report(rows, build_dir(profile) / "real_fixture_report.csv")
        bad = [r for r in rows if not r["ok"]]
        n_nb = sum(1 for r in rows if r["step"][:2].isdigit())
        print(
            f"{profile}: {n_nb - sum(1 for r in bad if r['step'][:2].isdigit())} of {n_nb} "
            f"notebooks passed; {len(bad)} failure(s)",
            flush=True,
        )
        failed += len(bad)
    print(f"test-real: {time.perf_counter() - t0:.0f}s wall", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
