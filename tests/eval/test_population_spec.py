"""The optional sentence -> spec step, against the fault-injecting fake OpenAI server."""

from __future__ import annotations

import pytest

from clinlib.eval.population.spec import sentence_to_spec, spec_messages, write_spec
from clinlib.llm import Backbone
from clinlib.llm.testserver import FaultServer
from clinlib.tasks.population.spec import SpecError, load_specs

GOOD = """```toml
[[task]]
task = "P-OUT"
name = "ckd-outliers"
sizes = [10]
k = 0
question = "Most of these {n} patients have diabetes. Which are outliers?"
cohort = [
  { role = "typical", size = "n - 1", positive = [{ field = "disease", op = "in", value = ["diabetes"] }] },
  { role = "odd", size = "1", positive = [{ field = "disease", op = "in", value = ["ckd"] }] },
]
```"""
FAST = dict(timeout_s=5.0, backoff_base_s=0.01, backoff_max_s=0.05, seed=0)


def _bb(srv):
    return Backbone(name="fake", model="gpt-4o-mini", base_url=srv.base_url)


def test_sentence_to_spec_validates_the_reply(tmp_path):
    sentence = "Among N diabetes patients, find the one followed for kidney disease instead."
    with FaultServer(answer=lambda messages: GOOD) as srv:
        text, spec = sentence_to_spec(sentence, "P-OUT", _bb(srv), **FAST)
        sent = srv.records[0]
    assert spec.task == "P-OUT" and [c.role for c in spec.cohorts] == ["typical", "odd"]
    assert spec.cohort("odd").n(10, 0) == 1
    assert "```" not in text
    path = write_spec(text, tmp_path / "spec.toml")
    assert load_specs(path)[0].name == "ckd-outliers"
    assert sentence in sent.user_text and "P-OUT" in sent.user_text and sent.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        ("not toml at all [[", "not valid TOML"),
        (GOOD.replace('"disease", op = "in"', '"age", op = "in"'), "unknown field 'age'"),
        (
            GOOD.replace('task = "P-OUT"', 'task = "P-CLU"'),
            "expected one \\[\\[task\\]\\] of P-OUT",
        ),
    ],
)
def test_invalid_replies_are_refused(reply, match, tmp_path):
    with FaultServer(answer=lambda messages: reply) as srv:
        with pytest.raises(SpecError, match=match):
            sentence_to_spec("x", "P-OUT", _bb(srv), **FAST)
    with pytest.raises(SpecError):
        write_spec("[[task]]\n", tmp_path / "bad.toml")
    assert not (tmp_path / "bad.toml").exists()


def test_a_failed_call_is_a_spec_error():
    with FaultServer(script=["401"]) as srv:
        with pytest.raises(SpecError, match="spec from fake"):
            sentence_to_spec("x", "P-OUT", _bb(srv), **FAST)
    with pytest.raises(SpecError, match="unknown task"):
        spec_messages("x", "P-XYZ")


def test_cli_writes_a_valid_spec_or_nothing(tmp_path):
    """`clintrace population-spec`: a valid reply is written; an invalid one exits 2 with one
    line and leaves the folder empty (no half spec, no temporary)."""
    from typer.testing import CliRunner

    from clinlib.cli import app
    from clinlib.llm import register_backbone, unregister_backbone

    out = tmp_path / "spec.toml"
    args = ["population-spec", "odd one out", "--task", "P-OUT", "--backbone", "fake", "--out"]
    for reply, code in ((GOOD.replace("n - 1", "n -"), 2), (GOOD, 0)):
        with FaultServer(answer=lambda messages, r=reply: r) as srv:
            register_backbone(_bb(srv), replace_existing=True)
            try:
                res = CliRunner().invoke(app, [*args, str(out)])
            finally:
                unregister_backbone("fake")
        assert res.exit_code == code, res.output
        if code == 2:
            assert res.output.startswith("error: ") and res.output.strip().count("\n") == 0
            assert list(tmp_path.iterdir()) == []
    assert load_specs(out)[0].name == "ckd-outliers"
