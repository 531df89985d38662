"""Backbone registry: the paper's four answering models and any user-added endpoint.

Paper §4 "Backbones": inference is routed through OpenRouter to DeepSeek-V3
(deepseek-chat-v3.1, 64k context), GPT-4o-mini (128k), Claude Haiku 4.5 (200k) and Claude
Sonnet 4.6 (200k); Appendix D prices every cell from input / output / cache-read tokens.

One registry, keyed by name (docs/design.md principle 4), so an ablation is a one-string change.
Two kinds of backbone live in it:

* ``kind="openai"``: any OpenAI-compatible chat endpoint (OpenRouter, OpenAI, vLLM, Ollama,
  LM Studio), called by :class:`clinlib.llm.client.LLMClient` over HTTP;
* ``kind="offline"``: an in-process ``policy(messages, params) -> str | None`` (the kit's
  reference / eager readers, replay of a published run), answered without any HTTP.

Users add endpoints in a TOML file (``--config PATH`` or ``$CLINTRACE_CONFIG``; see
:mod:`clinlib.llm.userconfig`). API keys are never stored here: a backbone holds only the *name*
of the environment variable that holds its key.

Presets live in :mod:`clinlib.llm.presets`, types in :mod:`clinlib.llm.types`.
"""

from __future__ import annotations

import logging
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from clinlib.llm.presets import LOCAL_PRESETS, PRESETS
from clinlib.llm.types import (
    Backbone,
    BackboneError,
    EgressRefusedError,
    UnknownBackboneError,
    asdict_shallow,
)
from clinlib.llm.userconfig import load_config

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

_REGISTRY: dict[str, Backbone] = {**PRESETS, **LOCAL_PRESETS}


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


def register_policy_backbone(name: str, policy: Any, *, model: str, label: str) -> Backbone:
    """Register an in-process answering policy (an offline reader or a rule-based writer: not
    a language model) as backbone ``name``, kind "offline", price 0; idempotent: the same
    policy already registered under ``name`` is returned as it is."""
    existing = _REGISTRY.get(name)
    if existing is not None and existing.policy is policy:
        return existing
    bb = Backbone(name=name, model=model, kind="offline", label=label, policy=policy)
    return register_backbone(bb, replace_existing=True)


def unregister_backbone(name: str) -> None:
    """Remove a registered backbone (presets are restored, not removed)."""
    builtin = PRESETS.get(name) or LOCAL_PRESETS.get(name)
    if builtin is not None:
        _REGISTRY[name] = builtin
    else:
        _REGISTRY.pop(name, None)


def registry(config: str | Path | None = None) -> dict[str, Backbone]:
    """All backbones: presets, registered ones, then the config file's (which win).

    Args:
        config: TOML path; None uses ``$CLINTRACE_CONFIG`` if set.

    Returns:
        A new dict keyed by name (the process registry is not modified).
    """
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
        price_output, price_cache_read, batch_price_* (effective), context_window, max_concurrency,
        approved_for_credentialed, source (sorted by name; no secrets).
    """
    rows = []
    for backbone in registry(config).values():
        row = asdict_shallow(backbone)
        row.pop("policy")
        row["label"] = backbone.display_name
        prices = backbone.batch_prices  # the effective ones (default: discounted live prices)
        row.update(
            batch_price_input=prices.price_input,
            batch_price_output=prices.price_output,
            batch_price_cache_read=prices.price_cache_read,
        )
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
    "check_egress",
    "get_backbone",
    "list_backbones",
    "register_backbone",
    "registry",
    "unregister_backbone",
    "with_overrides",
]
