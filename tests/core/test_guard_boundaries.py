"""The stage drop guards at their edge (clinlib.core.guards): a stage may drop up to 20 % of
its input (a warning); one row more is a StageError unless --allow-drops; 0 kept never passes.
Worked out by hand: 8 of 40 = 20 % exactly, 9 of 40 = 22.5 %; 1 of 5 = 20 %, 2 of 5 = 40 %.
"""

from __future__ import annotations

import logging

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
