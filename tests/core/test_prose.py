"""clinlib.core.prose: md rendering, checked claims, and the static prose-number check."""

from __future__ import annotations

import pytest

from clinlib.core import prose
from clinlib.core.prose import ClaimFailed, claim, md, prose_numbers


def _found(text: str) -> list[str]:
    return [p.number for p in prose_numbers(text)]


# --- md --------------------------------------------------------------------------------------


def test_md_renders_values_and_seed_facts():
    out = md("{n:,} questions here; the paper's {seed[ctb_questions]}", n=1234)
    assert out == "1,234 questions here; the paper's 6,271"
    assert out._repr_markdown_() == out
    cite = md("{seed[ctb_questions].cite}")
    assert cite == '6,271 (ClinTraceBench §3 "Evaluation set")'
    with pytest.raises(KeyError):
        md("{missing}")


def test_span():
    assert prose.span(0.125, 0.5) == "0.12–0.50"  # format rounds half to even
    assert prose.span(1.0, 1.0) == "1.00"
    assert prose.span(0.9999, 1.0, ".2f") == "1.00"
    assert prose.span(3, 17, "d") == "3–17"


# --- claim -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "op", "bound", "tol", "holds"),
    [
        (0, "<=", 0, 0, True),
        (1, "<=", 0, 0, False),  # one counter-example breaks "never"
        (0.004, "<=", 0, 0.005, True),
        (0.006, "<=", 0, 0.005, False),
        (0.90, ">=", 0.95, 0.05, True),
        (0.89, ">=", 0.95, 0.05, False),
        (0.505, "==", 0.5, 0.01, True),
        (0.52, "==", 0.5, 0.01, False),
        (1, "<", 1, 0, False),
        (2, ">", 1, 0, True),
    ],
)
def test_claim_holds_by_hand(value, op, bound, tol, holds):
    got = claim("s", value, op, bound, tol=tol, check=False)
    assert got.holds is holds
    if not holds:
        with pytest.raises(ClaimFailed, match="does not hold"):
            claim("s", value, op, bound, tol=tol)


def test_claim_shows_the_figure_and_the_tolerance():
    c = claim("K barely matters", 0.012, "<=", 0.0, tol=0.02)
    text = c._repr_markdown_()
    assert "✓ holds" in text and "K barely matters" in text
    assert "0.012 <= 0 ± 0.02" in text
    assert "measured 3 <= 3" in claim("count", 3, "<=", 3, fmt="d")._repr_markdown_()
    with pytest.raises(ValueError, match="claim op"):
        claim("s", 1, "=<", 0)


# --- prose_numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The quick profile has ~140 questions per cell, so the Wilson CIs are wide.",
        "The paper's 6,272 questions per cell give MDEs of a few pp (Table 7).",  # wrong seed
        "Mem0 answers explicit questions near-perfectly (0.993).",  # seed value, no source
        "the reference reader reaches 0.778 / 0.880 / 0.962",
        "never wrong where another strategy is right (c = 0)",
        "The first run takes 157 s on two idle cores.",
        "ratio 1.0 (about one extra session per visit)",
        "gap has a Wilson CI of several pp, 3.2 pp here",
    ],
)
def test_result_numbers_in_prose_are_found(text):
    assert _found(text), text


@pytest.mark.parametrize(
    "text",
    [
        "# 07 · SP1 (paper §5.1–5.2, Tables 1–2, 5–6, Fig. 3)",
        "Notebooks 04, 06 and 11 use the same slice; see section 4.",
        "## 3 · Accuracy per task and strategy",
        "T1–T9, T3 pre/post, hit@1, C.1, gpt-4o-mini, SmolLM2-135M, all-MiniLM-L6-v2",
        "Set K = 3 and delta = 2; dense-retrieval K ∈ {3, 5, 10}.",
        "Wilson 95% CIs are in the tooltip.",
        "The paper's 6,271 questions (Table 14).",
        "LongMedBench reports Mem0 at 0.993 on explicit lab questions.",
        "Appendix C.1 / Fig. 13 (n = 385): visits per patient median 10 / mean 16.0 / max 93",
        "Offline readers cost $0.",
        "1. **Figures** rebuilt from the tables\n2. **An audit** of every number",
        "`runner.run(profile, k=17)` and `0.25 * n` are code",
        "the paper's 364,627 → 400 cohort",
    ],
)
def test_structural_numbers_and_cited_seed_facts_pass(text):
    assert _found(text) == [], text


def test_seed_value_must_belong_to_the_named_seed():
    # 0.993 is LongMedBench's; a sentence naming only the paper does not cite it
    assert _found("The paper's Mem0 scores 0.993.") == ["0.993"]
    # a plain number in backticks is prose, not code
    assert _found("the CI is `0.83` pp") == ["0.83 pp"]


def test_parameters_are_the_listed_names_only():
    assert "K" in prose.PARAMETERS
    assert _found("r = 0.42 between size and accuracy") == ["0.42"]
