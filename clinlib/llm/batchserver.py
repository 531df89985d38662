"""The test server's provider batch API: OpenAI's ``/v1/files`` and ``/v1/batches`` over loopback.

The paper's 200,672 calls (§4, Appendix D) are what a provider's batch API exists for; the
kit's batch mode (:mod:`clinlib.llm.batch`) is tested against this server through the real
``openai`` SDK. A batch "runs" when it is polled: after ``polls_to_finish`` retrieves it moves
``validating`` -> ``in_progress`` -> ``finalizing`` -> a terminal status, answering every
input line with the chat server's own deterministic ``answer`` and usage, so a batch answer
and a live answer of the same request are the same.

Injected failures (:data:`LINE_FAULTS`), chosen per input line by ``line_faults`` (a mapping
custom_id -> kind, or a function ``(batch_index, line_index, custom_id) -> kind | None``):

==============  ==================================================================
``error``       the line goes to the error file with HTTP 400 (invalid request)
``server_error`` the line goes to the error file with HTTP 500
``malformed``   the line's output is cut in half (not JSON)
``missing``     the line appears in neither file
``expired``     the line was not run before the window closed: the batch ends
                ``expired`` and the line is in the error file as ``batch_expired``
==============  ==================================================================

``fail_batches`` makes the first N batches end ``failed`` (validation error, no files);
``lost_creates`` makes the first N creates answer 500 after making the batch.
The server also validates what a real provider validates: the line format, the endpoint,
one model per file and unique custom_ids (a bad file fails the batch, naming the line).
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import json
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from clinlib.llm.batchfiles import BATCH_ENDPOINT, COMPLETION_WINDOW
from clinlib.llm.testserver import FaultServer

LINE_FAULTS: tuple[str, ...] = ("error", "server_error", "malformed", "missing", "expired")
# (batch index in creation order, line index, custom_id) -> fault kind or None.
LineFaultFn = Callable[[int, int, str], "str | None"]


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _jsonl(rows: list[Any]) -> bytes:
    return b"".join(row if isinstance(row, bytes) else _json(row) + b"\n" for row in rows)


def parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a ``multipart/form-data`` body: name -> (filename, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        fields[str(name)] = (part.get_filename(), payload)
    return fields


class BatchServer(FaultServer):
    """:class:`FaultServer` plus OpenAI's files and batches endpoints.

    Args:
        line_faults: per-line failures (see the module docstring).
        fail_batches: the first N batches created end ``failed``.
        polls_to_finish: retrieves of a batch before it is terminal (>= 1; a larger value
            makes a client poll several times).
        lost_creates: the first N creates make the batch but answer 500 (the reply is lost).
        **kwargs: :class:`FaultServer` arguments (``answer``, ``seed``, ...).
    """

    def __init__(
        self,
        *,
        line_faults: Mapping[str, str] | LineFaultFn | None = None,
        fail_batches: int = 0,
        polls_to_finish: int = 1,
        lost_creates: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if polls_to_finish < 1 or fail_batches < 0:
            raise ValueError("polls_to_finish must be >= 1 and fail_batches >= 0")
        if isinstance(line_faults, Mapping):
            bad = sorted(set(line_faults.values()) - set(LINE_FAULTS))
            if bad:
                raise ValueError(f"unknown line fault(s) {bad}; known: {LINE_FAULTS}")
        self.line_faults = line_faults
        self.fail_batches = fail_batches
        self.polls_to_finish = polls_to_finish
        self.lost_creates = lost_creates
        self.files: dict[str, dict[str, Any]] = {}
        self.file_bytes: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_polls: dict[str, int] = {}
        self.lines_run: list[str] = []  # custom_ids answered, in order, over all batches

    # -- routing ---------------------------------------------------------------------------
    def _route(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes] | None:
        parts = path.split("?", 1)[0].rstrip("/").split("/")
        try:
            at = parts.index("v1")
        except ValueError:
            return None
        rest = parts[at + 1 :]
        if rest[:1] == ["files"]:
            return self._files(method, rest[1:], headers, body)
        if rest[:1] == ["batches"]:
            return self._batches(method, rest[1:], body)
        return None

    def _not_found(self, what: str) -> tuple[int, bytes]:
        return 404, self._error_body(404, f"no such {what}", "not_found")

    def _files(
        self, method: str, rest: list[str], headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes] | None:
        if method == "POST" and not rest:
            return self._upload(headers.get("content-type", ""), body)
        if method != "GET" or not rest:
            return None
        if rest[0] not in self.files:
            return self._not_found(f"file {rest[0]}")
        if rest[1:] == ["content"]:
            return 200, self.file_bytes[rest[0]]
        return (200, _json(self.files[rest[0]])) if len(rest) == 1 else None

    def _upload(self, content_type: str, body: bytes) -> tuple[int, bytes]:
        try:
            fields = parse_multipart(content_type, body)
            filename, data = fields["file"]
            purpose = fields["purpose"][1].decode()
        except (KeyError, ValueError, TypeError) as exc:
            return 400, self._error_body(400, f"bad upload: {exc}", "invalid_request_error")
        return 200, _json(self._add_file(data, purpose, filename or "upload.jsonl"))

    def _add_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1:04d}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.file_bytes[file_id] = data
        return self.files[file_id]

    def _batches(self, method: str, rest: list[str], body: bytes) -> tuple[int, bytes] | None:
        if method == "POST" and not rest:
            return self._create(body)
        if method == "GET" and not rest:
            data = sorted(self.batches.values(), key=lambda b: b["id"], reverse=True)
            return 200, _json(
                {
                    "object": "list",
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                }
            )
        if not rest or rest[0] not in self.batches:
            return self._not_found(f"batch {rest[0] if rest else ''}")
        batch = self.batches[rest[0]]
        if method == "GET" and len(rest) == 1:
            self._advance(batch)
            return 200, _json(batch)
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch["status"] in ("validating", "in_progress", "finalizing"):
                batch.update(status="cancelled", cancelled_at=int(time.time()))
            return 200, _json(batch)
        return None

    def _create(self, body: bytes) -> tuple[int, bytes]:
        try:
            params = json.loads(body)
            file_id = params["input_file_id"]
        except (ValueError, KeyError, TypeError) as exc:
            return 400, self._error_body(400, f"bad request: {exc}", "invalid_request_error")
        if file_id not in self.files or self.files[file_id]["purpose"] != "batch":
            return 400, self._error_body(
                400, f"{file_id} is not a batch input file", "invalid_request_error"
            )
        if (
            params.get("endpoint") != BATCH_ENDPOINT
            or params.get("completion_window") != COMPLETION_WINDOW
        ):
            return 400, self._error_body(
                400, "unsupported endpoint or completion_window", "invalid_request_error"
            )
        now = int(time.time())
        batch_id = f"batch_{len(self.batches) + 1:04d}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": BATCH_ENDPOINT,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": COMPLETION_WINDOW,
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "expires_at": now + 86_400,
            "metadata": params.get("metadata"),
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }
        self.batch_polls[batch_id] = 0
        if self.lost_creates > 0:  # created, but the reply is lost: a retry must not duplicate
            self.lost_creates -= 1
            return 500, self._error_body(500, "injected: reply lost after create", "server_error")
        return 200, _json(self.batches[batch_id])

    # -- running a batch -------------------------------------------------------------------
    def _advance(self, batch: dict[str, Any]) -> None:
        """One poll: step towards the end; on the last step the batch is run."""
        if batch["status"] not in ("validating", "in_progress", "finalizing"):
            return
        self.batch_polls[batch["id"]] += 1
        polls = self.batch_polls[batch["id"]]
        if polls < self.polls_to_finish:
            batch["status"] = "in_progress" if polls * 2 < self.polls_to_finish else "finalizing"
            return
        index = sorted(self.batches).index(batch["id"])
        lines, problem = self._parse_input(batch["input_file_id"])
        if problem is None and index < self.fail_batches:
            problem = {
                "code": "invalid_request",
                "message": "injected validation failure",
                "line": 1,
                "param": None,
            }
        if problem is not None:
            batch.update(
                status="failed",
                failed_at=int(time.time()),
                errors={"object": "list", "data": [problem]},
            )
            return
        self._run(batch, index, lines)

    def _parse_input(self, file_id: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The input lines, or the first problem a provider's validation would report."""
        lines: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()
        for n, raw in enumerate(self.file_bytes[file_id].decode().splitlines(), 1):
            try:
                line = json.loads(raw)
                ok = (
                    isinstance(line.get("custom_id"), str)
                    and line.get("method") == "POST"
                    and line.get("url") == BATCH_ENDPOINT
                    and isinstance(line["body"]["messages"], list)
                )
                models.add(str(line["body"]["model"]))
            except (ValueError, KeyError, TypeError, AttributeError):
                ok = False
            if not ok or line["custom_id"] in seen or len(models) > 1:
                why = "duplicate custom_id" if ok and line["custom_id"] in seen else "bad line"
                if ok and len(models) > 1:
                    why = "more than one model in the file"
                return [], {"code": "invalid_request", "message": why, "line": n, "param": None}
            seen.add(line["custom_id"])
            lines.append(line)
        return lines, None

    def _fault(self, index: int, line_index: int, custom_id: str) -> str | None:
        if self.line_faults is None:
            return None
        if callable(self.line_faults):
            kind = self.line_faults(index, line_index, custom_id)
        else:
            kind = self.line_faults.get(custom_id)
        if kind is not None and kind not in LINE_FAULTS:
            raise ValueError(f"line fault {kind!r} unknown; known: {LINE_FAULTS}")
        return kind

    def _run(self, batch: dict[str, Any], index: int, lines: list[dict[str, Any]]) -> None:
        out: list[Any] = []
        errors: list[Any] = []
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            kind = self._fault(index, i, cid)
            row_id = f"batch_req_{batch['id']}_{i}"
            if kind == "missing":
                continue
            if kind == "expired":
                errors.append(
                    {
                        "id": row_id,
                        "custom_id": cid,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed "
                            "before the completion window expired.",
                        },
                    }
                )
                continue
            if kind in ("error", "server_error"):
                status = 400 if kind == "error" else 500
                body = json.loads(self._error_body(status, f"injected {status}", kind))
                errors.append(
                    {
                        "id": row_id,
                        "custom_id": cid,
                        "error": None,
                        "response": {"status_code": status, "body": body},
                    }
                )
                continue
            body = line["body"]
            self.lines_run.append(cid)
            completion = self._completion(
                body, list(body["messages"]), str(body["model"]), empty=False
            )
            row = _json(
                {
                    "id": row_id,
                    "custom_id": cid,
                    "error": None,
                    "response": {
                        "status_code": 200,
                        "request_id": row_id,
                        "body": json.loads(completion),
                    },
                }
            )
            out.append(row[: len(row) // 2] + b"\n" if kind == "malformed" else row + b"\n")
        expired = any(e.get("error") and e["error"]["code"] == "batch_expired" for e in errors)
        now = int(time.time())
        batch.update(
            status="expired" if expired else "completed",
            **({"expired_at": now} if expired else {"completed_at": now}),
            request_counts={"total": len(lines), "completed": len(out), "failed": len(errors)},
            output_file_id=self._add_file(_jsonl(out), "batch_output", "output.jsonl")["id"]
            if out
            else None,
            error_file_id=self._add_file(_jsonl(errors), "batch_output", "errors.jsonl")["id"]
            if errors
            else None,
        )

    @property
    def n_batches(self) -> int:
        """Batches created so far."""
        return len(self.batches)


BATCH_PORT = 8800
TOML_TEMPLATE = """[backbones.{name}]
base_url = "{url}"
model = "echo"          # any id: the test server answers every model
price_input = 0.15      # priced like a provider, so `estimate` shows live vs batch cost
price_output = 0.60"""


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``python -m clinlib.llm.batchserver [--host H] [--port P]``: serve the kit's batch test
    server until Ctrl-C, printing its address and a config table for it.

    Returns:
        The exit status (2 with one line when the address cannot be bound).
    """
    parser = argparse.ArgumentParser(
        prog="python -m clinlib.llm.batchserver",
        description="The kit's loopback provider batch API (files + batches + chat "
        "completions), for trying `clintrace run --batch` offline.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: loopback)")
    parser.add_argument("--port", type=int, default=BATCH_PORT, help=f"default {BATCH_PORT}")
    parser.add_argument(
        "--polls-to-finish",
        type=int,
        default=1,
        help="retrieves before a batch is done (default 1)",
    )
    parser.add_argument("--name", default="batch-local", help="backbone name in the printed TOML")
    args = parser.parse_args(argv)
    server = BatchServer(host=args.host, port=args.port, polls_to_finish=args.polls_to_finish)
    try:
        server.start()  # binds before the vocabularies load: a taken port fails in a moment
    except (RuntimeError, ValueError, OSError) as exc:
        print(
            f"error: cannot serve on {args.host}:{args.port}: {exc}; pass another --port",
            file=sys.stderr,
        )
        return 2
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it like Ctrl-C
    print(
        f"batch server at {server.base_url}; Ctrl-C stops it. A backbone for it "
        "(--config FILE, then `clintrace run --batch --backbones "
        f"{args.name} --config FILE`):\n"
        + TOML_TEMPLATE.format(name=args.name, url=server.base_url),
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping the batch server", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover - the launcher
    raise SystemExit(main())
