"""Dialogue verifier: the source-verifiability contract of every synthesised dialogue
(paper §3 "Cohort" — "15 patients fail dialogue invariants during synthesis and are dropped").

It runs the checks of :mod:`clinlib.dialogue.checks` (:data:`~clinlib.dialogue.checks.CHECK_ORDER`:
HARD checks drop a patient, SOFT ones warn) on each patient's records, on a noisy dialogue's
real turns plus the noise check, and turns their rows into keep/drop decisions and reports.
Any digit in a turn must come from the events the turn cites: there is no number whitelist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.dialogue.binding import check_binding, patient_number_problems
from clinlib.dialogue.checks import (
    BINDING_CHECKS,
    DEFAULT_CHARS_PER_VISIT,
    HARD_CHECKS,
    MIN_COVERAGE,  # noqa: F401  (re-exported: notebook 02 renders the threshold)
    NOISE_CHECKS,
    REWRITE_CHECK,
    SOFT_CHECKS,
    chars_per_visit,
    check_coverage,
    check_covered,
    check_ids_exist,
    check_missed,
    check_noise_facts,
    check_row,
    check_time_order,
    check_turns,
    detail_of,
    length_bounds_from,
    length_row,
    soft_checks,
)
from clinlib.dialogue.conditions import invented_condition_problems
from clinlib.dialogue.fields import (
    EventIndex,
    group_records,
    is_noise_turn,
    present,
    real_turns,
    records,
)
from clinlib.dialogue.lexicon import invented_entity_problems, record_text
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher

CHECK_COLUMNS = ARTIFACTS["dialogue_checks"]


def verify_records(
    subject_id: int,
    turns: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    coverage: Sequence[Mapping[str, Any]],
    *,
    drugs: DrugMatcher | None = None,
    length_bounds: tuple[float, float] | None = None,
    rewrites: Sequence[Mapping[str, Any]] | None = None,
    include_length: bool = True,
) -> list[dict[str, Any]]:
    """Run every check on one patient's records (the fast path :func:`verify_corpus` uses).

    Args:
        subject_id: the patient.
        turns: turn records (turn_idx, visit_idx, speaker, text, text_tagged, event_ids and,
            optionally, visit_date).
        events: the patient's source events (events-table rows).
        coverage: coverage records (event_id, status, turn_idx).
        drugs: known drug names (default: :data:`DRUG_LEXICON` + the patient's drugs).
        length_bounds: accepted characters per visit (default :data:`DEFAULT_CHARS_PER_VISIT`).
        rewrites: rewriter log records (visit_idx, accepted, reason); adds ``rewrite_preserved``.
        include_length: add the ``length_outlier`` row (off when the corpus fences are not
            known yet; :func:`length_row` adds it later).

    Returns:
        Check rows (subject_id, check, severity, passed, detail), HARD checks first.
    """
    sid = int(subject_id)
    noise = [t for t in turns if is_noise_turn(t)]
    # A noisy dialogue: the stored-dialogue checks see its real turns, numbered as stored.
    turns = real_turns(turns) if noise else sorted(turns, key=lambda r: int(r["turn_idx"]))
    events = list(events)
    index = EventIndex(events)
    events_by_id = index.by_id
    if drugs is None:
        meds = [e.get("label") for e in events if e.get("kind") == "medication"]
        drugs = DrugMatcher([*DRUG_LEXICON, *(m for m in meds if present(m))])
    status = {str(c["event_id"]): c for c in coverage}
    covered = {eid: c.get("turn_idx") for eid, c in status.items() if c["status"] == "covered"}
    missed = [eid for eid, c in status.items() if c["status"] == "missed"]
    bad = check_ids_exist(turns, events_by_id, status)
    rows = [check_row(sid, "event_ids_exist", *_passed(bad))]
    per_turn = check_turns(turns, index, drugs)
    rows.append(check_row(sid, "tags_consistent", *_passed(per_turn["tags_consistent"])))
    bad = check_covered(turns, index, covered)
    rows.append(
        check_row(
            sid, "covered_fields_verbatim", *_passed(bad, f"{len(covered)} covered events verified")
        )
    )
    for check in (
        "no_untraced_numbers",
        "no_untraced_dates",
        "no_untraced_codes",
        "no_untraced_drugs",
    ):
        rows.append(check_row(sid, check, *_passed(per_turn[check])))
    bad = check_time_order(turns, events, events_by_id, covered)
    rows.append(check_row(sid, "visits_in_time_order", *_passed(bad)))
    bad, ok = check_coverage(events_by_id, status, missed)
    rows.append(check_row(sid, "must_cover_coverage", *_passed(bad, ok)))
    bad = check_missed(turns, index, missed)
    rows.append(
        check_row(
            sid, "missed_events_unstated", *_passed(bad, f"{len(missed)} missed events unstated")
        )
    )
    rows += _binding_rows(sid, turns, events, index)
    if noise:
        rows.append(_noise_row(sid, noise, events))
    if include_length:
        rows.append(length_row(sid, turns, length_bounds or DEFAULT_CHARS_PER_VISIT))
    rows += soft_checks(sid, turns)
    if rewrites:
        rows.append(_rewrite_row(sid, rewrites))
    return rows


def _binding_rows(sid: int, turns: list, events: list, index: EventIndex) -> list[dict[str, Any]]:
    """The :data:`BINDING_CHECKS` rows: facts bound per clause, prompt rule, no invention."""
    found = check_binding(turns, index)
    found["patient_lines_no_numbers"] = patient_number_problems(turns, index.by_id)
    record = record_text(events)
    found["no_invented_entities"] = invented_entity_problems(turns, events, index.by_id, record)
    found["no_invented_conditions"] = invented_condition_problems(turns, record, index.by_id)
    return [check_row(sid, c, *_passed(found[c])) for c in BINDING_CHECKS]


def _noise_row(sid: int, noise: list, events: list) -> dict[str, Any]:
    """The noise check of a noisy dialogue: no noise turn states a patient's own fact."""
    n_sessions = len({int(t["visit_idx"]) for t in noise})
    bad = check_noise_facts(noise, events)
    return check_row(sid, *NOISE_CHECKS, *_passed(bad, f"{n_sessions} noise sessions checked"))


def _rewrite_row(sid: int, rewrites: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The rewriter's check: every rewritten visit was accepted."""
    fell = [f"visit {r['visit_idx']}: {r['reason']}" for r in rewrites if not r["accepted"]]
    outcomes = [str(r.get("outcome") or "") for r in rewrites]
    ok = (
        f"{len(rewrites)} visits rewritten: {outcomes.count('accepted')} by the backbone, "
        f"{outcomes.count('rescued')} by a rescue backbone"
    )
    bad = [f"{len(fell)} of {len(rewrites)} visits kept template text", *fell] if fell else []
    return check_row(sid, REWRITE_CHECK, *_passed(bad, ok))


def _passed(problems: list[str], ok: str = "") -> tuple[bool, str]:
    """(passed, detail) of a check from its problems."""
    return not problems, detail_of(problems, ok)


def checks_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Check rows as a ``dialogue_checks`` frame with the artifact dtypes."""
    df = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    return df.astype(CHECK_COLUMNS)


def verify_dialogue(
    turns: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    *,
    rewrites: pd.DataFrame | None = None,
    known_drugs: Iterable[str] | None = None,
    length_bounds: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Verify one patient's dialogue against its source events.

    Args:
        turns: the patient's turns (dialogues.parquet columns).
        events: the patient's events (events.parquet columns).
        coverage: the patient's event coverage (event_id, status, reason, turn_idx).
        rewrites: optional rewriter log (visit_idx, accepted, reason).
        known_drugs: drug names for the hallucination check (default: lexicon + own drugs).
        length_bounds: accepted characters per visit.

    Returns:
        dialogue_checks rows for the patient (the paper's 10 HARD, the 4 binding HARD
        checks, 3 SOFT, + rewrite_preserved).
    """
    sids = set(events["subject_id"].astype("int64")) | set(turns["subject_id"].astype("int64"))
    if len(sids) != 1:
        raise ValueError(f"verify_dialogue expects one patient, got subject_ids {sorted(sids)}")
    drugs = DrugMatcher(known_drugs) if known_drugs is not None else None
    rows = verify_records(
        sids.pop(),
        records(turns),
        records(events),
        records(coverage),
        drugs=drugs,
        length_bounds=length_bounds,
        rewrites=records(rewrites) if rewrites is not None else None,
    )
    return checks_frame(rows)


def verify_groups(
    turns: Mapping[int, list[dict[str, Any]]],
    events: Mapping[int, list[dict[str, Any]]],
    coverage: Mapping[int, list[dict[str, Any]]],
    rewrites: Mapping[int, list[dict[str, Any]]] | None = None,
    drugs: DrugMatcher | None = None,
) -> list[dict[str, Any]]:
    """Verify every patient of ``coverage`` from per-patient record lists (the fast path).

    Args:
        turns / events / coverage / rewrites: ``{subject_id: [record, ...]}``.
        drugs: known drug names (default: :data:`DRUG_LEXICON` + every medication label).

    Returns:
        Check rows for all patients; the length fences come from the whole corpus.
    """
    if drugs is None:
        meds = {
            e.get("label")
            for evs in events.values()
            for e in evs
            if e.get("kind") == "medication" and present(e.get("label"))
        }
        drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    # Fences over the real visits: noise sessions (clinlib.dialogue.noise) are not stored text.
    bounds = length_bounds_from(chars_per_visit(real_turns(tr)) for tr in turns.values() if tr)
    rows: list[dict[str, Any]] = []
    for sid in sorted(coverage):
        rows += verify_records(
            sid,
            turns.get(sid, []),
            events.get(sid, []),
            coverage[sid],
            drugs=drugs,
            length_bounds=bounds,
            rewrites=(rewrites or {}).get(sid),
        )
    return rows


def verify_corpus(
    turns: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    *,
    rewrites: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Verify every patient's dialogue; length fences come from the whole corpus.

    Args:
        turns: all turns (kept and not yet decided), dialogues.parquet columns.
        events: the events of every patient in ``coverage``.
        coverage: event_coverage rows of every patient.
        rewrites: optional rewriter log with subject_id.

    Returns:
        dialogue_checks rows, one per (patient, check).
    """
    rw = group_records(rewrites) if rewrites is not None and len(rewrites) else None
    rows = verify_groups(group_records(turns), group_records(events), group_records(coverage), rw)
    return checks_frame(rows)


def decide(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Keep/drop per patient from check rows: dropped iff any HARD check failed.

    Returns:
        ``{subject_id: {"kept", "drop_reason", "n_soft_warnings"}}``; the reason lists the
        failed HARD checks with their details ("" when kept).
    """
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        d = out.setdefault(int(r["subject_id"]), {"hard": [], "n_soft_warnings": 0})
        if not r["passed"]:
            if r["severity"] == "hard":
                d["hard"].append(f"{r['check']}: {r['detail']}")
            else:
                d["n_soft_warnings"] += 1
    return {
        sid: {
            "kept": not d["hard"],
            "drop_reason": " | ".join(d["hard"]),
            "n_soft_warnings": d["n_soft_warnings"],
        }
        for sid, d in out.items()
    }


def drop_decisions(checks: pd.DataFrame) -> pd.DataFrame:
    """Which patients are kept: a patient is dropped iff any HARD check failed.

    Returns:
        One row per patient: subject_id, kept, drop_reason (failed HARD checks with their
        details, "" when kept), n_soft_warnings.
    """
    dec = decide(records(checks))
    rows = [{"subject_id": sid, **d} for sid, d in sorted(dec.items())]
    df = pd.DataFrame(rows, columns=["subject_id", "kept", "drop_reason", "n_soft_warnings"])
    return df.astype(
        {"subject_id": "int64", "kept": "bool", "drop_reason": "string", "n_soft_warnings": "int64"}
    )


def drop_report(checks: pd.DataFrame) -> pd.DataFrame:
    """Failures per check: check, severity, n_patients, n_failed, description."""
    desc = (
        HARD_CHECKS
        | BINDING_CHECKS
        | NOISE_CHECKS
        | SOFT_CHECKS
        | {REWRITE_CHECK: "LLM rewrite kept every required field"}
    )
    g = checks.groupby(["severity", "check"], sort=False)["passed"]
    out = g.agg(n_patients="size", n_failed=lambda s: int((~s).sum())).reset_index()
    out["description"] = out["check"].map(desc)
    order = {c: i for i, c in enumerate(desc)}
    out["_o"] = out["check"].map(order)
    out = out.sort_values(["_o"]).drop(columns="_o").reset_index(drop=True)
    return out[["check", "severity", "n_patients", "n_failed", "description"]]
