"""Read errors as one line with file, column, row and cause (issue 26 §4): a bad value inside
the 10,000-row type sample, a Latin-1 byte, and shares compared with a threshold printed so
that they never read the wrong way round. Tiny hand-built tables (tests/hosp_fixture.py)."""

from __future__ import annotations

import gzip
import re
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.core import config, guards
from clinlib.data.sources import csv_locate
from clinlib.data.sources.mimic import UTC_OFFSET_RE
from tests import hosp_fixture

CLI = CliRunner()


@pytest.fixture()
def tmp_build(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


def _lines(root: Path, name: str) -> list[str]:
    with gzip.open(root / "hosp" / f"{name}.csv.gz", "rt", newline="") as fh:
        return fh.read().splitlines()


def _rewrite(root: Path, name: str, lines: list[str], encoding: str = "utf-8") -> None:
    with gzip.open(root / "hosp" / f"{name}.csv.gz", "wb") as fh:
        fh.write(("\n".join(lines) + "\n").encode(encoding))


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _cohort(root: Path):
    return CLI.invoke(app, ["cohort", "--mimic-dir", str(root), "--profile", "t"])


def test_a_bad_value_inside_the_type_sample_names_its_line(tmp_path, tmp_build):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    lines = _lines(root, "labevents")
    cols = lines[0].split(",")
    row = lines[5].split(",")
    row[cols.index("valuenum")] = "1,5"  # a decimal comma: quoted, one field
    lines[5] = ",".join(f'"{v}"' if v == "1,5" else v for v in row)
    _rewrite(root, "labevents", lines)
    # header = line 1, so lines[5] is line 6
    _one_line_error(_cohort(root), "labevents.csv.gz", "'valuenum'", "DOUBLE", "'1,5'", "line 6")


def test_a_latin1_byte_names_line_column_and_cause(tmp_path, tmp_build):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    lines = _lines(root, "labevents")
    cols = lines[0].split(",")
    k = len(lines) - 2
    row = lines[k].split(",")
    row[cols.index("comments")] = "hémolysé"
    lines[k] = ",".join(row)
    _rewrite(root, "labevents", lines, encoding="latin-1")
    _one_line_error(_cohort(root), "labevents.csv.gz", "'comments'", "byte 0xe9", "not UTF-8",
                    f"line {k + 1}")  # fmt: skip


def test_locate_bad_encoding_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_locate, "_CHUNK", 7)  # the byte far past the first chunk
    path = tmp_path / "x.csv"
    path.write_bytes(b'a,b,c\n1,2,3\n4,"x\xfc",6\n')
    assert csv_locate.locate_bad_encoding(path) == (
        3, "b", "byte 0xfc ('ü' in Latin-1) is not UTF-8; re-encode the file as UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8)",
    )  # fmt: skip
    path.write_bytes("a,b\nü,1\n".encode())
    assert csv_locate.locate_bad_encoding(path) is None


def test_value_line_counts_quoted_newlines_as_lines(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text('id,note,v\n1,"two\nlines",5\n2,x,abc\n')
    assert csv_locate.value_line(path, "v", "abc", 100) == 4
    assert csv_locate.value_line(path, "v", "zzz", 100) is None


@pytest.mark.parametrize(
    ("num", "den", "bound", "text"),
    [
        (97, 99, 0.98, "97.98%"),  # 97.9798 %: "98.0%" would read as equal
        (37, 38, 0.98, "97.4%"),
        (49, 50, 0.98, "98.0%"),  # equal: one decimal is enough
        (1, 3, 0.98, "33.3%"),
    ],
)
def test_pct_beside_never_rounds_onto_the_bound(num, den, bound, text):
    assert guards.pct_beside(Fraction(num, den), bound, min_decimals=1) == text


def test_drop_share_compared_exactly_and_printed_apart():
    # 21 of 103 = 20.39 %: above 20 %, and "20%" would read as not above
    with pytest.raises(guards.StageError, match=r"21 of 103 rows dropped \(20\.4% > 20% allowed"):
        guards.check_kept("s", "rows", 82, 103)
    guards.check_kept("s", "rows", 80, 100)  # exactly 20 %: allowed


def test_coverage_message_does_not_round_up_to_98(monkeypatch):
    from clinlib.dialogue import checks

    # 97 covered of 99 must-cover events: the check fails, and says 97.98 %
    status = {f"E{i}": {"status": "covered", "reason": ""} for i in range(97)}
    status |= {f"U{i}": {"status": "unusable", "reason": "r"} for i in range(2)}
    ratio = guards.exact_share(97, 99)
    assert ratio < Fraction(str(checks.MIN_COVERAGE))
    assert guards.pct_beside(ratio, checks.MIN_COVERAGE, min_decimals=1) == "97.98%"


def test_a_timestamp_with_a_utc_offset_is_refused_not_shifted(tmp_path, tmp_build):
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    lines = _lines(root, "admissions")
    cols = lines[0].split(",")
    row = lines[3].split(",")
    i = cols.index("admittime")
    row[i] = row[i] + "+02:00"  # DuckDB's TIMESTAMP cast would drop the offset silently
    lines[3] = ",".join(row)
    _rewrite(root, "admissions", lines)
    _one_line_error(_cohort(root), "admissions.csv.gz", "'admittime'", "without a UTC offset",
                    f"value '{row[i]}'", "line 4")  # fmt: skip
    # dates and plain times are not mistaken for offsets
    for plain in ("2150-01-01", "2150-01-01 08:00:00", "2150-01-01 08:00"):
        assert not re.search(UTC_OFFSET_RE, plain)
    assert re.search(UTC_OFFSET_RE, "2150-01-01T08:00:00Z")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2150-01-02 06:00:00+02:00", "without a UTC offset"), ("2150-01-02T06:00Z", "UTC offset"),
     ("not a time", "expected TIMESTAMP")],
)  # fmt: skip
def test_a_bad_timestamp_past_the_type_sample_is_refused_with_its_line(
    tmp_path, tmp_build, value, expected
):
    """Issue 26 §1: past DuckDB's first 10,000 rows an offset was dropped without a word
    (the open-time sample never saw it). Now the view refuses it: one line, file, column,
    row and value; no events written."""
    root = hosp_fixture.write_csv_dir(tmp_path / "mimic")
    filler = hosp_fixture.filler_labs(10_050)
    bad = dict(filler[0], labevent_id=999_999, subject_id=1, hadm_id=101, itemid=50912,
               charttime=value, valuenum=1.0, value="1.0")  # fmt: skip
    line = hosp_fixture.append_csv_rows(root, "labevents", [*filler, bad]) + len(filler)
    assert line > 10_001  # beyond the sample: the open-time check does not see it
    msg = _one_line_error(_cohort(root), "labevents.csv.gz", "'charttime'", expected,
                          f"value '{value}'", f"line {line}")  # fmt: skip
    assert "Traceback" not in msg
    assert not (tmp_build / "t" / "events.parquet").exists()
