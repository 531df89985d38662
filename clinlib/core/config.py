"""Paths, profiles and run-wide settings (docs/design.md "The artifact contract").

Every path the kit uses is derived here, relative to the repository root, so notebooks,
the CLI and tests agree on where artifacts live. One setting picks the profile everywhere:
an explicit argument (the CLI's ``--profile``), else ``CLINTRACE_PROFILE``, else ``quick``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # clinlib/core/config.py -> repo
DATA_DIR = REPO_ROOT / "data"
BUILD_DIR = DATA_DIR / "build"
PAPER_DATA_DIR = DATA_DIR / "paper"
FIGURES_DIR = REPO_ROOT / "figures"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"

# The significance level of every test and 1 - the confidence level of every interval the kit
# reports (clinlib.analysis.stats / cluster_stats defaults; the "95%" of notebook prose is
# checked against it by clinlib.core.prose).
ALPHA = 0.05
PROFILE_ENV = "CLINTRACE_PROFILE"
DEFAULT_PROFILE = "quick"


# The cohort rules a build can select its patients with (clinlib.data.cohort): the paper's
# (ClinTraceBench §3 "Cohort", the default) and LongMedBench's (>= 15 complete hospitalisations,
# abnormal labs only; seed fact lmb_cohort_rule). `clintrace cohort --cohort-rule` picks one on
# any profile; a profile below may name its own.
CTB_RULE, LONG_RULE = "clintracebench", "longmedbench"
COHORT_RULES: tuple[str, ...] = (CTB_RULE, LONG_RULE)


@dataclass(frozen=True)
class Profile:
    """Sizes for one build profile.

    Attributes:
        name: profile name, also the folder under data/build/.
        n_patients: patients in the synthetic hosp dataset (cohort candidates + background).
        per_disease: cohort patients sampled per index disease (the paper: 100).
        seed: default seed for synthesis and sampling.
        cohort_rule: how the cohort stage selects patients (:data:`COHORT_RULES`).
        counts: the question counts the profile asks, ``quick``'s or ``paper``'s.
    """

    name: str
    n_patients: int
    per_disease: int
    seed: int = 0
    cohort_rule: str = CTB_RULE
    counts: str = "paper"


PROFILES: dict[str, Profile] = {
    # Small but complete: every rule, stratum and task must still be exercised.
    "quick": Profile("quick", n_patients=600, per_disease=12, counts="quick"),
    # The paper's sizes: 4 diseases x 100 patients drawn from a larger population.
    "paper": Profile("paper", n_patients=6000, per_disease=100),
    # MIMIC-IV hosp size (364,627 patients); used by `make bench-cohort` only.
    "mimic-scale": Profile("mimic-scale", n_patients=364_627, per_disease=100),
    # LongMedBench's setting rebuilt small: quick's population, patients with >= 15
    # complete hospitalisations and their abnormal labs only, 6 per index disease, quick's counts.
    "long-quick": Profile(
        "long-quick", n_patients=600, per_disease=6, cohort_rule=LONG_RULE, counts="quick"
    ),
}


def resolve_profile(name: str | None = None) -> str:
    """Return the active profile name: ``name``, else $CLINTRACE_PROFILE, else ``quick``.

    Real-data profiles (``mimic``, ``meds`` or any user-chosen name) are allowed: they only
    name a build folder. Synthetic sizes come from :data:`PROFILES`. An explicitly empty name
    is refused (an empty $CLINTRACE_PROFILE counts as unset).
    """
    if name is not None and not name.strip():
        # `--profile ""` (an unset shell variable) must not quietly pick another profile
        raise ValueError("--profile is empty: name a profile, e.g. --profile quick")
    chosen = name or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if not chosen or "/" in chosen or chosen.startswith(".") or chosen != chosen.strip():
        raise ValueError(f"invalid profile name {chosen!r}: use a plain folder name like 'quick'")
    return chosen


# A variant profile (LLM-rewritten dialogues, paraphrased questions: clinlib.eval.synthesis.rewrite)
# is named "<base>+<variant>", e.g. "quick+rw-gpt-4o-mini": its own build folder, so the base
# corpus and its predictions are never replaced, but the base's sizes, seed and counts.
VARIANT_SEP = "+"


def base_profile(name: str) -> str:
    """The profile a variant derives from (``quick+rw-x`` -> ``quick``; a plain name is its
    own base)."""
    return resolve_profile(name).split(VARIANT_SEP, 1)[0]


def profile_sizes(name: str) -> Profile:
    """Sizes of a synthetic profile; raises a clear error for an unknown one."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown synthetic profile {name!r}; known: {known}") from None


def question_counts(name: str) -> str:
    """Which count table a profile's questions follow: ``quick`` (tests, teaching) or
    ``paper``; a variant follows its base, a real-data profile the paper's."""
    base = base_profile(name)
    return PROFILES[base].counts if base in PROFILES else "paper"


def cohort_rule(name: str | None, rule: str | None = None) -> str:
    """The cohort rule of a build: ``rule`` when given, else the profile's, else the paper's.

    Raises:
        ValueError: an unknown rule (one line naming the known ones).
    """
    if rule is None:
        base = base_profile(name) if name else None
        rule = PROFILES[base].cohort_rule if base in PROFILES else CTB_RULE
    if rule not in COHORT_RULES:
        raise ValueError(f"unknown cohort rule {rule!r}; known: {', '.join(COHORT_RULES)}")
    return rule


def build_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/`` for the active profile (not created)."""
    return BUILD_DIR / resolve_profile(profile)


def raw_hosp_dir(profile: str | None = None) -> Path:
    """Where the synthetic MIMIC-IV hosp tables of a profile live."""
    return build_dir(profile) / "raw" / "hosp"


def figures_dir(profile: str | None = None) -> Path:
    """``figures/<profile>/``: where a profile's notebooks write their figures and tables, so
    that two profiles' figures never mix (not created)."""
    return FIGURES_DIR / resolve_profile(profile)


def artifact_path(name: str, profile: str | None = None) -> Path:
    """Path of a stage artifact, e.g. ``artifact_path("cohort.parquet")``."""
    return build_dir(profile) / name
