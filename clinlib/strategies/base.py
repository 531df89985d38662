"""The history-representation contract (paper §4 "History representation strategies",
"Memory prep model"; §5.5 T3 pre- vs post-construction injection).

A strategy has two halves:

* **construction** — once per patient, from the dialogue text only (never the events table
  or a gold answer), possibly by a prep model: :meth:`Strategy.construct` returns a
  JSON-serialisable :class:`Artifact` (the diagnostic controls are the exceptions, by design:
  ``event-table`` reads the source events the dialogue states, App. G.8, and ``oracle``
  selects visits by the question's gold anchors);
* **access** — per question: :meth:`Strategy.access` turns the artifact (and the dialogue as
  it is at question time, ``turns_now``) into the context string that goes into the prompt.

Verbatim / addressable strategies (full-context, last-visit-only, retrieval) return the
CURRENT text of what they select, so they see a sentence injected after construction (the
paper's post-construction T3 setting); derived strategies (timeline, summary, Mem0, A-Mem,
codebook) return what they built and cannot (``derived = True``).

:func:`context_for` handles T6's two patients ("Patient A:" / "Patient B:" sections).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from clinlib.dialogue.render import render_dialogue
from clinlib.strategies.turnmemo import derived, turn_records

if TYPE_CHECKING:  # pragma: no cover - typing only
    from clinlib.strategies.prep import PrepModel

ARTIFACT_VERSION = 1
REQUIRED_TURN_COLUMNS: tuple[str, ...] = ("subject_id", "visit_idx", "turn_idx", "speaker", "text")
PATIENT_LABELS: tuple[str, ...] = ("A", "B", "C", "D")
SECTION_HEADER = "Patient {label}:"
NO_PREP = "none"


def _json_default(obj: Any) -> Any:
    """A dataclass inside an artifact's data serialises as :func:`dataclasses.asdict` makes it;
    anything else not JSON is refused, as by :func:`json.dumps`."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class StrategyError(ValueError):
    """A strategy is unknown, mis-parameterised, or was given unusable input."""


@dataclass
class Artifact:
    """What a strategy built for one patient (JSON-serialisable, shown by the notebooks).

    Attributes:
        strategy: registry name.
        subject_id: the patient.
        params: the construction parameters (those that change what is built).
        prep_model: ``"rule-based"``, a backbone name, or ``"none"`` (no prep model used).
        dialogue_hash: sha256 of the rendered dialogue the artifact was built from.
        data: the representation itself (strategy-specific, JSON types only).
        key: the construction-cache key.
        build_seconds: wall time of the construction.
        prep_usage: what an LLM prep model spent on this patient, as its endpoint reported
            it (requests, input_tokens, output_tokens, cached_tokens, cost_usd); empty for
            rule-based prep, which sends nothing (Appendix D).
        version: artifact format version.
    """

    strategy: str
    subject_id: int
    params: dict[str, Any]
    prep_model: str
    dialogue_hash: str
    data: dict[str, Any]
    key: str = ""
    build_seconds: float = 0.0
    version: int = ARTIFACT_VERSION
    prep_usage: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON types only)."""
        return asdict(self)

    def to_json(self) -> str:
        """Canonical JSON text: :meth:`to_dict`'s, serialised from the fields themselves (the
        deep copy :func:`dataclasses.asdict` makes of ``data`` is not needed to write it)."""
        fields_ = {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
        return json.dumps(fields_, sort_keys=True, ensure_ascii=False, default=_json_default)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Artifact:
        """Inverse of :meth:`to_dict`; raises StrategyError naming a missing field."""
        try:
            return cls(
                strategy=str(d["strategy"]),
                subject_id=int(d["subject_id"]),
                params=dict(d["params"]),
                prep_model=str(d["prep_model"]),
                dialogue_hash=str(d["dialogue_hash"]),
                data=dict(d["data"]),
                key=str(d.get("key", "")),
                build_seconds=float(d.get("build_seconds", 0.0)),
                version=int(d.get("version", ARTIFACT_VERSION)),
                prep_usage={str(k): float(v) for k, v in dict(d.get("prep_usage", {})).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StrategyError(f"malformed artifact: {exc!r}") from None


def check_turns(turns: pd.DataFrame, source: str = "turns") -> pd.DataFrame:
    """Validate one patient's dialogue turns and return them sorted by ``turn_idx``.

    Args:
        turns: dialogues.parquet rows of ONE patient (``text_tagged`` optional: it defaults
            to ``text``).
        source: name used in error messages.

    Returns:
        A sorted copy with ``text_tagged`` present.

    Raises:
        StrategyError: not a DataFrame, a required column missing, no rows, several patients,
            or a null text.
    """
    if not isinstance(turns, pd.DataFrame):
        raise StrategyError(
            f"{source}: expected a DataFrame of dialogue turns, got {type(turns).__name__}"
        )
    missing = [c for c in REQUIRED_TURN_COLUMNS if c not in turns.columns]
    if missing:
        raise StrategyError(
            f"{source}: missing column(s) {', '.join(missing)}; expected dialogues.parquet rows"
        )
    if turns.empty:
        raise StrategyError(f"{source}: no dialogue turns")
    sids = pd.unique(turns["subject_id"])
    if len(sids) != 1:
        raise StrategyError(
            f"{source}: expected one patient's turns, got subject_ids "
            f"{sorted(int(s) for s in sids)[:5]}"
        )
    out = turns.sort_values("turn_idx", kind="stable").reset_index(drop=True)
    if "text_tagged" not in out.columns:
        out = out.assign(text_tagged=out["text"])
    bad = out["text"].isna() | out["text_tagged"].isna()
    if bad.any():
        raise StrategyError(
            f"{source}: patient {int(sids[0])} has a null text in turn(s) "
            f"{out.loc[bad, 'turn_idx'].astype(int).tolist()[:5]}"
        )
    return out


def render(turns: pd.DataFrame, with_ids: bool = True, visits: Sequence[int] | None = None) -> str:
    """The dialogue text exactly as full-context shows it (``clinlib.dialogue.synth``'s renderer)."""
    rows = turn_records(turns) if isinstance(turns, pd.DataFrame) else turns
    return render_dialogue(rows, with_ids=with_ids, visits=visits)


def dialogue_hash(turns: pd.DataFrame) -> str:
    """sha256 of the rendered dialogue (ids on): equal text -> equal hash, so a pre-injected
    variant of a dialogue gets its own cache entry."""
    return hashlib.sha256(render(turns, with_ids=True).encode("utf-8")).hexdigest()


def text_hash(text: str) -> str:
    """sha256 of a text (embedding-cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def visit_order(turns: pd.DataFrame) -> list[int]:
    """The visit indices of a dialogue in chronological order."""
    return list(derived(turns, "visit_order", _visit_order))


def _visit_order(turns: pd.DataFrame) -> list[int]:
    return sorted(int(v) for v in pd.unique(turns["visit_idx"]))


def question_text(question: Mapping[str, Any]) -> str:
    """The question stem (``question`` field); raises StrategyError if absent."""
    text = question.get("question") if isinstance(question, Mapping) else None
    if not isinstance(text, str):
        raise StrategyError(f"question {question_id(question)!r} has no 'question' text")
    return text


def question_id(question: Mapping[str, Any]) -> str:
    """The qid of a question mapping (``"?"`` when absent)."""
    return str(question.get("qid", "?")) if isinstance(question, Mapping) else "?"


def subject_ids_of(question: Mapping[str, Any]) -> list[int]:
    """The patients of a question (two for T6: A then B)."""
    raw = question.get("subject_ids") if isinstance(question, Mapping) else None
    if raw is None:
        raise StrategyError(f"question {question_id(question)!r} has no subject_ids")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise StrategyError(
                f"question {question_id(question)!r}: subject_ids {raw!r} is not a list"
            ) from None
    if isinstance(raw, int | np.integer):
        raw = [raw]
    try:
        out = [int(s) for s in list(raw)]
    except (TypeError, ValueError):
        raise StrategyError(
            f"question {question_id(question)!r}: subject_ids {raw!r} are not integers"
        ) from None
    if not out:
        raise StrategyError(f"question {question_id(question)!r} has an empty subject_ids")
    return out


class Strategy:
    """Base class of every history representation (see module docstring).

    Subclasses set the class attributes and implement :meth:`build` and :meth:`access`.

    Attributes:
        name: registry key.
        family: the paper's family (floor, recency, full, retrieval, compression, memory, ...).
        derived: built upstream; cannot see a sentence injected after construction.
        uses_prep: construction depends on the prep model (else ``prep_model = "none"``).
        defaults: parameter defaults (every accepted keyword).
        construction_keys: the parameters that change what is built (the cache key); the
            others (e.g. retrieval depth K) act only at access, so changing them rebuilds
            nothing.
        code_version: bumped when the constructor changes, so stale cache entries are ignored.
        history_only: the context never shows the target visit or a later one (T11 may be
            asked under it).
    """

    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    derived: ClassVar[bool] = False
    uses_prep: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    construction_keys: ClassVar[tuple[str, ...]] = ()
    code_version: ClassVar[int] = 1
    # False when the context does not depend on the question (only on the patient and the
    # dialogue at question time), so the harness renders it once per patient.
    query_dependent: ClassVar[bool] = True
    # True when the context shows nothing of the question's target visit or a later one (only
    # earlier visits, or none): the only strategies a decision question cut inside its visit
    # (T11, clinlib.tasks.answers.CUT_TASKS) may be asked under; every other representation
    # renders the current stay past the cut, i.e. the answer (clinlib.eval.harness.cells).
    history_only: ClassVar[bool] = False

    def __init__(self, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            raise StrategyError(
                f"strategy {self.name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"accepted: {known}"
            )
        self.params: dict[str, Any] = {**self.defaults, **params}
        self.validate_params()

    def validate_params(self) -> None:
        """Raise StrategyError for an out-of-range parameter (subclasses extend)."""

    def _positive_int(self, key: str) -> None:
        value = self.params[key]
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise StrategyError(
                f"strategy {self.name!r}: {key} must be an integer >= 1, got {value!r}"
            )

    @property
    def construction_params(self) -> dict[str, Any]:
        """Parameters that enter the construction-cache key."""
        return {k: self.params[k] for k in self.construction_keys}

    def prep_id(self, prep: PrepModel | None) -> str:
        """What the artifact records as ``prep_model``."""
        if not self.uses_prep:
            return NO_PREP
        if prep is None:
            raise StrategyError(f"strategy {self.name!r} needs a prep model (e.g. 'rule-based')")
        return prep.name

    def prep_key(self, prep: PrepModel | None) -> str:
        """The prep model's versioned id for the cache key ("none" if unused)."""
        if not self.uses_prep:
            return NO_PREP
        if prep is None:
            raise StrategyError(f"strategy {self.name!r} needs a prep model (e.g. 'rule-based')")
        return prep.model_id

    def label(self) -> str:
        """``name`` plus non-default parameters as Python literals, e.g. ``dense-retrieval(k=3)``
        or ``dense-retrieval(embedding_model='all-MiniLM-L6-v2')`` (so it parses back)."""
        changed = {
            k: v
            for k, v in self.params.items()
            if not k.endswith("_dir") and self.defaults.get(k) != v
        }
        if not changed:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v!r}" for k, v in sorted(changed.items())) + ")"

    # -- construction -----------------------------------------------------------------------
    def construct(
        self, subject_id: int, turns: pd.DataFrame, prep: PrepModel | None = None
    ) -> Artifact:
        """Build the representation of one patient.

        Args:
            subject_id: the patient.
            turns: the dialogue to build from (original, or injected in the ``pre`` setting).
            prep: the prep model (ignored by strategies with ``uses_prep = False``).

        Returns:
            The artifact (``key`` left empty; the cache fills it).
        """
        return self.construct_many([(subject_id, turns)], prep)[0]

    def construct_many(
        self,
        jobs: Sequence[tuple[int, pd.DataFrame]],
        prep: PrepModel | None = None,
        hashes: Mapping[int, str] | None = None,
    ) -> list[Artifact]:
        """Build several patients (subclasses batch expensive steps such as embeddings).

        Args:
            jobs: (subject_id, turns) pairs.
            prep: the prep model.
            hashes: :func:`dialogue_hash` of a job's turns where the caller has it already
                (the construction cache keys on it), so it is not rendered again.

        Returns:
            One artifact per job, in order.
        """
        checked = [(int(s), self._checked(s, t)) for s, t in jobs]
        t0 = time.perf_counter()
        self.prepare(checked, prep)
        # The batch's shared preparation (e.g. embedding every text) is split evenly.
        shared = (time.perf_counter() - t0) / max(len(checked), 1)
        out = []
        for sid, turns in checked:
            t0 = time.perf_counter()
            data = self.build(sid, turns, prep)
            seconds = shared + time.perf_counter() - t0
            out.append(self._artifact(sid, turns, prep, data, seconds, (hashes or {}).get(sid)))
        return out

    def _checked(self, subject_id: int, turns: pd.DataFrame) -> pd.DataFrame:
        out = check_turns(turns, source=f"{self.name} turns of patient {subject_id}")
        if int(out["subject_id"].iloc[0]) != int(subject_id):
            raise StrategyError(
                f"{self.name}: turns belong to patient {int(out['subject_id'].iloc[0])}, "
                f"not {subject_id}"
            )
        return out

    def _artifact(
        self,
        subject_id: int,
        turns: pd.DataFrame,
        prep: PrepModel | None,
        data: dict[str, Any],
        seconds: float,
        sha: str | None = None,
    ) -> Artifact:
        return Artifact(
            strategy=self.name,
            subject_id=int(subject_id),
            params=self.construction_params,
            prep_model=self.prep_id(prep),
            dialogue_hash=sha or dialogue_hash(turns),
            data=data,
            build_seconds=round(float(seconds), 6),
        )

    def prepare(self, jobs: Sequence[tuple[int, pd.DataFrame]], prep: PrepModel | None) -> None:
        """Hook run once before a batch of :meth:`build` calls (e.g. embed all texts)."""

    def build(self, subject_id: int, turns: pd.DataFrame, prep: PrepModel | None) -> dict:
        """The artifact ``data`` for one patient (subclasses implement)."""
        raise NotImplementedError

    def build_snapshots(
        self, subject_id: int, turns: pd.DataFrame, prep: PrepModel | None, at: Sequence[int]
    ) -> dict[int, dict] | None:
        """``data`` after the first t visits for each t in ``at``, from ONE pass over the
        visits, or None when the strategy does not build visit by visit (the streaming
        protocol then builds each truncated dialogue; MedMemoryBench §5 "Evaluation Protocol"). Subclasses that
        build incrementally (Mem0, A-Mem) override it; a snapshot equals a build of the
        truncated dialogue."""
        return None

    # -- access -----------------------------------------------------------------------------
    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        """The context string for one question and one patient (subclasses implement)."""
        raise NotImplementedError

    def combine(
        self,
        question: Mapping[str, Any],
        parts: Sequence[tuple[Artifact | None, pd.DataFrame]],
    ) -> str:
        """Context of a multi-patient question (T6): one labelled section per patient."""
        sections = []
        for label, (artifact, turns_now) in zip(PATIENT_LABELS, parts, strict=False):
            body = self.access(artifact, question, turns_now)
            sections.append(f"{SECTION_HEADER.format(label=label)}\n{body}".rstrip())
        return "\n\n".join(sections)

    # -- inspection -------------------------------------------------------------------------
    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        """Size measures of an artifact (Appendix C.3): ``store_text`` and counts."""
        return {}

    def store_text(self, artifact: Artifact) -> str | None:
        """Everything the artifact holds, rendered (None for query-independent strategies
        whose store is the dialogue itself)."""
        return None

    def warm_queries(self, questions: Sequence[Mapping[str, Any]]) -> None:
        """Prepare for many accesses at once (e.g. embed every question in one batch instead
        of one encoder call per question); a no-op unless the strategy embeds queries."""

    def rank_visits(self, artifact: Artifact, question: Mapping[str, Any]) -> list[int] | None:
        """Visits ranked for a question (retrieval strategies; None otherwise)."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label()}>"


def turns_of(dialogues_now: Any, subject_id: int) -> pd.DataFrame:
    if isinstance(dialogues_now, pd.DataFrame):
        t = dialogues_now[dialogues_now["subject_id"] == subject_id]
    elif isinstance(dialogues_now, Mapping):
        t = dialogues_now.get(subject_id)
        if t is None:
            t = dialogues_now.get(str(subject_id))
    else:
        raise StrategyError(
            "dialogues_now must be a DataFrame of turns or a mapping subject_id -> turns, got "
            f"{type(dialogues_now).__name__}"
        )
    if t is None or len(t) == 0:
        raise StrategyError(f"no dialogue turns for patient {subject_id} at question time")
    return t


def context_for(
    question: Mapping[str, Any],
    strategy: Strategy,
    artifacts: Mapping[int, Artifact],
    dialogues_now: pd.DataFrame | Mapping[int, pd.DataFrame],
    *,
    prechecked: bool = False,
) -> str:
    """The prompt context of one question under one strategy.

    Args:
        question: a questions.parquet row (qid, question, subject_ids, ...).
        strategy: the strategy.
        artifacts: subject_id -> artifact built for that patient.
        dialogues_now: the dialogues as they are at question time (a turns DataFrame of any
            number of patients, or a mapping subject_id -> turns); post-construction
            injections live here.
        prechecked: ``dialogues_now`` maps subject_id -> turns already passed through
            :func:`check_turns` (a harness run validates each patient once, not per question).

    Returns:
        The context; T6 gets ``Patient A:`` / ``Patient B:`` sections.
    """
    sids = subject_ids_of(question)
    parts: list[tuple[Artifact | None, pd.DataFrame]] = []
    for sid in sids:
        artifact = artifacts.get(sid)
        if artifact is None and strategy.name != "no-context-blind":
            raise StrategyError(
                f"question {question_id(question)}: no {strategy.name} artifact for patient {sid}"
            )
        if artifact is not None and artifact.strategy != strategy.name:
            raise StrategyError(
                f"question {question_id(question)}: artifact of patient {sid} was built by "
                f"{artifact.strategy!r}, not {strategy.name!r}"
            )
        turns = turns_of(dialogues_now, sid)
        parts.append((artifact, turns if prechecked else check_turns(turns, f"patient {sid}")))
    if len(parts) == 1:
        return strategy.access(parts[0][0], question, parts[0][1])
    return strategy.combine(question, parts)


class StoredTextStrategy(Strategy):
    """A strategy whose artifact is one rendered text, the same for every question
    (timeline, event table, summary): ``access`` and ``store_text`` return
    ``artifact.data[text_key]``."""

    text_key = "text"

    def access(
        self, artifact: Artifact | None, question: Mapping[str, Any], turns_now: pd.DataFrame
    ) -> str:
        if artifact is None:
            raise StrategyError(f"{self.name}: no artifact for this patient")
        return str(artifact.data[self.text_key])

    def store_text(self, artifact: Artifact) -> str:
        return str(artifact.data[self.text_key])
