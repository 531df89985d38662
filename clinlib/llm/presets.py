"""The paper's four answering backbones (§4 "Backbones"), priced per Appendix D.

Preset prices (USD per million tokens, OpenRouter pass-through list prices):

================== =========================== ======= ======== ==========
preset             model id                    input   output   cache read
================== =========================== ======= ======== ==========
deepseek-chat-v3.1 deepseek/deepseek-chat-v3.1 0.27    1.10     0.07
gpt-4o-mini        openai/gpt-4o-mini          0.15    0.60     0.075
claude-haiku-4.5   anthropic/claude-haiku-4.5  1.00    5.00     0.10
claude-sonnet-4.6  anthropic/claude-sonnet-4.6 3.00    15.00    0.30
================== =========================== ======= ======== ==========

With these prices the Table 4 token totals reproduce the published Sonnet and DeepSeek cells
to within 1%; the published Haiku cells imply $0.80 / $4.00 (Claude 3.5 Haiku's price) and
the GPT-4o-mini cells a deeper cache discount than OpenAI's list price. Prices change: a user
can override any field of a preset in the config file (``[backbones.claude-haiku-4.5]``
``price_input = 0.8``).
"""

from __future__ import annotations

import os

from clinlib.llm.types import OPENROUTER_BASE_URL, OPENROUTER_KEY_ENV, Backbone


def _openrouter(
    name: str, model: str, label: str, window: int, p_in: float, p_out: float, p_cache: float
) -> Backbone:
    return Backbone(
        name=name,
        model=model,
        base_url=OPENROUTER_BASE_URL,
        api_key_env=OPENROUTER_KEY_ENV,
        price_input=p_in,
        price_output=p_out,
        price_cache_read=p_cache,
        context_window=window,
        max_concurrency=16,
        # OpenRouter is a commercial API outside the MIMIC-IV DUA unless the user says so.
        approved_for_credentialed=False,
        label=label,
        source="preset",
    )


# The paper's four backbones (§4), in the order its tables list them.
PRESETS: dict[str, Backbone] = {
    b.name: b
    for b in (
        _openrouter(
            "deepseek-chat-v3.1",
            "deepseek/deepseek-chat-v3.1",
            "DeepSeek-V3",
            65_536,
            0.27,
            1.10,
            0.07,
        ),
        _openrouter("gpt-4o-mini", "openai/gpt-4o-mini", "GPT-4o-mini", 128_000, 0.15, 0.60, 0.075),
        _openrouter(
            "claude-haiku-4.5",
            "anthropic/claude-haiku-4.5",
            "Haiku 4.5",
            200_000,
            1.00,
            5.00,
            0.10,
        ),
        _openrouter(
            "claude-sonnet-4.6",
            "anthropic/claude-sonnet-4.6",
            "Sonnet 4.6",
            200_000,
            3.00,
            15.00,
            0.30,
        ),
    )
}

PAPER_BACKBONES: tuple[str, ...] = tuple(PRESETS)

# The kit's offline readers (clinlib.eval.readers.policies registers them on demand). A user config may not
# define a backbone under these names: `run --backbones reference` would silently call an API.
OFFLINE_READER_NAMES: tuple[str, ...] = ("reference", "eager")
# Fields that make a preset what it is; a config overriding them would replace it silently.
IDENTITY_FIELDS: tuple[str, ...] = ("base_url", "model")


# -- a real local model, offline (clinlib.llm.local_server) ----------------------------------
LOCAL_PRESET = "local-smollm2"
# The name the server is started under (--model_alias) and the id requests send.
LOCAL_MODEL_ALIAS = "smollm2-135m-instruct"
LOCAL_HOST = "127.0.0.1"
LOCAL_PORT = 8765
LOCAL_N_CTX = 8192  # SmolLM2's training context


def usable_cores() -> int:
    """Cores this process may run on (the local server's threads and concurrency)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# Backbones served on this machine. Price 0: the only cost is local CPU time, so every cost
# column reads $0 for them (tables say "local: $0"); token counts are the server's own
# `usage` (the model's tokenizer), not an OpenAI encoding. Approved for credentialed data
# because nothing leaves the machine (clinlib.llm.userconfig resets that flag, and `local`,
# when a config points the preset at another host); no API key (the server asks for none).
LOCAL_PRESETS: dict[str, Backbone] = {
    LOCAL_PRESET: Backbone(
        name=LOCAL_PRESET,
        model=LOCAL_MODEL_ALIAS,
        base_url=f"http://{LOCAL_HOST}:{LOCAL_PORT}/v1",
        api_key_env=None,
        context_window=LOCAL_N_CTX,
        # llama.cpp answers one request at a time on every core; one more in flight keeps
        # it busy between requests.
        max_concurrency=usable_cores(),
        approved_for_credentialed=True,
        label="SmolLM2-135M (local)",
        source="preset",
        local=True,
    )
}
LOCAL_COST_NOTE = "served locally, not billed; token counts are the server's own"


def url_host(url: str | None) -> str:
    """The host of an ``http(s)://host[:port]/...`` URL (``[::1]`` keeps its brackets)."""
    netloc = (url or "").split("//", 1)[-1].split("/", 1)[0]
    return netloc if netloc.endswith("]") else netloc.rsplit(":", 1)[0]


def is_local(backbone: Backbone) -> bool:
    """A backbone declared local (``Backbone.local``: the kit's local preset, or ``local =
    true`` in the config), never inferred from a loopback address or a price of 0."""
    return backbone.kind == "openai" and backbone.local


LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
