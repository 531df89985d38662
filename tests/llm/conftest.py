"""Fixtures shared by the local-server tests (test_local_server.py, test_local_crash.py)."""

from __future__ import annotations

import pytest

from clinlib.core import config
from clinlib.llm import local_server as ls


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """The extra and the model file 'present' (a dummy file): only the command is real. The
    build folder is a temporary one (the server's log and record go there)."""
    gguf = tmp_path / ls.MODEL_FILE
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(ls, "local_available", lambda: (True, ""))
    monkeypatch.setattr(ls, "model_path", lambda: gguf)
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    yield gguf
    ls.restore_local_preset()
