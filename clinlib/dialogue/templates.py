"""Template phrasing of the synthetic dialogues (paper §3 "Cohort": facts kept "inside narrative
turns"; Fig. 2 stage 3; docs/design.md "Layout").

Several phrasings per slot are chosen by a hash of (seed, patient, visit, slot)
(:mod:`clinlib.dialogue.turns`), so the text varies but is reproducible. No template carries a
digit, a drug name or a panel lab name: every number, drug and lab in a turn must come from an
event it cites (:mod:`clinlib.dialogue.verify`).
"""

OPENERS_FIRST = ("Hello, doctor.", "Hi.", "Good morning.", "Thanks for seeing me.", "Hello.")
OPENERS_LATER = (
    "Hello again.",
    "Hi, doctor, it's me again.",
    "Good to see you again.",
    "Hello, doctor.",
    "Hi.",
)
SYMPTOM_LEADS = (
    "I came in because {s}.",
    "The main problem is that {s}.",
    "Lately {s}.",
    "Over the past few days {s}.",
    "I'm worried because {s}.",
    "Honestly, {s}.",
)
SYMPTOM_CODES: dict[str, tuple[str, ...]] = {
    "diabetes": ("249", "250", "E08", "E09", "E10", "E11", "E13"),
    "hypertension": ("401", "402", "403", "404", "405", "I10", "I11", "I12", "I13", "I15", "I16"),
    "ckd": ("585", "586", "N18", "N19"),
    "cad": ("410", "411", "412", "413", "414", "I20", "I21", "I22", "I23", "I24", "I25"),
    "heart_failure": ("428", "I50"),
    "arrhythmia": ("4273", "I48", "I49"),
    "aki": ("584", "N17"),
    "pneumonia": (
        "480",
        "481",
        "482",
        "483",
        "484",
        "485",
        "486",
        "J12",
        "J13",
        "J14",
        "J15",
        "J16",
        "J17",
        "J18",
    ),
    "copd": ("491", "492", "496", "J44"),
    "uti": ("5990", "N390"),
    "sepsis": ("038", "99591", "99592", "A40", "A41", "R652"),
    "anemia": ("280", "281", "285", "D50", "D62", "D63", "D64"),
    "gi_bleed": ("578", "K92"),
    "stroke": ("433", "434", "436", "I63", "I64"),
    "electrolytes": ("2765", "2766", "2767", "2768", "E87"),
    "obesity": ("278", "E66"),
    "depression": ("296", "311", "F32", "F33"),
    "back_pain": ("724", "M54"),
}
SYMPTOMS: dict[str, tuple[str, ...]] = {
    "diabetes": (
        "I've been thirsty all the time",
        "I keep getting up at night to pass water",
        "my feet have been tingling",
        "my vision has been blurry",
    ),
    "hypertension": (
        "I've had pounding headaches",
        "I feel dizzy when I stand up quickly",
        "I can feel my heart pounding in my ears",
    ),
    "ckd": (
        "I've been tired all the time",
        "my ankles are swollen by the evening",
        "my skin has been itchy",
        "I've lost my appetite",
    ),
    "cad": (
        "I get a tight feeling in my chest when I walk uphill",
        "there's a pressure in my chest that spreads to my left arm",
        "I get short of breath when I exert myself",
    ),
    "heart_failure": (
        "I get breathless lying flat",
        "my legs have swollen up",
        "I've been waking up at night gasping for air",
    ),
    "arrhythmia": ("my heart keeps fluttering", "I've had spells of a racing heartbeat"),
    "aki": ("I've been passing much less urine", "I've felt sick and washed out"),
    "pneumonia": ("I've had a cough with phlegm and a fever", "it hurts when I breathe in"),
    "copd": ("I've been wheezy and breathless", "my cough is worse than usual"),
    "uti": ("it burns when I pass urine", "I've needed the toilet much more often"),
    "sepsis": ("I've had fevers and shaking chills", "I felt confused and very weak"),
    "anemia": ("I've been pale and tired", "I get breathless doing very little"),
    "gi_bleed": ("I noticed black stools", "I've felt light-headed"),
    "stroke": ("one side of my body felt weak", "my speech was slurred for a while"),
    "electrolytes": ("I've had muscle cramps and weakness",),
    "obesity": ("I've been struggling with my weight",),
    "depression": ("my mood has been low",),
    "back_pain": ("my back has been hurting",),
    "generic": (
        "I just haven't felt like myself",
        "I've been feeling run down",
        "things have not been right lately",
    ),
}

GREETINGS_FIRST = (
    "I'm sorry to hear that; let's go through this stay together.",
    "Thanks for telling me, let me walk you through your record.",
    "Let's look at what happened during this admission.",
)
GREETINGS_LATER = (
    "Welcome back; this is your {ordinal} hospital stay with us.",
    "I'm sorry you're back; this is your {ordinal} admission in our records.",
    "Let's review this stay, your {ordinal} one with us.",
)
ADMISSION_FRAMES = (
    "You were admitted on {date}, and the admission type was {code}.",
    "Our records show an admission on {date} with admission type {code}.",
    "This stay began on {date}; it was registered as {code}.",
    "You came in on {date}, and the admission is recorded as {code}.",
)
# (sentence frame, item format) pairs so the item grammar fits its frame.
LAB_FRAMES = (
    ("On {date}, your {items}.", "{label} was {value} {unit}"),
    ("The blood work from {date} showed {items}.", "{label} at {value} {unit}"),
    ("Results for {date}: {items}.", "{label} {value} {unit}"),
    ("Your labs on {date} came back with {items}.", "{label} of {value} {unit}"),
    ("From the samples taken on {date}, {items}.", "{label} measured {value} {unit}"),
    ("Looking at {date}, I can see {items}.", "{label} at {value} {unit}"),
)
LAB_MORE_FRAMES = (
    ("Also on {date}: {items}.", "{label} {value} {unit}"),
    ("The same day, {date}, {items}.", "{label} was {value} {unit}"),
    ("Further results from {date} include {items}.", "{label} of {value} {unit}"),
)
# Reaction frames end in ", {meaning}." and every meaning is a "which ..." clause.
HIGH_FRAMES = (
    "That {label} of {value} {unit} is above {range}, {meaning}.",
    "Your {label} at {value} {unit} is higher than {range}, {meaning}.",
    "I'm concerned about the {label}: {value} {unit} is over {range}, {meaning}.",
    "The {label} result, {value} {unit}, exceeds {range}, {meaning}.",
)
LOW_FRAMES = (
    "That {label} of {value} {unit} is below {range}, {meaning}.",
    "Your {label} at {value} {unit} is lower than {range}, {meaning}.",
    "I'm concerned about the {label}: {value} {unit} is under {range}, {meaning}.",
    "The {label} result, {value} {unit}, falls short of {range}, {meaning}.",
)
FLAGGED_FRAMES = (
    "The lab flagged your {label} of {value} {unit} as abnormal, {meaning}.",
    "Note that the {label}, {value} {unit}, was flagged abnormal, {meaning}.",
)
RANGE_BOTH = ("the reference range of {lo} to {hi} {unit}", "the normal range, {lo} to {hi} {unit}")
RANGE_HIGH_ONLY = ("the upper reference limit of {hi} {unit}",)
RANGE_LOW_ONLY = ("the lower reference limit of {lo} {unit}",)
LAB_MEANING: dict[str, dict[str, tuple[str, ...]]] = {
    "creatinine": {
        "high": (
            "which suggests your kidneys are filtering less well",
            "which tells me the kidneys are under strain",
        ),
        "low": ("which usually reflects low muscle mass",),
    },
    "potassium": {
        "high": (
            "which can upset the heart rhythm, so we will watch it closely",
            "which we need to bring down because it affects the heart",
        ),
        "low": ("which can cause cramps and palpitations", "which we will need to replace"),
    },
    "sodium": {
        "high": ("which often means you are dehydrated",),
        "low": (
            "which can make you confused and unsteady",
            "which often comes from a fluid balance problem",
        ),
    },
    "glucose": {
        "high": (
            "which means your blood sugar is running high",
            "which fits with poorly controlled blood sugar",
        ),
        "low": ("which is a low blood sugar we need to prevent",),
    },
    "bun": {
        "high": ("which fits with dehydration or reduced kidney function",),
        "low": ("which is not usually a concern",),
    },
    "bicarbonate": {
        "high": ("which points to an alkaline shift in the blood",),
        "low": ("which means some acid is building up in the blood",),
    },
    "chloride": {
        "high": ("which follows your fluid and salt balance",),
        "low": ("which follows your fluid and salt balance",),
    },
    "anion_gap": {
        "high": ("which can mean acid is building up",),
        "low": ("which is rarely significant",),
    },
    "calcium": {
        "high": ("which we will look into further",),
        "low": ("which can cause tingling and cramps",),
    },
    "hemoglobin": {
        "high": ("which means your blood is more concentrated than usual",),
        "low": (
            "which means you are anaemic and explains some of the tiredness",
            "which means you have some anaemia",
        ),
    },
    "hematocrit": {
        "high": ("which means your blood is more concentrated than usual",),
        "low": ("which goes along with anaemia",),
    },
    "platelets": {
        "high": ("which can happen with inflammation",),
        "low": ("which raises the risk of bleeding and bruising",),
    },
    "wbc": {
        "high": ("which suggests your body is fighting an infection or inflammation",),
        "low": ("which lowers your defences against infection",),
    },
    "hba1c": {
        "high": (
            "which tells me your average blood sugar over recent months was too high",
            "which means your diabetes control needs tightening",
        ),
        "low": ("which means your average blood sugar has been low",),
    },
    "ldl": {
        "high": (
            "which raises your risk of heart disease",
            "which means we should work on lowering your cholesterol",
        )
    },
    "total_cholesterol": {"high": ("which adds to your cardiovascular risk",)},
    "triglycerides": {"high": ("which is linked to diet and blood sugar control",)},
    "troponin_t": {
        "high": (
            "which points to strain or injury of the heart muscle",
            "which means the heart muscle has been under stress",
        )
    },
}
MEANING_DEFAULT = ("which we will keep an eye on",)
# lab -> (condition of SYMPTOM_CODES, direction) it points to: an abnormal value before that
# condition is first coded foreshadows it, and the length budget tells it first (clinlib.dialogue.budget).
FORESHADOWS: dict[str, tuple[str, str]] = {
    "creatinine": ("ckd", "high"),
    "bun": ("ckd", "high"),
    "glucose": ("diabetes", "high"),
    "hba1c": ("diabetes", "high"),
    "troponin_t": ("cad", "high"),
    "ldl": ("cad", "high"),
    "potassium": ("electrolytes", "high"),
    "sodium": ("electrolytes", "low"),
    "hemoglobin": ("anemia", "low"),
    "hematocrit": ("anemia", "low"),
}
STILL_FRAMES = (
    "{label} is still {state}.",
    "{label} remains {state}.",
    "The {label} is again {state}.",
)
STILL_STATE = {"high": "above its range", "low": "below its range", "flagged": "flagged abnormal"}
OTHERS_WATCH = (
    "I'll keep an eye on the other results too.",
    "A few others are also out of range, and we are watching them.",
)
ALL_NORMAL = (
    "Those values are all within their usual ranges.",
    "Everything there looks within the expected range.",
    "Nothing there is out of range.",
    "I'm happy with all of those.",
    "None of those worry me.",
    "That is all reassuring.",
)
SOME_NORMAL = (
    "The rest are within their usual ranges.",
    "The others look fine.",
    "Everything else there is normal.",
    "The remaining values are reassuring.",
    "The other results don't concern me.",
)
MED_FRAMES = (
    "On {date} we started {items}.",
    "We began {items} on {date}.",
    "Starting {date}, you received {items}.",
    "The orders from {date} included {items}.",
    "On {date} the team prescribed {items}.",
)
MED_ITEMS = ("{drug} {dose} {unit} {route}", "{drug} {dose} {unit} ({route})")
MED_ITEM_NO_ROUTE = "{drug} {dose} {unit}"
# A medication without a dose: named with its route only; no dose is ever made up.
MED_ITEMS_NO_DOSE = ("{drug} {route}", "{drug} ({route})")
MED_ITEM_NAME_ONLY = "{drug}"
PROCEDURE_FRAMES = (
    "On {date} we performed {title} (procedure code {code}).",
    "You had {title} on {date}; its procedure code is {code}.",
    "The record lists procedure {code}, {title}, on {date}.",
    "On {date} you underwent {title}, coded as {code}.",
)
DIAGNOSIS_FRAMES = (
    "The diagnoses recorded on {date} were {items}.",
    "At discharge on {date} we documented {items}.",
    "Your discharge diagnoses on {date} include {items}.",
    "On {date} the chart lists {items}.",
)
DIAGNOSIS_MORE_FRAMES = (
    "Also recorded on {date}: {items}.",
    "The chart for {date} further lists {items}.",
)
DISCHARGE_FRAMES = (
    "You were discharged on {date} to {code}.",
    "The stay ended on {date} with discharge location {code}.",
    "On {date} you were discharged; the discharge location was {code}.",
)
DISCHARGE_NEUTRAL_FRAMES = DISCHARGE_FRAMES[1:]
DISCHARGE_NO_LOCATION = ("The stay ended on {date}.", "You were discharged on {date}.")
NEUTRAL_LOCATIONS = frozenset({"DIED", "HOSPICE"})
NO_FACTS = ("There isn't much more recorded for this stay.",)

ASK_LABS_FIRST = (
    "What did my blood tests show?",
    "Did the blood work come back?",
    "Can you tell me about my labs?",
    "Were my blood results okay?",
)
ASK_LABS_LATER = (
    "What about the next set of bloods?",
    "Did the later tests change anything?",
    "And the bloods after that?",
    "How did the repeat tests look?",
)
WORRY = (
    "That sounds worrying.",
    "Oh dear, is that serious?",
    "I was afraid of that.",
    "Hmm, that doesn't sound good.",
)
ASK_MEDS = (
    "What are you giving me for it?",
    "Which medicines did I get?",
    "What treatment did you start?",
    "Did I need new medication?",
)
ASK_PROCEDURES = (
    "Did I need any procedures?",
    "What was done while I was in?",
    "Were there any procedures?",
)
ASK_DIAGNOSES = (
    "So what's the diagnosis?",
    "What did you conclude in the end?",
    "What conditions did you write down?",
)
ASK_DISCHARGE = ("When could I go home?", "How did the stay end?", "And when was I discharged?")
CLOSINGS = (
    "Thank you, that helps.",
    "Okay, I understand.",
    "Thanks for explaining everything.",
    "Got it, thank you.",
    "That makes sense, thanks.",
)
