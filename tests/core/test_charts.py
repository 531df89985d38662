"""clinlib.core.charts: what a chart's display bundle holds in each mode, the bars it draws
(heights worked out by hand), the mode switch, and that an exported notebook carries the
chart with no CDN (issue 34). The browser side is tests/test_lab_browser.py."""

from __future__ import annotations

import ast
import base64
import json
import re
import xml.etree.ElementTree as ET

import altair as alt
import nbformat
import pandas as pd
import pytest
from nbconvert import HTMLExporter

from clinlib import use_theme
from clinlib.core import charts
from clinlib.core.config import NOTEBOOKS_DIR

SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def bars() -> alt.Chart:
    """Three bars on a fixed 0-3 scale, 120 × 90 px: a=1, b=3, c=2."""
    df = pd.DataFrame({"k": ["a", "b", "c"], "v": [1, 3, 2]})
    return (
        alt.Chart(df, title="Three bars")
        .mark_bar()
        .encode(x="k:N", y=alt.Y("v:Q", scale=alt.Scale(domain=[0, 3])), tooltip=["k", "v"])
        .properties(width=120, height=90)
    )


@pytest.fixture
def restore_renderer():
    active, options = alt.renderers.active, dict(alt.renderers.options)
    yield
    alt.renderers.enable(active, **options)


def _bar_heights(svg: str) -> dict[str, float]:
    """Bar label -> drawn height (the ``v`` of each rect path) from the SVG."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG_NS}svg"
    out = {}
    for g in root.iter(f"{SVG_NS}g"):
        if "mark-rect" in g.get("class", ""):
            for path in g.iter(f"{SVG_NS}path"):
                label = path.get("aria-label")  # "k: a; v: 1"
                out[label.split(";")[0].removeprefix("k: ")] = float(
                    re.search(r"v(-?[\d.]+)", path.get("d")).group(1)
                )
    return out


def test_interactive_bundle_is_a_vega5_spec_plus_an_svg(bars):
    data, meta = charts.chart_bundle(bars.to_dict(), "interactive")
    assert set(data) == {charts.VEGA5_MIME, "image/svg+xml", "text/plain"} and meta == {}
    vega = data[charts.VEGA5_MIME]
    assert vega["$schema"] == "https://vega.github.io/schema/vega/v5.json"
    # the data travel with the spec (nothing to fetch) and the tooltip survives compilation
    values = [d["values"] for d in vega["data"] if "values" in d]
    assert values == [[{"k": "a", "v": 1}, {"k": "b", "v": 3}, {"k": "c", "v": 2}]]
    (rect,) = [m for m in vega["marks"] if m["type"] == "rect"]
    assert "tooltip" in rect["encode"]["update"]
    assert data["text/plain"] == "<altair chart: Three bars (interactive rendering)>"


def test_the_svg_draws_each_bar_at_its_value(bars):
    data, _ = charts.chart_bundle(bars.to_dict())
    # 90 px for 3 units: 30 px per unit (by hand)
    assert _bar_heights(data["image/svg+xml"]) == pytest.approx({"a": 30, "b": 90, "c": 60})
    assert "Three bars" in data["image/svg+xml"]


def test_static_bundle_is_svg_plus_a_2x_png_shown_at_chart_size(bars):
    data, meta = charts.chart_bundle(bars.to_dict(), "static")
    assert set(data) == {"image/svg+xml", "image/png", "text/plain"}
    w, h = charts.png_size(data["image/png"])
    svg = ET.fromstring(data["image/svg+xml"])
    # the PNG has twice the SVG's pixels and is displayed at the SVG's size
    assert (w, h) == (2 * int(svg.get("width")), 2 * int(svg.get("height")))
    assert meta == {"image/png": {"width": w // 2, "height": h // 2}}
    assert _bar_heights(data["image/svg+xml"]) == pytest.approx({"a": 30, "b": 90, "c": 60})


def test_png_size_refuses_what_is_not_a_png():
    with pytest.raises(ValueError, match="not a PNG"):
        charts.png_size(b"GIF89a" + bytes(30))


def test_mode_from_argument_then_environment_then_default(monkeypatch):
    monkeypatch.delenv(charts.CHARTS_ENV, raising=False)
    assert charts.resolve_mode() == "interactive"
    monkeypatch.setenv(charts.CHARTS_ENV, "static")
    assert charts.resolve_mode() == "static"
    assert charts.resolve_mode("interactive") == "interactive"
    monkeypatch.setenv(charts.CHARTS_ENV, "svg")
    with pytest.raises(ValueError, match=r"^CLINTRACE_CHARTS='svg' is not a chart mode; use "
                                         r"one of interactive, static$"):  # fmt: skip
        charts.resolve_mode()
    with pytest.raises(ValueError, match=r"^charts='html' is not"):
        charts.resolve_mode("html")


def test_use_theme_makes_every_chart_display_through_the_kit(bars, monkeypatch, restore_renderer):
    monkeypatch.delenv(charts.CHARTS_ENV, raising=False)
    assert use_theme() == "interactive"
    assert alt.renderers.active == charts.RENDERER
    data, _ = bars._repr_mimebundle_()
    assert charts.VEGA5_MIME in data and "text/html" not in data  # no CDN-loading HTML
    monkeypatch.setenv(charts.CHARTS_ENV, "static")
    assert use_theme() == "static"
    data, _ = bars._repr_mimebundle_()
    assert "image/png" in data and charts.VEGA5_MIME not in data
    # the kit theme is applied to what is rendered: its title font
    assert 'font-family="DejaVu Sans"' in data["image/svg+xml"]


def test_an_exported_notebook_shows_the_svg_and_loads_nothing_from_a_cdn(bars):
    data, meta = charts.chart_bundle(bars.to_dict())
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=data, metadata=meta)]
    nb.cells = [cell]
    html, _ = HTMLExporter().from_notebook_node(nb)
    # nbconvert 7 embeds an SVG output as a data-URI image
    (b64,) = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert _bar_heights(base64.b64decode(b64).decode()) == pytest.approx(
        {"a": 30, "b": 90, "c": 60}
    )
    assert "cdn.jsdelivr.net/npm/vega" not in html and "vega-embed" not in html


def _calls_use_theme(source: str) -> bool:
    src = "\n".join("" if ln.lstrip()[:1] in "%!" else ln for ln in source.splitlines())
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None))
               == "use_theme" for n in ast.walk(ast.parse(src)))  # fmt: skip


def test_every_notebook_sets_the_chart_display_in_its_first_code_cell():
    notebooks = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 15
    missing = []
    for nb in notebooks:
        cells = json.loads(nb.read_text())["cells"]
        first = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if not _calls_use_theme(first):
            missing.append(nb.name)
    assert missing == []
