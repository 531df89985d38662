"""Hostile paraphrasers: each changes exactly one meaning-bearing word class of a question's
stem (order, superlative, comparative, negation, time anchor, unit) and keeps everything else,
to show the paraphrase check ``invariants_kept`` refusing it (paper Fig. 2 stage 4; §3 "Task
suite"). Deterministic string rules, not language models.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from clinlib.tasks.answers import ABSTAIN_CLAUSE
from clinlib.tasks.base import TASKS
from clinlib.tasks.paraphrase import check_paraphrase, first_problem


def _swap_words(pairs: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    table = {a: b for a, b in pairs} | {b: a for a, b in pairs}
    pat = re.compile(r"\b(" + "|".join(map(re.escape, table)) + r")\b")
    return lambda s: pat.sub(lambda m: table[m.group(1)], s)


def _insert_not(stem: str) -> str:
    return re.sub(r"\b(was|did|is|were|does)\b", r"\1 not", stem, count=1)


@dataclass(frozen=True)
class ParaphraseWriter:
    """A hostile paraphraser, its error and the check that must refuse it."""

    name: str
    error: str
    check: str
    edit: Callable[[str], str]

    def fn(self, row: Mapping[str, Any]) -> str | None:
        """The question with its stem (the text before its answer-format statement, abstention
        clause or options) edited, or None when the edit changes nothing."""
        question = str(row["question"])
        spec = TASKS.get(str(row.get("task")))
        fixed = [spec.answer_format if spec is not None else "", ABSTAIN_CLAUSE, "Options:"]
        cut = min([question.find(p) for p in fixed if p and p in question] or [len(question)])
        stem = question[:cut]
        new = self.edit(stem)
        return None if new == stem else new + question[cut:]


PARAPHRASE_WRITERS: tuple[ParaphraseWriter, ...] = (
    ParaphraseWriter(
        "reverse_order",
        "first<->last, earliest<->latest",
        "invariants_kept",
        _swap_words((("first", "last"), ("earliest", "latest"))),
    ),
    ParaphraseWriter(
        "change_superlative",
        "highest<->lowest, maximum<->minimum",
        "invariants_kept",
        _swap_words((("highest", "lowest"), ("maximum", "minimum"), ("peak", "nadir"))),
    ),
    ParaphraseWriter(
        "change_comparative",
        "higher<->lower, more<->less",
        "invariants_kept",
        _swap_words((("higher", "lower"), ("more", "less"), ("increase", "decrease"))),
    ),
    ParaphraseWriter("add_negation", "'was' -> 'was not'", "invariants_kept", _insert_not),
    ParaphraseWriter(
        "shift_time_anchor",
        "before<->after",
        "invariants_kept",
        _swap_words((("before", "after"),)),
    ),
    ParaphraseWriter(
        "change_unit",
        "mg/dL->mmol/L, days<->weeks",
        "invariants_kept",
        _swap_words((("mg/dL", "mmol/L"), ("days", "weeks"))),
    ),
)


def paraphrase_refusals(questions: pd.DataFrame) -> pd.DataFrame:
    """Every hostile paraphraser over every question: questions it changed (N), refused by
    the expected check (n), refused by another check, accepted."""
    rows = []
    records = questions.to_dict("records")
    for w in PARAPHRASE_WRITERS:
        n = by_check = other = accepted = 0
        for r in records:
            out = w.fn(r)
            if out is None:
                continue
            n += 1
            check, _ = first_problem(check_paraphrase(r, out))
            by_check += check == w.check
            other += bool(check) and check != w.check
            accepted += not check
        rows.append(
            dict(
                writer=w.name,
                error=w.error,
                check=w.check,
                n_questions=n,
                refused_by_check=by_check,
                refused_other=other,
                accepted=accepted,
            )
        )
    return pd.DataFrame(rows)
