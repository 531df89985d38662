"""The task registry: the one list of task modules, and the specs they declare (paper §3 "Task
suite"; docs/extending.md "Add a task").

Each module in :data:`TASK_MODULES` declares ``SPEC`` (one :class:`~clinlib.tasks.spec.TaskSpec`)
or ``SPECS`` (several, e.g. the trap types). The modules are imported on the first lookup, not
when this module is imported, so a task module may use anything of :mod:`clinlib.tasks` without
an import circle. Everything else (``ANSWER_FORMATS``, ``MAX_TOKENS``, ``TASK_NAMES``, ...) is a
read-only view derived from the specs.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from clinlib.tasks.spec import TaskSpec

TASK_MODULES: tuple[str, ...] = (
    "clinlib.tasks.generators.t1",
    "clinlib.tasks.generators.t2",
    "clinlib.tasks.generators.t3",
    "clinlib.tasks.generators.t4",
    "clinlib.tasks.generators.t5",
    "clinlib.tasks.generators.t6",
    "clinlib.tasks.generators.t7",
    "clinlib.tasks.generators.t8",
    "clinlib.tasks.generators.t9",
    "clinlib.tasks.generators.t10",
    "clinlib.tasks.generators.t1r",
    "clinlib.tasks.generators.t11",
    "clinlib.tasks.generators.t1f",
    "clinlib.tasks.generators.t7r",
    "clinlib.tasks.generators.t7i",
    "clinlib.tasks.traps.answers",
    "clinlib.tasks.population.tasks",
)
"""The task modules, in the order tasks are listed (reports, generation)."""

_SPECS: dict[str, TaskSpec] = {}
_VIEWS: dict[str, object] = {}  # derived views, rebuilt after a task joins or leaves
_state = {"loaded": False, "loading": False}


def _load() -> None:
    if _state["loaded"]:
        return
    _state["loaded"] = _state["loading"] = True  # a module may look a spec up while loading
    try:
        for name in TASK_MODULES:
            module = importlib.import_module(name)
            for spec in getattr(module, "SPECS", None) or (module.SPEC,):
                _SPECS.setdefault(spec.name, spec)
    except BaseException:
        _state["loaded"] = False
        _SPECS.clear()
        raise
    finally:
        _state["loading"] = False


def register(spec: TaskSpec) -> TaskSpec:
    """Add a task (names are unique); how a task outside :data:`TASK_MODULES` joins."""
    _load()
    if spec.name in _SPECS:
        raise ValueError(f"task {spec.name} is already registered")
    _SPECS[spec.name] = spec
    _VIEWS.clear()
    return spec


def unregister(name: str) -> None:
    """Remove a task added by :func:`register` (tests)."""
    _load()
    _SPECS.pop(name, None)
    _VIEWS.clear()


def get_spec(name: str) -> TaskSpec:
    """The spec of task ``name``, with a clear error for unknown names."""
    _load()
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(sorted(_SPECS))}") from None


def specs(*families: str) -> tuple[TaskSpec, ...]:
    """The registered specs in registry order, only of ``families`` when given."""
    _load()
    return tuple(s for s in _SPECS.values() if not families or s.family in families)


def task_names(*families: str) -> tuple[str, ...]:
    """The registered task names in registry order, only of ``families`` when given."""
    return tuple(s.name for s in specs(*families))


def is_family(name: str, family: str) -> bool:
    """Whether ``name`` is a registered task of ``family`` (False for unknown names)."""
    _load()
    spec = _SPECS.get(str(name))
    return spec is not None and spec.family == family


class _Registry(Mapping):
    """Read-only name -> spec view of the registry's ``families`` (loads it on first use)."""

    def __init__(self, *families: str) -> None:
        self._families = families

    def _names(self) -> list[str]:
        _load()
        return [n for n, s in _SPECS.items() if not self._families or s.family in self._families]

    def __getitem__(self, name: str) -> TaskSpec:
        if name not in self._names():
            raise KeyError(name)
        return _SPECS[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"{{{', '.join(self)}}}"


TASKS: Mapping[str, TaskSpec] = _Registry("paper", "extended")
"""The tasks of the question sets (paper and extended) by name, as the harness asks them."""
SPECS: Mapping[str, TaskSpec] = _Registry()
"""Every registered task by name, of every family (the trap types too)."""


def derived(name: str):
    """The read-only views other modules re-export (``ANSWER_FORMATS`` ...), built on first
    access and rebuilt after a task joins or leaves; None for an unknown view name."""
    if name in _VIEWS:
        return _VIEWS[name]
    views = {
        "TASK_NAMES": lambda: task_names("paper"),
        "EXTENDED_TASK_NAMES": lambda: task_names("extended"),
        "ALL_TASK_NAMES": lambda: task_names("paper", "extended"),
        "TRAP_TASK_NAMES": lambda: task_names("trap"),
        "CUT_TASKS": lambda: tuple(s.name for s in specs() if s.cut),
        "ANSWER_FORMATS": lambda: {s.name: s.answer_format for s in specs("paper", "extended")},
        "MAX_TOKENS": lambda: {s.name: s.max_tokens for s in specs("paper", "extended")},
        "TITLES": lambda: {s.name: s.title for s in specs("paper", "extended")},
        "SUBTYPES": lambda: {s.name: tuple(s.subtypes) for s in specs("paper", "extended")},
        "GENERATORS": lambda: {s.name: s.generate for s in specs() if s.generate is not None},
        "GRADERS": lambda: {s.name: s.grade for s in specs() if s.grade is not None},
        "DIAGNOSERS": lambda: {s.name: s.diagnose for s in specs() if s.diagnose is not None},
    }
    view = views.get(name)
    if view is None:
        return None
    if _state["loading"]:
        # a module-level snapshot taken while the task modules import would miss tasks
        raise RuntimeError(f"{name} read while the task modules load: look it up when called")
    _VIEWS[name] = view()
    return _VIEWS[name]
