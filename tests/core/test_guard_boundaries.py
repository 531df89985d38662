"""The stage drop guards at their edge (clinlib.core.guards): a stage may drop up to 20 % of
its input (a warning); one row more is a StageError unless --allow-drops; 0 kept never passes.
Worked out by hand: 8 of 40 = 20 % exactly, 9 of 40 = 22.5 %; 1 of 5 = 20 %, 2 of 5 = 40 %.
"""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from clinlib.core import guards
from clinlib.core.guards import StageError


@pytest.mark.parametrize(
    ("kept", "total", "fails"),
    [
        (32, 40, False),  # 8 dropped = 20 % exactly: allowed
        (31, 40, True),  # 9 dropped = 22.5 %
        (4, 5, False),  # 1 of 5 = 20 %
        (3, 5, True),
        (40, 40, False),
        (1, 1, False),
    ],
)
def test_check_kept_at_twenty_percent(kept, total, fails, caplog):
    assert guards.MAX_DROP_SHARE == 0.20
    if fails:
        with pytest.raises(StageError, match=rf"{total - kept} of {total} rows dropped"):
            guards.check_kept("stage", "rows", kept, total)
        guards.check_kept("stage", "rows", kept, total, allow_drops=True)  # accepted on request
    else:
        with caplog.at_level(logging.WARNING, logger="clinlib.core.guards"):
            guards.check_kept("stage", "rows", kept, total)
        warned = [r for r in caplog.records if "dropped" in r.getMessage()]
        assert len(warned) == (1 if kept < total else 0)


def test_check_kept_zero_kept_fails_even_when_drops_are_allowed():
    with pytest.raises(StageError, match="stage: 0 of 1 rows kept"):
        guards.check_kept("stage", "rows", 0, 1, allow_drops=True)


def test_check_kept_messages_without_reasons(caplog):
    with caplog.at_level(logging.WARNING, logger="clinlib.core.guards"):
        guards.check_kept("dialogues", "patients", 32, 40)
    assert [r.getMessage() for r in caplog.records] == ["dialogues: 8 of 40 patients dropped"]
    with pytest.raises(StageError) as info:
        guards.check_kept("dialogues", "patients", 31, 40)
    assert str(info.value) == (
        "dialogues: 9 of 40 patients dropped (22% > 20% allowed); "
        "fix the input, or pass --allow-drops to accept"
    )


def test_reasons_are_grouped_by_their_first_field_and_sorted_by_count_then_name(caplog):
    reasons = guards.group_reasons(["c: 1", "b: x: y", "a: 1", "c: 2", "b: z"])
    assert reasons == {"a": 1, "b": 2, "c": 2}  # "b: x: y" is cause "b", not "b: x"
    assert list(reasons) == ["c", "b", "a"]  # first seen first: the tie below is by name
    assert guards.reasons_text(reasons) == "'b' x2, 'c' x2, 'a' x1"
    with caplog.at_level(logging.WARNING, logger="clinlib.core.guards"):
        guards.check_kept("cohort", "events", 5, 6, {"b": 1})
    assert caplog.records[-1].getMessage() == "cohort: 1 of 6 events dropped: 'b' x1"


def test_check_constructions_refuses_an_empty_build():
    with pytest.raises(StageError, match="^strategies: no strategy was built$"):
        guards.check_constructions(pd.DataFrame(columns=["label", "setting", "n_dialogues"]))
    summary = pd.DataFrame({"label": ["full-context", "mem0", "rag"],
                            "setting": ["post", "pre", "post"], "n_dialogues": [3, 0, 0]})  # fmt: skip
    with pytest.raises(StageError) as info:
        guards.check_constructions(summary)
    assert str(info.value) == "strategies: 0 dialogues to build mem0, rag from (setting post, pre)"
    guards.check_constructions(summary.assign(n_dialogues=[3, 1, 2]))  # nothing empty
