"""Patterns planted in a group so that it can only be read as a group (PopMedQA §2.1: cohorts
"generated" with the question; the seed's clique "sharing a treatment pathway").

Two patterns, both made of events that are ordinary in every record:

- ``signature``: each signature is an ordered pathway of ``m`` common treatments, labs or
  procedures (concepts that a share of the group's records print anyway, drawn afresh for each
  question). Every event of those concepts is first removed from the whole group, then each
  carrier of the signature receives one event of each concept, on its own existing record days,
  in the signature's order. No single record shows anything unusual (a handful of common
  events, no new concept); only across the group do the carriers share a set of concepts that
  no one else prints.
- ``score``: one common concept is the hidden score; every event of it is removed from the
  group and patient i receives ``count_i`` copies on existing record days. A few patients'
  counts are stated in the question as the team's scores; the reader must infer which concept
  they count (the criterion is never stated).

The recipe (who carries which signature, the counts) is the gold's only source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

PLANT_KINDS: tuple[str, ...] = ("medication", "lab", "procedure")
COMMON_SHARE: tuple[float, float] = (0.15, 0.9)  # carrier share in the group, a common concept
SIGNATURE_SOURCE = "signature"


def _concepts(ev: pd.DataFrame) -> pd.Series:
    return ev["code_system"].astype(str) + "\x1f" + ev["code"].astype(str)


def common_concepts(ev: pd.DataFrame, n_patients: int) -> list[str]:
    """Concepts of :data:`PLANT_KINDS` whose carrier share in the group lies in
    :data:`COMMON_SHARE` and whose description no other concept of the group shares (so every
    rendering tells them apart), sorted (a deterministic pool for the seeded draw)."""
    sub = ev.assign(_c=_concepts(ev))
    per_label = sub.groupby("label")["_c"].nunique()
    alone = set(per_label[per_label == 1].index)  # a description no other concept prints
    sub = sub[sub["kind"].isin(PLANT_KINDS) & sub["label"].isin(alone)]
    share = sub.groupby("_c")["subject_id"].nunique() / n_patients
    lo, hi = COMMON_SHARE
    return sorted(share[(share >= lo) & (share <= hi)].index)


def _days(ev: pd.DataFrame) -> dict[int, list[pd.Timestamp]]:
    """subject_id -> the record's distinct days, sorted."""
    day = ev["time"].dt.floor("D")
    return {int(s): sorted(d.unique()) for s, d in day.groupby(ev["subject_id"].to_numpy())}


def _copy(template: Mapping[str, Any], sid: int, day: pd.Timestamp, j: int) -> dict[str, Any]:
    row = dict(template)
    row.update(
        event_id=f"SIG-{sid}-{j}",
        subject_id=sid,
        time=day + pd.Timedelta(hours=12, minutes=j),
        source=SIGNATURE_SOURCE,
    )
    return row


def _templates(ev: pd.DataFrame, chosen: list[str]) -> dict[str, dict[str, Any]]:
    c = _concepts(ev)
    return {k: ev[c == k].iloc[0].to_dict() for k in chosen}


def plant_signatures(
    ev: pd.DataFrame,
    carriers: Mapping[int, int | None],
    n_signatures: int,
    m: int,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, dict[str, Any]] | str:
    """Plant ``n_signatures`` ordered pathways of ``m`` concepts; ``carriers``: subject_id ->
    signature index (or None). Returns (events, recipe) or the reason it could not."""
    sids = sorted(carriers)
    pool = common_concepts(ev, len(sids))
    if len(pool) < n_signatures * m:
        return f"{len(pool)} common concepts < {n_signatures * m} to plant"
    drawn = [str(x) for x in rng.choice(pool, size=n_signatures * m, replace=False)]
    sigs = [drawn[i * m : (i + 1) * m] for i in range(n_signatures)]
    tmpl = _templates(ev, drawn)
    kept = ev[~_concepts(ev).isin(drawn)]
    new: list[dict[str, Any]] = []
    by_sid = _days(kept)
    for sid in sids:
        s = carriers[sid]
        if s is None:
            continue
        days = by_sid.get(sid, [])
        if len(days) < m:
            return f"a carrier record has {len(days)} days < {m}"
        at = sorted(rng.choice(len(days), size=m, replace=False))
        new += [
            _copy(tmpl[c], sid, days[i], j)
            for j, (c, i) in enumerate(zip(sigs[s], at, strict=True))
        ]
    out = pd.concat([kept, pd.DataFrame(new).astype(kept.dtypes.to_dict())], ignore_index=True)
    return out, {"signatures": sigs, "carriers": {int(k): v for k, v in carriers.items()}}


def plant_score(
    ev: pd.DataFrame, counts: Mapping[int, int], rng: np.random.Generator
) -> tuple[pd.DataFrame, dict[str, Any]] | str:
    """Make one drawn common concept the hidden score: patient i prints it ``counts[i]`` times."""
    sids = sorted(counts)
    pool = common_concepts(ev, len(sids))
    if not pool:
        return "no common concept to score"
    concept = str(rng.choice(pool))
    tmpl = _templates(ev, [concept])[concept]
    kept = ev[_concepts(ev) != concept]
    new: list[dict[str, Any]] = []
    by_sid = _days(kept)
    for sid in sids:
        days = by_sid.get(sid, [])
        at = sorted(rng.choice(len(days), size=counts[sid], replace=counts[sid] > len(days)))
        new += [_copy(tmpl, sid, days[i], j) for j, i in enumerate(at)]
    frame = pd.DataFrame(new) if new else kept.iloc[:0]
    out = pd.concat([kept, frame.astype(kept.dtypes.to_dict())], ignore_index=True)
    return out, {"score_concept": concept, "counts": {int(k): int(v) for k, v in counts.items()}}
