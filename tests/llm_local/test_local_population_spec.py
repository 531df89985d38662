"""The optional sentence -> spec step (issue 29, neopatient) against the real local model: a
135M model will likely write an invalid spec; either way the kit must not crash or write a half
spec. The reply is validated and written, or refused in one line with nothing written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.tasks.population.spec import load_specs

pytestmark = pytest.mark.local

SENTENCE = "Among N diabetes patients, find the one followed for kidney disease instead."


def test_local_model_spec_is_validated_or_refused_in_one_line(local_server_running, tmp_path):
    out = tmp_path / "spec.toml"
    name = local_server_running.backbone.name
    res = CliRunner().invoke(app, ["population-spec", SENTENCE, "--task", "P-OUT",
                                   "--backbone", name, "--out", str(out)])  # fmt: skip
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 0:  # accepted: the file holds the one validated spec
        [spec] = load_specs(out)
        assert spec.task == "P-OUT" and list(tmp_path.iterdir()) == [out]
    else:  # refused: one line naming why, and the model did answer (not a transport failure)
        assert res.output.startswith("error: ") and res.output.strip().count("\n") == 0
        assert f"spec from {name}" not in res.output, res.output
        assert list(tmp_path.iterdir()) == []
