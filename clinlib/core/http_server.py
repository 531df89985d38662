"""A small HTTP/1.1 server on asyncio streams in a background thread: the one engine under the
kit's loopback servers (the fault-injecting chat server :mod:`clinlib.llm.testserver` and its
batch APIs, the reference memory service :mod:`clinlib.strategies.memory_server`).

It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies). Each response goes out in
one write on a TCP_NODELAY socket, which avoids the ~40 ms Nagle / delayed-ACK stalls of
``http.server``. A subclass answers requests in :meth:`LoopbackServer.respond`; the engine
binds the port (a free one by default), runs the event loop in a daemon thread (or in the
caller's thread, :meth:`LoopbackServer.serve_forever`) and, on stop, aborts open connections.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any


@dataclass(frozen=True)
class Request:
    """One HTTP request as read off the wire (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


def reason_phrase(status: int) -> str:
    """The standard reason phrase of a status ("Status" for one HTTP does not define)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def http_response(
    status: int,
    body: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    content_length: int | None = None,
    close: bool = False,
) -> bytes:
    """Head and body of a JSON response as one byte string (so one write sends both);
    ``content_length`` may announce more than ``body`` holds (a reply cut off on purpose)."""
    lines = [
        f"HTTP/1.1 {status} {reason_phrase(status)}",
        "Content-Type: application/json",
        f"Content-Length: {len(body) if content_length is None else content_length}",
        f"Connection: {'close' if close else 'keep-alive'}",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection, or None when the peer closed it or sent garbage."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    request_line, *lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3:
        return None
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    try:
        body = await reader.readexactly(length) if length else b""
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return Request(parts[0], parts[1], headers, body)


class LoopbackServer:
    """The serving engine (module docstring); a subclass overrides :meth:`respond`.

    Args:
        host / port: where to listen (default: loopback, a free port).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.bind_port = host, int(port)
        self.port: int | None = None
        self.n_connections = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._done = threading.Event()  # set when the loop has closed the server
        self._startup_error: BaseException | None = None
        self._conn_tasks: set[asyncio.Task[Any]] = set()

    @property
    def server_name(self) -> str:
        return type(self).__name__

    # -- lifecycle ---------------------------------------------------------------------------
    def listen(self) -> None:
        """Bind the port now (if not yet bound): a taken port raises ``OSError`` at once."""
        if self._sock is None:
            self._sock = socket.create_server((self.host, self.bind_port))
            self.port = self._sock.getsockname()[1]

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start serving in a daemon thread; returns once the loop accepts connections."""
        if self._thread is not None:
            raise RuntimeError(f"{self.server_name} already started")
        self.listen()
        self._ready.clear()
        self._thread = threading.Thread(
            target=self._thread_main, name=self.server_name, daemon=True
        )
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise RuntimeError(f"{self.server_name} failed to start: {self._startup_error}")
        if not self._ready.is_set():
            raise RuntimeError(f"{self.server_name} did not start within 10 s")

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` (from another thread) or Ctrl-C."""
        self.listen()
        asyncio.run(self._serve())

    def stop(self) -> None:
        """Stop serving, abort open connections, join the thread and free the port."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
            self._done.wait(10)  # the loop may run in another thread (serve_forever)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.port = None

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._startup_error = exc
            self._ready.set()

    def loop_started(self) -> None:
        """Called in the event loop before the first connection (make loop objects here)."""

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._done.clear()
        self.loop_started()
        server = await asyncio.start_server(self._handle, sock=self._sock)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._conn_tasks):
                task.cancel()
            if self._conn_tasks:
                await asyncio.gather(*self._conn_tasks, return_exceptions=True)
            await server.wait_closed()
            self._loop = None
            self._done.set()

    # -- HTTP --------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        self.n_connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while (request := await read_request(reader)) is not None:
                keep_alive = await self.respond(request, reader, writer)
                if not keep_alive or request.headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            self._conn_tasks.discard(task)
            writer.close()

    @staticmethod
    def send(writer: asyncio.StreamWriter, status: int, body: bytes, **head: Any) -> None:
        """Queue one response; ``head``: :func:`http_response`'s keyword options (headers,
        content_length, close). The caller drains."""
        writer.write(http_response(status, body, **head))

    async def respond(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; True keeps the connection open, False closes it (e.g. a
        disconnect fault). The default answers 404."""
        self.send(writer, 404, b'{"error": "no route"}')
        await writer.drain()
        return True
