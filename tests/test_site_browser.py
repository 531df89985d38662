"""The results site (``clintrace site``, issue 32 §4) opened from disk in the real Chromium the
app tests use (bench.apps_browser / bench.site_browser): a real notebook (with saved ipywidgets state) executed on the quick
profile, rendered with the profile's figures, app snapshots and the summary index; every page
loads, every image shows, no console error, no request leaves file://.

Skipped, with the reason, only when Chromium or playwright is absent (CLINTRACE_REQUIRE_BROWSER
turns that into a failure, as in tests/test_apps_browser.py).
"""

from __future__ import annotations

import os

import pytest

from bench import apps_browser as apps
from bench import site_browser as sb
from clinlib.cli.notebooks import execute_one
from clinlib.cli.site import SiteError, build_site, offline_html
from clinlib.core.config import NOTEBOOKS_DIR, build_dir

WHY = apps.browser_missing()
if WHY and os.environ.get("CLINTRACE_REQUIRE_BROWSER"):
    pytest.fail(f"CLINTRACE_REQUIRE_BROWSER is set but the site test cannot run: {WHY}",
                pytrace=False)  # fmt: skip
# 02 saves ipywidgets state: nbconvert would load the widget manager from unpkg.com
NOTEBOOK = "02_dialogue_inspection.ipynb"
# Executes a real notebook on the quick profile: run beside the notebooks (one xdist worker,
# conftest.py), not alongside them.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("notebooks")]


@pytest.fixture(scope="module")
def site(tmp_path_factory, quick_built):
    nbs = tmp_path_factory.mktemp("executed")
    row = execute_one(NOTEBOOK_PATH, nbs, timeout=600)
    assert row["ok"], row["error"]
    out = tmp_path_factory.mktemp("site") / "site"
    result = build_site(quick_built, out=out, notebooks_dir=nbs,
                        shots_dir=build_dir(quick_built) / "screenshots")  # fmt: skip
    return out, result


NOTEBOOK_PATH = NOTEBOOKS_DIR / NOTEBOOK


@pytest.mark.skipif(WHY is not None, reason=f"needs Chromium: {WHY}")
def test_every_page_loads_offline_in_chromium(site):
    out, result = site
    assert result["notebooks"] == [("02_dialogue_inspection", 0)]
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert pages == ["apps/dialogues.html", "apps/failures.html", "figures/index.html",
                     "index.html", "notebooks/02_dialogue_inspection.html"]  # fmt: skip
    results = sb.check_site(out)
    assert sb.problems(results) == []
    by = {r["page"].split("/site/", 1)[1]: r for r in results}
    assert by["figures/index.html"]["images"] == len(list((out / "figures").glob("*.png"))) > 0
    assert "02_dialogue_inspection" in (out / "index.html").read_text()
    assert "not MIMIC" in (out / "index.html").read_text()


@pytest.mark.skipif(WHY is not None, reason=f"needs Chromium: {WHY}")
def test_the_check_catches_a_remote_load_a_broken_image_and_a_console_error(tmp_path):
    (tmp_path / "bad.html").write_text(
        "<!doctype html><html><body><img src='https://cdn.example.invalid/x.png'>"
        "<img src='missing.png'><a href='nowhere.html'>x</a>"
        "<script>console.error('boom')</script></body></html>"
    )
    (result,) = sb.check_site(tmp_path)
    assert result["remote_requests"] == ["https://cdn.example.invalid/x.png"]
    assert len(result["broken_images"]) == 2 and result["console_errors"]
    assert result["dead_links"] == ["nowhere.html"]


def test_cdn_scripts_are_removed_and_a_remote_load_refused():
    page = ('<script src="https://cdnjs.cloudflare.com/require.min.js"></script><p>x</p>'
            '<script type="module">import m from "https://cdn/mermaid.mjs";</script>')  # fmt: skip
    assert offline_html(page, "p") == "<p>x</p>"
    with pytest.raises(SiteError, match="still loads from the network"):
        offline_html('<link rel="stylesheet" href="https://cdn/x.css">', "p")


def test_no_executed_notebooks_is_refused(tmp_path, quick_built):
    with pytest.raises(SiteError, match="clintrace notebooks --profile quick"):
        build_site(quick_built, out=tmp_path / "s", notebooks_dir=tmp_path / "none")
    assert not (tmp_path / "s").exists()
