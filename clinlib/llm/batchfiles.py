"""Provider batch files: the JSONL a batch takes and returns, its limits, and the durable
record of every batch submitted (paper §4: 200,672 calls; a batch API answers them within a
day at about half the price, Appendix D).

One input line per request: ``{"custom_id", "method": "POST", "url": "/v1/chat/completions",
"body"}`` with the body the live client sends (:func:`clinlib.llm.chat.request_body`), so a
batch answer lands under the same response-cache key as a live one. Output and error lines are
``{"id", "custom_id", "response": {"status_code", "body"} | null, "error": {"code",
"message"} | null}``.

The record (:class:`BatchEntry`, one JSON file per batch, written atomically and fsynced
before the next step) holds the input file, then its uploaded file id, then the batch id:
a killed process resumes an entry at the step it reached, so nothing is submitted twice.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clinlib.llm.response_cache import canonical_json, public_base_url

# OpenAI Batch API limits (files.create / batches.create documentation): an input file holds
# at most 50,000 requests and 200 MB. Chunks stay under both.
MAX_REQUESTS_PER_BATCH = 50_000
MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024
BATCH_ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
# Statuses after which a batch changes no more.
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})
ENTRY_VERSION = 1
# The custom_id of a line too garbled to parse as JSON, if it is still legible.
CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


class BatchFileError(ValueError):
    """A batch file or record cannot be used (named with its path and line)."""


def input_line(custom_id: str, body: Mapping[str, Any]) -> bytes:
    """One input line (newline-terminated JSON) for a chat request body."""
    line = {"custom_id": custom_id, "method": "POST", "url": BATCH_ENDPOINT, "body": dict(body)}
    return canonical_json(line).encode("utf-8") + b"\n"


def chunk_lines(
    lines: Sequence[bytes],
    max_requests: int = MAX_REQUESTS_PER_BATCH,
    max_bytes: int = MAX_BATCH_FILE_BYTES,
) -> list[list[int]]:
    """Split line indices into consecutive chunks under both provider limits.

    Raises:
        BatchFileError: a single line is larger than ``max_bytes``.
    """
    if max_requests < 1 or max_bytes < 1:
        raise BatchFileError("max_requests and max_bytes must be >= 1")
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, line in enumerate(lines):
        if len(line) > max_bytes:
            raise BatchFileError(
                f"request {i} alone is {len(line):,} bytes, over the batch file limit of "
                f"{max_bytes:,}"
            )
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(i)
        size += len(line)
    if current:
        chunks.append(current)
    return chunks


@dataclass
class BatchEntry:
    """The durable record of one provider batch.

    Attributes:
        local_id: this record's name (``<time>-<random>``).
        backbone / base_url / model: where it was sent (base URL without credentials).
        lines: ``[custom_id, cache_key]`` per input line, in file order.
        input_file_id / batch_id: set as soon as the provider returns them.
        status: the last status seen (``local`` before upload).
        collected: its results were read into the response cache.
        created_at: when the record was made (UTC ISO).
        n_bytes: size of the input file.
    """

    local_id: str
    backbone: str
    base_url: str
    model: str
    lines: list[list[str]]
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str = "local"
    collected: bool = False
    created_at: str = ""
    n_bytes: int = 0
    version: int = ENTRY_VERSION

    @property
    def keys(self) -> dict[str, str]:
        """custom_id -> cache key."""
        return dict((cid, key) for cid, key in self.lines)

    def label(self) -> str:
        """How messages name this batch."""
        return f"batch {self.batch_id or '(not created)'} [{self.local_id}, {len(self.lines)} requests]"


def entry_path(state_dir: Path, local_id: str) -> Path:
    return state_dir / f"{local_id}.json"


def input_path(state_dir: Path, local_id: str) -> Path:
    return state_dir / f"{local_id}.input.jsonl"


def _durable_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and fsynced (temp + fsync + rename + dir fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_entry(state_dir: Path, entry: BatchEntry) -> None:
    """Record ``entry`` durably (before the step that depends on it is taken)."""
    _durable_write(entry_path(state_dir, entry.local_id), json.dumps(asdict(entry)).encode())


def new_entry(
    state_dir: Path,
    backbone: str,
    base_url: str,
    model: str,
    lines: Sequence[tuple[str, str, bytes]],
) -> BatchEntry:
    """Write the input file of ``lines`` (custom_id, cache key, JSONL line) and its record."""
    local_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    data = b"".join(line for *_, line in lines)
    _durable_write(input_path(state_dir, local_id), data)
    entry = BatchEntry(
        local_id=local_id,
        backbone=backbone,
        base_url=public_base_url(base_url),
        model=model,
        lines=[[cid, key] for cid, key, _ in lines],
        n_bytes=len(data),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    save_entry(state_dir, entry)
    return entry


def load_entries(state_dir: Path) -> list[BatchEntry]:
    """Every batch record in ``state_dir``, oldest first."""
    out = []
    for path in sorted(state_dir.glob("*.json")) if state_dir.is_dir() else []:
        try:
            values = json.loads(path.read_text())
            out.append(BatchEntry(**values))
        except (ValueError, TypeError) as exc:
            raise BatchFileError(f"{path}: not a batch record ({exc}); move it aside") from None
    return out


def pending_entries(state_dir: Path, base_url: str, model: str) -> list[BatchEntry]:
    """Records of batches to this endpoint whose results were not collected yet."""
    url = public_base_url(base_url)
    return [
        e
        for e in load_entries(state_dir)
        if not e.collected and e.base_url == url and e.model == model
    ]


def read_input_bodies(state_dir: Path, entry: BatchEntry) -> dict[str, dict[str, Any]]:
    """custom_id -> request body, from the entry's local input file."""
    path = input_path(state_dir, entry.local_id)
    bodies: dict[str, dict[str, Any]] = {}
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        try:
            line = json.loads(raw)
            bodies[line["custom_id"]] = line["body"]
        except (ValueError, KeyError, TypeError):
            raise BatchFileError(f"{path} line {n}: not a batch input line") from None
    return bodies


@dataclass(frozen=True)
class OutputLine:
    """One parsed output / error line: its custom_id and either a response or an error."""

    custom_id: str
    status_code: int | None
    body: Any
    error_code: str | None = None
    error_message: str | None = None


def parse_result_file(
    text: str, source: str
) -> tuple[list[OutputLine], list[tuple[str | None, str]]]:
    """Parse an output or error file.

    Args:
        text: the file's content.
        source: how problems name the file (e.g. ``"output file file-12 of batch_3"``).

    Returns:
        The parsed lines, and per malformed line (the custom_id if it can still be read, or
        None; a diagnostic with the line number).
    """
    parsed: list[OutputLine] = []
    problems: list[tuple[str | None, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            parsed.append(_parse_line(json.loads(raw)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            snippet = raw[:60] + ("..." if len(raw) > 60 else "")
            found = CUSTOM_ID.search(raw)
            problems.append(
                (
                    found.group(1) if found else None,
                    f"{source} line {n} is malformed ({type(exc).__name__}): {snippet}",
                )
            )
    return parsed, problems


def _parse_line(line: Any) -> OutputLine:
    cid = line["custom_id"]
    if not isinstance(cid, str):
        raise TypeError("custom_id is not a string")
    error = line.get("error")
    if error:
        return OutputLine(cid, None, None, str(error.get("code")), str(error.get("message")))
    response = line["response"]
    status = int(response["status_code"])
    return OutputLine(cid, status, response.get("body"))


def iter_chunks(items: Sequence[Any], chunks: Sequence[Sequence[int]]) -> Iterator[list[Any]]:
    """The items of each chunk of indices."""
    for chunk in chunks:
        yield [items[i] for i in chunk]
