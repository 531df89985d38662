"""T11 is refused under a strategy that shows the current stay (clinlib.eval.harness.cells.refuse_leaking):
its events after the decision's cut are the answer (LongMedBench "Task 3": the memory is the
history BEFORE the current visit). The declaration (``Strategy.history_only``) is checked
against what each registered strategy's context actually holds on quick's T11 questions."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.cli import app
from clinlib.data.build import load
from clinlib.eval.harness import runner
from clinlib.eval.harness.cells import refuse_leaking
from clinlib.eval.harness.store import RunnerError
from clinlib.strategies import get_strategy, question_contexts_many
from clinlib.strategies.registry import STRATEGIES
from clinlib.tasks.answers import CUT_TASKS
from clinlib.tasks.extended import load_questions

CLI = CliRunner()
SAFE = {
    "no-context-blind",
    "history-visits",
    "flat-history",
    "history-dense-retrieval",
    "history-mem0",
    "note-memory",
}


def _frame(*tasks: str) -> pd.DataFrame:
    return pd.DataFrame({"task": list(tasks)})


def test_only_history_strategies_may_ask_a_cut_task():
    assert CUT_TASKS == ("T11", "T11O")
    assert {n for n, cls in STRATEGIES.items() if cls.history_only} == SAFE
    full, hist = get_strategy("full-context"), get_strategy("history-visits(m=1)")
    with pytest.raises(RunnerError) as err:
        refuse_leaking(_frame("T1R", "T11"), [hist, full, get_strategy("oracle")])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("T11 cannot be asked under full-context, oracle:")
    assert "history-visits(m=1)" not in msg.split(":")[0]
    refuse_leaking(_frame("T11"), [hist, get_strategy("no-context-blind")])  # allowed
    refuse_leaking(_frame("T1", "T10", "T1R"), [full])  # no cut task: anything goes


def _t11(profile: str) -> pd.DataFrame:
    qs = load_questions(profile, ["T11"])
    return qs[qs["task"] == "T11"].reset_index(drop=True)


def test_declared_safe_strategies_show_nothing_of_the_stay(quick_temporal):
    """Each safe strategy's contexts name no event of the cut stay; full-context and
    window-visits(m=0), both refused, name an event at or after every cut."""
    qs, ev = _t11(quick_temporal), load("events", quick_temporal)
    names = [
        "no-context-blind",
        "history-visits(m=inf)",
        "flat-history(m=inf)",
        "history-dense-retrieval",
        "history-mem0",
        "note-memory",
        "full-context",
        "window-visits(m=0)",
    ]
    frames = question_contexts_many(qs, names, quick_temporal, "post", "rule-based")
    for name, frame in zip(names, frames, strict=True):
        ctx = dict(zip(frame["qid"], frame["context"], strict=True))
        after = 0
        for q in qs.itertuples():
            meta = json.loads(q.meta)
            stay = ev[(ev["subject_id"] == int(q.subject_ids[0]))
                      & (ev["visit_idx"] == int(meta["visit_idx"]))]  # fmt: skip
            shown = [e for e in stay["event_id"] if e in ctx[q.qid]]
            if get_strategy(name).history_only:
                assert not shown, (name, q.qid, shown[:3])
            after += bool(set(shown) & set(stay.loc[stay["time"] >= meta["cut_time"], "event_id"]))
        if not get_strategy(name).history_only:
            assert after == len(qs), (name, after, len(qs))


def test_run_and_estimate_refuse_and_the_default_run_still_works(quick_in_tmp_build,
                                                                  quick_temporal):  # fmt: skip
    t11 = _t11(quick_temporal).head(6)
    with pytest.raises(RunnerError, match="T11 cannot be asked under event-table:"):
        runner.run(runner.RunSpec("quick", ["history-visits(m=1)", "event-table"], ["reference"], tasks=["T11"], questions=t11),
                   runner.RunOptions(progress=False))  # fmt: skip
    with pytest.raises(RunnerError, match="T11 cannot be asked under full-context:"):
        runner.estimate("quick", ["full-context"], ["gpt-4o-mini"], tasks=["T11"], questions=t11)
    ok = runner.run(runner.RunSpec("quick", ["history-visits(m=1)", "no-context-blind"], ["reference"], tasks=["T11"], questions=t11),
                    runner.RunOptions(progress=False))  # fmt: skip
    assert set(ok["strategy"]) == {"history-visits(m=1)", "no-context-blind"}
    assert (ok["n"] == len(t11)).all()
    # the default run (no task named) asks the paper's set only: full-context is not refused
    paper = load("questions", "quick").groupby("task").head(1)
    default = runner.run(
        runner.RunSpec("quick", ["full-context"], ["reference"], questions=paper),
        runner.RunOptions(progress=False),
    )
    assert int(default["n"].sum()) == len(paper) and "T11" not in set(paper["task"])


def test_cli_run_refuses_with_one_line(quick_in_tmp_build, quick_temporal):
    result = CLI.invoke(app, ["run", "--profile", "quick", "--strategies", "full-context",
                              "--backbones", "reference", "--tasks", "T11"])  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: T11 cannot be asked under full-context")
