"""The first local test: the real server answers one completion (issue 24: on a machine whose
CPU advertises AMX without granting it, llama.cpp died with SIGILL on exactly this request,
and every test after it failed with connection errors).

The server was started by the session fixture with llama.cpp's extra buffer types decided by
the AMX probe and, where AMX runs, llama.cpp's own check (issue 33's CI: a VM that granted AMX
and ran the probe's tile load died with SIGSEGV in llama.cpp's AMX path all the same); its log,
in the profile's build folder, says which and why.
"""

from __future__ import annotations

import pytest

from clinlib.llm import amx, local_server
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
    assert (server.amx.advertised, server.amx.granted) == (status.advertised, status.granted)
    assert server.use_extra_bufts is amx.extra_bufts_allowed(server.amx)
    # llama.cpp's own check ran exactly when AMX did (issue 33: granted AMX, SIGSEGV anyway)
    assert (server.amx.llama is not None) is status.usable
    first_line = server.log_path.read_text().splitlines()[0]
    assert first_line == f"clintrace: {server.describe_extra_bufts()}"
    state = "on" if server.use_extra_bufts else "off (no weight repacking, no AMX buffers)"
    assert f"clintrace: llama.cpp extra buffer types {state}" in server.log_path.read_text()


def test_llama_cpps_check_runs_the_real_model_when_it_can(local_server_running):
    # The check must be able to say yes: with the extra buffer types off (which works on every
    # CPU) the same script evaluates its prompt, so a "no" is llama.cpp's, not the script's.
    server = local_server_running
    off = ("import llama_cpp.llama_cpp as lib\nfrom clinlib.llm import llama_serve\n"
           "llama_serve.disable_extra_bufts(lib)\n")  # fmt: skip
    ran = amx.llama_runs(local_server.model_path(), server.n_ctx, server.threads,
                         script=off + amx.CANARY_SCRIPT)  # fmt: skip
    assert ran == (True, "")
