"""Provider batch jobs through the ``openai`` SDK: the paper's 200,672 calls (§4) at the batch
price (Appendix D; OpenAI's Batch API bills half the live price and answers within 24 h).

:class:`BatchClient` answers a list of :class:`~clinlib.llm.chat.ChatRequest` like
:meth:`LLMClient.complete_many <clinlib.llm.client.LLMClient.complete_many>` (one result per
request, in order) but sends the uncached ones as provider batches: it writes the JSONL
(:mod:`clinlib.llm.batchfiles`), uploads it (``files.create(purpose="batch")``), creates the
batch (``batches.create``), polls it (``batches.retrieve``), downloads the output and error
files (``files.content``) and writes every answer into the same response cache as a live call,
priced at the backbone's batch prices.

Resumable, never submitted twice: each batch's record is written durably before each step
(input file, then file id, then batch id); a rerun resumes a record at the step it reached
(a record with a file id but no batch id is matched to the provider's batch of that file, if
one was created before the process died), and a request already in an uncollected batch is
waited for, not sent again.

Failures: a line in the error file (HTTP error or ``batch_expired``) and a request absent
from both files become results with ``error`` set (not cached); a malformed output line is
reported with its line number and its request counts as unanswered; a ``failed`` batch
makes every request of it an error. An ``expired`` batch keeps its completed lines. A rerun
with ``retry_errors`` sends the failed ones again in a new batch.
"""

from __future__ import annotations

import asyncio
import calendar
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from clinlib.llm.batchfiles import (
    BATCH_ENDPOINT,
    COMPLETION_WINDOW,
    MAX_BATCH_FILE_BYTES,
    MAX_REQUESTS_PER_BATCH,
    TERMINAL_STATUSES,
    BatchEntry,
    chunk_lines,
    input_line,
    input_path,
    iter_chunks,
    new_entry,
    parse_result_file,
    pending_entries,
    read_input_bodies,
    save_entry,
)
from clinlib.llm.chat import ChatRequest, ChatResult, request_body, validate_requests
from clinlib.llm.client import LLMClient
from clinlib.llm.retry import classify_failure, http_failure_kind

log = logging.getLogger("clinlib.llm.batch")

DEFAULT_POLL_INTERVAL_S = 30.0
NO_BATCH_API_HINT = (
    "does this endpoint implement OpenAI's batch API (/v1/files and /v1/batches)? "
    "OpenRouter, behind the paper presets, does not: define a backbone on the provider's own "
    "API (e.g. https://api.openai.com/v1) or run live"
)
# Consecutive failed calls (upload, retrieve, download) before giving up; a rerun resumes.
MAX_CALL_FAILURES = 8


class BatchJobError(ValueError):
    """A batch could not be submitted, polled or collected; a rerun resumes where it stopped."""


class BatchPending(BatchJobError):
    """Batches were still running when ``max_wait_s`` passed (rerun to collect them)."""


@dataclass
class BatchStats:
    """Counters of one batch client."""

    batches_created: int = 0
    batches_resumed: int = 0
    lines_submitted: int = 0
    polls: int = 0
    malformed_lines: int = 0


class BatchClient:
    """Answers requests through the provider's batch API, into the live client's cache.

    Args:
        client: the live client of the backbone (its cache, key recipe, SDK and parsing).
        state_dir: where batch records and input files are kept (e.g. the profile's
            ``batches/`` folder).
        poll_interval_s: seconds between two polls of a running batch.
        max_wait_s: stop waiting after this long and raise :class:`BatchPending` (None:
            wait until every batch ends; the provider's window is 24 h).
        max_requests / max_bytes: per-batch limits (default: OpenAI's).
        on_status: called with one line per status change (progress, problems).
    """

    def __init__(
        self,
        client: LLMClient,
        state_dir: str | Path,
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_wait_s: float | None = None,
        max_requests: int = MAX_REQUESTS_PER_BATCH,
        max_bytes: int = MAX_BATCH_FILE_BYTES,
        on_status: Callable[[str], None] | None = None,
    ) -> None:
        if client.backbone.kind != "openai":
            raise BatchJobError(f"backbone {client.backbone.name!r} is offline: nothing to batch")
        if poll_interval_s < 0 or (max_wait_s is not None and max_wait_s < 0):
            raise BatchJobError("poll_interval_s and max_wait_s must be >= 0")
        self.client = client
        self.backbone = client.backbone
        self.state_dir = Path(state_dir)
        self.poll_interval_s = float(poll_interval_s)
        self.max_wait_s = max_wait_s
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.on_status = on_status
        self.stats = BatchStats()
        self._latest: dict[str, Any] = {}  # local_id -> last Batch object seen

    def _say(self, message: str, level: int = logging.INFO) -> None:
        if self.on_status is not None:
            self.on_status(message)
        else:
            log.log(level, "%s", message)

    # -- the whole job ----------------------------------------------------------------------
    async def complete_many(
        self,
        requests: Sequence[ChatRequest],
        on_result: Callable[[ChatResult], None] | None = None,
    ) -> list[ChatResult]:
        """Answer ``requests`` (cache first, then batches); one result per request, in order.

        Raises:
            BatchPending: batches still running after ``max_wait_s`` (their records are kept).
            BatchJobError: a batch could not be submitted or read (rerun to resume).
        """
        requests = list(requests)
        validate_requests(requests)
        results: list[ChatResult | None] = [None] * len(requests)
        todo = []
        for i, req in enumerate(requests):
            hit = self.client.from_cache(req)
            if hit is None:
                todo.append(i)
            else:
                results[i] = hit
                if on_result:
                    on_result(hit)
        if todo:
            by_key = await self._answer([requests[i] for i in todo])
            for i in todo:
                res = dataclasses.replace(
                    by_key[self.client.key_for(requests[i])], request_id=requests[i].request_id
                )
                results[i] = res
                if on_result:
                    on_result(res)
        return [r for r in results if r is not None]

    async def _answer(self, requests: list[ChatRequest]) -> dict[str, ChatResult]:
        """Key -> result for uncached requests: wait for those already in a batch, submit the
        rest, collect everything."""
        self.client._ensure_sdk()  # a missing key fails here, before anything is written
        bb = self.backbone
        keys = {req.request_id: self.client.key_for(req) for req in requests}
        wanted = set(keys.values())
        jobs = [
            e
            for e in pending_entries(self.state_dir, bb.base_url or "", bb.model)
            if wanted & set(e.keys.values())
        ]
        covered = {key for e in jobs for key in e.keys.values()}
        fresh: dict[str, ChatRequest] = {}
        for req in requests:  # identical prompts are sent (and paid) once
            if keys[req.request_id] not in covered:
                fresh.setdefault(keys[req.request_id], req)
        if jobs:
            self._say(f"{bb.name}: resuming {len(jobs)} batch(es) submitted earlier")
        jobs += self._new_entries(list(fresh.values()), keys)
        for entry in jobs:
            await self._submit(entry)
        await self._wait(jobs)
        out: dict[str, ChatResult] = {}
        for entry in jobs:
            for key, res in (await self._collect(entry)).items():
                if key not in out or (out[key].error is not None and res.error is None):
                    out[key] = res
        for req in requests:
            if keys[req.request_id] not in out:  # cannot happen: every line gets an outcome
                raise BatchJobError(f"no batch outcome for request {req.request_id!r}")
        return out

    def _new_entries(self, requests: list[ChatRequest], keys: dict[str, str]) -> list[BatchEntry]:
        bb = self.backbone
        lines = [input_line(r.request_id, request_body(bb.model, r)) for r in requests]
        entries = []
        for chunk in iter_chunks(
            list(range(len(requests))), chunk_lines(lines, self.max_requests, self.max_bytes)
        ):
            rows = [(requests[i].request_id, keys[requests[i].request_id], lines[i]) for i in chunk]
            entries.append(new_entry(self.state_dir, bb.name, bb.base_url or "", bb.model, rows))
        return entries

    # -- provider calls ---------------------------------------------------------------------
    async def _call(self, what: str, make: Callable[[], Awaitable[Any]]) -> Any:
        """An idempotent provider call, retried on transient failures with backoff."""
        for attempt in range(MAX_CALL_FAILURES):
            try:
                return await make()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = classify_failure(exc)
                message = self.client._scrub(failure.message)
                if not failure.retryable or attempt == MAX_CALL_FAILURES - 1:
                    hint = (
                        "rerun the same command to resume"
                        if failure.retryable
                        else NO_BATCH_API_HINT
                        if "HTTP 404" in message and what.startswith("uploading")
                        else self._forgotten_hint()
                        if "HTTP 404" in message and what.startswith(("polling", "downloading"))
                        else "fix the cause, then rerun the same command to resume"
                    )
                    raise BatchJobError(
                        f"{self.backbone.name} ({self.backbone.base_url}): {what} failed "
                        f"({failure.kind}: {message}); {hint}"
                    ) from None
                delay = failure.retry_after or min(30.0, 0.05 * 2**attempt)
                log.info("%s failed (%s); retrying in %.2fs", what, message, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _forgotten_hint(self) -> str:
        """The remedy when the provider no longer knows a submitted batch (404): a rerun
        would poll it again and fail the same way."""
        return (
            "the provider no longer holds this batch (a restarted batch server forgets its "
            "jobs), so rerunning cannot collect it: rerun without --batch to answer live, or "
            f"forget the job (delete its record, {self.state_dir}/<local id>.json) and rerun "
            "to submit it again"
        )

    async def _find_batch(self, entry: BatchEntry) -> Any | None:
        """The provider's batch of the entry's uploaded file (a create whose id was never
        recorded). Batches are listed newest first; the scan stops at those created well
        before the entry's record, which cannot be its batch."""
        sdk = self.client._ensure_sdk()
        since = calendar.timegm(time.strptime(entry.created_at, "%Y-%m-%dT%H:%M:%SZ")) - 3600

        async def scan() -> Any | None:
            async for batch in sdk.batches.list(limit=100):
                if batch.input_file_id == entry.input_file_id:
                    return batch
                if batch.created_at < since:
                    break
            return None

        return await self._call(f"listing batches for {entry.input_file_id}", scan)

    async def _submit(self, entry: BatchEntry) -> None:
        """Upload and create ``entry``'s batch, recording each id before the next step."""
        sdk = self.client._ensure_sdk()
        if entry.batch_id is not None:
            self.stats.batches_resumed += 1
            return
        if entry.input_file_id is not None:
            found = await self._find_batch(entry)
            if found is not None:  # created before a crash, never recorded: adopt it
                self._record(entry, found)
                self.stats.batches_resumed += 1
                return
        else:
            data = input_path(self.state_dir, entry.local_id).read_bytes()
            upload = await self._call(
                f"uploading {entry.label()}",
                lambda: sdk.files.create(
                    file=(f"{entry.local_id}.jsonl", data, "application/jsonl"), purpose="batch"
                ),
            )
            entry.input_file_id, entry.status = upload.id, "uploaded"
            save_entry(self.state_dir, entry)
        attempted = False

        async def create() -> Any:
            # A retried create whose first attempt reached the provider must not make a
            # second batch: look for the batch of this file first.
            nonlocal attempted
            if attempted and (found := await self._find_batch(entry)):
                return found
            attempted = True
            return await sdk.batches.create(
                input_file_id=str(entry.input_file_id),
                endpoint=BATCH_ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata={"clintrace_batch": entry.local_id},
            )

        batch = await self._call(f"creating the batch of {entry.input_file_id}", create)
        self._record(entry, batch)
        self.stats.batches_created += 1
        self.stats.lines_submitted += len(entry.lines)
        self.client.stats.api_calls += len(entry.lines)
        self._say(f"{self.backbone.name}: submitted {entry.label()}")

    def _record(self, entry: BatchEntry, batch: Any) -> None:
        entry.batch_id, entry.status = batch.id, batch.status
        self._latest[entry.local_id] = batch
        save_entry(self.state_dir, entry)

    # -- waiting ----------------------------------------------------------------------------
    async def _wait(self, jobs: list[BatchEntry]) -> None:
        """Poll every batch until it is terminal (or ``max_wait_s`` passes)."""
        started = time.monotonic()
        shown: dict[str, tuple[Any, ...]] = {}
        while True:
            for entry in jobs:
                latest = self._latest.get(entry.local_id)
                if latest is not None and latest.status in TERMINAL_STATUSES and entry.collected:
                    continue
                if latest is None or latest.status not in TERMINAL_STATUSES:
                    assert entry.batch_id is not None
                    latest = await self._retrieve(entry.batch_id)
                    self.stats.polls += 1
                    self._latest[entry.local_id] = latest
                self._show(entry, latest, shown, time.monotonic() - started)
            if all(self._latest[e.local_id].status in TERMINAL_STATUSES for e in jobs):
                return
            if self.max_wait_s is not None and time.monotonic() - started >= self.max_wait_s:
                running = [
                    e.label()
                    for e in jobs
                    if self._latest[e.local_id].status not in TERMINAL_STATUSES
                ]
                raise BatchPending(
                    f"{len(running)} batch(es) still running after {self.max_wait_s:g} s "
                    f"({'; '.join(running)}); rerun the same command to collect them - "
                    "nothing is submitted twice"
                )
            await asyncio.sleep(self.poll_interval_s)

    async def _retrieve(self, batch_id: str) -> Any:
        """The provider's batch object (``status``, ``request_counts``, file ids): the seam a
        provider with another batch API overrides (:mod:`clinlib.llm.anthropic_batch`)."""
        sdk = self.client._ensure_sdk()
        return await self._call(f"polling {batch_id}", lambda: sdk.batches.retrieve(batch_id))

    async def _download(self, file_id: str, kind: str, batch_id: str) -> str:
        """The text of an output / error file in OpenAI's batch line format (the seam)."""
        sdk = self.client._ensure_sdk()
        content = await self._call(
            f"downloading {kind} file {file_id}", lambda: sdk.files.content(file_id)
        )
        return content.text

    def _show(
        self, entry: BatchEntry, batch: Any, shown: dict[str, tuple[Any, ...]], elapsed: float
    ) -> None:
        """A progress line when a batch's status or counts changed (and its record updated)."""
        counts = batch.request_counts
        state = (batch.status, getattr(counts, "completed", None), getattr(counts, "failed", None))
        if shown.get(entry.local_id) == state:
            return
        shown[entry.local_id] = state
        if entry.status != batch.status:
            entry.status = batch.status
            save_entry(self.state_dir, entry)
        done = f", {state[1]}/{len(entry.lines)} done, {state[2]} failed" if counts else ""
        self._say(f"{self.backbone.name}: {entry.label()} {batch.status}{done} ({elapsed:.0f} s)")

    # -- collecting -------------------------------------------------------------------------
    async def _collect(self, entry: BatchEntry) -> dict[str, ChatResult]:
        """Key -> result of every line of a terminal batch; successes go into the cache."""
        batch = self._latest[entry.local_id]
        bodies = read_input_bodies(self.state_dir, entry)
        keys = entry.keys
        outcomes: dict[str, ChatResult] = {}
        problems: list[str] = []
        for file_id, kind in ((batch.output_file_id, "output"), (batch.error_file_id, "error")):
            if not file_id:
                continue
            text = await self._download(file_id, kind, batch.id)
            lines, bad = parse_result_file(text, f"{kind} file {file_id} of {batch.id}")
            for cid, problem in bad:
                problems.append(problem)
                if cid in keys and cid not in outcomes:  # its id survived: name it
                    outcomes[cid] = self._error(cid, "bad_response", problem)
            for line in lines:
                if line.custom_id not in keys:
                    problems.append(
                        f"{kind} file {file_id} of {batch.id} names unknown "
                        f"custom_id {line.custom_id!r}"
                    )
                    continue
                outcomes[line.custom_id] = self._outcome(
                    line, bodies[line.custom_id], keys[line.custom_id], batch.id
                )
        self.stats.malformed_lines += sum(" is malformed " in p for p in problems)
        for problem in problems:
            self._say(problem, logging.WARNING)
        why = self._unanswered_reason(batch, problems)
        for cid in keys:
            if cid not in outcomes:
                outcomes[cid] = self._error(cid, why[0], why[1])
        entry.collected, entry.status = True, batch.status
        save_entry(self.state_dir, entry)
        n_err = sum(r.error is not None for r in outcomes.values())
        self._say(
            f"{self.backbone.name}: collected {entry.label()}: {batch.status}, "
            f"{len(outcomes) - n_err} answered, {n_err} error(s)"
        )
        return {keys[cid]: res for cid, res in outcomes.items()}

    @staticmethod
    def _unanswered_reason(batch: Any, problems: list[str]) -> tuple[str, str]:
        """(error_kind, message) of a request with no usable line in either file."""
        if batch.status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            first = errors[0] if errors else None
            detail = (
                f"{first.code}: {first.message} (input line {first.line})"
                if first is not None
                else "no reason given"
            )
            return "batch_failed", f"{batch.id} failed validation: {detail}"
        message = (
            f"no line for this request in the output or error file of {batch.id} "
            f"(status {batch.status})"
        )
        if problems:
            message += f"; {len(problems)} line(s) of its files were malformed"
        kind = "batch_missing" if batch.status == "completed" else f"batch_{batch.status}"
        return kind, message

    def _error(self, custom_id: str, kind: str, message: str) -> ChatResult:
        bb = self.backbone
        return ChatResult(custom_id, bb.name, bb.model, attempts=1, error=message, error_kind=kind)

    def _outcome(self, line: Any, body: dict[str, Any], key: str, batch_id: str) -> ChatResult:
        """One output / error line as a result; a success is priced at the batch price and
        cached under the live key."""
        cid = line.custom_id
        if line.error_code is not None:
            kind = "batch_expired" if line.error_code == "batch_expired" else "batch_error"
            return self._error(cid, kind, f"{line.error_code}: {line.error_message} ({batch_id})")
        if line.status_code != 200:
            detail = (
                line.body.get("error", {}).get("message") if isinstance(line.body, dict) else None
            )
            status = line.status_code or 0
            kind = http_failure_kind(status, str(detail or line.body))
            return self._error(cid, kind, f"HTTP {status} in {batch_id}: {detail or line.body}")
        result = ChatResult(cid, self.backbone.name, self.backbone.model, attempts=1)
        try:
            completion = ChatCompletion.model_validate(line.body)
        except ValidationError as exc:
            return self._error(
                cid,
                "bad_response",
                f"malformed completion in {batch_id}: {exc.error_count()} validation error(s)",
            )
        failure = self.client.accept(ChatRequest(cid, body["messages"]), completion, 0.0, result)
        if failure is not None:
            return self._error(cid, failure.kind, f"{failure.message} ({batch_id})")
        result.cost_usd = self.backbone.batch_cost(
            result.input_tokens, result.output_tokens, result.cached_tokens
        )
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        self.client.store_result(key, body["messages"], params, result)
        return result
