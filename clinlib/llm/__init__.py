"""The LLM layer: backbones, response cache, offline token counts and a resilient client.

Paper §4 "Backbones" and Appendices D-E. Public API::

    from clinlib.llm import get_backbone, LLMClient, ChatRequest, ResponseCache
    bb = get_backbone("gpt-4o-mini")
    results = run_batch(bb, [ChatRequest("q1", [{"role": "user", "content": "..."}])],
                        cache=default_cache_path())

The fault-injecting test server lives in :mod:`clinlib.llm.testserver` (not imported here).
"""

from clinlib.llm.backbones import (
    check_egress,
    get_backbone,
    list_backbones,
    register_backbone,
    register_policy_backbone,
    registry,
    unregister_backbone,
)
from clinlib.llm.chat import RESULT_COLUMNS, ChatRequest, ChatResult, results_frame
from clinlib.llm.client import LLMClient, run_batch
from clinlib.llm.local_tokens import load_local_tokenizer  # registers the local tokenizer
from clinlib.llm.presets import PAPER_BACKBONES, PRESETS
from clinlib.llm.response_cache import CacheError, ResponseCache, cache_key, default_cache_path
from clinlib.llm.tokens import (
    count_tokens,
    encoding_for_model,
    estimate_cost,
    get_encoding,
    is_exact_tokenizer,
    register_with_tiktoken,
)
from clinlib.llm.types import (
    Backbone,
    BackboneError,
    EgressRefusedError,
    GenerationParams,
    InvalidRequestError,
    MissingAPIKeyError,
    OfflineReply,
    UnknownBackboneError,
)
from clinlib.llm.userconfig import CONFIG_ENV, LLMConfigError, load_config

__all__ = [
    "CONFIG_ENV",
    "PAPER_BACKBONES",
    "PRESETS",
    "RESULT_COLUMNS",
    "Backbone",
    "BackboneError",
    "CacheError",
    "ChatRequest",
    "ChatResult",
    "EgressRefusedError",
    "GenerationParams",
    "InvalidRequestError",
    "LLMClient",
    "LLMConfigError",
    "MissingAPIKeyError",
    "OfflineReply",
    "ResponseCache",
    "UnknownBackboneError",
    "cache_key",
    "check_egress",
    "count_tokens",
    "default_cache_path",
    "encoding_for_model",
    "estimate_cost",
    "get_backbone",
    "get_encoding",
    "is_exact_tokenizer",
    "list_backbones",
    "load_local_tokenizer",
    "load_config",
    "register_backbone",
    "register_policy_backbone",
    "register_with_tiktoken",
    "registry",
    "results_frame",
    "run_batch",
    "unregister_backbone",
]
