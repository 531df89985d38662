"""A patient's relatives for the proxy noise sessions (MedMemoryBench §4 "Noise Augmentation"):
2-4 relatives, each a fixed donor of the synthetic donor pool (:mod:`clinlib.data.donors`) with
the labs, drugs and conditions a relative can tell; fixed by (patient, seed) at every ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.donors import donor_events
from clinlib.dialogue import noise_topics as nt
from clinlib.dialogue.fields import present

RELATIVES = (2, 4)  # relatives per patient (inclusive): seed fact mmb_relatives
REL_STREAM = 1  # the relatives' own random stream, apart from the noise placement's


@dataclass(frozen=True)
class Relative:
    """A patient's relative: relation, donor patient and one of the donor's conditions."""

    relation: str
    donor_id: int
    condition: str = ""


def _usable_med(label: str) -> bool:
    # Diluent flushes and combination products with strengths in the name read oddly as a
    # relative's treatment; every other drug is told as the patients' are.
    return (
        "flush" not in label.lower() and "  " not in label and not any(c.isdigit() for c in label)
    )


def donor_profiles(donors: pd.DataFrame) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """donor subject_id -> {"labs", "meds", "conditions"}: the facts a relative can tell
    (labs with a value and unit, drugs with dose, unit and route, diagnosis titles)."""
    out: dict[int, dict[str, list[dict[str, Any]]]] = {}
    cols = ["kind", "label", "value_text", "unit", "route", "flag"]
    for sid, g in donors.groupby("subject_id", sort=True):
        labs, meds, conds = [], [], []
        for r in g[[c for c in cols if c in g.columns]].to_dict("records"):
            label = str(r.get("label") or "")
            if r["kind"] == "lab" and present(r.get("value_text")) and present(r.get("unit")):
                labs.append(
                    {
                        "label": label,
                        "value_text": str(r["value_text"]),
                        "unit": str(r["unit"]),
                        "abnormal": r.get("flag") == "abnormal",
                    }
                )
            elif (
                r["kind"] == "medication"
                and _usable_med(label)
                and all(present(r.get(k)) for k in ("value_text", "unit", "route"))
            ):
                meds.append(
                    {
                        "label": label,
                        "value_text": str(r["value_text"]),
                        "unit": str(r["unit"]),
                        "route": str(r["route"]),
                    }
                )
            elif r["kind"] == "diagnosis" and label and not any(c.isdigit() for c in label):
                conds.append({"label": label})
        if labs:
            out[int(sid)] = {"labs": labs, "meds": meds, "conditions": conds}
    return out


def relatives_of(
    subject_id: int, seed: int = 42, profiles: Mapping[int, Mapping[str, list]] | None = None
) -> list[Relative]:
    """The 2-4 relatives of a patient: relation and donor fixed by (patient, seed), the same
    at every noise ratio (MedMemoryBench §4 "Noise Augmentation", seed fact mmb_relatives: "2–4 virtual family
    members who have independent health profiles").

    Args:
        subject_id: the patient.
        seed: the noise seed.
        profiles: :func:`donor_profiles` of the donor pool (default: the default pool).
    """
    profiles = profiles if profiles is not None else default_profiles()
    pool = sorted(profiles)
    rng = np.random.default_rng([int(seed), int(subject_id), REL_STREAM])
    k = min(int(rng.integers(RELATIVES[0], RELATIVES[1] + 1)), len(pool))
    slots = rng.choice(len(nt.RELATION_SLOTS), size=k, replace=False)
    donors = rng.choice(len(pool), size=k, replace=False)
    out = []
    for r, d in zip(slots, donors, strict=True):
        relations = nt.RELATION_SLOTS[int(r)]
        relation = relations[int(rng.integers(len(relations)))]
        conds = profiles[pool[int(d)]]["conditions"]
        cond = conds[int(rng.integers(len(conds)))]["label"] if conds else ""
        out.append(Relative(relation, int(pool[int(d)]), cond))
    return out


_DEFAULT_POOL: dict[str, Any] = {}


def default_profiles() -> dict[int, dict[str, list[dict[str, Any]]]]:
    """:func:`donor_profiles` of the default donor pool, read once."""
    if "default" not in _DEFAULT_POOL:
        _DEFAULT_POOL["default"] = donor_profiles(donor_events())
    return _DEFAULT_POOL["default"]
