"""The local model's own token counts, offline (paper Appendix D: usage as the server counts it).

llama-cpp-python's server reports ``usage`` in the GGUF's vocabulary, over the prompt its
chat template renders. This module loads the same vocabulary (llama.cpp with ``vocab_only``:
no weights, ~0.1 s) and renders the same template the same way, so an estimate made before a
run counts exactly what the run's usage will report (tests/llm_local compares the two), and
no OpenAI encoding stands in for it. Registered with :func:`clinlib.llm.tokens.register_tokenizer`
for the local preset's model id; without the ``local`` extra the model falls back to the
cl100k approximation like any other non-OpenAI model.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clinlib.llm import tokens
from clinlib.llm.local_server import LocalModelError, missing_server_modules, model_path
from clinlib.llm.presets import LOCAL_MODEL_ALIAS

log = logging.getLogger("clinlib.llm")


class GGUFTokenizer:
    """Counts tokens as llama-cpp-python's server does for one GGUF model.

    Args:
        path: the GGUF file.
        name: what prompt-count tables call this tokenizer.
    """

    def __init__(self, path: Path, name: str) -> None:
        import llama_cpp  # optional extra (make install-local)
        from llama_cpp import llama_chat_format

        self.name = name
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            self._llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        # Freed before interpreter teardown: llama.cpp's own finaliser, run after its module
        # globals are gone, prints a TypeError traceback at exit.
        atexit.register(self._llama.close)
        meta = self._llama.metadata
        guessed = llama_chat_format.guess_chat_format_from_gguf_metadata(meta)
        if guessed is not None:  # the server uses its built-in formatter for these
            self._format = getattr(llama_chat_format, "format_" + guessed.replace("-", "_"))
        else:
            model = self._llama._model
            eos, bos = self._llama.token_eos(), self._llama.token_bos()
            self._format = llama_chat_format.Jinja2ChatFormatter(
                template=meta["tokenizer.chat_template"],
                eos_token=model.token_get_text(eos) if eos != -1 else "",
                bos_token=model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos],
            )

    def count_text(self, text: str) -> int:
        """Tokens of a bare text (no chat template, no BOS)."""
        if not text:
            return 0
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Prompt tokens of chat messages: the rendered template, as the server tokenizes it."""
        result = self._format(messages=[dict(m) for m in messages])
        prompt = result.prompt.encode("utf-8")
        return len(self._llama.tokenize(prompt, add_bos=not result.added_special, special=True))


def load_local_tokenizer() -> GGUFTokenizer | None:
    """The local model's tokenizer, or None when the extra or the model file is missing."""
    if missing_server_modules():
        return None
    try:
        return GGUFTokenizer(model_path(), f"gguf:{LOCAL_MODEL_ALIAS}")
    except (LocalModelError, ImportError, OSError, ValueError, KeyError) as exc:
        log.warning("local model tokenizer unavailable (%s); counting with cl100k", exc)
        return None


tokens.register_tokenizer(LOCAL_MODEL_ALIAS, load_local_tokenizer)
