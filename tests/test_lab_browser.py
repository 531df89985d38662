"""Notebooks 13 (a chart, the ipywidgets failure explorer) and 02 (two charts, the dialogue
viewer) opened in JupyterLab and run (Run → Run All Cells) in a real Chromium with every
non-loopback request aborted (bench.lab_browser; issue 34): every code cell runs, no cell
errors, every chart output is drawn (a sized canvas or svg) and no "Error loading script"
shows, each explorer answers a different pick, and a screenshot of one chart. A control
notebook that displays a chart with altair's own default renderer in the same session must
show the issue's error, so these checks do see the failure they guard against.

Self-sufficient on a built quick profile (``make pipeline-quick``, which evaluates the offline
readers): notebook 13 reads those predictions and 02 the dialogues. Skipped, with the reason,
only when Chromium or playwright is absent; ``CLINTRACE_REQUIRE_BROWSER=1`` (make test) turns
that skip into a failure, as in tests/test_apps_browser.py.
"""

from __future__ import annotations

import os

import pytest

from bench import lab_browser as lab
from bench.apps_browser import browser_missing
from clinlib.core.config import BUILD_DIR
from clinlib.eval.harness import runner

REQUIRE_ENV = "CLINTRACE_REQUIRE_BROWSER"
WHY = browser_missing()
SHOTS = BUILD_DIR / "quick" / "screenshots"

if WHY and os.environ.get(REQUIRE_ENV):
    pytest.fail(f"{REQUIRE_ENV} is set but the browser tests cannot run: {WHY}",
                pytrace=False)  # fmt: skip
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"browser tests need Chromium: {WHY}"),
    pytest.mark.slow,
    # one JupyterLab session for the whole module: on one xdist worker (make test's
    # --dist loadgroup), beside the notebooks' own group on the other
    pytest.mark.xdist_group("lab_browser"),
]


@pytest.fixture(scope="module")
def lab_run():
    if runner.load_predictions("quick").empty:
        pytest.fail("no quick-profile predictions: run `clintrace pipeline --profile quick`")
    return lab.run_lab(lab.NOTEBOOKS, "quick", SHOTS)


def test_the_page_has_no_network_and_altairs_own_renderer_fails_there(lab_run):
    assert lab_run["probe"] == "blocked"
    # the symptom, word for word, and nothing drawn
    assert lab_run["control"]["symptom"] == f"Error loading script: {lab.PROBE_URL}"
    assert lab_run["control"]["charts_drawn"] == 0
    assert lab.PROBE_URL in lab_run["aborted_before"]
    # while the notebooks ran nothing asked for an outside host (aborted or not)
    assert lab_run["aborted"] == []


@pytest.mark.parametrize("name", lab.NOTEBOOKS)
def test_notebook_runs_and_every_chart_draws_offline(lab_run, name):
    (r,) = [r for r in lab_run["results"] if r["notebook"] == name]
    assert r["cells_run"] == r["code_cells"] > 0, r
    assert r["error_cells"] == [] and r["error_texts"] == [], r
    # 13 shows one chart (the flips heatmap), 02 two (corpus histograms, Fig. 13 bars)
    assert r["charts_expected"] == {"13_failure_explorer": 1, "02_dialogue_inspection": 2}[name]
    assert r["charts_drawn"] == r["charts_expected"], r["chart_elements"]
    assert all(e["tag"] in ("canvas", "svg") for e in r["chart_elements"])


@pytest.mark.parametrize("name", lab.NOTEBOOKS)
def test_the_explorer_widgets_answer_a_pick(lab_run, name):
    (r,) = [r for r in lab_run["results"] if r["notebook"] == name]
    w = r["widget"]  # pick_changes raised if the pane did not change
    assert w["picker"] == lab.WIDGETS[name][0] and w["options"] >= 2 and w["picked"]


def test_an_executed_notebook_opened_later_and_its_html_export_show_the_chart(lab_run):
    later = lab_run["later"]  # notebook 13 as saved, with a signature that no longer matches
    assert later["trusted"] and not any(later["trusted"]), later["trusted"]
    assert later["charts_drawn"] == later["charts_expected"] == 1, later["chart_elements"]
    # nbconvert's HTML opened from disk, offline: the chart is an SVG image that decodes
    assert len(later["html_svg_images"]) == 1 and later["html_svg_images"][0] > 50
    assert later["html_error_texts"] == []
    # what the export asked the network for is nbconvert's template's (require.js, MathJax)
    assert not [u for u in later["aborted"] if "vega" in u], later["aborted"]


def test_a_chart_shows_its_tooltip_and_is_screenshot(lab_run):
    # the flips heatmap of notebook 13: its tooltip names the pair (good, bad) and the counts
    tip = lab_run["tooltip"]
    assert all(f"{k}" in tip for k in ("good", "bad", "flips", "reverse")), tip
    shot = SHOTS / "lab-chart.png"
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:4] == b"\x89PNG"
