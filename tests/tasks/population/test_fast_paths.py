"""The population stages' fast paths give what the slow ones gave: the value split without the
lazy regex scan, one preparation rendered three ways, and the checker's per-thread database."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from clinlib.tasks.population import checker
from clinlib.tasks.population.render import (
    _VALUE_RX,
    RENDERINGS,
    prepare_group,
    render_group,
    split_line,
)


def _by_regex(line: str):
    try:
        v = _VALUE_RX.match(line)
        value = v.group("value")
        concept = v.group("concept")
    except AttributeError:
        return "no match"
    if not concept:
        return line, None
    return concept, float(value) if value is not None else None


def _fast(line: str):
    try:
        return split_line(line)
    except AttributeError:
        return "no match"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("Sodium Chloride 0.9% Flush 10 mL", ("Sodium Chloride 0.9% Flush", 10.0)),
        ("Lipase 30", ("Lipase", 30.0)),
        ("Glucose 5 6", ("Glucose", 5.0)),  # a value and a unit "6": the earlier start wins
        ("A -1.5 x y", ("A -1.5 x y", None)),  # the number is not one of the last two words
        ("Admission (EW EMER.)", ("Admission (EW EMER.)", None)),
        ("12", ("12", None)),  # a description that is only a number
        (" 5 mg", (" 5 mg", None)),  # empty concept: the whole line
        ("Hb 5. g", ("Hb 5. g", None)),  # "5." is no number
    ],
)
def test_split_line_by_hand(line, want):
    assert split_line(line) == want
    assert _by_regex(line) == want  # the pattern it replaces reads the same


def test_split_line_equals_the_pattern_on_random_lines():
    rng = random.Random(7)
    alphabet = [" ", "1", "2", "-", ".", "a", "mg", "\t", "\xa0", "5.", ".5", "\u0663", "\n"]
    for _ in range(20_000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert _fast(line) == _by_regex(line), repr(line)


def _events() -> pd.DataFrame:
    rows = [
        (1, "2150-01-02", "lab", "itemid", "50983", "Sodium", 140.0, "mEq/L"),
        (1, "2150-01-01", "diagnosis", "ICD10-CM", "E119", "Type 2 diabetes", None, None),
        (2, "2150-01-01", "medication", "drug", "Senna", "Senna", 1.0, "TAB"),
        (2, "2150-01-01", "diagnosis", "ICD10-CM", "E119", "Type 2 diabetes", None, None),
    ]
    df = pd.DataFrame(
        rows,
        columns=["subject_id", "time", "kind", "code_system", "code", "label", "value", "unit"],
    )
    return df.assign(time=pd.to_datetime(df["time"]), event_id=[f"E{i}" for i in range(4)])


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_one_preparation_renders_as_the_frame_does(rendering):
    order = [("7001", 2), ("7002", 1)]
    ev = _events()
    assert render_group(prepare_group(ev, order), order, rendering) == render_group(
        ev, order, rendering
    )


def _clique(pids: tuple[str, str, str]) -> str:
    path = ["Time: 2100-01-02", "Senna 1 TAB", "Time: 2100-01-05", "Heparin 5000 UNIT"]
    path += ["Time: 2100-02-01", "Lipase 30 IU/L"]
    other = ["Time: 2100-01-01", "Sodium 140 mEq/L"]
    recs = [[f"=== Patient ID: {p} ===", *path] for p in pids]
    recs += [[f"=== Patient ID: {p} ===", *other] for p in ("1901", "1902")]
    return "\n\n".join("\n".join(r) for r in recs)


def test_checker_threads_and_calls_keep_their_own_frames():
    stem = "Find the 3 patients who form that group."
    groups = [("1001", "1002", "1003"), ("2001", "2002", "2003"), ("3001", "3002", "3003")] * 4
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda g: checker.check("P-CLQ", stem, _clique(g)), groups))
    assert got == [list(g) for g in groups]  # a frame left from another call would mix them
