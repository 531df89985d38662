"""Vectorised random and calendar helpers shared by the SYNTHETIC table families (paper §3
"Cohort"). Each draws from the generator passed in, so call order fixes every byte.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


def exact_labels(rng: np.random.Generator, n: int, shares) -> np.ndarray:
    """``n`` labels whose counts follow ``shares`` exactly (largest remainder), shuffled."""
    shares = np.asarray(shares, dtype=float)
    raw = shares / shares.sum() * n
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: n - counts.sum()]] += 1
    return rng.permutation(np.repeat(np.arange(len(shares)), counts))


def choose(rng: np.random.Generator, probs, size: int) -> np.ndarray:
    """Categorical draws from one probability vector."""
    cum = np.cumsum(np.asarray(probs, dtype=float))
    return np.minimum(np.searchsorted(cum / cum[-1], rng.random(size), side="right"), len(cum) - 1)


def choose_by(rng: np.random.Generator, table: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Categorical draws where row ``cls[i]`` of ``table`` gives draw i's probabilities."""
    cum = np.cumsum(table, axis=1)
    cum = cum / cum[:, -1:]
    u = rng.random(cls.size)
    return np.minimum((u[:, None] >= cum[cls]).sum(axis=1), table.shape[1] - 1)


def uniform(rng: np.random.Generator, lo, hi, size: int) -> np.ndarray:
    return lo + (np.asarray(hi) - lo) * rng.random(size)


def lognoise(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    return np.exp(sigma * rng.standard_normal(size))


def to_minute(t: np.ndarray) -> np.ndarray:
    """Seconds truncated to the whole minute (MIMIC times have minute resolution)."""
    return (np.asarray(t, dtype=np.int64) // 60) * 60


def rank_in_sorted_groups(groups: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal values (input sorted)."""
    if groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(groups) != 0) + 1]
    lengths = np.diff(np.r_[starts, groups.size])
    return np.arange(groups.size) - np.repeat(starts, lengths)


def year_start_s(years: np.ndarray) -> np.ndarray:
    """Epoch seconds of 1 January of each (shifted) year."""
    return (
        (np.asarray(years) - 1970).astype("datetime64[Y]").astype("datetime64[s]").astype(np.int64)
    )


def month_start_s(years: np.ndarray, month: int) -> np.ndarray:
    """Epoch seconds of the first day of ``month`` (1-12) in each year."""
    months = (np.asarray(years, dtype=np.int64) - 1970) * 12 + (month - 1)
    return months.astype("datetime64[M]").astype("datetime64[s]").astype(np.int64)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def masked(value, mask: np.ndarray) -> np.ndarray:
    """``value[mask]`` for a per-row array, or the scalar repeated, as int64."""
    if np.ndim(value):
        return np.asarray(value, dtype=np.int64)[mask]
    return np.full(int(mask.sum()), value, dtype=np.int64)


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    """Concatenate (an empty list gives an empty array of ``dtype``)."""
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


@lru_cache(maxsize=1)
def providers() -> np.ndarray:
    """A fixed pool of MIMIC-style provider ids (``P`` + 5 characters)."""
    rng = np.random.default_rng(20_240_601)
    alphabet = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    chars = alphabet[rng.integers(0, alphabet.size, size=(4000, 5))]
    return np.unique(np.array(["P" + "".join(row) for row in chars]))
