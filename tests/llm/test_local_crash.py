"""A local server that dies, and the AMX decision that keeps llama.cpp's from dying (issue 24).

No model and no ``local`` extra needed: a fake server (``CRASHER``) serves ``/v1/models`` like
llama.cpp and kills itself with SIGILL on its first completion, as llama.cpp did on a VM
whose CPU advertises AMX without granting it. The AMX probe is fed an injected /proc/cpuinfo
text and probe result; the one real probe here (a tile load without the kernel's
permission) traps on any x86-64 Linux machine, with AMX or without.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from clinlib.llm import amx, get_backbone, served
from clinlib.llm import llama_serve as launcher
from clinlib.llm import local_server as ls
from clinlib.llm.chat import ChatRequest
from clinlib.llm.client import run_batch
from clinlib.llm.presets import LOCAL_PRESET, LOCAL_PRESETS

REPO = Path(__file__).resolve().parents[2]

# Serves GET /v1/models like llama.cpp; the first POST writes what llama.cpp's log would and
# then the process kills itself with SIGILL (no core file).
CRASHER = textwrap.dedent("""
    import http.server, json, os, resource, signal, sys
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "smollm2-135m-instruct"}]}).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def do_POST(self):
            sys.stderr.write("load_tensors: AMX model buffer size = 61.2 MiB\\n")
            sys.stderr.write("ggml_amx: tileloadd on the first completion\\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGILL)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")

ADVERTISED = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile amx_int8\n"
NOT_ADVERTISED = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n"
REFUSED = (False, "ARCH_REQ_XCOMP_PERM(XTILEDATA) refused: Invalid argument")


def _never() -> tuple[bool, str]:
    raise AssertionError("the AMX probe must not run when the CPU advertises no AMX")


def _no_llama(model, n_ctx, threads) -> tuple[bool, str]:
    raise AssertionError("llama.cpp's check must not run unless AMX runs")


SEGFAULT = (False, "a 700-token prompt in a probe process was killed by SIGSEGV")


# -- the AMX decision --------------------------------------------------------------------------
def test_amx_advertised_but_not_granted_loads_without_extra_buffer_types(fake_model):
    status = amx.probe(cpuinfo=ADVERTISED, runs=lambda: REFUSED)
    assert status.advertised == ("amx_tile", "amx_int8", "amx_bf16")
    assert status.granted is False and not status.usable
    server = ls.LocalServer(port=0, amx_probe=lambda: status, llama_probe=_no_llama)
    assert server.decide_extra_bufts() is False
    cmd = server.command(fake_model)
    assert cmd[:4] == [sys.executable, "-m", "clinlib.llm.llama_serve", "--no-extra-bufts"]
    assert cmd[cmd.index("--model") + 1] == str(fake_model)
    assert server.describe_extra_bufts() == (
        "llama.cpp extra buffer types off (CPU advertises amx_tile/amx_int8/amx_bf16 but AMX "
        "is not usable (ARCH_REQ_XCOMP_PERM(XTILEDATA) refused: Invalid argument))"
    )


def test_the_flag_is_never_trusted_alone():
    granted = amx.probe(cpuinfo=ADVERTISED, runs=lambda: (True, ""))
    # a granted tile load alone is not enough: llama.cpp must have run a prompt with them
    assert granted.usable and granted.llama is None and not amx.extra_bufts_allowed(granted)
    assert amx.extra_bufts_allowed(amx.with_llama(granted, (True, "")))
    crashed = amx.with_llama(granted, SEGFAULT)
    assert crashed.usable and crashed.llama is False and not amx.extra_bufts_allowed(crashed)
    trapped = amx.probe(cpuinfo=ADVERTISED, runs=lambda: (False, "killed by SIGILL"))
    assert not amx.extra_bufts_allowed(trapped)
    absent = amx.probe(cpuinfo=NOT_ADVERTISED, runs=_never)
    assert absent.granted is None and not amx.extra_bufts_allowed(absent)
    assert amx.cpu_flags("model name : x\nflags : a amx_tile b\nflags : c\n") == {
        "a",
        "amx_tile",
        "b",
    }
    assert amx.probe(cpuinfo="", runs=_never).advertised == ()


def test_extra_bufts_on_and_off_override_the_probe(fake_model):
    on = ls.LocalServer(port=0, extra_bufts="on", amx_probe=_never, llama_probe=_no_llama)
    assert on.decide_extra_bufts() and "--no-extra-bufts" not in on.command(fake_model)
    off = ls.LocalServer(port=0, extra_bufts="off", amx_probe=_never, llama_probe=_no_llama)
    assert "--no-extra-bufts" in off.command(fake_model)
    asked = []

    def llama_ran(model, n_ctx, threads):
        asked.append((model, n_ctx, threads))
        return True, ""

    granted = ls.LocalServer(port=0, threads=2, n_ctx=4096, llama_probe=llama_ran,
                             amx_probe=lambda: amx.AmxStatus(("amx_tile",), True))  # fmt: skip
    assert "--no-extra-bufts" not in granted.command(fake_model)
    assert asked == [(fake_model, 4096, 2)]  # the server's own model, context and threads
    assert granted.describe_extra_bufts() == (
        "llama.cpp extra buffer types on (CPU advertises amx_tile, a tile load runs and "
        "llama.cpp runs with them)"
    )
    with pytest.raises(
        ls.LocalModelError, match=r"extra_bufts \(--extra-bufts\) must be one of auto, on, off"
    ):
        ls.LocalServer(extra_bufts="maybe")


def test_amx_that_runs_but_crashes_llama_cpp_loads_without_extra_buffer_types(fake_model):
    # issue 33's CI: a Xeon VM granted AMX and ran the tile load; llama.cpp's AMX path then
    # died with SIGSEGV on the server's first completion
    status = amx.probe(cpuinfo=ADVERTISED, runs=lambda: (True, ""))
    server = ls.LocalServer(port=0, amx_probe=lambda: status, llama_probe=lambda *a: SEGFAULT)
    assert "--no-extra-bufts" in server.command(fake_model)
    assert server.use_extra_bufts is False and server.amx.llama is False
    assert server.describe_extra_bufts() == (
        "llama.cpp extra buffer types off (CPU advertises amx_tile/amx_int8/amx_bf16 and a "
        "tile load runs, but llama.cpp with its extra buffer types does not (a 700-token "
        "prompt in a probe process was killed by SIGSEGV))"
    )


def test_a_segfault_with_extra_buffer_types_on_names_the_way_out(fake_model):
    server = ls.LocalServer(port=0, extra_bufts="on")
    server.use_extra_bufts, server.returncode = True, -signal.SIGSEGV
    line = server.death_report()
    assert line is not None and "died (signal SIGSEGV (Segmentation fault))" in line
    assert line.endswith(
        "; a segfault with llama.cpp's extra buffer types on: restart with "
        "serve_local(extra_bufts='off') / LocalServer(extra_bufts='off')"
    )
    server.use_extra_bufts = False  # off already: nothing to suggest
    assert "restart with" not in (server.death_report() or "")
    server.returncode = 1  # an exit, not a crash
    server.use_extra_bufts = True
    assert "restart with" not in (server.death_report() or "")


def test_a_failing_llama_check_reports_its_signal_or_last_line():
    ok, why = amx._child(["import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], 20,
                         "a 700-token prompt")  # fmt: skip
    assert not ok and why == "a 700-token prompt in a probe process was killed by SIGSEGV"
    ok, why = amx.llama_runs(
        Path("/nonexistent.gguf"), 512, 1, script="import sys; sys.exit('no model ' + sys.argv[1])"
    )
    assert (ok, why) == (False, "no model /nonexistent.gguf")
    assert amx._child(["pass"], 20, "x") == (True, "")


@pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 Linux only"
)
def test_a_tile_load_without_the_kernels_permission_is_caught_in_a_child():
    # Without ARCH_REQ_XCOMP_PERM a tile instruction traps on every x86-64 Linux (#UD without
    # AMX, the kernel's XFD trap with it): the child dies, the parent reports the signal.
    ok, why = amx.amx_runs(script=amx.PROBE_PREAMBLE + amx.PROBE_TILE_LOAD)
    assert not ok and why == "a tile load in a probe process was killed by SIGILL"
    # and this machine's own answer is consistent with its cpuinfo
    status = amx.probe()
    if "amx_tile" not in amx.cpu_flags(amx.read_cpuinfo()):
        assert status.advertised == () and status.granted is None and not status.usable


class _Params(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("use_extra_bufts", ctypes.c_bool)]


class _OldParams(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32)]


def test_the_launcher_turns_the_llama_cpp_field_off_or_refuses():
    def defaults():
        return _Params(n_gpu_layers=0, use_extra_bufts=True)

    lib = types.SimpleNamespace(llama_model_default_params=defaults)
    launcher.disable_extra_bufts(lib)
    params = lib.llama_model_default_params()
    assert params.use_extra_bufts is False and params.n_gpu_layers == 0
    old = types.SimpleNamespace(llama_model_default_params=lambda: _OldParams())
    with pytest.raises(launcher.LauncherError, match="no use_extra_bufts field"):
        launcher.disable_extra_bufts(old)


# -- a server that dies mid-run ------------------------------------------------------------------
def _crasher_command(self, model):
    return [sys.executable, "-c", CRASHER, str(self.port)]


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", [{"role": "user", "content": f"q{i}"}]) for i in range(n)]


def test_a_server_that_dies_mid_run_stops_it_with_one_line(fake_model, monkeypatch, tmp_path):
    monkeypatch.setattr(ls.LocalServer, "command", _crasher_command)
    with ls.LocalServer(port=0, extra_bufts="on", profile="quick") as server:
        t0 = time.monotonic()
        with pytest.raises(served.LocalServerDied) as info:
            run_batch(server.backbone, _requests(4))
        elapsed = time.monotonic() - t0
    log = tmp_path / "build" / "quick" / "local-server" / f"server-{server.port}.log"
    assert str(info.value) == (
        f"the local server of 'local-smollm2' at {server.base_url} died (signal SIGILL "
        f"(Illegal instruction)); its log {log} ends: clintrace: llama.cpp extra buffer types "
        "on (extra_bufts='on') / load_tensors: AMX model buffer size = 61.2 MiB / ggml_amx: "
        "tileloadd on the first completion; an illegal instruction with llama.cpp's extra "
        "buffer types on: restart with serve_local(extra_bufts='off') / "
        "LocalServer(extra_bufts='off')"
    )
    # seven attempts with backoff would take 16-31 s per request; the run stops at once
    assert elapsed < 8, elapsed
    assert server.returncode == -4 and get_backbone(LOCAL_PRESET) == LOCAL_PRESETS[LOCAL_PRESET]


def test_a_dead_record_is_not_followed_and_the_message_says_so(fake_model, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.05)  # exited, not reaped
    assert not served.pid_alive(zombie.pid) and served.pid_alive(os.getpid())
    zombie.wait()
    gone.wait()
    path = served.record_path("quick")
    record = served.ServerRecord(
        base_url="http://127.0.0.1:1/v1", model="smollm2-135m-instruct", pid=gone.pid,
        server_pid=gone.pid, log=str(tmp_path / "x.log"), threads=2, started=0.0,
    )  # fmt: skip
    served.write_record(record, path)
    assert served.live_record(path, ls.models_answer) is None
    assert "is gone (process" in (served.record_death(record) or "")
    bb, note = ls.follow_recorded(LOCAL_PRESETS[LOCAL_PRESET], "quick")
    assert bb == LOCAL_PRESETS[LOCAL_PRESET]
    assert note == f"the record {path} names http://127.0.0.1:1/v1, whose server is gone: ignored"


# `clintrace serve-local` in its own process, over the crasher, in a temporary build folder.
SERVE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from clinlib.core import config
    from clinlib.llm import amx
    from clinlib.llm import local_server as ls
    root = Path(sys.argv[1])
    config.BUILD_DIR = root / "build"
    (root / "m.gguf").write_bytes(b"GGUF")
    ls.local_available = lambda: (True, "")
    ls.model_path = lambda: root / "m.gguf"
    ls.LocalServer.command = lambda self, m: [sys.executable, "-c", sys.argv[2], str(self.port)]
    from clinlib import cli
    cli.app(sys.argv[3:], prog_name="clintrace")
""")


def test_serve_local_records_its_port_runs_follow_it_and_its_death_is_one_line(
    fake_model, tmp_path
):
    port = ls.free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(tmp_path), CRASHER, "serve-local", "--port", str(port),
         "--profile", "quick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        path = served.record_path("quick")  # fake_model points BUILD_DIR at tmp_path/build
        deadline = time.monotonic() + 60
        while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert path.exists(), proc.communicate(timeout=5)
        url = f"http://127.0.0.1:{port}/v1"
        with ls.serve_local(profile="quick") as reused:  # found through the record
            assert reused.base_url == url
        notes = ls.check_local_reachable([LOCAL_PRESET], profile="quick", hints="cli")
        assert notes == [f"local-smollm2: the server started by serve-local at {url}"]
        assert get_backbone(LOCAL_PRESET).base_url == url  # not the preset's 8765
        with pytest.raises(served.LocalServerDied) as info:
            run_batch(LOCAL_PRESET, _requests(2))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        served.unwatch(f"http://127.0.0.1:{port}/v1")
    log = tmp_path / "build" / "quick" / "local-server" / f"server-{port}.log"
    line = (f"the local server of 'local-smollm2' at {url} died (signal SIGILL (Illegal "
            f"instruction)); its log {log} ends: ")  # fmt: skip
    assert str(info.value).startswith(line) and "tileloadd on the first completion" in str(
        info.value
    )
    assert proc.returncode == 1 and err.count("\n") == 1 and err.startswith(f"error: {line}")
    assert f"local-smollm2 at {url}" in out and "Ctrl-C stops it" in out
    assert served.read_record(path).state == "dead"  # a later run is not sent there
