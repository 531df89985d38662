"""The failure explorer: filters, flips (against a hand count and pairwise McNemar), anchor
highlighting, the ipywidgets explorer with its static fallback, and the marimo app run
headless (clinlib.analysis.failures, notebooks/apps/failure_explorer.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pandas as pd
import pytest

from clinlib.analysis import failures as F
from clinlib.core import config

APP = config.NOTEBOOKS_DIR / "apps" / "failure_explorer.py"

# Three questions x three strategies x one backbone, post; Q3 also pre.
# correct:           full-context  mem0   last-visit-only
#   Q1 (T1 normal)       True      False      False
#   Q2 (T1 abnormal)     True      True       False
#   Q3 (T3 Y-er) post    True      False      True
#   Q3 (T3 Y-er) pre     False     False      True
CORRECT = {
    ("Q1", "post"): (True, False, False),
    ("Q2", "post"): (True, True, False),
    ("Q3", "post"): (True, False, True),
    ("Q3", "pre"): (False, False, True),
}
STRATS = ("full-context", "mem0", "last-visit-only")
CONTEXTS = {
    "full-context": "Visit 1\nClinician: Creatinine 1.3 mg/dL. [LAB-1, LAB-2]\n"
    "Clinician: Sodium 140. [LAB-3]\nClinician: ED visit. [ADM-9]",
    "mem0": "Memories:\n- Sodium 140 on 2150-01-01 [LAB-3]\n- x < y & z",
    "last-visit-only": "",
}


def _preds() -> pd.DataFrame:
    rows = []
    meta = {"Q1": ("T1", "normal"), "Q2": ("T1", "abnormal"), "Q3": ("T3", "Y-er")}
    for (qid, setting), flags in CORRECT.items():
        for strat, ok in zip(STRATS, flags, strict=True):
            task, sub = meta[qid]
            rows.append({
                "qid": qid, "task": task, "subtype": sub, "strategy": strat,
                "backbone": "reference", "prep_model": "none", "setting": setting,
                "response": "1.3 mg/dL" if ok else "insufficient information",
                "parsed": "1.3 mg/dL" if ok else "insufficient information",
                "correct": ok, "parse_failed": False, "error": None, "context_tokens": 10,
            })  # fmt: skip
    df = pd.DataFrame(rows)
    # a parse failure and a transport error that must never count as a flip
    df.loc[(df.qid == "Q2") & (df.strategy == "last-visit-only"), "parse_failed"] = True
    extra = df[(df.qid == "Q1") & (df.strategy.isin(["full-context", "mem0"]))].copy()
    extra["backbone"] = "eager"
    extra.loc[extra.strategy == "mem0", "error"] = "timeout"
    return pd.concat([df, extra], ignore_index=True)


def _questions() -> pd.DataFrame:
    return pd.DataFrame({
        "qid": ["Q1", "Q2", "Q3"], "task": ["T1", "T1", "T3"],
        "subtype": ["normal", "abnormal", "Y-er"],
        "question": ["What was creatinine?", "What was sodium?", "ED visit <before>?"],
        "gold": ["1.3 mg/dL", "140 mmol/L", "yes"],
        "options": [[], [], ["yes", "no"]],
        "anchor_event_ids": [["LAB-1"], ["LAB-3"], []],
        "evidence_turns": [["7:1"], ["7:2"], []],
    })  # fmt: skip


def _dialogues() -> pd.DataFrame:
    return pd.DataFrame({
        "subject_id": [7, 7], "visit_idx": [0, 0], "turn_idx": [1, 2],
        "speaker": ["clinician", "clinician"], "text": ["Creatinine 1.3 mg/dL.", "Sodium 140."],
        "text_tagged": ["Creatinine 1.3 mg/dL. [LAB-1]", "Sodium 140. [LAB-3]"],
        "event_ids": [["LAB-1"], ["LAB-3"]],
    })  # fmt: skip


def _ctx_fn(questions: pd.DataFrame, strategy: str, setting: str) -> pd.DataFrame:
    return pd.DataFrame({"qid": questions["qid"], "context": CONTEXTS[strategy]})


def test_filter_predictions():
    p = _preds()
    assert len(F.filter_predictions(p)) == len(p) == 14
    got = F.filter_predictions(p, task="T1", strategy="mem0", outcome="incorrect")
    assert got["qid"].tolist() == ["Q1", "Q1"]  # reference (wrong) + eager (error row)
    got = F.filter_predictions(p, setting="pre", outcome="correct")
    assert got[["qid", "strategy"]].values.tolist() == [["Q3", "last-visit-only"]]
    got = F.filter_predictions(p, outcome="parse-failed")
    assert got[["qid", "strategy"]].values.tolist() == [["Q2", "last-visit-only"]]
    got = F.filter_predictions(p, subtype=["normal", "Y-er"], backbone="reference")
    assert sorted(set(got["qid"])) == ["Q1", "Q3"] and len(got) == 9


def test_filter_errors_name_what_is_wrong():
    p = _preds()
    with pytest.raises(F.FailureExplorerError, match=r"strategy value\(s\) \['mem1'\]"):
        F.filter_predictions(p, strategy="mem1")
    with pytest.raises(F.FailureExplorerError, match="outcome 'wrong'"):
        F.filter_predictions(p, outcome="wrong")
    with pytest.raises(F.FailureExplorerError, match=r"lacks column\(s\) \['parse_failed'\]"):
        F.filter_predictions(p.drop(columns="parse_failed"))
    assert issubclass(F.FailureExplorerError, ValueError)


def test_flips_match_hand_count():
    p = _preds()
    fl = F.flips(p)  # full-context right, mem0 wrong: Q1 post and Q3 post (not the error row)
    assert fl[["qid", "backbone", "setting"]].values.tolist() == [
        ["Q1", "reference", "post"], ["Q3", "reference", "post"]]  # fmt: skip
    assert list(fl.columns) == list(F.FLIP_COLUMNS)
    assert (fl["good"] == "full-context").all() and (fl["bad"] == "mem0").all()
    assert len(F.flips(p, include_errors=True)) == 3  # the eager timeout counted
    back = F.flips(p, good="last-visit-only", bad="full-context")
    assert back[["qid", "setting"]].values.tolist() == [["Q3", "pre"]]
    with pytest.raises(F.FailureExplorerError, match="strategy 'a-mem'"):
        F.flips(p, bad="a-mem")
    dup = pd.concat([p, p[p.strategy == "mem0"].assign(prep_model="other")])
    with pytest.raises(F.FailureExplorerError, match="prep_model"):
        F.flips(dup)


def test_flip_table_agrees_with_flips():
    p = _preds()
    t = F.flip_table(p)
    ref = t[(t.backbone == "reference") & (t.setting == "post")].set_index(["good", "bad"])
    for good in STRATS:
        for bad in STRATS:
            if good == bad:
                continue
            want = F.flips(p[p.setting == "post"], good, bad)
            assert ref.loc[(good, bad), "flips"] == len(want[want.backbone == "reference"])
            assert ref.loc[(good, bad), "reverse"] == ref.loc[(bad, good), "flips"]
    assert (ref["n"] == 3).all()
    # the eager cell has one strategy left once the error row is dropped: no pair there
    assert set(t["backbone"]) == {"reference"}
    chart = F.flips_chart(t, setting="post").to_dict()
    assert chart["layer"][0]["mark"]["type"] == "rect"
    with pytest.raises(F.FailureExplorerError, match="setting 'mid'"):
        F.flips_chart(t, setting="mid")


def test_anchor_presence_and_highlight():
    ctx = CONTEXTS["full-context"]
    assert F.anchor_presence(ctx, ["LAB-2", "LAB-3", "RX-5"]) == {"LAB-2": 1, "LAB-3": 1,
                                                                  "RX-5": 0}  # fmt: skip
    h = F.highlight_context(ctx, ["LAB-2"])
    assert h.count('<mark class="ct-anchor"') == 1
    assert '[LAB-1, <b style="color:#d62728">LAB-2</b>]</mark>' in h
    assert '<span style="color:#888">[LAB-3]</span>' in h
    h = F.highlight_context(CONTEXTS["mem0"], ["LAB-1"])
    assert "x &lt; y &amp; z" in h and "ct-anchor" not in h
    assert F.anchor_message(CONTEXTS["mem0"], ["LAB-1"]).startswith(
        "Anchor event(s) LAB-1 are ABSENT"
    )
    assert F.anchor_message(ctx, ["LAB-1"]) == F.PRESENT_TEXT.format(ids="LAB-1", n=1)
    assert F.anchor_message(ctx, []) == F.NO_ANCHOR_TEXT
    assert F.NO_CONTEXT_TEXT in F.highlight_context("", ["LAB-1"])


def test_explain_and_side_by_side():
    p, q = _preds(), _questions()
    table = F.side_by_side(p, q, "Q1", "reference", "post", _ctx_fn)
    assert table["strategy"].tolist() == sorted(STRATS)
    assert dict(zip(table.strategy, table.anchors_present, strict=True)) == {
        "full-context": "1/1", "last-visit-only": "0/1", "mem0": "0/1"}  # fmt: skip
    wrong = F.filter_predictions(
        p, strategy="mem0", task="T1", backbone="reference", outcome="incorrect"
    )
    one = F.with_source(wrong, p)
    h = F.explain(one, q, 0, _ctx_fn, _dialogues())
    assert "What was creatinine?" in h and "1.3 mg/dL" in h
    assert "Anchor event(s) LAB-1 are ABSENT" in h
    assert "visit 1, turn 1 (clinician)" in h and 'id="anchor"' in h  # the evidence turn
    assert "Same question, other strategies" in h and "background:#ffffcc" in h
    h3 = F.prediction_html(p.iloc[6].to_dict(), F.question_row(q, "Q3"), "", None)
    assert F.NO_ANCHOR_TEXT in h3 and "options: yes | no" in h3 and "&lt;before&gt;" in h3
    with pytest.raises(F.FailureExplorerError, match="qid 'Q9'"):
        F.question_row(q, "Q9")


def test_widget_explorer_reacts_to_filters():
    w = F.failure_explorer(_preds(), _questions(), _ctx_fn, _dialogues())
    c = w.controls
    assert c["outcome"].value == "incorrect"
    assert "<b>7</b> of 14" in c["count"].value
    c["strategy"].value = "mem0"
    c["backbone"].value = "reference"
    assert "<b>3</b> of 14" in c["count"].value
    c["flips"].value = True
    labels = [lab for lab, _ in c["pick"].options]
    assert len(labels) == 2 and all("mem0" in lab for lab in labels)
    assert "ABSENT" in c["body"].value
    c["task"].value = "T3"
    c["setting"].value = "pre"
    assert "<b>0</b>" in c["count"].value and "No prediction matches" in c["body"].value


def test_show_explorer_carries_a_static_fallback(monkeypatch):
    args = (_preds(), _questions(), _ctx_fn, _dialogues())
    bundle = F.show_failure_explorer(*args)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    h = bundle["text/html"]
    assert "static view" in h and "2 full-context→mem0 flips" in h
    assert "Q1 · T1/normal · mem0" in h  # the first flip is explained
    monkeypatch.setenv(F.STATIC_ENV, "1")
    bundle = F.show_failure_explorer(*args)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in bundle


def test_kind_counts():
    fl = F.flips(_preds())
    k = F.kind_counts(fl, _questions())
    assert dict(zip(k.kind, k.n, strict=True)) == {"lab": 1, "none": 1}


def _load_app():
    spec = importlib.util.spec_from_file_location("failure_explorer_app", APP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def test_marimo_app_runs_headless_on_given_data():
    data = {"preds": _preds(), "questions": _questions(), "dialogues": _dialogues(),
            "context_fn": _ctx_fn}  # fmt: skip
    outputs, defs = _load_app().run(defs={"data": data, "problem": "", "profile": "fixture"})
    assert len(defs["rows"]) == 7  # default outcome: incorrect
    assert "ct-fx" in defs["page"] and "raw response" in defs["page"]
    assert "ct-fx" in outputs[-1].text


def test_marimo_app_without_predictions_explains_what_to_run():
    outputs, defs = _load_app().run(
        defs={"data": None, "problem": "run `clintrace evaluate-offline`", "profile": "x"}
    )
    assert "page" not in defs
    assert any("evaluate-offline" in getattr(o, "text", "") for o in outputs if o is not None)


def test_marimo_app_as_a_script_without_predictions():
    env = {**os.environ, config.PROFILE_ENV: f"_pytest_fx_missing_{os.getpid()}"}
    proc = subprocess.run(
        [sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "failure explorer: no predictions" in proc.stdout


def test_anchors_in_context_batches_per_setting():
    calls = []

    def fn(questions, strategy, setting):
        calls.append((tuple(questions["qid"]), strategy, setting))
        return _ctx_fn(questions, strategy, setting)

    fl = F.flips(_preds())
    got = F.anchors_in_context(fl, _questions(), "full-context", fn)
    assert got.tolist() == [True, True]  # Q1's LAB-1 is there; Q3 has no anchor
    assert F.anchors_in_context(fl, _questions(), "mem0", fn).tolist() == [False, True]
    assert calls[0] == (("Q1", "Q3"), "full-context", "post") and len(calls) == 2
    with pytest.raises(F.FailureExplorerError, match="Q9"):
        F.anchors_in_context(fl.assign(qid="Q9"), _questions(), "mem0", fn)


def test_missing_predictions_counts_absent_keys():
    p, q = _preds(), _questions()
    # post: 3 questions x 3 strategies, all present for reference; pre: T3 only (Q3) x 3
    assert F.missing_predictions(p, q, STRATS, ["reference"], ["post", "pre"]) == 0
    # eager has only Q1 full-context and mem0: 9 - 2 missing under post
    assert F.missing_predictions(p, q, STRATS, ["eager"], ["post"]) == 7
    assert F.missing_predictions(p, q, [*STRATS, "a-mem"], ["reference"], ["pre"]) == 1


def test_errors_are_filtered_and_shown_by_class():
    """A context overflow (recorded without a request) and a transport error are both
    'error' rows; only the first is 'context-overflow'; the view names each row's class."""
    p = _preds()
    p["error_kind"] = None
    over = p[(p.qid == "Q2") & (p.strategy == "full-context")].copy()
    over["backbone"], over["correct"], over["response"] = "eager", False, None
    over["error"] = "context_overflow: not sent: prompt 9,120 tokens + output cap 60 > 8,192"
    over["error_kind"] = "context_overflow"
    p = pd.concat([p, over], ignore_index=True)
    errors = F.filter_predictions(p, outcome="error")
    assert errors[["qid", "strategy"]].values.tolist() == [["Q1", "mem0"], ["Q2", "full-context"]]
    over_rows = F.filter_predictions(p, outcome="context-overflow")
    assert over_rows[["qid", "strategy"]].values.tolist() == [["Q2", "full-context"]]
    q = _questions().set_index("qid")
    shown = F.prediction_html(over_rows.iloc[0].to_dict(), q.loc["Q2"].to_dict() | {"qid": "Q2"},
                              None)  # fmt: skip
    assert "context overflow:</b> context_overflow: not sent" in shown
    timeout = F.prediction_html(errors.iloc[0].to_dict(), q.loc["Q1"].to_dict(), None)
    assert "transport error:</b> timeout" in timeout
