"""Trap facts: the table, the dialogue that states them, and their verifier rows (MedMemoryBench
§4 "Disease Progression Event Generation").

``trap_facts.parquet`` has one row per trap fact (:data:`TRAP_FACT_COLUMNS`):

* ``origin = derived`` (:mod:`clinlib.tasks.traps.rules`): a drug order placed while a
  contraindicating lab state was current. Its anchors are the lab event and the order event,
  both already stated verbatim in the dialogue (a derived trap whose events the dialogue does
  not state is dropped); ``visit_idx`` is the lab's visit, ``matters_visit_idx`` the order's.
* ``origin = injected`` (:mod:`clinlib.tasks.traps.constraints`): a patient-stated allergy,
  economic constraint or preference, labelled injected; its anchor is its own ``TRAP...``
  event id; it matters at the patient's last visit (the questions are asked after it).

:data:`TRAP_KINDS` is the one public name of what a trap fact is (the trap questions and retention
read a trap fact's anchors: :func:`trap_event_ids`; no memory strategy reads them).
:func:`trap_dialogue` returns a dialogue with the injected constraints (tagged); the original
dialogues.parquet is never rewritten, so T1–T11 and their gold are untouched.
"""

from __future__ import annotations

import json

import pandas as pd

from clinlib.data.drugnames import drug_key, has_phrase
from clinlib.tasks.injections import InjectionError, apply_injections
from clinlib.tasks.traps.constraints import (
    ACK_SUFFIX,
    ALLERGENS,
    EARLY_VISITS,
    HISTORY_KINDS,
    constraint_injections,
    history_fact,
    injected_constraints,
)
from clinlib.tasks.traps.rules import RULE_BY_KEY, RULES, derive_traps

TRAP_KINDS: dict[str, str] = {
    "contraindication": "derived: a drug order while a contraindicating lab state is current",
    "allergy": "injected: a patient-stated drug allergy (TRAPALG-<subject>)",
    "cost": "injected: a patient-stated economic constraint (TRAPCOST-<subject>)",
    "preference": "injected: a patient-stated treatment preference (TRAPPREF-<subject>)",
    "history": "injected: a patient-stated past illness (TRAPPMH-<subject>)",
    "medication": "injected: a patient-stated medicine prescribed elsewhere (TRAPMED-<subject>)",
}
TRAP_PREFIX = "TRAP"  # every trap id starts with it (TRAPALG-, TRAPRULE-, ...)
TRAP_FACT_COLUMNS = [
    "trap_id",
    "subject_id",
    "origin",
    "kind",
    "rule",
    "value",
    "statement",
    "visit_idx",
    "matters_visit_idx",
    "anchor_event_ids",
    "risk_category",
    "detail",
]
RULE_KEYS = [r.key for r in RULES]  # a derived trap id: TRAPRULE-<subject>-<rule index>
KIND_RISK = {
    "allergy": "missed_contraindication",
    "cost": "personalised_constraint_omission",
    "preference": "personalised_constraint_omission",
    "history": "missed_contraindication",
    "medication": "incorrect_medication_recommendation",
}


def trap_event_ids(traps: pd.DataFrame) -> set[str]:
    """Every event id that states a trap fact (the anchors of ``trap_facts.parquet``)."""
    return {str(e) for ids in traps["anchor_event_ids"] for e in ids}


def _stated(turns: pd.DataFrame) -> dict[tuple[int, str], int]:
    """(subject_id, event_id) -> visit_idx of the first turn stating it."""
    out: dict[tuple[int, str], int] = {}
    for sid, v, ids in zip(
        turns["subject_id"], turns["visit_idx"], turns["event_ids"], strict=True
    ):
        for e in ids if ids is not None else ():
            out.setdefault((int(sid), str(e)), int(v))
    return out


def build_trap_facts(
    turns: pd.DataFrame, events: pd.DataFrame, patients: pd.DataFrame
) -> pd.DataFrame:
    """The trap facts of a build (module docstring), sorted by trap_id."""
    stated = _stated(turns)
    last_visit = turns.groupby("subject_id")["visit_idx"].max().to_dict()
    rows = []
    # a trap the memory can hold: the dialogue states both the lab and the order
    for d in derive_traps(events, patients, lambda s, e: (s, e) in stated).to_dict("records"):
        sid = int(d["subject_id"])
        rule = RULE_BY_KEY[d["rule"]]
        rows.append(
            {
                "trap_id": f"{TRAP_PREFIX}RULE-{sid}-{RULE_KEYS.index(d['rule'])}",
                "subject_id": sid,
                "origin": "derived",
                "kind": "contraindication",
                "rule": d["rule"],
                "value": rule.drug_class,
                "statement": "",
                "visit_idx": int(d["lab_visit_idx"]),
                "matters_visit_idx": int(d["order_visit_idx"]),
                "anchor_event_ids": [d["lab_event_id"], d["order_event_id"]],
                "risk_category": d["risk_category"],
                "detail": json.dumps(
                    {
                        k: str(d[k])
                        for k in (
                            "lab",
                            "lab_value",
                            "lab_time",
                            "order_drug",
                            "order_time",
                            "state",
                            "source",
                        )
                    },
                    sort_keys=True,
                ),
            }
        )
    for c in injected_constraints(turns, events).to_dict("records"):
        sid = int(c["subject_id"])
        rows.append(
            {
                "trap_id": c["trap_id"],
                "subject_id": sid,
                "origin": "injected",
                "kind": c["kind"],
                "rule": "",
                "value": c["value"],
                "statement": c["statement"],
                "visit_idx": int(c["visit_idx"]),
                "matters_visit_idx": int(last_visit[sid]),
                "anchor_event_ids": [c["trap_id"]],
                "risk_category": KIND_RISK[c["kind"]],
                "detail": json.dumps(
                    {"after_turn_idx": int(c["after_turn_idx"]), "example": c["example"]},
                    sort_keys=True,
                ),
            }
        )
    out = pd.DataFrame(rows, columns=TRAP_FACT_COLUMNS)
    return out.sort_values("trap_id", kind="stable").reset_index(drop=True)


def _constraints_of(traps: pd.DataFrame) -> pd.DataFrame:
    inj = traps[traps["origin"] == "injected"]
    return pd.DataFrame(
        {
            "trap_id": inj["trap_id"],
            "subject_id": inj["subject_id"],
            "kind": inj["kind"],
            "value": inj["value"],
            "statement": inj["statement"],
            "visit_idx": inj["visit_idx"],
            "after_turn_idx": [json.loads(d)["after_turn_idx"] for d in inj["detail"]],
        }
    )


def trap_dialogue(turns: pd.DataFrame, traps: pd.DataFrame) -> pd.DataFrame:
    """``turns`` with every injected constraint of its patients inserted (statement tagged with
    its trap id in ``event_ids`` and ``text_tagged``; the acknowledgement untagged). Columns of
    :func:`clinlib.tasks.injections.apply_injections` are added."""
    sids = set(turns["subject_id"].astype(int))
    cons = _constraints_of(traps[traps["subject_id"].isin(sids)])
    out = apply_injections(turns, constraint_injections(cons))
    is_stmt = out["injected"] & out["injected_qid"].str.startswith(TRAP_PREFIX).fillna(False)
    is_stmt &= ~out["injected_qid"].str.endswith(ACK_SUFFIX).fillna(False)
    out["event_ids"] = [
        [str(q)] if s else ids
        for s, q, ids in zip(is_stmt, out["injected_qid"], out["event_ids"], strict=True)
    ]
    if "text_tagged" in out.columns:
        out.loc[is_stmt, "text_tagged"] = [
            f"{t} [{q}]"
            for t, q in zip(out.loc[is_stmt, "text"], out.loc[is_stmt, "injected_qid"], strict=True)
        ]
    return out


TRAP_CHECKS: dict[str, str] = {
    "trap_stated_verbatim": "each injected constraint is one patient turn, verbatim, tagged "
    "with its own trap id, in its visit",
    "trap_early_visit": f"each injected constraint sits in one of the first {EARLY_VISITS} visits",
    "trap_no_record_conflict": "no injected allergy covers a drug the record orders, and no "
    "injected history fact names one",
    "trap_derived_stated": "each derived trap's lab and order events are stated in the dialogue",
    "trap_record_unchanged": "removing the injected turns gives back the original dialogue",
}


def _row(sid: int, check: str, ok: bool, detail: str = "") -> dict:
    return {
        "subject_id": sid,
        "check": check,
        "severity": "hard",
        "passed": bool(ok),
        "detail": detail,
    }


def verify_traps(turns: pd.DataFrame, traps: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Verifier rows (dialogue_checks columns) for every patient with a trap fact: the checks
    of :data:`TRAP_CHECKS`, all hard, run on :func:`trap_dialogue` of ``turns``."""
    meds = events[events["kind"] == "medication"].groupby("subject_id")["label"].agg(list)
    rows = []
    by_sid = dict(
        tuple(turns[turns["subject_id"].isin(set(traps["subject_id"]))].groupby("subject_id"))
    )
    for sid, tr in traps.groupby("subject_id", sort=True):
        sid = int(sid)
        orig = by_sid.get(sid, turns.iloc[:0])
        try:
            got = trap_dialogue(orig, tr)
        except InjectionError as exc:  # the table names a turn of another visit: fail, not raise
            rows.append(_row(sid, "trap_stated_verbatim", False, str(exc)[:200]))
            bad = [
                t
                for t, v in zip(tr["trap_id"], tr["visit_idx"], strict=True)
                if int(v) not in sorted(orig["visit_idx"].unique())[:EARLY_VISITS]
            ]
            rows.append(_row(sid, "trap_early_visit", not bad, ", ".join(bad)))
            continue
        stated = _stated(got)
        inj, der = tr[tr["origin"] == "injected"], tr[tr["origin"] == "derived"]
        bad_text, bad_visit, bad_conflict = [], [], []
        for t in inj.to_dict("records"):
            hit = got[got["event_ids"].map(lambda ids, i=t["trap_id"]: list(ids) == [i])]
            if not (
                len(hit) == 1
                and hit["text"].iloc[0] == t["statement"]
                and hit["speaker"].iloc[0] == "patient"
                and int(hit["visit_idx"].iloc[0]) == int(t["visit_idx"])
            ):
                bad_text.append(t["trap_id"])
            if int(t["visit_idx"]) not in sorted(orig["visit_idx"].unique())[:EARLY_VISITS]:
                bad_visit.append(t["trap_id"])
            if _conflicts(t["kind"], t["value"], meds.get(sid, [])):
                bad_conflict.append(t["trap_id"])
        missing = [
            t
            for t, ids in zip(der["trap_id"], der["anchor_event_ids"], strict=True)
            if any((sid, str(e)) not in stated for e in ids)
        ]
        back = got[~got["injected"]]
        same = back["text"].tolist() == orig.sort_values("turn_idx")["text"].tolist() and back[
            "source_turn_idx"
        ].tolist() == sorted(orig["turn_idx"].tolist())
        for check, bad in (
            ("trap_stated_verbatim", bad_text),
            ("trap_early_visit", bad_visit),
            ("trap_no_record_conflict", bad_conflict),
            ("trap_derived_stated", missing),
        ):
            rows.append(_row(sid, check, not bad, ", ".join(bad)))
        rows.append(_row(sid, "trap_record_unchanged", same))
    return pd.DataFrame(rows, columns=["subject_id", "check", "severity", "passed", "detail"])


def _conflicts(kind: str, value: str, drugs) -> bool:
    if kind == "allergy":
        phrases = next(a for a in ALLERGENS if a.name == value).phrases
    elif kind in HISTORY_KINDS:
        phrases = history_fact(value).phrases
    else:
        return False
    return any(has_phrase(drug_key(d), p) for d in drugs for p in phrases)
