"""The setting registry (clinlib.tasks.settings): specs, labels, prediction values, checkpoints."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.tasks.settings import (
    Setting,
    SettingError,
    asked_questions,
    checkpoints,
    parse_setting,
    parse_settings,
    parse_value,
    value_of,
)


def test_static_settings_and_alias():
    assert parse_setting("post") == Setting()
    assert parse_setting("efficient").label == "post"
    assert parse_setting("pre").base == "pre"
    assert parse_setting(" post ").value() == "post"


def test_labels_carry_non_default_parameters():
    s = parse_setting("mixed(seed=123, ratio=0.5)")
    assert (s.mixed, s.stream, s.ratio, s.seed) == (True, False, 0.5, 123)
    assert s.label == s.value() == "mixed(ratio=0.5, seed=123)"
    assert parse_setting("mixed(ratio=1.0, seed=42)").label == "mixed"  # defaults vanish
    both = parse_setting("mixed(seed=7)+stream(delta=3)")
    assert both.label == "stream(delta=3)+mixed(seed=7)"
    # the checkpoint value omits delta: a prediction at t does not depend on it
    assert both.value(12) == "stream+mixed(seed=7)@12"
    assert parse_setting(both.label) == both  # labels parse back
    assert parse_value("stream+mixed(seed=7)@12") == (parse_setting("stream+mixed(seed=7)"), 12)
    assert parse_value("post") == (Setting(), None)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("during", "unknown setting 'during'"),
        ("stream(delta=0)", "delta must be an integer >= 1, got 0"),
        ("stream(delta='3')", "delta must be an integer >= 1"),
        ("mixed(ratio=-1)", "ratio must be a number in"),
        ("mixed(noise=1)", r"mixed takes no parameter\(s\) \['noise'\]"),
        ("pre+stream", "pre does not combine"),
        ("stream+stream", "names a component twice"),
        ("stream(delta=", "cannot read setting"),
        ("", "non-empty"),
    ],
)
def test_bad_specs_name_the_value(spec, message):
    with pytest.raises(SettingError, match=message) as info:
        parse_setting(spec)
    assert "\n" not in str(info.value)


def test_value_of():
    assert value_of("stream@6", "stream(delta=3)") and not value_of("stream@6", "post")
    assert value_of("post", "efficient") and not value_of("stream+mixed@6", "stream")
    assert value_of("mixed(seed=7)", "mixed(seed=7)") and not value_of("mixed", "mixed(seed=7)")


def test_bad_values():
    for value in ("stream", "post@3", "stream@0", "stream@x"):
        with pytest.raises(SettingError, match="setting"):
            parse_value(value)


def test_parse_settings_dedupes_by_label():
    got = parse_settings(["post", "efficient", "stream", "stream(delta=1)", "mixed"])
    assert [s.label for s in got] == ["post", "stream", "mixed"]
    assert [s.label for s in parse_settings("pre")] == ["pre"]


def test_checkpoints_every_delta_plus_final():
    assert checkpoints(10, 3) == [3, 6, 9, 10]
    assert checkpoints(9, 3) == [3, 6, 9]
    assert checkpoints(2, 3) == [2]
    assert checkpoints(2, 1) == [1, 2]  # delta=1: every patient with >= 2 visits gets >= 2
    with pytest.raises(SettingError, match="at least one session"):
        checkpoints(0, 1)


def test_asked_questions():
    qs = pd.DataFrame({"qid": ["a", "b", "c"], "task": ["T1", "T3", "T6"],
                       "subject_ids": [[1], [1], [1, 2]]})  # fmt: skip
    assert asked_questions(qs, "post")["qid"].tolist() == ["a", "b", "c"]
    assert asked_questions(qs, "mixed")["qid"].tolist() == ["a", "b", "c"]
    assert asked_questions(qs, "pre")["qid"].tolist() == ["b"]
    assert asked_questions(qs, "stream")["qid"].tolist() == ["a", "b"]  # T6: no one clock


@pytest.mark.parametrize(
    ("specs", "named"),
    [("post,stream(delta=0)", "delta must be an integer >= 1, got 0"),
     ("stream+mixed(noise=2)", "mixed takes no parameter(s) ['noise']")],
)  # fmt: skip
def test_cli_refuses_a_bad_setting_in_one_line(specs, named, quick_built):
    res = CliRunner().invoke(app, ["estimate", "--profile", "quick", "--strategies",
                                   "full-context", "--backbones", "reference", "--settings",
                                   specs])  # fmt: skip
    assert res.exit_code == 2
    assert named in res.output and len(res.output.strip().splitlines()) == 1
