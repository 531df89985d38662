"""Verbosity of population prompts, measured (PopMedQA App. B "Formalization of the Verbose
Context Problem": N is the prompt's context length, M the part that originates from coded
concepts; the problem is M/N large).

Per question and rendering, under each exact tokenizer (:mod:`clinlib.llm.tokens`;
``cl100k_base`` via ``gpt-4``, ``o200k_base`` via ``gpt-4o``): N (tokens of the stem and the
rendered group), M (the sum over printed concept occurrences of that concept string's tokens,
the codebook's definition lines included), M/N, tokens per code (M / coded events), and the
saving of each rendering against the descriptions baseline (1 - N / N_descriptions).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.stats.cluster import cluster_robust_ci, overlap_robust_ci
from clinlib.core.config import build_dir
from clinlib.core.seed_facts import seed_fact
from clinlib.eval.population.counts import count_by_lines
from clinlib.eval.population.per_patient import chance_answer, per_patient_answer
from clinlib.llm.tokens import count_tokens, encoding_for_model
from clinlib.tasks.population.build import (
    GATE_ORDER,
    GATES_FILE,
    QUESTIONS_FILE,
    not_applicable,
    population_events,
    source_kind,
)
from clinlib.tasks.population.checker import check
from clinlib.tasks.population.questions import population_answer, prompt_text
from clinlib.tasks.population.render import DESC_CHARS, RENDERINGS  # noqa: F401 (DESC_CHARS: notebook 17)
from clinlib.tasks.population.solve import Knowledge
from clinlib.tasks.population.spec import load_specs

TOKENIZER_MODELS: tuple[str, ...] = ("gpt-4", "gpt-4o")
BIN_MODEL = "gpt-4"  # length bins are measured with cl100k_base
VERBOSITY_COLUMNS = [
    "qid",
    "task",
    "bin_tokens",
    "rendering",
    "tokenizer",
    "N",
    "M",
    "M_over_N",
    "n_codes",
    "tokens_per_code",
    "saving_vs_descriptions",
]


def _count(text: str, model: str) -> int:
    return count_tokens(text, model)


def verbosity(questions: pd.DataFrame, models: Sequence[str] = TOKENIZER_MODELS) -> pd.DataFrame:
    """One row per (question, rendering, tokenizer) with N, M, M/N and tokens per code."""
    rows = []
    for model in models:
        tok = functools.lru_cache(maxsize=None)(functools.partial(_count, model=model))
        pairs = zip(questions["question"], questions["context"], strict=True)
        # N line by line: the prompts share most lines, each distinct one is encoded once
        counts = [count_by_lines(prompt_text(q, c), model) for q, c in pairs]
        for q, n in zip(questions.itertuples(index=False), counts, strict=True):
            concepts = json.loads(q.concepts)
            m = sum(tok(c) * k for c, k in concepts.items())
            rows.append(
                {
                    "qid": q.qid,
                    "task": q.task,
                    "bin_tokens": q.bin_tokens,
                    "rendering": q.rendering,
                    "tokenizer": encoding_for_model(model),
                    "N": n,
                    "M": m,
                    "M_over_N": m / n,
                    "n_codes": q.n_codes,
                    "tokens_per_code": m / max(q.n_codes, 1),
                }
            )
    out = pd.DataFrame(rows)
    base = out[out["rendering"] == "descriptions"].set_index(["qid", "tokenizer"])["N"]
    key = pd.MultiIndex.from_frame(out[["qid", "tokenizer"]])
    out["saving_vs_descriptions"] = 1.0 - out["N"].to_numpy() / base.reindex(key).to_numpy()
    return out[VERBOSITY_COLUMNS]


def verbosity_table(v: pd.DataFrame) -> pd.DataFrame:
    """Medians per (tokenizer, rendering): the table beside the seed's Fig. 1 statistics."""
    return (
        v.groupby(["tokenizer", "rendering"], sort=False)[
            ["N", "M", "M_over_N", "tokens_per_code", "saving_vs_descriptions"]
        ]
        .median()
        .reset_index()
    )


# --- notebook 17 helpers -------------------------------------------------------------------


def not_built(profile: str) -> str | None:
    """Why ``profile`` holds no population questions (its source is not synthetic), or None."""
    return not_applicable(source_kind(profile), load_specs())


def load_questions(profile: str) -> pd.DataFrame:
    """``population_questions.parquet`` of ``profile`` (empty when the stage does not apply)."""
    if not_built(profile):  # the stage does not apply to this source: an empty set, never a crash
        return pd.DataFrame(columns=["qid", "task", "rendering", "bin_tokens", "context"])
    return pd.read_parquet(build_dir(profile) / QUESTIONS_FILE)


def one_per_task(questions: pd.DataFrame) -> pd.DataFrame:
    """The first question of each task (descriptions rendering): size, bin, stem and gold."""
    one = questions[questions["rendering"] == "descriptions"].drop_duplicates("task")
    return one[["task", "qid", "n_patients", "bin_tokens", "question", "gold"]].reset_index(
        drop=True
    )


def side_by_side(questions: pd.DataFrame, qid: str, n_lines: int = 12) -> pd.DataFrame:
    """The first ``n_lines`` lines of one question's first record in each rendering."""
    out = {}
    for r in questions[questions["qid"] == qid].itertuples():
        text = r.context
        start = text.index("=== Patient ID:")
        out[r.rendering] = text[start:].splitlines()[:n_lines]
    return pd.DataFrame(out)


def codebook_head(questions: pd.DataFrame, qid: str, n_lines: int = 6) -> list[str]:
    row = questions[(questions["qid"] == qid) & (questions["rendering"] == "codebook")].iloc[0]
    return row["context"].splitlines()[:n_lines]


def scoreboard(preds: pd.DataFrame, questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean score per (task, backbone, rendering) with the parse-failure share (PopMedQA
    Fig. 6's per-task scoreboards; the IPW score is an absolute error, lower is better); with
    ``questions``, also the question-level, group-clustered and shared-patient intervals of
    :func:`clustered_scoreboard`."""
    board = (
        preds.groupby(["task", "backbone", "rendering"])
        .agg(
            n=("qid", "size"),
            score=("score", "mean"),
            score_lenient=("score_lenient", "mean"),
            parse_failed=("parse_failed", "mean"),
        )
        .reset_index()
    )
    if questions is None:
        return board
    cl = clustered_scoreboard(preds, questions)
    cols = ["q_low", "q_high", "group_low", "group_high", "patient_low", "patient_high"]
    keys = ["task", "backbone", "rendering"]
    return board.merge(cl.loc[cl["rendering"] != "all", keys + cols], on=keys, how="left")


def clustered_scoreboard(
    preds: pd.DataFrame, questions: pd.DataFrame, alpha: float = 0.05
) -> pd.DataFrame:
    """Mean score per (task, backbone), over all renderings and per rendering, with three
    95% normal intervals side by side: question-level (each (question, rendering) row alone),
    group-clustered (CR1 on the question's group) and shared-patient (overlap-robust). Rows
    with no score (an ATE reply that did not parse) are left out, counted in ``n_unscored``.

    How a population score is clustered (PopMedQA §2.1 draws each group from
    cohorts, so groups of one task reuse patients). Three candidate units:

    - the *group* (one question, all its renderings): the renderings of a question print the same
      patients, ask the same question and share the gold and any planted pattern, so a reader's
      scores on them move together; groups partition the rows, so the partition-based intervals of
      :mod:`clinlib.analysis.stats.cluster` (CR1, cluster bootstrap) apply. This is the unit.
    - the *cohort spec*: one spec per task, so inside a per-task cell it is a single cluster (no
      interval at all) and over all tasks about ten clusters of different metrics; rejected.
    - *shared patients*: two groups of a task share patients (on quick, 37 questions over 48
      distinct patients); the connected components of the patient-overlap graph collapse to one
      cluster, so no partition can hold them. Their correlation is bounded instead by the
      overlap-robust interval (:func:`clinlib.analysis.stats.cluster.overlap_robust_ci`), shown
      beside the group-clustered one. It needs pairs that share nobody: on quick (measured)
      nearly every pair of a task's groups shares a patient and it is undefined (NaN); on
      paper about half the pairs do and it is defined.
    """
    members = questions.drop_duplicates("qid").set_index("qid")["subject_ids"]
    rows = []
    pooled = preds.assign(rendering="all")
    for key, sub in pd.concat([pooled, preds]).groupby(["task", "backbone", "rendering"]):
        ok = sub[sub["score"].notna()]
        row = dict(
            zip(["task", "backbone", "rendering"], key, strict=True),
            n=len(ok),
            n_groups=ok["qid"].nunique(),
            n_unscored=len(sub) - len(ok),
        )
        if len(ok) >= 2:
            y = ok["score"].to_numpy(float)
            q = cluster_robust_ci(y, np.arange(len(y)), alpha)
            g = cluster_robust_ci(y, ok["qid"].to_numpy(), alpha)
            o = overlap_robust_ci(y, [set(members[x]) for x in ok["qid"]], alpha)
            row |= {
                "score": q.estimate,
                "q_low": q.low,
                "q_high": q.high,
                "group_low": g.low,
                "group_high": g.high,
                "patient_low": o.low,
                "patient_high": o.high,
                "pair_overlap": o.pair_overlap,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def verbosity_chart(v: pd.DataFrame) -> alt.FacetChart:
    """N and M per question by rendering, one panel per tokenizer (App. B)."""
    data = v.melt(
        id_vars=["qid", "rendering", "tokenizer", "bin_tokens"],
        value_vars=["N", "M"],
        var_name="measure",
        value_name="tokens",
    )
    return (
        alt.Chart()
        .mark_boxplot()
        .encode(
            x=alt.X("rendering:N", sort=list(RENDERINGS)),
            y=alt.Y("tokens:Q"),
            color="measure:N",
            xOffset="measure:N",
        )
        .facet(
            column=alt.Column("tokenizer:N"),
            data=data,
            title="prompt tokens N and coded-concept tokens M per rendering (App. B)",
        )
    )


def scoreboard_chart(board: pd.DataFrame) -> alt.FacetChart:
    """Per-task score by reader and rendering (the IPW panel is absolute error)."""
    return (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("rendering:N", sort=list(RENDERINGS)),
            y=alt.Y("score:Q"),
            color="backbone:N",
            xOffset="backbone:N",
            tooltip=["task", "backbone", "rendering", alt.Tooltip("score:Q", format=".3f")],
        )
        .facet(
            facet=alt.Facet("task:N"),
            columns=5,
            data=board,
            title="offline readers per task (not LLMs); P-IPW: absolute ATE error",
        )
        .resolve_scale(y="independent")
    )


def tokens_per_code_chart(v: pd.DataFrame) -> alt.LayerChart:
    """Tokens per coded event by rendering, beside the seed's 8-20 tokens per code as text
    (seed fact ``pmq_tokens_per_code``)."""
    lo, hi = (float(x) for x in seed_fact("pmq_tokens_per_code").values)
    band = pd.DataFrame({"lo": [lo], "hi": [hi], "label": ["PopMedQA: tokens per code as text"]})
    boxes = (
        alt.Chart(v)
        .mark_boxplot()
        .encode(
            x=alt.X("rendering:N", sort=list(RENDERINGS)),
            y=alt.Y("tokens_per_code:Q", title="tokens per coded event"),
            color="tokenizer:N",
            xOffset="tokenizer:N",
        )
    )
    seed = (
        alt.Chart(band)
        .mark_rect(opacity=0.15, color="gray")
        .encode(y="lo:Q", y2="hi:Q", tooltip=["label", "lo", "hi"])
    )
    return alt.layer(seed, boxes).properties(
        title="tokens per coded event vs PopMedQA's tokens per code as text (grey band)"
    )


def _scored(task: str, answer, gold) -> float:
    failed = np.nan if population_answer(task).lower_is_better else 0.0
    if answer is None:
        return failed
    try:
        return population_answer(task).metric(answer, gold)
    except (TypeError, ValueError, KeyError):
        return failed


def decomposition_scores(
    questions: pd.DataFrame, kb, draws: int = 20, seed: int = 0
) -> pd.DataFrame:
    """Decomposition resistance, measured per (question, rendering) row: the score of chance
    (``draws`` uniformly random answers of the task's format, averaged), of the per-patient
    baseline (:mod:`clinlib.eval.population.per_patient`) and of the group reader (the
    independent checker, :mod:`clinlib.tasks.population.checker`). An answer that does not
    parse scores 0 (NaN for the ATE's error)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in questions.itertuples():
        gold = json.loads(q.gold)
        pids = [str(p) for p in q.pids]
        chance = [
            _scored(q.task, chance_answer(q.task, q.question, pids, rng), gold)
            for _ in range(draws)
        ]
        rows.append(
            {
                "qid": q.qid,
                "task": q.task,
                "bin_tokens": int(q.bin_tokens),
                "rendering": q.rendering,
                "chance": float(np.nanmean(chance)),
                "per_patient": _scored(
                    q.task, per_patient_answer(q.task, q.question, q.context, kb), gold
                ),
                "group": _scored(q.task, check(q.task, q.question, q.context), gold),
            }
        )
    return pd.DataFrame(rows)


def decomposition_board(rows: pd.DataFrame) -> pd.DataFrame:
    """Per task, the mean of :func:`decomposition_scores` rows; ``gap_points`` is group minus
    per-patient in points (for the ATE's absolute error, per-patient minus group)."""
    board = rows.groupby("task").agg(
        n=("task", "size"),
        questions=("qid", "nunique"),
        chance=("chance", "mean"),
        per_patient=("per_patient", "mean"),
        group=("group", "mean"),
    )
    lower = board.index.map(lambda t: population_answer(t).lower_is_better)
    sign = np.where(lower, -1.0, 1.0)
    board["gap_points"] = 100 * sign * (board["group"] - board["per_patient"])
    board["lower_is_better"] = lower
    return board.reset_index()


def gate_totals(profile: str) -> pd.DataFrame:
    """The stage's gates summed over tasks and bins, in the order a draw meets them: one row
    per gate with the draws checked, failed and passed (``population_gates.parquet``)."""
    g = pd.read_parquet(build_dir(profile) / GATES_FILE)
    g = g[g["gate"].isin(GATE_ORDER)].groupby("gate")[["n_checked", "n_failed"]].sum()
    g = g.reindex(list(GATE_ORDER)).fillna(0).astype(int)
    g["n_passed"] = g["n_checked"] - g["n_failed"]
    return g.reset_index()


def chance_scores(questions: pd.DataFrame, draws: int = 20, seed: int = 0) -> pd.Series:
    """Per (question, rendering) row, the mean score of ``draws`` uniformly random answers of
    the task's format (the ATE: the answer 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in questions.itertuples():
        gold, pids = json.loads(q.gold), [str(p) for p in q.pids]
        s = [
            _scored(q.task, chance_answer(q.task, q.question, pids, rng), gold)
            for _ in range(draws)
        ]
        out.append(float(np.nanmean(s)))
    return pd.Series(out, index=questions.index)


def decomposition_from_answers(
    questions: pd.DataFrame,
    preds: pd.DataFrame,
    per_patient: str = "population-per-patient",
    group: str = "population-solver",
    draws: int = 20,
) -> pd.DataFrame:
    """The rows of :func:`decomposition_scores` with the per-patient baseline's and the group
    reader's scores taken from their answers through the harness (``preds``, direct prompt),
    so the stage reads each prompt once per reader; chance drawn here."""
    d = preds[preds["prompt"] == "direct"].set_index(["qid", "rendering", "backbone"])["score"]
    keys = list(zip(questions["qid"], questions["rendering"], strict=True))
    return pd.DataFrame(
        {
            "qid": questions["qid"].to_numpy(),
            "task": questions["task"].to_numpy(),
            "bin_tokens": questions["bin_tokens"].astype(int).to_numpy(),
            "rendering": questions["rendering"].to_numpy(),
            "chance": chance_scores(questions, draws).to_numpy(),
            "per_patient": [d.get((q, r, per_patient), np.nan) for q, r in keys],
            "group": [d.get((q, r, group), np.nan) for q, r in keys],
        }
    )


def decomposition_rows(profile: str, questions: pd.DataFrame, draws: int = 20) -> pd.DataFrame:
    """:func:`decomposition_scores` of ``questions`` with the per-patient baseline's clinical
    knowledge read from ``profile``'s events (the diagnosis map it applies per record)."""
    return decomposition_scores(
        questions, Knowledge.from_events(population_events(profile)), draws=draws
    )
