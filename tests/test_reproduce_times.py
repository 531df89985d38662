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


def test_start_and_end_offsets_round_trip_and_the_table_shows_the_wall(tmp_path):
    from clinlib.cli.pipeline import stage_table

    # two stages side by side: 390 s of stage wall in 300 s, 375 CPU-s over it = 1.25 cores
    times = [("questions", 100.0, 95.0, 0.0, 100.0), ("population", 290.0, 280.0, 10.0, 300.0)]
    got = pd.read_csv(write_stage_times(tmp_path / "reproduce_times.csv", times))
    assert list(got.columns) == ["stage", "seconds", "cpu_seconds", "start", "end"]
    assert got["end"].tolist() == [100.0, 300.0]
    assert stage_table(times).splitlines() == [
        "  questions     100.0s  25.6%  cpu     95.0s",
        "  population    290.0s  74.4%  cpu    280.0s",
        "  total         390.0s         cpu    375.0s",
        "  wall          300.0s  (1.25 cores busy)",
    ]
