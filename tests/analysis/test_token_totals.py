"""Token totals beside Table 4 (clinlib.analysis.token_totals), worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis import paper
from clinlib.analysis import token_totals as T


@pytest.fixture(scope="module")
def table4():
    return paper.load_table(4)


def test_table4_costs_recomputed_by_hand(table4):
    df = T.recompute_table4_costs(table4).set_index(["strategy", "backbone"])
    # Sonnet full-context: 44.9 M x (0.748 x $3 + 0.252 x $0.30) + 0.1414 M x $15
    # = 104.15 + 2.12 = 106.27 (printed 106.20): fits.
    son = df.loc[("full-context", "claude-sonnet-4.6")]
    assert son["recomputed"] == pytest.approx(106.27, abs=0.01) and son["fits"]
    # Haiku full-context at the preset's $1 / $5 / $0.10: 44.7 x (0.672 + 0.0328) + 0.1379 x 5
    # = 31.50 + 0.69 = 32.19, 25 % over the printed 25.76: flagged.
    hk = df.loc[("full-context", "claude-haiku-4.5")]
    assert hk["recomputed"] == pytest.approx(32.19, abs=0.01) and not hk["fits"]
    assert not df.xs("claude-haiku-4.5", level="backbone")["fits"].any()
    assert df.xs("claude-sonnet-4.6", level="backbone")["fits"].all()
    # At Claude 3.5 Haiku's $0.80 / $4 / $0.08 every Haiku cell fits: full-context
    # 44.7 x (0.672 x 0.8 + 0.328 x 0.08) + 0.1379 x 4 = 25.204 + 0.552 = 25.76 (printed 25.76).
    prices = {n: (0.8, 4.0, 0.08) for n in paper.BACKBONES}
    hk35 = T.recompute_table4_costs(table4, prices).set_index(["strategy", "backbone"])
    assert hk35.xs("claude-haiku-4.5", level="backbone")["fits"].all()
    assert hk35.loc[("full-context", "claude-haiku-4.5"), "recomputed"] == pytest.approx(
        25.76, abs=0.005
    )


def test_table4_input_ratios_as_the_issue_quotes(table4):
    empty = pd.DataFrame(
        {"strategy": ["full-context"], "backbone": ["gpt-4o-mini"], "input_tokens": [1]}
    )
    r = T.input_ratios(empty, table4).set_index("strategy")["paper"].round(2)
    # Mean over the four backbones of input / full-context input, e.g. Mem0:
    # (6.4/36.8 + 6.4/37.7 + 7.5/44.7 + 7.7/44.9) / 4 = 0.171.
    assert r["mem0"] == 0.17 and r["a-mem"] == 0.32 and r["last-visit-only"] == 0.14
    assert r["llm-summary"] == 0.13 and r["dense-retrieval"] == 0.54
    assert r["structured-timeline"] == 0.92 and r["full-context"] == 1.0


def test_token_totals_and_full_context_by_hand(table4):
    est = pd.DataFrame(
        {
            "strategy": ["full-context", "full-context", "mem0", "full-context"],
            "backbone": ["gpt-4o-mini", "gpt-4o-mini", "gpt-4o-mini", "claude-haiku-4.5"],
            "setting": ["post", "pre", "post", "post"],
            "input_tokens": [30_000_000, 10_000_000, 8_000_000, 60_000_000],
            "output_tokens_typical": [100, 50, 10, 7],
            "cost_usd_typical": [1.0, 0.5, 0.2, 3.0],
        }
    )
    tot = T.token_totals(est).set_index(["strategy", "backbone"])
    assert list(tot.columns) == ["input_tokens", "output_tokens", "cost_usd"]
    assert tot.loc[("full-context", "gpt-4o-mini")].tolist() == [40_000_000, 150, 1.5]
    ratios = T.input_ratios(tot.reset_index(), table4).set_index("strategy")
    assert ratios.loc["mem0", "ours"] == pytest.approx(0.2)  # 8 M / 40 M
    fc = T.full_context_vs_table4(tot.reset_index(), table4).set_index("backbone")
    # 40 M vs 37.7 M: 1.06, within 25 %; 60 M vs 44.7 M: 1.34, not.
    assert fc.loc["gpt-4o-mini", "ratio"] == pytest.approx(40 / 37.7)
    assert fc.loc["gpt-4o-mini", "within_25pct"]
    assert not fc.loc["claude-haiku-4.5", "within_25pct"]
