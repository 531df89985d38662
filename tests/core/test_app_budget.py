"""Paging and the output budget of the explorers (clinlib.core.pages): pages and clipped
contexts against hand-worked values, and both marimo apps run headless on a paper-sized
fixture with every cell output under OUTPUT_BUDGET_BYTES."""

from __future__ import annotations

import importlib.util

import pandas as pd

from clinlib.analysis import failures as F
from clinlib.core import config
from clinlib.core import pages as P
from clinlib.dialogue import viewer as X
from tests.analysis.test_explore_failures import _dialogues, _preds, _questions

APPS = config.NOTEBOOKS_DIR / "apps"


def test_pages_by_hand():
    assert [P.page_count(n, 20) for n in (0, 1, 20, 21, 111_658)] == [1, 1, 1, 2, 5583]
    rows = pd.DataFrame({"i": range(45)})
    assert list(P.page_of(rows, 0, 20)["i"]) == list(range(20))
    assert list(P.page_of(rows, 2, 20)["i"]) == [40, 41, 42, 43, 44]
    assert list(P.page_of(rows, 99, 20)["i"]) == [40, 41, 42, 43, 44]  # clamped to the last


def test_clip_context_keeps_head_and_anchor_lines():
    lines = [f"line {i:03d} filler text [LAB-{i}]" for i in range(200)]
    ctx = "\n".join(lines)  # lines 0-9: 28 chars, 10-99: 29, 100-199: 30
    assert P.clip_context(ctx, ["LAB-150"], limit=len(ctx)) == (ctx, 0)
    shown, elided = P.clip_context(ctx, ["LAB-150"], limit=300, window=40)
    # head: chars 0-40 end inside line 1 (starts at 29). Anchor "LAB-150" sits at columns
    # 22-29 of line 150: 40 back lands in line 149, 40 on (column 69) in line 152 (lines of
    # 31 chars with the newline: 151 starts at +31, 152 at +62).
    kept = [ln for ln in shown.split("\n") if ln.startswith("line")]
    assert kept == [lines[0], lines[1], *lines[149:153]]
    assert elided == len(ctx) - (28 + 1 + 28) - (4 * 30 + 3)
    assert shown.count("characters not shown") == 2
    # LAB-1 must not match LAB-150 / LAB-15
    spans = P.mention_spans(ctx, ["LAB-1"], 0)
    assert len(spans) == 1


def test_failure_table_is_narrow_and_marks_outcomes():
    p = F.filter_predictions(_preds(), backbone="reference", setting="post")
    p.loc[0, "parsed"] = "x" * 100
    t = P.failure_table(p)
    assert tuple(t.columns) == P.TABLE_COLUMNS and list(t["row"]) == list(range(len(p)))
    assert t.loc[0, "parsed"] == "x" * (P.CELL_CHARS - 1) + "…"
    want = ["correct" if c else ("parse-failed" if f else "incorrect")
            for c, f in zip(p["correct"], p["parse_failed"], strict=True)]  # fmt: skip
    assert list(t["outcome"]) == want and "parse-failed" in want


def test_only_flip_rows_matches_the_flips():
    p = _preds()
    rows = F.filter_predictions(p, strategy="mem0")
    got = F.only_flip_rows(rows, F.flips(p), "mem0")
    # flips by hand (see tests/analysis/test_explore_failures.py): Q1 post and Q3 post, reference
    assert sorted(zip(got["qid"], got["setting"], strict=True)) == [("Q1", "post"), ("Q3", "post")]


def _big(n_copies: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fixture repeated n_copies times with distinct qids, contexts of ~250k chars."""
    p, q = _preds(), _questions()
    ps = [p.assign(qid=p["qid"] + f"-{i}") for i in range(n_copies)]
    qs = [q.assign(qid=q["qid"] + f"-{i}") for i in range(n_copies)]
    return pd.concat(ps, ignore_index=True), pd.concat(qs, ignore_index=True)


def _long_ctx(questions: pd.DataFrame, strategy: str, setting: str) -> pd.DataFrame:
    filler = "".join(f"Clinician: sodium {i} mmol/L. [LAB-{1000 + i}]\n" for i in range(6000))
    return pd.DataFrame({"qid": questions["qid"], "context": filler + "Creatinine [LAB-1]\n"})


def _app(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_budget", APPS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def test_widget_picker_holds_one_page():
    p, q = _big(10)  # 140 predictions, 70 incorrect
    w = F.failure_explorer(p, q, None, None)
    c = w.controls
    assert len(c["pick"].options) == P.PAGE_SIZE and c["page"].max == 4
    c["page"].value = 4
    assert [v for _, v in c["pick"].options] == list(range(60, 70))
    assert c["pick"].value == 60
    c["strategy"].value = "mem0"  # a filter resets to page 1
    assert c["page"].value == 1 and c["page"].max == 2


def test_failure_app_outputs_fit_the_budget_on_many_long_predictions():
    p, q = _big(4000)  # 56,000 predictions; contexts of ~250k characters
    data = {"preds": p, "questions": q, "dialogues": _dialogues(), "context_fn": _long_ctx}
    outputs, defs = _app("failure_explorer").run(defs={"data": data, "problem": ""})
    assert len(defs["rows"]) == 28_000  # default outcome: incorrect
    sizes = [P.output_bytes(o) for o in outputs]
    assert max(sizes) <= P.OUTPUT_BUDGET_BYTES, sizes
    assert defs["table"]._component_args["data"] is not None
    assert '<mark class="ct-anchor"' in defs["page"] and "characters not shown" in defs["page"]


def test_dialogue_helpers_page_and_cap():
    from clinlib.dialogue import synth as D
    from tests.dialogue_fixtures import make_cohort, make_events

    ev = make_events()
    art = D.synthesize_corpus(ev, make_cohort())
    cov, turns = art["event_coverage"], art["dialogues"]
    t = X.event_table(cov, 1001)
    mine = cov[cov["subject_id"] == 1001]
    assert len(t) == len(mine) and set(t["event_id"]) == set(mine["event_id"])
    v0 = X.event_table(cov, 1001, visit=0)
    assert set(v0["visit"]) == {1} and len(v0) == int((mine["visit_idx"] == 0).sum())
    full, shown = X.dialogue_html_within(turns, 1001, 10**9)
    n_visits = turns.loc[turns["subject_id"] == 1001, "visit_idx"].nunique()
    assert len(shown) == n_visits > 1
    one = len(X.dialogue_html(turns, 1001, [shown[0]]).encode())
    small, first = X.dialogue_html_within(turns, 1001, one + 1)
    assert first == [shown[0]] and len(small.encode()) <= one + 1
