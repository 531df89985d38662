"""The shared-prefix measure (clinlib.eval.interop.prefix_share): block hits worked out by hand and
against a brute-force longest-common-prefix count; the kit's record-first order shares the
record, the question-first order only the system prompt."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clinlib.eval.harness.prompts import SYSTEM_PROMPT, build_messages
from clinlib.eval.interop.prefix_share import (
    block_hits,
    profile_prefix_share,
    prompt_ids,
    question_first,
    share_row,
)


def brute(prompts, block):
    """Tokens reused per prompt: the longest prefix shared with any earlier prompt, in whole
    blocks (an independent count: no hashing)."""
    out = []
    for i, p in enumerate(prompts):
        best = 0
        for q in prompts[:i]:
            n = 0
            while n < min(len(p), len(q)) and p[n] == q[n]:
                n += 1
            best = max(best, n // block * block)
        out.append(best)
    return out


def test_block_hits_by_hand():
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 9], [1, 2, 7, 7], [9, 9], [1, 2, 3]]
    # p2 reuses [1,2][3,4]; p3 [1,2]; p4 nothing; p5 [1,2] (its 3 is a partial block)
    assert block_hits(prompts, block=2) == [0, 4, 2, 0, 2]
    assert share_row(prompts, block=2) == {"prompts": 5, "prompt_tokens": 19, "shared_tokens": 8,
                                           "share": 8 / 19}  # fmt: skip
    with pytest.raises(ValueError, match="block must be >= 1"):
        block_hits(prompts, block=0)


@pytest.mark.parametrize("block", [1, 3, 16])
def test_block_hits_equal_the_brute_force_count(block):
    rng = np.random.default_rng(block)
    stems = [rng.integers(0, 5, size=int(rng.integers(0, 60))).tolist() for _ in range(4)]
    prompts = [stems[int(rng.integers(0, 4))] + rng.integers(0, 5, size=int(rng.integers(0, 40))).tolist()
               for _ in range(40)]  # fmt: skip
    assert block_hits(prompts, block) == brute(prompts, block)


def test_record_first_shares_the_record_question_first_only_the_system_prompt(quick_in_tmp_build):
    qs = pd.read_parquet(quick_in_tmp_build / "quick" / "questions.parquet")
    sid = int(qs["subject_ids"].iloc[0][0])
    mine = qs[qs["subject_ids"].map(lambda s: list(s) == [sid]) & ~qs["task"].isin(["T3", "T5"])]
    assert len(mine) >= 2
    table = profile_prefix_share("quick", ["full-context"], questions=mine).set_index("order")
    from clinlib.strategies import question_contexts

    ctx = question_contexts(mine, "full-context", "quick")["context"].tolist()
    rows = mine.to_dict("records")
    first = [prompt_ids(build_messages(q, c)) for q, c in zip(rows, ctx, strict=True)]
    other = [prompt_ids(question_first(q, c)) for q, c in zip(rows, ctx, strict=True)]
    assert table.loc["record-first", "shared_tokens"] == sum(brute(first, 16))
    assert table.loc["question-first", "shared_tokens"] == sum(brute(other, 16))
    # record-first: every later prompt reuses at least the whole record; question-first: the
    # system prompt's whole blocks (and whatever question wording happens to repeat)
    record = len(prompt_ids([{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": "PATIENT RECORD\n" + ctx[0]}]))  # fmt: skip
    assert table.loc["record-first", "shared_tokens"] >= (len(rows) - 1) * (record - 16)
    system = len(prompt_ids([{"role": "system", "content": SYSTEM_PROMPT}])) // 16 * 16
    assert table.loc["question-first", "shared_tokens"] >= (len(rows) - 1) * system
    assert table.loc["record-first", "share"] > 0.5 > table.loc["question-first", "share"]
