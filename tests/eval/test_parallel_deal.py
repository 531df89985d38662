"""How the parallel harness deals strategies to its processes (clinlib.eval.harness.parallel.deal):
by weight, so the query-dependent ones (a context per question) do not pile up in one process
as the old round-robin put three of the paper's four in one."""

from __future__ import annotations

from clinlib.eval.harness.parallel import deal

# the evaluated strategies in EVALUATION_STRATEGIES order; True = query-dependent
NAMES = ["blind", "last", "full", "dense", "timeline", "summary", "mem0", "amem", "table", "oracle"]
QD = [False, False, False, True, False, False, True, True, False, True]


def _weight(group: list[str]) -> float:
    return sum(2.0 if QD[NAMES.index(s)] else 1.0 for s in group)


def test_query_dependent_strategies_are_spread_and_weights_balance():
    groups = deal(NAMES, QD, 2)
    # worked by hand: dense->0, mem0->1, amem->0, oracle->1 (weights 4, 4), then the six
    # others alternate from group 0; each group keeps the given order
    assert groups == [
        ["blind", "full", "dense", "summary", "amem"],
        ["last", "timeline", "mem0", "table", "oracle"],
    ]
    assert [_weight(g) for g in groups] == [7.0, 7.0]
    # the round-robin it replaces: 3 of the 4 query-dependent strategies in one process
    round_robin = [NAMES[0::2], NAMES[1::2]]
    assert [_weight(g) for g in round_robin] == [6.0, 8.0]


def test_every_strategy_is_dealt_once_and_empty_groups_are_dropped():
    groups = deal(NAMES, QD, 3)
    assert sorted(s for g in groups for s in g) == sorted(NAMES)
    assert max(_weight(g) for g in groups) - min(_weight(g) for g in groups) <= 1.0
    assert deal(["a", "b"], [False, True], 4) == [["b"], ["a"]]
    assert deal(["a"], [False], 1) == [["a"]]
