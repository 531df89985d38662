"""Memory-under-accumulation metrics (clinlib.analysis.memory_stats; MedMemoryBench §3 "Noise
Augmentation", Table 3, Appendix C): hand-worked values, scipy as the Friedman oracle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import friedmanchisquare

from clinlib.analysis import memory_stats as M
from clinlib.analysis.metrics.common import MetricsInputError
from clinlib.analysis.stats.question import wilson_ci
from clinlib.strategies.base import Artifact

FACTS = pd.DataFrame([
    dict(subject_id=1, relation="father", label="Potassium", value_text="5.9", date="2150-02-01"),
    dict(subject_id=1, relation="father", label="Lisinopril", value_text="20", date="2150-02-03"),
    dict(subject_id=2, relation="sister", label="Glucose", value_text="98", date="2151-05-05"),
])  # fmt: skip


def art(strategy: str, sid: int, data: dict) -> Artifact:
    return Artifact(strategy, sid, {}, "rule-based", "h", data)


def test_misattributed_count_on_hand_built_artifacts():
    mem0 = art("mem0", 1, {"memories": [
        {"text": "Potassium was 5.9 mEq/L on 2150-02-01"},              # the father's: mis
        {"text": "Your father's Potassium was 5.9 mEq/L on 2150-02-01"},  # named: attributed
        {"text": "Potassium was 5.9 mEq/L on 2150-03-02"},              # the patient's own date
        {"text": "Potassium was 15.9 mEq/L on 2150-02-01"},             # another value
        {"text": "Lisinopril 20 mg PO started 2150-02-03"},             # the father's drug: mis
    ]})  # fmt: skip
    summary = art("llm-summary", 2, {"summary": (
        "Labs (latest value): Sodium 98 mEq/L on 2151-01-01; Glucose 140 mg/dL on 2151-05-05\n"
        "Glucose 98 mg/dL on 2151-05-05 (a relative's result)")})  # fmt: skip
    timeline = art("structured-timeline", 2, {"text": (
        "| 3 | date not stated | 2151-05-05: Glucose 98 mg/dL, Sodium 140 mEq/L | - |")})  # fmt: skip
    entries = M.entries_of({"mem0": {1: mem0}, "llm-summary": {2: summary},
                            "structured-timeline": {2: timeline}})  # fmt: skip
    assert len(entries["mem0"][1]) == 5 and len(entries["llm-summary"][2]) == 2
    out = M.misattributed_memories(entries, FACTS).set_index("strategy")
    assert out.loc["mem0", ["n_entries", "n_noise_entries", "n_attributed", "n_misattributed",
                            "n_relative_facts", "n_facts_stored_as_patient"]].tolist() == [
        5, 3, 1, 2, 2, 2]  # fmt: skip
    assert out.loc["mem0", "share_misattributed"] == pytest.approx(2 / 3)
    # clause-wise: "Sodium 98 ... ; Glucose 140 ... 2151-05-05" holds no fact; line 2 names kin
    assert out.loc["llm-summary", ["n_noise_entries", "n_attributed", "n_misattributed"]].tolist() \
        == [1, 1, 0]  # fmt: skip
    assert out.loc["structured-timeline", ["n_misattributed", "n_facts_stored_as_patient"]].tolist() \
        == [1, 1]  # fmt: skip


def test_no_noise_entries_gives_nan_share():
    out = M.misattributed_memories({"mem0": {1: ["Sodium was 139 mEq/L on 2150-01-10"]}}, FACTS)
    assert out.loc[0, "n_noise_entries"] == 0 and math.isnan(out.loc[0, "share_misattributed"])


def test_hallucination_rate_hand_values():
    preds = pd.DataFrame({
        "strategy": ["s"] * 6 + ["t"],
        "backbone": ["b"] * 7,
        "correct": [True, False, False, False, False, False, True],
        "parsed": ["4.1 mEq/L", "insufficient information", "5.0 mEq/L", "yes", None, "x", "no"],
        "empty": [False, False, False, False, True, False, False],
        "parse_failed": [False, False, False, False, False, True, False],
    })  # fmt: skip
    out = M.hallucination_rate(preds).set_index("strategy")
    s = out.loc["s"]
    assert [s.n, s.n_correct, s.n_abstain, s.n_no_answer, s.n_hallucinated] == [6, 1, 1, 2, 2]
    assert s.hallucination_rate == pytest.approx(2 / 6)
    assert s.hallucination_share_of_errors == pytest.approx(2 / 5)
    lo, hi = wilson_ci(2, 6)
    assert (s.hallucination_low, s.hallucination_high) == pytest.approx((lo, hi))
    assert out.loc["t", "hallucination_rate"] == 0 and math.isnan(
        out.loc["t", "hallucination_share_of_errors"])  # fmt: skip


def scores(matrix, seeds=(42, 123, 456, 789, 2024)):
    return pd.DataFrame([(f"m{j}", s, float(matrix[i][j])) for i, s in enumerate(seeds)
                         for j in range(len(matrix[0]))],
                        columns=["strategy", "seed", "accuracy"])  # fmt: skip


def test_seed_stability_hand_values():
    df = pd.DataFrame({"strategy": ["a"] * 3 + ["b"] * 3, "seed": [42, 123, 456] * 2,
                       "accuracy": [0.5, 0.75, 1.0, 0.25, 0.5, 0.75]})  # fmt: skip
    out = M.seed_stability(df).set_index("strategy")
    assert out.loc["a", ["n_seeds", "mean", "sd"]].tolist() == pytest.approx([3, 0.75, 0.25])
    assert out.loc["a", "cv"] == pytest.approx(100 * 0.25 / 0.75)
    assert out.loc["b", "cv"] == pytest.approx(50.0)
    pop = M.seed_stability(df, ddof=0).set_index("strategy")
    assert pop.loc["a", "sd"] == pytest.approx(np.sqrt(0.125 / 3))
    with pytest.raises(MetricsInputError, match="no score for strategy='b' at seed=456"):
        M.seed_stability(df.iloc[:5])
    with pytest.raises(MetricsInputError, match="two scores"):
        M.seed_stability(pd.concat([df, df.iloc[:1]]))


def test_friedman_hand_value():
    # two blocks ranking three strategies identically: R = (2, 4, 6)
    r = M.friedman(scores([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], seeds=(1, 2)))
    assert (r.statistic, r.df, r.n_treatments, r.n_blocks) == (pytest.approx(4.0), 2, 3, 2)
    assert r.p_value == pytest.approx(math.exp(-2.0))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_friedman_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 5, size=(5, 10)) / 4 if seed % 2 else rng.random((5, 10))  # ties too
    r = M.friedman(scores(m))
    ref = friedmanchisquare(*[m[:, j] for j in range(10)])
    assert r.statistic == pytest.approx(ref.statistic) and r.p_value == pytest.approx(ref.pvalue)
    assert r.df == 9


def test_friedman_reproduces_the_seed_p_values():
    # MedMemoryBench Appendix C: chi2_F = 42.47 (Efficient) and 39.20 (Mixed), 9 df
    assert M.friedman_p(42.47, 9) == pytest.approx(2.70e-6, rel=5e-3)
    assert M.friedman_p(39.20, 9) == pytest.approx(1.06e-5, rel=5e-3)


def test_friedman_needs_three_strategies():
    with pytest.raises(MetricsInputError, match=">= 3"):
        M.friedman(scores([[0.1, 0.2], [0.3, 0.4]], seeds=(1, 2)))


def test_rule_based_prep_stores_relatives_labs_as_the_patients(quick_built):
    from clinlib.data.build import load
    from clinlib.dialogue.noise import add_noise, hide_noise_tags, noise_facts
    from clinlib.strategies.prep import get_prep
    from clinlib.strategies.registry import get_strategy

    turns = load("dialogues")
    sids = sorted(turns["subject_id"].unique())[:2]
    t = turns[turns["subject_id"].isin(sids)]
    facts = noise_facts(t, 1.0, 42)
    view = hide_noise_tags(add_noise(t, 1.0, 42))
    timeline, prep = get_strategy("structured-timeline"), get_prep("rule-based")
    arts = {}
    for name, dialogue in (("noisy", view), ("clean", t)):
        jobs = [(int(s), dialogue[dialogue["subject_id"] == s]) for s in sids]
        arts[name] = dict(zip(map(int, sids), timeline.construct_many(jobs, prep), strict=True))
    out = M.misattributed_memories(M.entries_of(arts), facts).set_index("strategy")
    assert out.loc["noisy", "n_misattributed"] > 0  # no speaker attribution in the reader
    assert out.loc["clean", "n_noise_entries"] == 0  # the control: facts only come from noise
