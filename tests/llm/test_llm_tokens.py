"""Offline token counts and cost estimates (clinlib.llm.tokens; paper Appendix D)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import tiktoken
import tiktoken.load
from tiktoken._educational import SimpleBytePairEncoding

from clinlib.llm import tokens
from clinlib.llm.presets import PRESETS

# openai-cookbook "How to count tokens with tiktoken": example_messages, whose prompt_tokens
# the API reports as 129 for gpt-3.5/gpt-4 (cl100k) and 124 for gpt-4o / gpt-4o-mini (o200k).
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on "
        "opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Any attempt by tiktoken to fetch a vocabulary fails the test."""

    def refuse(path):  # pragma: no cover - only runs if the code regresses
        raise AssertionError(f"tiktoken tried to read {path}")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)


@pytest.mark.parametrize(
    ("text", "cl100k", "o200k"),
    [
        ("hello world", 2, 2),  # [15339, 1917] in cl100k
        ("tiktoken is great!", 6, 6),  # cookbook
        ("antidisestablishmentarianism", 6, 6),  # cookbook compare_encodings
        ("2 + 2 = 4", 7, 7),  # cookbook: "2", " +", " ", "2", " =", " ", "4"
        ("お誕生日おめでとう", 9, 8),  # cookbook compare_encodings
        ("", 0, 0),
    ],
)
def test_known_counts(text, cl100k, o200k):
    assert tokens.count_tokens(text, "gpt-4") == cl100k
    assert tokens.count_tokens(text, "openai/gpt-4o-mini") == o200k


def test_hello_world_token_ids_are_cl100k():
    # The ids themselves, so the ranks (not just the split) are the real cl100k ones.
    assert tokens.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_matches_independent_pure_python_bpe(name):
    """tiktoken's educational pure-Python BPE, fed the same ranks, agrees on clinical text."""
    enc = tokens.get_encoding(name)
    reference = SimpleBytePairEncoding(pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks)
    for text in [
        "Creatinine 1.4 mg/dL on 2138-04-03 (ref 0.5-1.2).",
        "Patient reports chest pain; troponin T <0.01 ng/mL.",
        "Metformin 500 mg PO BID; HbA1c 7.9%.",
    ]:
        assert enc.encode(text) == reference.encode(text, visualise=None)


def test_cookbook_message_counts():
    assert tokens.count_tokens(COOKBOOK_MESSAGES, "gpt-4") == 129
    assert tokens.count_tokens(COOKBOOK_MESSAGES, "gpt-4o-mini") == 124


def test_message_overhead_by_hand():
    # 3 per message + role + content (+ name + 1) + 3 reply priming.
    enc = tokens.get_encoding("cl100k_base")
    msgs = [{"role": "user", "content": "hello world"}]
    assert tokens.count_tokens(msgs, "gpt-4") == 3 + len(enc.encode("user")) + 2 + 3
    named = [{"role": "user", "name": "bob", "content": "hello world"}]
    assert tokens.count_tokens(named, "gpt-4") == 3 + 1 + 1 + 2 + 1 + 3  # user, bob, +1
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]
    assert tokens.count_tokens(parts, "gpt-4") == tokens.count_tokens(msgs, "gpt-4")


def test_special_token_text_is_counted_not_rejected():
    assert tokens.count_tokens("<|endoftext|>", "gpt-4") > 1


@pytest.mark.parametrize(
    ("model", "encoding", "exact"),
    [
        ("gpt-4o-mini", "o200k_base", True),
        ("openai/gpt-4o-mini", "o200k_base", True),
        ("gpt-4.1-nano", "o200k_base", True),
        ("o3-mini", "o200k_base", True),
        ("gpt-4", "cl100k_base", True),
        ("gpt-3.5-turbo", "cl100k_base", True),
        ("deepseek/deepseek-chat-v3.1", "cl100k_base", False),
        ("anthropic/claude-haiku-4.5", "cl100k_base", False),
        ("Qwen/Qwen3-8B", "cl100k_base", False),
    ],
)
def test_model_to_encoding_map(model, encoding, exact):
    assert tokens.encoding_for_model(model) == encoding
    assert tokens.is_exact_tokenizer(model) is exact


def test_register_with_tiktoken_makes_stock_api_work_offline():
    tokens.register_with_tiktoken()
    assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_hash_mismatch_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(tokens.BUNDLED_HASHES, "cl100k_base", "0" * 64)
    with pytest.raises(tokens.TokenizerError, match="cl100k_base.tiktoken.gz has sha256"):
        tokens._bundled_ranks("cl100k_base")


def test_estimate_cost_by_hand():
    haiku = PRESETS["claude-haiku-4.5"]  # $1 in, $5 out, $0.10 cache read
    # 10,000 prompt tokens of which 4,000 cached, 200 output:
    # 6,000 * 1 + 4,000 * 0.1 + 200 * 5 = 6,000 + 400 + 1,000 = 7,400 micro-dollars.
    assert tokens.estimate_cost(haiku, 10_000, 200, 4_000) == pytest.approx(0.0074)
    assert haiku.cost(10_000, 200, 4_000) == pytest.approx(0.0074)
    assert tokens.estimate_cost(haiku, 0, 0) == 0.0
    # exact, not approx (a divisor of 1,000,001 is within pytest.approx's 1e-6): at $2 / $3 /
    # $0.5 per million, 1,000,000 prompt tokens (400,000 cached) and 2,000,000 output cost
    # 600,000 * 2 + 400,000 * 0.5 + 2,000,000 * 3 = 7,400,000 micro-dollars = $7.40
    prices = SimpleNamespace(price_input=2.0, price_output=3.0, price_cache_read=0.5)
    assert tokens.estimate_cost(prices, 1_000_000, 2_000_000, 400_000) == 7.4


def test_estimate_cost_rejects_impossible_usage():
    bb = PRESETS["gpt-4o-mini"]
    with pytest.raises(ValueError, match="cannot exceed input_tokens"):
        tokens.estimate_cost(bb, 10, 5, 11)
    with pytest.raises(ValueError, match="output_tokens must be >= 0"):
        tokens.estimate_cost(bb, 10, -1)
    # each message names its field (a bad row is found by its column)
    with pytest.raises(ValueError, match=r"^input_tokens must be >= 0, got -1$"):
        tokens.estimate_cost(bb, -1, 5)
    with pytest.raises(ValueError, match=r"^cached_tokens must be >= 0, got -2$"):
        tokens.estimate_cost(bb, 10, 5, -2)
    with pytest.raises(
        ValueError,
        match=r"\(11\) cannot exceed input_tokens \(10\): "
        r"prompt_tokens already includes cache reads$",
    ):
        tokens.estimate_cost(bb, 10, 5, 11)


@pytest.mark.parametrize(
    ("backbone", "input_m", "output_k", "cache_hit", "published"),
    [
        # Table 4, full-context rows: Input (M), Output (K), Cache hit %, Cost (USD).
        ("claude-sonnet-4.6", 44.9, 141.4, 0.252, 106.20),
        ("deepseek-chat-v3.1", 36.8, 51.3, 0.041, 9.62),
        ("claude-sonnet-4.6", 6.4, 163.1, 0.139, 19.34),  # last-visit-only
    ],
)
def test_preset_prices_reproduce_table4_cells(backbone, input_m, output_k, cache_hit, published):
    """Cache reads billed at the cache price reproduce the paper's cost to within 1%
    (the table's token totals are rounded to 0.1 M)."""
    n_in = input_m * 1e6
    cost = tokens.estimate_cost(PRESETS[backbone], n_in, output_k * 1e3, n_in * cache_hit)
    assert cost == pytest.approx(published, rel=0.01)


def test_count_texts_matches_count_tokens_with_threads_and_memo():
    from clinlib.llm.tokens import count_texts

    tokens._memo.clear()
    texts = [f"Creatinine {i}.{i} mg/dL on 2150-01-0{i % 9 + 1}. " * (i + 20) for i in range(40)]
    texts += ["short", "", texts[0]]  # below the memo threshold, empty, and a repeat
    for model in ("gpt-4o-mini", "deepseek-chat-v3.1"):
        enc = tokens.get_encoding(tokens.encoding_for_model(model))  # no memo: independent
        expected = [len(enc.encode(t, disallowed_special=())) for t in texts]
        assert count_texts(texts, model, workers=2) == expected
        assert count_texts(texts, model, workers=1) == expected  # now from the memo
        assert [tokens.count_tokens(t, model) for t in texts] == expected


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_block_counting_is_exact_on_adversarial_text(name):
    """Long texts are counted per blank-line block; the sum must equal tiktoken's count of
    the whole text, including where a block boundary meets '/', spaces, punctuation runs,
    digits, apostrophes and special-token strings."""
    import random

    enc = tokens.get_encoding(name)
    pieces = ["\n", "\n\n", "\n\n\n", " ", "  ", "/", ".", ".\n\n/", "\n\n ", "\n\n/x",
              "'s", "'S", "123456", "4.2 mmol/L", "Ünïcödé", "ß", "—", "\t", "\r\n\r\n",
              "<|endoftext|>", "Patient:", "Clinician:", "[LAB-12]", "a", "Visit 3 (2138-05-18)",
              "x/y", "ALLCAPS", "camelCase", "😀"]  # fmt: skip
    rng = random.Random(7)
    for _ in range(40):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(900, 2500)))
        assert len(text) >= tokens._BLOCKS_MIN_CHARS
        tokens._memo.clear()
        assert tokens._count_text(enc, text) == len(enc.encode(text, disallowed_special=()))
        # twice: the second count comes from the memoised blocks
        assert tokens._count_text(enc, text) == len(enc.encode(text, disallowed_special=()))
