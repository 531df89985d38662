"""The labelled judge-audit set: free-text (answer, reference, verdict) pairs whose verdict is
known from how the answer was made, independently of any judge (MedMemoryBench §6 "Response
Quality and Hallucination Analysis": 200 query–response pairs of the four judged types, each
labelled correct / incorrect against the reference answer, the judge compared with the labels
by agreement, Cohen's κ, precision, recall and F1 per type).

The seed's labels are human judgments of model outputs; the kit has no model outputs worth
labelling offline, so its answers are WRITTEN to a label: for each scenario of each judged
type (TLA, SUA, IG, MCD; the scenarios are the kit's, in the trap questions' own forms) one
answer of each kind in :data:`KINDS`, made by a fixed template from the scenario's facts:

* ``verbatim`` (correct): the reference's facts in the reference's words;
* ``paraphrase`` (correct): the same facts in other words (a date written out, "came down"
  for "within the reference range", a drug class named by its drug);
* ``wrong_value`` (incorrect): one fact replaced (another date, value or state);
* ``omission`` (incorrect): a required fact left out (a constraint, a node, the value);
* ``hedge`` (incorrect): the right fact offered beside a wrong one, without committing;
* ``contradiction`` (incorrect): the reference's facts with the conclusion negated;
* ``contraindicated`` (incorrect): an answer that recommends the drug the patient must not
  take (SUA whose latest state is normal: an answer acting on the outdated state instead;
  TLA has no drug: a second paraphrase instead).

Each scenario is one patient (``subject_id``, fictional: :data:`FIRST_SUBJECT` upward), so the
audit's intervals can cluster by patient. :data:`SPOT_CHECKED` names the pairs read by hand
against their label when the set was made (the count is reported with the audit).
The set is shipped as ``data/judge_audit/audit_pairs.csv`` (:func:`write_audit_set`); a test
rebuilds it and compares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from clinlib.core.config import DATA_DIR
from clinlib.tasks.traps.reference import RELATIONS, ig_metadata, pattern_text

AUDIT_PATH = DATA_DIR / "judge_audit" / "audit_pairs.csv"
FIRST_SUBJECT = 90_000_001
KINDS: tuple[str, ...] = (
    "verbatim",
    "paraphrase",
    "wrong_value",
    "omission",
    "hedge",
    "contradiction",
    "contraindicated",
)
CORRECT_KINDS = frozenset({"verbatim", "paraphrase", "paraphrase2"})
AUDIT_COLUMNS: tuple[str, ...] = (
    "pair_id",
    "subject_id",
    "task",
    "question",
    "reference",
    "judge_explanation",
    "judge_metadata",
    "judge_nodes",
    "judge_hops",
    "judge_pattern",
    "answer",
    "kind",
    "verdict",
    "how_made",
    "spot_checked",
)
MONTHS = (
    "January February March April May June July August September October November December"
).split()
# the pairs read by hand against their label when the set was made (pair ids)
SPOT_CHECKED: frozenset[str] = frozenset(
    f"{t}-{i}-{k}"
    for t in ("TLA", "SUA", "IG", "MCD")
    for i in (0, 4)
    for k in ("paraphrase", "omission", "hedge", "contradiction")
)

_TLA = (
    ("2151-03-14", "2151-04-02", "I can only afford generic drugs, never brand-name ones."),
    ("2160-11-11", "2160-12-01", "I cannot spend more than 20 dollars a month on prescriptions."),
    ("2148-06-30", "2148-07-21", "My insurance stopped covering outpatient imaging."),
    ("2172-01-05", "2172-02-09", "I can only afford generic drugs, never brand-name ones."),
    ("2139-09-22", "2139-10-13", "I cannot spend more than 20 dollars a month on prescriptions."),
    ("2155-05-08", "2155-05-29", "My insurance stopped covering outpatient imaging."),
    ("2166-12-17", "2167-01-07", "I can only afford generic drugs, never brand-name ones."),
    ("2143-02-26", "2143-03-19", "I cannot spend more than 20 dollars a month on prescriptions."),
)
# lab, unit, earlier value, latest value, low, high, the drug the latest state rules out
_SUA = (
    ("Creatinine", "mg/dL", 1.1, 2.4, 0.5, 1.2, "metformin"),
    ("Potassium", "mEq/L", 4.2, 5.9, 3.3, 5.1, "potassium chloride"),
    ("Creatinine", "mg/dL", 2.6, 1.0, 0.5, 1.2, "ibuprofen"),
    ("Potassium", "mEq/L", 5.8, 4.0, 3.3, 5.1, "spironolactone"),
    ("Creatinine", "mg/dL", 0.9, 3.3, 0.5, 1.2, "gentamicin"),
    ("Potassium", "mEq/L", 3.9, 6.2, 3.3, 5.1, "potassium chloride"),
    ("Creatinine", "mg/dL", 1.0, 2.1, 0.5, 1.2, "ketorolac"),
    ("Potassium", "mEq/L", 4.4, 5.6, 3.3, 5.1, "lisinopril"),
)
_DATES = ("2150-02-03", "2150-08-19")
# a table, one audit case per row: allergen, its example drug, a drug outside the class, cost,
# preference
# fmt: off
_IG = (
    ("penicillin", "amoxicillin", "doxycycline", "generic drugs only", "no injections at home"),
    ("sulfa drugs", "sulfamethoxazole-trimethoprim", "nitrofurantoin", "at most 20 dollars a month", "once-daily medicines"),
    ("codeine", "codeine", "acetaminophen", "generic drugs only", "nothing that causes drowsiness"),
    ("ibuprofen", "ibuprofen", "acetaminophen", "no scans unless an emergency", "no injections at home"),
    ("penicillin", "ampicillin", "azithromycin", "at most 20 dollars a month", "nothing that causes drowsiness"),
    ("sulfa drugs", "sulfasalazine", "mesalamine", "generic drugs only", "once-daily medicines"),
    ("codeine", "codeine", "acetaminophen", "at most 20 dollars a month", "no injections at home"),
    ("ibuprofen", "naproxen", "acetaminophen", "generic drugs only", "once-daily medicines"),
)
# fmt: on
# a table, one audit case per row: rule, lab, value, unit, state, drug, class
# fmt: off
_MCD = (
    ("metformin_low_egfr", "creatinine", 3.4, "mg/dL", "eGFR below 30", "metformin", "metformin"),
    ("potassium_hyperkalaemia", "potassium", 6.1, "mEq/L", "potassium above the upper reference limit", "potassium chloride", "potassium supplement"),
    ("anticoagulant_thrombocytopenia", "platelet count", 38.0, "K/uL", "platelets below 50 K/uL", "enoxaparin", "anticoagulant"),
    ("nephrotoxin_aki", "creatinine", 2.9, "mg/dL", "acute kidney injury by the KDIGO creatinine rise", "vancomycin", "nephrotoxic drug"),
    ("metformin_low_egfr", "creatinine", 4.1, "mg/dL", "eGFR below 30", "metformin", "metformin"),
    ("potassium_hyperkalaemia", "potassium", 5.8, "mEq/L", "potassium above the upper reference limit", "potassium phosphate", "potassium supplement"),
    ("anticoagulant_thrombocytopenia", "platelet count", 41.0, "K/uL", "platelets below 50 K/uL", "heparin", "anticoagulant"),
    ("nephrotoxin_aki", "creatinine", 2.2, "mg/dL", "acute kidney injury by the KDIGO creatinine rise", "gentamicin", "nephrotoxic drug"),
)
# fmt: on


def spelled(date: str) -> str:
    """``2151-03-14`` -> ``14 March 2151`` (the same time point in other words)."""
    y, m, d = date.split("-")
    return f"{int(d)} {MONTHS[int(m) - 1]} {y}"


def _tla(i: int) -> dict:
    date, other, said = _TLA[i]
    answers = {
        "verbatim": f"{date}",
        "paraphrase": f"The patient raised their money worries at the visit of {spelled(date)}.",
        "paraphrase2": f"It was on {spelled(date)} that they told me about it.",
        "wrong_value": f"{other}",
        "omission": "The patient mentioned financial limits at one of the visits.",
        "hedge": f"Either {date} or {other}, I am not certain which.",
        "contradiction": "The patient never told me about any financial limits.",
    }
    return {
        "question": "On what date did the patient tell you about their financial limits for "
        "treatment? Answer as YYYY-MM-DD.",
        "reference": date,
        "judge_explanation": f'The patient stated the limit in the visit of {date}: "{said}"',
        "answers": answers,
    }


def _state(value: float, low: float, high: float) -> str:
    if value > high:
        return "above the reference range"
    return "below the reference range" if value < low else "within the reference range"


def _sua(i: int) -> dict:
    lab, unit, old, new, low, high, drug = _SUA[i]
    now, then = _state(new, low, high), _state(old, low, high)
    up = new > old
    ref = f"The most recent {lab} is {new:g} {unit} on {_DATES[1]}, {now} (earlier {old:g})."
    moved = "rose" if up else "came down"
    word = "high" if now.startswith("above") else "normal"
    answers = {
        "verbatim": ref,
        "paraphrase": f"Their {lab.lower()} {moved} from {old:g} to {new:g} {unit} at the last "
        f"check ({spelled(_DATES[1])}), so it is {word} now.",
        "wrong_value": f"The most recent {lab} is {old:g} {unit}, {then}.",
        "omission": f"The patient's {lab.lower()} has changed over time.",
        "hedge": f"Their {lab.lower()} may be {now} or {then}; I cannot tell which is current.",
        "contradiction": f"The most recent {lab} is {new:g} {unit}, still {then} as before.",
        "contraindicated": f"{lab} {new:g} {unit} is fine, so {drug} can be given as usual.",
    }
    if word == "normal":  # a normal value rules nothing out: the drug answer is wrong otherwise
        answers["contraindicated"] = f"{lab} {old:g} {unit} is {then}, so avoid {drug} for now."
    return {
        "question": f"What is the patient's latest {lab} status?",
        "reference": ref,
        "judge_explanation": f"Earlier {lab} {old:g} on {_DATES[0]}; latest {lab} {new:g} on "
        f"{_DATES[1]} (reference range {low:g}-{high:g}).",
        "answers": answers,
    }


def _ig(i: int) -> dict:
    allergen, bad, ok, cost, pref = _IG[i]
    said = {
        "allergy": {"statement": f"I am allergic to {allergen}."},
        "cost": {"statement": f"I can afford {cost}."},
        "preference": {"statement": f"I want {pref}."},
    }
    ref = (
        f"Choose a medicine that avoids {allergen} (the patient's allergy), fits {cost} and "
        f"respects the wish for {pref}."
    )
    answers = {
        "verbatim": ref,
        "paraphrase": f"Given the {allergen} allergy, something like {ok} rather than "
        f"anything in that class; keep to {cost} and to {pref}, as they asked.",
        "wrong_value": f"Avoid aspirin (the patient's allergy), keep to {cost} and {pref}.",
        "omission": f"Avoid {allergen} because of the allergy.",
        "hedge": f"Perhaps avoid {allergen}, though it may not matter; cost and {pref} "
        "could be considered if relevant.",
        "contradiction": f"The {allergen} allergy need not limit the choice; cost and the "
        f"wish for {pref} do not matter here.",
        "contraindicated": f"Start {bad}; it is cheap ({cost}) and fits {pref}.",
    }
    return {
        "question": "The patient needs a new long-term medicine for their main condition. "
        "What should you keep in mind when choosing it for this patient?",
        "reference": ref,
        "judge_explanation": "The patient stated these constraints in earlier visits; a "
        "recommendation must name and respect each of them.",
        "judge_metadata": ig_metadata(said),
        "answers": answers,
    }


def _mcd(i: int) -> dict:
    rule, lab, value, unit, state, drug, cls = _MCD[i]
    nodes = [
        f"{lab} {value:g} {unit} on 2150-03-01",
        state,
        f"{drug} ordered on 2150-03-02",
        f"{cls} is contraindicated in that state",
    ]
    ref = (
        f"{nodes[0]}; {state}; {nodes[2]} — so the order conflicts with the patient's "
        f"state: {cls} is contraindicated when {state}."
    )
    answers = {
        "verbatim": ref,
        "paraphrase": f"On 1 March 2150 the {lab} result was {value:g} {unit}; that puts "
        f"the patient at {state}. The next day {drug} was started, which should not be "
        "given at that point, so that order was unsafe.",
        "wrong_value": f"{lab} {value + 20:g} {unit} on 2150-03-01 was unremarkable; {drug} "
        f"ordered on 2150-03-02 is contraindicated only when {state}, which did not apply.",
        "omission": f"{drug} was ordered on 2150-03-02 and is contraindicated.",
        "hedge": f"{lab} {value:g} {unit} might suggest {state}, or might not; {drug} on "
        "2150-03-02 may or may not have been a problem.",
        "contradiction": f"{nodes[0]}; {nodes[2]} — the order was appropriate: {state} "
        f"does not contraindicate {cls}.",
        "contraindicated": f"{nodes[0]}; continue {drug} at the usual dose, it is the "
        "right treatment.",
    }
    return {
        "question": "Looking across the patient's visits, was there any point at which one of "
        "their medicines should not have been given? Explain the chain of evidence.",
        "reference": ref,
        "judge_explanation": f"Rule {rule}: the latest {lab} before the order meets "
        f"'{state}', and {drug} falls in the class '{cls}'.",
        "judge_nodes": nodes,
        "judge_hops": len(RELATIONS),
        "judge_pattern": pattern_text(RELATIONS),
        "answers": answers,
    }


MAKERS = {"TLA": _tla, "SUA": _sua, "IG": _ig, "MCD": _mcd}
N_SCENARIOS = 8


def build_audit_set() -> pd.DataFrame:
    """Every pair (module docstring): :data:`AUDIT_COLUMNS`, in type / scenario / kind order."""
    rows, sid = [], FIRST_SUBJECT
    for task, make in MAKERS.items():
        for i in range(N_SCENARIOS):
            s = make(i)
            for kind, answer in s["answers"].items():
                pid = f"{task}-{i}-{kind}"
                rows.append(
                    {
                        "pair_id": pid,
                        "subject_id": sid,
                        "task": task,
                        "question": s["question"],
                        "reference": s["reference"],
                        "judge_explanation": s.get("judge_explanation", ""),
                        "judge_metadata": s.get("judge_metadata", ""),
                        "judge_nodes": json.dumps(s.get("judge_nodes", [])),
                        "judge_hops": int(s.get("judge_hops", 0)),
                        "judge_pattern": s.get("judge_pattern", ""),
                        "answer": answer,
                        "kind": kind,
                        "verdict": kind in CORRECT_KINDS,
                        "how_made": f"template '{kind}' of {task} scenario {i}",
                        "spot_checked": pid in SPOT_CHECKED,
                    }
                )
            sid += 1
    return pd.DataFrame(rows, columns=list(AUDIT_COLUMNS))


def write_audit_set(path: Path = AUDIT_PATH) -> Path:
    """Write :func:`build_audit_set` to ``path`` (CSV)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    build_audit_set().to_csv(path, index=False)
    return path


def load_audit_set(path: Path = AUDIT_PATH) -> pd.DataFrame:
    """The shipped audit set, as questions-like rows (``judge_nodes`` a list)."""
    out = pd.read_csv(path, keep_default_na=False)
    out["judge_nodes"] = out["judge_nodes"].map(json.loads)
    out["verdict"] = out["verdict"].astype(str).str.lower().eq("true")
    out["spot_checked"] = out["spot_checked"].astype(str).str.lower().eq("true")
    return out


# A judge's verdicts on the labelled set, stored so a notebook shows them without calling the
# judge (``clintrace judge --audit-set`` writes them): one CSV per judge backbone beside the set.
VERDICTS_DIR = DATA_DIR / "judge_audit" / "verdicts"
VERDICT_COLUMNS = [
    "qid",
    "judge_backbone",
    "verdict",
    "verdict_lenient",
    "parse_failed",
    "judge_response",
    "error",
]


def scenario_of(pairs: pd.DataFrame) -> pd.Series:
    """The scenario number of each pair (``TLA-5-contradiction`` -> 5): a subset of whole
    scenarios keeps every kind of answer of each."""
    return pairs["pair_id"].astype(str).str.split("-").str[1].astype(int)


def verdicts_path(judge_backbone: str, root: Path = VERDICTS_DIR) -> Path:
    """Where a judge's stored verdicts live: ``data/judge_audit/verdicts/<judge>.csv``."""
    return root / f"{judge_backbone}.csv"


def save_verdicts(
    judged: pd.DataFrame, judge_backbone: str, model: str, root: Path = VERDICTS_DIR
) -> Path:
    """Write :data:`VERDICT_COLUMNS` of a judge's verdicts on the labelled set, with ``model``
    (what answered: a model file or an endpoint's model id) in every row."""
    path = verdicts_path(judge_backbone, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = judged[VERDICT_COLUMNS].assign(model=model)
    out["judge_response"] = out["judge_response"].fillna("").astype(str).str.slice(0, 400)
    tmp = path.with_suffix(".tmp")
    out.to_csv(tmp, index=False)
    tmp.replace(path)
    return path


def load_verdicts(judge_backbone: str, root: Path = VERDICTS_DIR) -> pd.DataFrame | None:
    """A judge's stored verdicts (:func:`save_verdicts`), None when none are stored."""
    path = verdicts_path(judge_backbone, root)
    if not path.exists():
        return None
    out = pd.read_csv(path, keep_default_na=False)
    for col in ("verdict", "verdict_lenient", "parse_failed"):
        out[col] = out[col].astype(str).str.lower().eq("true")
    out["error"] = out["error"].replace("", None)
    return out
