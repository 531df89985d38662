"""What run_gates reads when it is given only a profile (clinlib.tasks.gates.run._load_inputs;
issue 33 §3, the last gates function the mutation run left unchecked): each artifact from the
named profile's build, the stage that makes a missing one, and the profile's exclusions
applied to the raw source it opens."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.tasks.gates import run

EVENTS = pd.DataFrame({"event_id": ["LAB-1", "RX-2"], "subject_id": [1, 1]})
COVERAGE = pd.DataFrame({"event_id": ["LAB-1"], "subject_id": [1], "status": ["covered"]})
EXCLUSIONS = pd.DataFrame({"table": ["labevents"], "key": ["9"], "rule": ["impossible value"]})


class _Con:
    def __init__(self, spec):
        self.spec = spec


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """Two profiles' builds under tmp_path; the active profile is quick, the one asked for is
    paper (so a loader that forgets the profile reads the wrong build)."""
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    monkeypatch.setenv("CLINTRACE_PROFILE", "quick")
    for profile in ("quick", "paper"):
        (tmp_path / profile).mkdir()
    applied = []
    monkeypatch.setattr(run, "source_spec", lambda profile: ("spec", profile))
    monkeypatch.setattr(run, "open_source", _Con)
    monkeypatch.setattr(run, "apply_exclusions", lambda con, ex: applied.append((con, ex)))
    return tmp_path, applied


def _write(root, profile, events=True, coverage=True, exclusions=True):
    if events:
        EVENTS.to_parquet(root / profile / "events.parquet")
    if coverage:
        COVERAGE.to_parquet(root / profile / "event_coverage.parquet")
    if exclusions:
        EXCLUSIONS.to_parquet(root / profile / "exclusions.parquet")


def test_everything_from_the_named_profile(builds):
    root, applied = builds
    _write(root, "paper")
    events, coverage, con = run._load_inputs("paper", None, None, None)
    pd.testing.assert_frame_equal(events, EVENTS)
    pd.testing.assert_frame_equal(coverage, COVERAGE)
    assert con.spec == ("spec", "paper")
    [(got_con, got_ex)] = applied
    assert got_con is con
    pd.testing.assert_frame_equal(got_ex, EXCLUSIONS)


def test_the_active_profiles_exclusions_are_not_the_named_ones(builds):
    root, applied = builds
    _write(root, "paper", exclusions=False)
    _write(root, "quick")  # the active profile has exclusions; the named one has none
    _, _, con = run._load_inputs("paper", None, None, None)
    assert con.spec == ("spec", "paper") and applied == []


def test_a_missing_events_file_names_the_cohort_stage(builds):
    root, _ = builds
    _write(root, "quick")  # only the active profile is built
    with pytest.raises(FileNotFoundError) as info:
        run._load_inputs("paper", None, COVERAGE, _Con("given"))
    assert str(info.value) == (
        f"{root / 'paper' / 'events.parquet'} does not exist; run `clintrace cohort` first"
    )


def test_a_missing_coverage_file_names_the_dialogues_stage(builds):
    root, _ = builds
    _write(root, "quick")
    _write(root, "paper", coverage=False)
    with pytest.raises(FileNotFoundError) as info:
        run._load_inputs("paper", None, None, _Con("given"))
    assert str(info.value) == (
        f"{root / 'paper' / 'event_coverage.parquet'} does not exist; "
        "run `clintrace dialogues` first"
    )


def test_what_is_given_is_used_and_nothing_is_read(builds):
    _, applied = builds  # nothing written: any read would fail
    given = _Con("given")
    events, coverage, con = run._load_inputs("paper", EVENTS, COVERAGE, given)
    assert (events is EVENTS, coverage is COVERAGE, con is given) == (True, True, True)
    assert applied == []
