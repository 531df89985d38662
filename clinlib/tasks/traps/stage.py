"""The trap stage: trap facts, their verifier rows, the six query types and their gates
(MedMemoryBench
§4 "Disease Progression Event Generation", §5 "Query Design").

``build_traps(profile)`` (run by ``clintrace questions`` after the extended set) writes
``trap_facts.parquet``, ``trap_checks.parquet`` (dialogue_checks columns), ``trap_questions.parquet``
(QUESTION_COLUMNS + query_type, answer_format, risk_category, trap_id, gold_text,
judge_criteria) and ``trap_gates.parquet`` (gates columns). Nothing it writes is read by T1–T11:
questions.parquet and temporal_questions.parquet are untouched.

Gates (all hard):
* ``L0`` — qids are unique (they hash the question's content, meta included).
* ``L2`` — every S/O gold, and the key of TLA and SUA (free text: the date, the lab state),
  recomputed by another route: record questions (SUA, MQ eGFR) from the raw hosp tables
  (:func:`clinlib.tasks.recompute.load_raw`: raw values, reference ranges, order times;
  patients' sex and age), injected ones from the trap dialogue's text (the allergen or history
  entity read back from the stated sentence, the date from the stating turn's visit, a
  multi-select MQ's letters from the stated fact).
* ``L3`` — no leakage: an S gold does not occur in its question; an O question names none of
  its options; an allergy question does not name the allergen.
* ``stated`` — no question whose gold needs a fact the dialogue never states: the eGFR a
  CKD-EPI 2021 gold needs (MQ eGFR, MCD on the metformin rule) takes age and sex, which the
  dialogue does not state, so the question must state them (:func:`unstated_inputs`: "a
  67-year-old woman", equal to the meta's age and sex where the meta has them).
* ``distribution`` — no O subtype has more than :data:`MAX_LETTER_SHARE` of its golds on one
  option (checked when the subtype has >= :data:`MIN_FOR_SHARE` questions).
* ``verifier`` — every trap_checks row passed: the trap verifier's and the MAIN dialogue
  verifier's HARD checks on the trap dialogue (``main:<check>``,
  :mod:`clinlib.tasks.traps.main_verify`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import StageError, stage_run
from clinlib.data.build import SourceSpec, load, open_source, read_source_info
from clinlib.tasks.recompute import load_raw
from clinlib.tasks.traps.constraints import ALLERGENS, HISTORY_FACTS, HISTORY_KINDS
from clinlib.tasks.traps.facts import build_trap_facts, trap_dialogue, verify_traps
from clinlib.tasks.traps.history_queries import NONE_OPTION, PRIOR_CORRECT, PRIOR_OPTIONS, SULFA
from clinlib.tasks.traps.main_verify import verify_trap_dialogue
from clinlib.tasks.traps.queries import (
    STATE_KEYS,
    TRAP_QUESTION_EXTRA,
    build_trap_questions,
    egfr_band,
    lab_state,
)
from clinlib.tasks.traps.rows import LETTERS
from clinlib.tasks.traps.rules import ckd_epi_2021

TRAP_STAGE = "traps"
TRAP_OUTPUTS = ("trap_facts", "trap_checks", "trap_questions", "trap_gates")
MAX_LETTER_SHARE = 0.9
MIN_FOR_SHARE = 10
_ALLERGY_RE = re.compile(r"allergic to (.+?);")
_AGE_SEX_RE = re.compile(r"\bis an? (\d+)-year-old (man|woman)\b")
NEEDS_AGE_SEX = ("egfr", "metformin_low_egfr")  # subtypes whose gold runs CKD-EPI 2021
SET_SUBTYPES = ("history", "medication", "prior_conflict")  # multi-select MQ read from a turn
KEYED_L = ("TLA", "SUA")  # free-text types whose gold key (date, lab state) L2 recomputes


def _raw_patients(con, sids) -> pd.DataFrame:
    con.register("trap_sids", pd.DataFrame({"subject_id": sorted(sids)}))
    return con.execute(
        "SELECT p.subject_id, p.gender, p.anchor_age, p.anchor_year FROM patients "
        "p JOIN trap_sids s USING (subject_id)"
    ).df()


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Arrow-backed string columns as Python objects: the trap builders iterate rows, and
    iterating an arrow array element by element is many times slower."""
    cols = {c: object for c, t in frame.dtypes.items() if str(t).startswith("string")}
    return frame.astype(cols) if cols else frame


def _tagged_turns(turns: pd.DataFrame) -> dict[str, dict]:
    """trap id -> the turn whose event_ids are exactly that id (ids tagged twice are left out,
    so L2 fails on them)."""
    out: dict[str, dict] = {}
    seen: set[str] = set()
    for rec in turns[turns["injected"]].to_dict("records"):
        ids = [str(e) for e in rec["event_ids"]]
        if len(ids) == 1:
            out.pop(ids[0], None) if ids[0] in seen else out.setdefault(ids[0], rec)
            seen.add(ids[0])
    return out


def recompute_gold(q: dict, raw, patients: dict, tdial: dict[str, dict]) -> str | None:
    """The gold of one S/O trap question by the independent route (module docstring); None
    when it cannot be recomputed."""
    meta = json.loads(q["meta"])
    sid = int(q["subject_ids"][0])
    if q["task"] in ("EEM", "TLA") or q["subtype"] in ("allergy", *SET_SUBTYPES):
        turn = tdial.get(q["trap_id"])  # the one turn tagged with exactly this trap id
        if turn is None:
            return None
        if q["task"] == "TLA":
            return str(turn["visit_date"])
        if q["task"] == "MQ" and q["subtype"] in SET_SUBTYPES:
            return recompute_set(q, str(turn["text"]))
        if q["task"] == "EEM" and q["subtype"] in HISTORY_KINDS:
            said = next((h for h in HISTORY_FACTS if h.statement == str(turn["text"])), None)
            return None if said is None else said.name
        m = _ALLERGY_RE.search(str(turn["text"]))
        if m is None:
            return None
        if q["task"] == "EEM":
            return m.group(1)
        allergen = next((a for a in ALLERGENS if a.name == m.group(1)), None)
        return None if allergen is None else ("B" if allergen.example == meta["example"] else "A")
    labs = {str(r["event_id"]): r for r in raw.records("labs", sid)}
    if q["task"] == "SUA":
        cur, old = labs.get(meta["current_event"]), labs.get(meta["earlier_event"])
        if cur is None or old is None:
            return None
        now = lab_state(float(cur["valuenum"]), cur["ref_low"], cur["ref_high"])
        then = lab_state(float(old["valuenum"]), old["ref_low"], old["ref_high"])
        return STATE_KEYS[now] if now != then else None
    if q["subtype"] == "egfr":
        lab = labs.get(str(q["anchor_event_ids"][0]))
        rx = {str(r["event_id"]): r for r in raw.records("rx", sid)}.get(
            str(q["anchor_event_ids"][1])
        )
        p = patients.get(sid)
        if lab is None or rx is None or p is None or lab["charttime"] > rx["starttime"]:
            return None
        age = float(p["anchor_age"]) + pd.Timestamp(lab["charttime"]).year - float(p["anchor_year"])
        female = str(p["gender"]).upper().startswith("F")
        return egfr_band(ckd_epi_2021(float(lab["valuenum"]), age, female))
    return None


def recompute_set(q: dict, said: str) -> str | None:
    """The gold letters of a multi-select MQ read from the stating turn's text: the options a
    stated history fact leaves open (every option but its drug and "none of these"), or the
    sulfonamide statements that are true when a sulfa allergy is stated."""
    options = [str(o) for o in q["options"]]
    if q["subtype"] == "prior_conflict":
        m = _ALLERGY_RE.search(said)
        if m is None or m.group(1) != SULFA:
            return None
        keep = [PRIOR_OPTIONS[i] for i in PRIOR_CORRECT]
    else:
        fact = next((h for h in HISTORY_FACTS if h.statement == said), None)
        if fact is None:
            return None
        keep = [o for o in options if o not in (fact.avoid, NONE_OPTION)]
    return ",".join(sorted(LETTERS[i] for i, o in enumerate(options) if o in keep))


def unstated_inputs(q: dict) -> bool:
    """Whether a question's gold needs an input neither the dialogue nor the question states
    (the ``stated`` gate, module docstring)."""
    if str(q["subtype"]) not in NEEDS_AGE_SEX:
        return False
    m = _AGE_SEX_RE.search(str(q["question"]))
    if m is None:
        return True
    meta = json.loads(q["meta"])
    if "age" in meta and int(m.group(1)) != int(round(float(meta["age"]))):
        return True
    return "female" in meta and (m.group(2) == "woman") != bool(meta["female"])


def gate_rows(questions: pd.DataFrame, checks: pd.DataFrame, raw, patients, tdial) -> pd.DataFrame:
    """The trap gates (module docstring): gate, task, n_checked, n_failed, threshold, passed."""
    rows = []
    for task, qs in questions.groupby("task", sort=True):
        so = qs[(qs["answer_format"] != "L") | qs["task"].isin(KEYED_L)]
        l2 = [
            q["qid"]
            for q in so.to_dict("records")
            if recompute_gold(q, raw, patients, tdial) != q["gold"]
        ]
        l3 = [q["qid"] for q in qs.to_dict("records") if _leaks(q)]
        unstated = [q["qid"] for q in qs.to_dict("records") if unstated_inputs(q)]
        share_bad = 0
        for _, sub in qs[qs["answer_format"] == "O"].groupby("subtype"):
            top = sub["gold"].value_counts(normalize=True).iloc[0]
            share_bad += int(len(sub) >= MIN_FOR_SHARE and top > MAX_LETTER_SHARE)
        rows += [
            ("L2", task, len(so), len(l2), 0.0),
            ("L3", task, len(qs), len(l3), 0.0),
            ("stated", task, len(qs), len(unstated), 0.0),
            (
                "distribution",
                task,
                qs.loc[qs["answer_format"] == "O", "subtype"].nunique(),
                share_bad,
                0.0,
            ),
        ]
    dup = int(questions["qid"].duplicated().sum())
    rows.append(("L0", "traps", len(questions), dup, 0.0))  # qids unique (content-hashed)
    rows.append(("verifier", "traps", len(checks), int((~checks["passed"]).sum()), 0.0))
    out = pd.DataFrame(rows, columns=["gate", "task", "n_checked", "n_failed", "threshold"])
    out["passed"] = out["n_failed"] <= out["threshold"]
    return out


def _leaks(q: dict) -> bool:
    text = str(q["question"]).lower()
    if q["answer_format"] == "S" and str(q["gold"]).lower() in text:
        return True
    if q["answer_format"] == "O" and any(str(o).lower() in text for o in q["options"]):
        return True
    return q["task"] == "EEM" and any(a.name in text for a in ALLERGENS)


def build_traps(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Build, verify, gate and write a profile's trap artifacts (module docstring).

    Raises:
        StageError: no trap fact or no trap question, or a hard gate failed (naming it).
    """
    name = resolve_profile(profile)
    with stage_run(TRAP_STAGE, name, remove_on_failure=TRAP_OUTPUTS) as staging:
        turns, events, cohort = (_plain(load(a, name)) for a in ("dialogues", "events", "cohort"))
        info = read_source_info(name)
        con = open_source(SourceSpec(info["kind"], Path(info["path"]), bool(info["credentialed"])))
        try:
            sids = sorted(set(turns["subject_id"].astype(int)))
            patients = _raw_patients(con, sids)
            traps = build_trap_facts(turns, events, patients)
            if traps.empty:
                raise StageError(f"trap_facts: 0 trap facts for {len(sids)} patients")
            checks = pd.concat(
                [
                    verify_traps(turns, traps, events),
                    verify_trap_dialogue(turns, traps, events, load("event_coverage", name)),
                ],
                ignore_index=True,
            )
            questions = build_trap_questions(traps, events, turns, patients, cohort)
            if questions.empty:
                raise StageError("trap_questions: 0 questions")
            raw = load_raw(con, sorted({int(s[0]) for s in questions["subject_ids"]}))
        finally:
            con.close()
        tdial = _tagged_turns(trap_dialogue(turns, traps))
        pts = {int(r["subject_id"]): r for r in patients.to_dict("records")}
        gates = gate_rows(questions, checks, raw, pts, tdial)
        for art, df in zip(TRAP_OUTPUTS, (traps, checks, questions, gates), strict=True):
            df.to_parquet(staging.path(f"{art}.parquet"), index=False)
        bad = gates[~gates["passed"]]
        if not bad.empty:
            raise StageError(
                "trap gates failed: "
                + ", ".join(
                    f"{g}/{t} {n} of {c}"
                    for g, t, n, c in zip(
                        bad["gate"], bad["task"], bad["n_failed"], bad["n_checked"], strict=True
                    )
                )
            )
    return {"facts": traps, "checks": checks, "questions": questions, "gates": gates}


def ensure_traps(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """The profile's trap artifacts, built first when ``clintrace questions`` has not written
    them, or wrote them without the current question columns (an older build):
    ``{"facts", "checks", "questions", "gates"}``."""
    name = resolve_profile(profile)
    if not all(artifact_path(f"{a}.parquet", name).exists() for a in TRAP_OUTPUTS):
        return build_traps(name)
    have = pq.read_schema(artifact_path("trap_questions.parquet", name)).names
    if not set(TRAP_QUESTION_EXTRA) <= set(have):  # written by an older kit: rebuilt
        return build_traps(name)
    return {
        k: load(a, name)
        for k, a in zip(("facts", "checks", "questions", "gates"), TRAP_OUTPUTS, strict=True)
    }
