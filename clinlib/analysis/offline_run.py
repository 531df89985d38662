"""The analysis notebooks' shared start: the offline readers' predictions (paper §5).

Notebooks 07-10 and 16 read the same predictions: the kit's offline readers (``reference``,
``eager``) under the paper's eight strategies in both T3 settings (§5.1-5.5). The harness
run is a no-op when they are stored (resumable); otherwise the readers answer now. A no-op
run still reads every stored prediction twice and checks every cell (seconds per notebook
on the paper profile), so it is only called when a key is missing (:func:`missing_keys`).

Every other stored backbone rides along: an LLM run, outside predictions scored with
``clintrace score`` (``ext:<label>``) and an outside memory's rows (``remote-memory``), each
row labelled by its ``source`` (:func:`row_source`), so the SP1-SP3 and Pareto tables show
them beside the readers. A user's rows may cover only some tasks (``run --tasks``): the tables
are per task, and a pooled figure says over which tasks it is taken.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from clinlib.analysis.failures.selection import missing_predictions
from clinlib.analysis.figures import OFFLINE_READERS, post_setting
from clinlib.core.config import resolve_profile
from clinlib.data.build import load
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import load_predictions, run
from clinlib.eval.interop.external import EXTERNAL_PREFIX
from clinlib.strategies.base import NO_PREP
from clinlib.strategies.prep import RULE_BASED
from clinlib.strategies.registry import (
    PAPER_STRATEGIES,
    SERVICE_STRATEGIES,
    is_kit_strategy,
    parse_label,
)

# both T3 settings: `pre` re-asks only T3 (the staleness probe, §5.5)
OFFLINE_SETTINGS: tuple[str, ...] = ("post", "pre")


@dataclass(frozen=True, eq=False)
class OfflinePredictions:
    """The stored predictions of a profile and the views the analysis notebooks read.

    Attributes:
        profile: the build profile.
        stored: every stored prediction (other notebooks' variants too).
        preds: every backbone's rows under the paper's eight strategies, plus outside
            memories' and outside systems' rows, labelled by ``source`` (notebook 11 adds its
            variants, e.g. another K, to the same store; they are left out).
        questions: the profile's questions.
        post: ``preds`` in the ``post`` setting (every task once).
    """

    profile: str
    stored: pd.DataFrame
    preds: pd.DataFrame
    questions: pd.DataFrame
    post: pd.DataFrame

    def of(self, strategies: Iterable[str]) -> pd.DataFrame:
        """The stored rows under ``strategies`` (and the outside rows), labelled by ``source``."""
        return _readers_rows(self.stored, strategies)


SOURCES: dict[str, str] = {
    "reader": "offline reader (deterministic policy, not an LLM)",
    "outside": "outside predictions (clintrace score)",
    "memory": "outside memory (remote-memory)",
    "llm": "LLM backbone",
}


def row_source(backbone: str, strategy: str) -> str:
    """What made a prediction row (:data:`SOURCES`): an offline reader, an outside system's
    predictions (``ext:`` backbone), an outside memory read by the kit, or an LLM."""
    if str(backbone).startswith(EXTERNAL_PREFIX):
        return SOURCES["outside"]
    if parse_label(str(strategy))[0] in SERVICE_STRATEGIES:
        return SOURCES["memory"]
    return SOURCES["reader"] if backbone in OFFLINE_READERS else SOURCES["llm"]


def _readers_rows(preds: pd.DataFrame, strategies: Iterable[str]) -> pd.DataFrame:
    """Every backbone's rows under ``strategies`` plus every outside memory's and outside
    system's rows, with their ``source``."""
    names = preds["strategy"].astype(str)
    outside = {
        s for s in set(names) if parse_label(s)[0] in SERVICE_STRATEGIES or not is_kit_strategy(s)
    }
    keep = names.isin([*strategies, *outside])
    out = preds[keep]
    return out.assign(
        source=[row_source(b, s) for b, s in zip(out["backbone"], out["strategy"], strict=True)]
    )


def offline_predictions(
    profile: str | None = None, strategies: Iterable[str] = PAPER_STRATEGIES
) -> OfflinePredictions:
    """Answer ``strategies`` with the offline readers in both T3 settings (a no-op when
    stored), then load the predictions and keep the paper's eight strategies' rows.

    Args:
        profile: build profile (None: the current one).
        strategies: the strategies run (default the paper's eight; notebook 16 adds the
            diagnostic controls, read through :meth:`OfflinePredictions.of`).

    Returns:
        The stored predictions and their views (:class:`OfflinePredictions`).
    """
    name = resolve_profile(profile)
    spec = RunSpec(name, list(strategies), list(OFFLINE_READERS), OFFLINE_SETTINGS)
    stored, questions = load_predictions(name), load("questions", name)
    if missing_keys(stored, questions, spec.strategies):
        run(spec, RunOptions(progress=False))
        stored = load_predictions(name)
    preds = _readers_rows(stored, PAPER_STRATEGIES)
    return OfflinePredictions(name, stored, preds, questions, post_setting(preds))


def missing_keys(stored: pd.DataFrame, questions: pd.DataFrame, strategies: Iterable[str]) -> int:
    """How many offline-reader keys (qid, strategy, reader, setting) of ``strategies`` a run
    with the default rule-based prep would still ask: rows made with another prep model (an
    LLM-built memory) do not count as done, as the harness keys them apart (``prep_model``).
    0 means :func:`clinlib.eval.harness.runner.run` would answer nothing."""
    own = stored[stored["prep_model"].isin([NO_PREP, RULE_BASED])]
    return missing_predictions(own, questions, list(strategies), OFFLINE_READERS, OFFLINE_SETTINGS)


__all__ = [
    "OFFLINE_SETTINGS",
    "SOURCES",
    "OfflinePredictions",
    "missing_keys",
    "offline_predictions",
    "row_source",
]
