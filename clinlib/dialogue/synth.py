"""Source-verifiable dialogue synthesis: the stage driver (paper §3 "Cohort": "Each record is
transformed into a multi-visit patient–clinician dialogue, preserving structured fields (dates,
lab values, ICD / procedure codes, medications) inside narrative turns"; Fig. 2 stage 3).

Each cohort patient's events become one dialogue; each event is ``covered`` (stated, with its
ids tagged), ``missed`` (left unstated on purpose: T9's anchors, or the length budget) or
``unusable``. The parts live in :mod:`~clinlib.dialogue.templates`, :mod:`~clinlib.dialogue.selection`,
:mod:`~clinlib.dialogue.turns`, :mod:`~clinlib.dialogue.fitting`, :mod:`~clinlib.dialogue.rewrite`
and :mod:`~clinlib.dialogue.render`; this module drives them, verifies every dialogue
(:mod:`clinlib.dialogue.verify`) and writes the artifacts.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from clinlib.core.config import PROFILES, artifact_path, base_profile, resolve_profile
from clinlib.core.guards import check_artifact, check_kept, group_reasons, stage_run
from clinlib.core.io import read_artifact
from clinlib.core.progress import progress
from clinlib.data.contraindications import conflict_event_ids
from clinlib.dialogue.checks import CHECK_ORDER, chars_per_visit, length_bounds_from, length_row
from clinlib.dialogue.fields import (
    DIALOGUE_COLUMNS,
    WRITER_ROLES,
    fmt_date,
    group_records,
    present,
    records,
    visit_starts,
)
from clinlib.dialogue.fitting import fit_budget
from clinlib.dialogue.matching import DRUG_LEXICON, DrugMatcher
from clinlib.dialogue.render import render_dialogue
from clinlib.dialogue.rewrite import REWRITE_COLUMNS, Rewriter, as_chain, try_rewrites
from clinlib.dialogue.selection import (
    DialogueInputError,
    event_problem,
    missed_events,
    validate_events,
)
from clinlib.dialogue.verify import checks_frame, decide, verify_records

log = logging.getLogger(__name__)

# Below this many events one process is faster than starting workers.
PARALLEL_MIN_EVENTS = 60_000

COVERAGE_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "event_id": "string",
    "kind": "string",
    "visit_idx": "Int64",
    "status": "string",
    "reason": "string",
    "turn_idx": "Int64",
    "kept": "bool",
}
SUMMARY_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "kept": "bool",
    "n_visits": "int64",
    "n_turns": "int64",
    "n_chars": "int64",
    "n_events": "int64",
    "n_covered": "int64",
    "n_missed": "int64",
    "n_unusable": "int64",
    "n_soft_warnings": "int64",
    "drop_reason": "string",
    # visits by who wrote their final text (clinlib.dialogue.fields.WRITER_ROLES)
    **{f"n_visits_{role}": "int64" for role in WRITER_ROLES},
}
_COVERAGE_BASE = {k: t for k, t in COVERAGE_COLUMNS.items() if k != "kept"}
# A rewriter, or a chain of (backbone name, rewriter): the primary, then rescues in order.
RewriterArg = Rewriter | Sequence[tuple[str, Rewriter]] | None


@dataclass(frozen=True)
class DialogueResult:
    """One patient's synthesised dialogue.

    Attributes:
        subject_id: the patient.
        turns: one row per turn (:data:`TURN_COLUMNS`).
        coverage: one row per source event: status covered|missed|unusable, reason, turn_idx.
        rewrites: one row per visit handed to a rewriter (empty without a rewriter).
    """

    subject_id: int
    turns: pd.DataFrame
    coverage: pd.DataFrame
    rewrites: pd.DataFrame = field(default_factory=lambda: _frame([], REWRITE_COLUMNS))


def _frame(rows: list[dict[str, Any]], columns: Mapping[str, str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(columns))
    casts = {c: t for c, t in columns.items() if t != "list"}
    return df.astype(casts)


def _synthesize_records(
    sid: int,
    events: list[dict[str, Any]],
    seed: int,
    rewriter: RewriterArg,
    drugs: DrugMatcher | None = None,
    keep: frozenset[str] = frozenset(),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One patient's (turn records, coverage records, rewrite records); events of a kind in
    ``keep`` are never left out for the length budget."""
    counts: dict[str, int] = {}
    for e in events:
        counts[str(e["event_id"])] = counts.get(str(e["event_id"]), 0) + 1
    status: dict[str, dict[str, Any]] = {}
    usable: list[dict[str, Any]] = []
    for e in events:
        eid = str(e["event_id"])
        if eid in status:
            continue
        reason = f"duplicate event_id ({counts[eid]} rows)" if counts[eid] > 1 else None
        reason = reason or event_problem(e)
        status[eid] = dict(
            subject_id=sid,
            event_id=eid,
            kind=e.get("kind") if present(e.get("kind")) else None,
            visit_idx=int(e["visit_idx"]) if present(e.get("visit_idx")) else None,
            status="unusable" if reason else "covered",
            reason=reason,
            turn_idx=None,
        )
        if not reason:
            usable.append(e)
    starts = visit_starts(events)
    protect = conflict_event_ids(usable)  # a contraindication conflict is always told
    for eid, why in missed_events(usable, seed, starts, protect).items():
        status[eid] |= dict(status="missed", reason=why)

    visits = sorted({int(e["visit_idx"]) for e in events if present(e.get("visit_idx"))})
    events_by_id = {str(e["event_id"]): e for e in usable}
    if rewriter is not None and drugs is None:
        meds = [e["label"] for e in usable if e["kind"] == "medication"]
        drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    turns: list[dict[str, Any]] = []
    rewrites: list[dict[str, Any]] = []
    usable_by_visit: dict[int, list[dict[str, Any]]] = {}
    for e in usable:
        usable_by_visit.setdefault(int(e["visit_idx"]), []).append(e)
    fitted = fit_budget(sid, visits, usable_by_visit, status, starts, seed, keep, protect)
    for v in visits:
        in_visit = usable_by_visit.get(v, [])
        recs = fitted[v]
        if rewriter is not None:
            missed_v = [
                str(e["event_id"])
                for e in in_visit
                if status[str(e["event_id"])]["status"] == "missed"
            ]
            new, log_row = try_rewrites(as_chain(rewriter), recs, v, events_by_id, missed_v, drugs)
            rewrites.append({"subject_id": sid, **log_row})
            recs = new or recs
            role = {"accepted": "backbone", "rescued": "rescue"}.get(log_row["outcome"], "fallback")
            who = dict(writer=str(log_row["backbone"]), writer_role=role)
        else:
            who = dict(writer="template", writer_role="template")
        vdate = fmt_date(starts[v]) if v in starts else None
        for r in recs:
            r |= dict(subject_id=sid, turn_idx=len(turns), visit_date=vdate, **who)
            turns.append(r)
    for t in turns:
        for eid in t["event_ids"]:
            row = status.get(eid)
            if row is not None and row["status"] == "covered" and row["turn_idx"] is None:
                row["turn_idx"] = t["turn_idx"]
    return turns, list(status.values()), rewrites


def synthesize_dialogue(
    events: pd.DataFrame, seed: int = 0, rewriter: RewriterArg = None
) -> DialogueResult:
    """Turn one patient's events into a dialogue.

    Args:
        events: the patient's rows of the events table.
        seed: template and missed-event seed.
        rewriter: optional :class:`Rewriter`, or a chain of (name, rewriter) tried in order,
            applied visit by visit (template text is kept for a visit whose every rewrite
            fails a check).

    Returns:
        :class:`DialogueResult` with turns, coverage and the rewrite log.

    Raises:
        DialogueInputError: malformed table, or rows of more than one patient.
    """
    df = validate_events(events)
    sids = df["subject_id"].unique()
    if len(sids) != 1:
        raise DialogueInputError(
            f"synthesize_dialogue expects one patient's events, got subject_ids {sorted(sids)}"
        )
    sid = int(sids[0])
    turns, coverage, rewrites = _synthesize_records(sid, records(df), seed, rewriter)
    return DialogueResult(
        subject_id=sid,
        turns=_frame(turns, DIALOGUE_COLUMNS),
        coverage=_frame(coverage, _COVERAGE_BASE),
        rewrites=_frame(rewrites, REWRITE_COLUMNS),
    )


def synthesize_corpus(
    events: pd.DataFrame,
    cohort: pd.DataFrame | None = None,
    seed: int = 0,
    rewriter: RewriterArg = None,
    source: str = "events",
    workers: int | None = None,
    keep_kinds: Sequence[str] = (),
) -> dict[str, pd.DataFrame]:
    """Synthesise and verify every patient's dialogue (no file IO).

    Args:
        events: the events table.
        cohort: optional cohort table; restricts patients to it and reports cohort patients
            without events as dropped.
        seed: template and missed-event seed.
        rewriter: optional rewriter or (name, rewriter) chain (:mod:`clinlib.dialogue.rewrite`).
        source: name of the events table for error messages.
        workers: processes (default: 2 for tables of at least :data:`PARALLEL_MIN_EVENTS`
            events, else 1; always 1 with a rewriter). Results do not depend on it.

    Returns:
        ``{"dialogues", "event_coverage", "dialogue_checks", "dialogue_summary",
        "dialogue_rewrites"}``; dialogues holds kept patients only.
    """
    df = validate_events(events, source)
    if cohort is not None:
        if "subject_id" not in cohort.columns:
            raise DialogueInputError("cohort: missing column 'subject_id'")
        wanted = set(cohort["subject_id"].astype("int64"))
        df = df[df["subject_id"].isin(wanted)]
    else:
        wanted = set(df["subject_id"])
    meds = sorted(set(df.loc[df["kind"] == "medication", "label"].dropna()))
    drug_names = [*DRUG_LEXICON, *meds]
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(df) >= PARALLEL_MIN_EVENTS else 1
    parts = None
    if rewriter is None and workers > 1:
        try:
            parts = _parallel(df, seed, drug_names, workers, frozenset(keep_kinds))
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            # e.g. code run from stdin, whose __main__ the worker cannot re-import
            log.warning("parallel synthesis failed (%s); running in one process", exc)
    if parts is None:
        parts = [_synthesize_verify(df, seed, drug_names, rewriter, keep=frozenset(keep_kinds))]
    turns_by: dict[int, list[dict[str, Any]]] = {}
    cov_by: dict[int, list[dict[str, Any]]] = {}
    rw_by: dict[int, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    for part in parts:
        for sid, t, c, r, checks in part:
            turns_by[sid], cov_by[sid], rw_by[sid] = t, c, r
            rows += checks
    # The length fences need the whole corpus, so that row is added once all are synthesised.
    bounds = length_bounds_from(chars_per_visit(t) for t in turns_by.values() if t)
    rows += [length_row(sid, turns_by[sid], bounds) for sid in cov_by]
    rows.sort(key=lambda r: (r["subject_id"], CHECK_ORDER[r["check"]]))
    decisions = decide(rows)
    kept_ids = {sid for sid, d in decisions.items() if d["kept"]}
    kept_turns = [t for sid in sorted(kept_ids) for t in turns_by[sid]]
    coverage = [c | {"kept": sid in kept_ids} for sid in sorted(cov_by) for c in cov_by[sid]]
    return {
        "dialogues": _frame(kept_turns, DIALOGUE_COLUMNS),
        "event_coverage": _frame(coverage, COVERAGE_COLUMNS),
        "dialogue_checks": checks_frame(rows),
        "dialogue_summary": _summary(turns_by, cov_by, decisions, wanted),
        "dialogue_rewrites": _frame(
            [r for sid in sorted(rw_by) for r in rw_by[sid]], REWRITE_COLUMNS
        ),
    }


def rewrite_log(
    events: pd.DataFrame,
    cohort: pd.DataFrame | None = None,
    seed: int = 0,
    rewriter: RewriterArg = None,
) -> pd.DataFrame:
    """Synthesise every patient's dialogue with ``rewriter`` and return only the rewrite log
    (:data:`REWRITE_COLUMNS`, one row per visit), without verifying the dialogues: the
    rounds of :mod:`clinlib.eval.synthesis.rewrite` need only which visits each backbone kept.
    """
    df = validate_events(events)
    if cohort is not None:
        df = df[df["subject_id"].isin(set(cohort["subject_id"].astype("int64")))]
    meds = sorted(set(df.loc[df["kind"] == "medication", "label"].dropna()))
    drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    rows: list[dict[str, Any]] = []
    for sid, recs in sorted(group_records(df).items()):
        rows += _synthesize_records(sid, recs, seed, rewriter, drugs)[2]
    return _frame(rows, REWRITE_COLUMNS)


_Part = list[
    tuple[
        int, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]
    ]
]


def _synthesize_verify(
    df: pd.DataFrame,
    seed: int,
    drug_names: list[str],
    rewriter: RewriterArg = None,
    label: str = "dialogues",
    keep: frozenset[str] = frozenset(),
) -> _Part:
    """Synthesise and verify (all checks but length_outlier) every patient of ``df``,
    showing progress per patient (a bar on a terminal, periodic lines in a log)."""
    drugs = DrugMatcher(drug_names)
    groups = group_records(df)
    out = []
    with progress(len(groups), label, "patient") as bar:
        for sid in sorted(groups):
            turns, cov, rw = _synthesize_records(sid, groups[sid], seed, rewriter, drugs, keep)
            checks = verify_records(
                sid, turns, groups[sid], cov, drugs=drugs, rewrites=rw, include_length=False
            )
            out.append((sid, turns, cov, rw, checks))
            bar.update(1)
    return out


def _parallel(
    df: pd.DataFrame,
    seed: int,
    drug_names: list[str],
    workers: int,
    keep: frozenset[str] = frozenset(),
) -> list[_Part]:
    """Split patients into ``workers`` bins of similar event counts and run them in
    separate processes (forkserver: no state inherited from a busy parent)."""
    sizes = df.groupby("subject_id").size().sort_values(ascending=False)
    bins: list[list[int]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for sid, n in sizes.items():
        k = loads.index(min(loads))
        bins[k].append(int(sid))
        loads[k] += int(n)
    chunks = [df[df["subject_id"].isin(b)] for b in bins if b]
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(len(chunks), mp_context=mp.get_context(method)) as pool:
        futures = [
            pool.submit(
                _synthesize_verify,
                c,
                seed,
                drug_names,
                None,
                f"dialogues [{i}/{len(chunks)}]",
                keep,
            )
            for i, c in enumerate(chunks, 1)
        ]
        return [f.result() for f in futures]


def _writer_counts(turns: list[dict[str, Any]]) -> dict[str, int]:
    """Visits per writer role (a visit's turns share one role)."""
    role_of = {int(t["visit_idx"]): t.get("writer_role") or "template" for t in turns}
    roles = list(role_of.values())
    return {f"n_visits_{r}": roles.count(r) for r in WRITER_ROLES}


def _summary(
    turns_by: Mapping[int, list[dict[str, Any]]],
    cov_by: Mapping[int, list[dict[str, Any]]],
    decisions: Mapping[int, Mapping[str, Any]],
    wanted: Iterable[int],
) -> pd.DataFrame:
    rows = []
    for sid in sorted(wanted):
        turns, cov = turns_by.get(sid, []), cov_by.get(sid, [])
        status = [c["status"] for c in cov]
        d = decisions.get(sid)
        if d is None:
            d = {
                "kept": False,
                "drop_reason": "no events for this cohort patient",
                "n_soft_warnings": 0,
            }
        rows.append(
            dict(
                subject_id=int(sid),
                kept=bool(d["kept"]),
                n_visits=len({t["visit_idx"] for t in turns}),
                n_turns=len(turns),
                n_chars=len(render_dialogue(turns, with_ids=False)) if turns else 0,
                n_events=len(cov),
                n_covered=status.count("covered"),
                n_missed=status.count("missed"),
                n_unusable=status.count("unusable"),
                n_soft_warnings=int(d["n_soft_warnings"]),
                drop_reason=str(d["drop_reason"]),
                **_writer_counts(turns),
            )
        )
    return _frame(rows, SUMMARY_COLUMNS)


def build_dialogues(
    profile: str | None = None,
    seed: int | None = None,
    rewriter: RewriterArg = None,
    allow_drops: bool = False,
) -> dict[str, pd.DataFrame]:
    """Read events (+ cohort) of a profile, synthesise and verify every dialogue, and write
    dialogues / event_coverage / dialogue_checks / dialogue_summary (.parquet) atomically
    under ``data/build/<profile>/`` (``dialogue_rewrites.parquet`` too with a rewriter).

    Args:
        profile: build profile (default: $CLINTRACE_PROFILE, else quick).
        seed: synthesis seed (default: the profile's seed, else 0).
        rewriter: optional LLM rewriter; the template path needs no network.
        allow_drops: accept dropping more than guards.MAX_DROP_SHARE of the patients
            (keeping none is always a StageError).

    Returns:
        The frames written, keyed by artifact name (see :func:`synthesize_corpus`).
    """
    name = resolve_profile(profile)
    if seed is None:
        seed = PROFILES[base].seed if (base := base_profile(name)) in PROFILES else 0
    hint = f"clintrace cohort --profile {name}"
    events_path = artifact_path("events.parquet", name)
    events = read_artifact(events_path, hint)
    check_artifact("events", name)
    cohort_path = artifact_path("cohort.parquet", name)
    cohort = read_artifact(cohort_path, hint) if cohort_path.exists() else None
    with stage_run("dialogues", name) as staging:
        out = synthesize_corpus(
            events, cohort, seed=seed, rewriter=rewriter, source=str(events_path)
        )
        summary = out["dialogue_summary"]
        dropped = summary.loc[~summary["kept"], "drop_reason"]
        check_kept(
            "dialogues",
            "patients' dialogues",
            int(summary["kept"].sum()),
            len(summary),
            group_reasons(dropped),
            allow_drops=allow_drops,
        )
        _write_build(out, staging, rewriter is not None)
    return out


def _write_build(out: Mapping[str, pd.DataFrame], staging, rewritten: bool) -> None:
    names = ["dialogue_checks", "event_coverage", "dialogues", "dialogue_summary"]
    if rewritten:
        names.insert(0, "dialogue_rewrites")
    # Staged, then renamed into place together by stage_run after every write succeeded; the
    # summary, staged last, is renamed last, so its presence marks a complete build.
    for n in names:
        out[n].to_parquet(staging.path(f"{n}.parquet"), index=False)
