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


HEAVY = ("pandas", "numpy", "altair", "pyarrow", "scipy", "duckdb", "openai", "torch",
         "sentence_transformers", "sklearn", "statsmodels", "tiktoken")  # fmt: skip


def _loaded_after(code: str) -> list[str]:
    import subprocess
    import sys

    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_clinlib_stays_light_until_a_name_is_used():
    """``import clinlib`` (every kernel, the CLI, each test process) loads no data or model
    library: its names resolve lazily (PEP 562), and a notebook pays only for what it uses."""
    assert _loaded_after("import clinlib") == []
    # counterexample: touching a name that needs pandas does load it, so the probe can see it
    assert "pandas" in _loaded_after("import clinlib\nclinlib.load")


def test_a_stage_process_loads_no_chart_library():
    """Every pipeline stage runs in its own process (clinlib.cli.schedule) and imports
    clinlib.cli.stages: only `evaluate-longmed` needs the analysis chain that loads altair,
    scipy and sklearn, so it is imported by that command alone."""
    loaded = _loaded_after("import clinlib.cli.stages")
    assert not {"altair", "scipy", "sklearn"} & set(loaded)
    # counterexample: the analysis module the command imports does load them
    assert "altair" in _loaded_after("import clinlib.analysis.longmed")
