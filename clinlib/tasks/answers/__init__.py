"""Answer formats, strict and lenient parsers and correctness rules for T1–T9 (paper §3 "Task
suite", §5.4 (T9 abstention parser), Appendix E.2 (D2 parse failures), Appendix G.3 (strict vs
lenient parser, Tables 8–9)).

Every question states its task's ``answer_format`` (clinlib.tasks.spec.TaskSpec) verbatim. All formats end with the same
abstention clause, so that T9 questions (asked exactly like T1) do not reveal that the fact is
absent; an explicit abstention is therefore a *parsed* answer (``ABSTAIN``) in every task —
wrong everywhere except T9 — never a parse failure.

Parsers return the canonical answer or ``None``. ``None`` is a parse failure (the paper's D2)
and scores as wrong (:func:`clinlib.tasks.base.score`); an empty response (D1) is one too.
The lenient parser first tries the strict one, so it accepts everything strict accepts.

Shared normalisation (both modes): surrounding whitespace, quotes, backticks and markdown
emphasis are dropped, as is a leading ``Answer:`` / ``Final answer:`` label and a trailing
full stop.

Abstention.
    strict: the response is ``insufficient information``, alone or followed by punctuation
    ("Insufficient information. The dialogue does not ..."), as for every strict format.
    lenient: additionally any verbose abstention cue ("no sodium value was reported on that
    date", "not measured", "the record does not mention", "cannot be determined", "unknown",
    "no record of" ...). A cue followed by a hedged guess ("not documented, but probably 140",
    "cannot be determined; it likely increased") is NOT an abstention: the guess after the
    hedge word (probably, likely, possibly, approximately, roughly, maybe, perhaps,
    estimated, might/may/could be; "about" / "around" only right before a number) is parsed as
    the answer — the model committed to something it says is unsupported, which T9 counts as
    an over-answer. A hedge that guesses nothing parseable ("unknown, probably never
    measured") leaves the abstention, as does context without a hedge ("no value on that
    date; the previous one was 138"). For T3/T5 the task's
    own reading runs before the abstention cues, because "the record does not mention an
    attribution" *is* the answer "no" there.

T1 (lab value; gold ``"<value_text> <unit>"``, e.g. ``"1.3 mg/dL"``).
    strict: the whole response is ``<number>`` or ``<number> <unit>`` (an optional ``<`` /
    ``>`` comparator, a known unit spelling). Parsed form ``"<number> <canonical unit>"``.
    lenient: dates, times, visit ordinals ("visit 2") and reference ranges are removed; the
    numbers left are read. A value after an ``answer is`` / ``value:`` label wins; otherwise
    there must be exactly one distinct number (repeats allowed, its unit-bearing mention is
    kept): "rose from 1.1 to 1.3 mg/dL" or "1.1-1.3" is ambiguous -> ``None``.
    correct: the parsed number equals the gold number within half a unit of the gold's last
    reported decimal place, exclusive (gold "1.3" accepts 1.25 < x < 1.35; gold "140" accepts
    139.5 < x < 140.5) — the parsed value rounds to the gold at the gold's precision. Units
    are not required; an explicit unit must be the gold's unit up to spelling (mg/dl, MG/DL;
    K/uL, x10^3/uL, 10^3/µL, thou/uL) — a different unit is wrong (the number would mean
    something else), except mmol/L for a mEq/L gold: every mEq/L lab of the panel is a
    monovalent ion (or the anion gap), where the two units are numerically identical. A gold
    comparator ("<0.01") must be matched; a comparator the gold lacks is wrong.

T2 (trend; gold ``"<increased|decreased|stable>;<none|weak|moderate|strong>"``).
    strict: ``direction;magnitude`` from those vocabularies (``;`` or ``,`` between).
    lenient: direction words / phrases (rose, went up, fell, dropped, unchanged, "no
    significant change" ...) and magnitude words (slightly/mild -> weak, moderately ->
    moderate, markedly/substantially/sharply/significantly -> strong). A direction word in a
    negated clause ("did not increase") is discarded. Stable implies ``none``. Two
    directions, two magnitudes, or a direction without a magnitude -> ``None`` (the gold
    needs both and the reader cannot supply the missing half).
    correct: exact match.

T3, T5 (gold ``"yes"`` / ``"no"``).
    strict: the response is ``yes`` / ``no`` alone or followed by punctuation ("Yes." /
    "No, the clinician did not"); "No contradiction ..." is prose, not the format.
    lenient: an answer-position yes/no ("the answer is no", "no." ...) anywhere; a ``yes`` in
    a negated clause ("I would not say yes") is discarded, never flipped to ``no``; then the
    task's polarity phrases (T3: attributed / consistent with / due to / secondary to; T5:
    contradict / conflict / inconsistent / discrepancy, "consistent" meaning no
    contradiction), negated -> the opposite answer. Both answers found -> ``None``.

T4 (evidence event ids; gold the ids sorted and joined by ``;``).
    strict: the response is only ids (LAB-123, DX-20000001-3, ...) separated by ``;``.
    lenient: every id anywhere (in brackets, comma lists, prose), excluding ids in a negated
    clause ("not LAB-5"). Parsed form: unique upper-case ids, sorted, joined by ``;``.
    correct: exact set equality (the paper's binarised set-F1).

T6 (gold ``"A"`` / ``"B"`` / ``"similar"``).
    strict: ``A`` / ``B`` / ``Patient A`` / ``(B)`` alone or followed by punctuation, or a
    response starting with ``similar``.
    lenient: "the answer is B", comparatives ("Patient A has more diagnoses than patient B"
    -> A; "... fewer ... than" -> the other), a single patient named, or a similarity phrase
    (similar, the same, equal, comparable, no difference) when no single patient is named.

T7 (gold the option letter; ``options`` = the four option texts in letter order).
    strict: the response starts with a letter A–D ("B", "(B)", "B.", "Option B", "B. Lisinopril";
    "C Atorvastatin" only when an option's text follows — "A patient ..." is prose).
    lenient: also "the answer is C", the option text alone ("Atorvastatin"), a unique option
    whose text (or head word) is mentioned. A letter together with a different option's text
    ("B. Metformin" when B is Lisinopril) is contradictory: both modes return ``None`` (a
    reader cannot tell which the model meant, so it is a parse failure, scored wrong).

T8 (gold ``"increased"`` / ``"decreased"`` / ``"similar"``).
    strict: the response starts with one of the three words.
    lenient: the T2 direction reading without magnitude ("it went up slightly" ->
    increased; "no real change" -> similar).

T9 (gold ``"insufficient information"``; correct only for an abstention).
    strict: the requested abstention -> ``ABSTAIN``; otherwise a concrete answer in the requested
    format (a T1-style value, a YYYY-MM-DD date, a bare yes/no) is returned as the
    over-answer's parsed form; anything else (prose, including verbose abstentions) ->
    ``None``: the strict parser cannot tell them apart (the paper's "parser-missed" bucket).
    lenient: verbose abstentions -> ``ABSTAIN`` (hedged guesses excepted, see above); a
    concrete value / date / yes-no is the over-answer; any other non-empty prose is an
    over-answer too, recorded as its first 80 normalised characters.

T10 (extended set, LongMedBench temporal reasoning; gold the item letters in time order,
    ``"C,A,B"``): rules in :mod:`clinlib.tasks.answers.order`. A response that is not a
    permutation of the question's letters is a parse failure with a diagnostic
    (its spec's ``diagnose``); the graded score is Kendall's tau (``grade``), ``correct`` the
    exact order.

T11 (extended set, LongMedBench "Task 3" decisions; gold the ground-truth option letter with
    the other options' time-decay credits, ``"B|A=0.8750"``): rules in
    :mod:`clinlib.tasks.answers.decision`; the graded score is the answered option's credit.
"""

from __future__ import annotations

from clinlib.tasks.answers.correct import gold_problem, is_correct
from clinlib.tasks.answers.decision import decay, decision_gold, decision_score, split_gold
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE, VALUE_FORMAT, AnswerError
from clinlib.tasks.answers.order import kendall_tau, order_problem, order_score
from clinlib.tasks.answers.parse import parse_lenient, parse_strict
from clinlib.tasks.answers.values import UNIT_ALIASES, canonical_unit
from clinlib.tasks.registry import derived

# Views derived from the task specs on access (clinlib.tasks.registry.derived): the task
# names, formats and token caps, and GRADERS / DIAGNOSERS (tasks with a graded score other
# than 1/0, and tasks whose parse failures carry a diagnostic; clinlib.tasks.base.score).
_VIEWS = frozenset(
    (
        "ALL_TASK_NAMES",
        "ANSWER_FORMATS",
        "CUT_TASKS",
        "DIAGNOSERS",
        "EXTENDED_TASK_NAMES",
        "GRADERS",
        "MAX_TOKENS",
        "TASK_NAMES",
    )
)


def __getattr__(name: str):
    if name in _VIEWS:
        return derived(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ABSTAIN_CLAUSE",
    "ALL_TASK_NAMES",
    "ANSWER_FORMATS",
    "CUT_TASKS",
    "DIAGNOSERS",
    "EXTENDED_TASK_NAMES",
    "GRADERS",
    "MAX_TOKENS",
    "TASK_NAMES",
    "UNIT_ALIASES",
    "VALUE_FORMAT",
    "AnswerError",
    "canonical_unit",
    "decay",
    "decision_gold",
    "decision_score",
    "gold_problem",
    "is_correct",
    "kendall_tau",
    "order_problem",
    "order_score",
    "parse_lenient",
    "parse_strict",
    "split_gold",
]
