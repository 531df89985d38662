"""Stage manifests and predictions' basis (clinlib.core.guards), each message and file worked
out by hand (issue 33, the last mutation round): manifests written by hand into a temporary
build folder, then read back through :func:`check_artifact`, :func:`predictions_basis` and
an interrupted :func:`stage_run`. Also the exact shares and percentages the drop guards print.
"""

from __future__ import annotations

import hashlib
import json
import os
from fractions import Fraction

import pandas as pd
import pytest

from clinlib.core import config, guards
from clinlib.core.guards import StageError


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _manifest(stage: str, body) -> None:
    path = guards.manifest_path(stage, "p")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if isinstance(body, str) else json.dumps(body))


def _refused(artifact: str) -> str:
    with pytest.raises(StageError) as info:
        guards.check_artifact(artifact, "p")
    return str(info.value)


# --------------------------------------------------------------------------- shares


def test_exact_share_is_zero_without_a_denominator():
    assert guards.exact_share(0, 0) == Fraction(0)
    assert guards.exact_share(3, 0) == Fraction(0)
    assert guards.exact_share(2, 4) == Fraction(1, 2)


def test_pct_beside_shows_just_enough_decimals():
    # 97/99 = 97.9797...%: "98.0%" at one decimal would read equal to the bound
    assert guards.pct_beside(Fraction(97, 99), 0.98, min_decimals=1) == "97.98%"
    assert guards.pct_beside(Fraction(1, 2), 0.98, min_decimals=1) == "50.0%"
    assert guards.pct_beside(Fraction(1, 2), 0.98) == "50%"
    assert guards.pct_beside(Fraction(49, 50), 0.98) == "98%"  # equal: the fewest decimals
    assert guards.pct_beside(Fraction(49, 50), 0.98, min_decimals=1) == "98.0%"
    # 98.00000006 %: it differs from 98 % only in the 7th decimal; 6 decimals at most
    assert guards.pct_beside(Fraction(9_800_000_006, 10**10), 0.98) == "98.000000%"


# --------------------------------------------------------------------------- manifests


def test_manifest_path_is_in_the_profiles_build_folder(tmp_build):
    assert guards.manifest_path("cohort", "p") == tmp_build / "p" / "manifests" / "cohort.json"


def test_manifest_file_is_indented_with_sorted_keys(tmp_build):
    guards._write_manifest("cohort", "p", {"status": "ok", "outputs": {"b": 1, "a": 2}})
    assert guards.manifest_path("cohort", "p").read_text() == (
        '{\n "outputs": {\n  "a": 2,\n  "b": 1\n },\n "status": "ok"\n}'
    )


def test_an_unreadable_manifest_reads_as_a_failed_stage(tmp_build):
    _manifest("cohort", "{not json")
    path = guards.manifest_path("cohort", "p")
    assert guards.read_manifest("cohort", "p") == {
        "status": "failed",
        "reason": f"unreadable manifest {path}",
    }
    assert _refused("events") == (
        f"events.parquet is not current: the last `clintrace cohort` failed (unreadable "
        f"manifest {path}); fix that and re-run `clintrace cohort --profile p`"
    )


def test_check_artifact_messages_by_status(tmp_build):
    _manifest("cohort", {"status": "running"})
    assert _refused("events") == (
        "events.parquet: `clintrace cohort` started but never finished; "
        "re-run `clintrace cohort --profile p`"
    )
    _manifest("cohort", {"status": "failed"})  # no reason recorded
    assert _refused("events") == (
        "events.parquet is not current: the last `clintrace cohort` failed (no reason "
        "recorded); fix that and re-run `clintrace cohort --profile p`"
    )
    _manifest("cohort", {"status": "ok"})  # neither outputs nor inputs recorded: nothing to check
    assert guards.check_artifact("events", "p") is None
    # an output recorded but its file gone
    _manifest("cohort", {"status": "ok", "outputs": {"events": {"sha256": "x", "size": 1}}})
    assert _refused("events") == (
        "events.parquet changed after `clintrace cohort` wrote it; "
        "re-run `clintrace cohort --profile p`"
    )


def test_check_artifact_compares_each_recorded_input(tmp_build):
    rebuilt = (
        "dialogues.parquet is stale: events.parquet was rebuilt after `clintrace dialogues` "
        "read it; re-run `clintrace dialogues --profile p`"
    )
    # cohort's sha unknown (skipped), events' differs from the cohort stage's record
    _manifest("dialogues", {"status": "ok", "inputs": {"cohort": None, "events": "old"}})
    _manifest("cohort", {"status": "ok", "outputs": {"events": {"sha256": "new"}}})
    assert _refused("dialogues") == rebuilt
    # the upstream manifest no longer lists the input, or lists no outputs at all
    _manifest("dialogues", {"status": "ok", "inputs": {"events": "old"}})
    _manifest("cohort", {"status": "ok", "outputs": {}})
    assert _refused("dialogues") == rebuilt
    _manifest("cohort", {"status": "ok"})
    assert _refused("dialogues") == rebuilt
    # an upstream built before manifests existed: nothing to compare against
    guards.manifest_path("cohort", "p").unlink()
    assert guards.check_artifact("dialogues", "p") is None


def test_fingerprint_and_the_cheap_unchanged_check(tmp_build, monkeypatch):
    path = tmp_build / "a.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"abc")
    rec = guards._fingerprint(path)
    assert rec == {"sha256": hashlib.sha256(b"abc").hexdigest(), "size": 3,
                   "mtime_ns": path.stat().st_mtime_ns}  # fmt: skip
    real_sha = guards._sha

    def no_hashing(p):
        raise AssertionError("an untouched file is not re-hashed")

    monkeypatch.setattr(guards, "_sha", no_hashing)
    assert guards._unchanged(path, rec) is True  # size and mtime match: trusted as is
    monkeypatch.setattr(guards, "_sha", real_sha)
    later = rec["mtime_ns"] + 10**9
    os.utime(path, ns=(later, later))
    assert guards._unchanged(path, rec) is True  # touched, same bytes
    path.write_bytes(b"abcd")  # other size, with the recorded mtime put back
    os.utime(path, ns=(rec["mtime_ns"], rec["mtime_ns"]))
    assert guards._unchanged(path, rec) is False
    path.unlink()
    assert guards._unchanged(path, rec) is False


def test_an_interrupted_stage_puts_its_previous_manifest_back(tmp_build):
    path = guards.manifest_path("cohort", "p")
    with pytest.raises(KeyboardInterrupt), guards.stage_run("cohort", "p"):
        assert guards.read_manifest("cohort", "p")["status"] == "running"
        raise KeyboardInterrupt
    assert not path.exists()  # there was none before
    before = {"status": "ok", "finished": 1.5, "outputs": {}, "inputs": {}}
    _manifest("cohort", before)
    with pytest.raises(SystemExit), guards.stage_run("cohort", "p"):
        raise SystemExit(1)
    assert guards.read_manifest("cohort", "p") == before


# --------------------------------------------------------------------------- predictions basis


def test_predictions_basis_from_the_manifests_else_the_files(tmp_build):
    questions = config.artifact_path("questions.parquet", "p")
    questions.parent.mkdir(parents=True)
    questions.write_bytes(b"questions")
    # questions: recorded by its stage; dialogues: its manifest lists no outputs, no file
    _manifest("questions", {"status": "ok", "outputs": {"questions": {"sha256": "recorded"}}})
    _manifest("dialogues", {"status": "ok"})
    assert guards.predictions_basis("p") == {"questions": "recorded", "dialogues": None}
    # questions' manifest without it: the file's own sha256
    _manifest("questions", {"status": "ok", "outputs": {}})
    assert guards.predictions_basis("p") == {
        "questions": hashlib.sha256(b"questions").hexdigest(),
        "dialogues": None,
    }


def test_basis_file_round_trip(tmp_path):
    folder = tmp_path / "a" / "predictions"  # neither folder exists yet
    guards.write_basis(folder, {"questions": "q", "dialogues": None})
    assert (folder / guards.PREDICTIONS_BASIS_FILE).read_text() == (
        '{\n "dialogues": null,\n "questions": "q"\n}'
    )
    assert guards.read_basis(folder) == {"questions": "q", "dialogues": None}


def test_stale_basis_names_every_changed_artifact():
    old = {"questions": "a", "dialogues": "b"}
    assert guards.stale_basis(old, {"questions": "x", "dialogues": "y"}) == (
        "questions.parquet, dialogues.parquet"
    )
    assert guards.stale_basis(old, {"questions": "a", "dialogues": "y"}) == "dialogues.parquet"
    assert guards.stale_basis(old, dict(old)) is None
    assert guards.stale_basis(None, old) is None


def test_evaluable_patients_is_a_fresh_frame_in_cohort_order():
    cohort = pd.DataFrame({"subject_id": [4, 1, 3], "disease": ["x", "y", "z"]})
    summary = pd.DataFrame({"subject_id": [1, 3, 4], "kept": [True, True, False]})
    questions = pd.DataFrame({"subject_ids": [[3], [1, 4]]})
    pd.testing.assert_frame_equal(
        guards.evaluable_patients(cohort, summary, questions),
        pd.DataFrame({"subject_id": [1, 3], "disease": ["y", "z"]}),
    )
