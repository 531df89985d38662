"""Invented diagnoses: a condition named in a turn that the patient's record does not hold
(paper §3 "Cohort": dialogues carry only the record's facts; Appendix C.1 "the rewrite must not
add a clinical fact").

``no_untraced_codes`` and ``values_bound`` see a diagnosis only through its ICD code; a rewrite
that writes "you also have diabetes" without a code passes both. ``no_invented_conditions``
(:func:`invented_condition_problems`) refuses a turn that names a condition found nowhere in the
patient's record. Source of the condition names (no ICD browser or SNOMED list installs here as
data; the same situation as the drug lexicon, :mod:`clinlib.dialogue.lexicon`):

* :data:`CONDITIONS`, a list shipped with the kit: common diagnosis names, clinical and lay
  ("heart attack", "high blood pressure"), each with the record stems that make it the
  patient's own ("high blood pressure" is the patient's when a title holds "hypertens");
* :func:`vocabulary_conditions`, the kit's vocabulary: the head of every ICD diagnosis title
  of the synthetic source (text before the first comma, "Unspecified"/"Other" dropped; status
  codes such as "Long term (current) use of insulin" and symptom titles left out).

A name is the patient's own when one of its stems occurs in any event's label, code or route
(:func:`clinlib.dialogue.lexicon.record_text`: diagnosis titles, patient statements, ...). A
lab explanation the templates themselves write ("which means your diabetes control needs
tightening" on a high HbA1c, :data:`clinlib.dialogue.templates.LAB_MEANING`) is allowed in a
turn that cites that lab: it is the template's wording, not a diagnosis.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clinlib.data.sources.synthetic_vocab.codes import ICD9_DX_TITLES, ICD10_DX_TITLES
from clinlib.dialogue.matching import strip_tags
from clinlib.dialogue.selection import lab_key
from clinlib.dialogue.templates import LAB_MEANING, MEANING_DEFAULT

CHECK_NAME = "no_invented_conditions"
# name -> record stems (lower case, substring of the record text) that make it the patient's.
_KIDNEY = ("kidney", "renal", "nephr")
_HEART_FAILURE = ("heart failure", "cardiac failure", "cardiomyopathy")
_CORONARY = ("myocardial infarction", "coronary", "angina", "infarct", "nstemi", "stemi")
_DIABETES = ("diabet",)
_ANEMIA = ("anemi", "anaemi")
CONDITIONS: dict[str, tuple[str, ...]] = {
    "diabetes": _DIABETES,
    "diabetic": _DIABETES,
    "type 2 diabetes": _DIABETES,
    "type 1 diabetes": ("type 1 diabetes", "type i diabetes"),
    "hypertension": ("hypertens",),
    "high blood pressure": ("hypertens",),
    "hypotension": ("hypotens",),
    "low blood pressure": ("hypotens",),
    "heart failure": _HEART_FAILURE,
    "congestive heart failure": _HEART_FAILURE,
    "cardiomyopathy": ("cardiomyopathy",),
    "heart attack": ("myocardial infarction", "infarct", "stemi"),
    "myocardial infarction": ("myocardial infarction", "infarct", "stemi"),
    "coronary artery disease": _CORONARY,
    "heart disease": ("heart", "cardi", "coronary"),
    "angina": ("angina",),
    "atrial fibrillation": ("atrial fibrillation",),
    "atrial flutter": ("atrial flutter",),
    "arrhythmia": ("arrhythm", "fibrillation", "flutter", "tachycardia", "bradycardia"),
    "stroke": ("stroke", "cerebral infarction", "cerebrovascular", "occlusion of cerebral"),
    "transient ischemic attack": ("transient ischemic", "transient cerebral ischemia"),
    "kidney disease": _KIDNEY,
    "chronic kidney disease": ("chronic kidney disease", "end stage renal"),
    "kidney failure": _KIDNEY,
    "renal failure": _KIDNEY,
    "kidney stones": ("calculus of kidney", "kidney stone", "nephrolithiasis"),
    "anemia": _ANEMIA,
    "anaemia": _ANEMIA,
    "pneumonia": ("pneumonia",),
    "sepsis": ("sepsis", "septic"),
    "septicemia": ("sepsis", "septic"),
    "urinary tract infection": ("urinary tract infection",),
    "asthma": ("asthma",),
    "copd": ("chronic obstructive", "chronic airway obstruction", "copd"),
    "emphysema": ("emphysema",),
    "chronic bronchitis": ("bronchitis",),
    "pulmonary embolism": ("pulmonary embolism",),
    "deep vein thrombosis": ("venous thrombosis", "deep vein", "embolism and thrombosis"),
    "cancer": ("cancer", "malignant", "neoplasm", "carcinoma", "lymphoma", "leukemia"),
    "tumor": ("neoplasm", "tumor", "malignant"),
    "leukemia": ("leukemia",),
    "lymphoma": ("lymphoma",),
    "cirrhosis": ("cirrhosis",),
    "hepatitis": ("hepatitis",),
    "liver disease": ("liver", "hepat", "cirrhosis"),
    "pancreatitis": ("pancreatitis",),
    "gout": ("gout",),
    "arthritis": ("arthritis", "arthropathy"),
    "osteoporosis": ("osteoporosis",),
    "epilepsy": ("epilep", "seizure"),
    "dementia": ("dementia", "alzheimer"),
    "alzheimer's disease": ("alzheimer",),
    "parkinson's disease": ("parkinson",),
    "depression": ("depress",),
    "anxiety": ("anxiety",),
    "schizophrenia": ("schizophren",),
    "bipolar disorder": ("bipolar",),
    "hypothyroidism": ("hypothyroid",),
    "hyperthyroidism": ("hyperthyroid", "thyrotoxicosis"),
    "obesity": ("obesity", "obese"),
    "hyperlipidemia": ("hyperlipid", "hypercholesterol", "lipid"),
    "high cholesterol": ("hyperlipid", "hypercholesterol", "lipid"),
    "sleep apnea": ("sleep apnea",),
    "hiv": ("hiv", "human immunodeficiency"),
    "tuberculosis": ("tuberculosis",),
    "covid-19": ("covid",),
    "influenza": ("influenza",),
    "cellulitis": ("cellulitis",),
    "gastrointestinal bleeding": ("hemorrhage of gastrointestinal", "gastrointestinal hemorrhage"),
    "peptic ulcer": ("ulcer",),
    "reflux disease": ("reflux",),
    "hyperkalemia": ("hyperkalemia", "hyperpotassemia"),
    "hypokalemia": ("hypokalemia", "hypopotassemia"),
    "hyponatremia": ("hyponatremia",),
    "acidosis": ("acidosis",),
    "peripheral vascular disease": ("peripheral vascular", "peripheral arter"),
    "aortic stenosis": ("aortic stenosis", "aortic valve"),
}
# Titles that are no diagnosis a writer could invent as a condition: status codes, history and
# symptom titles (a patient line may describe chest pain without it being a diagnosis).
_NOT_CONDITION = re.compile(
    r"\b(?:use of|status|history of|presence of|dependence on|chest pain|constipation|"
    r"syncope|collapse)\b",
    re.I,
)
_LEAD = re.compile(r"^(?:other and unspecified|unspecified|other)\s+", re.I)


def vocabulary_conditions(titles: Iterable[str] | None = None) -> list[str]:
    """Condition names from ICD diagnosis titles (default: the synthetic source's vocabulary):
    the lower-case head before the first comma, a leading "Unspecified"/"Other" dropped,
    status, history and symptom titles left out."""
    if titles is None:
        titles = [*ICD9_DX_TITLES.values(), *ICD10_DX_TITLES.values()]
    out = set()
    for title in titles:
        head = _LEAD.sub("", str(title).split(",", 1)[0].strip()).lower()
        if len(head) >= 5 and not _NOT_CONDITION.search(head):
            out.add(" ".join(head.split()))
    return sorted(out)


def condition_stems(name: str) -> tuple[str, ...]:
    """Record stems that make a condition name the patient's own: its shipped stems, else the
    name itself plus the stems of every shipped name it contains ("essential hypertension" is
    the patient's when the record holds "hypertens")."""
    if name in CONDITIONS:
        return CONDITIONS[name]
    stems = {name}
    for short, own in CONDITIONS.items():
        if re.search(rf"(?<![a-z0-9]){re.escape(short)}(?![a-z0-9])", name):
            stems.update(own)
    return tuple(sorted(stems))


@functools.cache
def _pattern() -> re.Pattern[str]:
    names = sorted({*CONDITIONS, *vocabulary_conditions()}, key=len, reverse=True)
    alt = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])")


def find_conditions(text: str) -> list[str]:
    """Condition names (lower case, longest match, in order) in a text."""
    low = " ".join(text.lower().split())
    return [m.group(0) for m in _pattern().finditer(low)]


def _template_wording(cited: Iterable[Mapping[str, Any]]) -> set[str]:
    """Condition names the templates' own explanations of the cited labs use."""
    phrases = list(MEANING_DEFAULT)
    for e in cited:
        if e.get("kind") == "lab":
            for meanings in LAB_MEANING.get(lab_key(e) or "", {}).values():
                phrases += meanings
    return {n for p in phrases for n in find_conditions(p)}


def invented_condition_problems(
    turns: Sequence[Mapping[str, Any]],
    record: str,
    events_by_id: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """``no_invented_conditions``: problems of some turns (empty when the check passes).

    Args:
        turns: turn records (turn_idx, text_tagged, event_ids).
        record: :func:`clinlib.dialogue.lexicon.record_text` of every event of the patient.
        events_by_id: the patient's events keyed by id (the turn's cited labs).
    """
    bad = []
    for t in turns:
        found = find_conditions(strip_tags(str(t["text_tagged"])))
        if not found:
            continue
        ids = t.get("event_ids")
        cited = [
            events_by_id[str(i)] for i in ([] if ids is None else ids) if str(i) in events_by_id
        ]
        allowed = _template_wording(cited)
        for name in dict.fromkeys(found):
            if name not in allowed and not any(s in record for s in condition_stems(name)):
                bad.append(f"turn {t['turn_idx']}: {name!r} is not among the patient's diagnoses")
    return bad
