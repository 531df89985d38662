"""``python -m bench.apps_browser``: both marimo apps served by ``marimo run --headless`` and
driven in a real Chromium (Debian's ``/usr/bin/chromium`` through Playwright, never a
downloaded browser), as a researcher uses them (paper §5 failure analysis).

For each app: time to first paint (navigation → the title is visible), time until it is
usable (the table has rows and the opened item is rendered), the largest websocket frame the
page received (every cell output travels in one frame, so this bounds the largest cell
output) against :data:`clinlib.core.pages.OUTPUT_BUDGET_BYTES`, the interaction checks
(filters change the table, a failure opens with question, gold, response and context with
its anchors highlighted) and a screenshot. ``tests/test_apps_browser.py`` runs the same
checks on the quick profile; ``make bench-apps`` runs them on the paper profile and writes
the screenshots to ``docs/img/``.

Usage: ``python -m bench.apps_browser [--profile paper] [--shots docs/img]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clinlib.core.config import BUILD_DIR, NOTEBOOKS_DIR, PROFILE_ENV
from clinlib.core.pages import OUTPUT_BUDGET_BYTES

CHROMIUM = os.environ.get("CLINTRACE_CHROMIUM", "/usr/bin/chromium")
# Flags that work in this container (no sandbox, no GPU, no network side-traffic).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
APPS = {
    "failures": NOTEBOOKS_DIR / "apps" / "failure_explorer.py",
    "dialogues": NOTEBOOKS_DIR / "apps" / "dialogue_viewer.py",
}
VIEWPORT = {"width": 1280, "height": 900}
# First paint is cheap (the title cell needs no data); loading the paper profile's 111,658
# predictions or 301,531 events into the kernel takes longer on two busy cores.
READY_TIMEOUT_S = 300.0


def browser_missing() -> str | None:
    """Why the browser checks cannot run here (None = they can)."""
    if not Path(CHROMIUM).exists():
        return (f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` "
                "(make install does it as root)")  # fmt: skip
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -e '.[dev]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(cmd: list[str], env: dict[str, str], log: Path, url: str, what: str,
           probe: str | None = None, cwd: Path | None = None,
           timeout_s: float = 120.0) -> Iterator[str]:  # fmt: skip
    """Start ``cmd`` in its own process group (output to ``log``), yield ``url`` once ``probe``
    (default ``url``) answers 200, and stop the group afterwards (SIGTERM, then SIGKILL)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited {proc.returncode}: {log.read_text()[-800:]}")
            try:
                with urllib.request.urlopen(probe or url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not answer on {url} in {timeout_s:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


@contextlib.contextmanager
def serve(app: Path, profile: str, log: Path, timeout_s: float = 120.0) -> Iterator[str]:
    """``marimo run --headless`` on a free port with $CLINTRACE_PROFILE=profile; yields the URL
    once the server answers, and stops the server (its process group) afterwards."""
    port = _free_port()
    env = {**os.environ, PROFILE_ENV: profile}
    cmd = [sys.executable, "-m", "marimo", "run", "--headless", "--no-token", "--port",
           str(port), "--host", "127.0.0.1", str(app)]  # fmt: skip
    with served(cmd, env, log, f"http://127.0.0.1:{port}/", "marimo run",
                timeout_s=timeout_s) as url:  # fmt: skip
        yield url


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser context with a fresh user-data dir."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="ct-chromium-") as udd:
        ctx = pw.chromium.launch_persistent_context(
            udd, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
        )  # fmt: skip
        try:
            yield ctx
        finally:
            ctx.close()


class FrameMeter:
    """Records every websocket frame a page receives (marimo sends each cell output in one)."""

    def __init__(self, page: Any) -> None:
        self.sizes: list[int] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload: str | bytes) -> None:
        self.sizes.append(len(payload.encode() if isinstance(payload, str) else payload))

    @property
    def largest(self) -> int:
        return max(self.sizes, default=0)


def _wait_text(page: Any, selector: str, text: str, timeout_s: float) -> None:
    page.locator(selector, has_text=text).first.wait_for(timeout=timeout_s * 1000)


def _select(page: Any, option: str) -> None:
    """Choose ``option`` in the native <select> that offers it (marimo's dropdown)."""
    sel = page.locator("select", has=page.locator("option", has_text=option)).first
    sel.select_option(label=option)


ROWS = "marimo-table tbody tr"  # rows of marimo's table (not the cards' HTML tables)
# an anchor highlighted in the context block (not in the quoted dialogue turn above it)
CONTEXT_MARKS = ".ct-fx h5:has-text('The exact context') ~ pre mark.ct-anchor"
FILTER_STRATEGY = "structured-timeline"


def _body_rows(page: Any) -> list[str]:
    return [t.strip() for t in page.locator(ROWS).all_inner_texts()]


def _wait_rows_change(page: Any, before: list[str], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = _body_rows(page)
        if rows and rows != before:
            return rows
        time.sleep(0.25)
    raise AssertionError(f"the table did not change within {timeout_s:.0f} s")


def _click_row(page: Any, i: int) -> None:
    page.locator(ROWS).nth(i).locator("[data-testid=select-row-checkbox]").click()


def check_failures(page: Any, url: str, shot: Path, timeout_s: float = READY_TIMEOUT_S) -> dict:
    """Open the failure explorer and check what a researcher sees; returns timings."""
    meter = FrameMeter(page)
    t0 = time.perf_counter()
    page.goto(url)
    _wait_text(page, "h1", "Failure explorer", timeout_s)
    first_paint = time.perf_counter() - t0
    page.locator(ROWS).first.wait_for(timeout=timeout_s * 1000)
    _wait_text(page, ".ct-fx", "raw response", timeout_s)
    ready = time.perf_counter() - t0
    for label in ("task", "subtype", "strategy", "backbone", "setting", "outcome"):
        assert page.get_by_text(label, exact=True).count(), f"filter {label!r} not shown"
    rows = _body_rows(page)
    assert 0 < len(rows) <= 20, f"{len(rows)} table rows on the first page"
    # change a filter: structured-timeline keeps per-visit values, so its failures are the
    # ones whose anchor IS in the context (a misreading, not a dropped fact)
    _select(page, FILTER_STRATEGY)
    rows2 = _wait_rows_change(page, rows, timeout_s)
    assert all(FILTER_STRATEGY in r for r in rows2), rows2[:3]
    opened = _open_highlighted_failure(page, len(rows2), timeout_s)
    card = page.locator(".ct-fx").first.inner_text()
    for part in ("question", "gold", "raw response", "The exact context the model saw"):
        assert part in card, f"{part!r} not in the opened failure"
    page.locator(".ct-fx h4").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    return {"first_paint_s": round(first_paint, 2), "ready_s": round(ready, 2),
            "largest_frame_bytes": meter.largest, "frames": len(meter.sizes),
            "rows_first_page": len(rows), "opened_row": opened}  # fmt: skip


def _cell(row: Any, column: str) -> str:
    return row.locator(f"[data-cell-id$='_{column}']").first.inner_text().strip()


def _open_highlighted_failure(page: Any, n_rows: int, timeout_s: float) -> int:
    """Select rows until the opened failure's context shows a highlighted anchor; each time
    wait for the card of exactly that prediction (its heading names qid · … · strategy ·
    backbone · setting)."""
    for i in range(n_rows):
        row = page.locator(ROWS).nth(i)
        box = row.locator("[data-testid=select-row-checkbox]")
        if box.get_attribute("aria-checked") != "true":  # a second click would deselect
            box.click()
        head = (f"{_cell(row, 'strategy')} · {_cell(row, 'backbone')} · "
                f"setting {_cell(row, 'setting')}")  # fmt: skip
        card = page.locator(".ct-fx h4", has_text=_cell(row, "qid")).filter(has_text=head)
        card.first.wait_for(timeout=timeout_s * 1000)
        marks = page.locator(CONTEXT_MARKS)
        if marks.count():
            marks.first.scroll_into_view_if_needed()
            return i
    raise AssertionError(f"none of {n_rows} opened failures showed a highlighted anchor")


def check_dialogues(page: Any, url: str, shot: Path, timeout_s: float = READY_TIMEOUT_S) -> dict:
    """Open the dialogue viewer: title, pickers, event table; pick an event and see its turn;
    change the visit and see the event table change; returns timings."""
    meter = FrameMeter(page)
    t0 = time.perf_counter()
    page.goto(url)
    _wait_text(page, "h1", "Dialogue viewer", timeout_s)
    first_paint = time.perf_counter() - t0
    page.locator(ROWS).first.wait_for(timeout=timeout_s * 1000)
    page.locator(".ct-dlg").first.wait_for(timeout=timeout_s * 1000)
    ready = time.perf_counter() - t0
    for label in ("patient", "visit", "show event ids"):
        assert page.get_by_text(label, exact=True).count(), f"control {label!r} not shown"
    rows = _body_rows(page)
    assert rows, "no events in the table"
    _select(page, "visit 2")
    rows2 = _wait_rows_change(page, rows, timeout_s)
    assert all(r.split()[0] == "2" for r in rows2), f"visit 2 filter shows {rows2[:3]}"
    _click_row(page, 0)
    # the picked event's turn is outlined (or its note says it was left unstated)
    page.locator(".ct-sel, p:has-text('left unstated')").first.wait_for(timeout=timeout_s * 1000)
    assert page.locator(".ct-dlg span[title]").count() > 0, "no highlighted fact sentences"
    page.locator(".ct-sel, .ct-dlg").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    return {"first_paint_s": round(first_paint, 2), "ready_s": round(ready, 2),
            "largest_frame_bytes": meter.largest, "frames": len(meter.sizes),
            "rows_first_page": len(rows), "rows_after_filter": len(rows2)}  # fmt: skip


CHECKS = {"failures": check_failures, "dialogues": check_dialogues}


def run_app(name: str, profile: str, shots: Path, timeout_s: float = READY_TIMEOUT_S) -> dict:
    """Serve one app on ``profile``, check it in Chromium, screenshot to ``shots``."""
    shots.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.gettempdir()) / f"clintrace-marimo-{name}-{os.getpid()}.log"
    with serve(APPS[name], profile, log) as url, chromium() as ctx:
        page = ctx.new_page()
        out = CHECKS[name](page, url, shots / f"app-{name}.png", timeout_s)
    return {"app": name, "profile": profile, **out, "budget_bytes": OUTPUT_BUDGET_BYTES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--shots", default="docs/img")
    args = parser.parse_args(argv)
    why = browser_missing()
    if why:
        print(f"bench-apps: {why}", file=sys.stderr)
        return 2
    results = []
    for name in APPS:
        t0 = time.perf_counter()
        print(f"[bench-apps] {name} on profile {args.profile} ...", file=sys.stderr, flush=True)
        r = run_app(name, args.profile, Path(args.shots))
        r["total_s"] = round(time.perf_counter() - t0, 1)
        results.append(r)
        ok = "within" if r["largest_frame_bytes"] <= OUTPUT_BUDGET_BYTES else "OVER"
        print(f"{name}: first paint {r['first_paint_s']:.1f} s, usable {r['ready_s']:.1f} s, "
              f"largest cell output {r['largest_frame_bytes']:,} bytes ({ok} the "
              f"{OUTPUT_BUDGET_BYTES:,}-byte budget), screenshot {args.shots}/app-{name}.png")  # fmt: skip
    out = {"results": results, "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
           "chromium": shutil.which("chromium") or CHROMIUM}  # fmt: skip
    path = Path(BUILD_DIR) / f"bench-apps-{args.profile}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"written {path}")
    over = [r["app"] for r in results if r["largest_frame_bytes"] > OUTPUT_BUDGET_BYTES]
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
