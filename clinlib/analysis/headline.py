"""The checks that end every notebook: each notebook's headline results
re-derived by a second, independent route and stated as :func:`clinlib.core.prose.claim`\\ s,
so a wrong number fails the notebook under nbmake (quick profile, ``make test``) and under
``make reproduce`` (paper profile) alike.

Each function takes tables the notebook already holds and returns a list of
:class:`~clinlib.core.prose.Claim` (every one checked: a failing one raises
:class:`~clinlib.core.prose.ClaimFailed`); a notebook's last cell displays them:
``display(*headline.accuracy_checks(acc, post))``. The second routes are deliberately plain
(a pandas recount, statsmodels' Holm, the gate rule re-applied), never the function checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import pandas as pd
from statsmodels.stats.multitest import multipletests

from clinlib.core.prose import Claim, ClaimFailed, Markdown, claim
from clinlib.tasks.gates.common import THRESHOLDS

EXACT = 1e-9  # two routes to the same fraction differ by rounding only
REQUIRE_LOCAL_ENV = "CLINTRACE_REQUIRE_LOCAL_MODEL"  # set by `make test-local` (and CI)


def _largest_gap(a: pd.Series, b: pd.Series) -> float:
    """max |a - b| over the union of both indexes; a key missing from one side counts as 1."""
    a, b = a.astype(float).align(b.astype(float))
    return float((a - b).abs().fillna(1.0).max()) if len(a) else 0.0


def recount_accuracy(preds: pd.DataFrame, by: Sequence[str], col: str = "correct") -> pd.Series:
    """Accuracy per group by a plain recount: correct answers / answers (the second route)."""
    ok = preds[col].astype("boolean").fillna(False).astype(bool)
    grouped = ok.groupby([preds[c] for c in by], dropna=False)
    return grouped.sum() / grouped.size()


def pooled(acc: pd.DataFrame, backbone: str) -> pd.Series:
    """Pooled accuracy per strategy of one backbone from per-task rows (Σ accuracy·n / Σ n)."""
    rows = acc[acc["backbone"] == backbone]
    weighted = (rows["accuracy"] * rows["n"]).groupby(rows["strategy"]).sum()
    return weighted / rows.groupby("strategy")["n"].sum()


def accuracy_checks(
    acc: pd.DataFrame,
    preds: pd.DataFrame,
    by: Sequence[str] = ("strategy", "backbone", "task"),
    backbone: str | None = "reference",
    full: str = "full-context",
    blind: str = "no-context-blind",
) -> list[Claim]:
    """An accuracy table against a recount of ``preds`` (§5.1), and full-context above blind
    for ``backbone`` (the `reference` reader never misses a fact in its context)."""
    truth = recount_accuracy(preds, list(by))
    got = acc.set_index(list(by))["accuracy"]
    out = [
        claim(
            "every cell's accuracy equals a plain recount of its correct answers (largest gap)",
            _largest_gap(got, truth),
            "<=",
            EXACT,
        )
    ]
    if backbone is not None:
        p = pooled(acc, backbone)
        out.append(
            claim(
                f"`{backbone}`: {full} pooled accuracy minus {blind}'s",
                float(p[full] - p[blind]),
                ">",
                0,
            )
        )
    return out


def holm_checks(
    tests: pd.DataFrame,
    family: Sequence[str],
    columns: Iterable[tuple[str, str]] = (("p_value", "p_adj"),),
) -> list[Claim]:
    """Holm-adjusted p-values (§3) against statsmodels' Holm, one family per ``family`` group
    (the whole table is one family when ``family`` is empty, as in an ablation sweep)."""
    families = [g for _, g in tests.groupby(list(family), sort=False)] if family else [tests]
    out = []
    for raw, adj in columns:
        gaps = [
            float(
                (
                    pd.Series(
                        multipletests(g[raw].to_numpy(float), method="holm")[1], index=g.index
                    )
                    - g[adj]
                )
                .abs()
                .max()
            )
            for g in families
        ]
        out.append(
            claim(
                f"`{adj}` equals statsmodels' Holm adjustment of `{raw}` (largest gap)",
                max(gaps),
                "<=",
                EXACT,
            )
        )
    return out


def gate_checks(gates: pd.DataFrame, thresholds: dict[str, float] | None = None) -> list[Claim]:
    """Every hard gate passes (Appendix B), and each gate's ``passed`` re-derived from its
    counts: a zero-tolerance gate passes with no failure, another below its failure rate."""
    thresholds = THRESHOLDS if thresholds is None else thresholds
    gates = gates[gates["gate"].isin(list(thresholds))]
    hard = gates[gates["severity"] == "hard"]
    rate = gates["n_failed"] / gates["n_checked"].where(gates["n_checked"] > 0)
    limit = gates["gate"].map(thresholds)
    rule = (gates["n_failed"] == 0).where(limit == 0, rate.fillna(0) < limit)
    return [
        claim("gates checked", len(gates), ">", 0),
        claim("hard gates that fail", int((~hard["passed"].astype(bool)).sum()), "==", 0),
        claim(
            "gates whose verdict disagrees with their counts",
            int((rule != gates["passed"].astype(bool)).sum()),
            "==",
            0,
        ),
    ]


def pooled_checks(
    summary: pd.DataFrame, preds: pd.DataFrame, backbone: str = "reference"
) -> list[Claim]:
    """The pooled accuracy per strategy (Table 1's bottom rows) against a recount of the
    backbone's predictions, over the strategies that answered every task present (the cells
    :func:`clinlib.analysis.metrics.summary_rows` pools; one answered on a subset, e.g. an
    outside memory run with ``--tasks``, is in no pooled row)."""
    got = summary[summary["backbone"] == backbone].set_index("strategy")["pooled"]
    mine = preds[preds["backbone"] == backbone]
    tasks = mine.groupby("strategy")["task"].agg(frozenset)
    whole = tasks[tasks == frozenset(mine["task"])].index if len(tasks) else []
    truth = recount_accuracy(mine[mine["strategy"].isin(list(whole))], ["strategy"])
    return [
        claim(
            f"`{backbone}`: every strategy's pooled accuracy equals a recount (largest gap)",
            _largest_gap(got, truth),
            "<=",
            EXACT,
        )
    ]


def cohort_checks(
    attrition: pd.DataFrame, cohort: pd.DataFrame, events: pd.DataFrame
) -> list[Claim]:
    """The attrition funnel never grows and ends at the cohort (§3.1); every event belongs to
    a cohort patient."""
    n = attrition.sort_values("step_idx")["n_patients"].to_numpy()
    return [
        claim("attrition steps that add patients", int((n[1:] > n[:-1]).sum()), "==", 0),
        claim("last attrition step minus the cohort's patients", int(n[-1]) - len(cohort), "==", 0),
        claim(
            "events of patients outside the cohort",
            int((~events["subject_id"].isin(cohort["subject_id"])).sum()),
            "==",
            0,
        ),
    ]


def dialogue_checks(
    summary: pd.DataFrame, checks: pd.DataFrame, coverage: pd.DataFrame
) -> list[Claim]:
    """Some dialogues are kept, none of them fails a HARD check, and their covered-event
    counts agree with the per-event coverage table (§3.2)."""
    kept = summary[summary["kept"].astype(bool)]
    failed = checks[(checks["severity"] == "hard") & ~checks["passed"].astype(bool)]
    recount = (coverage["status"] == "covered").groupby(coverage["subject_id"]).sum()
    n_cov = kept.set_index("subject_id")["n_covered"]
    return [
        claim("kept dialogues", len(kept), ">", 0),
        claim(
            "kept dialogues failing a HARD check",
            int(failed["subject_id"].isin(kept["subject_id"]).sum()),
            "==",
            0,
        ),
        claim(
            "kept dialogues whose covered count disagrees with the coverage table",
            int((n_cov != recount.reindex(n_cov.index).fillna(0)).sum()),
            "==",
            0,
        ),
    ]


def require_local(available: bool, why_not: str, produced: int = 0) -> list[Claim | Markdown]:
    """The local-model section's verdict: where it was skipped, a note saying so (and a
    failure where ``make test-local`` requires the model); where it ran, a claim that it
    produced something (``produced``: the rows or artifacts the local model wrote, a count
    that is 0 when the section did nothing, so the claim can fail)."""
    required = os.environ.get(REQUIRE_LOCAL_ENV, "") not in ("", "0")
    if not available:
        if required:
            raise ClaimFailed(
                f"the local-model section was skipped ({why_not}) but {REQUIRE_LOCAL_ENV} "
                "requires it to run"
            )
        return [
            Markdown(
                f"**Skipped**: the local-model section did not run. Why: {why_not}. "
                "No figure in this notebook comes from the local model."
            )
        ]
    return [claim("the local-model section ran: rows it produced", int(produced), ">=", 1, fmt="d")]


def paper_pooled_checks(
    summary: pd.DataFrame, table1: pd.DataFrame, sizes: Sequence[float]
) -> list[Claim]:
    """Notebook 12's pooled and macro columns against Table 1 itself: its printed pooled /
    macro rows, and its T1–T9 cells (percent) weighted by the stated task sizes (§4), or not."""
    acc = table1[table1["metric"] == "accuracy"].copy()
    acc["task"], acc["value"] = acc["task"].astype(str), acc["value"].astype(float) / 100
    wide = acc.pivot_table(index=["strategy", "backbone"], columns="task", values="value")
    tasks = [f"T{i}" for i in range(1, len(sizes) + 1)]
    w = pd.Series([float(s) for s in sizes], index=tasks)
    own = summary.set_index(["strategy", "backbone"])
    weighted = (wide[tasks] * w).sum(axis=1) / w.sum()
    return [
        claim(
            "reported pooled / macro vs Table 1's printed rows (largest gap)",
            max(
                _largest_gap(own["reported_pooled"], wide["pooled"]),
                _largest_gap(own["reported_macro"], wide["macro"]),
            ),
            "<=",
            EXACT,
        ),
        claim(
            "pooled of Table 1's cells, size-weighted, vs a recomputation (largest gap)",
            _largest_gap(own["table1_cells_pooled"], weighted),
            "<=",
            EXACT,
        ),
        claim(
            "macro of Table 1's cells vs their plain mean (largest gap)",
            _largest_gap(own["table1_cells_macro"], wide[tasks].mean(axis=1)),
            "<=",
            EXACT,
        ),
    ]


def hit_checks(hits: pd.DataFrame, rates: pd.DataFrame) -> list[Claim]:
    """Retrieval hit@k (Appendix C.2) recounted from each question's anchor rank, per
    strategy and task and overall; and never falling as k grows."""
    kcols = sorted((c for c in rates.columns if c.startswith("hit@")), key=lambda c: int(c[4:]))
    keyed = hits.assign(task=hits["task"].astype(str))
    recount = {c: keyed["rank"] <= int(c[4:]) for c in kcols}
    frame = keyed[["strategy", "task"]].assign(**recount)
    per = frame.groupby(["strategy", "task"])[kcols].mean()
    overall = frame.groupby("strategy")[kcols].mean().assign(task="overall")
    truth = pd.concat([per, overall.set_index("task", append=True)])
    got = rates.assign(task=rates["task"].astype(str)).set_index(["strategy", "task"])[kcols]
    gap = max(_largest_gap(got[c], truth[c]) for c in kcols)
    fall = float((got[kcols].diff(axis=1).iloc[:, 1:] < 0).sum().sum())
    return [
        claim("hit@k equals a recount of the anchor ranks (largest gap)", gap, "<=", EXACT),
        claim("rows whose hit@k falls as k grows", fall, "==", 0, fmt="d"),
    ]


def streaming_checks(final_vs_static: pd.DataFrame) -> list[Claim]:
    """The last checkpoint of a stream sees the whole dialogue, so its accuracy equals the
    static setting's for every cell (notebook 14, MedMemoryBench's streaming protocol)."""
    gap = (final_vs_static["accuracy_final"] - final_vs_static["accuracy_static"]).abs()
    return [
        claim("cells compared at the final checkpoint", len(final_vs_static), ">", 0, fmt="d"),
        claim("final-checkpoint accuracy minus static (largest |gap|)", float(gap.max()), "<=", 0),
    ]
