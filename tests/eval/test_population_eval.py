"""Population answering: strict / lenient parsing, the offline readers on a hand-made group,
and the pre-run price of a 256K-token set."""

from __future__ import annotations

import math

import pytest

from clinlib.eval.population.answer import (
    _score,
    messages_for,
    parse_lenient,
    parse_strict,
    price_population,
)
from clinlib.eval.population.readers import overlap_answer
from clinlib.llm import get_backbone
from clinlib.tasks.population.questions import split_prompt, task_of
from clinlib.tasks.population.render import parse_group, render_group
from clinlib.tasks.population.spec import load_specs
from tests.tasks.population.test_population import ORDER, _group


def test_parse_strict_and_lenient():
    assert parse_strict("P-CLQ", '["12", "34"]') == ["12", "34"]
    assert parse_strict("P-CLQ", 'Answer: ["12", "34"]') is None
    assert parse_lenient("P-CLQ", 'Answer: ["12", "34"]') == ["12", "34"]
    assert parse_lenient("P-TST", "I think the answer is True.") is True
    assert parse_strict("P-TST", "true") is True and parse_strict("P-TST", "1") is None
    assert parse_lenient("P-IPW", "ATE = -7.25 mmHg") == -7.25
    assert parse_lenient("P-ICC", 'x {"1": true} y') == {"1": True}
    assert parse_lenient("P-CLU", "no idea") is None
    assert _score("P-CLQ", None, ["1"]) == 0.0 and math.isnan(_score("P-IPW", None, 1.0))


def test_prompt_splits_back_and_task_is_recognised():
    specs = load_specs()
    clu = next(s for s in specs if s.task == "P-CLU")
    question = clu.question.format(n=4, k=3)
    context = render_group(_group(), ORDER, "codebook").text
    user = messages_for(question, context)[1]["content"]
    assert split_prompt(user) == (context, question)
    assert task_of(question, specs) == "P-CLU"
    assert task_of("What is the sodium?", specs) is None


def test_overlap_baseline_on_hand_group():
    recs = parse_group(render_group(_group(), ORDER, "codes").text)
    # patients 4711, 5555 and 9000 share the two planted drugs (plus sodium and admissions)
    assert overlap_answer("P-CLQ", "Find the k=3 patients", recs) == ["4711", "5555", "9000"]
    # record length ranks: 9000 (4 admissions) is longest
    assert overlap_answer("P-TOP", "to the 2 patients with", recs)[0] == "9000"
    clusters = overlap_answer("P-CLU", "into 2 groups", recs)
    assert sorted(len(c) for c in clusters) == [1, 3] and ["1234"] in clusters


def test_estimate_256k_set_for_a_paper_backbone():
    bb = get_backbone("gpt-4o-mini")
    t = price_population(["gpt-4o-mini"], n_questions=10, tokens_per_question=256_000)
    row = t.iloc[0]
    assert row["input_tokens"] == 2_560_000
    assert row["usd_upper"] == pytest.approx(round(10 * bb.cost(256_000, 2048), 2))
    assert row["batch_usd_upper"] == pytest.approx(round(10 * bb.batch_cost(256_000, 2048), 2))
    assert row["fits_context"] == (
        bb.context_window is not None and 256_000 + 2048 <= bb.context_window
    )


def test_win_rates_by_hand():
    import pandas as pd

    from clinlib.analysis.population import win_rates

    preds = pd.DataFrame(
        [  # q1 (short): A beats B, ties C; q2 (long, IPW: lower error wins): B beats A and C
            ("q1", "codes", "P-CLQ", "A", 1.0), ("q1", "codes", "P-CLQ", "B", 0.0), ("q1", "codes", "P-CLQ", "C", 1.0),
            ("q2", "codes", "P-IPW", "A", 3.0), ("q2", "codes", "P-IPW", "B", 0.5), ("q2", "codes", "P-IPW", "C", float("nan")),
        ],
        columns=["qid", "rendering", "task", "backbone", "score"],
    )  # fmt: skip
    lengths = pd.Series({"q1": 1000, "q2": 9000})
    w = win_rates(preds, lengths, [1000, 10_000]).set_index(["backbone", "max_tokens"])["win_rate"]
    assert w["A", 1000] == pytest.approx((1 + 0.5) / 2)  # beats B, ties C
    assert w["B", 1000] == 0.0
    # q2: A (3.0) beats C (unscored), loses to B -> A total (1 + 0.5 + 0 + 1) / 4
    assert w["A", 10_000] == pytest.approx(2.5 / 4)
    assert w["B", 10_000] == pytest.approx((0 + 0 + 1 + 1) / 4)
