"""Both marimo apps served by ``marimo run --headless`` on the quick profile and used in a
real Chromium (Debian's /usr/bin/chromium driven by Playwright; bench.apps_browser): title,
filters, a paginated table with rows, a filter change that changes the table, an opened
failure with question, gold, response and its context with anchors highlighted, the event →
turn lookup of the dialogue viewer, every websocket frame under the output budget, and a
screenshot.

Skipped, with the reason, only when Chromium or playwright is absent; `make test` and
.ci/run set CLINTRACE_REQUIRE_BROWSER=1 (after installing Chromium), which turns that skip into
a failure so CI never passes without having run them.
"""

from __future__ import annotations

import os

import pytest

from bench import apps_browser as apps
from clinlib.core.config import BUILD_DIR
from clinlib.core.pages import OUTPUT_BUDGET_BYTES, PAGE_SIZE
from clinlib.eval.harness import runner

REQUIRE_ENV = "CLINTRACE_REQUIRE_BROWSER"
WHY = apps.browser_missing()
SHOTS = BUILD_DIR / "quick" / "screenshots"

if WHY and os.environ.get(REQUIRE_ENV):
    pytest.fail(f"{REQUIRE_ENV} is set but the browser tests cannot run: {WHY}",
                pytrace=False)  # fmt: skip
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"browser tests need Chromium: {WHY}"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def quick_predictions():
    if runner.load_predictions("quick").empty:
        pytest.fail("no quick-profile predictions: run `clintrace pipeline --profile quick`")
    return "quick"


def test_failure_explorer_in_chromium(quick_predictions):
    r = apps.run_app("failures", quick_predictions, SHOTS, timeout_s=180)
    assert 0 < r["rows_first_page"] <= PAGE_SIZE
    assert 0 < r["largest_frame_bytes"] <= OUTPUT_BUDGET_BYTES, r
    shot = SHOTS / "app-failures.png"
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:4] == b"\x89PNG"


def test_dialogue_viewer_in_chromium(quick_predictions):
    r = apps.run_app("dialogues", quick_predictions, SHOTS, timeout_s=180)
    assert r["rows_first_page"] > 0 and r["rows_after_filter"] > 0
    assert 0 < r["largest_frame_bytes"] <= OUTPUT_BUDGET_BYTES, r
    assert (SHOTS / "app-dialogues.png").stat().st_size > 10_000
