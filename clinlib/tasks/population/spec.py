"""Declarative cohort specs for population questions (PopMedQA §2.1 "PopMedQA Pipeline":
"the idea also gives question-specific descriptions of the cohorts that need to be
generated", each with its size as a function of N; neopatient's "Positive Description" /
"Negative Description" criteria, §3 Fig. 2).

A spec file (TOML; the kit's is ``data/population/specs.toml``) holds one ``[[task]]`` per
question idea: the task id, the question template, the group sizes N, its cohorts (``role``,
``size`` as an expression in ``n`` and ``k``, ``positive`` / ``negative`` criteria) and, where
the kit's records lack the pattern, a ``plant`` table (the events the builder adds to the
synthetic records: a treatment pathway for a clique, a confounded treatment and outcome for
the ATE). A criterion is ``{field, op, value}`` over the patient attributes the records show
(:data:`FIELDS`). Every error names the file, the task and the key.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinlib.core.config import DATA_DIR
from clinlib.tasks.population.tasks import SPECS

SPEC_PATH = DATA_DIR / "population" / "specs.toml"
TASK_IDS: tuple[str, ...] = tuple(s.name for s in SPECS)  # the population task specs
FIELDS: dict[str, str] = {
    "disease": "the cohort's index disease",
    "tertile": "the complexity tertile",
    "index_dx": "index diseases with an ICD code in the record (a list)",
    "n_admissions": "admissions in the record",
}
OPS: tuple[str, ...] = ("in", "not_in", "has", "lacks", ">=", "<=")
PLANT_PATTERNS: tuple[str, ...] = ("signature", "score", "confounded")


class SpecError(ValueError):
    """A spec that cannot be used; the message names the file, task and key."""


@dataclass(frozen=True)
class Criterion:
    field: str
    op: str
    value: Any

    def holds(self, row: Mapping[str, Any]) -> bool:
        v = row[self.field]
        if self.op == "in":
            return v in self.value
        if self.op == "not_in":
            return v not in self.value
        if self.op == "has":
            return any(x in v for x in _as_list(self.value))
        if self.op == "lacks":
            return not any(x in v for x in _as_list(self.value))
        return v >= self.value if self.op == ">=" else v <= self.value


@dataclass(frozen=True)
class Cohort:
    role: str
    size: str
    positive: tuple[Criterion, ...] = ()
    negative: tuple[Criterion, ...] = ()

    def admits(self, row: Mapping[str, Any]) -> bool:
        """All positive criteria hold and no negative one does."""
        return all(c.holds(row) for c in self.positive) and not any(
            c.holds(row) for c in self.negative
        )

    def n(self, n: int, k: int) -> int:
        return size_of(self.size, n, k)


@dataclass(frozen=True)
class TaskIdea:
    task: str
    name: str
    question: str
    sizes: tuple[int, ...]
    k: int
    cohorts: tuple[Cohort, ...]
    plant: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def cohort(self, role: str) -> Cohort:
        return next(c for c in self.cohorts if c.role == role)


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else [v]


_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Constant,
    ast.Name,
    ast.Call,
    ast.Load,
)


def size_of(expr: str, n: int, k: int) -> int:
    """Evaluate a size expression over ``n`` and ``k`` (+, -, *, //, min, max, integers)."""
    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError as exc:  # e.g. a model's "n -": one line, never a traceback
        raise SpecError(f"size {expr!r}: not an expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise SpecError(f"size {expr!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in ("n", "k", "min", "max"):
            raise SpecError(f"size {expr!r}: unknown name {node.id!r} (use n, k, min, max)")
    try:
        value = eval(
            compile(tree, "<size>", "eval"),
            {"__builtins__": {}},
            {"n": n, "k": k, "min": min, "max": max},
        )  # noqa: S307 - names and nodes checked above
    except (ArithmeticError, TypeError, ValueError) as exc:  # n // 0, min(), min(n, "a")
        raise SpecError(f"size {expr!r} for n={n}, k={k}: {exc}") from None
    if not isinstance(value, int) or value < 0:
        raise SpecError(f"size {expr!r} gives {value!r} for n={n}, k={k}; need an integer >= 0")
    return value


def _criteria(raw: Any, where: str) -> tuple[Criterion, ...]:
    out = []
    for i, c in enumerate(_as_list(raw or [])):
        if not isinstance(c, Mapping) or set(c) != {"field", "op", "value"}:
            raise SpecError(f"{where}[{i}]: a criterion is {{field, op, value}}, got {c!r}")
        if c["field"] not in FIELDS:
            raise SpecError(
                f"{where}[{i}]: unknown field {c['field']!r}; known: {', '.join(FIELDS)}"
            )
        if c["op"] not in OPS:
            raise SpecError(f"{where}[{i}]: unknown op {c['op']!r}; known: {', '.join(OPS)}")
        out.append(Criterion(c["field"], c["op"], c["value"]))
    return tuple(out)


def _task(raw: Mapping[str, Any], where: str) -> TaskIdea:
    for key in ("task", "name", "question", "sizes", "cohort"):
        if key not in raw:
            raise SpecError(f"{where}: missing key {key!r}")
    if raw["task"] not in TASK_IDS:
        raise SpecError(f"{where}: unknown task {raw['task']!r}; known: {', '.join(TASK_IDS)}")
    cohorts = []
    for j, c in enumerate(raw["cohort"]):
        cw = f"{where}.cohort[{j}]"
        if "role" not in c or "size" not in c:
            raise SpecError(f"{cw}: a cohort needs 'role' and 'size'")
        cohorts.append(
            Cohort(
                str(c["role"]),
                str(c["size"]),
                _criteria(c.get("positive"), f"{cw}.positive"),
                _criteria(c.get("negative"), f"{cw}.negative"),
            )
        )
    sizes = tuple(int(s) for s in _as_list(raw["sizes"]))
    k = int(raw.get("k", 0))
    for c in cohorts:
        for n in sizes:
            size_of(c.size, n, k)
    plant = dict(raw.get("plant", {}))
    if plant and plant.get("pattern") not in PLANT_PATTERNS:
        raise SpecError(f"{where}.plant: pattern must be one of {', '.join(PLANT_PATTERNS)}")
    return TaskIdea(
        raw["task"],
        str(raw["name"]),
        str(raw["question"]),
        sizes,
        k,
        tuple(cohorts),
        plant,
        dict(raw.get("params", {})),
    )


def parse_specs(text: str, origin: str = "<spec>") -> list[TaskIdea]:
    """Parse and validate spec TOML text; errors name ``origin``, the task and the key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{origin}: not valid TOML ({exc})") from None
    tasks = raw.get("task")
    if not tasks or not isinstance(tasks, list):
        raise SpecError(f"{origin}: no [[task]] entries")
    out = []
    for i, t in enumerate(tasks):
        try:
            out.append(_task(t, f"task[{i}] ({t.get('task', '?')})"))
        except SpecError as exc:
            raise SpecError(f"{origin}: {exc}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"{origin}: task[{i}]: malformed ({exc})") from None
    return out


def load_specs(path: str | Path | None = None) -> list[TaskIdea]:
    """Parse and validate a spec file; raises :class:`SpecError` naming file, task and key."""
    path = Path(path or SPEC_PATH)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    return parse_specs(text, str(path))
