"""Backbone registry, TOML config and egress checks (clinlib.llm.backbones / .config)."""

from __future__ import annotations

import pytest

from clinlib.llm import backbones as bbs
from clinlib.llm.backbones import (
    check_egress,
    get_backbone,
    list_backbones,
    register_backbone,
    unregister_backbone,
)
from clinlib.llm.presets import PRESETS
from clinlib.llm.types import (
    NO_KEY_PLACEHOLDER,
    Backbone,
    BackboneError,
    EgressRefusedError,
    MissingAPIKeyError,
    UnknownBackboneError,
)
from clinlib.llm.userconfig import CONFIG_ENV, LLMConfigError, load_config

ISSUE_EXAMPLE = """
[backbones.my-vllm]
base_url = "http://localhost:8000/v1"
model = "Qwen/Qwen3-8B"
api_key_env = "MY_VLLM_KEY"   # name of the variable, never the key
price_input = 0.0             # USD per million tokens
price_output = 0.0
price_cache_read = 0.0
context_window = 32768
max_concurrency = 16
approved_for_credentialed = false

[other_section]
anything = "belongs to another part of the kit"
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def write(tmp_path, text, name="clintrace.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_paper_presets_route_through_openrouter():
    assert list(PRESETS) == [
        "deepseek-chat-v3.1",
        "gpt-4o-mini",
        "claude-haiku-4.5",
        "claude-sonnet-4.6",
    ]
    windows = {name: b.context_window for name, b in PRESETS.items()}
    assert windows == {
        "deepseek-chat-v3.1": 65_536,
        "gpt-4o-mini": 128_000,
        "claude-haiku-4.5": 200_000,
        "claude-sonnet-4.6": 200_000,
    }
    for backbone in PRESETS.values():
        assert backbone.base_url == "https://openrouter.ai/api/v1"
        assert backbone.api_key_env == "OPENROUTER_API_KEY"
        assert backbone.model.split("/")[1] == backbone.name
        assert not backbone.approved_for_credentialed
        assert backbone.price_cache_read < backbone.price_input < backbone.price_output


def test_get_backbone_unknown_names_the_known_ones():
    with pytest.raises(UnknownBackboneError, match="unknown backbone 'gpt-5-ultra'.*gpt-4o-mini"):
        get_backbone("gpt-5-ultra")
    with pytest.raises(ValueError):  # a BackboneError is a ValueError
        get_backbone("nope")


def test_register_and_unregister():
    offline = Backbone(name="echo-reader", model="echo", kind="offline", policy=lambda m, p: "x")
    try:
        register_backbone(offline)
        assert get_backbone("echo-reader") is offline
        with pytest.raises(BackboneError, match="already registered"):
            register_backbone(offline)
        register_backbone(offline, replace_existing=True)
    finally:
        unregister_backbone("echo-reader")
    with pytest.raises(UnknownBackboneError):
        get_backbone("echo-reader")


def test_offline_backbone_needs_a_policy_and_openai_needs_a_url():
    with pytest.raises(BackboneError, match="needs a policy"):
        Backbone(name="r", model="r", kind="offline")
    with pytest.raises(BackboneError, match="base_url must be an http"):
        Backbone(name="x", model="m", base_url="localhost:8000")
    with pytest.raises(BackboneError, match="must not embed credentials"):
        Backbone(name="x", model="m", base_url="https://user:pw@example.org/v1")
    with pytest.raises(BackboneError, match="kind must be one of"):
        Backbone(name="x", model="m", kind="grpc", base_url="http://h/v1")


def test_list_backbones_frame():
    frame = list_backbones()
    assert {"name", "label", "kind", "model", "base_url", "api_key_env"} <= set(frame.columns)
    assert "policy" not in frame.columns
    assert set(PRESETS) <= set(frame["name"])
    row = frame.set_index("name").loc["claude-haiku-4.5"]
    assert row["label"] == "Haiku 4.5" and row["price_output"] == 5.0
    assert row["batch_price_output"] == 2.5  # half the live price unless set


def test_issue_example_config(tmp_path):
    path = write(tmp_path, ISSUE_EXAMPLE)
    loaded = load_config(path)
    assert list(loaded) == ["my-vllm"]
    bb = loaded["my-vllm"]
    assert (bb.base_url, bb.model, bb.api_key_env) == (
        "http://localhost:8000/v1",
        "Qwen/Qwen3-8B",
        "MY_VLLM_KEY",
    )
    assert (bb.max_concurrency, bb.context_window, bb.kind) == (16, 32768, "openai")
    assert bb.source == str(path)
    assert get_backbone("my-vllm", config=path) == bb
    assert "my-vllm" in set(list_backbones(path)["name"])


def test_config_from_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(CONFIG_ENV, str(write(tmp_path, ISSUE_EXAMPLE)))
    assert get_backbone("my-vllm").model == "Qwen/Qwen3-8B"


def test_config_overrides_fields_of_a_preset(tmp_path):
    path = write(
        tmp_path, '[backbones."claude-haiku-4.5"]\nprice_input = 0.8\nprice_output = 4.0\n'
    )
    haiku = get_backbone("claude-haiku-4.5", config=path)
    assert (haiku.price_input, haiku.price_output) == (0.8, 4.0)
    assert haiku.model == "anthropic/claude-haiku-4.5"  # inherited
    assert PRESETS["claude-haiku-4.5"].price_input == 1.0  # preset untouched


def test_unknown_key_names_file_backbone_and_key(tmp_path):
    path = write(tmp_path, ISSUE_EXAMPLE.replace("max_concurrency", "max_concurency"))
    with pytest.raises(LLMConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message and "[backbones.my-vllm]" in message
    assert "'max_concurency'" in message and "unknown key" in message


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('api_key = "sk-or-v1-0123456789abcdef0123456789"', "api_key"),
        ('token = "abc"', "token"),
        ('openai_api_key = "whatever"', "openai_api_key"),
    ],
)
def test_literal_key_is_refused_without_echoing_it(tmp_path, line, key):
    path = write(
        tmp_path, ISSUE_EXAMPLE.replace("price_output = 0.0", f"price_output = 0.0\n{line}")
    )
    with pytest.raises(LLMConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert f"'{key}'" in message and "literal API key" in message and str(path) in message
    assert line.split('"')[1] not in message


def test_key_pasted_into_api_key_env_is_refused(tmp_path):
    secret = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
    path = write(tmp_path, ISSUE_EXAMPLE.replace('"MY_VLLM_KEY"', f'"{secret}"'))
    with pytest.raises(LLMConfigError, match="'api_key_env'.*NAME of an environment variable") as e:
        load_config(path)
    assert secret not in str(e.value)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("max_concurrency = 16", "max_concurrency = 0", "max_concurrency must be a positive"),
        ("price_input = 0.0", 'price_input = "free"', "price_input must be a number"),
        ("approved_for_credentialed = false", 'approved_for_credentialed = "no"', "true or false"),
        ('base_url = "http://localhost:8000/v1"', 'base_url = "localhost"', "base_url must be"),
        ('model = "Qwen/Qwen3-8B"\n', "", "missing required key"),
    ],
)
def test_bad_values_are_reported(tmp_path, old, new, expected):
    path = write(tmp_path, ISSUE_EXAMPLE.replace(old, new))
    with pytest.raises(LLMConfigError, match=expected) as err:
        load_config(path)
    assert "[backbones.my-vllm]" in str(err.value)


def test_missing_and_malformed_files(tmp_path, monkeypatch):
    with pytest.raises(LLMConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "gone.toml"))
    with pytest.raises(LLMConfigError, match=r"gone.toml \(from \$CLINTRACE_CONFIG\)"):
        get_backbone("gpt-4o-mini")
    monkeypatch.delenv(CONFIG_ENV)
    bad = write(tmp_path, "[backbones.x\nmodel = 1", "bad.toml")
    with pytest.raises(LLMConfigError, match="bad.toml: not valid TOML"):
        load_config(bad)
    flat = write(tmp_path, 'backbones = "x"', "flat.toml")
    with pytest.raises(LLMConfigError, match="must be a table"):
        load_config(flat)
    assert load_config(None) == {}


def test_api_key_comes_from_the_environment(monkeypatch):
    bb = Backbone(name="k", model="m", base_url="http://h/v1", api_key_env="CLINTRACE_TEST_KEY")
    monkeypatch.delenv("CLINTRACE_TEST_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match=r"\$CLINTRACE_TEST_KEY"):
        bb.api_key()
    monkeypatch.setenv("CLINTRACE_TEST_KEY", "  sk-abc  ")
    assert bb.api_key() == "sk-abc"
    keyless = Backbone(name="k", model="m", base_url="http://h/v1")
    assert keyless.api_key() == NO_KEY_PLACEHOLDER


def test_egress_rules(caplog):
    openrouter = PRESETS["gpt-4o-mini"]
    with pytest.raises(EgressRefusedError, match="'gpt-4o-mini'.*not approved_for_credentialed"):
        check_egress(openrouter, credentialed=True, allow_unapproved=False)
    check_egress(openrouter, credentialed=False, allow_unapproved=False)  # synthetic data
    with caplog.at_level("WARNING", logger="clinlib.llm"):
        check_egress(openrouter, credentialed=True, allow_unapproved=True)
    assert "override" in caplog.text
    approved = bbs.with_overrides(openrouter, approved_for_credentialed=True)
    check_egress(approved, credentialed=True, allow_unapproved=False)
    offline = Backbone(name="r", model="r", kind="offline", policy=lambda m, p: "")
    check_egress(offline, credentialed=True, allow_unapproved=False)
