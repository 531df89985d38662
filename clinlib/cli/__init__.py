"""The ``clintrace`` command line (``clintrace = "clinlib.cli:app"``), one module per command
group, each adding its commands to the app in its own ``register(app)``:

    stages      synth, cohort, export-meds, dialogues, questions, strategies,
                evaluate-offline, audit (one pipeline stage each; docs/design.md)
    population  population, population-run, population-estimate, population-spec
    pipeline    pipeline, notebooks, reproduce, info
    endpoints   backbones, estimate, run, serve-local (paper §4, App. D)
    judge       judge
    memory      memory-serve (docs/memory-protocol.md)
    score       score, export
    site        site

:mod:`clinlib.cli.common` holds what they share (options, one-line errors, the profile's
writer lock); :mod:`clinlib.cli.rewrite` the ``--rewrite`` / ``--paraphrase`` bodies of
``dialogues`` and ``questions``; :mod:`clinlib.cli.notebooks` runs the numbered notebooks. The
package sits on top of the layering: it may import every stage package, and none imports it.
"""

from __future__ import annotations

import typer

from clinlib.cli import endpoints, judge, memory, pipeline, population, score, site, stages
from clinlib.cli.common import new_app

# The order of `clintrace --help`'s command list: the pipeline's stages first.
GROUPS = (stages, population, pipeline, endpoints, judge, memory, score, site)


def build_app() -> typer.Typer:
    """A ``clintrace`` app with every command group registered."""
    cli = new_app()
    for group in GROUPS:
        group.register(cli)
    return cli


app = build_app()

__all__ = ["GROUPS", "app", "build_app"]
