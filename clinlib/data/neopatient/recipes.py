"""neopatient stage 1, Sampling (PopMedQA §3 "Sampling", Fig. 2): a cohort described in words
(positive and negative description) and a length bin give each patient a *recipe* — demographics
and the record divided into temporal segments (one hospital stay each), every segment listing the
concepts it will carry. The recipe is the generator's blueprint and the verifier's reference.

Deviation from the seed, named here: the seed samples recipes with an LLM; the default sampler is
rule-based (labelled ``rule-based`` everywhere it reports) and draws from the kit's own code
vocabularies (``clinlib.data.sources.synthetic_vocab``), so every planned concept has a known
code and matching accuracy can be measured. A backbone may write the events of a segment
(:mod:`.generate`); it never writes the recipe.

Length bins are reached by sampling: segments (stays) are added until the planned event count
reaches the bin's lower bound, and a stay that would overshoot the upper bound is planned shorter
(fewer lab days). Nothing is ever cut from a generated record.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from clinlib.data.sources.synthetic_vocab import (
    DRUGS,
    DX_PAIRS,
    ICD10_DX_TITLES,
    ICD10_PX_TITLES,
    PX_GROUPS,
)
from clinlib.data.vocab import LAB_BY_KEY

# Target coding systems the generator names per event (the seed's "target coding system").
DX, PX, LAB, RX = "ICD10-CM", "ICD10-PCS", "LAB", "RX"
SYSTEMS: tuple[str, ...] = (DX, PX, LAB, RX)
# Record length bins in coded events (admission and discharge rows included), [low, high).
LENGTH_BINS: dict[str, tuple[int, int]] = {
    "short": (120, 300),
    "medium": (300, 800),
    "long": (800, 2000),
}
BASIC_LABS = ("sodium", "potassium", "chloride", "bicarbonate", "bun", "creatinine", "glucose")
CBC_LABS = ("hemoglobin", "hematocrit", "platelets", "wbc")
MIN_GAP_DAYS = 30  # between one discharge and the next admission (the kit's cohort needs > 7)


class RecipeError(ValueError):
    """An unknown cohort recipe or length bin (one line naming it and the known ones)."""


@dataclass(frozen=True)
class Concept:
    """One planned concept: its target system, the code the recipe plans, the official title."""

    system: str
    code: str
    title: str


@dataclass(frozen=True)
class CohortSpec:
    """A cohort described in words, and the vocabulary keys its recipes draw from.

    Attributes:
        positive / negative: the cohort's inclusion and exclusion descriptions (seed Fig. 2).
        index: diagnosis keys (``DX_PAIRS``) of the defining condition; every stay carries one.
        chronic: comorbidity diagnosis keys, some drawn per patient, carried at every stay.
        reasons: diagnosis keys of the acute problem that starts a stay.
        excluded: diagnosis keys the negative description forbids.
        drugs: (``DRUGS`` key, dose) of the long-term regimen, the same dose at every stay.
        acute_drugs: drug keys given in some stays.
        procedures: ``PX_GROUPS`` keys of procedures some stays carry.
        labs: extra panel labs (beyond the basic and blood-count panels) measured each day.
        shifts: lab key -> (mean, sd) of its value in this cohort (else inside the range).
    """

    name: str
    positive: str
    negative: str
    index: tuple[str, ...]
    chronic: tuple[str, ...]
    reasons: tuple[str, ...]
    excluded: tuple[str, ...]
    drugs: tuple[tuple[str, str], ...]
    acute_drugs: tuple[str, ...]
    procedures: tuple[str, ...]
    labs: tuple[str, ...]
    shifts: dict[str, tuple[float, float]]


COHORTS: dict[str, CohortSpec] = {
    "t2dm-ckd": CohortSpec(
        "t2dm-ckd",
        "Patients with type 2 diabetes whose kidneys are involved (diabetic chronic kidney "
        "disease), on metformin and long-acting insulin, admitted for acute problems.",
        "No coronary artery disease and no myocardial infarction.",
        index=("dm_renal", "ckd_3"),
        chronic=("hyperlipidemia", "obesity", "gerd", "depression"),
        reasons=("pneumonia", "uti", "hyperkalemia", "dm_hypoglycemia"),
        excluded=("cad", "nstemi", "old_mi", "angina", "unstable_angina"),
        drugs=(("metformin", "500"), ("insulin_glargine", "20"), ("atorvastatin", "40")),
        acute_drugs=("ceftriaxone", "ondansetron", "acetaminophen", "pantoprazole"),
        procedures=("central_line", "echo"),
        labs=("hba1c", "calcium", "anion_gap"),
        shifts={
            "glucose": (190, 40),
            "creatinine": (2.1, 0.3),
            "bun": (38, 6),
            "hba1c": (8.2, 0.6),
        },
    ),
    "cad-pci": CohortSpec(
        "cad-pci",
        "Patients with coronary artery disease admitted for non-ST elevation myocardial "
        "infarction and treated by percutaneous coronary intervention with a drug-eluting stent, "
        "then on aspirin, clopidogrel and a statin.",
        "No chronic kidney disease and no diabetes.",
        index=("cad", "nstemi"),
        chronic=("hyperlipidemia", "tobacco_history", "obesity", "osa"),
        reasons=("chest_pain", "nstemi", "heart_failure", "syncope"),
        excluded=("ckd_3", "ckd_4", "esrd", "dm_uncomplicated", "dm_renal"),
        drugs=(
            ("aspirin", "81"),
            ("clopidogrel", "75"),
            ("atorvastatin", "80"),
            ("metoprolol", "25"),
        ),
        acute_drugs=("heparin_sc", "nitroglycerin", "acetaminophen", "docusate"),
        procedures=("left_heart_cath", "pci_des", "echo"),
        labs=("troponin_t", "ldl", "total_cholesterol"),
        shifts={"troponin_t": (0.35, 0.1), "ldl": (150, 20), "total_cholesterol": (230, 20)},
    ),
    "ckd-progression": CohortSpec(
        "ckd-progression",
        "Patients with hypertensive chronic kidney disease progressing to stage 4, with anemia "
        "of chronic kidney disease, on loop diuretics and erythropoietin.",
        "No diabetes.",
        index=("htn_ckd", "ckd_4"),
        chronic=("anemia_ckd", "hyperlipidemia", "gerd", "hypothyroidism"),
        reasons=("aki", "hyperkalemia", "acidosis", "heart_failure"),
        excluded=("dm_uncomplicated", "dm_renal", "dm_uncontrolled"),
        drugs=(("furosemide", "40"), ("epoetin", "4000"), ("sodium_bicarbonate", "650")),
        acute_drugs=("heparin_sc", "pantoprazole", "ondansetron", "acetaminophen"),
        procedures=("transfusion", "dialysis_catheter"),
        labs=("calcium", "anion_gap"),
        shifts={
            "creatinine": (3.6, 0.4),
            "bun": (55, 8),
            "hemoglobin": (9.2, 0.6),
            "hematocrit": (28.0, 2.0),
            "bicarbonate": (19, 1.5),
        },
    ),
}


@dataclass(frozen=True)
class Segment:
    """One temporal segment of a recipe: a hospital stay and the concepts it carries."""

    index: int
    admit: datetime
    los_days: int
    admission_type: str
    diagnoses: tuple[Concept, ...]
    procedures: tuple[Concept, ...]
    medications: tuple[tuple[Concept, str], ...]  # (drug, dose)
    labs: tuple[Concept, ...]  # measured once a day, every day of the stay

    @property
    def discharge(self) -> datetime:
        return self.admit + timedelta(days=self.los_days, hours=4)

    @property
    def n_events(self) -> int:
        """Coded events this stay will have (admission + discharge included)."""
        days = self.los_days + 1
        n = len(self.diagnoses) + len(self.procedures) + len(self.medications)
        return 2 + n + days * len(self.labs)


@dataclass(frozen=True)
class Recipe:
    """A patient recipe: cohort, demographics, length bin and segments (seed Fig. 2)."""

    subject_id: int
    cohort: str
    gender: str
    age: int
    length_bin: str
    segments: tuple[Segment, ...]

    @property
    def n_events(self) -> int:
        return sum(s.n_events for s in self.segments)

    def planned_codes(self, segment: int) -> set[tuple[str, str]]:
        """(system, code) pairs segment ``segment`` plans."""
        s = self.segments[segment]
        concepts = [*s.diagnoses, *s.procedures, *(c for c, _ in s.medications), *s.labs]
        return {(c.system, c.code) for c in concepts}


def dx_concept(key: str) -> Concept:
    code = DX_PAIRS[key][1]
    return Concept(DX, code, ICD10_DX_TITLES[code])


def px_concepts(key: str) -> list[Concept]:
    return [Concept(PX, c, ICD10_PX_TITLES[c]) for c in PX_GROUPS[key][1]]


def lab_concept(key: str) -> Concept:
    lab = LAB_BY_KEY[key]
    return Concept(LAB, str(lab.itemids[0]), lab.label)


def rx_concept(key: str) -> Concept:
    return Concept(RX, key, DRUGS[key].drug)


def cohort_spec(name: str) -> CohortSpec:
    """The cohort called ``name``; :class:`RecipeError` (one line) for an unknown one."""
    if name not in COHORTS:
        raise RecipeError(f"unknown neopatient recipe {name!r}; known: {', '.join(COHORTS)}")
    return COHORTS[name]


def bin_bounds(name: str) -> tuple[int, int]:
    if name not in LENGTH_BINS:
        raise RecipeError(f"unknown length bin {name!r}; known: {', '.join(LENGTH_BINS)}")
    return LENGTH_BINS[name]


def patient_rng(seed: int, cohort: str, subject_id: int, attempt: int = 0) -> np.random.Generator:
    """A generator seeded from (seed, cohort, subject, attempt): one patient's draws do not
    depend on how many patients are generated or in which order."""
    digest = hashlib.md5(f"{seed}:{cohort}:{subject_id}:{attempt}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _numeric_dose(key: str) -> str:
    """A drug's first candidate dose that is a plain number (not a range such as "1-2")."""
    return next(d for d in DRUGS[key].doses if d.replace(".", "", 1).isdigit())


def _segment(
    spec: CohortSpec, rng, index: int, admit: datetime, los: int, chronic: list[str]
) -> Segment:
    reason = str(rng.choice(spec.reasons))
    dx_keys = list(dict.fromkeys([reason, *spec.index, *chronic]))
    procs: list[Concept] = []
    if spec.procedures and rng.random() < 0.5:
        procs = px_concepts(str(rng.choice(spec.procedures)))
    meds = [(rx_concept(k), dose) for k, dose in spec.drugs]
    for k in rng.choice(spec.acute_drugs, size=2, replace=False):
        meds.append((rx_concept(str(k)), _numeric_dose(str(k))))
    labs = [lab_concept(k) for k in (*BASIC_LABS, *CBC_LABS, *spec.labs)]
    return Segment(
        index=index,
        admit=admit,
        los_days=los,
        admission_type=str(rng.choice(["EW EMER.", "URGENT", "ELECTIVE"])),
        diagnoses=tuple(dx_concept(k) for k in dx_keys),
        procedures=tuple(procs),
        medications=tuple(meds),
        labs=tuple(labs),
    )


def sample_recipe(
    cohort: str, subject_id: int, length_bin: str = "short", seed: int = 0, attempt: int = 0
) -> Recipe:
    """Sample one patient's recipe; stays are added until the planned event count reaches the
    bin, the last stay shortened (fewer days, so fewer daily labs) if a full one would overshoot.
    """
    spec = cohort_spec(cohort)
    low, high = bin_bounds(length_bin)
    rng = patient_rng(seed, cohort, subject_id, attempt)
    chronic = sorted(str(k) for k in rng.choice(spec.chronic, size=2, replace=False))
    admit = datetime(2150, 1, 1, 10, 0) + timedelta(days=int(rng.integers(0, 3650)))
    segments: list[Segment] = []
    total = 0
    while total < low or len(segments) < 2:
        los = int(rng.integers(2, 7))
        seg = _segment(spec, rng, len(segments), admit, los, chronic)
        while total + seg.n_events >= high and seg.los_days > 0:
            seg = _segment(
                spec,
                patient_rng(seed, cohort, subject_id, 1000 + len(segments)),
                len(segments),
                admit,
                seg.los_days - 1,
                chronic,
            )
        if total + seg.n_events >= high:
            raise RecipeError(f"bin {length_bin!r} [{low}, {high}) cannot be reached by stays")
        segments.append(seg)
        total += seg.n_events
        admit = seg.discharge + timedelta(days=MIN_GAP_DAYS + int(rng.integers(0, 120)))
        admit = admit.replace(hour=10, minute=0)
    return Recipe(
        subject_id=subject_id,
        cohort=cohort,
        gender=str(rng.choice(["F", "M"])),
        age=int(rng.integers(45, 85)),
        length_bin=length_bin,
        segments=tuple(segments),
    )
