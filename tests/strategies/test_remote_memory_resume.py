"""remote-memory keeps what it read and what it built: every query's context is in the read
log, so contexts, evidence recall and the explorer work with the service stopped; a build that
fails midway keeps each acknowledged dialogue and session, and the rerun sends only the rest
(counted by the service)."""

from __future__ import annotations

import hashlib
import logging

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.strategies import build_all, question_contexts_many
from clinlib.strategies.memory_protocol import MemoryServiceError
from clinlib.strategies.memory_server import MemoryServer, ReferenceMemoryService
from tests.eval.test_runner import dialogues, profile  # noqa: F401 - the tiny profile

SIDS = (7001, 7002)  # the tiny profile's patients, built in this order


def _visits(turns: pd.DataFrame, sid: int) -> int:
    return int(turns.loc[turns["subject_id"] == sid, "visit_idx"].nunique())


def _calls(srv: MemoryServer, start: int = 0) -> list[tuple[str, int, int]]:
    return [(n, int(p["subject_id"]), int(p.get("seq", 0))) for n, p in srv.calls[start:]]


def test_a_failed_ingest_midway_resumes_without_resending(profile, dialogues):  # noqa: F811
    """Patient 7002's second ingest fails for good: 7001's artifact is kept, 7002's first
    session is journalled; the rerun sends 7002's sessions 2.. only (no reset, nothing of
    7001), and the contexts equal in-process Mem0's."""
    n1, n2 = _visits(dialogues, 7001), _visits(dialogues, 7002)
    assert n2 >= 2
    broken = {"on": True}

    def script(i, name, payload):
        hit = name == "ingest" and payload["subject_id"] == 7002 and payload["seq"] == 2
        return "503" if broken["on"] and hit else None

    with MemoryServer(ReferenceMemoryService("mem0", profile), script=script) as srv:
        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=0)"
        with pytest.raises(MemoryServiceError) as err:
            build_all(profile, [label], dialogues=dialogues)
        line = str(err.value)
        assert "/ingest failed after 1 attempt(s): HTTP 503" in line and "\n" not in line
        assert "resumes at its first unacknowledged session" in line
        first = _calls(srv)
        built_7001 = [("reset", 7001, 0), *[("ingest", 7001, s) for s in range(1, n1 + 1)]]
        assert first == [*built_7001, ("reset", 7002, 0), ("ingest", 7002, 1), ("ingest", 7002, 2)]
        broken["on"] = False
        summary = build_all(profile, [label], dialogues=dialogues)
        assert summary[["built", "cached"]].values.tolist() == [[1, 1]]
        # the service counts what the rerun sent: 7002's missing sessions, nothing else
        assert _calls(srv, len(first)) == [("ingest", 7002, s) for s in range(2, n2 + 1)]
        qs = pd.read_parquet(config.BUILD_DIR / profile / "questions.parquet")
        remote, own = question_contexts_many(qs, [label, "mem0"], profile, dialogues=dialogues)
    assert remote["context"].tolist() == own["context"].tolist()


def test_a_restarted_service_rebuilds_the_interrupted_memory_with_one_line(
    profile,  # noqa: F811
    dialogues,  # noqa: F811
    caplog,
):
    n2 = _visits(dialogues, 7002)

    def script(i, name, p):
        return "400" if name == "ingest" and (p["subject_id"], p["seq"]) == (7002, 2) else None

    with MemoryServer(ReferenceMemoryService("mem0", profile), script=script) as srv:
        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=0)"
        with pytest.raises(MemoryServiceError, match="HTTP 400"):
            build_all(profile, [label], dialogues=dialogues)
        port = srv.port
    # the same endpoint, a fresh service: it holds no memory
    with MemoryServer(ReferenceMemoryService("mem0", profile), port=port) as srv:
        assert srv.base_url in label
        with caplog.at_level(logging.WARNING, logger="clinlib.strategies"):
            build_all(profile, [label], dialogues=dialogues)
        again = [("reset", 7002, 0), *[("ingest", 7002, s) for s in range(1, n2 + 1)]]
        assert _calls(srv) == [("ingest", 7002, 2), *again]
    said = [r.getMessage() for r in caplog.records if "ingesting it again" in r.getMessage()]
    assert len(said) == 1 and "no longer holds memory 7002-" in said[0]


def test_a_run_keeps_what_it_read_and_analysis_needs_no_service(
    profile,  # noqa: F811
    dialogues,  # noqa: F811
    tmp_path,
    caplog,
):
    """A run through the harness, then the service is stopped: the contexts rebuild from the
    read log equal to what the model read (each prediction's ``context_sha``), evidence
    labelling and the explorer's context work, and a question never asked fails in one line
    naming the remedy."""
    from clinlib.analysis.evidence import label_losses
    from clinlib.analysis.failures.view import context_fn_for, context_of
    from clinlib.eval.harness import runner
    from clinlib.llm.testserver import FaultServer
    from tests.eval.test_runner import FAST, write_config

    qs = pd.read_parquet(config.BUILD_DIR / profile / "questions.parquet")
    asked = qs[qs["task"] == "T1"]
    with (
        MemoryServer(ReferenceMemoryService("mem0", profile)) as srv,
        FaultServer() as echo,
    ):
        label = f"remote-memory(endpoint={srv.base_url!r}, max_retries=0)"
        opts = runner.RunOptions(
            progress=False,
            client_options=FAST,
            config=write_config(tmp_path / "c.toml", echo.base_url),
        )
        runner.run(runner.RunSpec(profile, [label], ["fault"], tasks=["T1"]), opts)
        live = question_contexts_many(asked, [label], profile)[0]
        n_queries = sum(1 for n, _ in srv.calls if n == "query")
    assert n_queries == len(asked)  # each question asked once; the rebuild read the log
    # the service is stopped from here on
    stopped = question_contexts_many(asked, [label], profile)[0]
    assert stopped["context"].tolist() == live["context"].tolist()
    preds = runner.load_predictions(profile)
    shas = dict(zip(preds["qid"], preds["context_sha"], strict=True))
    for qid, text in zip(stopped["qid"], stopped["context"], strict=True):
        assert shas[qid] == hashlib.sha256(text.encode("utf-8")).hexdigest()
    with caplog.at_level(logging.WARNING, logger="clinlib.analysis"):
        labelled, _ = label_losses(preds, qs, profile)  # rebuilt its contexts, no service
    assert len(labelled) == len(asked) and not caplog.records
    fn = context_fn_for(profile)
    qid = str(asked["qid"].iloc[0])
    assert context_of(qs, qid, label, "post", fn) == live.set_index("qid").loc[qid, "context"]
    never = qs[qs["task"] == "T7"].head(1)
    with pytest.raises(MemoryServiceError) as err:
        question_contexts_many(never, [label], profile)
    assert "\n" not in str(err.value)
    assert str(err.value).endswith(
        "this question was never read from "
        f"{srv.base_url}: start the service (`clintrace memory-serve`, or your own) and rerun; "
        "questions already asked are read from the run's read log without it"
    )
    # the explorer shows n/a for it rather than failing
    assert context_of(qs, str(never["qid"].iloc[0]), label, "post", fn) is None
