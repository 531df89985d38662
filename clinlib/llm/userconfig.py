"""User backbones from a TOML config file (paper §4 "Backbones").

The file is named by ``--config PATH`` or ``$CLINTRACE_CONFIG``. Each ``[backbones.NAME]``
table defines an OpenAI-compatible endpoint, or overrides fields of a backbone that already
exists (e.g. a preset's prices). Replacing a built-in is refused: a table named like an offline
reader (``reference``, ``eager``), or one changing a paper preset's ``base_url`` / ``model``.
The local preset ``local-smollm2`` may be pointed elsewhere (e.g. a vLLM server on a GPU);
moved off this machine it loses ``approved_for_credentialed`` and ``local`` unless the table
sets them. ``local = true`` declares an endpoint the user serves (a 900 s timeout, its model
checked against ``/v1/models`` before a run, "local: $0"); it is never inferred from a
loopback address or a price of 0::

    [backbones.my-vllm]
    base_url = "http://localhost:8000/v1"
    model = "Qwen/Qwen3-8B"
    local = true                  # served by you: long timeout, model checked before a run
    api_key_env = "MY_VLLM_KEY"   # name of the variable, never the key
    price_input = 0.0             # USD per million tokens
    price_output = 0.0
    price_cache_read = 0.0
    batch_price_input = 0.0       # optional: batch API prices (default: half the above)
    context_window = 32768
    max_concurrency = 16
    approved_for_credentialed = false

Other top-level tables are left to the rest of the kit. Unknown keys, wrong types and
anything that looks like a literal API key are refused with an error naming the file, the
backbone and the key (the secret itself is never echoed).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clinlib.llm.presets import (
    IDENTITY_FIELDS,
    LOCAL_PRESETS,
    LOOPBACK_HOSTS,
    OFFLINE_READER_NAMES,
    PRESETS,
    url_host,
)
from clinlib.llm.types import (
    ENV_VAR_NAME,
    Backbone,
    BackboneError,
    asdict_shallow,
    validate_backbone_fields,
)

CONFIG_ENV = "CLINTRACE_CONFIG"

# Keys a [backbones.NAME] table may set (kind/policy are code-only: offline policies are
# Python callables, registered by the kit).
ALLOWED_KEYS: frozenset[str] = frozenset(
    {
        "base_url",
        "model",
        "api_key_env",
        "price_input",
        "price_output",
        "price_cache_read",
        "batch_price_input",
        "batch_price_output",
        "batch_price_cache_read",
        "context_window",
        "max_concurrency",
        "approved_for_credentialed",
        "label",
        "local",
        "reasoning",
    }
)
REQUIRED_NEW_KEYS: tuple[str, ...] = ("base_url", "model")

# Key names that can only mean "the secret itself is in this file".
SECRET_KEY_NAME = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|passwd|authorization|bearer|credential)s?$",
    re.IGNORECASE,
)
# Value shapes of common provider keys (OpenAI/OpenRouter sk-, Anthropic sk-ant-, Groq gsk_,
# HF hf_, Google AIza, xAI xai-), and long unbroken alphanumerics (model ids have separators).
SECRET_VALUE = re.compile(
    r"^(sk-|sk_|gsk_|hf_|xai-|AIza|Bearer\s)[A-Za-z0-9_\-.]{8,}$|^[A-Za-z0-9]{32,}$"
)


class LLMConfigError(BackboneError):
    """The backbone config file is missing, unreadable or invalid."""


def resolve_config_path(config: str | Path | None = None) -> Path | None:
    """The config file to use: ``config``, else ``$CLINTRACE_CONFIG``, else None."""
    chosen = config if config is not None else os.environ.get(CONFIG_ENV) or None
    return Path(chosen).expanduser() if chosen else None


def _looks_secret(value: Any) -> bool:
    return isinstance(value, str) and bool(SECRET_VALUE.match(value.strip()))


def _entry_problems(name: str, entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, problem) pairs for one [backbones.NAME] table, before building a Backbone."""
    problems: list[tuple[str, str]] = []
    for key, value in entry.items():
        if key != "api_key_env" and SECRET_KEY_NAME.search(key):
            problems.append(
                (
                    key,
                    "looks like a literal API key; keys are never read from files: remove it, "
                    "export the key in an environment variable and set api_key_env = "
                    '"THAT_VARIABLE"',
                )
            )
        elif key not in ALLOWED_KEYS:
            problems.append((key, f"unknown key; allowed: {', '.join(sorted(ALLOWED_KEYS))}"))
        elif key == "api_key_env" and (
            not isinstance(value, str) or not ENV_VAR_NAME.match(value) or _looks_secret(value)
        ):
            problems.append(
                (
                    key,
                    "must be the NAME of an environment variable (letters, digits and _, "
                    "e.g. OPENROUTER_API_KEY), never the key itself",
                )
            )
        elif key != "api_key_env" and _looks_secret(value):
            problems.append((key, "value looks like a literal API key; keys belong in the env"))
    return problems


def _replaces_builtin(name: str, entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, problem) pairs of a table that would silently replace a built-in preset: a
    changed base_url / model (its prices may be overridden)."""
    preset = PRESETS.get(name)
    if preset is None:
        return []
    return [
        (
            key,
            f"would replace built-in preset {name!r} ({getattr(preset, key)!r}); define your "
            "endpoint under a new name",
        )
        for key in IDENTITY_FIELDS
        if key in entry and entry[key] != getattr(preset, key)
    ]


def _leaves_machine(name: str, entry: Mapping[str, Any]) -> bool:
    """A local preset's table moves it to a non-loopback host."""
    return (
        name in LOCAL_PRESETS
        and "base_url" in entry
        and url_host(str(entry["base_url"])) not in LOOPBACK_HOSTS
    )


def load_config(
    config: str | Path | None = None, base: Mapping[str, Backbone] | None = None
) -> dict[str, Backbone]:
    """Backbones defined in the config file.

    Args:
        config: TOML path; None uses ``$CLINTRACE_CONFIG``, and no file means no backbones.
        base: existing backbones; a table whose name is here overrides only the given fields.

    Returns:
        Backbones keyed by name, each with ``source`` set to the file path.
    """
    path = resolve_config_path(config)
    if path is None:
        return {}
    if not path.is_file():
        origin = "--config" if config is not None else f"${CONFIG_ENV}"
        raise LLMConfigError(f"config file {path} (from {origin}) does not exist")
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise LLMConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise LLMConfigError(f"{path}: cannot read: {exc}") from None

    tables = data.get("backbones", {})
    if not isinstance(tables, dict):
        raise LLMConfigError(f"{path}: 'backbones' must be a table of [backbones.NAME] tables")
    base = base or {}
    out: dict[str, Backbone] = {}
    for name, entry in tables.items():
        where = f"{path}: [backbones.{name}]"
        if not isinstance(entry, dict):
            raise LLMConfigError(f"{where} must be a table, got {type(entry).__name__}")
        if name in OFFLINE_READER_NAMES:
            raise LLMConfigError(
                f"{where}: {name!r} is the kit's built-in offline reader; "
                "define your endpoint under another name"
            )
        problems = _entry_problems(name, entry) + _replaces_builtin(name, entry)
        if problems:
            detail = "; ".join(f"key {key!r}: {msg}" for key, msg in problems)
            raise LLMConfigError(f"{where}: {detail}")
        if name in base:
            values = asdict_shallow(base[name])
        else:
            missing = [key for key in REQUIRED_NEW_KEYS if key not in entry]
            if missing:
                raise LLMConfigError(
                    f"{where}: missing required key(s) {', '.join(missing)} "
                    "(a new backbone needs at least base_url and model)"
                )
            values = {"name": name, "kind": "openai"}
        values.update(entry)
        if _leaves_machine(name, entry):
            # The local preset is approved only because nothing leaves the machine; pointed at
            # another host (e.g. a vLLM server on a GPU box) it must be approved, and declared
            # local, explicitly.
            for key in ("approved_for_credentialed", "local"):
                values[key] = entry.get(key, False)
        values["source"] = str(path)
        field_problems = validate_backbone_fields(values)
        if field_problems:
            raise LLMConfigError(f"{where}: " + "; ".join(field_problems))
        out[name] = Backbone(**values)
    return out
