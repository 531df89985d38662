"""Treatment vocabularies for T7's distractors (paper §3 "Task suite" T7: "Four-option
clinical-management question grounded in documented treatment events"; Appendix A L5: the T7
failure mode was a distractor substring leak).

Drugs are grouped by therapeutic area (generic names, real agents); procedures by clinical
domain, separately for ICD-9-CM volume 3 and ICD-10-PCS because the two code systems title
procedures in different styles and a distractor must look like the answer. Titles are the
official long titles (CMS ICD-9-CM v32 / ICD-10-PCS). A drug or procedure of a patient is
classified by phrase match (drugs) or by code, else title keywords (procedures); one that fits
no group gets no T7 question.
"""

from __future__ import annotations

from functools import cache

from clinlib.data.drugnames import drug_key, has_phrase

# Generic names per therapeutic area; used both to classify a prescription and as the pool of
# distractors. No entry is a substring of another entry of the same area.
# a table, laid out by hand: one block per area, its generic names in rows
# fmt: off
THERAPEUTIC_AREAS: dict[str, tuple[str, ...]] = {
    "antidiabetic": (
        "metformin", "glipizide", "glyburide", "glimepiride", "insulin glargine",
        "insulin lispro", "insulin aspart", "sitagliptin", "pioglitazone", "empagliflozin",
        "liraglutide", "dapagliflozin",
    ),
    "antihypertensive": (
        "lisinopril", "losartan", "amlodipine", "hydrochlorothiazide", "valsartan", "enalapril",
        "chlorthalidone", "nifedipine", "hydralazine", "captopril", "irbesartan", "clonidine",
    ),
    "lipid_lowering": (
        "atorvastatin", "simvastatin", "rosuvastatin", "pravastatin", "ezetimibe", "lovastatin",
        "fenofibrate", "gemfibrozil",
    ),
    "antithrombotic": (
        "aspirin", "clopidogrel", "ticagrelor", "prasugrel", "heparin", "warfarin", "apixaban",
        "enoxaparin", "rivaroxaban",
    ),
    "antianginal_rate_control": (
        "metoprolol", "carvedilol", "atenolol", "nitroglycerin", "isosorbide mononitrate",
        "diltiazem", "ranolazine", "digoxin",
    ),
    "renal": (
        "furosemide", "sodium bicarbonate", "epoetin alfa", "sevelamer", "calcitriol",
        "torsemide", "bumetanide", "calcium acetate", "cinacalcet",
    ),
    "electrolyte": (
        "potassium chloride", "magnesium sulfate", "magnesium oxide", "calcium gluconate",
        "potassium phosphate", "sodium phosphate",
    ),
    "analgesic": (
        "acetaminophen", "oxycodone", "tramadol", "morphine", "hydromorphone", "ibuprofen",
        "ketorolac",
    ),
    "gastrointestinal": (
        "pantoprazole", "omeprazole", "famotidine", "docusate sodium", "senna", "ondansetron",
        "polyethylene glycol", "bisacodyl", "metoclopramide", "lactulose",
    ),
    "antibiotic": (
        "ceftriaxone", "levofloxacin", "vancomycin", "piperacillin-tazobactam", "azithromycin",
        "cefepime", "ciprofloxacin", "metronidazole", "cefazolin",
    ),
}
# fmt: on

# Extra phrases that place a recorded drug name in an area without being offered as options.
DRUG_AREA_EXTRA: dict[str, tuple[str, ...]] = {
    "antidiabetic": ("insulin", "glargine"),
    "renal": ("epoetin",),
    "gastrointestinal": ("docusate",),
}

# (domain, ICD version) -> {code: long title}. Adjunct ICD-9 codes 00.40-00.49 ("Procedure on
# single vessel", "Insertion of one vascular stent", ...) count vessels or stents rather than
# name a procedure and never become T7 answers (:func:`is_adjunct`).
PROCEDURE_POOLS: dict[tuple[str, int], dict[str, str]] = {
    ("cardiac", 9): {
        "3722": "Left heart cardiac catheterization",
        "3723": "Combined right and left heart cardiac catheterization",
        "3721": "Right heart cardiac catheterization",
        "8856": "Coronary arteriography using two catheters",
        "8855": "Coronary arteriography using a single catheter",
        "8853": "Angiocardiography of left heart structures",
        "0066": "Percutaneous transluminal coronary angioplasty [PTCA]",
        "3607": "Insertion of drug-eluting coronary artery stent(s)",
        "3606": "Insertion of non-drug-eluting coronary artery stent(s)",
        "8872": "Diagnostic ultrasound of heart",
        "3778": "Insertion of temporary transvenous pacemaker system",
        "3615": "Single internal mammary-coronary artery bypass",
    },
    ("renal", 9): {
        "3995": "Hemodialysis",
        "3895": "Venous catheterization for renal dialysis",
        "5498": "Peritoneal dialysis",
        "5523": "Closed [percutaneous] [needle] biopsy of kidney",
        "3927": "Arteriovenostomy for renal dialysis",
        "3942": "Revision of arteriovenous shunt for renal dialysis",
    },
    ("vascular_transfusion", 9): {
        "9904": "Transfusion of packed cells",
        "3893": "Venous catheterization, not elsewhere classified",
        "9905": "Transfusion of platelets",
        "9907": "Transfusion of other serum",
        "3891": "Arterial catheterization",
        "9915": "Parenteral infusion of concentrated nutritional substances",
    },
    ("cardiac", 10): {
        "4A023N7": "Measurement of Cardiac Sampling and Pressure, Left Heart, Percutaneous "
        "Approach",
        "4A023N6": "Measurement of Cardiac Sampling and Pressure, Right Heart, Percutaneous "
        "Approach",
        "4A023N8": "Measurement of Cardiac Sampling and Pressure, Bilateral, Percutaneous Approach",
        "B2111ZZ": "Fluoroscopy of Multiple Coronary Arteries using Low Osmolar Contrast",
        "B2101ZZ": "Fluoroscopy of Single Coronary Artery using Low Osmolar Contrast",
        "027034Z": "Dilation of Coronary Artery, One Artery with Drug-eluting Intraluminal "
        "Device, Percutaneous Approach",
        "02703ZZ": "Dilation of Coronary Artery, One Artery, Percutaneous Approach",
        "027134Z": "Dilation of Coronary Artery, Two Arteries with Drug-eluting Intraluminal "
        "Device, Percutaneous Approach",
        "B246ZZZ": "Ultrasonography of Right and Left Heart",
    },
    ("renal", 10): {
        "5A1D70Z": "Performance of Urinary Filtration, Intermittent, Less than 6 Hours Per Day",
        "5A1D80Z": "Performance of Urinary Filtration, Intermittent, 6-18 Hours Per Day",
        "5A1D90Z": "Performance of Urinary Filtration, Continuous, Greater than 18 Hours Per Day",
        "0TB03ZX": "Excision of Right Kidney, Percutaneous Approach, Diagnostic",
        "0TB13ZX": "Excision of Left Kidney, Percutaneous Approach, Diagnostic",
        "3E1M39Z": "Irrigation of Peritoneal Cavity using Dialysate, Percutaneous Approach",
    },
    ("vascular_transfusion", 10): {
        "30233N1": "Transfusion of Nonautologous Red Blood Cells into Peripheral Vein, "
        "Percutaneous Approach",
        "30233R1": "Transfusion of Nonautologous Platelets into Peripheral Vein, Percutaneous "
        "Approach",
        "30233L1": "Transfusion of Nonautologous Fresh Plasma into Peripheral Vein, "
        "Percutaneous Approach",
        "05HY33Z": "Insertion of Infusion Device into Upper Vein, Percutaneous Approach",
        "06HY33Z": "Insertion of Infusion Device into Lower Vein, Percutaneous Approach",
        "02HV33Z": "Insertion of Infusion Device into Superior Vena Cava, Percutaneous Approach",
    },
}

# Title keywords (lower case) for procedures outside the pools, checked in this order.
PROCEDURE_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("renal", ("dialysis", "urinary filtration", "kidney", "renal")),
    ("cardiac", ("coronary", "cardiac", "heart", "angiocardiography", "pacemaker")),
    ("vascular_transfusion", ("transfusion", "infusion device", "catheterization", "vein")),
)


def display_name(name: str) -> str:
    """Option text of a generic name: each word capitalised (``"Insulin Glargine"``)."""
    return "-".join(
        " ".join(w[:1].upper() + w[1:] for w in part.split(" ")) for part in name.split("-")
    )


@cache
def drug_match(name: str) -> tuple[str, str] | None:
    """``(area, generic name)`` of a recorded drug name, by whole-word phrase match on its
    :func:`clinlib.data.drugnames.drug_key` (the longest phrase winning): the generic name is the
    matched pool entry, or the matched extra phrase (``"Insulin (Regular) for Hyperkalemia"`` ->
    ``("antidiabetic", "insulin")``), so an option text is always a phrase the recorded name
    contains, never the recorded name itself. None = no area."""
    key = drug_key(name)
    best: tuple[int, str, str] | None = None
    for area, members in THERAPEUTIC_AREAS.items():
        for phrase in members + DRUG_AREA_EXTRA.get(area, ()):
            if has_phrase(key, drug_key(phrase)) and (best is None or len(phrase) > best[0]):
                best = (len(phrase), area, phrase)
    return (best[1], best[2]) if best else None


def is_adjunct(code: str, version: int) -> bool:
    """ICD-9 00.40-00.49: vessel / stent counts, not procedures in their own right."""
    return int(version) == 9 and str(code).strip().startswith("004")


def procedure_domain(code: str, version: int, title: str) -> str | None:
    """Clinical domain of a procedure: by code when pooled, else by title keywords."""
    c = str(code).strip().upper()
    for (domain, ver), pool in PROCEDURE_POOLS.items():
        if ver == int(version) and c in pool:
            return domain
    low = str(title).lower()
    for domain, words in PROCEDURE_KEYWORDS:
        if any(w in low for w in words):
            return domain
    return None


def leaks(a: str, b: str) -> bool:
    """True when one option text is a substring of the other (case-insensitive)."""
    x, y = a.lower().strip(), b.lower().strip()
    return x in y or y in x
