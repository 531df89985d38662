"""Reports on LLM-rewritten dialogues (paper Fig. 2 stage 3; notebook 02): acceptance, rescue
and fallback rates per backbone, the failing checks ranked, and one visit's template beside its
rewrite with the verifier's rows. Pure functions over ``dialogue_rewrites`` rows
(:data:`clinlib.dialogue.rewrite.REWRITE_COLUMNS`) and turn records.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from clinlib.dialogue.fields import WRITER_ROLES, records
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher
from clinlib.dialogue.rewrite import OUTCOMES, REWRITE_CHECKS, check_rewrite


def backbone_rates(log: pd.DataFrame, chain: Sequence[str]) -> pd.DataFrame:
    """Per backbone of the chain, in order: the visits that reached it (every earlier one
    failed), the visits whose kept text it wrote, and that share.

    Returns:
        backbone, role (primary / rescue N), asked, kept, acceptance.
    """
    rows = []
    for i, name in enumerate(chain):
        asked = int((log["n_attempts"] >= i + 1).sum())
        kept = int((log["backbone"] == name).sum())
        rows.append(
            {
                "backbone": name,
                "role": "primary" if i == 0 else f"rescue {i}",
                "asked": asked,
                "kept": kept,
                "acceptance": kept / asked if asked else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["backbone", "role", "asked", "kept", "acceptance"])


def outcome_shares(log: pd.DataFrame) -> pd.DataFrame:
    """Visits per outcome (accepted by the primary / rescued / template fallback) and share."""
    n = log["outcome"].value_counts().reindex(list(OUTCOMES), fill_value=0).astype(int)
    return pd.DataFrame(
        {
            "outcome": list(OUTCOMES),
            "visits": n.to_numpy(),
            "share": n.to_numpy() / max(len(log), 1),
        }
    )


def writer_shares(dialogues: pd.DataFrame) -> pd.DataFrame:
    """Visits per writer role of a stored corpus (template / backbone / rescue / fallback,
    :data:`clinlib.dialogue.fields.WRITER_ROLES`) with the writer's name and share."""
    cols = ["writer_role", "writer", "visits", "share"]
    if "writer_role" not in dialogues.columns or dialogues.empty:
        return pd.DataFrame(columns=cols)
    visits = dialogues.drop_duplicates(["subject_id", "visit_idx"])
    out = visits.groupby(["writer_role", "writer"]).size().rename("visits").reset_index()
    out["share"] = out["visits"] / len(visits)
    order = {r: i for i, r in enumerate(WRITER_ROLES)}
    out = out.sort_values("writer_role", key=lambda s: s.map(order)).reset_index(drop=True)
    return out[cols]


def failing_checks(log: pd.DataFrame) -> pd.DataFrame:
    """Rejected attempts by (backbone, check), most frequent first (ties by check order)."""
    items = [a.split(": ", 1) for attempts in log["attempts"] for a in attempts]
    df = pd.DataFrame(items, columns=["backbone", "check"])
    out = df.value_counts().rename("rejections").reset_index()
    order = {c: i for i, c in enumerate(REWRITE_CHECKS)}
    out["_o"] = out["check"].map(order)
    out = out.sort_values(["rejections", "_o"], ascending=[False, True])
    return out.drop(columns="_o").reset_index(drop=True)


def visit_verifier_rows(
    reply: str,
    template: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
) -> pd.DataFrame:
    """Every rewrite check on one reply for one visit: check, passed, detail.

    Args:
        reply: the rewriter's text for the visit.
        template: the visit's template turns (dialogues rows: speaker, text_tagged, event_ids).
        events: the patient's events.
        coverage: the patient's event_coverage rows (which events are unusable / missed).
    """
    turns = sorted(records(template), key=lambda r: int(r["turn_idx"]))
    v = int(turns[0]["visit_idx"])
    status = dict(zip(coverage["event_id"].astype(str), coverage["status"], strict=True))
    usable = {
        str(e["event_id"]): e
        for e in records(events)
        if status.get(str(e["event_id"])) != "unusable"
    }
    missed = [
        i for i, e in usable.items() if status.get(i) == "missed" and int(e["visit_idx"]) == v
    ]
    meds = [str(e["label"]) for e in usable.values() if e.get("kind") == "medication"]
    _, problems = check_rewrite(
        reply, turns, v, usable, missed, DrugMatcher([*DRUG_LEXICON, *meds])
    )
    return pd.DataFrame(
        [
            {"check": c, "passed": not problems[c], "detail": "; ".join(problems[c][:2])}
            for c in REWRITE_CHECKS
        ]
    )


def side_by_side(template: pd.DataFrame, rewrite: pd.DataFrame) -> pd.DataFrame:
    """A visit's turns: speaker, template text, rewritten text (tags kept), turn by turn."""
    a = sorted(records(template), key=lambda r: int(r["turn_idx"]))
    b = sorted(records(rewrite), key=lambda r: int(r["turn_idx"]))
    n = max(len(a), len(b))
    pad = [{"speaker": "", "text_tagged": ""}]
    a, b = a + pad * (n - len(a)), b + pad * (n - len(b))
    return pd.DataFrame(
        {
            "speaker": [x["speaker"] or y["speaker"] for x, y in zip(a, b, strict=True)],
            "template": [x["text_tagged"] for x in a],
            "rewrite": [y["text_tagged"] for y in b],
        }
    )
