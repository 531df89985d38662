"""window-visits(m=...): a hand-built seven-visit dialogue; the window around the anchor's
visit, clipped at the ends, m=inf equal to full-context, one cached construction for every
m, labels that round-trip and never collide."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from clinlib.strategies import ConstructionCache, StrategyError, context_for, get_strategy
from clinlib.strategies.base import render
from clinlib.strategies.footprints import artifact_footprint
from clinlib.strategies.prep import count_text_tokens
from clinlib.strategies.registry import parse_label
from clinlib.strategies.window import target_visit, visit_index, window

SID = 9001
N_VISITS = 7


def _turns() -> pd.DataFrame:
    """Seven visits, two turns each; visit v's clinician turn states LAB-<v>."""
    rows = []
    for v in range(N_VISITS):
        day = f"2150-0{v + 1}-01"
        rows.append((v, 2 * v, "patient", f"Hello again, visit {v}.", []))
        rows.append((v, 2 * v + 1, "clinician", f"On {day}, your Sodium was 14{v} mEq/L.",
                     [f"LAB-{v}"]))  # fmt: skip
    df = pd.DataFrame(rows, columns=["visit_idx", "turn_idx", "speaker", "text", "event_ids"])
    df["text_tagged"] = [t + (f" [{ids[0]}]" if ids else "")
                         for t, ids in zip(df["text"], df["event_ids"], strict=True)]  # fmt: skip
    df["visit_date"] = [f"2150-0{v + 1}-01" for v in df["visit_idx"]]
    df.insert(0, "subject_id", SID)
    return df


def _q(anchor: str | None = None, meta: str = "{}") -> dict:
    return {"qid": "q", "task": "T1R", "question": "?", "subject_ids": [SID],
            "anchor_event_ids": [anchor] if anchor else [], "meta": meta}  # fmt: skip


def _shown(ctx: str) -> list[int]:
    """Visit numbers (1-based headers) in a rendered context."""
    return [int(line.split()[1]) for line in ctx.splitlines() if line.startswith("Visit ")]


@pytest.fixture(scope="module")
def turns() -> pd.DataFrame:
    return _turns()


def _ctx(turns: pd.DataFrame, label: str, q: dict) -> str:
    strat = get_strategy(label)
    art = strat.construct(SID, turns)
    return context_for(q, strat, {SID: art}, turns)


def test_m1_gives_exactly_the_target_and_one_visit_either_side(turns):
    ctx = _ctx(turns, "window-visits(m=1)", _q("LAB-3"))
    assert _shown(ctx) == [3, 4, 5]  # visit_idx 2, 3, 4 -> headers "Visit 3..5"
    assert ctx == render(turns, visits=[2, 3, 4])


def test_m2_and_m3_widen_symmetrically(turns):
    assert _shown(_ctx(turns, "window-visits(m=2)", _q("LAB-3"))) == [2, 3, 4, 5, 6]
    assert _shown(_ctx(turns, "window-visits(m=3)", _q("LAB-3"))) == [1, 2, 3, 4, 5, 6, 7]


def test_window_is_clipped_at_the_ends(turns):
    assert _shown(_ctx(turns, "window-visits(m=2)", _q("LAB-0"))) == [1, 2, 3]
    assert _shown(_ctx(turns, "window-visits(m=2)", _q("LAB-6"))) == [5, 6, 7]
    assert _shown(_ctx(turns, "window-visits(m=0)", _q("LAB-5"))) == [6]


def test_m_inf_is_the_full_dialogue(turns):
    ctx = _ctx(turns, "window-visits(m=inf)", _q("LAB-1"))
    full = get_strategy("full-context")
    assert ctx == full.access(full.construct(SID, turns), _q("LAB-1"), turns)


def test_target_falls_back_to_meta_then_to_the_last_visit(turns):
    index = visit_index(turns)
    assert index["LAB-4"] == 4 and len(index) == N_VISITS
    visits = list(range(N_VISITS))
    assert target_visit(index, _q("LAB-2"), visits) == 2
    assert target_visit(index, _q("LAB-999", '{"visit_idx": 1}'), visits) == 1
    assert target_visit(index, _q(None), visits) == 6


def test_window_of_a_gapped_record_counts_ranks_not_indices():
    # visits 0, 5, 9, 12: m=1 around 9 shows its neighbours by rank; an absent target snaps
    # to the nearest visit (the earlier on a tie)
    assert window([0, 5, 9, 12], 9, 1) == [5, 9, 12]
    assert window([0, 5, 9, 12], 7, 0) == [5]
    assert window([0, 5, 9, 12], 3, math.inf) == [0, 5, 9, 12]


def test_one_cached_construction_serves_every_m(turns, tmp_path):
    cache = ConstructionCache(tmp_path)
    m1, m3 = get_strategy("window-visits(m=1)"), get_strategy("window-visits(m=3)")
    key1 = ConstructionCache.key(m1, SID, "sha", None)
    assert key1 == ConstructionCache.key(m3, SID, "sha", None)
    first = cache.get_or_build(m1, SID, turns, None)
    assert cache.exists("window-visits", SID, first.key)
    again = cache.get_or_build(m3, SID, turns, None)
    assert again.to_dict() == first.to_dict()  # read back, not rebuilt


def test_labels_name_m_round_trip_and_reject_bad_values():
    labels = [get_strategy("window-visits", m=m).label() for m in (1, 2, 3, math.inf)]
    assert labels == ["window-visits(m=1)", "window-visits(m=2)", "window-visits(m=3)",
                      "window-visits(m=inf)"]  # fmt: skip
    assert get_strategy("window-visits").label() == "window-visits(m=2)"
    for label in labels:
        name, params = parse_label(label)
        assert get_strategy(name, **params).label() == label
    for bad in (-1, 1.5, True, "two"):
        with pytest.raises(StrategyError, match="m must be"):
            get_strategy("window-visits", m=bad)


def test_the_footprint_counts_every_visit_a_window_can_show(turns):
    # A window can be centred on any visit, so its store is the whole dialogue (full-context's);
    # last-visit-only holds one visit. (Measuring window-visits used to raise a TypeError.)
    rows = {
        label: artifact_footprint(
            get_strategy(label), get_strategy(label).construct(SID, turns), turns
        )  # fmt: skip
        for label in ("window-visits(m=1)", "full-context", "last-visit-only")
    }
    tokens = {
        label: count_text_tokens(render(turns, visits=vs))
        for label, vs in (("all", list(range(N_VISITS))), ("last", [N_VISITS - 1]))
    }
    assert rows["window-visits(m=1)"]["store_tokens"] == tokens["all"]
    assert rows["full-context"]["store_tokens"] == tokens["all"]
    assert rows["last-visit-only"]["store_tokens"] == tokens["last"] < tokens["all"]


def test_history_visits_shows_only_visits_before_the_target(turns):
    """history-visits (T11's memory): the m visits before the anchor's visit, never the
    anchor's visit or a later one (visit numbers are 1-based headers: LAB-3 is Visit 4)."""
    assert _shown(_ctx(turns, "history-visits(m=1)", _q("LAB-3"))) == [3]
    assert _shown(_ctx(turns, "history-visits(m=2)", _q("LAB-3"))) == [2, 3]
    assert _shown(_ctx(turns, "history-visits(m=inf)", _q("LAB-3"))) == [1, 2, 3]
    assert _shown(_ctx(turns, "history-visits(m=3)", _q("LAB-1"))) == [1]  # clipped
    assert _ctx(turns, "history-visits(m=2)", _q("LAB-0")) == ""  # no history
    assert _ctx(turns, "history-visits(m=0)", _q("LAB-5")) == ""
    ctx = _ctx(turns, "history-visits(m=inf)", _q("LAB-5"))
    assert "LAB-5" not in ctx and "LAB-6" not in ctx and "LAB-4" in ctx
    # without an anchor in the dialogue, meta.visit_idx names the current visit
    assert _shown(_ctx(turns, "history-visits(m=1)", _q("LAB-99", '{"visit_idx": 2}'))) == [2]
    strat = get_strategy("history-visits(m=2)")
    assert strat.label() == "history-visits(m=2)"
    assert parse_label(strat.label()) == ("history-visits", {"m": 2})
