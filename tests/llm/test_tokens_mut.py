"""clinlib.llm.tokens' counting functions at their edges (issue 33 §3, the `cost` mutation
group): model ids, content parts, the safe block cuts worked out by hand, the memo's
thresholds, registered tokenizers and when count_texts uses threads.

Token counts of short strings are cl100k's (checked in test_llm_tokens.py against the
cookbook): "user", "hello", " world", "bob" are 1 token each, "hello world" 2."""

from __future__ import annotations

import hashlib
import os

import pytest
import tiktoken.load

from clinlib.llm import tokens

CL100K = tokens.get_encoding("cl100k_base")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(path):  # pragma: no cover - only runs if the code regresses
        raise AssertionError(f"tiktoken tried to read {path}")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)


def _key(text: str, name: str = "cl100k_base") -> tuple[str, bytes]:
    """The memo key by hand: encoding name and the 16-byte BLAKE2b of the UTF-8 text."""
    return name, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


# --------------------------------------------------------------------------- model ids
@pytest.mark.parametrize(
    ("model", "base"),
    [
        ("  OpenRouter/OpenAI/GPT-4o-Mini \n", "gpt-4o-mini"),  # stripped, lower, last part
        ("gpt-4", "gpt-4"),
        ("a/b/c", "c"),
    ],
)
def test_base_model(model, base):
    assert tokens._base_model(model) == base


@pytest.mark.parametrize(
    ("model", "encoding", "exact"),
    [
        ("  OpenRouter/OpenAI/GPT-4o-Mini ", "o200k_base", True),
        ("ft:gpt-4o-mini:org::abc", "o200k_base", True),
        ("chatgpt-4o-latest", "o200k_base", True),
        ("gpt-5-nano", "o200k_base", True),
        ("o4-mini", "o200k_base", True),
        ("o1", "o200k_base", True),
        ("gpt-4-turbo", "cl100k_base", True),
        ("GPT-3.5-Turbo", "cl100k_base", True),
        ("azure/gpt-35-turbo", "cl100k_base", True),
        ("ft:gpt-3.5-turbo:org::x", "cl100k_base", True),
        ("olmo-2-7b", "cl100k_base", False),  # an "o" that is not o1 / o3 / o4
        ("meta-llama/llama-3.1-8b", "cl100k_base", False),
    ],
)
def test_encoding_and_exactness_by_prefix(model, encoding, exact):
    assert tokens.encoding_for_model(model) == encoding
    assert tokens.is_exact_tokenizer(model) is exact


class _CharTokenizer:
    """A stand-in 'own tokenizer': one token per character, messages count 100 each."""

    name = "chars"

    def count_text(self, text: str) -> int:
        return len(text)

    def count_messages(self, messages) -> int:
        return 100 * len(messages)


@pytest.fixture
def own_tokenizer(monkeypatch):
    monkeypatch.setattr(tokens, "_TOKENIZER_LOADERS", {})
    tokens.model_tokenizer.cache_clear()
    tokens.register_tokenizer(" Local/My-Model ", _CharTokenizer)
    yield
    tokens.model_tokenizer.cache_clear()


def test_registered_tokenizer_counts_and_is_exact(own_tokenizer):
    assert tokens.is_exact_tokenizer("my-model") is True
    assert tokens.is_exact_tokenizer("other/MY-MODEL") is True
    assert tokens.count_tokens("hello world", "my-model") == 11  # characters, not cl100k's 2
    assert tokens.count_tokens([{"role": "user", "content": "x"}] * 2, "my-model") == 200
    assert tokens.count_texts(["abc", 12345, ""], "my-model") == [3, 5, 0]
    # an unregistered model is still counted with tiktoken
    assert tokens.count_tokens("hello world", "other-model") == 2
    assert tokens.is_exact_tokenizer("other-model") is False


def test_a_loader_that_returns_none_means_approximate(monkeypatch):
    monkeypatch.setattr(tokens, "_TOKENIZER_LOADERS", {})
    tokens.model_tokenizer.cache_clear()
    try:
        tokens.register_tokenizer("my-model", lambda: None)
        assert tokens.is_exact_tokenizer("my-model") is False
        assert tokens.count_tokens("hello world", "my-model") == 2
        assert tokens.count_texts(["hello world"], "my-model") == [2]
    finally:
        tokens.model_tokenizer.cache_clear()


# --------------------------------------------------------------------------- messages
def test_content_text_of_each_kind():
    assert tokens._content_text(None) == ""
    assert tokens._content_text("as is") == "as is"
    parts = [
        {"type": "text", "text": "hello"},
        {"type": "image_url", "image_url": {"url": "data:"}},  # no text: contributes ""
        "a bare string part is not a part",
        {"type": "text", "text": " world"},
        {"type": "text", "text": 7},  # str() of the value
    ]
    assert tokens._content_text(parts) == "hello world7"
    assert tokens._content_text([]) == ""
    with pytest.raises(
        tokens.TokenizerError,
        match=r"^message content must be a string or a list of parts, got 5$",
    ):
        tokens._content_text(5)


def test_message_counting_by_hand():
    # 3 priming + per message 3 + role (1) + content; name + 1; other keys and non-string
    # role / name values count nothing
    assert tokens.count_tokens([], "gpt-4") == 3
    msg = {"role": "user", "content": None, "name": None, "tool_call_id": "call_123"}
    assert tokens.count_tokens([msg], "gpt-4") == 3 + 3 + 1
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}]
    two = [{"role": "user", "content": parts}, {"role": 5, "name": "bob", "content": "hello"}]
    assert tokens.count_tokens(two, "gpt-4") == 3 + (3 + 1 + 2) + (3 + 1 + 1 + 1)
    with pytest.raises(tokens.TokenizerError, match=r"^message 1 is str, expected a dict$"):
        tokens.count_tokens([{"role": "user"}, "hello"], "gpt-4")
    with pytest.raises(tokens.TokenizerError, match="list of parts, got 5"):
        tokens.count_tokens([{"role": "user", "content": 5}], "gpt-4")


# --------------------------------------------------------------------------- block cuts
def test_cut_ok():
    assert tokens._cut_ok("a\nb", 2) is True
    assert tokens._cut_ok("a\n", 2) is False  # end of text: nothing to start
    for after in (" ", "\t", "\n", "/"):
        assert tokens._cut_ok("a\n" + after + "b", 2) is False


def test_next_cut():
    # "\n\n" at 1 is followed by "\n" (no cut at 3); the one at 2 is followed by "b": cut 4
    assert tokens._next_cut("a\n\n\nb", "\n\n", 0) == 4
    assert tokens._next_cut("a\n\nb", "\n\n", 1) == 3  # an occurrence at pos itself counts
    assert tokens._next_cut("a\n\nb", "\n\n", 2) == -1
    assert tokens._next_cut("a\n\n", "\n\n", 0) == -1  # at the end: no cut
    assert tokens._next_cut("a\n\n b\n\nc", "\n\n", 0) == 7
    # the first safe one, not the last
    assert tokens._next_cut("a\n\nb\n\nc", "\n\n", 0) == 3
    assert tokens._next_cut("a\n\n b\n\nc\n\nd", "\n\n", 0) == 7
    assert tokens._next_cut("abc", "\n", 0) == -1


def test_blocks_at_blank_lines():
    assert tokens._blocks("") == [""]
    assert tokens._blocks("a\n\nb") == ["a\n\n", "b"]
    assert tokens._blocks("a\n\nb\n\nc") == ["a\n\n", "b\n\n", "c"]
    assert tokens._blocks("a\n\n b\n\n/c\n\nd") == ["a\n\n b\n\n/c\n\n", "d"]
    assert tokens._blocks("a\n\n\nb") == ["a\n\n\n", "b"]
    assert tokens._blocks("\n\nab") == ["\n\n", "ab"]  # a blank line at the very start


def test_blocks_by_size(monkeypatch):
    # a block ends at the first safe newline that makes it at least _BLOCK_CHARS long
    x = "x" * 1022
    assert tokens._blocks(x + "\n" + "y" * 1000) == [x + "\n" + "y" * 1000]  # 1,023: short
    assert tokens._blocks(x + "x\n" + "y") == [x + "x\n", "y"]  # exactly 1,024
    monkeypatch.setattr(tokens, "_BLOCK_CHARS", 4)
    # "ab\ncd\n" (6 >= 4; "ab\n" is 3), "ef\n\n" (blank line), then "\n " is not safe, so
    # "gh\n ij\n", then the rest
    assert tokens._blocks("ab\ncd\nef\n\ngh\n ij\nkl") == ["ab\ncd\n", "ef\n\n", "gh\n ij\n", "kl"]
    assert tokens._blocks("abc\n/de\nfg") == ["abc\n/de\n", "fg"]  # no cut before "/"


# --------------------------------------------------------------------------- memo
def test_memo_thresholds_and_keys():
    tokens._memo.clear()
    short, edge = "a" * 255, "b" * 256
    assert tokens.count_tokens(short, "gpt-4") == len(CL100K.encode(short))
    assert tokens._memo == {}  # below 256 characters: encoded, not memoised
    n = tokens.count_tokens(edge, "gpt-4")
    assert tokens._memo == {_key(edge): n} and n == len(CL100K.encode(edge))
    # the memo is what later counts read
    tokens._memo[_key(edge)] = 999
    assert tokens.count_tokens(edge, "gpt-4") == 999
    assert tokens.count_texts([edge], "gpt-4", workers=1) == [999]
    tokens._memo.clear()
    # o200k's counts are memoised under its own name
    tokens.count_tokens(edge, "gpt-4o")
    assert list(tokens._memo) == [_key(edge, "o200k_base")]
    tokens._memo.clear()


def test_long_texts_are_counted_by_blocks_from_4096_characters():
    one, two = "a " * 1000 + "\n\n", "b " * 1047  # 2,002 + 2,094 = 4,096 characters
    text = one + two
    assert len(text) == 4096
    tokens._memo.clear()
    n = tokens.count_tokens(text, "gpt-4")
    assert n == len(CL100K.encode(text))
    assert set(tokens._memo) == {_key(text), _key(one), _key(two)}
    assert tokens._memo[_key(one)] == len(CL100K.encode(one))
    assert tokens._memo[_key(two)] == len(CL100K.encode(two))
    tokens._memo.clear()
    shorter = text[:-1]  # 4,095: one block, one entry
    assert tokens.count_tokens(shorter, "gpt-4") == len(CL100K.encode(shorter))
    assert set(tokens._memo) == {_key(shorter)}
    tokens._memo.clear()


def test_memo_clears_when_full(monkeypatch):
    monkeypatch.setattr(tokens, "_MEMO_MAX", 2)
    tokens._memo.clear()
    texts = [c * 300 for c in "pqr"]
    for t in texts[:2]:
        tokens.count_tokens(t, "gpt-4")
    assert set(tokens._memo) == {_key(texts[0]), _key(texts[1])}
    tokens.count_tokens(texts[2], "gpt-4")  # 2 entries (>= _MEMO_MAX): cleared first
    assert set(tokens._memo) == {_key(texts[2])}
    tokens._memo.clear()


def test_lone_surrogates_are_counted():
    # a lone surrogate cannot be UTF-8 encoded strictly; the memo key passes it through
    text = "x\ud800y" * 100
    tokens._memo.clear()
    assert tokens.count_tokens(text, "gpt-4") == len(CL100K.encode(text))
    assert set(tokens._memo) == {_key(text)}
    tokens._memo.clear()


# --------------------------------------------------------------------------- count_texts
class _Pool:
    """A ThreadPoolExecutor stand-in that records its use and maps in this thread."""

    used: list[int] = []

    def __init__(self, n):
        _Pool.used.append(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items, chunksize=1):
        return map(fn, items)


@pytest.mark.parametrize(
    ("workers", "cpus", "n_texts", "pool"),
    [
        (2, 8, 4, [2]),  # 4 texts >= 2 x 2 workers: threads
        (2, 8, 3, []),  # fewer than 2 per worker: serial
        (1, 8, 50, []),  # one worker: serial
        (None, 3, 6, [3]),  # default: the CPU count
        (None, 3, 5, []),
        (None, None, 50, []),  # CPU count unknown: one worker
        (0, 3, 6, [3]),  # 0 workers means the default
    ],
)
def test_count_texts_uses_threads_only_with_two_texts_per_worker(
    monkeypatch, workers, cpus, n_texts, pool
):
    monkeypatch.setattr(tokens, "ThreadPoolExecutor", _Pool)
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    _Pool.used = []
    texts = ["hello world"] * (n_texts - 1) + [123]
    expected = [2] * (n_texts - 1) + [1]  # str(123) is one token
    assert tokens.count_texts(texts, "gpt-4", workers=workers) == expected
    assert _Pool.used == pool
