"""What every validation gate shares: names, thresholds, severities, the report columns and
the per-task failure bookkeeping (paper Appendix A; Fig. 2 stage 4).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

GATE_NAMES: dict[str, str] = {
    "L0": "schema",
    "L1": "anchor source",
    "L2": "gold recompute",
    "L3": "no gold leakage",
    "L4": "distribution coverage",
}
# Failure-rate thresholds: 0 means "no failure allowed"; otherwise pass iff rate < threshold.
THRESHOLDS: dict[str, float] = {"L0": 0.0, "L1": 0.01, "L2": 0.005, "L3": 0.0, "L4": 0.0}
SEVERITY: dict[str, str] = {"L0": "hard", "L1": "hard", "L2": "hard", "L3": "hard", "L4": "soft"}
GATE_COLUMNS: dict[str, str] = {
    "gate": "string",
    "task": "string",
    "n_checked": "int64",
    "n_failed": "int64",
    "threshold": "float64",
    "passed": "bool",
    "severity": "string",
    "detail": "string",
}
TERTILES = ("low", "medium", "high")
DETAIL_EXAMPLES = 3


class GateError(ValueError):
    """A hard validation gate failed; the message names gate, task, count and examples."""


class GateInputError(ValueError):
    """An input of the gates (events, coverage) lacks a column the gates read."""


INPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("event_id", "subject_id", "kind", "code", "time"),
    "event_coverage": ("event_id", "subject_id", "status"),
}


def require_columns(df: pd.DataFrame, name: str) -> None:
    missing = [c for c in INPUT_COLUMNS[name] if c not in df.columns]
    if missing:
        raise GateInputError(f"{name}: missing column(s) {', '.join(missing)}")


# --------------------------------------------------------------------------- helpers


def as_list(x: Any) -> list | None:
    if isinstance(x, list | tuple):
        return list(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return None


def is_str(x: Any) -> bool:
    return isinstance(x, str)


def int_like(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int | np.integer):
        return True
    return isinstance(x, str) and x.strip().isdigit()


def meta_of(row: Mapping[str, Any]) -> dict:
    try:
        data = json.loads(str(row.get("meta")))
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _passed(gate: str, n_checked: int, n_failed: int) -> bool:
    t = THRESHOLDS[gate]
    if t == 0:
        return n_failed == 0
    return n_checked == 0 or n_failed / n_checked < t


def _detail(failures: list[tuple[str, str]], extra: str = "") -> str:
    shown = "; ".join(f"{q}: {why}" for q, why in failures[:DETAIL_EXAMPLES])
    more = f" (+{len(failures) - DETAIL_EXAMPLES} more)" if len(failures) > DETAIL_EXAMPLES else ""
    return (extra + (" | " if extra and shown else "") + shown + more).strip()


def gate_rows(
    gate: str, by_task: Mapping[str, tuple[int, list[tuple[str, str]]]], tasks: Iterable[str]
) -> list[dict]:
    out = []
    for task in tasks:
        n, fails = by_task.get(task, (0, []))
        out.append(
            {
                "gate": gate,
                "task": task,
                "n_checked": int(n),
                "n_failed": len(fails),
                "threshold": THRESHOLDS[gate],
                "passed": _passed(gate, n, len(fails)),
                "severity": SEVERITY[gate],
                "detail": _detail(fails),
            }
        )
    return out


def check_per_task(questions: pd.DataFrame, check) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """Run ``check(row) -> reason | None`` on every row, grouped by task."""
    out: dict[str, tuple[int, list[tuple[str, str]]]] = {}
    for row in questions.to_dict("records"):
        task = str(row.get("task"))
        try:
            why = check(row)
        except Exception as exc:  # a malformed row must become a recorded failure
            why = f"{type(exc).__name__}: {exc}"
        n, fails = out.get(task, (0, []))
        if why:
            fails = fails + [(str(row.get("qid")), why)]
        out[task] = (n + 1, fails)
    return out
