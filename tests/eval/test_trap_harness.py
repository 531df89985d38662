"""The trap query types through the kit's harness (issue 30 §2): ``run(..., tasks=[EEM, TLA,
SUA, MQ])`` builds contexts over the trap dialogue under post, stream and mixed, the
reference reader answers from the prompt alone, the rows land in the predictions store, and a
rerun asks nothing. Scores are checked two ways: by hand where the answer is forced (no
context: every trap type abstains, except the allergy check, which calls the drug safe, "A",
right exactly on the control questions), and against the reader applied directly to the same
contexts (:func:`clinlib.eval.traps.questions.answer_contexts`, which never parses a prompt)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from clinlib.core import config
from clinlib.core.config import artifact_path
from clinlib.eval.harness import runner
from clinlib.eval.harness.prompts import build_messages, split_user_message
from clinlib.eval.harness.store import part_files, predictions_dir
from clinlib.eval.readers.trap import recognise_trap
from clinlib.eval.traps.ask import ask_traps
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.traps.answers import HARNESS_TRAP_TASKS, NEEDS_JUDGE, trap_score
from clinlib.tasks.traps.history_queries import NONE_OPTION, PRIOR_OPTIONS

COPIED = ("dialogues", "questions", "trap_questions", "trap_facts")
SETTINGS = ["post", "mixed", "stream(delta=5)"]
STRATEGIES = ["no-context-blind", "full-context"]
FREE = ["TLA", "SUA", "IG", "MCD"]  # judged in the seed (App. D.1): free text here
SETS = ("history", "medication", "prior_conflict")  # multi-select MQ


@pytest.fixture(scope="module")
def trap_runs(quick_traps, tmp_path_factory):
    """A copy of the quick profile's dialogues and questions (paper and trap), the trap types
    answered by the reference reader under two strategies and three settings, then re-run."""
    src = [artifact_path(f"{a}.parquet", "quick") for a in COPIED]
    src.append(artifact_path("source.json", "quick"))
    root = tmp_path_factory.mktemp("build")
    mp = pytest.MonkeyPatch()
    mp.setattr(config, "BUILD_DIR", root)
    (root / "tp").mkdir()
    for path in src:
        shutil.copy(path, root / "tp" / path.name)
    got = ask_traps("tp", STRATEGIES, ["reference"], SETTINGS)
    parts = len(part_files(predictions_dir("tp")))
    again = runner.run(runner.RunSpec("tp", STRATEGIES, ["reference"], SETTINGS, tasks=list(HARNESS_TRAP_TASKS)),
                       runner.RunOptions(progress=False))  # fmt: skip
    preds = runner.load_predictions("tp", extended=True, all_settings=True)
    yield got, preds, again, parts, len(part_files(predictions_dir("tp")))
    mp.undo()


@pytest.fixture(scope="module")
def quick_traps(quick_built):
    from clinlib.tasks.traps.stage import build_traps

    if not artifact_path("trap_questions.parquet", "quick").exists():
        build_traps("quick")
    return "quick"


def test_trap_rows_are_stored_under_every_setting(trap_runs):
    got, preds, *_ = trap_runs
    assert set(preds["task"]) == set(HARNESS_TRAP_TASKS)
    kinds = {s.split("@")[0] for s in preds["setting"]}
    assert kinds == {"post", "mixed", "stream"}
    # every S/O row of the wrapper is a stored prediction (nothing missing)
    so = got[got["answer_format"] != "L"]
    assert so["correct"].notna().all() and len(got) == len(preds)
    # TLA / SUA / IG / MCD are asked and stored with correct NA (never False), judge marker
    free = preds[preds["task"].isin(FREE)]
    assert len(free) and free["correct"].isna().all() and free["correct_lenient"].isna().all()
    assert (free["parse_problem"] == NEEDS_JUDGE).all() and not free["parse_failed"].any()
    assert got.loc[got["answer_format"] == "L", "correct"].isna().all()
    # paper-facing loads never see trap rows
    assert runner.load_predictions("tp", all_settings=True).empty


def test_no_context_scores_by_hand(trap_runs):
    _, preds, *_ = trap_runs
    blind = preds[(preds["strategy"] == "no-context-blind") & ~preds["task"].isin(FREE)]
    free = preds[(preds["strategy"] == "no-context-blind") & preds["task"].isin(FREE)]
    assert (free["response"] == ABSTAIN).all()  # nothing to quote: the reader cannot decide
    q = pd.read_parquet(artifact_path("trap_questions.parquet", "tp")).set_index("qid")
    allergy = blind["subtype"].eq("allergy")
    sets = blind["subtype"].isin(SETS) & blind["task"].eq("MQ")
    # no record: the allergy check answers "A" (safe); a multi-select MQ offers every drug
    # (the one the lost fact rules out too) or "no drug allergy"; every other type abstains
    assert (blind.loc[allergy, "parsed"] == "A").all()
    assert (blind.loc[~allergy & ~sets, "parsed"] == ABSTAIN).all()
    for r in blind[sets].to_dict("records"):
        opts = list(q.loc[r["qid"], "options"])
        if r["subtype"] == "prior_conflict":
            want_set = ["ABCD"[opts.index(PRIOR_OPTIONS[3])]]
        else:
            want_set = sorted("ABCD"[i] for i, o in enumerate(opts) if o != NONE_OPTION)
        assert r["parsed"] == ",".join(want_set) and not r["correct"]
    want = allergy & (q.loc[blind["qid"], "gold"].to_numpy() == "A")
    assert (blind["correct"].to_numpy() == want.to_numpy()).all()
    assert (blind["score"] == blind["correct"].astype(float)).all()


def test_stored_scores_equal_the_direct_reading(trap_runs):
    got, preds, *_ = trap_runs
    from clinlib.eval.traps.questions import answer_contexts, trap_contexts

    q = pd.read_parquet(artifact_path("trap_questions.parquet", "tp"))
    direct = pd.concat([answer_contexts(q, trap_contexts("tp", STRATEGIES, s)) for s in SETTINGS])
    key = ["qid", "strategy", "setting"]
    both = preds.merge(direct[direct["answer_format"] != "L"], on=key, suffixes=("", "_direct"))
    assert len(both) == int((~preds["task"].isin(FREE)).sum())
    assert (both["correct"].astype(bool) == both["correct_direct"].astype(bool)).all()
    assert (both["parsed"].astype(str) == both["response_direct"].astype(str)).all()
    # full context states every injected allergen: EEM right under post
    fc = preds[(preds["strategy"] == "full-context") & (preds["setting"] == "post")]
    assert fc.loc[fc["task"] == "EEM", "correct"].all()


def test_rerun_asks_nothing(trap_runs):
    *_, again, parts_before, parts_after = trap_runs
    assert (again["new_predictions"] == 0).all() and (again["api_calls"] == 0).all()
    assert parts_after == parts_before


def test_free_text_rows_are_not_counted_wrong(trap_runs):
    _, preds, again, *_ = trap_runs
    from clinlib.eval.harness.store import cell_summary

    post = preds[(preds["setting"] == "post") & (preds["strategy"] == "full-context")]
    so = post[~post["task"].isin(FREE)]
    got = cell_summary(post).iloc[0]
    # accuracy over the S/O rows only: the NA rows neither add nor dilute
    assert got["accuracy"] == pytest.approx(so["correct"].astype(bool).mean())
    assert got["n_predicted"] == len(post)
    only_free = cell_summary(post[post["task"].isin(FREE)]).iloc[0]
    assert pd.isna(only_free["accuracy"]) and only_free["parse_failures"] == 0


def test_judge_traps_stores_verdicts_and_l_type_status_shows_them(trap_runs):
    from clinlib.analysis.safety import l_type_status, with_verdicts
    from clinlib.eval.judge.run import judge_traps, judged_path

    got, preds, *_ = trap_runs
    judged = judge_traps("tp", strategies=["full-context"], settings=["post"])
    free = preds[preds["task"].isin(FREE) & (preds["strategy"] == "full-context")
                 & (preds["setting"] == "post")]  # fmt: skip
    assert len(judged) == len(free) and set(judged["task"]) == set(FREE)
    stored = pd.read_parquet(judged_path("tp", "lexical-judge"))
    assert len(stored) == len(judged)
    judge_traps("tp", strategies=["full-context"], settings=["post"])  # merged, not doubled
    assert len(pd.read_parquet(judged_path("tp", "lexical-judge"))) == len(judged)
    status = l_type_status(got, judged)
    post = status[(status["strategy"] == "full-context") & (status["setting"] == "post")]
    assert (post["status"] == "judged").all()
    assert l_type_status(got, None)["status"].eq("needs a judge").all()
    graded = with_verdicts(got, judged)
    mine = graded[(graded["strategy"] == "full-context") & (graded["setting"] == "post")]
    assert mine["correct"].notna().all()
    assert set(mine.loc[mine["answer_format"] == "L", "graded_by"]) == {"lexical-judge"}
    assert graded.loc[graded["strategy"] != "full-context"].query("answer_format == 'L'")[
        "correct"].isna().all()  # fmt: skip


def test_cli_asks_ig(trap_runs):
    from typer.testing import CliRunner

    from clinlib import cli

    out = CliRunner().invoke(cli.app, ["run", "--profile", "tp", "--strategies", "full-context",
                                       "--backbones", "reference", "--tasks", "IG"])  # fmt: skip
    assert out.exit_code == 0, out.output


def test_cli_judges_the_free_text_trap_tasks_when_named(trap_runs):
    from typer.testing import CliRunner

    from clinlib import cli
    from clinlib.eval.judge.run import judged_path

    _, preds, *_ = trap_runs
    out = CliRunner().invoke(cli.app, ["judge", "--profile", "tp", "--tasks", "IG,MCD",
                                       "--backbones", "reference"])  # fmt: skip
    assert out.exit_code == 0, out.output
    mine = preds[(preds["strategy"] == "full-context") & (preds["setting"] == "post")
                 & (preds["backbone"] == "reference")]  # fmt: skip
    stored = pd.read_parquet(judged_path("tp", "lexical-judge"))
    for task in ("IG", "MCD"):
        n = int((mine["task"] == task).sum())
        done = stored[(stored["task"] == task) & (stored["backbone"] == "reference")]
        right = int(done["verdict"].astype("boolean").fillna(False).sum())
        line = [x for x in out.output.splitlines() if x.startswith(f"{task}: ")]
        assert n > 0 and line == [f"{task}: {n} verdicts, {right} judged correct, 0 unparsed, "
                                  "0 failed ($0.0000)"]  # fmt: skip


def test_prompt_round_trip_and_scoring_by_hand():
    q = {"task": "MQ", "question": "A clinician now proposes amoxicillin for this patient. "
         "Considering only the allergies the patient has reported, is it safe to give?",
         "options": ["Yes", "No"]}  # fmt: skip
    record, text = split_user_message(build_messages(q, "Visit 1 (2150-01-01)\nhello"))
    assert record.startswith("Visit 1") and "Options: A. Yes B. No" in text
    assert recognise_trap(text)["subtype"] == "allergy"
    assert trap_score("MQ", "(B)", "B").correct and trap_score("MQ", "B", "A").correct is False
    assert trap_score("MQ", "no letter here", "B").parse_failed
    assert trap_score("EEM", "Penicillin.", "penicillin").correct
    assert not trap_score("EEM", "insufficient information", "penicillin").correct
    assert trap_score("TLA", "On 2150-02-03.", "2150-02-03").correct is None  # judged


def test_ask_traps_through_a_policy_backbone(trap_runs):
    from clinlib.llm.backbones import register_policy_backbone, unregister_backbone

    seen = []

    def always_b(messages, params):
        seen.append(messages[-1]["content"])
        return "B"

    register_policy_backbone("trap-always-b", always_b, model="policy", label="always B (test)")
    try:
        got = ask_traps("tp", ["last-visit-only"], ["trap-always-b", "reference"])
    finally:
        unregister_backbone("trap-always-b")
    q = pd.read_parquet(artifact_path("trap_questions.parquet", "tp"))
    pol = got[got["backbone"] == "trap-always-b"].merge(q[["qid", "gold"]], on="qid")
    # "B" is right exactly where the gold is B (O types), wrong on S, undecided (NA) on L
    o = pol[pol["answer_format"] == "O"]
    assert (o["correct"] == (o["gold"] == "B")).all()
    assert not pol.loc[pol["answer_format"] == "S", "correct"].any()
    assert pol.loc[pol["answer_format"] == "L", "correct"].isna().all()
    assert len(seen) == len(q)  # all six types asked (L rows stored NA-correct)
    assert all(s.startswith("PATIENT RECORD\n") and "Answer Requirements" in s for s in seen)
    mq = q[q["subtype"] == "allergy"].iloc[0].to_dict()
    text = build_messages(mq, "ctx")[-1]["content"]
    assert "A. Yes, no allergy" in text and "B. No, it is covered" in text
    # retention is the context's, shared by both backbones
    ref = got[got["backbone"] == "reference"].set_index("qid")["trap_in_context"]
    assert (pol.set_index("qid")["trap_in_context"] == ref.loc[pol["qid"]].to_numpy()).all()


def test_estimate_prices_the_trap_prompts(trap_runs):
    est = runner.estimate("tp", ["no-context-blind"], ["gpt-4o-mini"], tasks=["EEM", "MQ"])
    q = pd.read_parquet(artifact_path("trap_questions.parquet", "tp"))
    row = est[est["strategy"] == "no-context-blind"].iloc[0]
    assert int(row["questions"]) == int(q["task"].isin(["EEM", "MQ"]).sum())
    # output bound: the seed's cap, 10,240 completion tokens per question, for every type
    assert int(row["output_tokens_max"]) == 10_240 * int(row["questions"])


def test_reader_quotes_free_text_evidence_by_hand():
    from clinlib.eval.readers.trap import IG_LEAD, MCD_LEAD, answer_trap
    from clinlib.tasks.traps.answers import trap_prompt

    ig = trap_prompt({"task": "IG", "question": "The patient needs a new long-term medicine for "
                      "their main condition. What should you keep in mind when choosing it for "
                      "this patient?"})  # fmt: skip
    mcd = trap_prompt({"task": "MCD", "question": "Looking across the patient's visits, was "
                       "there any point at which one of their medicines should not have been "
                       "given? Explain the chain of evidence."})  # fmt: skip
    record = ("Visit 1 (2150-01-01)\nPatient: Before we go on, I should tell you I am allergic "
              "to codeine; it gave me severe vomiting. Doctor: Noted.\nPatient: Money is tight: "
              "I cannot spend more than 20 dollars a month on prescriptions.\nDoctor: Creatinine "
              "was 1.1. Later the creatinine was 3.9 mg/dL. We started metformin 500 mg.")  # fmt: skip
    assert answer_trap(record, ig) == (
        IG_LEAD + "Patient: Before we go on, I should tell you I am allergic to codeine; it "
        "gave me severe vomiting. Patient: Money is tight: I cannot spend more than 20 dollars "
        "a month on prescriptions."
    )
    assert answer_trap(record, mcd) == (
        MCD_LEAD + "Later the creatinine was 3.9 mg/dL. We started metformin 500 mg."
    )
    # nothing to quote: the reader cannot decide
    assert answer_trap("Visit 1 (2150-01-01)\nDoctor: Hello.", ig) == ABSTAIN
    assert answer_trap("Doctor: Creatinine was 1.1.", mcd) == ABSTAIN
    assert trap_score("IG", "anything", "").correct is None


def test_row_scores_keep_na_for_unjudged_rows():
    from clinlib.eval.harness.store import row_scores

    preds = pd.DataFrame({"correct": pd.array([True, False, None], dtype="boolean"),
                          "score": [float("nan")] * 3})  # fmt: skip
    got = row_scores(preds).tolist()
    assert got[:2] == [1.0, 0.0] and pd.isna(got[2])


def test_the_request_body_carries_the_seeds_system_prompt_and_decoding(trap_runs):
    """The harness reads the trap set's defaults from the task spec (MedMemoryBench's shared
    system prompt, temperature 0.3, 10,240 completion tokens): read back from the request
    bodies a fake OpenAI-compatible server receives; a paper task's request keeps the kit's."""
    from clinlib.eval.harness.cells import generation_params
    from clinlib.eval.harness.prompts import SYSTEM_PROMPT
    from clinlib.llm import Backbone, register_backbone, unregister_backbone
    from clinlib.llm.testserver import FaultServer
    from clinlib.tasks.traps.answers import SEED_MAX_TOKENS, SEED_SYSTEM_PROMPT, SEED_TEMPERATURE

    bodies: list[dict] = []

    class Recording(FaultServer):
        async def _chat(self, payload, *args):
            bodies.append(dict(payload))
            return await super()._chat(payload, *args)

    with Recording(answer=lambda messages: "A") as srv:
        register_backbone(Backbone(name="body-bb", model="gpt-4o-mini", base_url=srv.base_url,
                                   max_concurrency=1), replace_existing=True)  # fmt: skip
        try:
            runner.run(runner.RunSpec("tp", ["full-context"], ["body-bb"], ["post"],
                                      tasks=["EEM", "SUA", "MQ"], limit=1),
                       runner.RunOptions(progress=False))  # fmt: skip
        finally:
            unregister_backbone("body-bb")
    assert len(bodies) == 3
    for body in bodies:
        assert body["temperature"] == SEED_TEMPERATURE == 0.3
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        assert cap == SEED_MAX_TOKENS == 10_240
        system = [m["content"] for m in body["messages"] if m["role"] == "system"]
        assert system == [SEED_SYSTEM_PROMPT]
    # a paper task keeps the harness's own defaults: the spec, not the call site, decides
    assert generation_params("T1").temperature == 0.0
    assert build_messages({"task": "T1", "question": "q"}, "")[0]["content"] == SYSTEM_PROMPT
    assert SYSTEM_PROMPT != SEED_SYSTEM_PROMPT


def test_the_stage_route_reads_the_store_once_and_gives_the_same_table(trap_runs):
    """answered_traps (the store's trap rows read once, passed in; contexts measured for
    retention only) gives exactly ask_traps' table; retention without reading equals
    retention with it, while the reading route's responses are not empty (it did read)."""
    got, *_ = trap_runs
    from clinlib.eval.traps.ask import answered_traps, trap_predictions
    from clinlib.eval.traps.questions import answer_contexts, trap_contexts

    preds = trap_predictions("tp")
    assert set(preds["task"]) == set(HARNESS_TRAP_TASKS)
    again = answered_traps("tp", STRATEGIES, ["reference"], SETTINGS, preds=preds)
    pd.testing.assert_frame_equal(again, got)
    q = pd.read_parquet(artifact_path("trap_questions.parquet", "tp"))
    ctx = trap_contexts("tp", ["full-context"], "post")
    read, measured = answer_contexts(q, ctx), answer_contexts(q, ctx, read=False)
    cols = ["qid", "strategy", "setting", "trap_in_context", "measurable"]
    pd.testing.assert_frame_equal(read[cols], measured[cols])
    assert (measured["response"] == "").all() and measured["correct"].isna().all()
    assert (read.loc[read["answer_format"] != "L", "response"] != "").any()


def test_judge_traps_on_passed_rows_equals_reading_the_store(trap_runs):
    from clinlib.eval.judge.run import judge_traps
    from clinlib.eval.traps.ask import trap_predictions

    sel = {"strategies": ["full-context"], "settings": ["post"]}
    read = judge_traps("tp", **sel)
    passed = judge_traps("tp", stored=trap_predictions("tp"), **sel)
    # from_cache aside: the first call may fill the response cache the second reads
    pd.testing.assert_frame_equal(
        read.drop(columns="from_cache"), passed.drop(columns="from_cache")
    )
    assert len(read) and set(read["task"]) <= set(FREE)
