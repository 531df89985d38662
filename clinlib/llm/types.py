"""The LLM layer's types and errors (a leaf: every other llm module builds on it).

:class:`Backbone` is one answering model and how to reach it (paper §4 "Backbones");
:class:`GenerationParams` the settings sent with a request (Appendix E.3 output caps).
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from clinlib.llm import tokens

BackboneKind = Literal["openai", "offline"]
BACKBONE_KINDS: tuple[str, ...] = ("openai", "offline")


# Model ids of the offline readers (clinlib.eval.readers.policies registers them as "offline/<name>"):
# answering policies, never prep models.
OFFLINE_READER_MODEL_PREFIX = "offline/"


@dataclass(frozen=True)
class OfflineReply:
    """What an offline policy may return instead of a bare string.

    Attributes:
        text: the answer (``""`` or None is an empty completion).
        finish_reason: as an endpoint would report it.
        input_tokens / output_tokens: usage if the policy knows it; None = count offline.
    """

    text: str | None
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None


# An offline policy answers chat messages in-process, with no HTTP.
PolicyOutput = str | None | OfflineReply
OfflinePolicy = Callable[
    [Sequence[Mapping[str, Any]], "GenerationParams"], "PolicyOutput | Awaitable[PolicyOutput]"
]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"

# Used as the bearer token for endpoints that need none (local vLLM / Ollama / LM Studio);
# the openai SDK refuses to start without some key.
NO_KEY_PLACEHOLDER = "no-key"

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class BackboneError(ValueError):
    """A backbone is unknown, mis-specified, or may not be used as asked."""


class UnknownBackboneError(BackboneError, KeyError):
    """No backbone of that name in the registry or the config file."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class MissingAPIKeyError(BackboneError):
    """The environment variable that should hold a backbone's API key is unset or empty."""


class EgressRefusedError(BackboneError):
    """Credentialed data may not be sent to a backbone not approved for it."""


# Batch price as a share of the live one when a backbone does not set its own: OpenAI's Batch
# API and Anthropic's Message Batches both bill 50% of the live price.
BATCH_DISCOUNT = 0.5
BATCH_PRICE_FIELDS: tuple[str, ...] = (
    "batch_price_input",
    "batch_price_output",
    "batch_price_cache_read",
)


@dataclass(frozen=True)
class BatchPrices:
    """USD per million tokens through a provider's batch API (``tokens.Prices`` shaped)."""

    price_input: float
    price_output: float
    price_cache_read: float


@dataclass(frozen=True)
class Backbone:
    """One answering model and how to reach it.

    Attributes:
        name: registry key, e.g. ``"gpt-4o-mini"``.
        model: model id sent to the endpoint (OpenRouter ids carry a provider prefix).
        kind: ``"openai"`` (HTTP, OpenAI-compatible) or ``"offline"`` (in-process policy).
        base_url: endpoint root ending in ``/v1`` (None for offline backbones).
        api_key_env: name of the environment variable holding the key (never the key);
            None for endpoints that need no key.
        price_input / price_output / price_cache_read: USD per million tokens.
        batch_price_input / batch_price_output / batch_price_cache_read: USD per million
            tokens through the provider's batch API (None: :data:`BATCH_DISCOUNT` times the
            live price; OpenAI's and Anthropic's batch APIs bill half).
        context_window: maximum prompt + completion tokens (None if unknown).
        max_concurrency: requests in flight at once against this backbone.
        approved_for_credentialed: may receive credentialed data (e.g. real MIMIC-IV under
            its DUA): only for endpoints covered by the data-use agreement.
        label: display name in tables and figures (the paper's naming).
        policy: the offline answering function (``kind="offline"`` only).
        source: where the definition came from ("preset", "registered" or a config path).
        local: served by the user's own machine or server, said explicitly (the kit's local
            preset, ``local = true`` in the config): a 900 s timeout (its latency is that
            machine's compute), the served model checked against ``/v1/models`` before a
            run, and a price of 0 reported as "local: $0". Never inferred from the address.
        reasoning: a reasoning ("think") model: population questions send it at the provider's
            default temperature with no answer cap (PopMedQA §4: "'Think' models were run with
            default temperatures and no upper bound on answer length"); ``reasoning = true``.
    """

    name: str
    model: str
    kind: BackboneKind = "openai"
    base_url: str | None = None
    api_key_env: str | None = None
    price_input: float = 0.0
    price_output: float = 0.0
    price_cache_read: float = 0.0
    batch_price_input: float | None = None
    batch_price_output: float | None = None
    batch_price_cache_read: float | None = None
    context_window: int | None = None
    max_concurrency: int = 8
    approved_for_credentialed: bool = False
    label: str | None = None
    policy: OfflinePolicy | None = field(default=None, compare=False, repr=False)
    source: str = "registered"
    local: bool = False
    reasoning: bool = False

    def __post_init__(self) -> None:
        problems = validate_backbone_fields(asdict_shallow(self))
        if problems:
            raise BackboneError(f"backbone {self.name!r}: " + "; ".join(problems))

    @property
    def display_name(self) -> str:
        """The label if set, else the registry name."""
        return self.label or self.name

    def cost(self, input_tokens: float, output_tokens: float, cached_tokens: float = 0) -> float:
        """USD cost of the given usage at this backbone's prices (see tokens.estimate_cost)."""
        return tokens.estimate_cost(self, input_tokens, output_tokens, cached_tokens)

    @property
    def batch_prices(self) -> BatchPrices:
        """The prices billed through the provider's batch API (explicit or discounted)."""
        return BatchPrices(
            *(
                explicit if explicit is not None else BATCH_DISCOUNT * live
                for explicit, live in (
                    (self.batch_price_input, self.price_input),
                    (self.batch_price_output, self.price_output),
                    (self.batch_price_cache_read, self.price_cache_read),
                )
            )
        )

    def batch_cost(
        self, input_tokens: float, output_tokens: float, cached_tokens: float = 0
    ) -> float:
        """USD cost of the given usage at the batch prices (see :attr:`batch_prices`)."""
        return tokens.estimate_cost(self.batch_prices, input_tokens, output_tokens, cached_tokens)

    def api_key(self) -> str:
        """The API key, read from the environment at call time (never stored).

        Returns:
            The key, or a fixed placeholder for endpoints that declare no ``api_key_env``.
        """
        if self.api_key_env is None:
            return NO_KEY_PLACEHOLDER
        value = os.environ.get(self.api_key_env, "").strip()
        if not value:
            raise MissingAPIKeyError(
                f"backbone {self.name!r} reads its API key from ${self.api_key_env}, which is "
                f"unset or empty; export {self.api_key_env}=... (keys are never read from files)"
            )
        return value


def asdict_shallow(backbone: Backbone) -> dict[str, Any]:
    """Field values of a backbone without deep-copying the policy callable."""
    return {f.name: getattr(backbone, f.name) for f in fields(backbone)}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def validate_backbone_fields(values: Mapping[str, Any]) -> list[str]:
    """Problems with a backbone's field values (empty list when valid).

    Shared by the dataclass and the TOML loader so both report the same rules.
    """
    problems: list[str] = []
    kind = values.get("kind", "openai")
    if kind not in BACKBONE_KINDS:
        problems.append(f"kind must be one of {BACKBONE_KINDS}, got {kind!r}")
    name = values.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(f"name must be a non-empty string, got {name!r}")
    model = values.get("model")
    if not isinstance(model, str) or not model.strip():
        problems.append(f"model must be a non-empty string, got {model!r}")
    base_url = values.get("base_url")
    if kind == "openai":
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            problems.append(f"base_url must be an http(s):// URL, got {base_url!r}")
        elif "@" in base_url.split("//", 1)[1].split("/", 1)[0]:
            problems.append("base_url must not embed credentials (user:password@host)")
    elif kind == "offline" and values.get("policy") is None:
        problems.append("an offline backbone needs a policy callable")
    key_env = values.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not ENV_VAR_NAME.match(key_env)):
        problems.append(
            f"api_key_env must name an environment variable (letters, digits, _), not a key; "
            f"got a {type(key_env).__name__} of length {len(str(key_env))}"
        )
    for price in ("price_input", "price_output", "price_cache_read"):
        value = values.get(price, 0.0)
        if not _is_number(value) or value < 0:
            problems.append(
                f"{price} must be a number >= 0 (USD per million tokens), got {value!r}"
            )
    for price in BATCH_PRICE_FIELDS:
        value = values.get(price)
        if value is not None and (not _is_number(value) or value < 0):
            problems.append(
                f"{price} must be a number >= 0 (USD per million tokens) or unset, got {value!r}"
            )
    window = values.get("context_window")
    if window is not None and (
        not isinstance(window, int) or isinstance(window, bool) or window < 1
    ):
        problems.append(f"context_window must be a positive integer, got {window!r}")
    conc = values.get("max_concurrency", 8)
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        problems.append(f"max_concurrency must be a positive integer, got {conc!r}")
    approved = values.get("approved_for_credentialed", False)
    if not isinstance(approved, bool):
        problems.append(f"approved_for_credentialed must be true or false, got {approved!r}")
    for key in ("local", "reasoning"):
        flag = values.get(key, False)
        if not isinstance(flag, bool):
            problems.append(f"{key} must be true or false, got {flag!r}")
    return problems


class InvalidRequestError(ValueError):
    """A chat request is malformed (bad messages, duplicate id, unserialisable params)."""


@dataclass(frozen=True)
class GenerationParams:
    """Generation settings; all of them are part of the cache key.

    Attributes:
        temperature: sampling temperature (the paper answers at 0).
        max_tokens: output cap (Appendix E.3: T1/T2 60, T4/T8 120, T9 80, others 80).
        top_p / seed / stop: passed through when set.
        extra: provider-specific body fields (e.g. OpenRouter ``provider`` routing).
    """

    temperature: float | None = 0.0
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    extra: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The parameters as sent (None dropped; ``extra`` merged into the body)."""
        out: dict[str, Any] = {}
        for name in ("temperature", "max_tokens", "top_p", "seed"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.stop:
            out["stop"] = list(self.stop)
        if self.extra:
            clash = set(self.extra) & {"model", "messages", *out}
            if clash:
                raise InvalidRequestError(f"GenerationParams.extra repeats {sorted(clash)}")
            out.update(self.extra)
        return out
