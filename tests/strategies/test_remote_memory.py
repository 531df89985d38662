"""remote-memory over the memory protocol (issue 32 §1): schemas checked by jsonschema (an
independent implementation) and equal to docs/memory-protocol.md; the strategy pointed at the
reference server backed by memory X gives X's in-process contexts in every setting; usage and
build time recorded; faults (slow, 5xx, 429, malformed JSON, wrong schema) retried or refused
with one line as the chat client's rules say, nothing half-written, resume works."""

from __future__ import annotations

import json
import math
import re
import socket
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from clinlib.strategies import build_all, get_strategy, question_contexts_many
from clinlib.strategies.build_cost import build_cost_rows
from clinlib.strategies.memory_protocol import (
    SCHEMAS,
    HttpMemoryService,
    MemoryServiceError,
    register_memory_service,
    schema_problem,
    unregister_memory_service,
)
from clinlib.strategies.memory_server import MemoryServer, ReferenceMemoryService
from clinlib.strategies.prep import RuleBasedPrep
from clinlib.strategies.remote_memory import sessions_of
from tests import strategy_fixtures as F
from tests.eval.test_runner import dialogues, profile  # noqa: F401 - the tiny profile

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ("What was the patient's Creatinine on the second stay?",
             "Which medications was the patient started on?",
             "What is the patient's Hemoglobin?")  # fmt: skip


def _q(text: str, qid: str = "q1", sid: int = 7001) -> dict:
    return {"qid": qid, "task": "T1", "subject_ids": [sid], "question": text}


@pytest.fixture(scope="module")
def emb(tmp_path_factory):
    return str(tmp_path_factory.mktemp("embeddings"))


@pytest.fixture(scope="module")
def turns():
    return F.dialogue(F.events_7001())


@pytest.fixture
def reference(emb):
    svc = ReferenceMemoryService("mem0")
    svc.strategy = get_strategy("mem0", embedding_dir=emb)
    return svc


def _validate(kind: str, message: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMAS[kind]).validate(message)


# --- schemas -----------------------------------------------------------------------------------
def test_schemas_are_valid_json_schema_and_documented_verbatim():
    for schema in SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    doc = (ROOT / "docs" / "memory-protocol.md").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"### `(\w+)`\n\n```json\n(.*?)\n```", doc, flags=re.S))
    assert {k: json.loads(v) for k, v in blocks.items()} == SCHEMAS


BAD = [
    ("reset_request", {"protocol": "clintrace-memory/1", "memory_id": "", "subject_id": 1}),
    ("reset_request", {"protocol": "v0", "memory_id": "m", "subject_id": 1}),
    ("reset_request", {"protocol": "clintrace-memory/1", "memory_id": "m", "subject_id": "1"}),
    ("ingest_request", {"protocol": "clintrace-memory/1", "memory_id": "m", "subject_id": 1,
                        "seq": 0, "session": {"visit_idx": 0, "turns": [{}]}}),
    ("ingest_request", {"protocol": "clintrace-memory/1", "memory_id": "m", "subject_id": 1,
                        "seq": 1, "session": {"visit_idx": 0, "turns": []}}),
    ("ingest_response", {"ok": True, "seq": 1, "usage": {"input_tokens": -1}}),
    ("ingest_response", {"ok": True, "seq": 1, "usage": {"tokens": 3}}),
    ("query_response", {"contexts": ["x"]}),
    ("query_response", {"context": 3}),
    ("query_response", {"context": "x", "n_items": True}),
]  # fmt: skip
GOOD = [
    ("ingest_response", {"ok": True, "seq": 2, "usage": {"input_tokens": 10, "cost_usd": 0.5}}),
    ("query_response", {"context": "", "answer": None, "extra": [1]}),
    ("reset_response", {"ok": True}),
]


@pytest.mark.parametrize(("kind", "message"), BAD + GOOD)
def test_the_kits_checker_agrees_with_jsonschema(kind, message):
    theirs = jsonschema.Draft202012Validator(SCHEMAS[kind]).is_valid(message)
    assert (schema_problem(message, SCHEMAS[kind]) is None) == theirs
    assert theirs == ((kind, message) in GOOD)


# --- equivalence -------------------------------------------------------------------------------
def test_http_and_in_process_transports_give_mem0s_own_contexts(turns, reference, emb):
    mem0 = get_strategy("mem0", embedding_dir=emb)
    own = mem0.construct(7001, turns, RuleBasedPrep())
    register_memory_service("ref", reference)
    try:
        with MemoryServer(reference) as srv:
            for endpoint in (srv.base_url, "py:ref"):
                remote = get_strategy("remote-memory", endpoint=endpoint)
                art = remote.construct(7001, turns, RuleBasedPrep())
                assert art.data["n_sessions"] == turns["visit_idx"].nunique() == 3
                for i, text in enumerate(QUESTIONS):
                    q = _q(text, f"q{i}")
                    assert remote.access(art, q, turns) == mem0.access(own, q, turns)
            # every message on the wire conforms (checked by jsonschema, not the kit)
            kinds = [name for name, _ in srv.calls]
            assert kinds == ["reset", "ingest", "ingest", "ingest", "query", "query", "query"]
            for name, payload in srv.calls:
                _validate(f"{name}_request", payload)
    finally:
        unregister_memory_service("ref")


@pytest.mark.parametrize("backend", ["dense-retrieval(k=2)", "structured-timeline", "bm25"])
def test_the_reference_service_serves_any_kit_memory_unchanged(turns, emb, backend):
    """Sessions rebuilt from the wire give the backend the turns it reads in process."""
    own = get_strategy(backend, embedding_dir=emb) if "dense" in backend else get_strategy(backend)
    svc = ReferenceMemoryService(backend)
    svc.strategy = own
    art = own.construct(7001, turns, RuleBasedPrep())
    with MemoryServer(svc) as srv:
        remote = get_strategy("remote-memory", endpoint=srv.base_url)
        rart = remote.construct(7001, turns, RuleBasedPrep())
        for i, text in enumerate(QUESTIONS):
            q = _q(text, f"q{i}")
            assert remote.access(rart, q, turns) == own.access(art, q, turns)


def test_a_replies_conform_and_ingest_is_idempotent(turns, reference):
    with MemoryServer(reference) as srv:
        svc = HttpMemoryService(srv.base_url)
        sessions = sessions_of(turns)
        svc.reset("m1", 7001)
        for i, s in enumerate(sessions, start=1):
            _validate("ingest_response", svc.call("ingest", {"memory_id": "m1", "subject_id": 7001,
                                                             "seq": i, "session": s}))  # fmt: skip
        # a retried last ingest is a no-op; a skipped seq is refused at once (422, one line)
        svc.ingest("m1", 7001, len(sessions), sessions[-1])
        assert len(reference._memories["m1"]["sessions"]) == len(sessions)
        with pytest.raises(MemoryServiceError, match=r"refused: HTTP 422.*expected seq 4, got 9"):
            svc.ingest("m1", 7001, 9, sessions[0])
        reply = svc.call("query", {"memory_id": "m1", "subject_id": 7001,
                                   "question": {"qid": "q", "question": QUESTIONS[0]}})  # fmt: skip
        _validate("query_response", reply)
        with pytest.raises(MemoryServiceError, match=r"HTTP 404.*unknown memory_id 'nope'"):
            svc.query("nope", 7001, {"qid": "q", "question": "x"})


SETTINGS = ("post", "pre", "stream(delta=3)", "mixed(ratio=0.5, seed=0)")


@pytest.mark.parametrize("setting", SETTINGS)
def test_remote_equals_in_process_mem0_in_every_setting(quick_in_tmp_build, setting):
    qs = pd.read_parquet(quick_in_tmp_build / "quick" / "questions.parquet")
    # two patients' questions, with T3 (the injected setting) and T6 (two patients) among them
    sids = sorted({int(s) for s in qs.loc[qs["task"] == "T3", "subject_ids"].iloc[0]})
    pick = qs[qs["subject_ids"].map(lambda s: sids[0] in list(s))].head(20)
    t6 = qs[qs["task"] == "T6"].head(2)
    pick = pd.concat([pick, t6]).drop_duplicates("qid")
    assert (pick["task"] == "T3").any()
    with MemoryServer(ReferenceMemoryService("mem0", "quick")) as srv:
        remote = get_strategy("remote-memory", endpoint=srv.base_url, profile="quick")
        mem0, rem = question_contexts_many(pick, ["mem0", remote], "quick", setting)
    assert len(rem) == len(mem0) > 0
    assert rem["context"].tolist() == mem0["context"].tolist()
    assert rem["qid"].tolist() == mem0["qid"].tolist()
    if setting.startswith("stream"):
        assert rem["checkpoint_visit"].notna().all()


# --- cost --------------------------------------------------------------------------------------
class Metered:
    """An in-process service that spends tokens at ingest (and reports them on every other)."""

    def __init__(self):
        self.held: dict[str, list] = {}

    def reset(self, memory_id, subject_id):
        self.held[memory_id] = []

    def ingest(self, memory_id, subject_id, seq, session):
        self.held[memory_id].append(session)
        return {"requests": 1, "input_tokens": 100 * seq, "output_tokens": 7} if seq % 2 else {}

    def query(self, memory_id, subject_id, question):
        return {"context": f"{len(self.held[memory_id])} sessions"}


def test_usage_and_build_time_are_recorded_for_the_cost_views(turns):
    register_memory_service("metered", Metered())
    try:
        remote = get_strategy("remote-memory(endpoint='py:metered')")
        art = remote.construct(7001, turns, None)
    finally:
        unregister_memory_service("metered")
    # three sessions: seq 1 and 3 report (100 + 300 input tokens), seq 2 reports nothing
    assert art.prep_usage["input_tokens"] == 400 and art.prep_usage["output_tokens"] == 14
    assert art.prep_usage["requests"] == 2
    assert math.isnan(art.prep_usage["cost_usd"])  # nobody reported a cost: unknown, not 0
    assert art.build_seconds > 0
    row = build_cost_rows([art]).iloc[0]
    assert (row["strategy"], row["prep_input_tokens"]) == ("remote-memory", 400)
    assert remote.access(art, _q("x"), turns) == "3 sessions"


# --- faults ------------------------------------------------------------------------------------
def _service(srv, **kw):
    waits: list[float] = []
    return HttpMemoryService(srv.base_url, sleep=waits.append, **kw), waits


def test_transient_faults_are_retried_like_the_chat_client(turns, reference):
    script = {1: "500", 2: "503", 3: "429", 4: "malformed", 5: "disconnect", 6: "hang"}
    with MemoryServer(reference, script=lambda i, name, p: script.get(i), hang_s=0.6) as srv:
        svc, waits = _service(srv, timeout_s=0.3, max_retries=6)
        svc.reset("m", 7001)  # call 0: clean
        svc.ingest("m", 7001, 1, sessions_of(turns)[0])  # calls 1..7: six faults, then 200
        assert srv.faults == ["500", "503", "429", "malformed", "disconnect", "hang"]
        assert svc.retries == 6 and len(waits) == 6
        assert waits[2] == 0.0  # the 429's Retry-After: 0
    # the hung attempt may have landed after the client gave up: stored once
    assert len(reference._memories["m"]["sessions"]) == 1


def test_a_reply_outside_the_schema_or_a_4xx_is_refused_at_once(turns, reference):
    with MemoryServer(reference, script=lambda i, name, p: "schema" if i == 1 else None) as srv:
        svc, waits = _service(srv)
        svc.reset("m", 7001)
        with pytest.raises(MemoryServiceError) as err:
            svc.ingest("m", 7001, 1, sessions_of(turns)[0])
        assert "replied outside the protocol: $ lacks required field 'seq'" in str(err.value)
        assert "\n" not in str(err.value) and waits == [] and len(srv.calls) == 2
    with MemoryServer(reference, script=lambda i, name, p: "400") as srv:
        with pytest.raises(MemoryServiceError, match=r"/reset refused: HTTP 400"):
            _service(srv)[0].reset("m", 7001)
        assert len(srv.calls) == 1


def test_retries_spent_refuse_with_one_line(reference):
    with MemoryServer(reference, script=lambda i, name, p: "malformed") as srv:
        svc, waits = _service(srv, max_retries=2)
        with pytest.raises(MemoryServiceError) as err:
            svc.reset("m", 7001)
        assert str(err.value).endswith("failed after 3 attempt(s): malformed JSON reply: "
                                       "Unterminated string starting at: line 1 column 13 "
                                       "(char 12)")  # fmt: skip
        assert len(srv.calls) == 3 and len(waits) == 2


def test_a_failing_build_writes_nothing_half_and_resumes(quick_in_tmp_build):
    """Patient 3's reset fails for good: the build is refused (one line, exit-2 kind), the two
    dialogues built before it are kept, nothing is written for it; once the service heals, a
    rerun sends only patients 3 and 4 and equals a clean build."""
    turns = pd.read_parquet(quick_in_tmp_build / "quick" / "dialogues.parquet")
    sids = sorted(turns["subject_id"].unique())[:4]
    broken = {"on": True}

    def script(i, name, payload):
        return "503" if broken["on"] and payload["subject_id"] == sids[2] else None

    svc = ReferenceMemoryService("mem0", "quick")
    # quick_in_tmp_build links the shared quick build, which tests in the other xdist worker
    # also build remote-memory into: count only this server's files (the endpoint, with its
    # free port, is part of the construction key and of the artifact).
    root = quick_in_tmp_build / "quick" / "constructions" / "remote-memory"
    with MemoryServer(svc, script=script) as srv:

        def ours() -> set[Path]:
            files = root.glob("*.json") if root.exists() else []
            return {
                p for p in files if json.loads(p.read_text())["data"]["endpoint"] == srv.base_url
            }

        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=1)"
        with pytest.raises(
            MemoryServiceError, match=r"/reset failed after 2 attempt\(s\): HTTP 503"
        ):
            build_all("quick", [label], subjects=sids, dialogues=turns)
        kept = ours()  # committed per dialogue: the two acknowledged before the failure
        assert {json.loads(p.read_text())["subject_id"] for p in kept} == set(sids[:2])
        broken["on"] = False
        n_calls = len(srv.calls)
        summary = build_all("quick", [label], subjects=sids, dialogues=turns)
        assert summary[["built", "cached"]].values.tolist() == [[2, 2]]
        assert {p["subject_id"] for _, p in srv.calls[n_calls:]} == set(sids[2:])
        new = ours()
        assert len(new) == 4 and {json.loads(p.read_text())["subject_id"] for p in new} == set(sids)
        again = build_all("quick", [label], subjects=sids, dialogues=turns)
        assert again["cached"].tolist() == [4]  # resume: nothing rebuilt
        for path in new:
            art = json.loads(path.read_text())
            sid = art["subject_id"]
            assert (
                art["data"]["n_sessions"]
                == turns.loc[turns["subject_id"] == sid, "visit_idx"].nunique()
            )


# --- command line ------------------------------------------------------------------------------
def test_memory_serve_refuses_in_one_line():
    from typer.testing import CliRunner

    from clinlib.cli import app

    res = CliRunner().invoke(app, ["memory-serve", "--backend", "remote-memory"])
    assert res.exit_code == 2
    assert (
        res.output.strip()
        == "error: memory-serve: the backend must be one of the kit's own memories"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = CliRunner().invoke(app, ["memory-serve", "--port", str(port)])
    assert res.exit_code == 2
    assert re.fullmatch(
        rf"error: memory-serve: cannot listen on 127.0.0.1:{port}: .+", res.output.strip()
    )


def test_memory_serve_command_serves(monkeypatch):
    """The command wires the reference service to a listening server (its serving loop is
    MemoryServer's, exercised above; here it answers one call and returns)."""
    from typer.testing import CliRunner

    from clinlib.cli import app

    seen = {}

    def once(server):
        server.start()
        svc = HttpMemoryService(server.base_url)
        svc.reset("m", 1)
        with pytest.raises(MemoryServiceError, match="holds no session"):
            svc.query("m", 1, {"qid": "q", "question": "x"})
        seen["calls"] = [name for name, _ in server.calls]
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryServer, "serve_forever", once)
    res = CliRunner().invoke(app, ["memory-serve", "--port", "0", "--profile", "quick"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert re.fullmatch(r"memory-serve: mem0 \(rule-based, profile quick\) at "
                        r"http://127\.0\.0\.1:\d+", lines[0])  # fmt: skip
    assert lines[1:] == ["memory-serve: stopped"] and seen["calls"] == ["reset", "query"]


def test_a_run_refused_by_a_failing_service_resumes_to_mem0s_answers(profile, tmp_path):  # noqa: F811
    """The harness (the tiny profile of tests/eval/test_runner.py, answered by an echo server,
    so a response is the prompt it answered): a query that fails for good stops the run with
    one line before any prediction is written; once the service heals, the same call answers
    every question with the prompt in-process Mem0 gives."""
    from clinlib.eval.harness import runner
    from clinlib.llm.testserver import FaultServer
    from tests.eval.test_runner import FAST, write_config

    broken = {"on": True}
    script = lambda i, name, p: "500" if broken["on"] and name == "query" else None  # noqa: E731
    with (
        MemoryServer(ReferenceMemoryService("mem0", profile), script=script) as srv,
        FaultServer() as echo,
    ):
        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=1)"
        kw = {"progress": False, "client_options": FAST,
              "config": write_config(tmp_path / "c.toml", echo.base_url)}  # fmt: skip
        with pytest.raises(
            MemoryServiceError, match=r"/query failed after 2 attempt\(s\): HTTP 500"
        ):
            runner.run(runner.RunSpec(profile, [label], ["fault"]), runner.RunOptions(**kw))
        assert runner.load_predictions(profile).empty and echo.n_requests == 0
        broken["on"] = False
        runner.run(runner.RunSpec(profile, [label], ["fault"]), runner.RunOptions(**kw))
        runner.run(runner.RunSpec(profile, ["mem0"], ["fault"]), runner.RunOptions(**kw))
    preds = runner.load_predictions(profile)
    remote = preds[preds["strategy"] == label].set_index("qid").sort_index()
    own = preds[preds["strategy"] == "mem0"].set_index("qid").sort_index()
    assert len(remote) == len(own) == 12 and remote["error"].isna().all()
    assert remote["response"].str.contains("Memories (most relevant first):", regex=False).all()
    assert remote["response"].tolist() == own["response"].tolist()
    assert remote["input_tokens"].tolist() == own["input_tokens"].tolist()


def test_clintrace_strategies_builds_a_label_with_commas(profile):  # noqa: F811
    from typer.testing import CliRunner

    from clinlib.cli import app

    with MemoryServer(ReferenceMemoryService("mem0", profile)) as srv:
        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=1)"
        res = CliRunner().invoke(app, ["strategies", "--profile", profile, "--strategies", label])
        assert res.exit_code == 0, res.output
        assert [n for n, _ in srv.calls].count("reset") == 2  # patients 7001 and 7002
    assert label in res.output
    res = CliRunner().invoke(app, ["strategies", "--profile", profile, "--strategies",
                                   label.replace("max_retries=1", "max_retries=0")])  # fmt: skip
    assert res.exit_code == 0  # cached: max_retries changes nothing built, no call made
    dead = label.replace(srv.base_url, "http://127.0.0.1:9")
    res = CliRunner().invoke(app, ["strategies", "--profile", profile, "--strategies", dead])
    assert res.exit_code == 2
    assert res.output.strip().startswith("error: http://127.0.0.1:9/reset failed after 2 attempt")
    assert len(res.output.strip().splitlines()) == 1
