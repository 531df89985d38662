"""The LongMedBench stage (``clintrace evaluate-longmed``): every cell notebook 15 shows, asked
once and cached as artifacts, so the notebook only reads tables.

What it asks, with the offline readers (deterministic policies, not LLMs):

* the seed's retrieval questions (its Table 2): T1R pairs, T1F and T7R under
  ``window-visits(m=...)`` and the flattened ``flat-window(m=...)``, plus three reader checks
  (``structured-timeline``, ``llm-summary``, ``mem0``) on T1R;
* temporal reasoning (its Table 3): T10 under ``no-context-blind`` and ``full-context``, the
  visit cloze scored by insertion position (:mod:`clinlib.analysis.cloze`);
* decisions (its Tables 4 and 5): T11 and T11O under the history memories, the flattened event
  memory, note memory, retrieval and Mem0 bounded to the earlier stays.

Beside them, over the whole question set: accuracy by the anchor's position in the record and
by context-length quartile on the main evaluation's ``post`` predictions (``evaluate-offline``),
and LongMedBench's cohort rule measured on the profile's population.

The answers go to the extended predictions store (resumable, shared with ``runner.run``); the
stage writes the tables below through :func:`clinlib.core.guards.stage_run`, and refuses to
finish on an empty cell set (a profile with no extended questions is a one-line error).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd

from clinlib.analysis import cloze, decisions, temporal
from clinlib.analysis.metrics.scores import score_table
from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.guards import STAGES, StageError, stage_run
from clinlib.data import long_cohort
from clinlib.data.build import load
from clinlib.eval.harness import runner
from clinlib.strategies.contextual_writer import writer_of
from clinlib.strategies.registry import PAPER_STRATEGIES
from clinlib.tasks.extended import load_questions
from clinlib.tasks.relative import subset_pairs

STAGE = "evaluate-longmed"
COMMAND = "clintrace evaluate-longmed"
READERS = ("reference", "eager")
WINDOWS = tuple(f"window-visits(m={m})" for m in temporal.WINDOW_ORDER)
FLAT_WINDOWS = tuple(f"flat-window(m={m})" for m in temporal.WINDOW_ORDER)
# checks on the readers, not findings: the timeline numbers its encounters, the others none
CONTRASTS = ("structured-timeline", "llm-summary", "mem0")
MEMORIES = ("no-context-blind", *(f"history-visits(m={m})" for m in temporal.WINDOW_ORDER))
TABLE4 = ("history-visits(m=inf)", "flat-history(m=inf)", "note-memory(m=inf)")
TABLE5 = (
    *(f"history-visits(m={m})" for m in temporal.WINDOW_ORDER),
    "history-dense-retrieval",
    "history-mem0",
)
POSITION_STRATEGIES = ("full-context", "last-visit-only", "dense-retrieval")
N_BOOT = 200
LONGMED_TASKS = ("T1R", "T10", "T11", "T11O", "T1F", "T7R", "T7I")


@dataclass(frozen=True)
class Sizes:
    """How many questions each cell asks (every one on quick; a stratified head on paper)."""

    t1r_pairs: int = 60
    t10_per_subtype: int = 40
    t11_per_subtype: int = 40
    t1f: int = 60
    t7r_pairs: int = 30
    t7i_pairs: int = 30


# the artifacts the stage writes (the tables notebook 15 reads, in its section order) and the
# upstream artifacts it depends on: declared once, in the stage registry
TABLES, INPUTS = STAGES[STAGE]


def select(extended: pd.DataFrame, sizes: Sizes = Sizes()) -> dict[str, pd.DataFrame]:
    """The questions each group of cells asks (both twins of every chosen pair)."""
    t1r = extended[extended["task"] == "T1R"]
    t7r = extended[extended["task"] == "T7R"]
    t7r_meta = t7r[t7r["subtype"] == "relative"]["meta"].head(sizes.t7r_pairs)
    t7i = extended[extended["task"] == "T7I"]
    t7i_meta = t7i[t7i["subtype"] == "relative"]["meta"].head(sizes.t7i_pairs)
    return {
        "T1R": subset_pairs(t1r, sizes.t1r_pairs) if len(t1r) else t1r,
        "T10": extended[extended["task"] == "T10"].groupby("subtype").head(sizes.t10_per_subtype),
        "T11": extended[extended["task"] == "T11"].groupby("subtype").head(sizes.t11_per_subtype),
        "T11O": extended[extended["task"] == "T11O"].groupby("subtype").head(sizes.t11_per_subtype),
        "T1F": extended[extended["task"] == "T1F"].head(sizes.t1f),
        "T7R": t7r[t7r["meta"].isin(t7r_meta)],
        "T7I": t7i[t7i["meta"].isin(t7i_meta)],
    }


def _cells(chosen: dict[str, pd.DataFrame]) -> list[tuple[tuple[str, ...], list[str]]]:
    """(strategies, tasks) of each run, as notebook 15's sections ask them."""
    return [
        ((*WINDOWS, *CONTRASTS), ["T1R"]),
        (("no-context-blind", "full-context"), ["T10"]),
        (tuple(dict.fromkeys((*MEMORIES, *TABLE4, *TABLE5))), ["T11", "T11O"]),
        ((*WINDOWS, *FLAT_WINDOWS), ["T1R", "T1F", "T7R", "T7I"]),
    ]


def ask(profile: str, chosen: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Answer every cell (cached: a re-run asks only what is missing) and return the
    predictions of the chosen questions under the cells' strategies and readers."""
    for strategies, tasks in _cells(chosen):
        asked = pd.concat([chosen[t] for t in tasks])
        if asked.empty:
            continue
        spec = runner.RunSpec(
            profile, list(strategies), list(READERS), tasks=tasks, questions=asked
        )
        runner.run(spec, runner.RunOptions(progress=False))
    preds = runner.load_predictions(profile, extended=True)
    qids = set(pd.concat(chosen.values())["qid"])
    return preds[preds["qid"].isin(qids) & preds["backbone"].isin(READERS)].reset_index(drop=True)


def _task(preds: pd.DataFrame, chosen: dict, task: str, strategies=None) -> pd.DataFrame:
    rows = preds[preds["qid"].isin(chosen[task]["qid"])]
    return rows if strategies is None else rows[rows["strategy"].isin(strategies)]


def retrieval_tables(preds: pd.DataFrame, chosen: dict) -> dict[str, pd.DataFrame]:
    """Table 2's cells: T1R by window (with the reader checks), recall beside rejection."""
    t1r = _task(preds, chosen, "T1R", (*WINDOWS, *CONTRASTS))
    asked = pd.concat([chosen[t] for t in ("T1R", "T1F", "T7R", "T7I")])
    rr = preds[preds["qid"].isin(asked["qid"])]
    return {
        "longmed_windows": temporal.window_table(t1r),
        "longmed_rejection": decisions.rejection_table(rr),
    }


def ordering_tables(preds: pd.DataFrame, chosen: dict) -> dict[str, pd.DataFrame]:
    """Table 3's cells: T10 tau by subtask (the visit cloze scored by insertion position, its
    previous order-only tau kept in ``longmed_cloze``), joint sorting's pairing, tau by item
    count."""
    asked = _task(preds, chosen, "T10")
    t10 = cloze.with_insertion_score(asked, chosen["T10"])
    taus = score_table(t10, by=["strategy", "backbone", "subtype"], n_boot=N_BOOT)
    items = decisions.tau_by_options(t10, chosen["T10"])
    return {
        "longmed_taus": taus,
        "longmed_pairing": temporal.pairing_table(t10, chosen["T10"]),
        "longmed_tau_items": items,
        "longmed_cloze": cloze.cloze_table(asked, chosen["T10"]),
    }


def decision_tables(preds: pd.DataFrame, chosen: dict) -> dict[str, pd.DataFrame]:
    """Tables 4 and 5: T11 by memory window; event vs note memory; length, RAG, Mem0."""
    rows = preds[preds["qid"].isin(pd.concat([chosen["T11"], chosen["T11O"]])["qid"])]
    both = pd.concat([chosen["T11"], chosen["T11O"]])
    # who wrote the contextual memory the questions state (rule-based unless a backbone wrote
    # it: clinlib.strategies.contextual_writer)
    writer = "; ".join(sorted({writer_of(q) for q in both.to_dict("records")}))
    tables = {
        "longmed_decisions": decisions.decision_table(rows, chosen["T11"], n_boot=N_BOOT),
        "longmed_table4": decisions.memory_table(rows, both, list(TABLE4), n_boot=N_BOOT),
        "longmed_table5": decisions.memory_table(rows, both, list(TABLE5), n_boot=N_BOOT),
    }
    return {k: t.assign(mc_writer=writer) for k, t in tables.items()}


def record_tables(profile: str) -> dict[str, pd.DataFrame]:
    """Position and length strata over the paper set's ``post`` predictions (every cell that
    holds every question), and the seed's cohort rule on the population."""
    questions = load("questions", profile)
    positions = temporal.anchor_positions(questions, load("events", profile))
    post = runner.load_predictions(profile)
    post = post[(post["setting"] == "post") & post["backbone"].isin(READERS)]
    if post.empty:
        raise StageError(f"{STAGE}: no post predictions; run `clintrace evaluate-offline` first")
    focus = post[post["strategy"].isin(POSITION_STRATEGIES)]
    coverage = post.groupby(["strategy", "backbone"])["qid"].nunique()
    full = coverage[coverage == post["qid"].nunique()].index
    paper = post[post["strategy"].isin([s for s in PAPER_STRATEGIES if s != "no-context-blind"])]
    paper = paper[paper.set_index(["strategy", "backbone"]).index.isin(full)]
    by_length = temporal.accuracy_by_length_quartile(paper)
    t0 = time.perf_counter()
    lc = long_cohort.profile_long_cohort(profile)
    seconds = time.perf_counter() - t0
    cohort = pd.DataFrame(
        {"this profile": lc.summary, "LongMedBench (MIMIC-IV)": long_cohort.seed_summary()}
    )
    cohort = cohort.rename_axis("figure").reset_index()
    cohort["seconds"] = seconds
    cohort["built_rule"] = long_cohort.built_rule(profile)
    return {
        "longmed_positions": temporal.accuracy_by_anchor_position(focus, positions),
        "longmed_lengths": by_length,
        "longmed_length_drop": temporal.quartile_drop(by_length).assign(
            n_questions=post["qid"].nunique()
        ),
        "longmed_cohort": cohort,
    }


def build(profile: str | None = None, sizes: Sizes = Sizes()) -> dict[str, pd.DataFrame]:
    """Run the stage on ``profile``: ask every cell, write every table (module docstring)."""
    name = resolve_profile(profile)
    extended = load_questions(name, LONGMED_TASKS)
    chosen = select(extended, sizes)
    if sum(len(q) for q in chosen.values()) == 0:
        raise StageError(f"{STAGE}: temporal_questions.parquet holds no LongMedBench question")
    with stage_run(STAGE, name, remove_on_failure=TABLES) as staging:
        preds = ask(name, chosen)
        if preds.empty:
            raise StageError(f"{STAGE}: no prediction was made for the chosen questions")
        chosen_rows = pd.concat(chosen.values(), ignore_index=True)
        tables = {
            "longmed_questions": chosen_rows,
            "longmed_predictions": preds,
            **retrieval_tables(preds, chosen),
            **ordering_tables(preds, chosen),
            **decision_tables(preds, chosen),
            **record_tables(name),
        }
        for table, frame in tables.items():
            frame.reset_index(drop=True).to_parquet(staging.path(f"{table}.parquet"), index=False)
    return tables


def tables(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """The stage's tables for a notebook; on a build made before the stage, a one-line
    FileNotFoundError naming the command to run."""
    name = resolve_profile(profile)
    missing = [t for t in TABLES if not artifact_path(f"{t}.parquet", name).exists()]
    if missing:
        raise FileNotFoundError(
            f"{missing[0]}.parquet is missing on `{name}`: run `{COMMAND} --profile {name}`"
        )
    return {t: load(t, name) for t in TABLES}
