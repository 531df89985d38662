"""Drugs of the SYNTHETIC hosp generator (paper §3 "Cohort"; the prescriptions/eMAR section of
docs/real-data.md).

Names are spelled as MIMIC-IV ``prescriptions.drug`` spells them (tall-man lettering included),
with strength, unit, route and frequency. ``formulary_drug_cd`` follows MIMIC's house style;
``gsn`` and ``ndc`` are format-valid synthetic identifiers (never read by the kit and not to be
mistaken for real product codes).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Drug:
    """One orderable drug as MIMIC-IV ``prescriptions`` records it.

    Attributes:
        drug: prescriptions.drug.
        formulary_drug_cd: MIMIC-style formulary code.
        prod_strength: product strength text.
        form_rx: dispensed form (TAB, VIAL, ...), or None.
        doses: candidate dose_val_rx strings (ranges such as "1-2" as MIMIC has them).
        dose_unit: dose_unit_rx.
        form_val_disp / form_unit_disp: amount dispensed per dose.
        doses_per_24_hrs: frequency.
        routes: candidate routes (first = most common).
    """

    drug: str
    formulary_drug_cd: str
    prod_strength: str
    form_rx: str | None
    doses: tuple[str, ...]
    dose_unit: str
    form_val_disp: str
    form_unit_disp: str
    doses_per_24_hrs: float
    routes: tuple[str, ...]


DRUGS: dict[str, Drug] = {
    # diabetes
    "metformin": Drug(
        "MetFORMIN (Glucophage)",
        "METF500",
        "500mg Tablet",
        "TAB",
        ("500", "1000", "850"),
        "mg",
        "1",
        "TAB",
        2.0,
        ("PO",),
    ),
    "glipizide": Drug(
        "GlipiZIDE",
        "GLIP5",
        "5mg Tablet",
        "TAB",
        ("5", "10", "2.5"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    "insulin_glargine": Drug(
        "Glargine",
        "GLAR100I",
        "100 Units / mL - 10mL Vial",
        "VIAL",
        ("10", "14", "18", "20", "24", "30", "36"),
        "UNIT",
        "0.1",
        "VIAL",
        1.0,
        ("SC",),
    ),
    "insulin_sliding": Drug(
        "Insulin",
        "INSULIN",
        "100 Units / mL - 10 mL Vial",
        "VIAL",
        ("0",),
        "UNIT",
        "0",
        "VIAL",
        4.0,
        ("SC",),
    ),
    # hypertension
    "lisinopril": Drug(
        "Lisinopril",
        "LISI10",
        "10mg Tablet",
        "TAB",
        ("10", "5", "20", "40"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    "hydrochlorothiazide": Drug(
        "Hydrochlorothiazide",
        "HCTZ25",
        "25mg Tablet",
        "TAB",
        ("25", "12.5"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    "amlodipine": Drug(
        "amLODIPine",
        "AMLO5",
        "5mg Tablet",
        "TAB",
        ("5", "10", "2.5"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    # CAD
    "atorvastatin": Drug(
        "Atorvastatin",
        "ATOR40",
        "40mg Tablet",
        "TAB",
        ("40", "80", "20"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    "aspirin": Drug(
        "Aspirin",
        "ASA81",
        "81mg Tablet",
        "TAB",
        ("81", "325"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO", "PO/NG"),
    ),
    "clopidogrel": Drug(
        "Clopidogrel",
        "CLOP75",
        "75mg Tablet",
        "TAB",
        ("75",),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO",),
    ),
    "metoprolol": Drug(
        "Metoprolol Tartrate",
        "METO25",
        "25mg Tablet",
        "TAB",
        ("25", "12.5", "50"),
        "mg",
        "1",
        "TAB",
        2.0,
        ("PO",),
    ),
    "nitroglycerin": Drug(
        "Nitroglycerin SL",
        "NTG4SL",
        "0.4mg SL Tablet",
        "TAB",
        ("0.4",),
        "mg",
        "1",
        "TAB",
        3.0,
        ("SL",),
    ),
    # CKD
    "furosemide": Drug(
        "Furosemide",
        "FURO40",
        "40mg Tablet",
        "TAB",
        ("40", "20", "80"),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO", "IV"),
    ),
    "sodium_bicarbonate": Drug(
        "Sodium Bicarbonate",
        "SODB650",
        "650mg Tablet",
        "TAB",
        ("650", "1300"),
        "mg",
        "1",
        "TAB",
        2.0,
        ("PO",),
    ),
    "epoetin": Drug(
        "Epoetin Alfa",
        "EPOE4I",
        "4000 Units / mL - 1 mL Vial",
        "VIAL",
        ("4000", "10000", "2000"),
        "UNIT",
        "1",
        "VIAL",
        0.43,
        ("SC", "IV"),
    ),
    # background / acute
    "acetaminophen": Drug(
        "Acetaminophen",
        "ACET325",
        "325mg Tablet",
        "TAB",
        ("325-650", "650", "1000"),
        "mg",
        "1-2",
        "TAB",
        4.0,
        ("PO/NG", "PO"),
    ),
    "pantoprazole": Drug(
        "Pantoprazole",
        "PANT40",
        "40mg Delayed Release Tablet",
        "TAB",
        ("40",),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO", "IV"),
    ),
    "heparin_sc": Drug(
        "Heparin",
        "HEPA5I",
        "5000 Units / mL- 1mL Vial",
        "VIAL",
        ("5000",),
        "UNIT",
        "1",
        "mL",
        3.0,
        ("SC",),
    ),
    "docusate": Drug(
        "Docusate Sodium",
        "DOCU100",
        "100mg Capsule",
        "CAP",
        ("100",),
        "mg",
        "1",
        "CAP",
        2.0,
        ("PO",),
    ),
    "senna": Drug(
        "Senna",
        "SENN187",
        "8.6 mg Tablet",
        "TAB",
        ("1-2", "1"),
        "TAB",
        "1-2",
        "TAB",
        2.0,
        ("PO",),
    ),
    "flush": Drug(
        "Sodium Chloride 0.9%  Flush",
        "NACLFLUSH",
        "10 mL Syringe",
        None,
        ("3", "10"),
        "mL",
        "0.3",
        "SYR",
        3.0,
        ("IV",),
    ),
    "ondansetron": Drug(
        "Ondansetron",
        "ONDA4I",
        "2mg/mL-2mL",
        "VIAL",
        ("4",),
        "mg",
        "1",
        "VIAL",
        4.0,
        ("IV",),
    ),
    "ceftriaxone": Drug(
        "CeftriaXONE",
        "CEFT1I",
        "1gm Vial",
        "VIAL",
        ("1",),
        "g",
        "1",
        "VIAL",
        1.0,
        ("IV",),
    ),
    "levofloxacin": Drug(
        "Levofloxacin",
        "LEVO750",
        "750mg Tablet",
        "TAB",
        ("750",),
        "mg",
        "1",
        "TAB",
        1.0,
        ("PO", "IV"),
    ),
    "potassium_chloride": Drug(
        "Potassium Chloride",
        "KCL20",
        "20mEq Packet",
        "PKT",
        ("40", "20"),
        "mEq",
        "2",
        "PKT",
        1.0,
        ("PO",),
    ),
}

DRUG_KEYS: tuple[str, ...] = tuple(DRUGS)


def synthetic_gsn(index: int) -> str:
    """A 6-digit GSN-shaped identifier for drug ``index`` (synthetic, not a real GSN)."""
    return f"{(index * 7919 + 4271) % 1_000_000:06d}"


def synthetic_ndc(index: int) -> str:
    """An 11-digit NDC-shaped identifier for drug ``index`` (synthetic, not a real NDC)."""
    return f"{(index * 104_729 + 51_079_000_000) % 100_000_000_000:011d}"


# --------------------------------------------------------------------------- pharmacy-order rows
# Drugs outside DRUGS (whose order fixes the base generator's random stream): the IV orders
# that carry diluents, the BASE diluents and the ADDITIVE drugs of a bag (MIMIC-IV
# prescriptions.drug_type; see clinlib.data.sources.synthetic_shapes).

IV_DRUGS: dict[str, Drug] = {
    "vancomycin": Drug(
        "Vancomycin",
        "VANC1I",
        "1g Vial",
        "VIAL",
        ("1000", "1250", "750"),
        "mg",
        "1",
        "VIAL",
        2.0,
        ("IV",),
    ),
    "magnesium_sulfate": Drug(
        "Magnesium Sulfate",
        "MAG2I",
        "2 g / 50 mL Premix Bag",
        "BAG",
        ("2", "4"),
        "gm",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "cefepime": Drug(
        "Cefepime",
        "CEFE2I",
        "2g Vial",
        "VIAL",
        ("2",),
        "g",
        "1",
        "VIAL",
        2.0,
        ("IV",),
    ),
}

BASE_DRUGS: dict[str, Drug] = {
    "ns": Drug(
        "0.9% Sodium Chloride",
        "NS100",
        "100mL Bag",
        "BAG",
        ("100", "50", "250"),
        "mL",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "d5w": Drug(
        "5% Dextrose",
        "D5W100",
        "100 mL Bag",
        "BAG",
        ("50", "100", "250"),
        "mL",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "bag": Drug("Bag", "BAG", "Bag", "BAG", ("1",), "BAG", "1", "BAG", 1.0, ("IV",)),
    "iso_dextrose": Drug(
        "Iso-Osmotic Dextrose",
        "ISOD50",
        "50 mL Bag",
        "BAG",
        ("50", "100"),
        "mL",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "ns_alt": Drug(
        "Sodium Chloride 0.9%",
        "NS250",
        "250 mL Bag",
        "BAG",
        ("250", "100"),
        "mL",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "sterile_water": Drug(
        "Sterile Water",
        "SW10",
        "10 mL Vial",
        "VIAL",
        ("10", "20"),
        "mL",
        "1",
        "VIAL",
        1.0,
        ("IV",),
    ),
}
# Share of diluent rows by name (the first most common, as in MIMIC-IV).
BASE_P: tuple[float, ...] = (0.34, 0.22, 0.18, 0.12, 0.09, 0.05)

ADDITIVE_DRUGS: dict[str, Drug] = {
    "multivitamins": Drug(
        "Multivitamins",
        "MVI",
        "10 mL Vial",
        "VIAL",
        ("10",),
        "mL",
        "1",
        "VIAL",
        1.0,
        ("IV",),
    ),
    "thiamine": Drug(
        "Thiamine",
        "THIA100I",
        "100mg/mL Vial",
        "VIAL",
        ("100",),
        "mg",
        "1",
        "VIAL",
        1.0,
        ("IV",),
    ),
    "folic_acid": Drug(
        "Folic Acid",
        "FOLI1I",
        "5mg/mL Vial",
        "VIAL",
        ("1",),
        "mg",
        "0.2",
        "VIAL",
        1.0,
        ("IV",),
    ),
}

# Drug names as real pharmacy systems write them: qualifiers in parentheses, tall-man
# lettering, trailing and double spaces, double dashes (MIMIC-IV prescriptions.drug; the kit
# normalises them for matching and displays them as written). Ordered as extra MAIN orders.
QUALIFIED_DRUGS: dict[str, Drug] = {
    "insulin_hyperk": Drug(
        "Insulin (Regular) for Hyperkalemia",
        "INSR100I",
        "100 Units / mL - 10 mL Vial",
        "VIAL",
        ("10", "5"),
        "UNIT",
        "0.1",
        "VIAL",
        1.0,
        ("IV",),
    ),
    "heparin_porcine": Drug(
        "Heparin (Porcine)",
        "HEPAPREM",
        "25,000 unit / 250 mL D5W",
        "BAG",
        ("1000", "800", "25,000"),
        "UNIT",
        "1",
        "BAG",
        1.0,
        ("IV",),
    ),
    "hydromorphone": Drug(
        "HYDROmorphone (Dilaudid)",
        "HYDR2I",
        "2mg/mL Syringe",
        "SYR",
        ("0.5-1", "0.5", "1"),
        "mg",
        "1",
        "SYR",
        6.0,
        ("IV", "PO"),
    ),
    "oxycodone": Drug(
        "OxyCODONE (Immediate Release) ",
        "OXYC5",
        "5mg Tablet",
        "TAB",
        ("5-10", "5"),
        "mg",
        "1-2",
        "TAB",
        6.0,
        ("PO",),
    ),
    "oxycodone_apap": Drug(
        "OxyCODONE--Acetaminophen (5mg-325mg)",
        "OXYA5",
        "5mg-325mg Tablet",
        "TAB",
        ("1-2", "1"),
        "TAB",
        "1-2",
        "TAB",
        4.0,
        ("PO",),
    ),
    "kcl_replacement": Drug(
        "Potassium Chloride Replacement (Critical Care and Oncology) ",
        "KCLR",
        "20mEq Packet",
        "PKT",
        ("40", "20"),
        "mEq",
        "2",
        "PKT",
        1.0,
        ("PO",),
    ),
}
# Per-admission probability of a background order of each qualified-name drug; the insulin
# and heparin orders follow hyperkalemia and ACS instead (clinlib.data.sources.synthetic_shapes).
QUALIFIED_P: dict[str, float] = {"hydromorphone": 0.12, "oxycodone": 0.15, "oxycodone_apap": 0.06}
# Spelling variants of base drugs: share of the base drug's orders written this way.
NAME_VARIANTS: dict[str, tuple[str, float]] = {"potassium_chloride": ("kcl_replacement", 0.4)}
