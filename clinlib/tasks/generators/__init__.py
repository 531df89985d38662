"""One question generator per task: T1–T9 (paper §3 "Task suite", Fig. 1) and the extended
tasks (T10, LongMedBench "Temporal reasoning"; docs/design.md "Extended question set"); see
:mod:`clinlib.tasks.generators.common` for the shared conventions.

Each task module declares its :class:`~clinlib.tasks.spec.TaskSpec` (``SPEC``) next to its
``generate(inp)``; :mod:`clinlib.tasks.registry` lists the modules (docs/extending.md).
``GENERATORS``, ``SUBTYPES`` and ``TITLES`` are read-only views of the specs.
"""

from __future__ import annotations

import importlib

from clinlib.tasks.generators.inputs import TaskInputs
from clinlib.tasks.registry import derived


def __getattr__(name: str):
    if name in ("GENERATORS", "SUBTYPES", "TITLES"):
        return derived(name)
    try:  # a task module not imported yet (``generators.t1``): the registry imports lazily
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["GENERATORS", "SUBTYPES", "TITLES", "TaskInputs"]
