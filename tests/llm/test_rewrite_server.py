"""`clintrace dialogues --rewrite` against the kit's fake OpenAI server (paper Fig. 2 stage 3):
a rewrite that drops a value, adds a number, moves a tag or returns prose is rejected with
the check that catches it; one that follows the rules is accepted; a failed visit goes to the
rescue backbone, then falls back to its template; a run stopped half-way resumes without
asking the server again; the budget cap, the estimate and the egress guard hold.

Every expected count is worked out from the fixture patients (tests/dialogue_fixtures.py) by
the tests themselves (number of visits, requests the server saw), never read back from the
code under test.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.io import write_parquet
from clinlib.data.build import SOURCE_FILE, load
from clinlib.eval.synthesis.calls import BudgetStop
from clinlib.eval.synthesis.rewrite import estimate_rewrite, rewrite_dialogues
from clinlib.llm import (
    Backbone,
    EgressRefusedError,
    count_tokens,
    register_backbone,
    unregister_backbone,
)
from clinlib.llm.testserver import FaultServer, last_user_text
from tests.dialogue_fixtures import make_cohort, make_events

PATIENTS = (1001, 1002)
MODEL = "gpt-4o-mini"  # a model the kit counts tokens for exactly
TAG = re.compile(r" ?\[(?:LAB|RX|DX|PX|ADM|DIS)-[^\]]+\]")


def _draft(messages) -> str:
    return last_user_text(messages).split("\n\nDraft:\n", 1)[1]


def _required(messages) -> list[str]:
    head = last_user_text(messages).split("\n\nDraft:\n", 1)[0]
    return head.splitlines()[1:]


def faithful(messages) -> str:
    return "\n".join(line.replace("Clinician: ", "Clinician: Right. ", 1)
                     for line in _draft(messages).splitlines())  # fmt: skip


def drops_value(messages) -> str:
    draft = faithful(messages)
    value = next(r for r in _required(messages) if re.fullmatch(r"\d+\.\d+|\d{2,}", r)
                 and re.search(rf"(?<![\d.]){re.escape(r)}(?![\d.])", draft))  # fmt: skip
    return re.sub(rf"(?<![\d.-]){re.escape(value)}(?![\d.])", "a normal value", draft)


def adds_number(messages) -> str:
    return faithful(messages).replace("Clinician: ", "Clinician: You were seen 17 times. ", 1)


def moves_tag(messages) -> str:
    lines = faithful(messages).splitlines()
    src = next(i for i, ln in enumerate(lines) if TAG.search(ln))
    dst = next(i for i, ln in enumerate(lines) if i > src and ln.startswith("Clinician:"))
    tag = TAG.search(lines[src]).group(0)
    lines[src] = lines[src].replace(tag, "", 1)
    lines[dst] = lines[dst] + tag
    return "\n".join(lines)


def prose(messages) -> str:
    return "Sure! Here is a more natural version of the visit.\n\n" + faithful(messages)


def _n_visits() -> int:
    ev = make_events()
    ev = ev[ev["subject_id"].isin(PATIENTS)]
    return int(ev.groupby("subject_id")["visit_idx"].nunique().sum())


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """A two-patient profile ``tiny`` (cohort stage only) in a temporary BUILD_DIR."""
    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    ev = make_events()
    write_parquet(ev[ev["subject_id"].isin(PATIENTS)].reset_index(drop=True),
                  config.artifact_path("events.parquet", "tiny"))  # fmt: skip
    write_parquet(make_cohort(PATIENTS), config.artifact_path("cohort.parquet", "tiny"))
    info = {"kind": "synthetic", "path": str(tmp_path / "tiny" / "raw"), "credentialed": False}
    config.artifact_path(SOURCE_FILE, "tiny").write_text(json.dumps(info))
    return "tiny"


@pytest.fixture
def servers():
    """Register fake backbones on fake servers: ``servers(name=answer, ...)``."""
    started, names = [], []

    def make(price_in: float = 0.0, price_out: float = 0.0, approved: bool = False, **answers):
        out = {}
        for name, answer in answers.items():
            srv = FaultServer(answer=answer)
            srv.start()
            started.append(srv)
            register_backbone(Backbone(name=name, model=MODEL, base_url=srv.base_url,
                                       price_input=price_in, price_output=price_out,
                                       approved_for_credentialed=approved),
                              replace_existing=True)  # fmt: skip
            names.append(name)
            out[name] = srv
        return out

    yield make
    for srv in started:
        srv.stop()
    for name in names:
        unregister_backbone(name)


def test_a_rewriter_that_follows_the_rules_is_accepted(profile, servers):
    srv = servers(good=faithful)["good"]
    out = rewrite_dialogues(profile, "good")
    log = out["frames"]["dialogue_rewrites"]
    assert out["profile"] == "tiny+rw-good"
    assert len(log) == _n_visits() == srv.n_requests  # one request per visit
    assert (log["outcome"] == "accepted").all() and (log["backbone"] == "good").all()
    turns = load("dialogues", "tiny+rw-good")
    clin = turns[turns["speaker"] == "clinician"]
    assert clin["text"].str.startswith("Right. ").all()
    checks = load("dialogue_checks", "tiny+rw-good")
    assert checks.loc[checks["severity"] == "hard", "passed"].all()
    # the template profile is untouched: it never had dialogues and still has none
    assert not config.artifact_path("dialogues.parquet", "tiny").exists()


@pytest.mark.parametrize(
    "answer, check",
    [(drops_value, "values_bound"), (adds_number, "no_untraced_numbers"),
     (moves_tag, "values_bound"), (prose, "speaker_lines")],
)  # fmt: skip
def test_a_rule_breaking_rewrite_is_rejected_with_its_check(profile, servers, answer, check):
    servers(bad=answer)
    out = rewrite_dialogues(profile, "bad")
    log = out["frames"]["dialogue_rewrites"]
    assert (log["outcome"] == "template").all(), log[["visit_idx", "reason"]]
    assert (log["check"] == check).all(), log["reason"].tolist()
    assert log["reason"].str.startswith(check + ": ").all()
    assert log["attempts"].map(list).tolist() == [[f"bad: {check}"]] * len(log)
    # the fallback is the template text, so the dialogue still passes every hard check
    checks = load("dialogue_checks", out["profile"])
    assert checks.loc[checks["severity"] == "hard", "passed"].all()
    assert not checks.loc[checks["check"] == "rewrite_preserved", "passed"].any()


def test_a_failed_visit_is_rescued_then_falls_back(profile, servers):
    # the primary drops a value only in visits that mention Creatinine; the rescue adds a
    # number everywhere: visits with Creatinine fall back, the others are accepted at once
    def picky(messages):
        return drops_value(messages) if "Creatinine" in _draft(messages) else faithful(messages)

    srv = servers(first=picky, second=faithful, third=adds_number)
    out = rewrite_dialogues(profile, "first", rescue=["second"])
    log = out["frames"]["dialogue_rewrites"]
    n_bad = srv["first"].records and sum("Creatinine" in r.user_text for r in srv["first"].records)
    assert 0 < n_bad < len(log)
    rescued = log[log["outcome"] == "rescued"]
    assert len(rescued) == n_bad == srv["second"].n_requests  # only failed visits go on
    assert (rescued["backbone"] == "second").all()
    assert (rescued["check"] == "values_bound").all()
    assert (log.loc[log["outcome"] == "accepted", "backbone"] == "first").all()
    out = rewrite_dialogues(profile, "first", rescue=["third"])
    log = out["frames"]["dialogue_rewrites"]
    fell = log[log["outcome"] == "template"]
    assert len(fell) == n_bad and (fell["backbone"] == "template").all()
    assert (
        fell["attempts"].map(list).tolist()
        == [["first: values_bound", "third: no_untraced_numbers"]] * n_bad
    )


def test_a_stopped_run_resumes_without_asking_again(profile, servers):
    srv = servers(good=faithful)["good"]
    n, stop_after = _n_visits(), 2
    seen = []

    def stop(result):
        seen.append(result)
        if len(seen) == stop_after:
            raise KeyboardInterrupt  # Ctrl-C / SIGTERM mid-run

    with pytest.raises(KeyboardInterrupt):
        rewrite_dialogues(profile, "good", concurrency=1, on_result=stop)
    assert not config.artifact_path("dialogues.parquet", "tiny+rw-good").exists()
    first = [r.user_text for r in srv.records]
    assert len(first) == stop_after
    srv.reset_stats()
    out = rewrite_dialogues(profile, "good")
    assert srv.n_requests == n - stop_after  # the answered visits come from the cache
    assert not set(first) & {r.user_text for r in srv.records}
    assert out["calls"].cache_hits["good"] == stop_after
    assert (out["frames"]["dialogue_rewrites"]["outcome"] == "accepted").all()
    srv.reset_stats()
    rewrite_dialogues(profile, "good")
    assert srv.n_requests == 0


def test_the_budget_stops_before_spend_could_exceed_it(profile, servers):
    srv = servers(price_in=1.0, price_out=2.0, paid=faithful)["paid"]
    est = estimate_rewrite(profile, ["paid"]).iloc[0]
    n = _n_visits()
    assert est["requests"] == n and est["cached"] == 0
    # by hand: $1 / $2 per million tokens, over the requests' own token counts
    assert est["cost_usd_max"] == pytest.approx(
        (est["input_tokens"] * 1.0 + est["output_tokens_max"] * 2.0) / 1e6
    )
    per_request = est["cost_usd_max"] / n
    with pytest.raises(BudgetStop, match=f"{n - 1} of {n} paid request"):
        rewrite_dialogues(profile, "paid", budget_usd=per_request * 1.05)  # one fits at most
    assert srv.n_requests == 1
    assert not config.artifact_path("dialogues.parquet", "tiny+rw-paid").exists()
    after = estimate_rewrite(profile, ["paid"]).iloc[0]
    assert after["cached"] == 1 and after["pending_cost_usd_max"] < est["cost_usd_max"]
    rewrite_dialogues(profile, "paid")
    assert srv.n_requests == n  # the rest, once each


def test_the_estimate_counts_the_real_requests(profile, servers):
    servers(good=faithful)
    seen = []
    rewrite_dialogues(profile, "good", on_result=seen.append)
    est = estimate_rewrite(profile, ["good"]).iloc[0]
    assert est["cached"] == len(seen)
    assert est["input_tokens"] == sum(r.input_tokens for r in seen)  # the server's count


def test_credentialed_records_never_reach_an_unapproved_backbone(profile, servers):
    path = config.artifact_path(SOURCE_FILE, profile)
    path.write_text(json.dumps(json.loads(path.read_text()) | {"credentialed": True}))
    srv = servers(open_=faithful)["open_"]
    with pytest.raises(EgressRefusedError):
        rewrite_dialogues(profile, "open_")
    assert srv.n_requests == 0 and not config.build_dir("tiny+rw-open_").exists()
    ok = servers(approved=True, onsite=faithful)["onsite"]
    rewrite_dialogues(profile, "onsite")
    assert ok.n_requests == _n_visits()
    rewrite_dialogues(profile, "open_", allow_unapproved=True)
    assert srv.n_requests == _n_visits()


def test_prices_count_tokens_like_the_kit(profile, servers):
    servers(good=faithful)
    est = estimate_rewrite(profile, ["good"]).iloc[0]
    out = rewrite_dialogues(profile, "good")
    assert out["spent_usd"] == 0.0
    assert est["output_tokens_typical"] > 0
    assert est["input_tokens"] > count_tokens("x", MODEL)


def test_rewrites_frame_has_every_visit_once(profile, servers):
    servers(good=faithful)
    log = rewrite_dialogues(profile, "good")["frames"]["dialogue_rewrites"]
    ev = make_events()
    want = (ev[ev["subject_id"].isin(PATIENTS)][["subject_id", "visit_idx"]].drop_duplicates()
            .sort_values(["subject_id", "visit_idx"]).astype("int64").reset_index(drop=True))  # fmt: skip
    pd.testing.assert_frame_equal(log[["subject_id", "visit_idx"]].reset_index(drop=True), want)


def test_batch_mode_sends_one_job_and_a_rerun_collects_it(profile):
    from clinlib.llm.batch import BatchPending
    from clinlib.llm.batchserver import BatchServer

    with BatchServer(answer=faithful, polls_to_finish=2) as srv:
        register_backbone(Backbone(name="bulk", model=MODEL, base_url=srv.base_url,
                                   price_input=1.0, price_output=2.0), replace_existing=True)  # fmt: skip
        try:
            with pytest.raises(BatchPending):  # still running when the wait ends
                rewrite_dialogues(
                    profile,
                    "bulk",
                    mode="batch",
                    batch_options={"poll_interval_s": 0, "max_wait_s": 0},
                )
            assert not config.artifact_path("dialogues.parquet", "tiny+rw-bulk").exists()
            out = rewrite_dialogues(
                profile, "bulk", mode="batch", batch_options={"poll_interval_s": 0}
            )
        finally:
            unregister_backbone("bulk")
        assert srv.n_batches == 1  # the rerun collected the job it had submitted
        assert len(srv.lines_run) == _n_visits()
    log = out["frames"]["dialogue_rewrites"]
    assert (log["outcome"] == "accepted").all()
    assert out["spent_usd"] > 0  # priced at the batch prices


def test_cli_estimate_and_one_line_refusals(profile, servers):
    from typer.testing import CliRunner

    from clinlib import cli

    servers(price_in=1.0, price_out=2.0, paid=faithful)
    runner = CliRunner()
    est = runner.invoke(cli.app, ["dialogues", "--profile", profile, "--rewrite", "paid",
                                  "--estimate"])  # fmt: skip
    assert est.exit_code == 0, est.output
    assert "primary" in est.output and "paid" in est.output
    bad = runner.invoke(cli.app, ["dialogues", "--profile", profile, "--rewrite", "nobody"])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "nobody" in bad.output
    cut = runner.invoke(cli.app, ["dialogues", "--profile", profile, "--rewrite", "paid",
                                  "--budget", "0"])  # fmt: skip
    assert cut.exit_code == 2 and "budget:" in cut.output and cut.output.count("\n") == 1


def test_drafts_from_stored_dialogues_equal_a_synthesis_pass(profile):
    from clinlib.dialogue.synth import build_dialogues, rewrite_log
    from clinlib.eval.synthesis.rewrite import Collector, collect_drafts

    synthesised = collect_drafts(profile)  # no dialogues yet: a synthesis pass
    build_dialogues(profile)
    assert collect_drafts(profile) == synthesised  # from the stored turns
    again = Collector()
    rewrite_log(load("events", profile), load("cohort", profile), 0, again)
    assert again.drafts == synthesised and len(synthesised) == _n_visits()


def test_a_variant_keeps_its_bases_sizes():
    from clinlib.core.config import base_profile
    from clinlib.eval.synthesis.variants import variant_name
    from clinlib.tasks import rules
    from clinlib.tasks.build import QUICK_COUNTS, target_counts

    name = variant_name("quick", "rewrite", ["claude-sonnet-4.6", "gpt-4o-mini"])
    assert name == "quick+rw-claude-sonnet-4.6+gpt-4o-mini"
    assert base_profile(name) == "quick" and base_profile(f"{name}+pp-x") == "quick"
    assert target_counts(name) == QUICK_COUNTS
    assert target_counts(variant_name("paper", "paraphrase", ["a/b"])) == rules.PAPER_COUNTS
    assert variant_name("paper", "paraphrase", ["a/b"]) == "paper+pp-a_b"


def test_in_memory_rewrites_refuse_unapproved_backbones(servers):
    from clinlib.eval.synthesis.calls import Calls
    from clinlib.eval.synthesis.rewrite import rewrite_corpus

    srv = servers(open_=faithful)["open_"]
    ev = make_events()
    ev = ev[ev["subject_id"] == 1001]
    with pytest.raises(EgressRefusedError):
        rewrite_corpus(ev, ["open_"])  # no source.json: the records count as credentialed
    assert srv.n_requests == 0
    out = rewrite_corpus(ev, ["open_"], calls=Calls("", credentialed=False, cache=False))
    assert (out["dialogue_rewrites"]["outcome"] == "accepted").all()
    assert srv.n_requests == ev["visit_idx"].nunique()
