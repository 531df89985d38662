"""Invented entities: drug, allergen and allergy words a patient's record does not hold
(paper §3 "Cohort": dialogues carry only the record's facts; Appendix C.1).

Source of the lexicon: the kit's own vocabularies (:data:`clinlib.dialogue.matching.DRUG_LEXICON`
and every medication label of the events table) plus the list shipped below
(:data:`SHIPPED_DRUGS`, :data:`ALLERGENS`): generic names of commonly prescribed and commonly
allergy-listed drugs, drug classes and non-drug allergens, written for this kit. No
RxNorm-derived list installs from PyPI as data inside a wheel here: the RxNorm packages query
the RxNorm web API at run time (not reachable), and the one drug-name wheel that ships its data
(``drug-named-entity-recognition``) is DrugBank/MeSH-derived, unpickles a third-party file, and
holds short brand synonyms ("Sone") that collide with English words; docs/bench-verifier.md
says the same.

``no_invented_entities`` (:func:`invented_entity_problems`) refuses a turn that names a lexicon
drug or allergen found nowhere in the patient's record (any event's label, title or statement,
stated or not), or speaks of an allergy when the turn cites no event that does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher, strip_tags

SHIPPED_DRUGS: tuple[str, ...] = tuple(
    """
    abacavir acarbose acyclovir adalimumab adenosine alendronate alteplase amikacin amitriptyline
    amphotericin ampicillin anastrozole argatroban aripiprazole atropine azathioprine baclofen
    benazepril benzonatate benztropine betamethasone bivalirudin bupropion buprenorphine buspirone
    canagliflozin carbamazepine carbidopa cefdinir cefepime cefoxitin ceftazidime cefuroxime
    celecoxib cetirizine chlorpromazine chlorthalidone cilostazol citalopram clarithromycin
    clindamycin clonazepam clozapine codeine colchicine cyclobenzaprine cyclophosphamide
    cyclosporine dabigatran daptomycin desmopressin dexmedetomidine dicyclomine diclofenac
    dicloxacillin diphenhydramine dobutamine donepezil dopamine doxazosin doxycycline dulaglutide
    duloxetine edoxaban enalaprilat entecavir epinephrine eplerenone ertapenem erythromycin
    escitalopram esmolol esomeprazole ethambutol etomidate exenatide ezetimibe fenofibrate
    fexofenadine filgrastim finasteride fluconazole fludrocortisone fluoxetine fluticasone
    fondaparinux fosfomycin gemfibrozil gentamicin glucagon guaifenesin hydrocodone
    hydrocortisone hydroxychloroquine hydroxyzine imipenem indomethacin ipratropium irbesartan
    isoniazid ivermectin ketamine lacosamide lactulose lamotrigine lansoprazole ledipasvir
    leflunomide letrozole levalbuterol lidocaine linagliptin linezolid liraglutide lithium
    loperamide loratadine lovastatin meclizine medroxyprogesterone meloxicam memantine
    meperidine mesalamine methadone methimazole methotrexate methocarbamol methyldopa
    metolazone micafungin milrinone minocycline mirtazapine montelukast moxifloxacin
    mycophenolate nabumetone nadolol naltrexone naproxen nebivolol neomycin nicardipine nicotine
    nitrofurantoin norepinephrine nortriptyline nystatin octreotide olanzapine olmesartan
    oseltamivir oxcarbazepine oxybutynin paroxetine penicillin pentoxifylline phenobarbital
    phenylephrine phenytoin pioglitazone piperacillin-tazobactam pramipexole prasugrel
    prazosin pregabalin primidone prochlorperazine promethazine propranolol propylthiouracil
    pseudoephedrine pyridostigmine quinapril ramipril ranitidine repaglinide rifampin
    risperidone rocuronium ropinirole semaglutide sertraline sildenafil sirolimus sotalol
    succinylcholine sucralfate sulfamethoxazole sulfasalazine sumatriptan tacrolimus tadalafil
    telmisartan terazosin terbinafine teriparatide tetracycline thiamine tigecycline timolol
    tiotropium tizanidine tobramycin topiramate tranexamic triamcinolone trimethoprim ursodiol
    valacyclovir valganciclovir valproate vasopressin venlafaxine verapamil voriconazole
    ziprasidone zoledronic penicillins cephalosporins sulfonamides sulfa opioids opiates
    benzodiazepines nsaids statins
    """.split()
)
# Allergens that are not drugs (Appendix C.1 trap statements name allergens the same way).
ALLERGENS: tuple[str, ...] = (
    "latex",
    "peanuts",
    "peanut",
    "shellfish",
    "iodine",
    "contrast dye",
    "bee stings",
    "eggs",
    "tree nuts",
    "gluten",
)
ALLERGY_CUES = re.compile(r"\b(?:allerg\w*|anaphyla\w*|intoleran\w*|hives)\b", re.I)


def lexicon_names() -> list[str]:
    """Every lexicon name: the kit's drug list, the shipped drugs and the allergens."""
    return sorted({*DRUG_LEXICON, *SHIPPED_DRUGS, *ALLERGENS})


_MATCHER: DrugMatcher | None = None


def lexicon_matcher() -> DrugMatcher:
    """A :class:`DrugMatcher` over :func:`lexicon_names` (built once)."""
    global _MATCHER
    if _MATCHER is None:
        _MATCHER = DrugMatcher(lexicon_names())
    return _MATCHER


def record_text(events: Iterable[Mapping[str, Any]]) -> str:
    """The patient's record as one lower-case string of labels, titles and codes (every event,
    stated or not): a lexicon name found in it is the patient's own."""
    parts = []
    for e in events:
        for col in ("label", "code", "route"):
            v = e.get(col)
            if isinstance(v, str) and v.strip():
                parts.append(v.lower())
    return " | ".join(parts)


def invented_entity_problems(
    turns: Sequence[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    events_by_id: Mapping[str, Mapping[str, Any]] | None = None,
    record: str | None = None,
) -> list[str]:
    """``no_invented_entities``: problems of some turns (empty when the check passes).

    Args:
        turns: turn records (turn_idx, text_tagged, event_ids).
        events: the patient's events (every one, stated or not).
        events_by_id: the events keyed by id (built from ``events`` when None).
        record: :func:`record_text` of the events, if already computed.
    """
    events = list(events)
    by_id = events_by_id if events_by_id is not None else {str(e["event_id"]): e for e in events}
    record = record if record is not None else record_text(events)
    matcher = lexicon_matcher()
    bad = []
    for t in turns:
        text = strip_tags(str(t["text_tagged"]))
        for name in matcher.find(text):
            if name not in record:
                bad.append(f"turn {t['turn_idx']}: {name!r} is not in the patient's record")
        m = ALLERGY_CUES.search(text)
        if m and not any(
            ALLERGY_CUES.search(str(by_id[i].get("label") or ""))
            for i in t["event_ids"]
            if i in by_id
        ):
            bad.append(f"turn {t['turn_idx']}: {m.group(0)!r} but no cited event is an allergy")
    return bad
