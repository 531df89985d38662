"""What if the length budget never left out a key diagnosis or procedure? (paper "Limitations",
"Synthetic dialogues": "key labs, admissions and discharges, procedures, and diagnoses are
covered at >= 98%"; Appendix C.1 / Fig. 13: dialogue length median 13.7k, mean 15.0k, max
30.7k characters.)

The kit's corpus keeps Fig. 13's lengths (:mod:`clinlib.dialogue.budget`), so on a long record
the budget leaves diagnoses and procedures unstated and their coverage falls below 98%. The
what-if corpus is synthesised the same way with diagnoses and procedures never left out (tier
0, :func:`clinlib.dialogue.synth.synthesize_corpus` ``keep_kinds``): everything else, the
templates, the seed and the verifier, is the kit's. :func:`keep_key_whatif` puts the two side by
side — coverage per key kind and characters per dialogue beside the paper's figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from clinlib.core.config import PROFILES, base_profile, build_dir, resolve_profile
from clinlib.core.seed_facts import SEED_FACTS
from clinlib.dialogue.stats import (
    KIT,
    PAPER,
    PAPER_KEY_COVERAGE,
    WHATIF,
    WHATIF_FILE,
    WHATIF_INPUTS,
    key_coverage,
    whatif_fingerprints,
)
from clinlib.dialogue.synth import synthesize_corpus

KEEP_KINDS: tuple[str, ...] = ("diagnosis", "procedure")


def corpus_row(name: str, summary: pd.DataFrame, coverage: pd.DataFrame, events) -> dict:
    """One corpus's row: coverage per key kind, kept dialogues' characters (thousands)."""
    key = key_coverage(coverage, events).set_index("kind")["coverage"]
    kept = summary[summary["kept"]] if "kept" in summary.columns else summary
    k = kept["n_chars"].astype(float) / 1000
    return dict(
        corpus=name,
        **{f"{kind} coverage": float(v) for kind, v in key.items()},
        dropped_for_length=int(key_coverage(coverage, events)["dropped_for_length"].sum()),
        kchars_median=float(k.median()),
        kchars_mean=float(k.mean()),
        kchars_max=float(k.max()),
        patients=len(kept),
    )


def keep_key_whatif(
    events: pd.DataFrame,
    cohort: pd.DataFrame | None,
    summary: pd.DataFrame,
    coverage: pd.DataFrame,
    seed: int = 0,
    workers: int | None = None,
) -> pd.DataFrame:
    """The kit's corpus beside the what-if corpus and the paper's figures.

    Args:
        events / cohort: the build's events and cohort (the what-if is synthesised from them).
        summary / coverage: the kit's corpus (dialogue_summary, event_coverage).
        seed: the profile's seed (the kit's corpus was built with it).
        workers: synthesis processes (as :func:`~clinlib.dialogue.synth.synthesize_corpus`).

    Returns:
        One row per corpus (kit, what-if, paper): coverage of each key kind, events dropped
        for length, characters per kept dialogue (median / mean / max, thousands), patients.
    """
    alt = synthesize_corpus(events, cohort, seed, workers=workers, keep_kinds=KEEP_KINDS)
    rows = [
        corpus_row(KIT, summary, coverage, events),
        corpus_row(WHATIF, alt["dialogue_summary"], alt["event_coverage"], events),
    ]
    chars = SEED_FACTS["ctb_dialogue_chars"]
    paper = {c: PAPER_KEY_COVERAGE for c in rows[0] if c.endswith(" coverage")}
    rows.append(
        dict(
            corpus=PAPER,
            **paper,
            kchars_median=chars.number(0) / 1000,
            kchars_mean=chars.number(1) / 1000,
            kchars_max=chars.number(2) / 1000,
            patients=int(SEED_FACTS["ctb_fig13_n"].number(0)),
        )
    )
    return pd.DataFrame(rows)


# --- the cached table (a build's what-if is about a minute of synthesis on quick; read back by
# clinlib.dialogue.stats.load_whatif) ---------------------------------------------------------


def write_whatif(profile: str | None = None) -> Path:
    """Compute :func:`keep_key_whatif` for a build and cache it beside the build's artifacts
    (``dialogue_whatif.parquet`` + the sha256 of the inputs it read, in
    ``dialogue_whatif.json``)."""
    name = resolve_profile(profile)
    build = build_dir(name)
    base = base_profile(name)
    seed = PROFILES[base].seed if base in PROFILES else 0
    read = {a: pd.read_parquet(build / f"{a}.parquet") for a in WHATIF_INPUTS}
    table = keep_key_whatif(
        read["events"], read["cohort"], read["dialogue_summary"], read["event_coverage"], seed
    )
    table.to_parquet(build / WHATIF_FILE, index=False)
    (build / "dialogue_whatif.json").write_text(json.dumps(whatif_fingerprints(build), indent=1))
    return build / WHATIF_FILE


def main(argv: list[str] | None = None) -> int:
    """``python -m clinlib.dialogue.whatif --profile P``: write the cached table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    try:
        path = write_whatif(args.profile)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(pd.read_parquet(path).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
