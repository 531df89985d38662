"""The dialogue viewer: HTML renderers, the ipywidgets viewer with its static fallback, and the
marimo app run headless (clinlib.dialogue.viewer, notebooks/apps/dialogue_viewer.py)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from clinlib.core import config
from clinlib.dialogue import synth as D
from clinlib.dialogue import viewer as X
from tests.dialogue_fixtures import make_cohort, make_events

APP = config.NOTEBOOKS_DIR / "apps" / "dialogue_viewer.py"


@pytest.fixture(scope="module")
def art():
    ev = make_events()
    out = D.synthesize_corpus(ev, make_cohort())
    return {**out, "events": ev}


def test_dialogue_html_highlights_facts_by_kind(art):
    h = X.dialogue_html(art["dialogues"], 1001, events=art["events"])
    for kind in ("admission", "discharge", "lab", "medication", "diagnosis", "procedure"):
        assert f"border-bottom:2px solid {X.KIND_COLORS[kind]}" in h, kind
    assert 'title="LAB-11: Creatinine 1.3 mg/dL"' in h
    assert h.count('class="ct-visit"') == 3 and "Visit 1 (2150-01-10)" in h
    # patient sentences are plain text
    assert "<b>Patient:</b> Hello" in h or "<b>Patient:</b> Hi" in h or "<b>Patient:</b> Good" in h


def test_selected_event_is_outlined_and_bold(art):
    h = X.dialogue_html(art["dialogues"], 1001, visits=[0], selected_event="LAB-11")
    tid = int(art["event_coverage"].set_index("event_id").loc["LAB-11", "turn_idx"])
    assert f'<div class="ct-turn ct-sel" id="turn-{tid}">' in h
    assert h.count("ct-sel") == 2  # the CSS rule + the one selected turn
    assert "font-weight:bold" in h
    assert "Visit 2" not in h


def test_html_is_escaped(art):
    h = X.dialogue_html(art["dialogues"], 1002, events=art["events"])
    assert "&lt;0.01" in h and "<0.01" not in h


def test_locate_event(art):
    cov, turns = art["event_coverage"], art["dialogues"]
    info = X.locate_event(cov, turns, "LAB-11")
    assert info["status"] == "covered" and info["speaker"] == "clinician"
    assert "1.3 mg/dL" in info["text"] and info["message"].startswith("stated in turn")
    missed = cov.loc[(cov["subject_id"] == 1001) & (cov["status"] == "missed"), "event_id"]
    info = X.locate_event(cov, turns, missed.iloc[0])
    assert info["turn_idx"] is None and "deliberately left unstated" in info["message"]
    info = X.locate_event(cov, turns, "LAB-99")
    assert info["message"] == "not stated: the source record is unusable (Creatinine unit missing)"
    info = X.locate_event(cov, turns, "ADM-7001")  # patient 1003 was dropped
    assert "patient dropped" in info["message"]
    with pytest.raises(KeyError, match="LAB-0"):
        X.locate_event(cov, turns, "LAB-0")


def test_widget_viewer_reacts_to_picks(art):
    w = X.dialogue_viewer(
        art["dialogues"], art["event_coverage"], art["dialogue_checks"],
        art["dialogue_summary"], art["events"],
    )  # fmt: skip
    c = w.controls
    assert [v for _, v in c["patient"].options] == [1001, 1002, 1003, 1004]
    assert c["patient"].value == 1001 and c["visit"].value == 0
    assert "Visit 1 (2150-01-10)" in c["body"].value and "Visit 2" not in c["body"].value
    c["event"].value = "DX-5002-2"  # a diagnosis of visit 2: the viewer jumps there
    assert c["visit"].value == 1
    assert "Visit 2 (2150-03-02)" in c["body"].value and "ct-turn ct-sel" in c["body"].value
    assert "stated in turn" in c["where"].value
    c["ids"].value = False
    assert "[DX-5002-2" not in c["body"].value and "DX-5002-2</span>" not in c["body"].value
    c["patient"].value = 1003
    assert "No turns for patient 1003" in c["body"].value
    assert "visits_in_time_order" in c["checks"].value and "✘" in c["checks"].value


def test_show_viewer_carries_a_static_fallback(art, monkeypatch):
    args = (art["dialogues"], art["event_coverage"], art["dialogue_checks"],
            art["dialogue_summary"], art["events"])  # fmt: skip
    bundle = X.show_dialogue_viewer(*args)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Patient 1001" in bundle["text/html"] and "static view" in bundle["text/html"]
    # the static rendering shows where a covered and a missed event sit
    assert "stated in turn" in bundle["text/html"]
    assert "deliberately left unstated" in bundle["text/html"]
    monkeypatch.setenv(X.STATIC_ENV, "1")
    bundle = X.show_dialogue_viewer(*args)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in bundle


def test_corpus_chart(art):
    spec = X.corpus_chart(art["dialogue_summary"], art["dialogues"]).to_dict()
    titles = [layer["layer"][0]["encoding"]["x"]["title"] for layer in spec["hconcat"]]
    assert titles == ["visits per patient", "characters per dialogue (k)", "turns per visit"]
    # paper medians drawn where the paper reports them (not for turns per visit)
    n_rules = [len(layer["layer"]) - 1 for layer in spec["hconcat"]]
    assert n_rules == [2, 2, 1]
    # bars from 0 to count: without y2, x + x2 draws one-band horizontal bars (looked like points)
    for layer in spec["hconcat"]:
        bar = layer["layer"][0]
        assert bar["mark"]["type"] == "bar" and bar["encoding"]["y2"] == {"datum": 0}
        assert bar["encoding"]["x2"]["field"] == "end"
    # binned in pandas: each histogram sums to the count it describes, whatever the size
    data = spec["datasets"]
    n_visits = art["dialogues"].groupby(["subject_id", "visit_idx"]).ngroups
    hist = [data[layer["layer"][0]["data"]["name"]] for layer in spec["hconcat"]]
    assert sum(r["count"] for r in hist[2]) == n_visits
    assert sum(r["count"] for r in hist[0]) == int(art["dialogue_summary"]["kept"].sum())


def _load_app():
    spec = importlib.util.spec_from_file_location("dialogue_viewer_app", APP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def test_marimo_app_runs_headless_on_given_artifacts(art):
    data = {k: art[k] for k in X.ARTIFACTS}
    outputs, defs = _load_app().run(defs={"data": data, "problem": "", "profile": "fixture"})
    assert defs["sid"] == 1001
    assert "Visit 1 (2150-01-10)" in defs["page"] and "ct-dlg" in defs["page"]
    html = outputs[-1].text
    assert "ct-dlg" in html and "LAB-11" in html


def test_marimo_app_without_artifacts_explains_what_to_run():
    outputs, defs = _load_app().run(
        defs={"data": None, "problem": "no such file; run `clintrace dialogues`", "profile": "x"}
    )
    assert "page" not in defs
    assert any("clintrace dialogues" in getattr(o, "text", "") for o in outputs if o is not None)


def test_marimo_app_as_a_script(art):
    profile = f"_pytest_viewer_{os.getpid()}"
    build = config.build_dir(profile)
    try:
        build.mkdir(parents=True)
        art["events"].to_parquet(build / "events.parquet")
        make_cohort().to_parquet(build / "cohort.parquet")
        D.build_dialogues(profile, allow_drops=True)  # the fixture drops 2 of 4
        env = {**os.environ, config.PROFILE_ENV: profile}
        proc = subprocess.run(
            [sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "dialogue viewer: patient 1001," in proc.stdout, proc.stdout[-2000:]
        env[config.PROFILE_ENV] = f"{profile}_missing"
        proc = subprocess.run(
            [sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0 and "no dialogue artifacts" in proc.stdout
    finally:
        shutil.rmtree(build, ignore_errors=True)
