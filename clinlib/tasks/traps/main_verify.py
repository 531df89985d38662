"""The trap dialogue through the MAIN dialogue verifier: the injected constraints are checked
like any stated fact (paper §3 "Cohort", :mod:`clinlib.dialogue.verify`).

The trap verifier of :mod:`clinlib.tasks.traps.facts` checks the injected turns against the
same table they were built from. Here the trap dialogue (:func:`clinlib.tasks.traps.facts.
trap_dialogue`) also runs through :func:`clinlib.dialogue.verify.verify_records`, the verifier
every synthesised dialogue must pass, with each injected constraint added as a source event of
kind :data:`clinlib.dialogue.fields.STATEMENT_KIND` (id = its trap id, ``label`` = the
statement, covered by the turn that cites it). So an allergen name or a sum of money in an
injected turn passes ``no_untraced_drugs`` / ``no_untraced_numbers`` because the turn CITES a
tagged trap event that states it (the statement must sit in that turn verbatim:
``covered_fields_verbatim``), exactly as a drug name passes when its medication is cited; the
same name in a turn without the tag still fails. Original turns keep their coverage rows
(turn numbers mapped through ``source_turn_idx``).

:func:`parse_back` is an independent check of the stated facts: it renders the trap dialogue
as the ``full-context`` strategy shows it and reads the allergen and the visit date back from
the rendered text, never from the trap table.
"""

from __future__ import annotations

import re

import pandas as pd

from clinlib.dialogue.checks import check_row
from clinlib.dialogue.fields import STATEMENT_KIND, group_records, records
from clinlib.dialogue.synth import render_dialogue
from clinlib.dialogue.verify import checks_frame, verify_records
from clinlib.tasks.traps.facts import trap_dialogue

MAIN_PREFIX = "main:"  # trap_checks rows of the main verifier: main:<check>
_ALLERGY = re.compile(r"allergic to ([A-Za-z][A-Za-z ]*?);")


def statement_events(traps: pd.DataFrame) -> pd.DataFrame:
    """Each injected constraint as a source event (events-table columns used by the
    verifier): event_id = trap id, kind = STATEMENT_KIND, label = the statement, no time."""
    inj = traps[traps["origin"] == "injected"]
    return pd.DataFrame(
        {
            "event_id": inj["trap_id"].astype(str),
            "subject_id": inj["subject_id"].astype("int64"),
            "visit_idx": inj["visit_idx"].astype("int64"),
            "kind": STATEMENT_KIND,
            "label": inj["statement"].astype(str),
            "time": None,
        }
    )


def _clean(groups: dict[int, list[dict]]) -> dict[int, list[dict]]:
    """pd.NA as None (object columns keep pd.NA; the verifier tests values with ``bool``)."""
    return {
        k: [{c: (None if v is pd.NA else v) for c, v in r.items()} for r in recs]
        for k, recs in groups.items()
    }


def _coverage(cov: list[dict], got: pd.DataFrame) -> list[dict]:
    """The patient's coverage with turn numbers of the trap dialogue, plus a covered row per
    injected statement (the turn that cites it)."""
    new_idx = {
        int(s): int(t)
        for s, t in zip(got["source_turn_idx"], got["turn_idx"], strict=True)
        if int(s) >= 0
    }
    out = []
    for c in cov:
        t = c.get("turn_idx")
        out.append({**c, "turn_idx": new_idx.get(int(t)) if pd.notna(t) else t})
    for rec in got[got["injected"]].to_dict("records"):
        for eid in rec["event_ids"]:
            out.append(
                {
                    "event_id": str(eid),
                    "status": "covered",
                    "reason": "",
                    "turn_idx": int(rec["turn_idx"]),
                }
            )
    return out


def verify_trap_dialogue(
    turns: pd.DataFrame, traps: pd.DataFrame, events: pd.DataFrame, coverage: pd.DataFrame
) -> pd.DataFrame:
    """The main verifier's HARD rows (dialogue_checks columns, check = ``main:<name>``) for
    every patient with an injected constraint, run on its trap dialogue (module docstring)."""
    inj = traps[traps["origin"] == "injected"]
    sids = sorted(set(inj["subject_id"].astype(int)))
    turns = turns[turns["subject_id"].isin(sids)]
    evs = _clean(group_records(events[events["subject_id"].isin(sids)]))
    covs = _clean(group_records(coverage[coverage["subject_id"].isin(sids)]))
    stm = group_records(statement_events(inj))
    rows = []
    for sid, tr in turns.groupby("subject_id", sort=True):
        sid = int(sid)
        got = trap_dialogue(tr, inj[inj["subject_id"] == sid])
        got = got.sort_values("turn_idx", kind="stable")
        checked = verify_records(
            sid,
            records(got),
            evs.get(sid, []) + stm.get(sid, []),
            _coverage(covs.get(sid, []), got),
            include_length=False,
        )
        rows += [
            {**r, "check": MAIN_PREFIX + r["check"]} for r in checked if r["severity"] == "hard"
        ]
        rows += _parsed_back_rows(sid, got, inj[inj["subject_id"] == sid])
    return checks_frame(rows)


def _parsed_back_rows(sid: int, got: pd.DataFrame, inj: pd.DataFrame) -> list[dict]:
    """``trap_parsed_back``: the allergen and its visit's date read back from the rendered
    full-context text equal the trap table's value and the dialogue's date of its visit."""
    out = []
    for t in inj[inj["kind"] == "allergy"].to_dict("records"):
        back = parse_back(render_dialogue(got, with_ids=True), sid)
        dates = got.loc[got["visit_idx"] == int(t["visit_idx"]), "visit_date"].astype(str)
        want = {"allergen": str(t["value"]), "date": dates.iloc[0] if len(dates) else ""}
        ok = back == want
        out.append(
            check_row(sid, "trap_parsed_back", ok, "" if ok else f"read {back}, expected {want}")
        )
    return out


def parse_back(rendered: str, sid: int) -> dict[str, str]:
    """What a rendered full-context dialogue states about a patient's injected allergy, read
    from the text alone: ``{"allergen", "date"}`` (the ``Visit N (YYYY-MM-DD)`` header above
    the turn tagged ``[TRAPALG-<sid>]``); empty when it is not stated."""
    tag = f"TRAPALG-{sid}"
    at = rendered.find(tag)
    if at < 0:
        return {}
    line_start = rendered.rfind("\n", 0, at) + 1
    line = rendered[line_start : rendered.find("\n", at) if "\n" in rendered[at:] else None]
    m = _ALLERGY.search(line)
    dates = re.findall(r"Visit \d+ \((\d{4}-\d{2}-\d{2})\)", rendered[:at])
    return {"allergen": m.group(1) if m else "", "date": dates[-1] if dates else ""}
