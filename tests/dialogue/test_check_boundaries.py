"""The dialogue verifier's thresholds at the value just inside and just outside, worked out by
hand: must-cover coverage at exactly 98 %, the repeated-sentence check at exactly 3 copies and
exactly 10 %, visit start times (strictly ascending: two visits starting at the same instant
fail), the length fences (inclusive), and which key labs may be missed (a normal result on a
middle lab day, inside its range with the bounds themselves counted as inside).
"""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.dialogue.checks import (
    MIN_COVERAGE,
    REPEAT_MAX_SHARE,
    REPEAT_MIN_COUNT,
    REPEAT_MIN_WORDS,
    check_coverage,
    check_time_order,
    length_bounds_from,
    length_row,
    soft_checks,
)
from clinlib.dialogue.fields import key_lab_missable, lab_day_bounds

# --------------------------------------------------------------------------- coverage


def _coverage_case(n_covered: int, n_unusable: int):
    """Procedures (must-cover, not missable) of one visit: n_covered covered, n_unusable
    unusable; no diagnosis, so only the ratio can fail."""
    events, status = {}, {}
    for i in range(n_covered + n_unusable):
        eid = f"PX-1-{i}"
        events[eid] = {"event_id": eid, "kind": "procedure", "visit_idx": 0,
                       "time": pd.Timestamp("2150-01-01")}  # fmt: skip
        st = "covered" if i < n_covered else "unusable"
        status[eid] = {
            "event_id": eid,
            "status": st,
            "reason": "no title" if st != "covered" else "",
        }
    return events, status


@pytest.mark.parametrize(
    ("n_covered", "n_unusable", "passed"),
    [
        (49, 1, True),  # 49 / 50 = 98 % exactly
        (48, 1, False),  # 48 / 49 = 97.96 %
        (98, 2, True),  # 98 / 100
        (97, 2, False),  # 97 / 99 = 97.98 %
        (50, 0, True),
        (0, 0, True),  # nothing must be covered: ratio 1
    ],
)
def test_must_cover_coverage_at_98_percent(n_covered, n_unusable, passed):
    assert MIN_COVERAGE == 0.98
    events, status = _coverage_case(n_covered, n_unusable)
    bad, ok = check_coverage(events, status, [])
    assert (not bad) is passed
    must = n_covered + n_unusable
    assert ok == f"{n_covered}/{must} must-cover events covered"
    if not passed:
        assert len(bad) == 1 and f"{n_covered}/{must}" in bad[0]


def test_missed_events_do_not_count_in_the_coverage_denominator():
    # 49 covered + 1 unusable + 5 missed medications: 49 / 50 still passes
    events, status = _coverage_case(49, 1)
    missed = []
    for i in range(5):
        eid = f"RX-{i}"
        events[eid] = {"event_id": eid, "kind": "medication", "visit_idx": 0}
        status[eid] = {"event_id": eid, "status": "missed", "reason": "rule"}
        missed.append(eid)
    bad, ok = check_coverage(events, status, missed)
    assert bad == [] and ok == "49/50 must-cover events covered"


# --------------------------------------------------------------------------- repeated sentences

SENTENCE = "The patient reports feeling much better today."  # 7 words
assert len(SENTENCE.split()) >= REPEAT_MIN_WORDS


def _turns(n_repeat: int, n_other: int, sentence: str = SENTENCE) -> list[dict]:
    texts = [sentence] * n_repeat + [
        f"Distinct sentence number {w} of this dialogue here." for w in _words(n_other)
    ]
    return [
        {"turn_idx": i, "visit_idx": 0, "speaker": ("patient", "clinician")[i % 2],
         "text": t, "text_tagged": t}
        for i, t in enumerate(texts)
    ]  # fmt: skip


def _words(n: int) -> list[str]:
    # no digits (a digit-free text, like the templates' own): "a", "b", ..., "aa", ...
    out, k = [], 0
    while len(out) < n:
        k += 1
        s, m = "", k
        while m:
            m, r = divmod(m - 1, 26)
            s = chr(97 + r) + s
        out.append(s)
    return out


def _repeated(turns: list[dict]) -> dict:
    rows = {r["check"]: r for r in soft_checks(1, turns)}
    return rows["repeated_sentences"]


@pytest.mark.parametrize(
    ("n_repeat", "n_other", "passed"),
    [
        (3, 26, False),  # 3 copies, 3 / 29 = 10.3 % > 10 %
        (3, 27, True),  # 3 / 30 = 10 % exactly: not above it
        (2, 0, True),  # 2 copies are never flagged, whatever the share (100 %)
        (2, 1, True),
        (3, 0, False),  # 3 copies, 100 %
        (4, 36, True),  # 4 / 40 = 10 % exactly
        (4, 35, False),  # 4 / 39 = 10.3 %
    ],
)
def test_repeated_sentences_at_three_copies_and_ten_percent(n_repeat, n_other, passed):
    assert (REPEAT_MIN_COUNT, REPEAT_MAX_SHARE) == (3, 0.10)
    row = _repeated(_turns(n_repeat, n_other))
    assert row["passed"] is passed
    assert row["severity"] == "soft"
    total = n_repeat + n_other
    assert row["detail"].startswith(f"most repeated: {n_repeat}x of {total} (")


def test_short_sentences_are_not_counted():
    short = "I feel fine now ok."  # 5 words -> counted; 4 words -> not
    assert len(short.split()) == REPEAT_MIN_WORDS
    assert _repeated(_turns(3, 0, short))["passed"] is False
    four = "I feel fine now."
    assert len(four.split()) == REPEAT_MIN_WORDS - 1
    assert _repeated(_turns(3, 0, four))["passed"] is True


# --------------------------------------------------------------------------- time order


def _visit_events(*starts: str) -> list[dict]:
    return [
        {"event_id": f"ADM-{v}", "visit_idx": v, "kind": "admission", "time": pd.Timestamp(t)}
        for v, t in enumerate(starts)
    ]


def _one_turn_per_visit(n: int) -> list[dict]:
    return [{"turn_idx": i, "visit_idx": i} for i in range(n)]


@pytest.mark.parametrize(
    ("starts", "n_bad"),
    [
        (("2150-01-01 08:00", "2150-01-01 08:00:01"), 0),  # one second later: ascends
        (("2150-01-01 08:00", "2150-01-01 08:00"), 1),  # the same start: not in time order
        (("2150-01-02", "2150-01-01"), 1),
        (("2150-01-01", "2150-02-01", "2150-02-01"), 1),
    ],
)
def test_visits_must_start_strictly_later(starts, n_bad):
    events = _visit_events(*starts)
    by_id = {e["event_id"]: e for e in events}
    bad = check_time_order(_one_turn_per_visit(len(starts)), events, by_id, {})
    assert len(bad) == n_bad
    if n_bad:
        assert "does not follow visit" in bad[0]


def test_visit_start_is_the_admission_even_when_a_lab_comes_first():
    # visit 1's lab drawn before visit 1's admission (the 1-day outpatient window) and after
    # visit 0's admission: the admission, not the lab, is the start
    events = _visit_events("2150-01-01 08:00", "2150-01-05 08:00") + [
        {"event_id": "LAB-1", "visit_idx": 1, "kind": "lab",
         "time": pd.Timestamp("2150-01-04 09:00")},
    ]  # fmt: skip
    by_id = {e["event_id"]: e for e in events}
    turns = [{"turn_idx": 0, "visit_idx": 0, "visit_date": "2150-01-01"},
             {"turn_idx": 1, "visit_idx": 1, "visit_date": "2150-01-05"}]  # fmt: skip
    assert check_time_order(turns, events, by_id, {}) == []
    turns[1]["visit_date"] = "2150-01-04"
    assert check_time_order(turns, events, by_id, {}) == [
        "turn 1: visit_date 2150-01-04 != visit start"
    ]


# --------------------------------------------------------------------------- length fences


@pytest.mark.parametrize(
    ("chars", "passed"),
    [(150, True), (149, False), (20_000, True), (20_001, False)],
)
def test_length_fences_are_inclusive(chars, passed):
    turns = [{"turn_idx": 0, "visit_idx": 0, "text": "x" * chars}]
    assert length_row(1, turns, (150.0, 20_000.0))["passed"] is passed


def test_length_bounds_need_twenty_dialogues():
    assert length_bounds_from([1000.0] * 19) == (150.0, 20_000.0)  # the default
    lo, hi = length_bounds_from([100.0] * 10 + [1000.0] * 10)  # log10: q1 2.0..., q3 3.0
    # np.percentile (linear): q1 = 2, q3 = 3 -> iqr 1, fences 10^(2-3), 10^(3+3)
    assert (lo, hi) == pytest.approx((0.1, 1_000_000.0))


# --------------------------------------------------------------------------- missable key labs


def _lab(day: str, value=1.0, flag=None, lo=0.5, hi=1.2) -> dict:
    return {"kind": "lab", "visit_idx": 0, "time": pd.Timestamp(day), "value": value,
            "flag": flag, "ref_low": lo, "ref_high": hi}  # fmt: skip


@pytest.mark.parametrize(
    ("lab", "missable"),
    [
        (_lab("2150-01-02"), True),  # normal, middle day
        (_lab("2150-01-01"), False),  # the visit's first lab day
        (_lab("2150-01-03"), False),  # its last lab day
        (_lab("2150-01-02", value=1.2), True),  # at the upper bound: inside
        (_lab("2150-01-02", value=1.21), False),
        (_lab("2150-01-02", value=0.5), True),  # at the lower bound: inside
        (_lab("2150-01-02", value=0.49), False),
        (_lab("2150-01-02", flag="abnormal"), False),
    ],
)
def test_key_lab_missable(lab, missable):
    bounds = lab_day_bounds([_lab("2150-01-01"), _lab("2150-01-03")])
    assert bounds == {0: ("2150-01-01", "2150-01-03")}
    assert key_lab_missable(lab, bounds) is missable
