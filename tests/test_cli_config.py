"""`--config` on every command that takes a backbone (docs/guide.md "Your own results, end to
end"): a prep model, judge, writer or answering backbone named only in the user's TOML is found
by `strategies --prep`, `memory-serve --prep` and `export --prep` as by `run`."""

from __future__ import annotations

import typer
from typer.main import get_command
from typer.testing import CliRunner

from clinlib import cli
from clinlib.cli import memory as cli_memory
from clinlib.cli import stages as cli_stages
from clinlib.eval.interop import export as interop_export

# the options whose value is a backbone name (or a list of them)
BACKBONE_PARAMS = {"prep", "backbones_", "backbones", "backbone", "judge", "rewrite", "rescue"}
BACKBONE_PARAMS |= {"paraphrase"}
# serve-local serves the kit's own SmolLM2 (backbone local-smollm2), never a user endpoint
NO_USER_BACKBONE = {"serve-local"}


def missing_config(app: typer.Typer) -> list[str]:
    """Commands with a backbone-valued option but no ``--config``."""
    out = []
    for name, cmd in sorted(get_command(app).commands.items()):
        params = {p.name for p in cmd.params}
        if name not in NO_USER_BACKBONE and params & BACKBONE_PARAMS and "config" not in params:
            out.append(name)
    return out


def test_every_command_that_takes_a_backbone_takes_config():
    assert missing_config(cli.build_app()) == []


def test_the_check_flags_a_command_without_config():
    app = typer.Typer()

    @app.command()
    def build(prep: str = "rule-based") -> None:  # pragma: no cover - never run
        pass

    @app.command()
    def other(seed: int = 0) -> None:  # pragma: no cover - never run
        pass

    assert missing_config(app) == ["build"]


def _toml(tmp_path):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(
        '[backbones.my-prep]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt-4o-mini"\n'
        'api_key_env = "MY_PREP_KEY"\n'
    )
    return cfg


def test_strategies_prep_from_the_config(tmp_path, monkeypatch):
    """Without the file the name is unknown (one line, exit 2); with it, the build gets the
    config's backbone as its prep model."""
    monkeypatch.delenv("CLINTRACE_CONFIG", raising=False)
    monkeypatch.setenv("MY_PREP_KEY", "fake")
    seen = {}

    def fake_build(name, chosen, **kw):
        seen.update(kw, name=name, chosen=chosen)
        raise ValueError("stop here")  # one line: the wiring is what this test checks

    monkeypatch.setattr(cli_stages, "build_all", fake_build)
    args = ["strategies", "--profile", "quick", "--strategies", "mem0", "--prep", "my-prep"]
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 2 and "unknown prep model 'my-prep'" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not seen
    res = CliRunner().invoke(cli.app, [*args, "--config", str(_toml(tmp_path))])
    assert res.exit_code == 2 and res.output.strip() == "error: stop here"
    assert seen["prep"].name == "my-prep" and seen["prep"].model_id == "my-prep:gpt-4o-mini"
    assert seen["prep"].is_llm and seen["chosen"] == ["mem0"]


def test_memory_serve_prep_from_the_config(tmp_path, monkeypatch):
    monkeypatch.delenv("CLINTRACE_CONFIG", raising=False)
    monkeypatch.setenv("MY_PREP_KEY", "fake")
    seen = {}

    def fake_service(backend, name, prep):
        seen.update(backend=backend, name=name, prep=prep)
        raise ValueError("stop here")

    monkeypatch.setattr(cli_memory, "ReferenceMemoryService", fake_service)
    args = ["memory-serve", "--profile", "quick", "--prep", "my-prep", "--port", "0"]
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 2 and "unknown prep model 'my-prep'" in res.output and not seen
    res = CliRunner().invoke(cli.app, [*args, "--config", str(_toml(tmp_path))])
    assert res.exit_code == 2 and res.output.strip() == "error: stop here"
    assert seen["prep"].model_id == "my-prep:gpt-4o-mini" and seen["backend"] == "mem0"


def test_export_passes_the_config_to_the_contexts(tmp_path, monkeypatch):
    seen = {}

    def fake_prepare(profile, strategies, settings, prep, tasks, limit, questions, config=None):
        seen.update(prep=prep, config=config, strategies=strategies)
        return []

    monkeypatch.setattr(interop_export, "prepare", fake_prepare)
    cfg = _toml(tmp_path)
    args = ["export", str(tmp_path / "out"), "--profile", "quick", "--format", "jsonl"]
    CliRunner().invoke(cli.app, [*args, "--prep", "my-prep", "--config", str(cfg)])
    assert seen["config"] == cfg and seen["prep"] == "my-prep"
