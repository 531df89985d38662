"""neopatient: generation of synthetic longitudinal patient records from a cohort described in
words (PopMedQA §3, Fig. 2), in four stages — :mod:`.recipes` (sampling), :mod:`.generate`
(generation, rule-based by default, a backbone optional), :mod:`.match` (matching descriptions to
the kit's code vocabularies through a vector index), :mod:`.verify` (verification against the
recipe) — and :mod:`.records` (MEDS output). :func:`generate_cohort` runs them; ``clintrace
neopatient`` is the command (docs/bench-population.md "neopatient").

Records are synthetic and rule-based by default; they are never MIMIC.
"""

from clinlib.data.neopatient.generate import RULE_BASED, TextEvent
from clinlib.data.neopatient.match import CodeIndex, Match, vocabulary
from clinlib.data.neopatient.pipeline import NeopatientError, NeoRun, generate_cohort, write_run
from clinlib.data.neopatient.recipes import COHORTS, LENGTH_BINS, RecipeError, sample_recipe
from clinlib.data.neopatient.verify import CHECKS, verify_record

__all__ = [
    "CHECKS",
    "COHORTS",
    "LENGTH_BINS",
    "RULE_BASED",
    "CodeIndex",
    "Match",
    "NeoRun",
    "NeopatientError",
    "RecipeError",
    "TextEvent",
    "generate_cohort",
    "sample_recipe",
    "verify_record",
    "vocabulary",
    "write_run",
]
