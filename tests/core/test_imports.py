"""clinlib.core.startup: process start-up cost."""

from __future__ import annotations


def test_importing_clinlib_keeps_jsonschema_from_compiling_iri_grammars():
    """altair's jsonschema import skips rfc3987_syntax (~2 s per process)."""
    import subprocess
    import sys

    code = ("import sys, clinlib, altair, jsonschema\n"
            "print('rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is None)\n"
            "print(jsonschema.FormatChecker().conforms('x', 'iri'))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert out == ["True", "True"]  # absent, so no iri check (any string conforms)
