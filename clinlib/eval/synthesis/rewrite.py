"""Dialogues rewritten by any backbone, kept only when verified (paper §3 "Cohort"; Fig. 2
stage 3: "LLM synthesis (Sonnet) + verifier ... rescued by other models"; Appendix C.1).

``rewrite_dialogues(profile, "claude-sonnet-4.6", rescue=["gpt-4o-mini"])`` (``clintrace
dialogues --rewrite B --rescue R``) writes the variant profile ``<profile>+rw-B+R``
(:mod:`clinlib.eval.synthesis.variants`): the cohort's events, and dialogues in which each visit's
template draft was rewritten by ``B``; a visit whose rewrite fails a per-turn check
(:data:`clinlib.dialogue.rewrite.REWRITE_CHECKS`) goes to each rescue backbone in order, then
keeps its template text. ``dialogue_rewrites.parquet`` records every visit's outcome
(accepted / rescued / template), who wrote the kept text and the failing check of every
rejected attempt. The template corpus of ``<profile>`` and its predictions stay untouched.

The calls go through :class:`clinlib.eval.synthesis.calls.Calls` (response cache: a rerun or a
killed run started again asks nothing twice; budget cap; egress guard; live or batch mode).
They are made in rounds, one per backbone: round k synthesises the corpus with the replies
fetched so far and asks backbone k for exactly the visits that reach it; the last pass, with
every reply at hand, is the dialogues stage itself (:func:`clinlib.dialogue.synth.
build_dialogues`: the verifier, drop guards and manifest as for the template corpus).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.config import PROFILES, base_profile, resolve_profile
from clinlib.core.guards import check_artifact
from clinlib.data.build import load
from clinlib.dialogue.fields import records
from clinlib.dialogue.rewrite import draft_required, rewrite_messages, visit_draft
from clinlib.dialogue.synth import build_dialogues, rewrite_log, synthesize_corpus
from clinlib.eval.harness.cells import is_credentialed, resolve_backbones
from clinlib.eval.harness.store import RunnerError
from clinlib.eval.synthesis.calls import PRICE_COLUMNS, Calls, price_requests
from clinlib.eval.synthesis.rule_writers import RULE_WRITERS, register_rule_writers
from clinlib.eval.synthesis.variants import derive_profile, variant_name
from clinlib.llm import (
    Backbone,
    ChatRequest,
    ChatResult,
    GenerationParams,
    ResponseCache,
    count_tokens,
    default_cache_path,
)

# The output cap of a rewrite: twice the draft's tokens (a rewrite is about as long as its
# draft; the margin lets a model add words), at least this many.
MIN_REWRITE_TOKENS = 256


class NotFetched(LookupError):
    """A round asked for a reply that has not been fetched yet (internal to the rounds)."""


def draft_key(draft: str, required: Sequence[str]) -> str:
    """A visit's request id: a hash of its draft and required strings."""
    blob = json.dumps([draft, list(required)], ensure_ascii=False).encode()
    return "rw-" + hashlib.sha1(blob).hexdigest()[:20]


def rewrite_request(
    bb: Backbone, draft: str, required: Sequence[str], max_tokens: int | None = None
) -> ChatRequest:
    """The chat request for one visit (temperature 0; output cap ``max_tokens``, else from
    the draft's length)."""
    cap = max_tokens or max(MIN_REWRITE_TOKENS, 2 * count_tokens(draft, bb.model))
    return ChatRequest(
        draft_key(draft, required),
        rewrite_messages(draft, required),
        GenerationParams(temperature=0.0, max_tokens=cap),
    )


class Fetched:
    """A :class:`~clinlib.dialogue.rewrite.Rewriter` answering from one backbone's fetched
    replies; a draft without a reply is noted in ``needed`` (if given) and refused."""

    def __init__(self, replies: dict[str, ChatResult], needed: dict | None = None) -> None:
        self.replies, self.needed = replies, needed

    def rewrite(self, draft: str, required: list[str]) -> str:
        key = draft_key(draft, required)
        res = self.replies.get(key)
        if res is None:
            if self.needed is not None:
                self.needed[key] = (draft, list(required))
            raise NotFetched(key)
        if res.error:
            raise RuntimeError(f"{res.error_kind}: {res.error}")
        return res.response or ""


class Recorded:
    """A rewriter that notes each reply of ``inner`` under its draft and backbone name."""

    def __init__(self, name: str, inner: Fetched, sink: dict[str, dict[str, str]]) -> None:
        self.name, self.inner, self.sink = name, inner, sink

    def rewrite(self, draft: str, required: list[str]) -> str:
        reply = self.inner.rewrite(draft, required)
        self.sink.setdefault(draft, {})[self.name] = reply
        return reply


class Collector:
    """A :class:`~clinlib.dialogue.rewrite.Rewriter` that notes every draft and returns it."""

    def __init__(self) -> None:
        self.drafts: dict[str, tuple[str, list[str]]] = {}

    def rewrite(self, draft: str, required: list[str]) -> str:
        self.drafts[draft_key(draft, required)] = (draft, list(required))
        return draft


def _inputs(profile: str) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    name = resolve_profile(profile)
    base = base_profile(name)
    seed = PROFILES[base].seed if base in PROFILES else 0
    return load("events", name), load("cohort", name), seed


def resolve_writers(names: Sequence[str], config: str | Path | None) -> list[Backbone]:
    """Backbones by name (the rule-based writers registered on demand)."""
    if any(n in RULE_WRITERS for n in names):
        register_rule_writers()
    return resolve_backbones(list(names), config)


def fetch_rounds(
    events: pd.DataFrame,
    cohort: pd.DataFrame | None,
    seed: int,
    backbones: Sequence[Backbone],
    calls: Calls,
    max_tokens: int | None = None,
) -> list[tuple[str, Fetched]]:
    """Ask each backbone, in order, for the visits that reach it; the final chain."""
    replies: dict[str, dict[str, ChatResult]] = {bb.name: {} for bb in backbones}
    for k, bb in enumerate(backbones):
        needed: dict[str, tuple[str, list[str]]] = {}
        chain = [
            (b.name, Fetched(replies[b.name], needed if i == k else None))
            for i, b in enumerate(backbones[: k + 1])
        ]
        rewrite_log(events, cohort, seed, chain)
        if not needed:
            break
        reqs = [rewrite_request(bb, d, r, max_tokens) for d, r in needed.values()]
        replies[bb.name].update(calls.send(bb, reqs))
    return [(b.name, Fetched(replies[b.name])) for b in backbones]


def rewrite_corpus(
    events: pd.DataFrame,
    backbones: Sequence[str],
    cohort: pd.DataFrame | None = None,
    seed: int = 0,
    calls: Calls | None = None,
    config: str | Path | None = None,
) -> dict[str, Any]:
    """Rewrite and verify the dialogues of an events table in memory (no profile written):
    the notebooks' path, e.g. on a few patients with the rule-based writers.

    Args:
        events: events rows (one or more patients).
        backbones: the rewriting backbone, then the rescues, in order.
        cohort / seed: as for :func:`clinlib.dialogue.synth.synthesize_corpus`.
        calls: how requests are sent (default: no cache, no budget, and the records treated as
            credentialed: only offline or approved backbones receive them).

    Returns:
        The frames of :func:`~clinlib.dialogue.synth.synthesize_corpus` (with
        ``dialogue_rewrites``) and ``"replies"``: ``{draft: {backbone: reply}}`` for every
        attempt (the draft is :func:`clinlib.dialogue.rewrite.visit_draft` of the template).
    """
    bbs = resolve_writers(list(backbones), config)
    calls = calls or Calls("", credentialed=True, cache=False)
    replies: dict[str, dict[str, str]] = {}
    chain = [
        (n, Recorded(n, rw, replies)) for n, rw in fetch_rounds(events, cohort, seed, bbs, calls)
    ]
    return {**synthesize_corpus(events, cohort, seed=seed, rewriter=chain), "replies": replies}


def rewrite_dialogues(
    profile: str | None,
    backbone: str,
    rescue: Sequence[str] = (),
    *,
    into: str | None = None,
    budget_usd: float | None = None,
    mode: str = "live",
    config: str | Path | None = None,
    allow_unapproved: bool = False,
    allow_drops: bool = False,
    concurrency: int | None = None,
    on_result: Callable[[ChatResult], None] | None = None,
    max_tokens: int | None = None,
    batch_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Rewrite a profile's dialogues with ``backbone`` (rescued by ``rescue``) into a variant.

    Args:
        profile: the template profile (built through the dialogues stage).
        backbone / rescue: the rewriting backbone and the rescue backbones, in order.
        into: the variant's profile name (default :func:`~clinlib.eval.synthesis.variants.variant_name`).
        budget_usd: cap on new spend (:class:`~clinlib.eval.synthesis.calls.BudgetStop`).
        mode: ``live`` or ``batch`` (provider batch jobs at the batch price).
        config: TOML config with user backbones.
        allow_unapproved: send credentialed records to a backbone not approved for them.
        allow_drops: as for the dialogues stage.
        concurrency: requests in flight per backbone.
        on_result: called with each result as it arrives.
        batch_options: options of :class:`~clinlib.llm.batch.BatchClient` (poll_interval_s,
            max_wait_s, ...) in batch mode.
        max_tokens: output cap per visit (default: twice the draft's tokens, at least
            :data:`MIN_REWRITE_TOKENS`).

    Returns:
        ``{"profile": variant, "frames": the dialogues stage's frames (with
        dialogue_rewrites), "calls": per-backbone API calls and cache hits, "spent_usd"}``.
    """
    name = resolve_profile(profile)
    names = [backbone, *rescue]
    if len(set(names)) != len(names):
        raise RunnerError(f"--rewrite and --rescue repeat a backbone: {names}")
    bbs = resolve_writers(names, config)
    calls = Calls(
        name,
        is_credentialed(name),
        allow_unapproved,
        budget_usd,
        mode,
        config,
        concurrency,
        dict(batch_options or {}),
        on_result,
    )
    calls.guard(bbs)  # before anything is copied or sent
    dst = into or variant_name(name, "rewrite", names)
    derive_profile(name, dst, ["cohort"], {"kind": "rewrite", "backbones": names})
    calls.profile = dst  # its own response cache and batch records
    events, cohort, seed = _inputs(dst)
    chain = fetch_rounds(events, cohort, seed, bbs, calls, max_tokens)
    frames = build_dialogues(dst, rewriter=chain, allow_drops=allow_drops)
    stray = frames["dialogue_rewrites"]["attempts"].map(lambda a: any("NotFetched" in x for x in a))
    if stray.any():  # pragma: no cover - the rounds fetch every reply the final pass needs
        raise RuntimeError("a visit reached a backbone whose reply was never fetched")
    return {"profile": dst, "frames": frames, "calls": calls, "spent_usd": calls.spent_usd}


def collect_drafts(profile: str) -> dict[str, tuple[str, list[str]]]:
    """Every visit's (draft, required strings) of a profile, keyed by :func:`draft_key`.

    From the profile's current template dialogues where they exist (a kept patient's stored
    turns are its drafts), synthesising only the patients the verifier dropped (they are
    rewritten too); else from a synthesis pass over every patient.
    """
    events, cohort, seed = _inputs(profile)
    collect = Collector()
    try:
        check_artifact("dialogues", profile)
        turns, summary = load("dialogues", profile), load("dialogue_summary", profile)
    except (FileNotFoundError, ValueError):
        rewrite_log(events, cohort, seed, collect)
        return collect.drafts
    by_id = {str(e["event_id"]): e for e in records(events)}
    for (_sid, _v), g in turns.sort_values(["subject_id", "turn_idx"]).groupby(
        ["subject_id", "visit_idx"], sort=True
    ):
        recs = records(g)
        collect.rewrite(visit_draft(recs), draft_required(recs, by_id))
    dropped = set(summary.loc[~summary["kept"], "subject_id"])
    if dropped:
        rewrite_log(events[events["subject_id"].isin(dropped)], None, seed, collect)
    return collect.drafts


def estimate_rewrite(
    profile: str | None,
    backbones: Sequence[str],
    config: str | Path | None = None,
    into: str | None = None,
) -> pd.DataFrame:
    """What rewriting every visit of ``profile`` would cost each backbone, before sending.

    Input tokens are counted with each backbone's tokenizer over the real requests; output at
    the cap (max) or at the draft's own length (typical: a faithful rewrite is about as long).
    The first backbone rewrites every visit; a rescue backbone's row is its cost if it had to
    rewrite every visit (an upper bound: it gets only the visits the others fail).

    Returns:
        One row per backbone: ``role`` (primary / rescue) and :data:`PRICE_COLUMNS`.
    """
    name = resolve_profile(profile)
    bbs = resolve_writers(list(backbones), config)
    drafts = list(collect_drafts(name).values())
    dst = into or variant_name(name, "rewrite", list(backbones))
    rows = []
    path = default_cache_path(dst)
    for i, bb in enumerate(bbs):
        reqs = [rewrite_request(bb, d, r) for d, r in drafts]
        typical = [count_tokens(d, bb.model) for d, _ in drafts]
        if path.exists():
            with ResponseCache(path, readonly=True) as cache:
                row = price_requests(bb, reqs, typical, cache)
        else:
            row = price_requests(bb, reqs, typical, {})
        rows.append({"role": "primary" if i == 0 else "rescue", **row})
    return pd.DataFrame(rows, columns=["role", *PRICE_COLUMNS])
