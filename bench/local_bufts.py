"""``python -m bench.local_bufts``: the local model's prompt evaluation with llama.cpp's extra
buffer types on and off (issue 24).

The local server loads SmolLM2-135M without the extra buffer types (weight repacking, AMX
tiles) unless the CPU's AMX is advertised and runs (:mod:`clinlib.llm.amx`); this measures
what that costs here. Each round is a fresh child process per setting (the switch patches
llama-cpp-python for the whole process; :func:`clinlib.llm.llama_serve.disable_extra_bufts`),
alternating on / off so a change in machine load hits both: the child loads the shipped
GGUF with the server's batch sizes (n_batch = n_ubatch = 512) and one thread per core, and
times ``Llama.eval`` of a ~1,000-token prompt (and of a ~3,500-token one) after a warm-up.
It also reports the model buffers llama.cpp placed (``CPU_REPACK`` / ``AMX`` appear only
with the extra buffer types on, and only when the CPU offers them for the model's types).

Prints a table and writes ``data/build/bench-local-bufts.json``. Needs the ``local`` extra.

Usage: ``python -m bench.local_bufts [--rounds 3] [--tokens 1000,3500]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from clinlib.core.config import BUILD_DIR, REPO_ROOT
from clinlib.llm import amx
from clinlib.llm.local_server import INSTALL_HINT, LocalModelError, default_threads, model_path

# One child: load the model (extra buffer types on or off), then time eval of each length.
CHILD = """
import json, sys, time
import llama_cpp, llama_cpp.llama_cpp as lib
from clinlib.llm import llama_serve, local_server
mode, threads, lengths = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3].split(",")]
if mode == "off":
    llama_serve.disable_extra_bufts(lib)
llm = llama_cpp.Llama(model_path=str(local_server.model_path()), n_ctx=max(lengths) + 64,
                      n_threads=threads, n_batch=512, n_ubatch=512, verbose=True)
words = ("Patient seen at visit {i}: creatinine 1.{d} mg/dL, potassium 4.{d} mmol/L, "
         "metformin 500 mg twice daily continued; blood pressure 13{d}/8{d} mmHg. ")
text = "".join(words.format(i=i, d=i % 10) for i in range(600))
tokens = llm.tokenize(text.encode())
out = {}
for n in lengths:
    llm.reset(); llm.eval(tokens[:64])  # warm-up
    llm.reset()
    t0 = time.perf_counter(); llm.eval(tokens[:n]); dt = time.perf_counter() - t0
    out[n] = n / dt
print("RESULT " + json.dumps(out), flush=True)
"""


def _one(mode: str, threads: int, lengths: list[int]) -> tuple[dict[int, float], list[str]]:
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(threads), ",".join(map(str, lengths))],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    lines = (done.stdout + done.stderr).splitlines()
    result = [ln for ln in lines if ln.startswith("RESULT ")]
    if done.returncode != 0 or not result:
        tail = " / ".join(lines[-3:])
        raise SystemExit(f"the {mode} child failed ({done.returncode}): {tail}")
    buffers = sorted({ln.split(":", 1)[-1].strip() for ln in lines if "model buffer size" in ln})
    return {int(k): v for k, v in json.loads(result[0][7:]).items()}, buffers


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", default="1000,3500", help="prompt lengths, comma-separated")
    args = parser.parse_args(argv)
    try:  # the model and llama_cpp itself (the server's own modules are not needed here)
        model_path()
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(f"llama_cpp is not installed; {INSTALL_HINT}")
    except LocalModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lengths = [int(n) for n in args.tokens.split(",")]
    threads = default_threads()
    runs: dict[str, list[dict[int, float]]] = {"on": [], "off": []}
    buffers: dict[str, list[str]] = {}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for mode in ("on", "off"):
            speeds, buffers[mode] = _one(mode, threads, lengths)
            runs[mode].append(speeds)
        load.append(os.getloadavg()[0])
    status = amx.probe()
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {threads} threads",
        "amx": status.describe(),
        "load_avg_1min": load,
        "buffers": buffers,
        "tokens_per_s": {m: {n: [r[n] for r in rs] for n in lengths} for m, rs in runs.items()},
    }
    print(f"{report['machine']}; {report['amx']}; load {min(load):.1f}-{max(load):.1f}")
    print(f"{'prompt tokens':>14} {'on (tok/s)':>14} {'off (tok/s)':>14} {'off/on':>7}")
    for n in lengths:
        on = statistics.median(r[n] for r in runs["on"])
        off = statistics.median(r[n] for r in runs["off"])
        print(f"{n:>14} {on:>14.1f} {off:>14.1f} {off / on:>7.2f}")
    for mode in ("on", "off"):
        print(f"buffers ({mode}): {'; '.join(buffers[mode])}")
    out = BUILD_DIR / "bench-local-bufts.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, indent=1))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
