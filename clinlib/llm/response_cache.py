"""On-disk response cache for LLM calls (docs/design.md principle 6; paper §4 and Appendix D).

The paper's 200,672 predictions cost $527.87; a re-run (a notebook re-executed, a crashed
run resumed, a figure re-drawn) must make zero API calls. Responses are keyed on the
endpoint (base URL + model id), the exact messages and the generation parameters, like
inspect_ai's cache policy, and stored in SQLite in WAL mode: readers (a notebook exploring
results) never block the writer (a running evaluation), every stored response is committed
on its own, and a crash leaves a consistent database holding every response committed before
it.

Stored per response: the text (``""`` for an empty completion, the paper's D1), finish
reason, usage (input / output / cached tokens), latency, backbone name, base URL, model and
the request (messages + parameters). Never an API key or an Authorization header: nothing
here ever receives one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from clinlib.core.config import build_dir

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

CACHE_FILENAME = "llm_cache.sqlite"
CACHE_SCHEMA_VERSION = 1
# Bump when the key recipe changes so old entries are never served for new requests.
KEY_VERSION = 1

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    backbone TEXT NOT NULL,
    base_url TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    finish_reason TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    usage_estimated INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
)
"""
COLUMNS: tuple[str, ...] = (
    "key",
    "backbone",
    "base_url",
    "model",
    "request",
    "response",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "latency_s",
    "usage_estimated",
    "created_at",
)


class CacheError(ValueError):
    """The cache file is not a usable response cache."""


def default_cache_path(profile: str | None = None) -> Path:
    """``data/build/<profile>/llm_cache.sqlite`` for the active profile."""
    return build_dir(profile) / CACHE_FILENAME


def public_base_url(base_url: str) -> str:
    """The base URL without credentials or a trailing slash (safe to store and hash)."""
    parts = urlsplit(base_url.strip())
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) used for hashing and storage."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(
    base_url: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
) -> str:
    """SHA-256 key of one request.

    Args:
        base_url: endpoint root (credentials stripped before hashing).
        model: model id as sent to the endpoint.
        messages: the exact chat messages.
        params: generation parameters as sent (None values already dropped).

    Returns:
        64 hex characters.
    """
    payload = {
        "v": KEY_VERSION,
        "base_url": public_base_url(base_url),
        "model": model,
        "messages": list(messages),
        "params": dict(params),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    """One stored response (the columns of the ``responses`` table, request excluded)."""

    key: str
    backbone: str
    base_url: str
    model: str
    response: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    latency_s: float
    usage_estimated: bool
    created_at: str


class ResponseCache:
    """SQLite (WAL) response store; safe for one writer and many concurrent readers.

    Args:
        path: the ``.sqlite`` file (created with its folder unless ``readonly``).
        readonly: open for reading only (e.g. a notebook inspecting a running evaluation).
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.Lock()
        if readonly and not self.path.is_file():
            raise CacheError(f"response cache {self.path} does not exist")
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            uri = f"{self.path.resolve().as_uri()}?mode={'ro' if readonly else 'rwc'}"
            # isolation_level=None: autocommit, every put is its own durable transaction.
            self._conn = sqlite3.connect(
                uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA busy_timeout = 30000")
            if not readonly:
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise CacheError(f"{self.path}: cannot switch to WAL mode (got {mode!r})")
                # NORMAL in WAL mode survives application crashes; only an OS crash can lose
                # the last few commits, never corrupt the file.
                self._conn.execute("PRAGMA synchronous = NORMAL")
            self._check_schema()
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"{self.path} is not a usable SQLite response cache: {exc}") from None

    def _check_schema(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0]
            for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if version == 0 and not tables and not self.readonly:
            self._conn.execute(SCHEMA_SQL)
            self._conn.execute(f"PRAGMA user_version = {CACHE_SCHEMA_VERSION}")
            return
        if version != CACHE_SCHEMA_VERSION or "responses" not in tables:
            raise CacheError(
                f"{self.path} is not a response cache of schema version {CACHE_SCHEMA_VERSION} "
                f"(user_version={version}, tables={sorted(tables)}); move it aside"
            )
        have = [row[1] for row in self._conn.execute("PRAGMA table_info(responses)")]
        missing = [col for col in COLUMNS if col not in have]
        if missing:
            raise CacheError(f"{self.path}: table 'responses' lacks column(s) {missing}")

    def get(self, key: str) -> CachedResponse | None:
        """The stored response for ``key``, or None."""
        cols = [c for c in COLUMNS if c != "request"]
        with self._lock:
            row = self._conn.execute(
                f"SELECT {', '.join(cols)} FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        values = dict(zip(cols, row, strict=True))
        values["usage_estimated"] = bool(values["usage_estimated"])
        return CachedResponse(**values)

    def put(
        self,
        key: str,
        *,
        backbone: str,
        base_url: str,
        model: str,
        request: Mapping[str, Any],
        response: str,
        finish_reason: str | None,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        latency_s: float,
        usage_estimated: bool = False,
    ) -> None:
        """Store (or replace) one response, committed immediately.

        Args:
            key: :func:`cache_key` of the request.
            backbone / base_url / model: where it was answered (URL credentials stripped).
            request: ``{"messages": ..., "params": ...}`` as sent, for inspection.
            response: completion text; ``""`` for an empty completion.
            finish_reason / input_tokens / output_tokens / cached_tokens / latency_s: as
                reported for the successful call.
            usage_estimated: usage was counted offline because the endpoint reported none.
        """
        if self.readonly:
            raise CacheError(f"{self.path} was opened read-only")
        row = (
            key,
            backbone,
            public_base_url(base_url),
            model,
            canonical_json(dict(request)),
            response,
            finish_reason,
            int(input_tokens),
            int(output_tokens),
            int(cached_tokens),
            float(latency_s),
            int(bool(usage_estimated)),
            datetime.now(UTC).isoformat(timespec="milliseconds"),
        )
        placeholders = ", ".join("?" for _ in COLUMNS)
        with self._lock:
            self._conn.execute(
                f"INSERT OR REPLACE INTO responses ({', '.join(COLUMNS)}) VALUES ({placeholders})",
                row,
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone()
        return row is not None

    def to_frame(self, include_request: bool = False) -> pd.DataFrame:
        """All stored responses as a DataFrame (columns as in :data:`COLUMNS`).

        Args:
            include_request: also return the stored request JSON (can be large).
        """
        cols = [c for c in COLUMNS if include_request or c != "request"]
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {', '.join(cols)} FROM responses ORDER BY created_at, key"
            ).fetchall()
        frame = pd.DataFrame(rows, columns=cols)
        frame["usage_estimated"] = frame["usage_estimated"].astype(bool)
        return frame

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r}, readonly={self.readonly})"
