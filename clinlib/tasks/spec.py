"""A task, declared in one place (paper §3 "Task suite", Fig. 1; docs/extending.md).

Every task of the kit — the paper's T1–T9, the extended set (T10, T1R, T11, T1F, T7R), the
MedMemoryBench trap types — is one frozen :class:`TaskSpec`, declared in the task's own module
(``SPEC = TaskSpec(...)``) and listed once in :mod:`clinlib.tasks.registry`. Harness, gates and
readers ask the spec, never the task's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FAMILIES: tuple[str, ...] = ("paper", "extended", "trap", "population")
"""``paper``: the 6,271-question set (questions.parquet); ``extended``: docs/design.md
"Extended question set" (temporal_questions.parquet, never pooled with the paper's); ``trap``:
MedMemoryBench query types (trap_questions.parquet); ``population``: PopMedQA group questions
(population_questions.parquet, their own harness)."""


def resolve(ref: str | Callable | None) -> Callable | None:
    """A callable from a ``"package.module:name"`` reference (or the callable itself): how a
    spec names code in a later stage (an offline reader policy in clinlib.eval) or a module
    that imports the task's own module, without importing it."""
    if ref is None or callable(ref):
        return ref
    module, _, name = str(ref).partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class TaskSpec:
    """One task: what it asks, how its answers are read and judged, how its gold is rechecked.

    Attributes:
        name: the task's name (``T1``, ``T1R``, ``EEM``, ...), its column value everywhere.
        title: short description (tables, reports).
        answer_format: the format instruction every question of the task states.
        max_tokens: output-token cap (paper §4 / Appendix D).
        answer: how responses are parsed (strict, lenient), checked and graded
            (:class:`clinlib.tasks.answers.kinds.AnswerKind`); None for a family with its own
            ``scorer``.
        family: one of :data:`FAMILIES`.
        subtypes: the task's strata (Appendix B).
        generate: ``(TaskInputs) -> DataFrame`` of candidate questions (QUESTION_COLUMNS).
        recompute: gate L2, ``(meta, question, raw, status) -> Recomputed`` (or a reference).
        leak: gate L3, ``(row, stem, meta) -> reason | None`` (the stem states the gold).
        select: ``(candidates, n, seed) -> DataFrame``, the selection rule of an extended task
            (None: :func:`clinlib.tasks.build.select_task`); a callable or a reference.
        counts: questions per profile (``{"paper": 900, "quick": 24}``) of an extended task.
        cut: the question cuts the target visit (asked only under history-only strategies).
        patients: how many distinct patients a question is about (gate L0; T6 compares two).
        options: ``""`` (none), ``"texts"`` (option texts, T7) or ``"items"`` (distinct listed
            items, T10 / T11), checked by gate L0.
        anchor_status: the dialogue coverage its anchor events must have (gate L1): covered,
            or missed for the abstention task (anchorless: a never-measured lab), or either.
        scorer: ``(task, response, gold) -> Score``, one rule for both parser modes (traps).
        reader_policy: ``"module:function"`` of the offline reader's answer policy, resolved
            in clinlib.eval (a later stage).
        example_column: a column a question must fill to serve as the task's example in the
            strategy views (T3: ``injection``, the injected event being the task's point).
        system_prompt: the system message the harness sends with this task's questions ("":
            the harness's own, :data:`clinlib.eval.harness.prompts.SYSTEM_PROMPT`).
        temperature: the sampling temperature the harness asks with (None: the harness's
            default, 0).
        notes: free-form extras.
    """

    name: str
    title: str
    answer_format: str
    max_tokens: int
    # an AnswerKind (clinlib.tasks.answers.kinds; not imported: it builds on this)
    answer: Any = None
    family: str = "paper"
    subtypes: tuple[str, ...] = ()
    generate: Callable[..., Any] | None = None
    recompute: Callable[..., Any] | str | None = None
    leak: Callable[..., str | None] | None = None
    select: Callable[..., Any] | str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    cut: bool = False
    patients: int = 1
    options: str = ""
    anchor_status: tuple[str, ...] = ("covered",)
    scorer: Callable[[str, str | None, str], Any] | None = None
    reader_policy: str = ""
    example_column: str = ""
    system_prompt: str = ""
    temperature: float | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family {self.family!r} not in {FAMILIES}")
        if self.answer is None and self.scorer is None:  # population: answer = its schema
            raise ValueError(f"{self.name}: a task needs an answer kind or a scorer")

    @property
    def paper(self) -> bool:
        """One of the paper's nine tasks (questions.parquet)."""
        return self.family == "paper"

    @property
    def grade(self) -> Callable[[str | None, str], float] | None:
        return getattr(self.answer, "grade", None)  # population answers have none

    @property
    def diagnose(self) -> Callable[[str, list[str] | None], str | None] | None:
        return getattr(self.answer, "diagnose", None)

    def parse_strict(self, response: str | None, options: list[str] | None = None) -> str | None:
        """The strict reading of ``response`` (Appendix G.3)."""
        return self.answer.parse_strict(response, options)

    def parse_lenient(self, response: str | None, options: list[str] | None = None) -> str | None:
        """The lenient reading of ``response`` (Appendix G.3)."""
        return self.answer.parse_lenient(response, options)

    def is_correct(self, parsed: str | None, gold: str) -> bool:
        """Whether ``parsed`` matches ``gold`` (AnswerError for a non-canonical gold)."""
        return self.answer.is_correct(parsed, gold, self.name)

    def count(self, profile: str) -> int | None:
        """Questions of this task on ``profile`` (``paper`` or ``quick``), None if unset."""
        return self.counts.get(profile)
