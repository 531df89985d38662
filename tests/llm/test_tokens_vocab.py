"""clinlib.llm.tokens' vocabulary loading and registration (issue 33 §3, the `cost` mutation
group's last functions): the bundled ranks against an independent parse, every error message
exactly, tiktoken's registry filled from nothing, and warm_message_counts' memo entries.

``get_encoding`` is cached per process, so these call ``_bundled_ranks`` directly: through
the cache a wrong parse would never be seen by a process that had already counted tokens."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from tiktoken import registry

from clinlib.llm import tokens

INSTALL = "install `bpe-openai` so token counts work offline"


def _bundled_file(name: str) -> Path:
    [root] = importlib.util.find_spec("bpe_openai").submodule_search_locations
    return Path(root) / "data" / f"{name}.tiktoken.gz"


def _parse_with_base64(path: Path) -> dict[bytes, int]:
    """A second parser: the stock base64 module, line by line (tiktoken's own file format)."""
    out = {}
    for line in gzip.decompress(path.read_bytes()).decode("ascii").splitlines():
        if line.strip():
            token, rank = line.split(" ")
            out[base64.b64decode(token)] = int(rank)
    return out


@pytest.mark.parametrize(
    ("name", "size", "hello", "world"),
    # sizes and ranks as tiktoken's cookbook prints them: "hello world" is [15339, 1917] in
    # cl100k_base and [24912, 2375] in o200k_base
    [("cl100k_base", 100_256, 15339, 1917), ("o200k_base", 199_998, 24912, 2375)],
)
def test_bundled_ranks_equal_an_independent_parse(name, size, hello, world):
    ranks = tokens._bundled_ranks(name)
    assert len(ranks) == size
    assert (ranks[b"hello"], ranks[b" world"]) == (hello, world)
    assert ranks == _parse_with_base64(_bundled_file(name))


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """bpe_openai found at tmp_path (its data/ folder empty until a test writes to it)."""
    (tmp_path / "data").mkdir()
    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: spec)
    return tmp_path


def _write_vocab(root: Path, text: bytes, monkeypatch) -> None:
    (root / "data" / "cl100k_base.tiktoken.gz").write_bytes(gzip.compress(text))
    monkeypatch.setitem(tokens.BUNDLED_HASHES, "cl100k_base", hashlib.sha256(text).hexdigest())


def test_a_small_vocabulary_parses_by_hand(fake_package, monkeypatch):
    # "aGVsbG8=" is base64 of b"hello", "IHdvcmxk" of b" world"; the blank line is skipped
    _write_vocab(fake_package, b"aGVsbG8= 0\n\nIHdvcmxk 7\n", monkeypatch)
    assert tokens._bundled_ranks("cl100k_base") == {b"hello": 0, b" world": 7}


def test_a_changed_file_names_its_digest(fake_package, monkeypatch):
    data = b"aGVsbG8= 0\n"
    (fake_package / "data" / "cl100k_base.tiktoken.gz").write_bytes(gzip.compress(data))
    expected = tokens.BUNDLED_HASHES["cl100k_base"]
    with pytest.raises(tokens.TokenizerError) as info:
        tokens._bundled_ranks("cl100k_base")
    assert str(info.value) == (
        f"bpe_openai/data/cl100k_base.tiktoken.gz has sha256 "
        f"{hashlib.sha256(data).hexdigest()}, tiktoken expects {expected}"
    )


@pytest.mark.parametrize("installed", [True, False], ids=["package-without-file", "no-package"])
def test_a_missing_vocabulary_names_where_it_looked(installed, tmp_path, monkeypatch):
    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)]) if installed else None
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(tokens.TokenizerError) as info:
        tokens._bundled_ranks("o200k_base")
    looked = [str(tmp_path)] if installed else "nowhere"
    assert str(info.value) == (
        f"cannot find bpe_openai/data/o200k_base.tiktoken.gz (looked in {looked}); {INSTALL}"
    )


def test_an_encoding_that_is_not_bundled():
    with pytest.raises(tokens.TokenizerError) as info:
        tokens._bundled_ranks("p50k_base")
    assert str(info.value) == "no bundled vocabulary for encoding 'p50k_base'"


def test_register_fills_tiktokens_registry_from_nothing(monkeypatch):
    for name in tokens.BUNDLED_HASHES:
        monkeypatch.delitem(registry.ENCODINGS, name, raising=False)
    tokens.register_with_tiktoken()
    for name in ("cl100k_base", "o200k_base"):
        assert registry.ENCODINGS[name] is tokens.get_encoding(name)
    # and an encoding already there (another library's) is left alone
    other = object()
    monkeypatch.setitem(registry.ENCODINGS, "cl100k_base", other)
    tokens.register_with_tiktoken()
    assert registry.ENCODINGS["cl100k_base"] is other


# --------------------------------------------------------------------------- warm_message_counts
LONG_A = "The creatinine rose from 1.1 to 1.9 mg/dL over two days. " * 6  # 342 chars: memoised
LONG_B = "Metoprolol 25 mg twice daily was started at discharge. " * 6


@pytest.fixture
def empty_memo(monkeypatch):
    memo: dict = {}
    monkeypatch.setattr(tokens, "_memo", memo)
    return memo


def _key(text: str, name: str) -> tuple[str, bytes]:
    return name, hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def test_warm_message_counts_memoises_every_message_content(empty_memo):
    o200k = tokens.get_encoding("o200k_base")
    messages = [
        [{"role": "system", "content": LONG_A}, "not a message: skipped"],
        [{"role": "user", "content": [{"type": "text", "text": LONG_B}]}],
        [{"role": "user", "content": "short"}],  # under 256 chars: counted, not memoised
    ]
    tokens.warm_message_counts(messages, "gpt-4o-mini")
    assert empty_memo == {
        _key(LONG_A, "o200k_base"): len(o200k.encode(LONG_A)),
        _key(LONG_B, "o200k_base"): len(o200k.encode(LONG_B)),
    }


def test_warm_message_counts_leaves_a_models_own_tokenizer_alone(empty_memo, monkeypatch):
    class Chars:
        name = "chars"

        def count_text(self, text):  # pragma: no cover - must not be called
            raise AssertionError("warm_message_counts counted with the model's own tokenizer")

    monkeypatch.setattr(tokens, "_TOKENIZER_LOADERS", {})
    tokens.model_tokenizer.cache_clear()
    try:
        tokens.register_tokenizer("my-model", Chars)
        tokens.warm_message_counts([[{"role": "user", "content": LONG_A}]], "my-model")
    finally:
        tokens.model_tokenizer.cache_clear()
    assert empty_memo == {}
