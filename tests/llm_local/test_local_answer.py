"""The first local test: the real server answers one completion (issue 24: on a machine whose
CPU advertises AMX without granting it, llama.cpp died with SIGILL on exactly this request,
and every test after it failed with connection errors).

The server was started by the session fixture with llama.cpp's extra buffer types decided by
the AMX probe; its log, in the profile's build folder, says which and why.
"""

from __future__ import annotations

import pytest

from clinlib.llm import amx
from clinlib.llm.chat import ChatRequest
from clinlib.llm.client import run_batch
from clinlib.llm.types import GenerationParams

pytestmark = pytest.mark.local


def test_the_server_answers_one_completion(local_server_running):
    server = local_server_running
    request = ChatRequest(
        "first", [{"role": "user", "content": "Say hello."}], GenerationParams(max_tokens=8)
    )
    [result] = run_batch(server.backbone, [request], max_retries=0)
    assert result.error is None, result.error
    assert result.output_tokens > 0 and result.input_tokens > 0 and not result.usage_estimated
    assert server.death_report() is None  # still alive after its first completion
    # the decision the probe made is the one the server was started with, and its log says so
    status = amx.probe()
    assert server.amx == status and server.use_extra_bufts is amx.extra_bufts_allowed(status)
    first_line = server.log_path.read_text().splitlines()[0]
    assert first_line == f"clintrace: {server.describe_extra_bufts()}"
    state = "on" if server.use_extra_bufts else "off (no weight repacking, no AMX buffers)"
    assert f"clintrace: llama.cpp extra buffer types {state}" in server.log_path.read_text()
