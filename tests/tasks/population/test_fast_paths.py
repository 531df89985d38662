"""The population stages' fast paths give what the slow ones gave: the value split without the
lazy regex scan, one preparation rendered three ways, the checker's per-thread database, and
the structure gate's id scan without the parsed lines."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from clinlib.tasks.population import checker
from clinlib.tasks.population.render import (
    _VALUE_RX,
    RENDERINGS,
    parse_group,
    prepare_group,
    record_ids,
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


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_record_ids_are_what_parse_group_reads_back(rendering):
    text = render_group(_events(), [("7001", 2), ("7002", 1)], rendering).text
    assert record_ids(text) == list(parse_group(text)) == ["7001", "7002"]
    # a repeated record is one id in both; the structure gate compares them with the group
    twice = text + "\n\n=== Patient ID: 7001 ===\nTime: 2150-01-03\nSenna 1 TAB"
    assert record_ids(twice) == list(parse_group(twice)) == ["7001", "7002"]


@pytest.mark.parametrize(
    "bad",
    [
        "Sodium 140 mEq/L\n=== Patient ID: 1 ===",  # an event before any record
        "=== Patient ID: 1 ===\nSodium 140 mEq/L",  # an event before any day
        "#1: (drug//Senna) Senna\nstray line",  # not a codebook line, outside a record
    ],
)
def test_record_ids_refuse_what_parse_group_refuses(bad):
    with pytest.raises(ValueError, match="line outside a record") as slow:
        parse_group(bad)
    with pytest.raises(ValueError, match="line outside a record") as fast:
        record_ids(bad)
    assert str(fast.value) == str(slow.value)


def test_checker_reuses_an_answer_only_for_events_read_back_equal():
    stem = "Find the 3 patients who form that group."
    a, b = _clique(("1001", "1002", "1003")), _clique(("2001", "2002", "2003"))
    # the same events in a codebook rendering read back equal: answered as before, a copy
    book = "Codebook (integer IDs assigned to medical codes):\n#1: (drug//Senna) Senna"
    coded = book + "\n\n" + a.replace("Senna 1 TAB", "#1 1 TAB")
    plain = a.replace("Senna", "drug//Senna")
    assert checker.read_events(coded).equals(checker.read_events(plain))
    got = checker.check_many("P-CLQ", stem, [plain, coded, b])
    assert got == [["1001", "1002", "1003"]] * 2 + [["2001", "2002", "2003"]]
    assert got[0] is not got[1]
    assert got == [checker.check("P-CLQ", stem, t) for t in (plain, coded, b)]
