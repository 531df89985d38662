"""Memory under accumulation: the metrics MedMemoryBench reports (§4 "Noise Augmentation";
Table 3 "Hallucination"; the appendix "Results Across Multiple Random Seeds": mean, Std, CV and
the Friedman test), and the misattributed-memory count of the noise setting.

* :func:`misattributed_memories` — stored memory entries that hold a relative's lab or drug
  (from a proxy noise session, :func:`clinlib.dialogue.noise.noise_facts`) without naming the
  relative, i.e. kept as the patient's own fact;
* :func:`hallucination_rate` — non-abstaining wrong answers among all answers per cell (and,
  as the seed's Table 3 defines it, among the wrong answers), with Wilson intervals;
* :func:`seed_stability` — mean, SD (ddof=1, the sample SD over seeds) and
  CV = 100 x SD / mean per strategy;
* :func:`friedman` — the Friedman test with strategies as treatments and seeds as blocks
  (average ranks for ties and scipy's tie correction), χ²_F, df = k - 1 and the asymptotic p.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from clinlib.analysis.metrics.common import CELL, MetricsInputError, bool_col, require
from clinlib.analysis.stats.question import wilson_ci
from clinlib.dialogue.matching import find_spans
from clinlib.strategies.base import Artifact
from clinlib.strategies.registry import get_strategy
from clinlib.tasks.base import ABSTAIN

# A memory entry "names the relative" when it says the relation or a generic kin word.
KIN_WORDS: tuple[str, ...] = ("relative", "family member")
# Facts inside one entry are matched clause by clause (a summary lists many labs on one line).
_CLAUSE_RE = re.compile(r";|\n|\|")
MISATTRIBUTION_COLUMNS: tuple[str, ...] = (
    "strategy",
    "n_patients",
    "n_entries",
    "n_noise_entries",
    "n_attributed",
    "n_misattributed",
    "share_misattributed",
    "n_relative_facts",
    "n_facts_stored_as_patient",
)


# --- misattributed memories ----------------------------------------------------------------


def memory_entries(artifact: Artifact) -> list[str]:
    """The stored entries of an artifact: Mem0 memories, A-Mem notes, else the non-empty
    lines of the strategy's ``store_text`` (summary, timeline rows); [] for strategies whose
    store is the dialogue itself."""
    data = artifact.data
    if isinstance(data.get("memories"), list):
        return [str(m["text"]) for m in data["memories"]]
    strategy = get_strategy(artifact.strategy)
    if isinstance(data.get("notes"), list) and hasattr(strategy, "render_note"):
        return [strategy.render_note(n) for n in data["notes"]]
    text = strategy.store_text(artifact)
    return [line for line in (text or "").splitlines() if line.strip()]


def _holds(entry: str, fact: Mapping[str, str]) -> bool:
    """True if one clause of ``entry`` states the fact's label, value and date."""
    for clause in _CLAUSE_RE.split(entry):
        if (
            fact["date"] in clause
            and find_spans(clause, fact["label"], True)
            and find_spans(clause, fact["value_text"])
        ):
            return True
    return False


def _names(entry: str, relation: str) -> bool:
    return any(find_spans(entry, w, True) for w in (relation, *KIN_WORDS))


def _count_patient(entries: Sequence[str], facts: list[dict]) -> tuple[int, int, int, set[int]]:
    """(noise entries, attributed, misattributed, indices of facts stored as the patient's)."""
    n_noise = n_attr = n_mis = 0
    stored: set[int] = set()
    for entry in entries:
        held = [i for i, f in enumerate(facts) if _holds(entry, f)]
        if not held:
            continue
        n_noise += 1
        if all(_names(entry, facts[i]["relation"]) for i in held):
            n_attr += 1
        else:
            n_mis += 1
            stored |= {i for i in held if not _names(entry, facts[i]["relation"])}
    return n_noise, n_attr, n_mis, stored


def misattributed_memories(
    entries: Mapping[str, Mapping[int, Sequence[str]]], facts: pd.DataFrame
) -> pd.DataFrame:
    """Count stored memories that hold a relative's fact as the patient's (MedMemoryBench §4
    "Noise Augmentation": proxy consultations; a constructor without speaker attribution
    stores the relative's labs as the patient's).

    An entry holds a relative's fact when one of its clauses (split at ``;``, ``|`` and line
    ends) gives the fact's label (case-insensitive), value and date (boundary-aware); it is
    misattributed when it does not name the relative (the relation, or "relative" /
    "family member") for some fact it holds.

    Args:
        entries: strategy -> subject_id -> stored entries (:func:`memory_entries`).
        facts: :func:`clinlib.dialogue.noise.noise_facts` rows (subject_id, relation, label,
            value_text, date).

    Returns:
        One row per strategy: :data:`MISATTRIBUTION_COLUMNS` (share = misattributed / noise
        entries, NaN without noise entries).
    """
    require(
        facts, ["subject_id", "relation", "label", "value_text", "date"], "misattributed_memories"
    )
    by_sid: dict[int, list[dict]] = {}
    for f in facts.to_dict("records"):
        by_sid.setdefault(int(f["subject_id"]), []).append({k: str(v) for k, v in f.items()})
    rows = []
    for strategy, per_patient in entries.items():
        counts = np.zeros(4, dtype=int)
        n_entries = n_facts = 0
        for sid, ents in per_patient.items():
            pf = by_sid.get(int(sid), [])
            n_noise, n_attr, n_mis, stored = _count_patient(ents, pf)
            counts += (n_noise, n_attr, n_mis, len(stored))
            n_entries += len(ents)
            n_facts += len(pf)
        share = counts[2] / counts[0] if counts[0] else float("nan")
        rows.append((strategy, len(per_patient), n_entries, *counts[:3], share, n_facts, counts[3]))
    return pd.DataFrame(rows, columns=list(MISATTRIBUTION_COLUMNS))


def entries_of(artifacts: Mapping[str, Mapping[int, Artifact]]) -> dict[str, dict[int, list[str]]]:
    """strategy -> subject_id -> :func:`memory_entries`, for :func:`misattributed_memories`."""
    return {
        s: {int(sid): memory_entries(a) for sid, a in arts.items()} for s, arts in artifacts.items()
    }


# --- hallucination -------------------------------------------------------------------------

HALLUCINATION_COLUMNS: tuple[str, ...] = (
    "n",
    "n_correct",
    "n_abstain",
    "n_no_answer",
    "n_hallucinated",
    "hallucination_rate",
    "hallucination_low",
    "hallucination_high",
    "hallucination_share_of_errors",
)


def hallucination_rate(
    preds: pd.DataFrame, cell: Sequence[str] = CELL, alpha: float = 0.05
) -> pd.DataFrame:
    """Hallucination per cell (MedMemoryBench Table 3 "Hallucination": a confident wrong
    answer where the model should have abstained or answered correctly).

    A prediction hallucinates when it is wrong (``correct`` False), its parsed answer is not
    the abstention (:data:`clinlib.tasks.base.ABSTAIN`) and it gave an answer at all (not
    ``empty``, not ``parse_failed``: those count as ``n_no_answer``).

    Args:
        preds: predictions (columns ``cell``, correct, parsed, empty, parse_failed).
        cell: grouping columns (default strategy, backbone; add task or setting as needed).
        alpha: 1 - confidence of the Wilson interval (:func:`clinlib.analysis.stats.wilson_ci`).

    Returns:
        ``cell`` + :data:`HALLUCINATION_COLUMNS`: hallucination_rate = hallucinated / all
        answers (with its Wilson interval); hallucination_share_of_errors = hallucinated /
        wrong answers, the seed's Table 3 denominator (NaN without wrong answers).
    """
    cell = list(cell)
    require(preds, [*cell, "correct", "parsed", "empty", "parse_failed"], "hallucination_rate")
    correct = bool_col(preds, "correct", "hallucination_rate")
    no_answer = bool_col(preds, "empty", "hallucination_rate") | bool_col(
        preds, "parse_failed", "hallucination_rate"
    )
    abstain = preds["parsed"].astype("string").str.strip().str.lower().eq(ABSTAIN).fillna(False)
    flags = pd.DataFrame(
        {
            "n": 1,
            "n_correct": correct,
            "n_abstain": abstain & ~correct,
            "n_no_answer": no_answer & ~correct & ~abstain,
            "n_hallucinated": ~correct & ~abstain & ~no_answer,
        },
        index=preds.index,
    ).astype(int)
    out = pd.concat([preds[cell], flags], axis=1).groupby(cell, sort=True).sum().reset_index()
    out["hallucination_rate"] = out["n_hallucinated"] / out["n"]
    lo, hi = wilson_ci(out["n_hallucinated"].to_numpy(), out["n"].to_numpy(), alpha)
    out["hallucination_low"], out["hallucination_high"] = lo, hi
    wrong = out["n"] - out["n_correct"]
    out["hallucination_share_of_errors"] = (out["n_hallucinated"] / wrong).where(wrong > 0)
    return out[[*cell, *HALLUCINATION_COLUMNS]]


# --- across seeds --------------------------------------------------------------------------


def _seed_matrix(
    scores: pd.DataFrame, value: str, treatment: str, block: str, fn: str
) -> pd.DataFrame:
    """blocks x treatments matrix of one score each; complete, no duplicates."""
    require(scores, [treatment, block, value], fn)
    dup = scores.duplicated([treatment, block])
    if dup.any():
        r = scores[dup].iloc[0]
        raise MetricsInputError(
            f"{fn}: two scores for {treatment}={r[treatment]!r}, {block}={r[block]!r}"
        )
    vals = pd.to_numeric(scores[value], errors="coerce")
    if vals.isna().any():
        r = scores[vals.isna()].iloc[0]
        raise MetricsInputError(
            f"{fn}: {value} is not a number for {treatment}="
            f"{r[treatment]!r}, {block}={r[block]!r}: {r[value]!r}"
        )
    wide = scores.assign(**{value: vals}).pivot(index=block, columns=treatment, values=value)
    if wide.isna().any().any():
        b, t = next((b, t) for b in wide.index for t in wide.columns if pd.isna(wide.at[b, t]))
        raise MetricsInputError(f"{fn}: no score for {treatment}={t!r} at {block}={b!r}")
    return wide


def seed_stability(
    scores: pd.DataFrame,
    value: str = "accuracy",
    treatment: str = "strategy",
    block: str = "seed",
    ddof: int = 1,
) -> pd.DataFrame:
    """Cross-seed stability per strategy (MedMemoryBench's appendix "Results Across Multiple Random
    Seeds", Tables 12–13: Mean, Std and CV = 100 x Std / Mean over its five seeds, seed fact
    mmb_seeds).

    Args:
        scores: one row per (strategy, seed) with its score (e.g. accuracy on 0-1).
        value / treatment / block: column names.
        ddof: SD degrees of freedom (1: the sample SD over repeated runs).

    Returns:
        One row per strategy: strategy, n_seeds, mean, sd, cv (percent; NaN if mean is 0).
    """
    wide = _seed_matrix(scores, value, treatment, block, "seed_stability")
    if len(wide) <= ddof:
        raise MetricsInputError(
            f"seed_stability: {len(wide)} {block}(s); SD with ddof={ddof} needs more"
        )
    mean = wide.mean(axis=0)
    sd = wide.std(axis=0, ddof=ddof)
    cv = (100.0 * sd / mean).where(mean != 0)
    out = pd.DataFrame(
        {
            treatment: wide.columns,
            "n_seeds": len(wide),
            "mean": mean.to_numpy(),
            "sd": sd.to_numpy(),
            "cv": cv.to_numpy(),
        }
    )
    return out.reset_index(drop=True)


class FriedmanResult(NamedTuple):
    """Friedman test: χ²_F, its degrees of freedom (k - 1), the asymptotic p, k and n."""

    statistic: float
    df: int
    p_value: float
    n_treatments: int
    n_blocks: int


def friedman_p(statistic: float, df: int) -> float:
    """Asymptotic p of a Friedman χ²_F with ``df`` degrees of freedom (chi-squared tail)."""
    return float(sps.chi2.sf(float(statistic), int(df)))


def friedman(
    scores: pd.DataFrame,
    value: str = "accuracy",
    treatment: str = "strategy",
    block: str = "seed",
) -> FriedmanResult:
    """Friedman test with strategies as treatments and seeds as blocks (MedMemoryBench's
    appendix "Results Across Multiple Random Seeds", seed fact mmb_friedman: χ²_F = 42.47 and
    39.20, 9 df, over ten methods x five seeds).

    Scores are ranked within each block (average ranks for ties, higher score = higher rank);
    χ²_F = 12 / (n k (k + 1)) Σ R_j² - 3 n (k + 1), divided by the tie correction
    1 - Σ (t³ - t) / (n k (k² - 1)) as scipy.stats.friedmanchisquare does.

    Args:
        scores: one row per (strategy, seed); every strategy scored at every seed.
        value / treatment / block: column names.

    Returns:
        :class:`FriedmanResult`.

    Raises:
        MetricsInputError: a missing or duplicate score, fewer than 3 strategies or 2 seeds.
    """
    wide = _seed_matrix(scores, value, treatment, block, "friedman")
    n, k = wide.shape
    if k < 3 or n < 2:
        raise MetricsInputError(
            f"friedman: needs >= 3 {treatment}s and >= 2 {block}s, got {k} and {n}"
        )
    ranks = np.apply_along_axis(sps.rankdata, 1, wide.to_numpy(float))
    r_sum = ranks.sum(axis=0)
    chi2 = 12.0 / (n * k * (k + 1)) * float((r_sum**2).sum()) - 3.0 * n * (k + 1)
    ties = sum(
        float((c**3 - c).sum())
        for c in (np.unique(row, return_counts=True)[1] for row in wide.to_numpy(float))
    )
    correction = 1.0 - ties / (n * k * (k * k - 1))
    stat = chi2 / correction if correction > 0 else float("nan")
    return FriedmanResult(float(stat), k - 1, friedman_p(stat, k - 1), k, n)
