"""The contextual memory M_C written by a backbone (clinlib.strategies.contextual_writer),
against the kit's fake OpenAI-compatible server: a faithful writer's memory is accepted and
stated in the question; a writer that invents a value is rejected and the rule-based memory
used, labelled as a fallback; the request carries the seed's instruction; a second run is
answered from the kit's response cache; the default writer is rule-based and sends nothing."""

from __future__ import annotations

import json
import re

import pytest

from clinlib.data.build import load
from clinlib.eval.readers.decision import answer_decision
from clinlib.llm import Backbone, register_backbone, unregister_backbone
from clinlib.llm.testserver import FaultServer, last_user_text
from clinlib.strategies.contextual_writer import (
    QID_MARK,
    WRITER_PROMPT,
    verify_written,
    with_contextual_memory,
    writer_messages,
    writer_of,
)
from clinlib.tasks.generate import load_inputs
from clinlib.tasks.generators.t10_text import contextual_memory
from clinlib.tasks.generators.t11 import context_records

_EVENT_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) (lab|medication|procedure|admission): (.*)$"
)
SEED_WORDS = "Each event is transformed into an action–feedback pair"


def _fake_writer(invent: bool):
    """A fake backbone that writes the memory in its own words from the prompt's event lines
    (labs of one minute as one draw); ``invent``: its first feedback adds a value."""

    def answer(messages) -> str:
        groups: list[tuple[str, str, list[str]]] = []
        for line in last_user_text(messages).splitlines():
            m = _EVENT_RE.match(line)
            if not m:
                continue
            at, kind, rest = m.groups()
            if kind == "lab" and groups and groups[-1][:2] == (at, "lab"):
                groups[-1][2].append(rest)
            else:
                groups.append((at, kind, [rest]))
        out = []
        for at, kind, rests in groups:
            act, feed = {
                "lab": ("draws blood for the ordered panel", "results: " + "; ".join(rests)),
                "medication": (f"orders {rests[0]}", f"the pharmacy confirms {rests[0]}"),
                "procedure": (f"performs {rests[0]}", f"done: {rests[0]}"),
                "admission": (f"admits the patient ({rests[0]})", "the patient is on the ward"),
            }[kind]
            if invent and not out:
                feed += ", and a lactate of 987.6 mmol/L"
            out += [f"{at} {kind}: assistant — {act}", f"{at} {kind}: user — {feed}"]
        return "\n".join(out)

    return answer


@pytest.fixture(scope="module")
def t11(quick_temporal):
    questions = load("temporal_questions", "quick")
    return questions[questions["task"].isin(["T11", "T11O"])].reset_index(drop=True)


@pytest.fixture(scope="module")
def inputs(quick_temporal):
    return load_inputs("quick", seed=0, with_raw=False)


def _meta(row) -> dict:
    return json.loads(row["meta"]) if isinstance(row["meta"], str) else dict(row["meta"])


def _records(inputs, row) -> list[dict]:
    meta = _meta(row)
    recs = inputs.by_visit[(int(meta["subject_id"]), int(meta["visit_idx"]))]
    cut = next(r for r in recs if r["event_id"] == meta["cut_event_id"])
    return context_records(recs, cut["t"])


def _written(t11, inputs, invent: bool, tmp_path, seen: list):
    answer = _fake_writer(invent)

    def recording(messages):
        seen.append(messages)
        return answer(messages)

    with FaultServer(answer=recording) as srv:
        register_backbone(
            Backbone(name="fake-mc", model="gpt-4o-mini", base_url=srv.base_url),
            replace_existing=True,
        )
        try:
            cache = tmp_path / "llm_cache.sqlite"
            first = with_contextual_memory(t11, inputs, "fake-mc", cache=cache, credentialed=False)
            n_first = srv.n_requests
            again = with_contextual_memory(t11, inputs, "fake-mc", cache=cache, credentialed=False)
            n_again = srv.n_requests - n_first
        finally:
            unregister_backbone("fake-mc")
    assert first.equals(again)
    return first, n_first, n_again


def test_default_writer_is_rule_based_and_changes_no_stem(t11, inputs):
    rows = with_contextual_memory(t11, inputs)
    assert len(rows) == len(t11) == 40  # quick: 24 T11 + 16 T11O
    assert rows["question"].tolist() == t11["question"].tolist()
    assert {writer_of(r) for r in rows.to_dict("records")} == {"rule-based"}
    assert rows["qid"].tolist() == [f"{q}{QID_MARK}rule-based" for q in t11["qid"]]
    assert writer_of(t11.iloc[0].to_dict()) == "rule-based"  # a question without the mark


def test_a_faithful_backbone_memory_is_accepted_and_stated(t11, inputs, tmp_path):
    seen: list = []
    rows, n_first, n_again = _written(t11, inputs, False, tmp_path, seen)
    assert n_first == 40 and n_again == 0  # one request per question, then the cache
    assert all(m[0]["content"] == WRITER_PROMPT and SEED_WORDS in m[0]["content"] for m in seen)
    assert {writer_of(r) for r in rows.to_dict("records")} == {"fake-mc"}
    for old, new in zip(t11.to_dict("records"), rows.to_dict("records"), strict=True):
        assert new["qid"] == old["qid"] + QID_MARK + "fake-mc"
        assert new["question"] != old["question"]
        assert (
            _fake_writer(False)(  # the stem states exactly the fake's reply
                [{"role": "user", "content": writer_msg(inputs, old)}]
            )
            in new["question"]
        )
        # the memory is read: the T11O next-action rule reads the last action turn's kind
        if old["task"] == "T11O" and old["subtype"] == "next_action":
            assert answer_decision("", new["question"]) == answer_decision("", old["question"])


def writer_msg(inputs, row) -> str:
    return writer_messages(_records(inputs, row), _meta(row)["cut_time"])[1]["content"]


def test_a_backbone_that_invents_a_value_is_rejected_for_the_rule_based_memory(
    t11, inputs, tmp_path
):
    rows, n_first, _ = _written(t11, inputs, True, tmp_path, [])
    assert n_first == 40
    assert {writer_of(r) for r in rows.to_dict("records")} == {"rule-based (fallback from fake-mc)"}
    assert rows["question"].tolist() == t11["question"].tolist()  # the rule-based memory
    problems = {_meta(r)["mc_problem"] for r in rows.to_dict("records")}
    assert all("no_untraced_numbers" in p and "987.6" in p for p in problems), problems


def test_verify_written_by_hand(t11, inputs):
    recs = _records(inputs, t11.iloc[0])
    rule = contextual_memory(recs)
    assert verify_written(rule, recs) is None
    lines = rule.split("\n")
    assert "unreadable line" in verify_written("Sure! Here it is:\n" + rule, recs)
    assert "differ from the events" in verify_written("\n".join(lines[:-2]), recs)  # a pair lost
    draw = next(i for i, x in enumerate(lines) if " lab: assistant — draws " in x)
    named = lines[:draw] + [lines[draw] + "; Troponin T"] + lines[draw + 1 :]
    if "Troponin T" not in lines[draw]:
        assert "names 'Troponin T'" in verify_written("\n".join(named), recs)
    feed = draw + 1
    dropped = lines[:feed] + [lines[feed].split(";")[0] + "; and more"] + lines[feed + 1 :]
    if ";" in lines[feed]:
        assert "drops the result" in verify_written("\n".join(dropped), recs)
