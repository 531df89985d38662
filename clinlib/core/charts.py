"""How an altair chart displays in a notebook: offline, in every frontend.

altair 6 emits Vega-Lite 6. Its default renderer writes HTML that loads vega from a CDN
(``Error loading script: https://cdn.jsdelivr.net/npm/vega@6`` offline), and JupyterLab 4's
built-in Vega renderer (``@jupyterlab/vega5-extension``) draws only Vega 5 / Vega-Lite ≤ 5.
So the kit renders in the kernel, through vl-convert (no network, no browser), one bundle per
chart whose frontends each pick what they can draw:

``interactive`` (default)
    ``application/vnd.vega.v5+json``: the chart compiled to a Vega spec by vl-convert, drawn
    by JupyterLab's bundled Vega (tooltips, zoom, the export menu), also in a notebook opened
    later: that renderer is marked safe, so it draws untrusted outputs too. Vega 6 changed
    packaging only (ESM); its specs are the same language as Vega 5's (vega/vega#4032: "no
    breaking changes on the specs"), so the compiled spec is labelled with the v5 schema.
    Plus ``image/svg+xml`` for everything without that renderer: nbconvert's HTML, GitHub,
    a static viewer.
``static``
    ``image/svg+xml`` and ``image/png`` (2× pixels, shown at the chart's size): no JavaScript
    anywhere; the PNG is what JupyterLab shows for an untrusted notebook, where it never
    shows SVG.

One place chooses: :func:`clinlib.core.plots.use_theme` (``charts=`` or ``$CLINTRACE_CHARTS``)
enables the renderer registered here. altair's ``jupyter`` renderer (anywidget) was not
chosen: it needs another dependency and its widget output is not kept in a saved notebook or
its HTML export.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import altair as alt
import vl_convert as vlc

CHARTS_ENV = "CLINTRACE_CHARTS"
MODES: tuple[str, ...] = ("interactive", "static")
RENDERER = "clintrace"
VEGA5_MIME = "application/vnd.vega.v5+json"
VEGA5_SCHEMA = "https://vega.github.io/schema/vega/v5.json"
PNG_SCALE = 2
# the Vega-Lite version altair writes, as vl-convert names it ("v6.4.1" -> "6.4")
VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


def resolve_mode(charts: str | None = None) -> str:
    """``charts`` if given, else ``$CLINTRACE_CHARTS``, else ``interactive``.

    Raises:
        ValueError: an unknown mode, naming where it came from and the known ones.
    """
    source = "charts" if charts is not None else CHARTS_ENV
    mode = (charts if charts is not None else os.environ.get(CHARTS_ENV, "")) or MODES[0]
    if mode not in MODES:
        raise ValueError(f"{source}={mode!r} is not a chart mode; use one of {', '.join(MODES)}")
    return mode


def to_vega(spec: dict[str, Any]) -> dict[str, Any]:
    """The Vega-Lite ``spec`` compiled to Vega by vl-convert (same Vega-Lite as altair)."""
    return vlc.vegalite_to_vega(spec, vl_version=VL_VERSION)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", png[16:24])


def chart_bundle(spec: dict[str, Any], mode: str = MODES[0]) -> tuple[dict, dict]:
    """The display bundle of one chart (see the module docstring for what each mode holds).

    Returns:
        (data, metadata) as IPython's ``_repr_mimebundle_`` returns them.
    """
    mode = resolve_mode(mode)
    vega = to_vega(spec)
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    data: dict[str, Any] = {
        "image/svg+xml": vlc.vega_to_svg(vega),
        "text/plain": f"<altair chart{f': {title}' if title else ''} ({mode} rendering)>",
    }
    meta: dict[str, Any] = {}
    if mode == "interactive":
        data[VEGA5_MIME] = {**vega, "$schema": VEGA5_SCHEMA}
    else:
        png = vlc.vega_to_png(vega, scale=PNG_SCALE)
        width, height = png_size(png)
        data["image/png"] = png
        meta["image/png"] = {"width": width // PNG_SCALE, "height": height // PNG_SCALE}
    return data, meta


def _renderer(spec: dict[str, Any], mode: str = MODES[0], **_: Any) -> tuple[dict, dict]:
    return chart_bundle(spec, mode)


def enable(charts: str | None = None) -> str:
    """Make every altair chart display through :func:`chart_bundle`; returns the mode."""
    mode = resolve_mode(charts)
    alt.renderers.register(RENDERER, _renderer)
    alt.renderers.enable(RENDERER, mode=mode)
    return mode
