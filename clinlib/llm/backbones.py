"""Backbone registry: the paper's four answering models and any user-added endpoint.

Paper §4 "Backbones": inference is routed through OpenRouter to DeepSeek-V3
(deepseek-chat-v3.1, 64k context), GPT-4o-mini (128k), Claude Haiku 4.5 (200k) and Claude
Sonnet 4.6 (200k); Appendix D prices every cell from input / output / cache-read tokens.

One registry, keyed by name (DESIGN.md principle 4), so an ablation is a one-string change.
Two kinds of backbone live in it:

* ``kind="openai"``: any OpenAI-compatible chat endpoint (OpenRouter, OpenAI, vLLM, Ollama,
  LM Studio), called by :class:`clinlib.llm.client.LLMClient` over HTTP;
* ``kind="offline"``: an in-process ``policy(messages, params) -> str | None`` (the kit's
  reference / eager readers, replay of a published run), answered without any HTTP.

Users add endpoints in a TOML file (``--config PATH`` or ``$CLINTRACE_CONFIG``; see
:mod:`clinlib.llm.config`). API keys are never stored here: a backbone holds only the *name*
of the environment variable that holds its key.

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
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinlib.llm import tokens

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

    from clinlib.llm.client import GenerationParams

BackboneKind = Literal["openai", "offline"]
BACKBONE_KINDS: tuple[str, ...] = ("openai", "offline")


# Model ids of the offline readers (clinlib.readers registers them as "offline/<name>"):
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
        context_window: maximum prompt + completion tokens (None if unknown).
        max_concurrency: requests in flight at once against this backbone.
        approved_for_credentialed: may receive credentialed data (e.g. real MIMIC-IV under
            its DUA): only for endpoints covered by the data-use agreement.
        label: display name in tables and figures (the paper's naming).
        policy: the offline answering function (``kind="offline"`` only).
        source: where the definition came from ("preset", "registered" or a config path).
    """

    name: str
    model: str
    kind: BackboneKind = "openai"
    base_url: str | None = None
    api_key_env: str | None = None
    price_input: float = 0.0
    price_output: float = 0.0
    price_cache_read: float = 0.0
    context_window: int | None = None
    max_concurrency: int = 8
    approved_for_credentialed: bool = False
    label: str | None = None
    policy: OfflinePolicy | None = field(default=None, compare=False, repr=False)
    source: str = "registered"

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
    return problems


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

# The kit's offline readers (clinlib.readers registers them on demand). A user config may not
# define a backbone under these names: `run --backbones reference` would silently call an API.
OFFLINE_READER_NAMES: tuple[str, ...] = ("reference", "eager")
# Fields that make a preset what it is; a config overriding them would replace it silently.
IDENTITY_FIELDS: tuple[str, ...] = ("base_url", "model")

_REGISTRY: dict[str, Backbone] = dict(PRESETS)


def register_backbone(backbone: Backbone, *, replace_existing: bool = False) -> Backbone:
    """Add a backbone to the process-wide registry.

    Args:
        backbone: the definition (e.g. an offline reader with ``kind="offline"``).
        replace_existing: allow overwriting a backbone of the same name.

    Returns:
        The registered backbone.
    """
    if not isinstance(backbone, Backbone):
        raise BackboneError(f"register_backbone expects a Backbone, got {type(backbone).__name__}")
    if backbone.name in _REGISTRY and not replace_existing:
        raise BackboneError(
            f"backbone {backbone.name!r} is already registered "
            f"(from {_REGISTRY[backbone.name].source}); pass replace_existing=True to overwrite"
        )
    _REGISTRY[backbone.name] = backbone
    return backbone


def unregister_backbone(name: str) -> None:
    """Remove a registered backbone (presets are restored, not removed)."""
    if name in PRESETS:
        _REGISTRY[name] = PRESETS[name]
    else:
        _REGISTRY.pop(name, None)


def registry(config: str | Path | None = None) -> dict[str, Backbone]:
    """All backbones: presets, registered ones, then the config file's (which win).

    Args:
        config: TOML path; None uses ``$CLINTRACE_CONFIG`` if set.

    Returns:
        A new dict keyed by name (the process registry is not modified).
    """
    from clinlib.llm.config import load_config  # late: config builds on this module

    merged = dict(_REGISTRY)
    merged.update(load_config(config, base=merged))
    return merged


def get_backbone(name: str, config: str | Path | None = None) -> Backbone:
    """Look a backbone up by name.

    Args:
        name: registry key, e.g. ``"claude-haiku-4.5"``.
        config: TOML path with user backbones; None uses ``$CLINTRACE_CONFIG`` if set.

    Returns:
        The backbone.
    """
    known = registry(config)
    try:
        return known[name]
    except KeyError:
        raise UnknownBackboneError(
            f"unknown backbone {name!r}; known: {', '.join(sorted(known))} "
            "(add one under [backbones.NAME] in the --config / $CLINTRACE_CONFIG file)"
        ) from None


def list_backbones(config: str | Path | None = None) -> pd.DataFrame:
    """One row per known backbone.

    Args:
        config: TOML path; None uses ``$CLINTRACE_CONFIG`` if set.

    Returns:
        DataFrame with columns name, label, kind, model, base_url, api_key_env, price_input,
        price_output, price_cache_read, context_window, max_concurrency,
        approved_for_credentialed, source (sorted by name; no secrets).
    """
    import pandas as pd

    rows = []
    for backbone in registry(config).values():
        row = asdict_shallow(backbone)
        row.pop("policy")
        row["label"] = backbone.display_name
        rows.append(row)
    columns = [f.name for f in fields(Backbone) if f.name != "policy"]
    columns.insert(1, columns.pop(columns.index("label")))
    return pd.DataFrame(rows, columns=columns).sort_values("name", ignore_index=True)


def check_egress(backbone: Backbone, credentialed: bool, allow_unapproved: bool = False) -> None:
    """Refuse to send credentialed data to a backbone not approved for it.

    Offline backbones never send anything and always pass.

    Args:
        backbone: where the prompts would go.
        credentialed: the prompts contain credentialed data (e.g. real MIMIC-IV text).
        allow_unapproved: explicit, logged override by the user.
    """
    if not credentialed or backbone.kind == "offline" or backbone.approved_for_credentialed:
        return
    if allow_unapproved:
        import logging

        logging.getLogger("clinlib.llm").warning(
            "sending credentialed data to %s (%s), which is not approved_for_credentialed, "
            "because the override was given",
            backbone.name,
            backbone.base_url,
        )
        return
    raise EgressRefusedError(
        f"refusing to send credentialed data to backbone {backbone.name!r} ({backbone.base_url}):"
        " it is not approved_for_credentialed. Real MIMIC-IV text may only go to endpoints "
        "covered by its data-use agreement; set approved_for_credentialed = true for such an "
        "endpoint in your config, or pass the explicit override (allow_unapproved)"
    )


def with_overrides(backbone: Backbone, **changes: Any) -> Backbone:
    """A copy of ``backbone`` with some fields changed (validated)."""
    return replace(backbone, **changes)


__all__ = [
    "BACKBONE_KINDS",
    "Backbone",
    "BackboneError",
    "EgressRefusedError",
    "MissingAPIKeyError",
    "OfflineReply",
    "PAPER_BACKBONES",
    "PRESETS",
    "OFFLINE_READER_NAMES",
    "IDENTITY_FIELDS",
    "UnknownBackboneError",
    "check_egress",
    "get_backbone",
    "list_backbones",
    "register_backbone",
    "registry",
    "unregister_backbone",
    "with_overrides",
]
