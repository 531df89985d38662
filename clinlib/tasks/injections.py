"""Controlled injections: the T3 attribution probe and the T5 contradiction statements (paper §3
"Task suite" T3/T5; §5.5 SP4 "Controlled preservation probe"; Fig. 5, Table 3).

An :class:`Injection` is one sentence inserted into one patient's dialogue as a new turn right
after an existing turn of the same encounter. T3 positives carry the physician-attribution
sentence (``Physician noted: <finding> is consistent with <problem>.``), T3 negatives carry
nothing; T5's controlled subtypes carry a statement contradicting a documented fact, T5's
control and natural subtypes carry nothing. The injection is stored as JSON in the question's
``injection`` column, so the question set alone says how to transform the dialogue.

Everything here is pure: :func:`apply_injections` returns a new DataFrame and never touches the
stored dialogue. WHEN to apply is the caller's choice, named by :data:`SETTINGS` and recorded in
the prediction's ``setting`` field:

* ``pre`` (equal input, the preservation probe — the paper's primary setting): the
  representation (summary, memory, timeline, index) is BUILT from the injected dialogue;
* ``post`` (update / staleness probe): the representation is built from the original dialogue
  and the sentence only exists in the text available at answer time.

:func:`construction_dialogue` and :func:`answer_dialogue` return the two views for a setting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from clinlib.tasks.settings import STATIC_SETTINGS

SETTINGS: tuple[str, ...] = STATIC_SETTINGS  # one home: clinlib.tasks.settings
INJECTION_KINDS: tuple[str, ...] = ("t3", "t5", "trap")  # trap: clinlib.tasks.traps
SPEAKERS: tuple[str, ...] = ("patient", "clinician")
TASK_KIND = {"T3": "t3", "T5": "t5"}


class InjectionError(ValueError):
    """An injection that cannot be applied (unknown patient, turn or encounter, bad JSON)."""


@dataclass(frozen=True)
class Injection:
    """One inserted sentence.

    Attributes:
        kind: ``t3``, ``t5`` or ``trap`` (an injected patient constraint, clinlib.tasks.traps).
        subject_id: the patient.
        visit_idx: the encounter the sentence belongs to.
        after_turn_idx: the original turn (of that encounter) the new turn follows.
        speaker: ``clinician`` (or ``patient``).
        text: the sentence.
        qid: the question it serves.
    """

    kind: str
    subject_id: int
    visit_idx: int
    after_turn_idx: int
    speaker: str
    text: str
    qid: str

    def __post_init__(self) -> None:
        if self.kind not in INJECTION_KINDS:
            raise InjectionError(f"injection kind {self.kind!r} not in {INJECTION_KINDS}")
        if self.speaker not in SPEAKERS:
            raise InjectionError(f"injection speaker {self.speaker!r} not in {SPEAKERS}")
        if not str(self.text).strip():
            raise InjectionError(f"injection for {self.qid} has empty text")

    def to_json(self) -> str:
        """Canonical JSON (sorted keys)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Injection:
        """Parse :meth:`to_json` output; raises InjectionError on malformed input."""
        try:
            d = json.loads(text)
            return cls(
                kind=str(d["kind"]),
                subject_id=int(d["subject_id"]),
                visit_idx=int(d["visit_idx"]),
                after_turn_idx=int(d["after_turn_idx"]),
                speaker=str(d["speaker"]),
                text=str(d["text"]),
                qid=str(d["qid"]),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InjectionError):
                raise
            raise InjectionError(f"malformed injection JSON {text[:80]!r}: {exc}") from None


def apply_injections(turns: pd.DataFrame, injections: Iterable[Injection]) -> pd.DataFrame:
    """Insert each injection as a new turn right after its anchor turn.

    Several injections after the same turn are inserted in qid order. ``turn_idx`` is
    renumbered consecutively per patient from the patient's first given turn (0.. for whole
    dialogues); ``source_turn_idx`` keeps the original index (-1 for inserted
    turns), ``injected`` marks inserted turns and ``injected_qid`` names their question.

    Args:
        turns: dialogue turns (dialogues.parquet rows; one or many patients).
        injections: the injections to apply.

    Returns:
        A new DataFrame; ``turns`` is not modified.

    Raises:
        InjectionError: an injection names a patient or turn that is not in ``turns`` or a
            turn of another encounter.
    """
    base = turns.sort_values(["subject_id", "turn_idx"], kind="stable").reset_index(drop=True)
    base = base.copy()
    base["source_turn_idx"] = base["turn_idx"].astype("int64")
    base["injected"] = False
    base["injected_qid"] = ""
    by_key = {
        (int(s), int(t)): int(v)
        for s, t, v in zip(base["subject_id"], base["turn_idx"], base["visit_idx"], strict=True)
    }
    after: dict[tuple[int, int], list[Injection]] = {}
    for inj in injections:
        key = (int(inj.subject_id), int(inj.after_turn_idx))
        if key not in by_key:
            raise InjectionError(
                f"injection {inj.qid}: patient {inj.subject_id} has no turn {inj.after_turn_idx}"
            )
        if by_key[key] != int(inj.visit_idx):
            raise InjectionError(
                f"injection {inj.qid}: turn {inj.after_turn_idx} of patient {inj.subject_id} "
                f"belongs to visit {by_key[key]}, not visit {inj.visit_idx}"
            )
        after.setdefault(key, []).append(inj)
    if not after:
        out = base
    else:
        records = []
        template = {c: None for c in base.columns}
        for rec in base.to_dict("records"):
            records.append(rec)
            for inj in sorted(
                after.get((int(rec["subject_id"]), int(rec["turn_idx"])), []), key=lambda i: i.qid
            ):
                new = dict(template)
                new.update(
                    subject_id=rec["subject_id"],
                    visit_idx=rec["visit_idx"],
                    speaker=inj.speaker,
                    text=inj.text,
                    event_ids=[],
                    source_turn_idx=-1,
                    injected=True,
                    injected_qid=inj.qid,
                )
                if "text_tagged" in base.columns:
                    new["text_tagged"] = inj.text
                for col in ("visit_date", "hadm_id"):
                    if col in base.columns:
                        new[col] = rec[col]
                records.append(new)
        out = pd.DataFrame.from_records(records, columns=list(base.columns))
    # renumber from each patient's first given turn (0 for a whole dialogue), so a slice of
    # a dialogue keeps its numbering up to the inserted turn
    first = out.groupby("subject_id")["source_turn_idx"].transform(lambda s: s[s >= 0].min())
    out["turn_idx"] = (first + out.groupby("subject_id").cumcount()).astype("int64")
    out["source_turn_idx"] = out["source_turn_idx"].astype("int64")
    out["injected"] = out["injected"].astype(bool)
    out["injected_qid"] = out["injected_qid"].astype("string")
    return out.reset_index(drop=True)


def injections_of(questions: pd.DataFrame, task: str | None = None) -> list[Injection]:
    """The injections stored in a question set (optionally of one task), in qid order."""
    q = questions if task is None else questions[questions["task"] == task]
    out = [Injection.from_json(str(s)) for s in q["injection"] if isinstance(s, str) and s]
    return sorted(out, key=lambda i: i.qid)


def injected_dialogue(
    turns: pd.DataFrame,
    questions: pd.DataFrame,
    task: str,
    subject_ids: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Per patient, the dialogue variant with ALL of that patient's ``task`` injections (T3
    positives, or T5's controlled statements).

    Args:
        turns: dialogue turns (any number of patients).
        questions: the question set (questions.parquet).
        task: ``T3`` or ``T5``.
        subject_ids: restrict to these patients (default: every patient in ``turns``).

    Returns:
        The injected turns (see :func:`apply_injections`); patients without injections are
        returned unchanged apart from the added columns.
    """
    if task not in TASK_KIND:
        raise InjectionError(f"task {task!r} has no injections; expected one of {list(TASK_KIND)}")
    t = turns if subject_ids is None else turns[turns["subject_id"].isin(list(subject_ids))]
    present = set(t["subject_id"].astype(int))
    injs = [i for i in injections_of(questions, task) if i.subject_id in present]
    return apply_injections(t, injs)


def construction_dialogue(
    turns: pd.DataFrame, questions: pd.DataFrame, task: str, setting: str
) -> pd.DataFrame:
    """The dialogue a representation is BUILT from: injected for ``pre``, original for
    ``post`` (with the added columns, nothing injected)."""
    _check_setting(setting)
    if setting == "pre":
        return injected_dialogue(turns, questions, task)
    return apply_injections(turns, [])


def answer_dialogue(turns: pd.DataFrame, questions: pd.DataFrame, task: str) -> pd.DataFrame:
    """The dialogue text available at answer time (raw-text strategies such as full context,
    last visit or retrieval over the text): injected in both settings."""
    return injected_dialogue(turns, questions, task)


def _check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise InjectionError(f"setting {setting!r} not in {SETTINGS}")
