"""``python -m bench.lab_browser``: numbered notebooks opened in JupyterLab, served headless,
and run (Run All Cells) in a real Chromium with the network unavailable to the page, as a
researcher on an air-gapped machine opens them (issue 34).

JupyterLab runs on a free loopback port with no token, no browser launch, and its config,
data, runtime and IPython dirs in a temporary folder (nothing is written to ``~``); it serves
a temporary copy of the notebooks, so the committed ones stay output-free. Playwright aborts
every request whose host is not the loopback server. For each notebook: every code cell ran
(a number in its prompt), no output is an error, no page text says "Error loading script",
every chart output (``application/vnd.vega.v5+json``, :mod:`clinlib.core.charts`) holds a
drawn ``canvas`` or ``svg``; notebook 02's dialogue viewer and notebook 13's failure explorer
appear and respond (a different patient / prediction picked changes the pane). The first
notebook, saved and made untrusted, is opened again without running (charts drawn) and its
nbconvert HTML export opened from disk (every chart an SVG image). A control notebook using
altair's own renderer must show the issue's "Error loading script". A screenshot of one
rendered chart, with its tooltip, goes to ``--shots``. ``tests/test_lab_browser.py`` runs it on the quick
profile; Debian's ``/usr/bin/chromium`` through Playwright, as ``bench.apps_browser``.

Usage: ``python -m bench.lab_browser [--profile quick] [--shots docs/img] [NN_slug ...]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.apps_browser import _free_port, browser_missing, chromium, served
from clinlib.core.charts import VEGA5_MIME
from clinlib.core.config import BUILD_DIR, NOTEBOOKS_DIR, PROFILE_ENV, REPO_ROOT

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
NOTEBOOKS = ("13_failure_explorer", "02_dialogue_inspection")
RUN_TIMEOUT_S = 300.0
# Every cell in the DOM (JupyterLab 4 otherwise leaves off-screen cells unrendered), so every
# output can be checked; the defaults otherwise.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}  # fmt: skip


def lab_dirs(root: Path) -> dict[str, str]:
    """The environment that keeps JupyterLab and the kernel out of ``~`` (all under root)."""
    dirs = {"JUPYTER_CONFIG_DIR": root / "config", "JUPYTER_DATA_DIR": root / "data",
            "JUPYTER_RUNTIME_DIR": root / "runtime", "IPYTHONDIR": root / "ipython"}  # fmt: skip
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    settings = dirs["JUPYTER_CONFIG_DIR"] / "lab" / "user-settings"
    for name, value in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    return {k: str(v) for k, v in dirs.items()}


@contextlib.contextmanager
def serve_lab(work: Path, profile: str, log: Path, timeout_s: float = 120.0) -> Iterator[str]:
    """``jupyter lab`` on a free loopback port serving ``work``; yields its URL once it answers
    and stops it (its process group) afterwards. Kernels see $CLINTRACE_PROFILE=profile and
    this checkout's clinlib first on the path."""
    port = _free_port()
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, **lab_dirs(work / ".jupyter"), PROFILE_ENV: profile, "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={work}",
           "--ServerApp.port_retries=0", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.expose_app_in_browser=True"]  # fmt: skip
    if os.geteuid() == 0:  # CI and this container run as root
        cmd.append("--allow-root")
    url = f"http://127.0.0.1:{port}/lab"
    with served(cmd, env, log, url, "jupyter lab", probe=f"{url}/api/settings", cwd=work,
                timeout_s=timeout_s) as ready:  # fmt: skip
        yield ready


def offline(page: Any) -> list[str]:
    """Abort every request of ``page`` to a host other than the loopback server; returns the
    (live) list of the URLs aborted."""
    aborted: list[str] = []

    def _route(route: Any) -> None:
        url = route.request.url
        host = urllib.parse.urlsplit(url).hostname or ""
        if url.startswith(("data:", "blob:", "file:")) or host in LOOPBACK:
            route.continue_()
        else:
            aborted.append(url)
            route.abort("internetdisconnected")

    page.route("**/*", _route)
    return aborted


# JavaScript run in the page through the app JupyterLab exposes (expose_app_in_browser).
_JS_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const nb = panel.content, cells = [];
  for (let i = 0; i < nb.widgets.length; i++) {
    const c = nb.widgets[i], m = c.model;
    if (m.type !== 'code') continue;
    const outs = [];
    for (let j = 0; j < m.outputs.length; j++) {
      const o = m.outputs.get(j);
      outs.push({type: o.type, mimes: Object.keys(o.data || {})});
    }
    cells.push({index: i, count: m.executionCount, outputs: outs});
  }
  return {cells, kernel: panel.sessionContext.session?.kernel?.status || 'none',
          dirty: panel.context.model.dirty};
}"""


def _state(page: Any) -> dict:
    return page.evaluate(_JS_STATE)


def open_notebook(page: Any, url: str, name: str, timeout_s: float) -> None:
    """Open ``name``.ipynb in JupyterLab and wait for its kernel to be idle."""
    # a workspace of its own, reset: only this notebook is open, whatever ran before
    page.goto(f"{url}/workspaces/{name}/tree/{name}.ipynb?reset")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=timeout_s * 1000)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status"
        " === 'idle'", timeout=timeout_s * 1000)  # fmt: skip


def run_all(page: Any, timeout_s: float) -> float:
    """Run → Run All Cells from the menu bar, then wait until every code cell has run;
    returns the seconds it took."""
    t0 = time.perf_counter()
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    deadline = time.monotonic() + timeout_s
    while True:
        st = _state(page)
        if st["kernel"] == "idle" and all(c["count"] for c in st["cells"]):
            return time.perf_counter() - t0
        errors = [
            c["index"] for c in st["cells"] if any(o["type"] == "error" for o in c["outputs"])
        ]
        if errors:  # Run All stops at the first error
            return time.perf_counter() - t0
        if time.monotonic() > deadline:
            todo = [c["index"] for c in st["cells"] if not c["count"]]
            raise TimeoutError(f"cells {todo} had not run after {timeout_s:.0f} s")
        time.sleep(0.5)


ERROR_TEXTS = ("Error loading script", "Javascript Error", "Error displaying widget",
               "Error rendering output item")  # fmt: skip
# a chart drawn by JupyterLab's Vega renderer: vega-embed's canvas (or svg), with a size
_JS_CHARTS = """() => Array.from(document.querySelectorAll('.jp-RenderedVega5')).map(el => {
  const g = el.querySelector('canvas, svg.marks');
  const r = g ? g.getBoundingClientRect() : null;
  return {tag: g ? g.tagName.toLowerCase() : null, width: r ? r.width : 0,
          height: r ? r.height : 0, error: el.innerText.includes('Error')};
})"""


def check_charts(page: Any, state: dict, timeout_s: float = 60.0) -> dict:
    """Every chart output of the notebook's model is drawn (a sized canvas or svg); waits up
    to ``timeout_s`` for JupyterLab to load its Vega and draw."""
    expected = sum(VEGA5_MIME in o["mimes"] for c in state["cells"] for o in c["outputs"])
    deadline = time.monotonic() + timeout_s
    while True:
        drawn = page.evaluate(_JS_CHARTS)
        if all(d["tag"] or d["error"] for d in drawn) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    ok = [d for d in drawn if d["tag"] and d["width"] > 50 and d["height"] > 50 and not d["error"]]
    return {"charts_expected": expected, "charts_drawn": len(ok), "chart_elements": drawn}


def _widget(page: Any, label: str) -> Any:
    """The <select> of the ipywidgets Dropdown whose description is ``label``."""
    box = page.locator(".widget-dropdown", has=page.locator("label", has_text=label))
    return box.first.locator("select")


def pick_changes(page: Any, label: str, pane: str, timeout_s: float) -> dict:
    """Choose another option in the ``label`` dropdown and wait until the HTML ``pane``
    (a CSS selector inside the widget box) changes; returns what was picked."""
    select = _widget(page, label)
    select.wait_for(timeout=timeout_s * 1000)
    options = select.locator("option").all_inner_texts()
    if len(options) < 2:
        raise AssertionError(f"the {label!r} picker offers {len(options)} option(s)")
    before = page.locator(pane).last.inner_text()
    current = select.evaluate("s => s.selectedIndex")
    target = 1 if current != 1 else 0
    select.select_option(index=target)
    deadline = time.monotonic() + timeout_s
    while page.locator(pane).last.inner_text() == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"picking {options[target]!r} in {label!r} changed nothing")
        time.sleep(0.25)
    return {"picker": label, "options": len(options), "picked": options[target]}


# what to do with each notebook's widgets: (dropdown label, the pane that must change)
WIDGETS = {
    "13_failure_explorer": ("prediction", ".widget-vbox .widget-html"),
    "02_dialogue_inspection": ("patient", ".widget-vbox .widget-html"),
}


def check_notebook(page: Any, url: str, name: str, timeout_s: float = RUN_TIMEOUT_S) -> dict:
    """Open ``name``, Run All, and check cells, errors, charts and widgets."""
    t0 = time.perf_counter()
    open_notebook(page, url, name, timeout_s)
    opened = time.perf_counter() - t0
    ran = run_all(page, timeout_s)
    state = _state(page)
    errors = [c["index"] for c in state["cells"] if any(o["type"] == "error" for o in c["outputs"])]
    text = page.locator(".jp-NotebookPanel").first.inner_text()
    out = {"notebook": name, "open_s": round(opened, 1), "run_all_s": round(ran, 1),
           "code_cells": len(state["cells"]), "cells_run": sum(bool(c["count"]) for c in state["cells"]),
           "error_cells": errors, "error_texts": [t for t in ERROR_TEXTS if t in text],
           **check_charts(page, state)}  # fmt: skip
    if name in WIDGETS and not errors:
        out["widget"] = pick_changes(page, *WIDGETS[name], timeout_s=60)
    return out


def save_notebook(page: Any, timeout_s: float = 60.0) -> None:
    """File → Save (JupyterLab signs what it saves: trusted for this server)."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                           timeout=timeout_s * 1000)  # fmt: skip


_JS_TRUSTED = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(c => c.model.type === 'code' && c.model.outputs.length).map(c => c.model.trusted)"""
_JS_SVG_IMAGES = """() => Array.from(document.querySelectorAll('img[src^="data:image/svg+xml"]'))
  .map(i => i.naturalWidth)"""


def check_opened_later(page: Any, url: str, work: Path, name: str, timeout_s: float) -> dict:
    """The executed ``name`` (saved by :func:`save_notebook`), changed by one metadata key so
    that its signature no longer matches (untrusted, as a notebook executed elsewhere), opened
    without running anything: charts drawn; then its nbconvert HTML export opened from disk:
    every chart an SVG image that decodes."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(work / f"{name}.ipynb", as_version=4)
    nb.metadata["clintrace"] = {"opened_later": True}
    later = f"{name}-later"
    nbformat.write(nb, work / f"{later}.ipynb")
    open_notebook(page, url, later, timeout_s)
    state = _state(page)
    out = {"trusted": page.evaluate(_JS_TRUSTED), **check_charts(page, state)}
    html = work / f"{later}.html"
    html.write_text(HTMLExporter().from_notebook_node(nb)[0])
    page.goto(html.as_uri())
    page.wait_for_load_state("load")
    out["html_svg_images"] = page.evaluate(_JS_SVG_IMAGES)
    out["html_error_texts"] = [t for t in ERROR_TEXTS if t in page.locator("body").inner_text()]
    return out


PROBE_URL = "https://cdn.jsdelivr.net/npm/vega@6?noext"  # what altair's default HTML loads


def probe_offline(page: Any) -> str:
    """Fetch :data:`PROBE_URL` from the page: ``blocked`` proves the network is unavailable."""
    js = "u => fetch(u).then(() => 'reached', () => 'blocked')"
    return page.evaluate(js, PROBE_URL)


# The symptom, reproduced: altair's own default renderer in the same session.
CONTROL = "00_cdn_control"
CONTROL_SOURCE = """import altair as alt
import pandas as pd

alt.renderers.enable("default")  # altair's HTML renderer: loads vega from a CDN
alt.Chart(pd.DataFrame({"x": [1, 2, 3]})).mark_point().encode(x="x:Q")"""


def write_control(work: Path) -> None:
    """A one-cell notebook that displays a chart with altair's default renderer."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CONTROL_SOURCE)])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, work / f"{CONTROL}.ipynb")


def check_control(page: Any, url: str, timeout_s: float) -> dict:
    """Run the control notebook: its chart must fail exactly as the issue reports offline,
    which shows that these checks would see the failure."""
    open_notebook(page, url, CONTROL, timeout_s)
    run_all(page, timeout_s)
    shown = page.locator(".jp-OutputArea-output", has_text="Error loading script")
    try:
        shown.first.wait_for(timeout=60_000)
    except Exception:  # playwright's TimeoutError: reported, asserted by the caller
        return {"symptom": None, "charts_drawn": len(page.evaluate(_JS_CHARTS))}
    return {
        "symptom": shown.first.inner_text().strip(),
        "charts_drawn": len(page.evaluate(_JS_CHARTS)),
    }


def stop_kernels(page: Any) -> None:
    """Shut down every kernel session of the server, through the page's JupyterLab."""
    page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")


# points of a chart's canvas (fractions of its size) tried in turn for a tooltip
HOVER_POINTS = ((0.45, 0.35), (0.55, 0.45), (0.35, 0.25), (0.6, 0.6), (0.5, 0.2), (0.3, 0.5))


def hover_tooltip(page: Any, chart: Any) -> str:
    """Move the mouse over ``chart`` until Vega shows a tooltip; returns its text ('' if
    none appeared)."""
    canvas = chart.locator("canvas, svg.marks").first
    box = canvas.bounding_box()
    tip = page.locator("#vg-tooltip-element.visible")
    for fx, fy in HOVER_POINTS:
        page.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
        try:
            tip.wait_for(timeout=1500)
        except Exception:  # playwright's TimeoutError: no tooltip at this point
            continue
        return tip.inner_text().strip()
    return ""


def shoot_chart(page: Any, shot: Path, index: int = -1) -> str:
    """Screenshot one rendered chart output (the last by default) with a tooltip shown;
    returns the tooltip's text."""
    el = page.locator(".jp-OutputArea-child", has=page.locator(".jp-RenderedVega5")).nth(index)
    el.scroll_into_view_if_needed()
    tip = hover_tooltip(page, el)
    el.screenshot(path=str(shot))
    return tip


def run_lab(names: tuple[str, ...], profile: str, shots: Path, timeout_s: float = RUN_TIMEOUT_S,
            control: bool = True) -> dict:  # fmt: skip
    """Serve a copy of the notebooks, check each of ``names`` in Chromium offline, screenshot
    the first drawn notebook's last chart, with its tooltip, to ``shots``/lab-chart.png; with
    ``control``, first run :data:`CONTROL_SOURCE` (altair's own renderer), which must show
    the issue's error."""
    shots.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ct-lab-") as tmp:
        work = Path(tmp)
        for name in names:
            shutil.copy(NOTEBOOKS_DIR / f"{name}.ipynb", work)
        if control:
            write_control(work)
        log = work / "jupyter-lab.log"
        with serve_lab(work, profile, log) as url, chromium() as ctx:
            page = ctx.new_page()
            aborted = offline(page)
            results = []
            out: dict[str, Any] = {"profile": profile}
            try:
                if control:
                    out["control"] = check_control(page, url, timeout_s)
                    stop_kernels(page)
                out["probe"] = probe_offline(page)
                out["aborted_before"] = list(aborted)  # the control's and the probe's
                del aborted[:]
                for name in names:
                    results.append(check_notebook(page, url, name, timeout_s))
                    if name == names[0]:
                        save_notebook(page)
                    if "tooltip" not in out and results[-1]["charts_drawn"]:
                        out["tooltip"] = shoot_chart(page, shots / "lab-chart.png")
                        results[-1]["tooltip"] = out["tooltip"]
                    stop_kernels(page)  # the next notebook gets both cores
                out["aborted"] = list(aborted)  # while the notebooks ran
                if names:
                    out["later"] = check_opened_later(page, url, work, names[0], timeout_s)
                    # nbconvert's template asks cdnjs for require.js and MathJax
                    out["later"]["aborted"] = aborted[len(out["aborted"]) :]
            except Exception:
                page.screenshot(path=str(shots / "lab-failure.png"), full_page=True)
                raise
            page.close()
    return {**out, "results": results, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--shots", default=str(BUILD_DIR / "quick" / "screenshots"))
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="seconds per notebook")
    parser.add_argument("--out", help="also write the results here (JSON)")
    parser.add_argument("notebooks", nargs="*", default=list(NOTEBOOKS))
    args = parser.parse_args(argv)
    why = browser_missing()
    if why:
        print(f"lab_browser: {why}", file=sys.stderr)
        return 2
    out = run_lab(tuple(args.notebooks), args.profile, Path(args.shots), args.timeout)
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2))
    bad = [r["notebook"] for r in out["results"]
           if r["error_cells"] or r["error_texts"] or r["charts_drawn"] != r["charts_expected"]]  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
