"""Offline, exact token counts and cost estimates (paper §4 "Backbones", Appendix D Table 4).

Appendix D prices every (strategy, backbone) cell from input, output and cache-read tokens.
For runs, usage comes from the provider's response; for estimates before a run (and for the
offline readers) the kit counts tokens itself, with no network.

Stock ``tiktoken`` downloads its vocabularies on first use, which fails offline. The
``bpe-openai`` package bundles the exact ``cl100k_base`` / ``o200k_base`` rank files
(``bpe_openai/data/*.tiktoken.gz``). We verify each against the SHA-256 that tiktoken itself
expects and build a real ``tiktoken.Encoding`` from tiktoken's own constructor (so the regex
split pattern and special tokens are tiktoken's, not a copy), handing it the bundled ranks.

Model -> encoding map (:func:`encoding_for_model`; a ``provider/`` prefix such as
``openai/`` is ignored):

========================================================  ============  =======
model prefix                                              encoding      exact?
========================================================  ============  =======
gpt-4o, chatgpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4   o200k_base    yes
gpt-4 (not 4o/4.1/4.5), gpt-3.5-turbo, gpt-35-turbo       cl100k_base   yes
anything else (DeepSeek, Claude, Qwen, Llama, ...)        cl100k_base   no
========================================================  ============  =======

Non-OpenAI models use their own tokenizers, which are not public offline; cl100k_base is an
approximation for them (typically within ~10-20% on English clinical text), flagged by
:func:`is_exact_tokenizer`. A model whose own tokenizer IS available offline registers it
(:func:`register_tokenizer`; the local model's GGUF vocabulary, :mod:`clinlib.llm.local_tokens`)
and is then counted exactly with it, chat template included.

Chat messages are counted with OpenAI's published accounting for current chat models
(openai-cookbook "How to count tokens with tiktoken"): 3 tokens per message, +1 if the
message has a ``name``, the encoded role, content and name, plus 3 tokens priming the reply.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import tiktoken
from tiktoken_ext import openai_public

# SHA-256 of the uncompressed rank files, as pinned in tiktoken_ext/openai_public.py.
BUNDLED_HASHES: dict[str, str] = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

# Ordered: the first matching prefix wins, so "gpt-4o" is tested before "gpt-4".
O200K_PREFIXES: tuple[str, ...] = (
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "ft:gpt-4o",
)
CL100K_EXACT_PREFIXES: tuple[str, ...] = ("gpt-4", "gpt-3.5", "gpt-35", "ft:gpt-4", "ft:gpt-3.5")

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3

_BUILD_LOCK = threading.Lock()


class TokenizerError(ValueError):
    """The bundled vocabulary is missing or differs from the file tiktoken expects."""


def _bundled_ranks(name: str) -> dict[bytes, int]:
    """Parse ``bpe_openai/data/<name>.tiktoken.gz`` after checking its SHA-256."""
    if name not in BUNDLED_HASHES:
        raise TokenizerError(f"no bundled vocabulary for encoding {name!r}")
    # Locate the package without importing it: importing bpe_openai builds its own Rust
    # tokenizers, which we do not need.
    spec = importlib.util.find_spec("bpe_openai")
    roots = list(spec.submodule_search_locations or []) if spec else []
    candidates = [Path(root) / "data" / f"{name}.tiktoken.gz" for root in roots]
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        raise TokenizerError(
            f"cannot find bpe_openai/data/{name}.tiktoken.gz (looked in {roots or 'nowhere'}); "
            "install `bpe-openai` so token counts work offline"
        )
    blob = found.read_bytes()
    data = gzip.decompress(blob)
    digest = hashlib.sha256(data).hexdigest()
    if digest != BUNDLED_HASHES[name]:
        raise TokenizerError(
            f"bpe_openai/data/{name}.tiktoken.gz has sha256 {digest}, "
            f"tiktoken expects {BUNDLED_HASHES[name]}"
        )
    # binascii directly: base64.b64decode is the same call behind a per-token type check,
    # which was ~40% of parsing 200k lines (paid once per process that counts tokens).
    decode = binascii.a2b_base64
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[decode(token)] = int(rank)
    return ranks


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """A real ``tiktoken.Encoding`` built from the bundled ranks, with no network access.

    Args:
        name: ``"cl100k_base"`` or ``"o200k_base"``.

    Returns:
        The encoding (cached per process).
    """
    ranks = _bundled_ranks(name)
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]

    def _offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        # tiktoken's constructor names the file by URL and hash; serve it only if the hash
        # matches the bundled file, so the ranks are provably the ones it would download.
        if expected_hash != BUNDLED_HASHES[name]:
            raise TokenizerError(f"tiktoken expects {expected_hash} for {url}, bundled differs")
        return ranks

    # The constructor looks the loader up as a module global; swap it only while we call it.
    with _BUILD_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _offline_loader
        try:
            spec = constructor()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


def register_with_tiktoken() -> None:
    """Make ``tiktoken.get_encoding("cl100k_base"/"o200k_base")`` work offline.

    Libraries that call tiktoken themselves (e.g. mem0) otherwise try to download. This puts
    the bundled encodings into tiktoken's in-process registry; it writes nothing to disk.
    """
    from tiktoken import registry

    for name in BUNDLED_HASHES:
        registry.ENCODINGS.setdefault(name, get_encoding(name))


def _base_model(model: str) -> str:
    # "openai/gpt-4o-mini" -> "gpt-4o-mini"; OpenRouter ids carry the provider prefix.
    return model.strip().lower().rsplit("/", 1)[-1]


class ModelTokenizer(Protocol):
    """A model's own tokenizer (what its server's ``usage`` counts)."""

    name: str

    def count_text(self, text: str) -> int: ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int: ...


# base model id -> loader of its own tokenizer (None when it cannot be loaded here, e.g. an
# optional package is missing: the model is then approximated like any other).
_TOKENIZER_LOADERS: dict[str, Callable[[], ModelTokenizer | None]] = {}


def register_tokenizer(model: str, loader: Callable[[], ModelTokenizer | None]) -> None:
    """Count ``model``'s tokens with its own tokenizer, loaded on first use by ``loader``."""
    _TOKENIZER_LOADERS[_base_model(model)] = loader
    model_tokenizer.cache_clear()


@cache
def model_tokenizer(model: str) -> ModelTokenizer | None:
    """The registered tokenizer of ``model`` (None: none registered, or not loadable here)."""
    loader = _TOKENIZER_LOADERS.get(_base_model(model))
    return loader() if loader is not None else None


def encoding_for_model(model: str) -> str:
    """Encoding name used to count tokens for ``model`` (see the module table).

    Args:
        model: model id, with or without a ``provider/`` prefix.

    Returns:
        ``"o200k_base"`` or ``"cl100k_base"``.
    """
    base = _base_model(model)
    if base.startswith(O200K_PREFIXES):
        return "o200k_base"
    return "cl100k_base"


def is_exact_tokenizer(model: str) -> bool:
    """True when the count uses the model's real tokenizer: OpenAI models (their encoding) and
    models with a registered tokenizer (:func:`register_tokenizer`)."""
    if model_tokenizer(model) is not None:
        return True
    base = _base_model(model)
    return base.startswith(O200K_PREFIXES) or base.startswith(CL100K_EXACT_PREFIXES)


def _content_text(content: Any) -> str:
    # Content may be a string or a list of parts ({"type": "text", "text": ...}); only text
    # parts carry tokens we can count offline.
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    raise TokenizerError(f"message content must be a string or a list of parts, got {content!r}")


# Counts memoised by (encoding, digest of the text): a harness run counts the same long
# context once per question and reader (a 45k-character full context costs ~6 ms to encode).
# Digests, not texts, are kept, so the memo stays small; it is cleared when it grows past
# _MEMO_MAX entries.
_MEMO_MAX = 500_000
_memo: dict[tuple[str, bytes], int] = {}
_memo_lock = threading.Lock()
_MEMO_MIN_CHARS = 256  # shorter texts are cheaper to encode than to hash

# Long texts are counted block by block. A block ends after a newline whose next character
# starts a pre-token in both encodings' split patterns: not whitespace (which may merge with
# the newline) and not "/" (which o200k's punctuation pre-token may absorb after newlines).
# No pre-token spans such a cut and BPE runs within pre-tokens, so the block counts add up
# exactly (tests compare with tiktoken on adversarial text). Blocks end at blank lines (visit
# boundaries) and otherwise once they reach _BLOCK_CHARS, so a question's prompt re-encodes
# only its own blocks, not the visits, notes or table rows it shares with other prompts.
_BLOCKS_MIN_CHARS = 4096
_BLOCK_CHARS = 1024


def _cut_ok(text: str, j: int) -> bool:
    return j < len(text) and not text[j].isspace() and text[j] != "/"


def _next_cut(text: str, find: str, pos: int) -> int:
    """The first safe cut after an occurrence of ``find`` at or after ``pos`` (-1: none)."""
    i = text.find(find, pos)
    while i != -1 and not _cut_ok(text, i + len(find)):
        i = text.find(find, i + 1)
    return -1 if i == -1 else i + len(find)


def _blocks(text: str) -> list[str]:
    """``text`` cut at safe newlines: after each blank line, and once a block is long."""
    out, start = [], 0
    blank = _next_cut(text, "\n\n", 0)
    while True:
        if blank != -1 and blank <= start:
            blank = _next_cut(text, "\n\n", start - 1)
        size = _next_cut(text, "\n", start + _BLOCK_CHARS - 1)
        cuts = [c for c in (blank, size) if c > start]
        if not cuts:
            break
        cut = min(cuts)
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def _memoised(enc: tiktoken.Encoding, text: str, count: Callable[[], int]) -> int:
    """``count()``, memoised under (encoding, digest of ``text``) within _MEMO_MAX entries."""
    key = (
        enc.name,
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest(),
    )
    n = _memo.get(key)
    if n is None:
        n = count()
        with _memo_lock:
            if len(_memo) >= _MEMO_MAX:
                _memo.clear()
            _memo[key] = n
    return n


def _encode_count(enc: tiktoken.Encoding, text: str) -> int:
    # Special-token strings in clinical text are just text; never raise on them.
    return len(enc.encode(text, disallowed_special=()))


def _count_block(enc: tiktoken.Encoding, text: str) -> int:
    if len(text) < _MEMO_MIN_CHARS:
        return _encode_count(enc, text)
    return _memoised(enc, text, lambda: _encode_count(enc, text))


def _count_text(enc: tiktoken.Encoding, text: str) -> int:
    if len(text) < _BLOCKS_MIN_CHARS:
        return _count_block(enc, text)
    return _memoised(enc, text, lambda: sum(_count_block(enc, b) for b in _blocks(text)))


def count_tokens(text_or_messages: str | Sequence[Mapping[str, Any]], model: str) -> int:
    """Exact (OpenAI) or approximate (other models) token count, offline.

    Args:
        text_or_messages: a string, or chat messages (dicts with role / content / name).
        model: model id choosing the encoding (:func:`encoding_for_model`).

    Returns:
        Number of tokens; for messages, including OpenAI's per-message overhead and the
        3 reply-priming tokens, i.e. what ``usage.prompt_tokens`` reports.
    """
    own = model_tokenizer(model)
    if own is not None:
        if isinstance(text_or_messages, str):
            return own.count_text(text_or_messages)
        return own.count_messages(text_or_messages)
    enc = get_encoding(encoding_for_model(model))
    if isinstance(text_or_messages, str):
        return _count_text(enc, text_or_messages)
    total = TOKENS_REPLY_PRIMING
    for i, message in enumerate(text_or_messages):
        if not isinstance(message, Mapping):
            raise TokenizerError(f"message {i} is {type(message).__name__}, expected a dict")
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "content":
                total += _count_text(enc, _content_text(value))
            elif key in ("role", "name") and isinstance(value, str):
                total += _encode_count(enc, value)
                if key == "name":
                    total += TOKENS_PER_NAME
    return total


def count_texts(texts: Sequence[str], model: str, workers: int | None = None) -> list[int]:
    """Token counts of many texts, encoding the ones not yet memoised on ``workers`` threads
    (tiktoken releases the GIL while it encodes, so threads scale with cores).

    Args:
        texts: strings to count.
        model: model id choosing the encoding.
        workers: threads (default: the machine's CPU count).

    Returns:
        One count per text, equal to ``count_tokens(text, model)``.
    """
    own = model_tokenizer(model)
    if own is not None:
        return [own.count_text(str(t)) for t in texts]
    enc = get_encoding(encoding_for_model(model))
    texts = [str(t) for t in texts]
    n = workers or os.cpu_count() or 1
    if n <= 1 or len(texts) < 2 * n:
        return [_count_text(enc, t) for t in texts]
    # Short texts are counted here: ThreadPoolExecutor.map ignores chunksize, and a future
    # per short text cost 8-12x the encoding itself (14,000 dialogue turns: 1.1 s vs 0.14 s
    # serial). Long texts go to the threads in one batch per thread.
    out = [0] * len(texts)
    long = [i for i, t in enumerate(texts) if len(t) >= _BLOCKS_MIN_CHARS]
    if len(long) < 2 * n:
        long = []
    for i in set(range(len(texts))) - set(long):
        out[i] = _count_text(enc, texts[i])
    batches = [long[k::n] for k in range(n)]
    with ThreadPoolExecutor(n) as pool:
        for batch, counts in zip(
            batches,
            pool.map(lambda b: [_count_text(enc, texts[i]) for i in b], batches),
            strict=True,
        ):
            for i, c in zip(batch, counts, strict=True):
                out[i] = c
    return out


def warm_message_counts(messages: Sequence[Sequence[Mapping[str, Any]]], model: str) -> None:
    """Memoise the token counts of many chat messages' contents in parallel, so that the
    per-request :func:`count_tokens` calls that follow are dictionary look-ups."""
    if model_tokenizer(model) is not None:
        return  # counted whole by the model's own tokenizer: nothing to memoise
    count_texts(
        [
            _content_text(m.get("content"))
            for msgs in messages
            for m in msgs
            if isinstance(m, Mapping)
        ],
        model,
    )


class Prices(Protocol):
    """Anything with per-million-token prices, e.g. a :class:`~clinlib.llm.backbones.Backbone`."""

    price_input: float
    price_output: float
    price_cache_read: float


def estimate_cost(
    prices: Prices, input_tokens: float, output_tokens: float, cached_tokens: float = 0
) -> float:
    """USD cost of one call (or of summed usage) at a backbone's per-million-token prices.

    ``input_tokens`` is the provider's ``prompt_tokens``, which *includes* the cache-read
    tokens (``prompt_tokens_details.cached_tokens``); those are billed at the cache-read price
    instead of the input price (Appendix D's "Cache hit %" is cached / input tokens).

    Args:
        prices: a backbone (or any object with price_input / price_output / price_cache_read).
        input_tokens: prompt tokens, cache reads included.
        output_tokens: completion tokens.
        cached_tokens: prompt tokens served from the provider's prompt cache.

    Returns:
        Cost in USD.
    """
    for label, value in (
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
        ("cached_tokens", cached_tokens),
    ):
        if value < 0:
            raise ValueError(f"{label} must be >= 0, got {value}")
    if cached_tokens > input_tokens:
        raise ValueError(
            f"cached_tokens ({cached_tokens}) cannot exceed input_tokens ({input_tokens}): "
            "prompt_tokens already includes cache reads"
        )
    uncached = input_tokens - cached_tokens
    return (
        uncached * prices.price_input
        + cached_tokens * prices.price_cache_read
        + output_tokens * prices.price_output
    ) / 1_000_000
