"""A local fake of Anthropic's Message Batches API, for tests (the real API is never
called by the kit's tests).

``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``; ``x-api-key`` and
``anthropic-version`` required), ``GET /v1/messages/batches/{id}`` (``processing_status``
``in_progress`` until polled ``polls_to_finish`` times, then ``ended`` with
``request_counts`` and ``results_url``) and ``GET .../results`` (JSONL, one result per
request). Each request is answered by the chat server's own deterministic ``answer`` and
prompt cache (:class:`~clinlib.llm.testserver.FaultServer`), reported the way Anthropic does
(``input_tokens`` exclude the cache reads, ``cache_read_input_tokens``), so a batch answer and
a live answer of the same request are the same text.

Per-request faults (``line_faults``: custom_id -> kind): ``errored`` (invalid_request_error),
``overloaded`` (overloaded_error), ``expired``, ``canceled``, ``malformed`` (the line cut in
half). ``create_faults``: statuses the next creates answer with (e.g. ``[429, 500]``); a 500
is answered AFTER the batch was made (a lost reply), a 429 before.

From a shell: ``python -m clinlib.llm.anthropic_fake [--reader reference] [--port N]`` prints
the base URL (point an Anthropic backbone's ``base_url`` at it, ``batch = true``) and serves
until stdin closes or Ctrl-C; the batches it holds live in memory only, so a restart forgets
them (a pending ``--batch`` job then cannot be polled: drop ``--batch`` or forget the job).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from clinlib.llm.testserver import FaultServer, serve_cli

ANTHROPIC_LINE_FAULTS: tuple[str, ...] = (
    "errored",
    "overloaded",
    "expired",
    "canceled",
    "malformed",
)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


class AnthropicBatchServer(FaultServer):
    """:class:`FaultServer` plus a fake Message Batches API (module docstring)."""

    def __init__(
        self,
        *,
        line_faults: Mapping[str, str] | None = None,
        create_faults: Sequence[int] = (),
        polls_to_finish: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        bad = sorted(set((line_faults or {}).values()) - set(ANTHROPIC_LINE_FAULTS))
        if bad or polls_to_finish < 1:
            raise ValueError(f"unknown line fault(s) {bad} or polls_to_finish < 1")
        self.line_faults = dict(line_faults or {})
        self.create_faults = list(create_faults)
        self.polls_to_finish = polls_to_finish
        self.batches: dict[str, dict[str, Any]] = {}
        self.requests_of: dict[str, list[dict[str, Any]]] = {}
        self.results: dict[str, bytes] = {}
        self.polls: dict[str, int] = {}
        self.api_keys: list[str] = []

    def _route(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes] | None:
        parts = path.split("?", 1)[0].rstrip("/").split("/")
        if "messages" not in parts or parts[parts.index("messages") + 1 :][:1] != ["batches"]:
            return None
        rest = parts[parts.index("messages") + 2 :]
        if not headers.get("x-api-key") or not headers.get("anthropic-version"):
            return 401, self._anthropic_error(
                "authentication_error", "x-api-key and anthropic-version headers are required"
            )
        self.api_keys.append(headers["x-api-key"])
        if method == "POST" and not rest:
            return self._create(body)
        if not rest or rest[0] not in self.batches:
            return 404, self._anthropic_error("not_found_error", "no such batch")
        if method == "GET" and len(rest) == 1:
            return 200, _json(self._advance(rest[0]))
        if method == "GET" and rest[1:] == ["results"] and rest[0] in self.results:
            return 200, self.results[rest[0]]
        return None

    @staticmethod
    def _anthropic_error(kind: str, message: str) -> bytes:
        return _json({"type": "error", "error": {"type": kind, "message": message}})

    def _create(self, body: bytes) -> tuple[int, bytes]:
        status = self.create_faults.pop(0) if self.create_faults else None
        if status == 429:
            return 429, self._anthropic_error("rate_limit_error", "injected 429")
        try:
            reqs = json.loads(body)["requests"]
            ids = [str(r["custom_id"]) for r in reqs]
            ok = all(
                isinstance(r["params"]["messages"], list)
                and r["params"]["max_tokens"] > 0
                and not any(m.get("role") == "system" for m in r["params"]["messages"])
                for r in reqs
            ) and len(set(ids)) == len(ids)
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            return 400, self._anthropic_error("invalid_request_error", "bad requests list")
        batch_id = f"msgbatch_{len(self.batches) + 1:04d}"
        self.batches[batch_id] = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(reqs),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "results_url": None,
            "created_at": "2026-01-01T00:00:00Z",
        }
        self.requests_of[batch_id], self.polls[batch_id] = reqs, 0
        if status is not None:
            return status, self._anthropic_error("api_error", f"injected {status} after create")
        return 200, _json(self.batches[batch_id])

    def _advance(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        self.polls[batch_id] += 1
        if (
            batch["processing_status"] == "in_progress"
            and self.polls[batch_id] >= self.polls_to_finish
        ):
            self._run(batch)
        return batch

    def _run(self, batch: dict[str, Any]) -> None:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        lines = []
        for req in self.requests_of[batch["id"]]:
            cid, kind = req["custom_id"], self.line_faults.get(req["custom_id"])
            if kind in ("errored", "overloaded"):
                etype = "invalid_request_error" if kind == "errored" else "overloaded_error"
                result = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": etype, "message": f"injected {etype}"},
                    },
                }
                counts["errored"] += 1
            elif kind in ("expired", "canceled"):
                result = {"type": kind}
                counts[kind] += 1
            else:
                result = {"type": "succeeded", "message": self._message(req["params"])}
                counts["succeeded"] += 1
            row = _json({"custom_id": cid, "result": result})
            lines.append(row[: len(row) // 2] if kind == "malformed" else row)
        base = f"{self.base_url.rstrip('/')}/messages/batches/{batch['id']}/results"
        self.results[batch["id"]] = b"\n".join(lines) + b"\n"
        batch.update(
            processing_status="ended",
            request_counts=counts,
            results_url=base,
            ended_at="2026-01-01T00:01:00Z",
        )

    def _message(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The chat server's answer to the same request, as an Anthropic message."""
        messages = (
            [{"role": "system", "content": params["system"]}] if params.get("system") else []
        ) + list(params["messages"])
        body = {
            "model": params["model"],
            "messages": messages,
            "max_tokens": params["max_tokens"],
            **{k: params[k] for k in ("temperature", "top_p") if k in params},
        }
        done = json.loads(self._completion(body, messages, str(params["model"]), empty=False))
        usage, choice = done["usage"], done["choices"][0]
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        return {
            "id": done["id"],
            "type": "message",
            "role": "assistant",
            "model": params["model"],
            "content": [{"type": "text", "text": choice["message"]["content"]}],
            "stop_reason": "max_tokens" if choice["finish_reason"] == "length" else "end_turn",
            "usage": {
                "input_tokens": usage["prompt_tokens"] - cached,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0,
                "output_tokens": usage["completion_tokens"],
            },
        }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_cli(AnthropicBatchServer))
