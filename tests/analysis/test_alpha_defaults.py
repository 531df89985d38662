"""Every interval and test in clinlib.analysis defaults to the one level, core.config.ALPHA,
the level notebook prose states ("95% CI", checked by clinlib.core.prose)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import clinlib.analysis
from clinlib.core import prose
from clinlib.core.config import ALPHA


def _alpha_defaults():
    for info in pkgutil.walk_packages(clinlib.analysis.__path__, "clinlib.analysis."):
        module = importlib.import_module(info.name)
        for name, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                param = inspect.signature(fn).parameters.get("alpha")
                if param is not None and param.default is not inspect.Parameter.empty:
                    yield f"{module.__name__}.{name}", param.default


def test_every_alpha_default_is_the_kit_level():
    found = dict(_alpha_defaults())
    assert "clinlib.analysis.stats.question.wilson_ci" in found  # the walk sees the stats
    assert {k: v for k, v in found.items() if v != ALPHA} == {}


def test_prose_states_only_the_kit_level_bare():
    assert ALPHA == 0.05 and prose.CI_LEVEL_PERCENT == "95%"
    assert prose.prose_numbers("Wilson 95% CIs per cell.") == []
    assert [p.number for p in prose.prose_numbers("Wilson 90% CIs per cell.")] == ["90%"]
