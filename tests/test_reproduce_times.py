"""`reproduce` leaves its per-stage table in the build folder (docs/benchmarks.md)."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.cli.pipeline import write_stage_times


def test_the_stage_times_round_trip_as_csv(tmp_path):
    times = [("cohort", 12.34567, 10.0), ("notebooks", 100.0, 180.5)]
    out = write_stage_times(tmp_path / "reproduce_times.csv", times)
    got = pd.read_csv(out)
    assert list(got.columns) == ["stage", "seconds", "cpu_seconds"]
    assert got["stage"].tolist() == ["cohort", "notebooks"]
    assert got["seconds"].tolist() == [12.346, 100.0]
    assert got["cpu_seconds"].sum() == pytest.approx(190.5)


def test_a_failed_write_leaves_the_old_table(tmp_path, monkeypatch):
    path = tmp_path / "reproduce_times.csv"
    write_stage_times(path, [("cohort", 1.0, 1.0)])

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(OSError):
        write_stage_times(path, [("cohort", 2.0, 2.0)])
    assert pd.read_csv(path)["seconds"].tolist() == [1.0]
    assert [p.name for p in tmp_path.iterdir()] == ["reproduce_times.csv"]
