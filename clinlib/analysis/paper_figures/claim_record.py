"""The claim record of the text audit: what the paper prints, how to recompute it, and the
loop body that turns one claim into audit rows (:func:`.audit.check_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from clinlib.analysis.paper_figures.audit import check_rows
from clinlib.analysis.paper_figures.cells import PaperFiguresError

# --- the claim record and what its recomputation reads --------------------------------------


@dataclass(frozen=True)
class Evidence:
    """The published tables and the frames built from them once for every claim."""

    tables: Mapping[int, pd.DataFrame]
    cube: pd.DataFrame  # accuracy_cube(tables)
    summary: pd.DataFrame  # cell_summary(tables)

    @property
    def idx(self) -> pd.DataFrame:
        return self.summary.set_index(["strategy", "backbone"])

    def acc(self, strategy: str, task: str, backbones: Sequence[str] | None = None) -> pd.Series:
        """Table 14 accuracy of ``strategy`` on ``task``, by backbone."""
        cube = self.cube
        sel = cube[(cube["strategy"] == strategy) & (cube["task"] == task)]
        if backbones is not None:
            sel = sel[sel["backbone"].isin(backbones)]
        if sel.empty:
            raise PaperFiguresError(f"Table 14 has no {task} cells for {strategy!r}")
        return sel.set_index("backbone")["accuracy"]


class Ours(NamedTuple):
    """A recomputation whose note names what it found (overrides :attr:`Claim.note`)."""

    values: object
    note: str | Sequence[str]


@dataclass(frozen=True)
class Claim:
    """One number (or list of numbers) the text prints, and how to recompute it.

    Attributes:
        check: audit id shared by the claim's rows.
        source: where the paper prints it (section, caption).
        items: row labels; with a mapping ``claimed``, a pattern formatted with each key
            (None = the key itself); None otherwise = the index of what ``ours`` returns.
        claimed: the printed value: a scalar, one per item, a mapping key -> value (one row
            per key ``ours`` can recompute, in the mapping's order), or a function of the
            :class:`Evidence` when the printed number is a table entry.
        ours: Evidence -> recomputed value(s) (a Series for mapping claims), or :class:`Ours`.
        tol, unit, relation, note: as :func:`.audit.check_rows`.
    """

    check: str
    source: str
    items: str | Sequence[str] | None
    claimed: object
    ours: Callable[[Evidence], object]
    tol: float | Sequence[float]
    unit: str
    relation: str | Sequence[str] = "="
    note: str | Sequence[str] = ""


def claim_rows(claim: Claim, ev: Evidence) -> pd.DataFrame:
    """The audit rows of one claim (:data:`.audit.AUDIT_COLUMNS`)."""
    got = claim.ours(ev)
    values, note = (got.values, got.note) if isinstance(got, Ours) else (got, claim.note)
    claimed = claim.claimed(ev) if callable(claim.claimed) else claim.claimed
    items = claim.items
    if isinstance(claimed, Mapping):
        keys = [k for k in claimed if k in values.index]
        items = [str(k) if items is None else items.format(k) for k in keys]
        claimed = [claimed[k] for k in keys]
        values = [values[k] for k in keys]
    elif items is None:
        items = list(values.index)
    return check_rows(
        claim.check,
        claim.source,
        items,
        claimed,
        values,
        claim.tol,
        claim.unit,
        claim.relation,
        note,
    )
