"""The results site: what ``make reproduce`` produced, as one folder a browser opens from disk
(``clintrace site``, ``make site``).

``data/build/<profile>/site/`` (replaced whole, atomically) holds:

* ``index.html``: the profile, its data source, the accuracy summary per cell
  (:func:`clinlib.eval.harness.store.cell_summary`, every backbone labelled as it is stored: offline
  readers are deterministic policies, ``ext:`` rows were made elsewhere), links to every page;
* ``notebooks/NN_slug.html``: every executed notebook under
  ``data/build/<profile>/notebooks/`` (``clintrace notebooks`` writes them) through nbconvert's
  lab template, with outputs embedded (charts as the SVG the kit's renderer stores,
  docs/design.md "Charts in a notebook"; ipywidgets, which need a kernel, as their text form);
* ``figures/``: every figure under ``figures/<profile>/`` (PNG, SVG) and a gallery page;
* ``apps/<app>.html``: a STATIC SNAPSHOT (a screenshot) of each marimo app, not the app: marimo's
  own HTML export loads its front end (ES modules) from cdn.jsdelivr.net, and module scripts do
  not load from ``file://`` even when copied beside the page, so an interactive export cannot be
  opened offline from disk. Snapshots come from ``data/build/<profile>/screenshots/app-*.png``
  (the browser tests and ``make site`` write them with ``bench.apps_browser``).

Offline at view time: nbconvert's script tags that load from a CDN (require.js, MathJax,
mermaid) are removed (LaTeX in markdown then shows as its source; no notebook needs it), and no
page references anything outside the folder (checked in Chromium by tests/test_site_browser.py).
"""

from __future__ import annotations

import html
import re
import shutil
import time
from pathlib import Path
from typing import Annotated

import nbformat
import typer

from clinlib.cli.common import ProfileOpt, add_command, profile_name, run_stage, writer_lock
from clinlib.core.config import build_dir, figures_dir, resolve_profile
from clinlib.core.io import atomic_path
from clinlib.data.build import read_source_info
from clinlib.eval.harness.store import cell_summary, load_predictions

SITE_DIR = "site"
APPS: dict[str, str] = {
    "failures": "Failure explorer (notebooks/apps/failure_explorer.py)",
    "dialogues": "Dialogue viewer (notebooks/apps/dialogue_viewer.py)",
}
APP_COMMANDS = {"failures": "make app-failures", "dialogues": "make app-dialogues"}
FIGURE_SUFFIXES = (".png", ".svg")
# <script src="http..."></script> and inline module scripts importing from http(s) (mermaid)
_REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.S)
_REMOTE_MODULE = re.compile(
    r"<script type=\"module\">(?:(?!</script>).)*?https?://.*?</script>", re.S
)
_REMOTE_LOAD = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"https?://", re.S)
STYLE = """body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;
color:#222}table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ccc;
padding:.25rem .5rem;text-align:left}th{background:#f3f3f3}.fail{color:#b00}
.gallery img{max-width:22rem;border:1px solid #ddd;margin:.3rem}.note{color:#555}
img.snap{max-width:100%;border:1px solid #ccc}"""


class SiteError(ValueError):
    """The site cannot be built (nothing executed yet, a page that would load from a CDN)."""


def site_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/site/`` (not created)."""
    return build_dir(profile) / SITE_DIR


def offline_html(body: str, where: str) -> str:
    """nbconvert's page without its CDN scripts; refuses a page that still loads remotely."""
    body = _REMOTE_MODULE.sub("", _REMOTE_SCRIPT.sub("", body))
    left = _REMOTE_LOAD.search(body)
    if left:
        raise SiteError(
            f"{where}: still loads from the network: {body[left.start() : left.end() + 60]!r}"
        )
    return body


def notebook_errors(nb: nbformat.NotebookNode) -> int:
    """Error outputs in an executed notebook (a cell that raised)."""
    return sum(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))


def render_notebook(path: Path) -> tuple[str, int]:
    """(offline HTML, error outputs) of one executed notebook."""
    from nbconvert import HTMLExporter  # seconds to import; only `clintrace site` needs it

    nb = nbformat.read(path, as_version=4)
    # Saved ipywidgets state makes nbconvert load the widget manager from unpkg.com: a static
    # page cannot run widgets anyway, so their outputs show their text form.
    nb.metadata.pop("widgets", None)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return offline_html(body, str(path)), notebook_errors(nb)


def _page(title: str, body: str, up: str = "") -> str:
    back = f'<p><a href="{up}index.html">&larr; site index</a></p>' if up else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{STYLE}</style></head><body>{back}{body}</body></html>"
    )


def _summary_table(profile: str) -> str:
    preds = load_predictions(profile)
    if preds.empty:
        return "<p class='note'>No predictions in this profile.</p>"
    cols = [
        "strategy",
        "backbone",
        "prep_model",
        "setting",
        "n_predicted",
        "accuracy",
        "accuracy_lenient",
        "errors",
    ]
    table = cell_summary(preds)[cols].sort_values(["setting", "backbone", "strategy"])
    return table.to_html(index=False, float_format=lambda x: f"{x:.3f}", border=0)


def _apps(profile: str, tmp: Path, shots: Path) -> list[tuple[str, str, bool]]:
    (tmp / "apps").mkdir()
    out = []
    for name, title in APPS.items():
        shot = shots / f"app-{name}.png"
        if shot.is_file():
            shutil.copy2(shot, tmp / "apps" / shot.name)
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(shot.stat().st_mtime))
            body = (
                f"<h1>{html.escape(title)}</h1><p class='note'>A static snapshot taken {when}, "
                "not the app: marimo's interactive export loads its front end from a CDN and "
                "cannot run from disk. Run it live with "
                f"<code>{APP_COMMANDS[name]} PROFILE={profile}</code>.</p>"
                f"<img class='snap' src='{shot.name}' alt='{html.escape(title)}'>"
            )
        else:
            body = (
                f"<h1>{html.escape(title)}</h1><p class='note'>No snapshot: none was taken "
                f"for profile {profile} ({shot} is missing; <code>make site</code> takes it). "
                f"Run it live with <code>{APP_COMMANDS[name]} PROFILE={profile}</code>.</p>"
            )
        (tmp / "apps" / f"{name}.html").write_text(_page(title, body, "../"), encoding="utf-8")
        out.append((name, title, shot.is_file()))
    return out


def _figures(profile: str, tmp: Path) -> list[str]:
    (tmp / "figures").mkdir()
    src = figures_dir(profile)
    names = (
        sorted(p.name for p in src.glob("*") if p.suffix in FIGURE_SUFFIXES) if src.is_dir() else []
    )
    for name in names:
        shutil.copy2(src / name, tmp / "figures" / name)
    pngs = [n for n in names if n.endswith(".png")]
    cards = "".join(f"<a href='{n}'><img src='{n}' alt='{html.escape(n)}'></a>" for n in pngs)
    body = f"<h1>Figures · profile {profile}</h1><div class='gallery'>{cards}</div>"
    (tmp / "figures" / "index.html").write_text(_page("Figures", body, "../"), encoding="utf-8")
    return names


def build_site(
    profile: str | None = None,
    out: Path | None = None,
    notebooks_dir: Path | None = None,
    shots_dir: Path | None = None,
) -> dict:
    """Render the executed notebooks, figures, app snapshots and a summary index into ``out``.

    Args:
        profile: build profile.
        out: the site folder (default :func:`site_dir`), replaced whole.
        notebooks_dir: executed notebooks (default ``data/build/<profile>/notebooks``).
        shots_dir: app screenshots (default ``data/build/<profile>/screenshots``).

    Returns:
        {"site": path, "notebooks": [(name, errors)], "figures": n, "apps": [(name, snapshot?)]}

    Raises:
        SiteError: no executed notebook (run ``clintrace notebooks`` / ``make reproduce``).
    """
    name = resolve_profile(profile)
    out = Path(out) if out is not None else site_dir(name)
    nb_dir = Path(notebooks_dir) if notebooks_dir is not None else build_dir(name) / "notebooks"
    shots = Path(shots_dir) if shots_dir is not None else build_dir(name) / "screenshots"
    executed = sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")) if nb_dir.is_dir() else []
    if not executed:
        raise SiteError(
            f"no executed notebooks in {nb_dir}: run `clintrace notebooks --profile "
            f"{name}` (or `make reproduce`) first"
        )
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        (tmp / "notebooks").mkdir()
        rendered = []
        for path in executed:
            page, errors = render_notebook(path)
            (tmp / "notebooks" / f"{path.stem}.html").write_text(page, encoding="utf-8")
            rendered.append((path.stem, errors))
        figures = _figures(name, tmp)
        apps = _apps(name, tmp, shots)
        index = _index(name, rendered, figures, apps)
        (tmp / "index.html").write_text(index, encoding="utf-8")
    return {
        "site": out,
        "notebooks": rendered,
        "figures": len(figures),
        "apps": [(a, ok) for a, _, ok in apps],
    }


def _index(profile: str, rendered: list, figures: list[str], apps: list) -> str:
    source = read_source_info(profile)
    kind = source.get("kind", "unknown")
    data_note = (
        "a synthetic MIMIC-IV-shaped dataset (not MIMIC)"
        if kind == "synthetic"
        else f"data source: {html.escape(str(kind))}"
    )
    rows = "".join(
        f"<tr><td><a href='notebooks/{n}.html'>{n}</a></td>"
        f"<td class='{'fail' if e else ''}'>{'ok' if not e else f'{e} error output(s)'}</td></tr>"
        for n, e in rendered
    )
    app_items = "".join(
        f"<li><a href='apps/{a}.html'>{html.escape(t)}</a>{'' if ok else ' (no snapshot)'}</li>"
        for a, t, ok in apps
    )
    body = (
        f"<h1>ClinTrace Kit results · profile <code>{profile}</code></h1>"
        f"<p class='note'>Built {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from "
        f"{data_note}. Backbones <code>reference</code> and <code>eager</code> are deterministic "
        "offline readers, not language models; <code>ext:</code> backbones are predictions made "
        "elsewhere and scored here (<code>clintrace score</code>), not kit runs.</p>"
        f"<h2>Notebooks ({len(rendered)})</h2><table><tr><th>notebook</th><th>run</th></tr>{rows}"
        f"</table><h2>Figures</h2><p><a href='figures/index.html'>{len(figures)} figure files"
        f"</a></p><h2>Apps (static snapshots)</h2><ul>{app_items}</ul>"
        f"<h2>Accuracy per cell</h2>{_summary_table(profile)}"
    )
    return _page(f"ClinTrace Kit · {profile}", body)


def site(
    profile: ProfileOpt = None,
    out: Annotated[
        Path | None, typer.Option(help="site folder (default data/build/<p>/site)")
    ] = None,
) -> None:
    """Render the executed notebooks, figures, app snapshots and an index into one offline
    folder."""
    name = profile_name(profile)
    with writer_lock(name):
        result = run_stage(build_site, name, out=out)
    failed = [n for n, e in result["notebooks"] if e]
    typer.echo(
        f"site -> {result['site']}/index.html: {len(result['notebooks'])} notebooks"
        f"{f' ({len(failed)} with errors: {failed})' if failed else ''}, "
        f"{result['figures']} figure files, app snapshots "
        f"{[a for a, ok in result['apps'] if ok] or 'none'}"
    )


def register(app: typer.Typer) -> None:
    """Add ``site`` to the ``clintrace`` app."""
    add_command(app, site, "site")
