"""Diagnosis and procedure codes of the SYNTHETIC hosp generator (paper §3 "Cohort": index-disease
codes decide the cohort; Appendix C.1).

ICD-9-CM and ICD-10-CM diagnoses written as MIMIC writes them (no dot, text) with their official
long titles, paired ICD-9 -> ICD-10 by clinical meaning so one admission-level decision can be
emitted in whichever version the admission's date calls for; ICD-9-CM volume 3 and ICD-10-PCS
procedures with their long titles.
"""

from __future__ import annotations

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
