"""PopMedQA's scoreboards (Figs 3, 5, 6), the chain-of-thought answer, the generation defaults and
the full code descriptions, each checked against values worked out by hand and shown failing on
a counterexample (a mutated rule gives a different number)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clinlib.analysis.population_scores import (
    ablation_effects,
    beats,
    family_means,
    format_means,
    win_rates,
)
from clinlib.eval.population.answer import (
    failed_score,
    final_answer,
    generation_params,
    parse_strict,
)
from clinlib.llm import get_backbone
from clinlib.llm.types import Backbone
from clinlib.tasks.population.describe import full_description
from clinlib.tasks.population.tasks import MAX_TOKENS

COLS = ["qid", "task", "backbone", "rendering", "prompt", "score", "parse_failed"]


def _preds(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLS)
    gold = {"q3": 4.0, "q4": -2.0}
    df["score_all"] = [
        failed_score(t, gold.get(q)) if f else s
        for q, t, s, f in zip(df["qid"], df["task"], df["score"], df["parse_failed"], strict=True)
    ]
    return df


FIG6 = _preds(
    [
        ("q1", "P-CLQ", "A", "descriptions", "direct", 1.0, False),
        ("q2", "P-CLQ", "A", "descriptions", "direct", 0.5, False),
        ("q5", "P-CLQ", "A", "descriptions", "direct", 0.0, True),  # unparsed
        ("q3", "P-IPW", "A", "descriptions", "direct", 1.0, False),  # error 1
        ("q4", "P-IPW", "A", "descriptions", "direct", np.nan, True),  # unparsed, gold -2
    ]
)


def _dropping_unparsed(preds: pd.DataFrame) -> pd.DataFrame:
    """The counterexample: the mean over all answers with unparsed ones dropped."""
    return (
        preds[~preds["parse_failed"]]
        .groupby("task")["score"]
        .mean()
        .rename("mean_all")
        .reset_index()
    )


def test_fig6_two_means_count_unparsed_answers():
    m = format_means(FIG6).set_index("task")
    # P-CLQ: all = (1 + 0.5 + 0) / 3, formatted = (1 + 0.5) / 2
    assert m.loc["P-CLQ", "mean_all"] == pytest.approx(0.5)
    assert m.loc["P-CLQ", "mean_formatted"] == pytest.approx(0.75)
    assert m.loc["P-CLQ", "parse_failed"] == pytest.approx(1 / 3)
    # P-IPW: the unparsed answer counts at the null answer's error |-2| = 2: (1 + 2) / 2
    assert m.loc["P-IPW", "mean_all"] == pytest.approx(1.5)
    assert m.loc["P-IPW", "mean_formatted"] == pytest.approx(1.0)
    wrong = _dropping_unparsed(FIG6).set_index("task")["mean_all"]
    assert wrong["P-CLQ"] != pytest.approx(m.loc["P-CLQ", "mean_all"])  # the old rule fails
    assert wrong["P-IPW"] != pytest.approx(m.loc["P-IPW", "mean_all"])


def test_failed_score_rule():
    assert failed_score("P-CLQ") == 0.0 and failed_score("P-SRT") == 0.0
    assert failed_score("P-IPW", -3.5) == 3.5


def test_beats_unparsed_loses_and_lower_error_wins():
    assert beats("P-CLQ", 0.0, True, 1.0, False) == 1.0  # a parsed 0 beats an unparsed answer
    assert beats("P-CLQ", 1.0, False, 0.0, False) == 0.5  # two unparsed answers tie
    assert beats("P-IPW", 0.5, True, 3.0, True) == 1.0  # smaller absolute error wins
    assert beats("P-CLQ", 0.5, True, 0.5, True) == 0.5


def test_fig3_win_rates_by_hand():
    preds = _preds(
        [  # q1 (short): A beats B, ties C; q2 (long, IPW): B beats A, C unparsed loses to both
            ("q1", "P-CLQ", "A", "codes", "direct", 1.0, False),
            ("q1", "P-CLQ", "B", "codes", "direct", 0.0, False),
            ("q1", "P-CLQ", "C", "codes", "direct", 1.0, False),
            ("q3", "P-IPW", "A", "codes", "direct", 3.0, False),
            ("q3", "P-IPW", "B", "codes", "direct", 0.5, False),
            ("q3", "P-IPW", "C", "codes", "direct", np.nan, True),
        ]
    )
    lengths = pd.Series({"q1": 1000, "q3": 9000})
    w = win_rates(preds, lengths, [1000, 10_000]).set_index(["backbone", "max_tokens"])
    assert w.loc[("A", 1000), "win_rate"] == pytest.approx((1 + 0.5) / 2)
    assert w.loc[("B", 1000), "win_rate"] == 0.0
    assert w.loc[("A", 10_000), "win_rate"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert w.loc[("C", 10_000), "win_rate"] == pytest.approx((0.5 + 1 + 0 + 0) / 4)
    assert w.loc[("A", 10_000), "comparisons"] == 4
    # counterexample: scoring C's unparsed IPW answer at its counted error (|4| = 4 > 3) would
    # still make it lose, but scoring it at NaN-as-0 error would make it win against A and B
    naive = preds.assign(parse_failed=False, score=preds["score"].fillna(0.0))
    wn = win_rates(naive, lengths, [10_000]).set_index("backbone")["win_rate"]
    assert wn["C"] != pytest.approx(w.loc[("C", 10_000), "win_rate"])


ABL = _preds(
    [  # backbone X: baseline descriptions/direct vs ablation codes/direct on q1, q2, q5, q6
        ("q1", "P-CLQ", "X", "descriptions", "direct", 1.0, False),
        ("q1", "P-CLQ", "X", "codes", "direct", 0.0, False),  # baseline wins
        ("q2", "P-CLQ", "X", "descriptions", "direct", 0.0, False),
        ("q2", "P-CLQ", "X", "codes", "direct", 1.0, False),  # ablation wins
        ("q5", "P-CLQ", "X", "descriptions", "direct", 0.5, False),
        ("q5", "P-CLQ", "X", "codes", "direct", 0.5, False),  # tie
        ("q6", "P-CLQ", "X", "descriptions", "direct", 0.0, False),
        ("q6", "P-CLQ", "X", "codes", "direct", 0.0, True),  # ablation unparsed: loses
    ]
)


def test_fig5_ablation_dots_by_hand():
    e = ablation_effects(ABL, [("Prompting", ("descriptions", "direct"), ("codes", "direct"))])
    row = e.iloc[0]
    # dark dot: ablation wins (0 + 1 + 0.5 + 0) / 4 = 0.375 -> effect -0.125
    assert row["effect_all"] == pytest.approx(-0.125) and row["n"] == 4
    # light dot: only q1, q2, q5 (both answered): (0 + 1 + 0.5) / 3 - 0.5 = 0
    assert row["effect_answered"] == pytest.approx(0.0) and row["n_answered"] == 3
    fam = family_means(e).set_index("family")
    assert fam.loc["Prompting", "effect_all"] == pytest.approx(-0.125)
    # counterexample: the baseline's share of wins (the sign the seed's caption rules out:
    # "a dark dot at -5% indicates that the baseline won 55%") is +0.125, not -0.125
    swapped = ablation_effects(ABL, [("P", ("codes", "direct"), ("descriptions", "direct"))])
    assert swapped.iloc[0]["effect_all"] == pytest.approx(0.125) != row["effect_all"]


def test_chain_of_thought_answer_is_parsed_after_the_last_mark():
    reply = 'Patients 12 and 34 share a pathway. Answer: maybe\nAnswer: ["12", "34"]'
    assert parse_strict("P-CLQ", final_answer(reply)) == ["12", "34"]
    assert parse_strict("P-CLQ", reply) is None  # the whole reply is not the answer
    assert final_answer('["1"]') == '["1"]'


def test_generation_defaults_and_reasoning_uncapped():
    plain = generation_params(get_backbone("gpt-4o-mini"))
    assert (plain.temperature, plain.max_tokens) == (0.0, MAX_TOKENS) and MAX_TOKENS == 2048
    think = Backbone(name="think", model="m", base_url="http://x/v1", reasoning=True)
    p = generation_params(think)
    assert p.max_tokens is None and p.temperature is None  # default temperature, no cap
    with pytest.raises(ValueError, match="reasoning must be true or false"):
        Backbone(name="bad", model="m", base_url="http://x/v1", reasoning="yes")


def test_full_descriptions_end_in_a_parenthesis():
    assert full_description("lab", "itemid", "50983", "Sodium", "Blood, Chemistry") == (
        "Sodium, Blood, Chemistry (lab item 50983)"
    )
    assert full_description(
        "diagnosis", "ICD9-CM", "4019", "Unspecified essential hypertension"
    ) == ("Unspecified essential hypertension (ICD-9-CM 4019)")
    assert full_description("admission", "admission_type", "URGENT", "Admission").endswith(")")


def test_descriptions_rendering_lands_in_8_to_20_tokens_per_code(quick_cohort):
    """Measured on the quick build's events (cl100k_base, the seed's 8-20 tokens per code as
    text); the kit's short labels alone (the counterexample) measure below 8."""
    from clinlib.core.config import artifact_path
    from clinlib.llm.tokens import count_tokens
    from clinlib.tasks.population.build import population_events

    full = population_events(quick_cohort)
    short = pd.read_parquet(artifact_path("events.parquet", quick_cohort))
    per = lambda ev: float(np.median([count_tokens(x, "gpt-4") for x in ev["label"]]))  # noqa: E731
    assert 8 <= per(full) <= 20
    assert per(short) < 8
