"""Whether Intel AMX is usable here, decided without trusting a CPU flag alone.

llama.cpp (``libggml-cpu``) built natively on a CPU that advertises AMX packs the model's
weights for AMX tiles through an "extra buffer type" and then runs ``tileloadd``. A virtual
machine can advertise ``amx_tile`` / ``amx_int8`` / ``amx_bf16`` in ``/proc/cpuinfo`` without
granting the AMX tile state: the first completion then dies with SIGILL.
llama.cpp's own guard is the kernel's answer to ``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)``, and it still crashed there, so neither the flag nor that answer is
trusted alone: :func:`amx_runs` asks for the permission *and* executes ``ldtilecfg`` /
``tileloadd`` / ``tilerelease`` in a throwaway child process (a trap kills only the child;
the permission, once granted, cannot be dropped and would otherwise change this process).
A granted tile load is still not enough: on a Xeon VM whose kernel grants AMX and runs the
probe's tile load, llama-cpp-python 0.3.36's AMX path died with SIGSEGV on any prompt of more
than a couple of tokens (a 1-token prompt ran; seen on a CI machine). So :func:`llama_runs` then loads
the model with the extra buffer types in a second throwaway child and evaluates a prompt longer
than one batch. The local server loads with llama.cpp's extra buffer types only when AMX is
advertised, granted, *and* llama.cpp ran that prompt with them (:func:`extra_bufts_allowed`).
"""

from __future__ import annotations

import platform
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
AMX_FLAGS: tuple[str, ...] = ("amx_tile", "amx_int8", "amx_bf16")
# x86-64 Linux: arch_prctl is syscall 158; ARCH_GET_XCOMP_SUPP 0x1021 (the xfeatures the
# kernel supports), ARCH_REQ_XCOMP_PERM 0x1023 (ask for one); XTILEDATA is xfeature 18.
SYS_ARCH_PRCTL = 158
ARCH_GET_XCOMP_SUPP = 0x1021
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
PROBE_TIMEOUT_S = 20.0

# x86-64 machine code of f(cfg, buf), checked against GNU as 2.40 + objdump.
AMX_CODE = (
    "c4e2784907"  # ldtilecfg [rdi]
    "b840000000"  # mov eax, 64 (the row stride)
    "c4e27b4b0406"  # tileloadd tmm0, [rsi + rax*1]
    "c4e27849c0"  # tilerelease
    "c3"  # ret
)

# The probe child, in three parts: exit 0 if the kernel grants AMX tile data and a tile load
# runs, else a reason (exit 1) or the signal that killed it (SIGILL: the instruction trapped).
PROBE_PREAMBLE = """
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
"""
PROBE_PERMISSION = f"""
supp = ctypes.c_uint64(0)
if libc.syscall({SYS_ARCH_PRCTL}, {ARCH_GET_XCOMP_SUPP}, ctypes.byref(supp)) != 0:
    sys.exit("ARCH_GET_XCOMP_SUPP failed: " + os.strerror(ctypes.get_errno()))
if not supp.value >> {XFEATURE_XTILEDATA} & 1:
    sys.exit("the kernel does not support XTILEDATA (xfeatures 0x%x)" % supp.value)
if libc.syscall({SYS_ARCH_PRCTL}, {ARCH_REQ_XCOMP_PERM}, {XFEATURE_XTILEDATA}) != 0:
    sys.exit("ARCH_REQ_XCOMP_PERM(XTILEDATA) refused: " + os.strerror(ctypes.get_errno()))
"""
PROBE_TILE_LOAD = f"""
page = mmap.mmap(-1, mmap.PAGESIZE)
page.write(bytes.fromhex("{AMX_CODE}"))
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
if libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
    sys.exit("mprotect(PROT_EXEC) failed: " + os.strerror(ctypes.get_errno()))
cfg = (ctypes.c_uint8 * 64)()
cfg[0], cfg[16], cfg[48] = 1, 64, 16  # palette 1; tile 0: 64 bytes x 16 rows
tile = (ctypes.c_uint8 * 1024)()
ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(addr)(
    ctypes.addressof(cfg), ctypes.addressof(tile))
"""
PROBE_SCRIPT = PROBE_PREAMBLE + PROBE_PERMISSION + PROBE_TILE_LOAD

# llama.cpp's own check: the server's model, context and threads, default (extra) buffer types,
# a prompt of CANARY_TOKENS (more than the server's 512-token batch: a full batch and a part
# of one) and one decoding step. Exit 0 if it ran; a crash kills only the child.
CANARY_TOKENS = 700
CANARY_TIMEOUT_S = 120.0
CANARY_SCRIPT = """
import sys
from llama_cpp import Llama
model, n_ctx, threads, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = Llama(model, n_ctx=n_ctx, n_threads=threads, verbose=False)
tokens = llm.tokenize(b" creatinine" * n)[: max(2, min(n, n_ctx - 2))]
llm.eval(tokens)
llm.eval(tokens[-1:])
"""


@dataclass(frozen=True)
class AmxStatus:
    """What this machine says about AMX.

    Attributes:
        advertised: the AMX flags /proc/cpuinfo lists (empty: none).
        granted: a probe process got AMX tile state from the kernel and ran a tile load
            (None: not asked, as when nothing is advertised).
        detail: the reason when not granted, or when llama.cpp did not run.
        llama: llama.cpp evaluated a prompt with its extra buffer types in a probe process
            (None: not asked; :func:`llama_runs`).
    """

    advertised: tuple[str, ...]
    granted: bool | None
    detail: str = ""
    llama: bool | None = None

    @property
    def usable(self) -> bool:
        """Advertised and granted: llama.cpp's AMX path can run."""
        return bool(self.advertised) and self.granted is True

    def describe(self) -> str:
        """One line for the server's start message and its log."""
        if not self.advertised:
            return "CPU advertises no AMX"
        flags = "/".join(self.advertised)
        if self.granted and self.llama is False:
            return (
                f"CPU advertises {flags} and a tile load runs, but llama.cpp with its extra "
                f"buffer types does not ({self.detail})"
            )
        if self.granted and self.llama:
            return f"CPU advertises {flags}, a tile load runs and llama.cpp runs with them"
        if self.granted:
            return f"CPU advertises {flags} and a tile load runs"
        return f"CPU advertises {flags} but AMX is not usable ({self.detail or 'not granted'})"


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags of the first ``flags`` line of a /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def read_cpuinfo(path: Path = CPUINFO) -> str:
    """/proc/cpuinfo's text ("" where there is none)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _child(argv: list[str], timeout_s: float, what: str) -> tuple[bool, str]:
    """Run ``python -c argv...`` in a throwaway child: (True, "") on exit 0, else (False,
    the signal that killed it, its last stderr line, or why it did not run)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", *argv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the probe did not run: {exc}"
    if done.returncode == 0:
        return True, ""
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode).name
        return False, f"{what} in a probe process was killed by {sig}"
    why = done.stderr.strip().splitlines()
    return False, why[-1] if why else f"the probe exited with {done.returncode}"


def amx_runs(timeout_s: float = PROBE_TIMEOUT_S, script: str = PROBE_SCRIPT) -> tuple[bool, str]:
    """Ask the kernel for AMX tile state and run a tile load, in a throwaway child.

    Args:
        timeout_s: the child's time limit.
        script: the child's Python (default :data:`PROBE_SCRIPT`).

    Returns:
        (True, "") if both worked, else (False, the reason: the kernel's refusal, or the
        signal the tile instruction raised).
    """
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False, f"no AMX permission call on {sys.platform}/{platform.machine()}"
    return _child([script], timeout_s, "a tile load")


def llama_runs(
    model: Path,
    n_ctx: int,
    threads: int,
    timeout_s: float = CANARY_TIMEOUT_S,
    script: str = CANARY_SCRIPT,
    tokens: int = CANARY_TOKENS,
) -> tuple[bool, str]:
    """Load ``model`` with llama.cpp's extra buffer types (its default) and evaluate a prompt
    of ``tokens`` tokens and one more step, in a throwaway child (:data:`CANARY_SCRIPT`).

    Returns:
        (True, "") if it ran, else (False, the signal that killed it or its last error line).
    """
    argv = [script, str(model), str(n_ctx), str(threads), str(tokens)]
    return _child(argv, timeout_s, f"a {tokens}-token prompt")


def probe(
    cpuinfo: str | None = None,
    runs: Callable[[], tuple[bool, str]] = amx_runs,
) -> AmxStatus:
    """What this machine says about AMX (both parts injectable for tests).

    Args:
        cpuinfo: a /proc/cpuinfo text (default: this machine's).
        runs: the probe (default :func:`amx_runs`), asked only when the CPU advertises AMX.
    """
    flags = cpu_flags(read_cpuinfo() if cpuinfo is None else cpuinfo)
    advertised = tuple(f for f in AMX_FLAGS if f in flags)
    if not advertised:
        return AmxStatus(advertised, None)
    granted, detail = runs()
    return AmxStatus(advertised, granted, detail)


def with_llama(status: AmxStatus, runs: tuple[bool, str]) -> AmxStatus:
    """``status`` with llama.cpp's answer (:func:`llama_runs`) added."""
    ok, why = runs
    return AmxStatus(status.advertised, status.granted, why or status.detail, ok)


def extra_bufts_allowed(status: AmxStatus) -> bool:
    """Load with llama.cpp's extra buffer types (weight repacking, the AMX buffer) only when
    AMX is advertised, a tile load runs and llama.cpp ran a prompt with them: neither a flag
    nor a granted instruction is trusted alone."""
    return status.usable and status.llama is True
