"""``make bench-cohort``: the cohort build at MIMIC-IV scale, DuckDB vs pandas.

1. Generates (once, cached under data/build/mimic-scale/raw/hosp/) a synthetic MIMIC-IV-shaped
   hosp dataset of 364,627 patients in parquet (>= 100M labevents rows).
2. Times the whole cohort build — inclusion rules, tertiles, sampling, event extraction —
   through the DuckDB path and through the straightforward pandas implementation
   (:mod:`clinlib.data.cohort_pandas`), each in its own child process so wall time and peak RSS
   (``wait4`` rusage) are measured separately, then prints both and the ratios.
3. If the pandas path cannot finish at full scale (memory limit or time limit), it compares
   at the largest scale both finish (100,000 then 30,000 patients) and says so.

Usage: ``python -m bench.cohort_scale [--patients N] [--pandas-mem-gb 20]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

from clinlib.core.config import BUILD_DIR, PROFILES

DUCKDB_MEMORY_LIMIT = "3GB"


def dataset_dir(n_patients: int) -> Path:
    name = (
        "mimic-scale" if n_patients == PROFILES["mimic-scale"].n_patients else f"bench-{n_patients}"
    )
    return BUILD_DIR / name / "raw"


def ensure_dataset(n_patients: int, seed: int = 0) -> tuple[Path, float | None]:
    """Generate the parquet dataset once; returns (raw dir, generation seconds or None)."""
    from clinlib.data.sources.synthetic import generate_hosp

    raw = dataset_dir(n_patients)
    if (raw / "hosp" / "labevents.parquet").exists():
        return raw, None
    t0 = time.perf_counter()
    generate_hosp(raw, n_patients=n_patients, seed=seed, fmt="parquet", progress=True)
    return raw, time.perf_counter() - t0


def _child(engine: str, raw: Path, per_disease: int, out: Path) -> None:
    """Run one engine's full cohort build in this process and write a JSON result."""
    t0 = time.perf_counter()
    if engine == "duckdb":
        import duckdb

        from clinlib.data.cohort import select_cohort
        from clinlib.data.events import extract_events
        from clinlib.data.sources.mimic import open_hosp

        con = duckdb.connect()
        con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
        con.execute("SET preserve_insertion_order = false")
        open_hosp(raw, con=con)
        result = select_cohort(con, per_disease=per_disease, seed=0)
        events = extract_events(con, result.cohort["subject_id"].tolist())
    else:
        from clinlib.data.cohort_pandas import extract_events_pandas, select_cohort_pandas

        result = select_cohort_pandas(raw / "hosp", per_disease=per_disease, seed=0)
        events = extract_events_pandas(raw / "hosp", result.cohort["subject_id"].tolist())
    seconds = time.perf_counter() - t0
    out.write_text(
        json.dumps(
            {
                "seconds": seconds,
                "patients": int(result.attrition["n_patients"].iloc[0]),
                "eligible": int(result.attrition["n_patients"].iloc[-2]),
                "cohort": len(result.cohort),
                "events": len(events),
                "cohort_ids": sorted(int(s) for s in result.cohort["subject_id"]),
            }
        )
    )


def run_engine(engine: str, raw: Path, per_disease: int, mem_gb: float | None, timeout: float):
    """Run one engine in a child process; returns (result dict | None, peak RSS GB, status)."""
    out = raw.parent / f".bench-{engine}.json"
    out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "bench.cohort_scale",
        "--child",
        engine,
        "--raw",
        str(raw),
        "--per-disease",
        str(per_disease),
        "--out",
        str(out),
    ]

    def limit() -> None:
        if mem_gb:
            cap = int(mem_gb * 1024**3)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    proc = subprocess.Popen(cmd, preexec_fn=limit)
    start = time.perf_counter()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > timeout:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            return None, usage.ru_maxrss / 1024**2, f"timed out after {timeout:.0f}s"
        time.sleep(0.2)
    peak_gb = usage.ru_maxrss / 1024**2  # ru_maxrss is KiB on Linux
    if os.waitstatus_to_exitcode(status) != 0 or not out.exists():
        return None, peak_gb, f"failed (exit {os.waitstatus_to_exitcode(status)})"
    return json.loads(out.read_text()), peak_gb, "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=PROFILES["mimic-scale"].n_patients)
    parser.add_argument("--per-disease", type=int, default=100)
    parser.add_argument("--pandas-mem-gb", type=float, default=20.0)
    parser.add_argument("--pandas-timeout", type=float, default=1800.0)
    parser.add_argument("--fallback-scales", default="100000,30000")
    parser.add_argument("--child", choices=["duckdb", "pandas"])
    parser.add_argument("--raw", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.raw, args.per_disease, args.out)
        return 0

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 1024**3:.0f} GB RAM, "
        f"python {platform.python_version()}"
    )
    scales = [args.patients] + [int(s) for s in args.fallback_scales.split(",") if s]
    rows = []
    for i, n in enumerate(scales):
        raw, gen_s = ensure_dataset(n)
        size_gb = sum(p.stat().st_size for p in (raw / "hosp").glob("*")) / 1024**3
        import pyarrow.parquet as pq

        n_lab = pq.ParquetFile(raw / "hosp" / "labevents.parquet").metadata.num_rows
        gen = f"generated in {gen_s:.0f}s" if gen_s else "cached"
        print(f"\n== {n:,} patients, {n_lab:,} labevents rows, {size_gb:.1f} GB parquet ({gen})")
        duck, duck_rss, duck_status = run_engine("duckdb", raw, args.per_disease, None, 3600)
        print(f"duckdb: {duck_status}, {duck and duck['seconds']:.1f}s, peak RSS {duck_rss:.2f} GB")
        pand, pand_rss, pand_status = run_engine(
            "pandas", raw, args.per_disease, args.pandas_mem_gb, args.pandas_timeout
        )
        pand_s = f"{pand['seconds']:.1f}s" if pand else "-"
        print(
            f"pandas: {pand_status}, {pand_s}, peak RSS {pand_rss:.2f} GB "
            f"(address-space cap {args.pandas_mem_gb:.0f} GB)"
        )
        rows.append((n, n_lab, duck, duck_rss, pand, pand_rss, pand_status))
        if duck and pand:
            same = duck["cohort_ids"] == pand["cohort_ids"] and duck["events"] == pand["events"]
            print(f"same cohort and event count from both engines: {same}")
            print(
                f"ratios pandas/duckdb: time {pand['seconds'] / duck['seconds']:.1f}x, "
                f"peak RSS {pand_rss / duck_rss:.1f}x"
            )
            if i > 0:
                print(
                    f"note: pandas could not finish at {scales[0]:,} patients; "
                    f"compared at {n:,}, the largest scale both finish"
                )
            break
    print("\n| patients | labevents rows | duckdb s | duckdb peak GB | pandas s | pandas peak GB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n, n_lab, duck, drss, pand, prss, status in rows:
        ps = f"{pand['seconds']:.1f}" if pand else status
        print(f"| {n:,} | {n_lab:,} | {duck['seconds']:.1f} | {drss:.2f} | {ps} | {prss:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
