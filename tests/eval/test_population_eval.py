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
    # score: an unparsed answer at the worst share (0) or unscored (NaN) error; the mean over
    # all answers counts it at failed_score (tests/analysis/test_population_scores.py)
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
