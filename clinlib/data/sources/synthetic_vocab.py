"""Curated vocabularies for the SYNTHETIC MIMIC-IV-shaped hosp generator (paper §3 "Cohort",
Fig. 2 stages 1–2; ../shared/reference/mimic-iv.md).

Everything here is a real-world code or name, so the synthetic tables join and read like
MIMIC-IV's own:

* lab items: MIMIC-IV ``d_labitems`` itemids with their label / fluid / category; units and
  reference ranges of the 18-lab panel come from :data:`clinlib.data.vocab.LAB_PANEL` (hemoglobin and
  hematocrit sex-specific per the reference doc), the non-panel ranges are typical adult ranges;
* diagnoses: ICD-9-CM and ICD-10-CM codes written as MIMIC writes them (no dot, text) with
  their official long titles, paired ICD-9 -> ICD-10 by clinical meaning so one admission-level
  decision can be emitted in whichever version the admission's date calls for;
* procedures: ICD-9-CM volume 3 and ICD-10-PCS codes with their long titles;
* drugs: names spelled as MIMIC-IV ``prescriptions.drug`` spells them (tall-man lettering
  included), with strength, unit, route and frequency. ``formulary_drug_cd`` follows MIMIC's
  house style; ``gsn`` and ``ndc`` are format-valid synthetic identifiers (they are never read
  by the kit and must not be mistaken for real product codes).
"""

from __future__ import annotations

from dataclasses import dataclass

from clinlib.data.vocab import LAB_BY_KEY

# --------------------------------------------------------------------------- lab items


@dataclass(frozen=True)
class LabItem:
    """One ``d_labitems`` row plus what the generator needs to report a result.

    Attributes:
        itemid: MIMIC-IV itemid.
        label / fluid / category: MIMIC-IV d_labitems columns.
        unit: labevents.valueuom (None for unitless results such as INR).
        ref_low / ref_high: reference range (None = one-sided); for sex-specific analytes the
            male range, see :data:`SEX_SPECIFIC_REF`.
        decimals: decimals of the reported value.
    """

    itemid: int
    label: str
    fluid: str
    category: str
    unit: str | None
    ref_low: float | None
    ref_high: float | None
    decimals: int


def _panel(key: str, itemid: int, label: str, category: str = "Chemistry") -> LabItem:
    lab = LAB_BY_KEY[key]
    return LabItem(
        itemid, label, "Blood", category, lab.unit, lab.ref_low, lab.ref_high, lab.decimals
    )


# Keyed by the generator's analyte name. Panel entries take unit / range / decimals from
# clinlib.data.vocab so there is one source of truth; both LDL itemids are present.
LAB_ITEMS: dict[str, LabItem] = {
    "sodium": _panel("sodium", 50983, "Sodium"),
    "potassium": _panel("potassium", 50971, "Potassium"),
    "chloride": _panel("chloride", 50902, "Chloride"),
    "bicarbonate": _panel("bicarbonate", 50882, "Bicarbonate"),
    "bun": _panel("bun", 51006, "Urea Nitrogen"),
    "creatinine": _panel("creatinine", 50912, "Creatinine"),
    "glucose": _panel("glucose", 50931, "Glucose"),
    "anion_gap": _panel("anion_gap", 50868, "Anion Gap"),
    "calcium": _panel("calcium", 50893, "Calcium, Total"),
    "wbc": _panel("wbc", 51301, "White Blood Cells", "Hematology"),
    "hemoglobin": _panel("hemoglobin", 51222, "Hemoglobin", "Hematology"),
    "hematocrit": _panel("hematocrit", 51221, "Hematocrit", "Hematology"),
    "platelets": _panel("platelets", 51265, "Platelet Count", "Hematology"),
    "hba1c": _panel("hba1c", 50852, "% Hemoglobin A1c"),
    "ldl_calc": _panel("ldl", 50905, "Cholesterol, LDL, Calculated"),
    "ldl_measured": _panel("ldl", 50906, "Cholesterol, LDL, Measured"),
    "total_cholesterol": _panel("total_cholesterol", 50907, "Cholesterol, Total"),
    "triglycerides": _panel("triglycerides", 51000, "Triglycerides"),
    "troponin_t": _panel("troponin_t", 51003, "Troponin T"),
    # Non-panel labs: present in real panels (CBC indices, Mg/Phos, LFTs, coagulation) so the
    # panel filter and the itemid de-duplication have real work to do.
    "magnesium": LabItem(50960, "Magnesium", "Blood", "Chemistry", "mg/dL", 1.6, 2.6, 1),
    "phosphate": LabItem(50970, "Phosphate", "Blood", "Chemistry", "mg/dL", 2.7, 4.5, 1),
    "albumin": LabItem(50862, "Albumin", "Blood", "Chemistry", "g/dL", 3.5, 5.2, 1),
    "ntprobnp": LabItem(50963, "NTproBNP", "Blood", "Chemistry", "pg/mL", None, 177.0, 0),
    "lactate": LabItem(50813, "Lactate", "Blood", "Blood Gas", "mmol/L", 0.5, 2.0, 1),
    "hdl": LabItem(50904, "Cholesterol, HDL", "Blood", "Chemistry", "mg/dL", 40.0, None, 0),
    "alt": LabItem(
        50861, "Alanine Aminotransferase (ALT)", "Blood", "Chemistry", "IU/L", 0.0, 40.0, 0
    ),
    # MIMIC-IV's own label carries the misspelling "Asparate".
    "ast": LabItem(
        50878, "Asparate Aminotransferase (AST)", "Blood", "Chemistry", "IU/L", 0.0, 40.0, 0
    ),
    "alk_phos": LabItem(
        50863, "Alkaline Phosphatase", "Blood", "Chemistry", "IU/L", 35.0, 105.0, 0
    ),
    "bilirubin": LabItem(50885, "Bilirubin, Total", "Blood", "Chemistry", "mg/dL", 0.0, 1.5, 1),
    "rbc": LabItem(51279, "Red Blood Cells", "Blood", "Hematology", "m/uL", 4.6, 6.1, 2),
    "mcv": LabItem(51250, "MCV", "Blood", "Hematology", "fL", 82.0, 98.0, 0),
    "mch": LabItem(51248, "MCH", "Blood", "Hematology", "pg", 26.0, 32.0, 1),
    "mchc": LabItem(51249, "MCHC", "Blood", "Hematology", "g/dL", 31.0, 37.0, 1),
    "rdw": LabItem(51277, "RDW", "Blood", "Hematology", "%", 10.5, 15.5, 1),
    "inr": LabItem(51237, "INR(PT)", "Blood", "Hematology", None, 0.9, 1.1, 1),
    "pt": LabItem(51274, "PT", "Blood", "Hematology", "sec", 9.4, 12.5, 1),
    "ptt": LabItem(51275, "PTT", "Blood", "Hematology", "sec", 25.0, 36.5, 1),
}

# Female reference ranges where they differ from the male ones above (reference doc).
SEX_SPECIFIC_REF: dict[str, tuple[float, float]] = {
    "hemoglobin": (11.2, 15.7),
    "hematocrit": (34.0, 45.0),
    "rbc": (3.9, 5.2),
}
MALE_REF: dict[str, tuple[float, float]] = {
    "hemoglobin": (13.7, 17.5),
    "hematocrit": (40.0, 51.0),
    "rbc": (4.6, 6.1),
}

# --------------------------------------------------------------------------- diagnoses

# key -> (ICD-9-CM code, ICD-10-CM code), both as MIMIC stores them (no dot).
DX_PAIRS: dict[str, tuple[str, str]] = {
    # diabetes (index)
    "dm_uncomplicated": ("25000", "E119"),
    "dm_uncontrolled": ("25002", "E1165"),
    "dm_renal": ("25040", "E1122"),
    "dm_neuro": ("25060", "E1140"),
    "dm_ophthalmic": ("25050", "E11319"),
    "dm_hypoglycemia": ("25080", "E11649"),
    # hypertension (index); hypertensive CKD also counts for CKD
    "htn": ("4019", "I10"),
    "htn_heart_failure": ("40291", "I110"),
    "htn_ckd": ("40390", "I129"),
    "htn_ckd_esrd": ("40391", "I120"),
    # CKD (index)
    "ckd_1": ("5851", "N181"),
    "ckd_2": ("5852", "N182"),
    "ckd_3": ("5853", "N183"),
    "ckd_4": ("5854", "N184"),
    "ckd_5": ("5855", "N185"),
    "esrd": ("5856", "N186"),
    "ckd_unspecified": ("5859", "N189"),
    # CAD (index)
    "cad": ("41401", "I2510"),
    "angina": ("4139", "I209"),
    "unstable_angina": ("4111", "I200"),
    "old_mi": ("412", "I252"),
    "nstemi": ("41071", "I214"),
    "stemi_anterior": ("41011", "I2109"),
    "stemi_inferior": ("41041", "I2119"),
    # reasons for admission and acute problems
    "pneumonia": ("486", "J189"),
    "uti": ("5990", "N390"),
    "sepsis": ("0389", "A419"),
    "aki": ("5849", "N179"),
    "chest_pain": ("78650", "R079"),
    "chest_pain_other": ("78659", "R0789"),
    "syncope": ("7802", "R55"),
    "heart_failure": ("4280", "I509"),
    "hypotension": ("4589", "I959"),
    "constipation": ("56400", "K5900"),
    # lab-driven secondary diagnoses
    "hyperkalemia": ("2767", "E875"),
    "hypokalemia": ("2768", "E876"),
    "hyponatremia": ("2761", "E871"),
    "acidosis": ("2762", "E872"),
    "anemia": ("2859", "D649"),
    "anemia_ckd": ("28521", "D631"),
    # chronic comorbidities
    "hyperlipidemia": ("2724", "E785"),
    "afib": ("42731", "I4891"),
    "gerd": ("53081", "K219"),
    "depression": ("311", "F329"),
    "tobacco": ("3051", "F17210"),
    "tobacco_history": ("V1582", "Z87891"),
    "hypothyroidism": ("2449", "E039"),
    "osa": ("32723", "G4733"),
    "copd": ("496", "J449"),
    "obesity": ("27800", "E669"),
    # status codes
    "insulin_use": ("V5867", "Z794"),
    "oral_hypoglycemic_use": ("V5869", "Z7984"),
    "aspirin_use": ("V5866", "Z7982"),
    "antiplatelet_use": ("V5863", "Z7902"),
    "anticoagulant_use": ("V5861", "Z7901"),
    "dialysis_status": ("V4511", "Z992"),
    "ptca_status": ("V4582", "Z955"),
}

# Official long titles (CMS ICD-9-CM v32 and ICD-10-CM tabular; MIMIC-IV d_icd_diagnoses).
ICD9_DX_TITLES: dict[str, str] = {
    "25000": "Diabetes mellitus without mention of complication, type II or unspecified type, "
    "not stated as uncontrolled",
    "25002": "Diabetes mellitus without mention of complication, type II or unspecified type, "
    "uncontrolled",
    "25040": "Diabetes with renal manifestations, type II or unspecified type, not stated as "
    "uncontrolled",
    "25060": "Diabetes with neurological manifestations, type II or unspecified type, not "
    "stated as uncontrolled",
    "25050": "Diabetes with ophthalmic manifestations, type II or unspecified type, not stated "
    "as uncontrolled",
    "25080": "Diabetes with other specified manifestations, type II or unspecified type, not "
    "stated as uncontrolled",
    "4019": "Unspecified essential hypertension",
    "40291": "Unspecified hypertensive heart disease with heart failure",
    "40390": "Hypertensive chronic kidney disease, unspecified, with chronic kidney disease "
    "stage I through stage IV, or unspecified",
    "40391": "Hypertensive chronic kidney disease, unspecified, with chronic kidney disease "
    "stage V or end stage renal disease",
    "5851": "Chronic kidney disease, Stage I",
    "5852": "Chronic kidney disease, Stage II (mild)",
    "5853": "Chronic kidney disease, Stage III (moderate)",
    "5854": "Chronic kidney disease, Stage IV (severe)",
    "5855": "Chronic kidney disease, Stage V",
    "5856": "End stage renal disease",
    "5859": "Chronic kidney disease, unspecified",
    "41401": "Coronary atherosclerosis of native coronary artery",
    "4139": "Other and unspecified angina pectoris",
    "4111": "Intermediate coronary syndrome",
    "412": "Old myocardial infarction",
    "41071": "Subendocardial infarction, initial episode of care",
    "41011": "Acute myocardial infarction of other anterior wall, initial episode of care",
    "41041": "Acute myocardial infarction of other inferior wall, initial episode of care",
    "486": "Pneumonia, organism unspecified",
    "5990": "Urinary tract infection, site not specified",
    "0389": "Unspecified septicemia",
    "5849": "Acute kidney failure, unspecified",
    "78650": "Chest pain, unspecified",
    "78659": "Other chest pain",
    "7802": "Syncope and collapse",
    "4280": "Congestive heart failure, unspecified",
    "4589": "Hypotension, unspecified",
    "56400": "Constipation, unspecified",
    "2767": "Hyperpotassemia",
    "2768": "Hypopotassemia",
    "2761": "Hyposmolality and/or hyponatremia",
    "2762": "Acidosis",
    "2859": "Anemia, unspecified",
    "28521": "Anemia in chronic kidney disease",
    "2724": "Other and unspecified hyperlipidemia",
    "42731": "Atrial fibrillation",
    "53081": "Esophageal reflux",
    "311": "Depressive disorder, not elsewhere classified",
    "3051": "Tobacco use disorder",
    "V1582": "Personal history of tobacco use",
    "2449": "Unspecified acquired hypothyroidism",
    "32723": "Obstructive sleep apnea (adult)(pediatric)",
    "496": "Chronic airway obstruction, not elsewhere classified",
    "27800": "Obesity, unspecified",
    "V5867": "Long-term (current) use of insulin",
    "V5869": "Long-term (current) use of other medications",
    "V5866": "Long-term (current) use of aspirin",
    "V5863": "Long-term (current) use of antiplatelet/antithrombotic",
    "V5861": "Long-term (current) use of anticoagulants",
    "V4511": "Renal dialysis status",
    "V4582": "Percutaneous transluminal coronary angioplasty status",
}

ICD10_DX_TITLES: dict[str, str] = {
    "E119": "Type 2 diabetes mellitus without complications",
    "E1165": "Type 2 diabetes mellitus with hyperglycemia",
    "E1122": "Type 2 diabetes mellitus with diabetic chronic kidney disease",
    "E1140": "Type 2 diabetes mellitus with diabetic neuropathy, unspecified",
    "E11319": "Type 2 diabetes mellitus with unspecified diabetic retinopathy without macular "
    "edema",
    "E11649": "Type 2 diabetes mellitus with hypoglycemia without coma",
    "I10": "Essential (primary) hypertension",
    "I110": "Hypertensive heart disease with heart failure",
    "I129": "Hypertensive chronic kidney disease with stage 1 through stage 4 chronic kidney "
    "disease, or unspecified chronic kidney disease",
    "I120": "Hypertensive chronic kidney disease with stage 5 chronic kidney disease or end "
    "stage renal disease",
    "N181": "Chronic kidney disease, stage 1",
    "N182": "Chronic kidney disease, stage 2 (mild)",
    "N183": "Chronic kidney disease, stage 3 (moderate)",
    "N184": "Chronic kidney disease, stage 4 (severe)",
    "N185": "Chronic kidney disease, stage 5",
    "N186": "End stage renal disease",
    "N189": "Chronic kidney disease, unspecified",
    "I2510": "Atherosclerotic heart disease of native coronary artery without angina pectoris",
    "I209": "Angina pectoris, unspecified",
    "I200": "Unstable angina",
    "I252": "Old myocardial infarction",
    "I214": "Non-ST elevation (NSTEMI) myocardial infarction",
    "I2109": "ST elevation (STEMI) myocardial infarction involving other coronary artery of "
    "anterior wall",
    "I2119": "ST elevation (STEMI) myocardial infarction involving other coronary artery of "
    "inferior wall",
    "J189": "Pneumonia, unspecified organism",
    "N390": "Urinary tract infection, site not specified",
    "A419": "Sepsis, unspecified organism",
    "N179": "Acute kidney failure, unspecified",
    "R079": "Chest pain, unspecified",
    "R0789": "Other chest pain",
    "R55": "Syncope and collapse",
    "I509": "Heart failure, unspecified",
    "I959": "Hypotension, unspecified",
    "K5900": "Constipation, unspecified",
    "E875": "Hyperkalemia",
    "E876": "Hypokalemia",
    "E871": "Hypo-osmolality and hyponatremia",
    "E872": "Acidosis",
    "D649": "Anemia, unspecified",
    "D631": "Anemia in chronic kidney disease",
    "E785": "Hyperlipidemia, unspecified",
    "I4891": "Unspecified atrial fibrillation",
    "K219": "Gastro-esophageal reflux disease without esophagitis",
    "F329": "Major depressive disorder, single episode, unspecified",
    "F17210": "Nicotine dependence, cigarettes, uncomplicated",
    "Z87891": "Personal history of nicotine dependence",
    "E039": "Hypothyroidism, unspecified",
    "G4733": "Obstructive sleep apnea (adult) (pediatric)",
    "J449": "Chronic obstructive pulmonary disease, unspecified",
    "E669": "Obesity, unspecified",
    "Z794": "Long term (current) use of insulin",
    "Z7984": "Long term (current) use of oral hypoglycemic drugs",
    "Z7982": "Long term (current) use of aspirin",
    "Z7902": "Long term (current) use of antithrombotics/antiplatelets",
    "Z7901": "Long term (current) use of anticoagulants",
    "Z992": "Dependence on renal dialysis",
    "Z955": "Presence of coronary angioplasty implant and graft",
}

# --------------------------------------------------------------------------- procedures

# key -> (ICD-9-CM vol. 3 codes, ICD-10-PCS codes): one clinical act may need several codes.
PX_GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "left_heart_cath": (("3722", "8856"), ("4A023N7", "B2111ZZ")),
    "right_left_cath": (("3723", "8853"), ("4A023N7", "B2111ZZ")),
    "pci_des": (("0066", "3607", "0040", "0045"), ("027034Z",)),
    "pci_balloon": (("0066", "0040"), ("02703ZZ",)),
    "hemodialysis": (("3995",), ("5A1D70Z",)),
    "dialysis_catheter": (("3895",), ("02HV33Z",)),
    "transfusion": (("9904",), ("30233N1",)),
    "central_line": (("3893",), ("05HY33Z",)),
    "echo": (("8872",), ("B246ZZZ",)),
}

ICD9_PX_TITLES: dict[str, str] = {
    "3722": "Left heart cardiac catheterization",
    "3723": "Combined right and left heart cardiac catheterization",
    "8856": "Coronary arteriography using two catheters",
    "8853": "Angiocardiography of left heart structures",
    "0066": "Percutaneous transluminal coronary angioplasty [PTCA]",
    "3607": "Insertion of drug-eluting coronary artery stent(s)",
    "0040": "Procedure on single vessel",
    "0045": "Insertion of one vascular stent",
    "3995": "Hemodialysis",
    "3895": "Venous catheterization for renal dialysis",
    "9904": "Transfusion of packed cells",
    "3893": "Venous catheterization, not elsewhere classified",
    "8872": "Diagnostic ultrasound of heart",
}

ICD10_PX_TITLES: dict[str, str] = {
    "4A023N7": "Measurement of Cardiac Sampling and Pressure, Left Heart, Percutaneous Approach",
    "B2111ZZ": "Fluoroscopy of Multiple Coronary Arteries using Low Osmolar Contrast",
    "027034Z": "Dilation of Coronary Artery, One Artery with Drug-eluting Intraluminal Device, "
    "Percutaneous Approach",
    "02703ZZ": "Dilation of Coronary Artery, One Artery, Percutaneous Approach",
    "5A1D70Z": "Performance of Urinary Filtration, Intermittent, Less than 6 Hours Per Day",
    "02HV33Z": "Insertion of Infusion Device into Superior Vena Cava, Percutaneous Approach",
    "30233N1": "Transfusion of Nonautologous Red Blood Cells into Peripheral Vein, "
    "Percutaneous Approach",
    "05HY33Z": "Insertion of Infusion Device into Upper Vein, Percutaneous Approach",
    "B246ZZZ": "Ultrasonography of Right and Left Heart",
}

# --------------------------------------------------------------------------- drugs


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
        "Vancomycin", "VANC1I", "1g Vial", "VIAL", ("1000", "1250", "750"), "mg", "1",
        "VIAL", 2.0, ("IV",),
    ),
    "magnesium_sulfate": Drug(
        "Magnesium Sulfate", "MAG2I", "2 g / 50 mL Premix Bag", "BAG", ("2", "4"), "gm", "1",
        "BAG", 1.0, ("IV",),
    ),
    "cefepime": Drug(
        "Cefepime", "CEFE2I", "2g Vial", "VIAL", ("2",), "g", "1", "VIAL", 2.0, ("IV",),
    ),
}  # fmt: skip

BASE_DRUGS: dict[str, Drug] = {
    "ns": Drug(
        "0.9% Sodium Chloride", "NS100", "100mL Bag", "BAG", ("100", "50", "250"), "mL", "1",
        "BAG", 1.0, ("IV",),
    ),
    "d5w": Drug(
        "5% Dextrose", "D5W100", "100 mL Bag", "BAG", ("50", "100", "250"), "mL", "1", "BAG",
        1.0, ("IV",),
    ),
    "bag": Drug("Bag", "BAG", "Bag", "BAG", ("1",), "BAG", "1", "BAG", 1.0, ("IV",)),
    "iso_dextrose": Drug(
        "Iso-Osmotic Dextrose", "ISOD50", "50 mL Bag", "BAG", ("50", "100"), "mL", "1", "BAG",
        1.0, ("IV",),
    ),
    "ns_alt": Drug(
        "Sodium Chloride 0.9%", "NS250", "250 mL Bag", "BAG", ("250", "100"), "mL", "1",
        "BAG", 1.0, ("IV",),
    ),
    "sterile_water": Drug(
        "Sterile Water", "SW10", "10 mL Vial", "VIAL", ("10", "20"), "mL", "1", "VIAL", 1.0,
        ("IV",),
    ),
}  # fmt: skip
# Share of diluent rows by name (the first most common, as in MIMIC-IV).
BASE_P: tuple[float, ...] = (0.34, 0.22, 0.18, 0.12, 0.09, 0.05)

ADDITIVE_DRUGS: dict[str, Drug] = {
    "multivitamins": Drug(
        "Multivitamins", "MVI", "10 mL Vial", "VIAL", ("10",), "mL", "1", "VIAL", 1.0, ("IV",),
    ),
    "thiamine": Drug(
        "Thiamine", "THIA100I", "100mg/mL Vial", "VIAL", ("100",), "mg", "1", "VIAL", 1.0,
        ("IV",),
    ),
    "folic_acid": Drug(
        "Folic Acid", "FOLI1I", "5mg/mL Vial", "VIAL", ("1",), "mg", "0.2", "VIAL", 1.0,
        ("IV",),
    ),
}  # fmt: skip

# Drug names as real pharmacy systems write them: qualifiers in parentheses, tall-man
# lettering, trailing and double spaces, double dashes (MIMIC-IV prescriptions.drug; the kit
# normalises them for matching and displays them as written). Ordered as extra MAIN orders.
QUALIFIED_DRUGS: dict[str, Drug] = {
    "insulin_hyperk": Drug(
        "Insulin (Regular) for Hyperkalemia", "INSR100I", "100 Units / mL - 10 mL Vial",
        "VIAL", ("10", "5"), "UNIT", "0.1", "VIAL", 1.0, ("IV",),
    ),
    "heparin_porcine": Drug(
        "Heparin (Porcine)", "HEPAPREM", "25,000 unit / 250 mL D5W", "BAG", ("1000", "800"),
        "UNIT", "1", "BAG", 1.0, ("IV",),
    ),
    "hydromorphone": Drug(
        "HYDROmorphone (Dilaudid)", "HYDR2I", "2mg/mL Syringe", "SYR", ("0.5-1", "0.5", "1"),
        "mg", "1", "SYR", 6.0, ("IV", "PO"),
    ),
    "oxycodone": Drug(
        "OxyCODONE (Immediate Release) ", "OXYC5", "5mg Tablet", "TAB", ("5-10", "5"), "mg",
        "1-2", "TAB", 6.0, ("PO",),
    ),
    "oxycodone_apap": Drug(
        "OxyCODONE--Acetaminophen (5mg-325mg)", "OXYA5", "5mg-325mg Tablet", "TAB",
        ("1-2", "1"), "TAB", "1-2", "TAB", 4.0, ("PO",),
    ),
    "kcl_replacement": Drug(
        "Potassium Chloride Replacement (Critical Care and Oncology) ", "KCLR", "20mEq Packet",
        "PKT", ("40", "20"), "mEq", "2", "PKT", 1.0, ("PO",),
    ),
}  # fmt: skip
# Per-admission probability of a background order of each qualified-name drug; the insulin
# and heparin orders follow hyperkalemia and ACS instead (clinlib.data.sources.synthetic_shapes).
QUALIFIED_P: dict[str, float] = {"hydromorphone": 0.12, "oxycodone": 0.15, "oxycodone_apap": 0.06}
# Spelling variants of base drugs: share of the base drug's orders written this way.
NAME_VARIANTS: dict[str, tuple[str, float]] = {"potassium_chloride": ("kcl_replacement", 0.4)}
