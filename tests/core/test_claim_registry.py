"""Claims that can fail: every claim() the notebooks and the headline checks make is collected
from the sources (clinlib.core.claims.collect), and each predicate is evaluated on a
counterexample value of its domain and must fail there; a predicate no value can break is
refused when it is made. And every claim in a notebook cell renders."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clinlib.core import claims
from clinlib.core.prose import ClaimFailed, VacuousClaim, claim

ROOT = Path(__file__).resolve().parents[2]
SITES = claims.collect(ROOT)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# --- the counterexample, by hand ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "bound", "tol", "domain", "want"),
    [
        ("<=", 0, 0, "count", 1),  # "never": one case breaks it
        (">=", 1, 0, "count", 0),
        ("==", 0, 0, "count", 1),
        (">", 0, 0, "real", 0),  # 0 > 0 fails
        ("<", 1, 0, "count", 1),
        ("<=", 0, 0.005, "nonneg", 0.005 + 1e-6),
        (">=", 0.95, 0.05, "share", 0.9 - 1e-6),
        (">=", 0, 0, "real", -1e-6),  # a signed margin can go below zero
        (">=", 0, 0, "count", None),  # a count is never below zero: vacuous
        ("<=", 1, 0, "share", None),  # a share is never above one: vacuous
        (">=", 0, 0, "flag", None),  # "measured 0 >= 0" for a section that did not run
        ("==", 1, 0, "flag", 0),
    ],
)
def test_counterexample_by_hand(op, bound, tol, domain, want):
    got = claims.counterexample(op, bound, tol, domain)
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want, abs=1e-9)
        assert not claims.holds(got, op, bound, tol)


def test_claim_refuses_a_predicate_true_for_every_input():
    with pytest.raises(VacuousClaim, match="cannot fail"):
        claim("the local-model section ran", 0, ">=", 0, fmt="d")  # a count is >= 0
    with pytest.raises(VacuousClaim, match="share"):
        claim("recall at most one", 0.4, "<=", 1, domain="share")
    with pytest.raises(VacuousClaim):
        claim("a flag is at least false", False, ">=", 0)  # a bool is a flag
    with pytest.raises(ValueError, match="domain"):
        claim("s", 1, ">=", 0, domain="probability")


def test_a_claim_carries_the_value_that_would_break_it():
    c = claim("cells that disagree", 0, "==", 0, fmt="d")
    assert c.holds and c.domain == "count" and c.counterexample == 1
    with pytest.raises(ClaimFailed):
        claim("cells that disagree", c.counterexample, "==", 0, fmt="d")


# --- the registry ------------------------------------------------------------------------------


def test_registry_holds_the_notebooks_and_the_headline_checks():
    where = {s.where.split("[")[0].split(":")[0] for s in SITES}
    assert "clinlib/analysis/headline.py" in where
    assert sum(w.startswith("notebooks/") for w in where) >= 12
    assert len(SITES) >= 100  # every claim() call the kit makes, not a sample
    # the collector finds what a plain text search finds (no call missed by the parser)
    n_text = sum(
        "".join(c["source"]).count("claim(")
        for p in NOTEBOOKS
        for c in json.loads(p.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    assert sum(s.where.startswith("notebooks/") for s in SITES) == n_text


@pytest.mark.parametrize("site", SITES, ids=[s.where for s in SITES])
def test_every_claim_fails_on_a_counterexample(site):
    assert site.op in claims.OPS, f"{site.where}: op must be a literal of {claims.OPS}"
    assert site.domain in claims.DOMAINS, f"{site.where}: domain {site.domain!r}"
    if site.bound is None:
        # a computed bound: claim() itself finds the counterexample when it is made and
        # refuses the claim without one (test_claim_refuses_a_predicate_true_for_every_input)
        return
    breaker = claims.counterexample(site.op, site.bound, site.tol, site.domain)
    assert breaker is not None, f"{site.where}: {site.statement!r} cannot fail"
    lo, hi, _ = claims.DOMAINS[site.domain]
    assert lo <= breaker <= hi and math.isfinite(breaker)
    assert not claims.holds(breaker, site.op, site.bound, site.tol)


def test_collector_reads_literal_predicates():
    src = 'claim("no gap", gap, "<=", 0, tol=0.01, fmt=".2f")\nclaim("n", k, ">=", 0, fmt="d")'
    a, b = claims.sites_in_source(src, "cell")
    assert (a.op, a.bound, a.tol, a.domain) == ("<=", 0.0, 0.01, "real")
    assert (b.op, b.bound, b.domain) == (">=", 0.0, "count")
    assert claims.counterexample(b.op, b.bound, b.tol, b.domain) is None  # refused


# --- every claim in a cell renders -------------------------------------------------------------


def test_undisplayed_finds_claims_jupyter_drops():
    cell = 'claim("a", 0, "<=", 0)\nx = 1\nclaim("b", 0, "<=", 0)'
    assert claims.undisplayed(cell) == [1]  # only the last expression is shown
    shown = 'display(claim("a", 0, "<=", 0))\n(claim("b", 0, "<=", 0), claim("c", 0, "<=", 0))'
    assert claims.undisplayed(shown) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_claim_in_a_cell_renders(path):
    cells = json.loads(path.read_text())["cells"]
    dropped = [
        (i, line)
        for i, c in enumerate(cells)
        if c["cell_type"] == "code"
        for line in claims.undisplayed("".join(c["source"]))
    ]
    assert dropped == [], f"{path.name}: claim() calls checked but never shown (cell, line)"
