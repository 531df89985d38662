"""``python -m bench.strategy_build``: cold and warm construction of every history
representation for a profile (paper §4 strategies, Appendix C footprints).

1. Builds every registered strategy (the paper's eight and the extras) for the profile's
   dialogues offline with the rule-based prep model — embeddings included (dense, hybrid,
   Mem0 memories, A-Mem notes) — into a scratch folder
   ``data/build/<profile>/bench-strategies/`` emptied first, so the build is cold (the
   sentence-transformers model load counts).
2. Rebuilds with unchanged inputs: every artifact is found in the construction cache.
3. Compares the encoders: the static default and the transformer MiniLM each
   embed every visit cold into a fresh store (load and encode timed), then dense-retrieval
   with each ranks the anchor visit of every retrieval-eligible question (hit@1/3/5/10,
   Appendix C.2). The static model runs on every patient; both run on the first
   ``--minilm-subjects`` patients (default 50; 0 = all), the transformer being ~60x slower.
4. Prints the wall time of each pass and per strategy and the encoder table, and writes
   ``results.json`` there.

Targets (docs/design.md): <= 2 min cold on 2 cores for the paper profile's ~400
dialogues; <= 10 s warm; static hit@1/3/5 >= 0.54 / 0.77 / 0.83. With the transformer MiniLM
the cold build was bound by its ~1,000 s of encoding; the static encoder embeds whole visits in
seconds, so the rule-based constructions dominate; the warm pass only hashes each dialogue and
checks one file per (strategy, patient).

Usage: ``python -m bench.strategy_build [--profile paper] [--strategies a,b] [--subjects N]
[--minilm-subjects 50] [--no-encoders]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time

import pandas as pd

from clinlib.core.config import build_dir, resolve_profile
from clinlib.strategies.footprints import PAPER_HIT_RATES

SCRATCH = "bench-strategies"
COLD_TARGET_S = 120.0
WARM_TARGET_S = 10.0
MINILM_SUBJECTS = 50
# The "done" bar for the static encoder on the paper profile (hit@1 / @3 / @5).
HIT_TARGETS: dict[str, float] = {"hit@1": 0.54, "hit@3": 0.77, "hit@5": 0.83}


def run(
    profile: str = "paper",
    strategies: list[str] | None = None,
    subjects: int | None = None,
    keep: bool = False,
    encoders: bool = True,
    minilm_subjects: int = MINILM_SUBJECTS,
) -> dict:
    """Run the benchmark; returns the results dict (also written to results.json)."""
    from clinlib.data.build import load
    from clinlib.strategies import STRATEGIES, build_all
    from clinlib.strategies.embed import _EMBEDDERS, forget_models

    name = resolve_profile(profile)
    root = build_dir(name) / SCRATCH
    if root.exists() and not keep:
        shutil.rmtree(root)
    names = strategies or list(STRATEGIES)
    t_load = time.perf_counter()
    dialogues = load("dialogues", name)
    if subjects:
        keep_ids = sorted(dialogues["subject_id"].unique())[: int(subjects)]
        dialogues = dialogues[dialogues["subject_id"].isin(keep_ids)]
    load_s = time.perf_counter() - t_load
    n_patients = int(dialogues["subject_id"].nunique())
    n_visits = int(dialogues.groupby("subject_id")["visit_idx"].nunique().sum())

    _EMBEDDERS.clear()  # cold: the encoder is loaded inside the timed pass
    forget_models()
    t0 = time.perf_counter()
    cold = build_all(name, names, dialogues=dialogues, root=root)
    cold_s = time.perf_counter() - t0
    encoded = sum(e.encoded for e in _EMBEDDERS.values())
    t1 = time.perf_counter()
    warm = build_all(name, names, dialogues=dialogues, root=root)
    warm_s = time.perf_counter() - t1

    per = cold[["strategy", "prep_model", "built", "seconds"]].rename(
        columns={"seconds": "cold_s", "built": "built_cold"}
    )
    per["warm_s"] = warm["seconds"].to_numpy()
    per["built_warm"] = warm["built"].to_numpy()
    results = {
        "profile": name,
        "patients": n_patients,
        "visits": n_visits,
        "turns": int(len(dialogues)),
        "characters": int(dialogues["text_tagged"].str.len().sum()),
        "texts_encoded": int(encoded),
        "load_dialogues_s": round(load_s, 2),
        "cold_s": round(cold_s, 2),
        "warm_s": round(warm_s, 2),
        "cold_target_s": COLD_TARGET_S,
        "warm_target_s": WARM_TARGET_S,
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "per_strategy": per.round(3).to_dict("records"),
        "encoders": encoder_table(name, dialogues, root, minilm_subjects) if encoders else [],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(results, indent=2))
    return results


def encoder_table(profile: str, dialogues: pd.DataFrame, root, minilm_subjects: int) -> list:
    """Rows of the encoder comparison (static on every patient; both on the slice)."""
    from clinlib.data.build import load
    from clinlib.strategies.encoder_eval import ENCODERS, compare_encoders

    try:
        questions = load("questions", profile)
    except FileNotFoundError as exc:
        print(f"encoder comparison skipped: {exc}", file=sys.stderr)
        return []
    ids = sorted(int(s) for s in dialogues["subject_id"].unique())
    static, transformer = ENCODERS
    full = compare_encoders(questions, dialogues, root / "encoders-all", (static,))
    full.insert(1, "patients_used", "all")
    if minilm_subjects and minilm_subjects < len(ids):
        slice_ids = ids[:minilm_subjects]
        part = compare_encoders(questions, dialogues, root / "encoders-slice", ENCODERS,
                                subjects={m: slice_ids for m in ENCODERS})  # fmt: skip
        part.insert(1, "patients_used", f"first {minilm_subjects}")
    else:
        part = compare_encoders(questions, dialogues, root / "encoders-all", (transformer,))
        part.insert(1, "patients_used", "all")
    table = pd.concat([full, part], ignore_index=True)
    return table.round(3).to_dict("records")


def report(results: dict) -> str:
    """Human-readable summary of :func:`run`'s results."""
    per = pd.DataFrame(results["per_strategy"])
    lines = [
        f"profile {results['profile']}: {results['patients']} dialogues, {results['visits']} "
        f"visits, {results['characters']:,} characters; {results['cpus']} CPUs, load average "
        f"{results['load_average'][0]:.1f} at the end",
        per.to_string(index=False),
        f"cold: {results['cold_s']:.1f} s (target <= {results['cold_target_s']:.0f} s; "
        f"{results['texts_encoded']:,} texts encoded)",
        f"warm: {results['warm_s']:.2f} s (target <= {results['warm_target_s']:.0f} s; "
        f"{int(per['built_warm'].sum())} artifacts rebuilt)",
    ]
    if results.get("encoders"):
        enc = pd.DataFrame(results["encoders"])
        static = enc[(enc["patients_used"] == "all") & (enc["encoder"] == enc["encoder"].iloc[0])]
        met = {k: bool(static[k].iloc[0] >= v) for k, v in HIT_TARGETS.items() if k in static}
        lines += [
            "encoders (cold encode of every visit into a fresh store; dense-retrieval hit@k of "
            "the anchor visit, T9 excluded; paper BGE-M3: "
            + " / ".join(f"{v}" for v in PAPER_HIT_RATES.values())
            + "):",
            enc.to_string(index=False),
            "static on every patient vs targets "
            + ", ".join(
                f"{k} >= {v}: {'met' if met[k] else 'NOT met'}"
                for k, v in HIT_TARGETS.items()
                if k in met
            ),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--strategies", default="", help="comma-separated names (default all)")
    parser.add_argument("--subjects", type=int, default=None, help="first N patients only")
    parser.add_argument("--keep", action="store_true", help="do not empty the scratch folder")
    parser.add_argument("--no-encoders", action="store_true", help="skip the encoder table")
    parser.add_argument("--minilm-subjects", type=int, default=MINILM_SUBJECTS,
                        help="patients for the static vs MiniLM slice (0 = all)")  # fmt: skip
    args = parser.parse_args(argv)
    names = [s for s in args.strategies.split(",") if s] or None
    results = run(args.profile, names, args.subjects, args.keep, not args.no_encoders,
                  args.minilm_subjects)  # fmt: skip
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
