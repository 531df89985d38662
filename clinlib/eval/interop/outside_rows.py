"""A build holding a user's own results, put there through the kit's own doors (docs/guide.md
"Your own results, end to end"), so every notebook, the apps and the site are run on such rows.

Two kinds of outside rows, each on a subset of the tasks:

* an **outside memory**: ``remote-memory`` over the HTTP memory protocol
  (docs/memory-protocol.md), served by :class:`~clinlib.strategies.memory_server.MemoryServer`
  (the kit's ``mem0`` behind it, as ``clintrace memory-serve`` serves it) and answered by both
  offline readers on :data:`REMOTE_TASKS`, ``post`` and ``pre``; the service is STOPPED before
  this function returns, so whatever reads the build afterwards works from the read log
  (:mod:`clinlib.strategies.remote_memory`) or fails;
* **predictions made elsewhere** (:data:`EXT_LABEL`): the question set exported as
  ``clintrace export`` writes it (:data:`EXT_STRATEGIES` on :data:`EXT_TASKS`), answered
  outside the kit's harness by the ``eager`` reader's policy over the exported messages (a
  deterministic policy, not an LLM), every :data:`OFF_FORMAT_EVERY`-th T6 answer replaced by an
  off-format word (scored as a parse failure, as the kit's own run scores one), then scored
  back with ``clintrace score``'s code.

Re-running is cheap and changes nothing: the run resumes (every key is done, so the service
is not needed to skip them) and the scored file replaces its own rows.

Run: ``python -m clinlib.eval.interop.outside_rows --profile quick`` (``make pipeline-quick``
does, after the pipeline).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from clinlib.core.config import build_dir, resolve_profile
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import run
from clinlib.eval.interop.export import export_records
from clinlib.eval.interop.external import score_file
from clinlib.eval.readers.policies import eager_policy
from clinlib.strategies.memory_server import MemoryServer, ReferenceMemoryService

# The memory protocol's default endpoint: the strategy's label is then plain "remote-memory"
# (the same label on every rerun); a taken port is one line.
REMOTE_PORT = 8790
REMOTE_STRATEGY = "remote-memory"
REMOTE_TASKS: tuple[str, ...] = ("T1", "T3", "T9")
REMOTE_BACKEND = "mem0"
EXT_LABEL = "ext:outside-demo"
EXT_STRATEGIES: tuple[str, ...] = ("full-context", "no-context-blind")
EXT_TASKS: tuple[str, ...] = ("T1", "T3", "T6")
OFF_FORMAT_EVERY = 4
OFF_FORMAT_ANSWER = "increased"  # a word, where T6 asks for an option letter
OUTSIDE_DIR = "outside"


class OutsideRowsError(RuntimeError):
    """The outside rows could not be added (one line)."""


def add_remote_memory(profile: str, port: int = REMOTE_PORT) -> int:
    """Serve the kit's memory over HTTP, answer :data:`REMOTE_TASKS` through it with both
    offline readers (``post`` and ``pre``), then stop the service. Returns the rows run."""
    service = ReferenceMemoryService(REMOTE_BACKEND, profile)
    try:
        server = MemoryServer(service, "127.0.0.1", port)
    except OSError as exc:
        raise OutsideRowsError(
            f"outside rows: cannot serve the memory on 127.0.0.1:{port} "
            f"({exc.strerror or exc}); stop what listens there and rerun"
        ) from None
    with server:
        spec = RunSpec(
            profile,
            [REMOTE_STRATEGY],
            ["reference", "eager"],
            ["post", "pre"],
            tasks=list(REMOTE_TASKS),
        )
        summary = run(spec, RunOptions(progress=False))
    return int(summary["n_predicted"].sum()) if "n_predicted" in summary else len(summary)


def outside_answers(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One outside prediction per exported sample (see the module docstring)."""
    out, n_t6 = [], 0
    for rec in records:
        meta = rec["metadata"]
        response = eager_policy(rec["input"])
        if meta["task"] == "T6":
            n_t6 += 1
            if n_t6 % OFF_FORMAT_EVERY == 0:
                response = OFF_FORMAT_ANSWER
        out.append(
            {
                "qid": meta["qid"],
                "task": meta["task"],
                "strategy": meta["strategy"],
                "backbone": EXT_LABEL,
                "setting": meta["setting"],
                "question": meta["question"],
                "question_set": meta["question_set"],
                "response": response,
            }
        )
    return out


def add_outside_predictions(profile: str) -> int:
    """Export, answer outside the harness, score back (:data:`EXT_LABEL`). Returns the rows."""
    records = export_records(profile, list(EXT_STRATEGIES), ["post"], tasks=list(EXT_TASKS))
    path = build_dir(profile) / OUTSIDE_DIR / "outside_predictions.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in outside_answers(records):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(score_file(path, profile, replace=True))


def add_outside_rows(profile: str | None = None, port: int = REMOTE_PORT) -> dict[str, int]:
    """Both kinds of outside rows (module docstring); the memory service is stopped on return."""
    name = resolve_profile(profile)
    return {
        REMOTE_STRATEGY: add_remote_memory(name, port),
        EXT_LABEL: add_outside_predictions(name),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None)
    parser.add_argument("--port", type=int, default=REMOTE_PORT)
    args = parser.parse_args(argv)
    try:
        counts = add_outside_rows(args.profile, args.port)
    except (OutsideRowsError, ValueError, FileNotFoundError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    said = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"outside rows in {resolve_profile(args.profile)}: {said} (memory service stopped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
