"""Gates L3 no gold leakage and L4 distribution coverage (paper Appendix A; Appendix B.6
for the event-type mix; rules in :mod:`clinlib.tasks.gates`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from clinlib.data.vocab import INDEX_DISEASES
from clinlib.tasks.base import TASKS
from clinlib.tasks.gates.common import (
    DETAIL_EXAMPLES,
    SEVERITY,
    TERTILES,
    THRESHOLDS,
    as_list,
    check_per_task,
)
from clinlib.tasks.gates.leaks import T9_CUES as T9_CUES  # re-exported: the gates' rules
from clinlib.tasks.gates.leaks import leak as leak
from clinlib.tasks.gates.leaks import question_stem as question_stem

MAX_PATIENT_SHARE = 0.10
MIN_N_FOR_PATIENT_SHARE = 20
# (task, anchor kind, low, high): share of questions whose anchor is of that kind (paper: T7
# split between medication and procedure; T9 1,147 lab vs 353 other = 76%, Appendix B.6).
EVENT_TYPE_TARGETS: tuple[tuple[str, str, float, float], ...] = (
    ("T7", "medication", 0.35, 0.65),
    ("T9", "lab", 0.60, 0.90),
)
# Binary tasks (gold yes / no) whose balance is a HARD part of L4 (on real
# MIMIC-IV all 174 T5 golds were "yes", so a constant "yes" scored 100%): from
# MIN_N_BINARY questions, the rarer gold must hold at least MIN_MINORITY_SHARE (half of T5's
# designed 40 / 495 = 8.1%, the most skewed binary design of the paper) and no one subtype
# more than MAX_SUBTYPE_SHARE (T5's largest designed subtype holds 31%, T3's 25%).
BINARY_TASKS: tuple[str, ...] = ("T3", "T5")
MIN_N_BINARY = 10
MIN_MINORITY_SHARE = 0.04
MAX_SUBTYPE_SHARE = 0.75

# --------------------------------------------------------------------------- L3


def gate_l3(questions: pd.DataFrame) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L3 leakage failures per task (see module docstring)."""
    return check_per_task(questions, leak)


# --------------------------------------------------------------------------- L4


def _anchor_kind(row: Mapping[str, Any]) -> str:
    anchors = as_list(row.get("anchor_event_ids")) or []
    prefix = str(anchors[0]).split("-")[0] if anchors else "LAB"  # anchorless T9 = a lab
    return {"LAB": "lab", "RX": "medication", "PX": "procedure", "DX": "diagnosis"}.get(
        prefix, "other"
    )


def binary_collapse(q: pd.DataFrame) -> list[str]:
    """The HARD L4 failures of a binary task's questions ``q``: its gold balance or its
    subtype coverage collapsed (see :data:`BINARY_TASKS`); [] when it holds."""
    n = len(q)
    if n < MIN_N_BINARY:
        return []
    out = []
    golds = q["gold"].astype(str).str.strip().str.lower().value_counts()
    minority = min(int(golds.get("yes", 0)), int(golds.get("no", 0)))
    if minority < MIN_MINORITY_SHARE * n:
        top = golds.idxmax()
        out.append(
            f"gold balance collapsed: {top!r} holds {int(golds.max())} of {n} "
            f"(the other answer {minority} < {MIN_MINORITY_SHARE:.0%}; a constant answer "
            "would score high)"
        )
    subs = q["subtype"].astype(str).value_counts()
    if subs.max() > MAX_SUBTYPE_SHARE * n:
        out.append(
            f"subtype coverage collapsed: {subs.idxmax()} holds {int(subs.max())} of {n} "
            f"(> {MAX_SUBTYPE_SHARE:.0%})"
        )
    return out


def gate_l4(questions: pd.DataFrame, tasks: Iterable[str]) -> list[dict]:
    """L4 distribution checks per task: one row each (soft; see module docstring)."""
    rows = []
    for task in tasks:
        q = questions[questions["task"] == task]
        n = len(q)
        checks: list[tuple[str, bool]] = []
        if n == 0:
            checks.append(("the task has no questions", False))
        else:
            expected_sub = tuple(TASKS[task].subtypes) if task in TASKS else ()
            strata = {
                "disease": (q["disease"].astype(str), INDEX_DISEASES),
                "tertile": (q["tertile"].astype(str), TERTILES),
                "subtype": (q["subtype"].astype(str), expected_sub),
            }
            for name, (col, expected) in strata.items():
                counts = col.value_counts()
                if expected and n >= len(expected):
                    for s in expected:
                        checks.append((f"{name} {s} empty", int(counts.get(s, 0)) > 0))
                if name == "disease" and n >= len(INDEX_DISEASES):
                    top = counts.max() / n
                    checks.append(
                        (
                            f"disease {counts.idxmax()} holds {top:.0%}",
                            top <= 2 / len(INDEX_DISEASES),
                        )
                    )
            if n >= MIN_N_FOR_PATIENT_SHARE:
                first = q["subject_ids"].map(lambda s: int((as_list(s) or [0])[0]))
                share = first.value_counts().max() / n
                checks.append(
                    (
                        f"patient {first.value_counts().idxmax()} holds {share:.0%}",
                        share <= MAX_PATIENT_SHARE,
                    )
                )
            for t, kind, lo, hi in EVENT_TYPE_TARGETS:
                if t == task:
                    share = float((q.apply(_anchor_kind, axis=1) == kind).mean())
                    checks.append(
                        (f"{kind} share {share:.0%} outside {lo:.0%}-{hi:.0%}", lo <= share <= hi)
                    )
        hard = binary_collapse(q) if task in BINARY_TASKS else []
        failed = hard + [msg for msg, ok in checks if not ok]
        rows.append(
            {
                "gate": "L4",
                "task": task,
                "n_checked": len(checks) + (2 if task in BINARY_TASKS and n >= MIN_N_BINARY else 0),
                "n_failed": len(failed),
                "threshold": THRESHOLDS["L4"],
                "passed": not failed,
                "severity": "hard" if hard else SEVERITY["L4"],
                "detail": "; ".join(failed[:DETAIL_EXAMPLES])
                + (
                    f" (+{len(failed) - DETAIL_EXAMPLES} more)"
                    if len(failed) > DETAIL_EXAMPLES
                    else ""
                ),
            }
        )
    return rows
