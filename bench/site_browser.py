"""``python -m bench.site_browser SITE_DIR``: every page of a results site (``clintrace site``)
opened from disk in the real Chromium the browser tests use (bench.apps_browser): each page
loads, each image shows (``naturalWidth > 0``), no console error or uncaught exception, and no
request leaves ``file://`` (or ``data:``); optional screenshots (issue 32 §4).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.apps_browser import chromium

LOCAL_SCHEMES = ("file://", "data:", "about:", "blob:")


def check_page(page: Any, path: Path, shot: Path | None = None) -> dict:
    """Open one page; its console errors, remote requests, broken images and links."""
    errors: list[str] = []
    remote: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "request", lambda r: remote.append(r.url) if not r.url.startswith(LOCAL_SCHEMES) else None
    )
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    response = page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_load_state("networkidle")
    images = page.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src').slice(0, 80), "
        "i.complete ? i.naturalWidth : 0])"
    )
    links = page.evaluate(
        "Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"
        ".filter(h => !/^(https?:|#|mailto:)/.test(h))"
    )
    if shot is not None:
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=False)
    return {
        "page": str(path), "loaded": response is not None and response.ok,
        "title": page.title(), "images": len(images),
        "broken_images": [src for src, width in images if not width],
        "console_errors": errors, "remote_requests": remote, "failed_requests": failed,
        "dead_links": [h for h in links if not (path.parent / h.split("#")[0]).exists()],
    }  # fmt: skip


def check_site(site: Path, shots: dict[str, Path] | None = None) -> list[dict]:
    """Every ``*.html`` under ``site``, each in a fresh page of one Chromium."""
    shots = shots or {}
    out = []
    with chromium() as ctx:
        for path in sorted(site.rglob("*.html")):
            page = ctx.new_page()
            rel = str(path.relative_to(site))
            out.append(check_page(page, path, shots.get(rel)))
            page.close()
    return out


def problems(results: list[dict]) -> list[str]:
    """One line per page that failed a check (empty: the site passes)."""
    bad = []
    for r in results:
        for key in ("broken_images", "console_errors", "remote_requests", "failed_requests",
                    "dead_links"):  # fmt: skip
            if r[key]:
                bad.append(f"{r['page']}: {key} {r[key][:3]}")
        if not r["loaded"]:
            bad.append(f"{r['page']}: did not load")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--shots", type=Path, help="folder for screenshots of index + one notebook")
    args = parser.parse_args(argv)
    shots = {}
    if args.shots:
        shots = {"index.html": args.shots / "site-index.png",
                 "figures/index.html": args.shots / "site-figures.png"}  # fmt: skip
    results = check_site(args.site, shots)
    print(json.dumps([{k: r[k] for k in ("page", "images", "loaded")} for r in results], indent=1))
    bad = problems(results)
    for line in bad:
        print(line, file=sys.stderr)
    print(f"{len(results)} pages, {sum(r['images'] for r in results)} images, "
          f"{len(bad)} problem(s)")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
