"""One place for figure style and saving (docs/design.md principle 3, pyprobml's ``savefig``).

Every notebook ends with ``savefig(chart, "NN_slug")``, which writes
``figures/<profile>/NN_slug.png`` and ``.svg`` through vl-convert (headless, offline): each
profile's figures in their own folder, so a MEDS run never leaves figures beside another
profile's.
"""

from __future__ import annotations

import re
from pathlib import Path

import altair as alt
import pandas as pd

from clinlib.core import charts as charts_display
from clinlib.core.config import figures_dir
from clinlib.core.io import atomic_path

# Colour-blind-safe categorical palette (Okabe–Ito) shared by every figure.
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
]
FONT = "DejaVu Sans"
_SLUG = re.compile(r"^\d{2}_[a-z0-9_]+$")


def theme() -> dict:
    """The kit's altair theme config (fonts, sizes, palette)."""
    return {
        "config": {
            "font": FONT,
            "view": {"stroke": None, "continuousWidth": 360, "continuousHeight": 220},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "grid": True, "gridOpacity": 0.4},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "title": {"fontSize": 14, "anchor": "start"},
            "range": {"category": PALETTE},
        }
    }


# Rows a chart may embed: Altair refuses more than 5,000 by default, and the paper profile's
# per-patient panels (D5: 385 patients x 8 strategies x 2 readers) need more.
MAX_CHART_ROWS = 20_000


def use_theme(charts: str | None = None) -> str:
    """Register and enable the kit theme and the kit's offline chart display (idempotent).

    Args:
        charts: ``interactive`` (default: JupyterLab's bundled Vega draws the chart, an SVG
            for everything else) or ``static`` (SVG + PNG only); default
            ``$CLINTRACE_CHARTS``. See :mod:`clinlib.core.charts`.

    Returns:
        the chart mode in force.
    """
    alt.theme.register("clintrace", enable=True)(theme)
    alt.data_transformers.enable("default", max_rows=MAX_CHART_ROWS)
    return charts_display.enable(charts)


def savefig(
    chart: alt.TopLevelMixin,
    name: str,
    formats: tuple[str, ...] = ("png", "svg"),
    profile: str | None = None,
) -> Path:
    """Save ``chart`` as ``figures/<profile>/<name>.<fmt>`` and return the PNG (or first) path.

    Args:
        chart: an altair chart.
        name: ``NN_slug`` (two-digit notebook number, lowercase slug).
        formats: file formats to write.
        profile: whose figures (default: the active profile, $CLINTRACE_PROFILE).
    """
    if not _SLUG.match(name):
        raise ValueError(f"figure name {name!r} must look like 'NN_slug' (e.g. '01_cohort_funnel')")
    folder = figures_dir(profile)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = folder / f"{name}.{fmt}"
        chart.save(str(path), scale_factor=2 if fmt == "png" else 1)
        paths.append(path)
    return paths[0]


def savetable(df: pd.DataFrame, name: str, profile: str | None = None) -> Path:
    """Save a tidy table as ``figures/<profile>/<name>.csv`` (same ``NN_slug`` naming and
    folder as :func:`savefig`) and return its path."""
    if not _SLUG.match(name):
        raise ValueError(f"table name {name!r} must look like 'NN_slug' (e.g. '05_retrieval_hits')")
    folder = figures_dir(profile)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.csv"
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path
