"""Offline readers: deterministic answering policies over the prompt text, not language models
(paper §4 "Backbones" — the kit's offline stand-in; §5.4 abstention (T9); §5.5 the T3
post-construction probe; docs/design.md "deterministic offline readers").

A reader receives exactly the chat messages an LLM would (:func:`clinlib.eval.harness.prompts.
build_messages`) and nothing else: it recovers (record, question) with
:func:`clinlib.eval.harness.prompts.split_user_message`, recognises the task from the question's wording,
parses the rendered record (dialogue lines under ``Visit N (date)`` headers, timeline rows,
memory / summary sentences, ``[EVENT-ID]`` tags) with regular expressions and applies the
documented gold rules (:mod:`clinlib.tasks.rules`). It never sees the gold, the events table or
any artifact, so its accuracy under a representation measures what that representation
PRESERVES.

* ``reference`` abstains ("insufficient information") when the needed fact is absent;
* ``eager`` answers the same way but never abstains: when the fact is absent it guesses (the
  nearest-date value of the lab, the reference-range midpoint, "no", "A", the first option) —
  an over-answering policy for the abstention analyses (SP3);
* ``replay`` answers from a recorded predictions table (see :func:`replay_policy_from`).

T10 ordering questions (extended set) are answered by :mod:`clinlib.eval.readers.order`, T11
decision questions by :mod:`clinlib.eval.readers.decision`, the trap query types by
:mod:`clinlib.eval.readers.trap`.

Static knowledge a clinician would bring (the lab panel's units and reference ranges, the T4
evidence families, the rule thresholds) comes from :mod:`clinlib.data.vocab` and
:mod:`clinlib.tasks.rules`; nothing patient-specific does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.eval.harness.prompts import split_user_message
from clinlib.eval.readers.answers import (
    read_t2,
    read_t3,
    read_t4,
    read_t5,
    read_t6,
    read_t7,
    read_t8,
    read_t9_other,
    read_value,
)
from clinlib.eval.readers.decision import answer_decision, decision_subtype
from clinlib.eval.readers.imaging import answer_imaging, is_imaging
from clinlib.eval.readers.order import answer_order, order_subtype
from clinlib.eval.readers.prompt import (
    PANEL_RES,
    TAG_RE,
    LabScan,
    Question,
    ReaderError,
    Record,
    assign_ids,
    encounter_spans,
    find_labels,
    lab_regex,
    mention_at,
    patient_sections,
    recognise,
    sentence_bounds,
)
from clinlib.eval.readers.relative import (
    answer_relative,
    answer_relative_option,
    recognise_relative,
    recognise_relative_option,
)
from clinlib.eval.readers.trap import answer_trap
from clinlib.llm.backbones import register_backbone, register_policy_backbone
from clinlib.llm.types import OFFLINE_READER_MODEL_PREFIX, Backbone, OfflineReply
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.registry import get_spec
from clinlib.tasks.spec import resolve

REFERENCE_LABEL = "reference reader (deterministic policy, not an LLM)"
EAGER_LABEL = "eager reader (deterministic, never abstains; not an LLM)"
REPLAY_LABEL = "replay of recorded predictions {name} (not an LLM)"
REPLAY_MISSING_NOTE = "replay: no recorded prediction for this request"

# enough for every distinct record of one batch of full-context answers.
SCAN_CACHE_CHARS = 32_000_000
_SCANS: OrderedDict[str, LabScan] = OrderedDict()
_SCANS_CHARS = 0
_SCANS_LOCK = threading.Lock()


def _scan(record: str) -> LabScan:
    """The question-independent parse of a record, memoised (least recently used first out,
    within :data:`SCAN_CACHE_CHARS`): a record is shared by a patient's questions, by both
    offline readers and by every extra-label variant."""
    global _SCANS_CHARS
    with _SCANS_LOCK:
        hit = _SCANS.get(record)
        if hit is not None:
            _SCANS.move_to_end(record)
            return hit
    scan = _scan_record(record)
    with _SCANS_LOCK:
        if record not in _SCANS:
            _SCANS[record] = scan
            _SCANS_CHARS += len(record)
            while _SCANS_CHARS > SCAN_CACHE_CHARS and len(_SCANS) > 1:
                old, _ = _SCANS.popitem(last=False)
                _SCANS_CHARS -= len(old)
    return scan


def _scan_record(record: str) -> LabScan:
    text = record
    low = text.lower()
    scan = LabScan(
        text=text,
        low=low,
        encounters=encounter_spans(text),
        sections=patient_sections(text),
        bounds=sentence_bounds(text),
        tags=[
            (m.start(), [i.strip() for i in m.group(1).split(",")]) for m in TAG_RE.finditer(text)
        ],
        found=find_labels(PANEL_RES, text, low),
        mentions={},
    )
    for start, _end, key, m in scan.found:
        scan.mentions[(start, key)] = mention_at(scan, start, key, m)
    return scan


def parse_record(record: str, extra_labels: Sequence[str] = ()) -> Record:
    """Parse a rendered record into its encounters and lab mentions.

    Args:
        record: the context text (any strategy's format).
        extra_labels: lab labels outside the panel to look for too (e.g. the question's lab).

    Returns:
        A :class:`Record` (lab mentions in text order, with tag ids assigned where possible).
    """
    rec = Record(text=record or "")
    if rec.empty:
        return rec
    scan = _scan(rec.text)
    rec.encounters = list(scan.encounters)
    extra = {}
    for label in extra_labels:
        if label.strip().lower() not in PANEL_RES:
            extra[label.strip().lower()] = (None, lab_regex(label.strip(), None))
    found = scan.found + find_labels(extra, scan.text, scan.low) if extra else list(scan.found)
    # a longer label wins over one it contains at the same value ("% Hemoglobin A1c")
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    kept: list[tuple[int, int, str, re.Match[str]]] = []
    for f in found:
        if kept and f[0] < kept[-1][1] and f[3].start("num") == kept[-1][3].start("num"):
            continue
        kept.append(f)
    mentions = []
    for start, _end, key, m in kept:
        got = (
            scan.mentions[(start, key)]
            if (start, key) in scan.mentions
            else mention_at(scan, start, key, m)
        )
        if got is not None:
            mentions.append(got)
    rec.labs = assign_ids(scan.tags, mentions)
    return rec


@functools.lru_cache(maxsize=256)
def _parse_cached(record: str, extra_labels: tuple[str, ...]) -> Record:
    """:func:`parse_record` memoised: the questions of one patient share one context, and the
    answer functions only read the parsed record (it must stay unmodified)."""
    return parse_record(record, extra_labels=extra_labels)


def answer(messages: Sequence[Mapping[str, Any]], eager: bool = False) -> str:
    """Answer one request from its messages only.

    Args:
        messages: chat messages built by :func:`clinlib.eval.harness.prompts.build_messages`.
        eager: never abstain (guess when the fact is absent).

    Returns:
        The answer text in the question's requested format, or ``ABSTAIN``.
    """
    if not messages:
        raise ReaderError("reader was given no messages")
    record, question = split_user_message(list(messages))
    if order_subtype(question) is not None:  # T10: the question carries its items
        return answer_order(question, eager)
    if is_imaging(question):  # T7I: the question states the imaging memory
        return answer_imaging(question, eager)
    if decision_subtype(question) is not None:  # T11: the stay in the question, memory as context
        return answer_decision(record, question, eager)
    trap = answer_trap(
        record, question, eager
    )  # the trap query types (MedMemoryBench §5 "Query Design")
    if trap is not None:
        return trap
    relative = recognise_relative(question)
    if relative is not None:  # the extended T1R task's positional wording
        rec = _parse_cached(
            record, tuple({relative.lab} if relative.lab.lower() not in PANEL_RES else ())
        )
        out = answer_relative(rec, relative, eager)
        return out if out is not None else ABSTAIN
    rel_option = recognise_relative_option(question)
    if rel_option is not None:  # the extended T7R task's relative wording (a stay's rank)
        out = answer_relative_option(_parse_cached(record, ()), rel_option, eager)
        return out if out is not None else ABSTAIN
    q = recognise(question)
    extra = [q.fields[k] for k in ("lab",) if q.fields.get(k)] + list(q.fields.get("labs", []))
    rec = _parse_cached(
        record, tuple(sorted({x for x in extra if x.strip().lower() not in PANEL_RES}))
    )
    # the recognised task's policy, named by its spec (clinlib.tasks.spec.TaskSpec.reader_policy)
    out = resolve(get_spec(q.task).reader_policy)(rec, q, eager)
    return out if out is not None else ABSTAIN


# --------------------------------------------------------------------------- per-task policies
# One per paper task, ``(record, question, eager) -> answer | None``; a task's spec names its
# policy (``reader_policy``), so the reader has no branch on a task's name.


def answer_t1(rec: Record, q: Question, eager: bool) -> str | None:
    return read_value(rec, q.fields, eager)


def answer_t2(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t2(rec, q.fields, eager)


def answer_t3(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t3(rec, q.fields, eager)


def answer_t4(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t4(rec, q.fields, eager)


def answer_t5(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t5(rec, q, eager)


def answer_t6(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t6(rec, q, eager)


def answer_t7(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t7(rec, q.fields, eager)


def answer_t8(rec: Record, q: Question, eager: bool) -> str | None:
    return read_t8(rec, q.fields, eager)


def answer_t9(rec: Record, q: Question, eager: bool) -> str | None:
    """A T9 lab question reads like T1's (the value, or an abstention); the others by kind."""
    if q.kind == "":
        return read_value(rec, q.fields, eager)
    return read_t9_other(rec, q, eager)


def reference_policy(messages: Sequence[Mapping[str, Any]], params: Any = None) -> str:
    """The ``reference`` reader: answers from the record, abstains when the fact is absent.

    Args:
        messages: the request's chat messages (nothing else is read).
        params: generation parameters (ignored: the reader is deterministic).

    Returns:
        The answer text.
    """
    return answer(messages, eager=False)


def eager_policy(messages: Sequence[Mapping[str, Any]], params: Any = None) -> str:
    """The ``eager`` reader: as :func:`reference_policy` but guesses instead of abstaining.

    Args:
        messages: the request's chat messages.
        params: generation parameters (ignored).

    Returns:
        The answer text (never ``ABSTAIN``).
    """
    return answer(messages, eager=True)


# --------------------------------------------------------------------------- replay

REPLAY_KEY_COLUMNS = ("qid", "strategy", "setting")


def messages_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of the messages' canonical JSON (role and content only).

    Args:
        messages: chat messages.

    Returns:
        64 hex characters (store it as ``messages_hash`` next to a prediction to replay it).
    """
    canon = [
        {"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in messages
    ]
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def replay_policy_from(predictions: pd.DataFrame):
    """A policy that answers from recorded predictions.

    Lookup order: (1) ``params.extra["replay_key"]`` = {"qid", "strategy", "setting"} (or
    those keys directly in ``params.extra``) matched against the table's ``qid``,
    ``strategy``, ``setting`` columns; (2) the request's :func:`messages_hash` matched against
    a ``messages_hash`` column. The exact request hash is the robust key (it changes whenever
    the context or question text does); the (qid, strategy, setting) key replays a published
    run whose prompts are not stored. An unknown request gets an empty completion whose
    ``finish_reason`` is ``"error: <note>"``.

    Args:
        predictions: a predictions table with ``response`` and either ``messages_hash`` or
            ``qid``/``strategy``/``setting``.

    Returns:
        ``policy(messages, params) -> OfflineReply``.
    """
    if not isinstance(predictions, pd.DataFrame):
        raise ReaderError(f"replay needs a DataFrame, got {type(predictions).__name__}")
    if "response" not in predictions.columns:
        raise ReaderError("replay predictions table has no 'response' column")
    has_hash = "messages_hash" in predictions.columns
    has_keys = all(c in predictions.columns for c in REPLAY_KEY_COLUMNS)
    if not (has_hash or has_keys):
        raise ReaderError(
            "replay predictions table needs a 'messages_hash' column or the columns "
            f"{', '.join(REPLAY_KEY_COLUMNS)}; it has {', '.join(map(str, predictions.columns))}"
        )
    by_hash: dict[str, Any] = {}
    by_key: dict[tuple[str, str, str], Any] = {}
    for row in predictions.to_dict("records"):
        resp = row["response"]
        resp = None if resp is None or (isinstance(resp, float) and pd.isna(resp)) else str(resp)
        if has_hash and isinstance(row["messages_hash"], str):
            by_hash.setdefault(row["messages_hash"], resp)
        if has_keys:
            key = tuple(str(row[c]) for c in REPLAY_KEY_COLUMNS)
            by_key.setdefault(key, resp)

    def policy(messages: Sequence[Mapping[str, Any]], params: Any = None) -> OfflineReply:
        extra = dict(getattr(params, "extra", None) or {})
        spec = extra.get("replay_key", extra)
        if has_keys and isinstance(spec, Mapping) and all(c in spec for c in REPLAY_KEY_COLUMNS):
            key = tuple(str(spec[c]) for c in REPLAY_KEY_COLUMNS)
            if key in by_key:
                return OfflineReply(by_key[key])
        h = messages_hash(messages)
        if h in by_hash:
            return OfflineReply(by_hash[h])
        return OfflineReply("", finish_reason=f"error: {REPLAY_MISSING_NOTE}")

    return policy


# --------------------------------------------------------------------------- registry


def _offline(name: str, label: str, policy: Any) -> Backbone:
    return Backbone(
        name=name,
        model=f"{OFFLINE_READER_MODEL_PREFIX}{name}",
        kind="offline",
        label=label,
        policy=policy,
    )


def register_offline_backbones() -> list[Backbone]:
    """Register ``reference`` and ``eager`` (kind="offline", price 0); idempotent.

    Returns:
        The two backbones.
    """
    return [
        register_policy_backbone(
            name, policy, model=f"{OFFLINE_READER_MODEL_PREFIX}{name}", label=label
        )
        for name, label, policy in (
            ("reference", REFERENCE_LABEL, reference_policy),
            ("eager", EAGER_LABEL, eager_policy),
        )
    ]


def register_replay(name: str, predictions: pd.DataFrame) -> Backbone:
    """Register a replay backbone answering from ``predictions`` (see replay_policy_from).

    Args:
        name: registry name (replaces an earlier replay of that name).
        predictions: the recorded predictions.

    Returns:
        The backbone.
    """
    policy = replay_policy_from(predictions)
    label = REPLAY_LABEL.format(name=name)
    return register_backbone(_offline(name, label, policy), replace_existing=True)
