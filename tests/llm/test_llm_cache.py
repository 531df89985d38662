"""SQLite (WAL) response cache (clinlib.llm.response_cache; docs/design.md principle 6)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

from clinlib.llm.response_cache import CacheError, ResponseCache, cache_key, public_base_url

MSGS = [{"role": "system", "content": "You are a clinician."}, {"role": "user", "content": "K?"}]
URL = "https://openrouter.ai/api/v1"


def put(cache, key, text="4.1 mEq/L", **overrides):
    fields = dict(
        backbone="gpt-4o-mini",
        base_url=URL,
        model="openai/gpt-4o-mini",
        request={"messages": MSGS, "params": {"temperature": 0}},
        response=text,
        finish_reason="stop",
        input_tokens=30,
        output_tokens=5,
        cached_tokens=0,
        latency_s=0.25,
    )
    fields.update(overrides)
    cache.put(key, **fields)


def test_roundtrip_and_wal_mode(tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    with ResponseCache(path) as cache:
        key = cache_key(URL, "openai/gpt-4o-mini", MSGS, {"temperature": 0})
        assert cache.get(key) is None and len(cache) == 0
        put(cache, key, cached_tokens=12)
        hit = cache.get(key)
        assert (hit.response, hit.finish_reason, hit.input_tokens, hit.cached_tokens) == (
            "4.1 mEq/L",
            "stop",
            30,
            12,
        )
        assert key in cache and len(cache) == 1
        put(cache, "empty", text="")  # D1: empty completions are stored as such
        assert cache.get("empty").response == ""
        frame = cache.to_frame()
        assert list(frame["key"]) == [key, "empty"] and "request" not in frame.columns
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_key_depends_on_endpoint_model_messages_and_params():
    base = cache_key(URL, "m", MSGS, {"temperature": 0, "max_tokens": 60})
    assert len(base) == 64
    # Same request, different dict order / trailing slash / embedded credentials: same key.
    reordered = [{"content": m["content"], "role": m["role"]} for m in MSGS]
    assert cache_key(URL + "/", "m", reordered, {"max_tokens": 60, "temperature": 0}) == base
    assert cache_key("https://u:p@openrouter.ai/api/v1", "m", MSGS, {"temperature": 0, "max_tokens": 60}) == base  # fmt: skip
    changed = [
        cache_key("http://localhost:8000/v1", "m", MSGS, {"temperature": 0, "max_tokens": 60}),
        cache_key(URL, "m2", MSGS, {"temperature": 0, "max_tokens": 60}),
        cache_key(URL, "m", MSGS[:1], {"temperature": 0, "max_tokens": 60}),
        cache_key(URL, "m", MSGS, {"temperature": 0, "max_tokens": 80}),
        cache_key(URL, "m", MSGS, {"temperature": 0.7, "max_tokens": 60}),
    ]
    assert len({base, *changed}) == 6


def test_public_base_url_strips_credentials():
    assert (
        public_base_url("HTTPS://bob:secret@Example.org:8443/v1/") == "https://example.org:8443/v1"
    )
    assert "secret" not in public_base_url("http://bob:secret@[::1]:8000/v1")


def test_concurrent_reader_while_writing(tmp_path):
    """A reader open while another connection writes sees every committed row, complete, and
    never sees rows vanish. The overlap is forced, not hoped for: the writer stops at each of
    CHECKPOINTS until the reader (open since before the first write) has counted exactly the
    rows committed so far; between checkpoints both run freely."""
    path = tmp_path / "cache.sqlite"
    writer = ResponseCache(path)
    reader = ResponseCache(path, readonly=True)  # opened before anything is written
    n, every = 300, 50
    checkpoints = list(range(every, n + 1, every))
    at_checkpoint = threading.Barrier(2, timeout=60)  # generous: only a deadlock trips it
    seen: list[int] = []
    exact: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    finished = threading.Event()

    def write_all():
        try:
            for i in range(n):
                put(writer, f"k{i}", text=f"answer {i}")
                if i + 1 in checkpoints:
                    at_checkpoint.wait()  # the reader may count now
                    at_checkpoint.wait()  # ... and has counted
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            at_checkpoint.abort()
        finally:
            finished.set()

    def observe() -> int:
        count = len(reader)
        seen.append(count)
        if count:  # every visible row is complete (committed atomically)
            assert reader.get(f"k{count - 1}").response == f"answer {count - 1}"
        return count

    def read_all():
        try:
            for mark in checkpoints:
                at_checkpoint.wait()
                exact.append((mark, observe()))
                at_checkpoint.wait()
                if mark < n:
                    observe()  # racing the writer's next rows: any count, never fewer
            finished.wait(60)
            observe()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            at_checkpoint.abort()

    threads = [threading.Thread(target=write_all), threading.Thread(target=read_all)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    reader.close()
    writer.close()
    assert not errors, errors
    assert exact == [(m, m) for m in checkpoints]  # the open reader saw each commit point
    assert seen == sorted(seen)  # monotonic: readers never see rows vanish
    assert seen[-1] == n


def test_survives_a_crash_mid_run(tmp_path):
    """A writer killed without closing keeps every committed response; the file is sound."""
    path = tmp_path / "cache.sqlite"
    script = textwrap.dedent(
        f"""
        import os
        from clinlib.llm.response_cache import ResponseCache
        cache = ResponseCache({str(path)!r})
        for i in range(40):
            cache.put(f"k{{i}}", backbone="b", base_url="http://h/v1", model="m",
                      request={{"messages": []}}, response=f"r{{i}}", finish_reason="stop",
                      input_tokens=1, output_tokens=1, cached_tokens=0, latency_s=0.1)
        os._exit(9)  # no close, no checkpoint: simulates a crash
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    with ResponseCache(path) as cache:
        assert len(cache) == 40
        assert cache.get("k39").response == "r39"
        assert cache._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_not_a_cache_file_is_a_clear_error(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(CacheError, match="junk.sqlite is not a usable SQLite response cache"):
        ResponseCache(junk)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="other.sqlite is not a response cache of schema"):
        ResponseCache(other)
    with pytest.raises(CacheError, match="does not exist"):
        ResponseCache(tmp_path / "missing.sqlite", readonly=True)


def test_readonly_refuses_writes(tmp_path):
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    with ResponseCache(path, readonly=True) as ro, pytest.raises(CacheError, match="read-only"):
        put(ro, "k")
