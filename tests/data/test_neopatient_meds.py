"""`clintrace neopatient` end to end: the MEDS it writes round-trips through the kit's own reader
(`clintrace cohort --meds-dir`), bad input is one line and exit 2, and the optional backbone
writer runs against the kit's fake server (a reply that strays from the recipe is rejected).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.cli.neopatient import static_encoder
from clinlib.core import config
from clinlib.data.build import load
from clinlib.data.neopatient import generate_cohort
from clinlib.data.sources.synthetic_vocab import ICD10_DX_TITLES
from clinlib.data.vocab import LAB_PANEL
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.llm.testserver import FaultServer, last_user_text

N = 12
COMPARED = [
    "event_id",
    "subject_id",
    "hadm_id",
    "visit_idx",
    "time",
    "kind",
    "code",
    "code_system",
    "label",
    "value",
    "value_text",
    "unit",
    "ref_low",
    "ref_high",
    "flag",
    "route",
    "end_time",
]  # every column but `source` (the kit names its source table)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """`clintrace neopatient ckd-progression --n 12`, then `clintrace cohort --meds-dir` on it
    (profile ``neo``, a temporary build folder)."""
    root = tmp_path_factory.mktemp("neo")
    out = root / "meds"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "BUILD_DIR", root / "build")
        made = CliRunner().invoke(
            app,
            ["neopatient", "ckd-progression", "--out", str(out), "--n", str(N), "--bin", "medium"],
        )
        assert made.exit_code == 0, made.output
        back = CliRunner().invoke(
            app, ["cohort", "--meds-dir", str(out), "--profile", "neo", "--per-disease", "100"]
        )
        assert back.exit_code == 0, back.output
        events = load("events", "neo")
    return out, made.output, back.output, events


def test_cohort_meds_dir_reads_back_every_patient_and_event(written):
    out, _, said, back = written
    mine = generate_cohort("ckd-progression", N, static_encoder(), "medium").events
    assert f"cohort: {N} patients, {len(mine):,} events" in said
    a = mine[COMPARED].sort_values("event_id").reset_index(drop=True)
    b = back[COMPARED].sort_values("event_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    # independently of the kit's reader: the shard holds those events plus 2 static rows each
    shard = pq.read_table(out / "data" / "held_out" / "0.parquet").to_pandas()
    assert len(shard) == len(mine) + 2 * N
    assert (shard["code"] == "MEDS_BIRTH").sum() == N
    assert shard["code"].str.startswith("GENDER//").sum() == N


def test_codes_carry_full_descriptions_and_splits_list_every_subject(written):
    out, said, _, _ = written
    codes = pq.read_table(out / "metadata" / "codes.parquet").to_pandas().set_index("code")
    assert codes["description"].notna().all()
    assert codes.loc["LAB//50912//mg/dL", "description"] == "Creatinine, Blood, Chemistry (mg/dL)"
    assert codes.loc["MEDICATION//Furosemide//PO", "description"] == (
        "Furosemide 40mg Tablet, by mouth (PO)"
    )
    assert codes.loc["DIAGNOSIS//ICD//10//N184", "description"] == ICD10_DX_TITLES["N184"]
    splits = pq.read_table(out / "metadata" / "subject_splits.parquet").to_pandas()
    assert len(splits) == N and set(splits["split"]) == {"held_out"}
    meta = json.loads((out / "metadata" / "neopatient.json").read_text())
    assert meta["writer"] == "rule-based" and meta["written"] == N
    assert "not MIMIC" in meta["synthetic"]
    bins = re.search(r"bin medium \[300, 800\) events: 12 records, min (\d+)", said)
    assert bins and int(bins.group(1)) >= 300


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope", "--out", "{tmp}/o"], "unknown neopatient recipe 'nope'"),
        (["cad-pci", "--out", "{tmp}/file/o"], "is a file, not a folder"),
        (["cad-pci", "--out", "{tmp}/o", "--bin", "huge"], "unknown length bin 'huge'"),
        (["cad-pci", "--out", "{tmp}/o", "--n", "0"], "n must be >= 1"),
        (["cad-pci", "--out", "{tmp}"], "a non-empty folder that is not a MEDS dataset"),
        (["cad-pci", "--out", "{tmp}/o", "--encoder", "nosuch"], "nothing is downloaded"),
    ],
)
def test_bad_input_is_exit_2_and_one_line(tmp_path: Path, args, message):
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["neopatient", *[a.format(tmp=tmp_path) for a in args]])
    assert result.exit_code == 2
    assert message in result.output and result.output.strip().count("\n") == 0
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()


def _plan(prompt: str, name: str) -> list[str]:
    line = next(ln for ln in prompt.splitlines() if ln.startswith(name))
    body = line.split(":", 1)[1].strip().rstrip(".")
    return [] if body == "none" else [t.strip() for t in body.split("; ")]


def _writer(stray: bool):
    """A fake backbone that writes every planned concept by its title (and, if ``stray``, one
    diagnosis the recipe never planned)."""
    typical = {lab.label: (lab.ref_high + (lab.ref_low or 0)) / 2 for lab in LAB_PANEL}

    def reply(messages) -> str:
        prompt = last_user_text(messages)
        last = int(re.search(r"to day (\d+)", prompt).group(1))
        ev = [
            {"system": "ICD10-CM", "text": t, "day": last, "value": None}
            for t in _plan(prompt, "Diagnoses")
        ]
        ev += [
            {"system": "ICD10-PCS", "text": t, "day": min(1, last), "value": None}
            for t in _plan(prompt, "Procedures")
        ]
        for t in _plan(prompt, "Medications"):
            name, dose, _unit = t.rsplit(" ", 2)
            ev.append({"system": "RX", "text": name, "day": 0, "value": float(dose)})
        for day in range(last + 1):
            ev += [
                {"system": "LAB", "text": t, "day": day, "value": typical[t]}
                for t in _plan(prompt, "Labs")
            ]
        if stray:
            ev.append({"system": "ICD10-CM", "text": "Unstable angina", "day": 0, "value": None})
        return "Here is the stay:\n" + json.dumps(ev)

    return reply


@pytest.mark.parametrize("stray", [False, True])
def test_backbone_writer_on_the_fake_server(tmp_path: Path, stray: bool):
    with FaultServer(answer=_writer(stray)) as srv:
        register_backbone(
            Backbone(name="fake-neo", model="gpt-4o-mini", base_url=srv.base_url),
            replace_existing=True,
        )
        try:
            result = CliRunner().invoke(
                app,
                [
                    "neopatient",
                    "cad-pci",
                    "--out",
                    str(tmp_path / "o"),
                    "--n",
                    "4",
                    "--backbone",
                    "fake-neo",
                ],
            )
        finally:
            unregister_backbone("fake-neo")
        assert srv.n_requests >= 4 * 2  # one prompt per stay, at least two stays a record
    if stray:  # every record carries an unplanned (and excluded) diagnosis: all rejected
        assert result.exit_code == 2
        assert "all 4 records failed verification (traces_to_recipe x" in result.output
        assert not (tmp_path / "o").exists()
    else:
        assert result.exit_code == 0, result.output
        assert "writer: backbone; 4 of 4 records verified" in result.output
        meta = json.loads((tmp_path / "o" / "metadata" / "neopatient.json").read_text())
        assert meta["writer"] == "backbone" and meta["matching"] == {}
        n_events = int(
            re.search(r"4 records, ([\d,]+) events", result.output).group(1).replace(",", "")
        )
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(config, "BUILD_DIR", tmp_path / "build")
            back = CliRunner().invoke(
                app,
                [
                    "cohort",
                    "--meds-dir",
                    str(tmp_path / "o"),
                    "--profile",
                    "neob",
                    "--per-disease",
                    "100",
                ],
            )
        assert back.exit_code == 0 and f"cohort: 4 patients, {n_events:,} events" in back.output
