"""The analysis notebooks' shared start: the offline readers' predictions (paper §5).

Notebooks 07-10 and 16 read the same predictions: the kit's offline readers (``reference``,
``eager``) under the paper's eight strategies in both T3 settings (§5.1-5.5). The harness
run is a no-op when they are stored (resumable); otherwise the readers answer now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from clinlib.analysis.figures import OFFLINE_READERS, post_setting
from clinlib.core.config import resolve_profile
from clinlib.data.build import load
from clinlib.eval.harness.records import RunOptions, RunSpec
from clinlib.eval.harness.runner import load_predictions, run
from clinlib.strategies.registry import PAPER_STRATEGIES

# both T3 settings: `pre` re-asks only T3 (the staleness probe, §5.5)
OFFLINE_SETTINGS: tuple[str, ...] = ("post", "pre")


@dataclass(frozen=True, eq=False)
class OfflinePredictions:
    """The stored predictions of a profile and the views the analysis notebooks read.

    Attributes:
        profile: the build profile.
        stored: every stored prediction (other notebooks' variants too).
        preds: the offline readers' rows under the paper's eight strategies only (notebook 11
            adds its variants, e.g. another K, to the same store).
        questions: the profile's questions.
        post: ``preds`` in the ``post`` setting (every task once).
    """

    profile: str
    stored: pd.DataFrame
    preds: pd.DataFrame
    questions: pd.DataFrame
    post: pd.DataFrame

    def of(self, strategies: Iterable[str]) -> pd.DataFrame:
        """The offline readers' stored rows under ``strategies``."""
        return _readers_rows(self.stored, strategies)


def _readers_rows(preds: pd.DataFrame, strategies: Iterable[str]) -> pd.DataFrame:
    keep = preds["backbone"].isin(OFFLINE_READERS) & preds["strategy"].isin(list(strategies))
    return preds[keep]


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
    run(spec, RunOptions(progress=False))
    stored = load_predictions(name)
    preds = _readers_rows(stored, PAPER_STRATEGIES)
    return OfflinePredictions(name, stored, preds, load("questions", name), post_setting(preds))


__all__ = ["OFFLINE_SETTINGS", "OfflinePredictions", "offline_predictions"]
