"""Where the answer was lost: evidence recall of every representation and the split of each
accuracy loss into representation vs reading (the retrieval hit@k of paper App.
C.2 generalised to every strategy, memories included; the compression-loss reading of §5).

**Evidence recall** of a question under a strategy: the share of the question's gold anchor
events (``anchor_event_ids``) whose id a tag group of the context names — the one matcher of
:mod:`clinlib.strategies.evidence`, the same the failure explorer highlights with. Questions
without an anchor and T9 (its anchors are absent from the dialogue by construction, as in
hit@k) are left out. A non-empty context with no tag group at all (a representation that
dropped the ids, e.g. ``with_ids=False`` or an LLM prep model) is NOT MEASURED (recall NaN,
``measurable`` False) rather than scored 0; an empty context (no-context-blind) holds nothing
and scores 0. For a question with an injected sentence (T3 positives, T5 controlled),
``injection_in_context`` says whether the sentence's text is in the context verbatim.

**Loss split** of a cell (strategy × backbone × setting × task), over its measured questions::

    accuracy + lost_representation + lost_reading = 1        (exactly)

- ``lost_representation``: answered wrong AND some anchor is missing from the context (the
  representation did not hold the evidence; "not in context");
- ``lost_reading``: answered wrong although every anchor is in the context ("in context,
  still wrong"), itself split by the ``oracle`` strategy's answer to the same question with the
  same backbone and setting: ``lost_reading_oracle_right`` (the reader answers from the
  evidence alone, so the rest of the context cost it the answer) + ``lost_reading_oracle_wrong``
  (the reader fails even on the evidence alone);
- ``oracle_accuracy``: the oracle's accuracy on the same questions — the reading ceiling, what
  this backbone reaches when the context holds the evidence and nothing else.

Errors and empty responses count as wrong (paper App. D1). Every share comes with the
question-level interval and the patient-clustered ones (:mod:`clinlib.analysis.stats.cluster`)
beside it. The offline readers are deterministic policies, not language models: their split
says how the kit's representations lose evidence, never how an LLM reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.stats.cluster import (
    CLUSTER_COLUMN,
    cluster_bootstrap_ci,
    cluster_robust_ci,
    question_clusters,
)
from clinlib.analysis.stats.question import StatsInputError, bootstrap_ci
from clinlib.core.config import build_dir
from clinlib.core.guards import predictions_basis
from clinlib.core.io import atomic_path
from clinlib.strategies.construction import question_contexts_many
from clinlib.strategies.evidence import anchor_ids, context_ids, has_tags, injection_of
from clinlib.strategies.footprints import EXCLUDED_TASKS
from clinlib.strategies.memory_protocol import MemoryServiceError
from clinlib.strategies.registry import (
    SERVICE_STRATEGIES,
    STRATEGIES,
    is_kit_strategy,
    parse_label,
)
from clinlib.tasks.settings import asked_questions

log = logging.getLogger("clinlib.analysis")

ORACLE = "oracle"
CACHE_DIR = "evidence"
CACHE_VERSION = 1  # bump when recall_of_contexts changes
ALL = "all"
LOST = ("correct", "representation", "reading", "not measured")
RECALL_COLUMNS: tuple[str, ...] = (
    "qid",
    "task",
    "strategy",
    "setting",
    "n_anchors",
    "n_present",
    "recall",
    "all_present",
    "measurable",
    "injection_in_context",
)


def recall_of_contexts(questions: pd.DataFrame, contexts: pd.DataFrame) -> pd.DataFrame:
    """Per-question evidence recall of given contexts (pure; see the module docstring).

    Args:
        questions: questions.parquet rows (qid, task, anchor_event_ids; injection optional).
        contexts: one row per (qid, strategy, setting) with the ``context`` text
            (:func:`clinlib.strategies.question_contexts`; ``label`` is used as the strategy
            when present, as predictions name strategies by label).

    Returns:
        :data:`RECALL_COLUMNS`, one row per context of an eligible question.
    """
    need = [c for c in ("qid", "strategy", "setting", "context") if c not in contexts.columns]
    if need:
        raise StatsInputError(f"recall_of_contexts: contexts lack column(s) {need}")
    qs = {r["qid"]: r for r in questions.to_dict("records")}
    rows = []
    memo: dict[str, tuple[set[str], bool]] = {}
    names = contexts["label"] if "label" in contexts.columns else contexts["strategy"]
    for qid, name, setting, ctx in zip(
        contexts["qid"], names, contexts["setting"], contexts["context"], strict=True
    ):
        if qid not in qs:
            raise StatsInputError(f"recall_of_contexts: qid {qid!r} is not in questions")
        q = qs[qid]
        anchors = anchor_ids(q)
        if q["task"] in EXCLUDED_TASKS or not anchors:
            continue
        text = "" if ctx is None else str(ctx)
        if text not in memo:  # query-independent strategies repeat one context per patient
            memo[text] = (set(context_ids(text)), has_tags(text))
        ids, tagged = memo[text]
        measurable = tagged or not text.strip()
        present = sum(a in ids for a in anchors)
        inj = injection_of(q)
        rows.append(
            {
                "qid": qid,
                "task": q["task"],
                "strategy": name,
                "setting": setting,
                "n_anchors": len(anchors),
                "n_present": present if measurable else np.nan,
                "recall": present / len(anchors) if measurable else np.nan,
                "all_present": (present == len(anchors)) if measurable else pd.NA,
                "measurable": measurable,
                "injection_in_context": pd.NA if inj is None else str(inj.get("text", "")) in text,
            }
        )
    out = pd.DataFrame(rows, columns=list(RECALL_COLUMNS))
    return out.astype(
        {
            "n_anchors": "int64",
            "n_present": "float64",
            "recall": "float64",
            "all_present": "boolean",
            "measurable": "bool",
            "injection_in_context": "boolean",
        }
    )


def _cache_path(
    questions: pd.DataFrame,
    strategy: str,
    setting: str,
    profile: str | None,
    prep: str,
    basis: dict,
) -> Path:
    """Where one (strategy, setting)'s recall is kept (see :func:`evidence_recall`)."""
    key = {
        "v": CACHE_VERSION,
        "basis": basis,
        "prep": prep,
        "setting": setting,
        "strategy": strategy,
        "code": STRATEGIES[parse_label(strategy)[0]].code_version,
        "qids": hashlib.sha256("|".join(map(str, questions["qid"])).encode()).hexdigest(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return build_dir(profile) / CACHE_DIR / f"recall-{digest}.parquet"


def evidence_recall(
    questions: pd.DataFrame,
    strategies: Sequence[str],
    profile: str | None = None,
    settings: Iterable[str] = ("post",),
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
    cache: bool = True,
) -> pd.DataFrame:
    """Per-question evidence recall of several strategies, building their contexts (cached
    constructions) exactly as the harness does for each setting (T3 only under ``pre``).

    With ``cache`` (and the profile's own dialogues) each (strategy, setting) table is kept
    under ``data/build/<profile>/evidence/``, keyed by the predictions basis (the artifacts
    the contexts are built from), the question ids, the strategy and its code version, the
    setting, the prep model and :data:`CACHE_VERSION`, so notebooks 05, 13 and 16 build each
    context once.
    """
    use_cache = cache and dialogues is None
    basis = predictions_basis(profile) if use_cache else {}
    frames = []
    for setting in settings:
        qs = asked_questions(questions, setting)
        if qs.empty:
            continue
        paths = {s: _cache_path(questions, s, setting, profile, prep, basis) for s in strategies}
        todo = [s for s in strategies if not (use_cache and paths[s].exists())]
        built = {}
        if todo:
            ctx = question_contexts_many(qs, todo, profile, setting, prep, dialogues=dialogues)
            built = {s: recall_of_contexts(questions, c) for s, c in zip(todo, ctx, strict=True)}
        for s in strategies:
            if s in built:
                if use_cache:
                    with atomic_path(paths[s]) as tmp:
                        built[s].to_parquet(tmp)
                frames.append(built[s])
            else:
                frames.append(pd.read_parquet(paths[s]))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(RECALL_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _shares(values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int) -> dict:
    """Mean with the question-level bootstrap CI and the patient-clustered ones."""
    boot = cluster_bootstrap_ci(values, clusters, n_boot, 0.05, seed)
    cr = cluster_robust_ci(values, clusters)
    q_lo, q_hi = (
        bootstrap_ci(values, np.mean, n_boot, 0.05, seed) if values.size > 1 else (np.nan, np.nan)
    )
    return {
        "estimate": boot.estimate,
        "n": boot.n,
        "n_clusters": boot.n_clusters,
        "q_low": q_lo,
        "q_high": q_hi,
        "boot_low": boot.low,
        "boot_high": boot.high,
        "cr_low": cr.low,
        "cr_high": cr.high,
    }


def _with_overall(frame: pd.DataFrame, task_col: str = "task") -> pd.DataFrame:
    """``frame`` plus a copy of its rows with ``task = "all"`` (the pooled row)."""
    return pd.concat([frame, frame.assign(**{task_col: ALL})], ignore_index=True)


def recall_table(
    per_question: pd.DataFrame,
    questions: pd.DataFrame,
    by: Sequence[str] = ("strategy", "setting", "task"),
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Evidence recall per group (default strategy × setting × task, plus ``task = "all"``).

    Returns:
        ``by`` + n (measured questions), n_clusters, n_unmeasured, recall (mean share of
        anchors present), q_low / q_high (question-level bootstrap), boot_low / boot_high
        (patient-cluster bootstrap), cr_low / cr_high (CR1), full_recall (share of questions
        with every anchor present).
    """
    by = list(by)
    clusters = question_clusters(questions)
    frame = per_question.assign(**{CLUSTER_COLUMN: per_question["qid"].map(clusters)})
    if "task" in by:
        frame = _with_overall(frame)
    rows = []
    for keys, grp in frame.groupby(by, sort=True):
        ok = grp[grp["measurable"].astype(bool)]
        row = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
        row["n_unmeasured"] = int(len(grp) - len(ok))
        if ok.empty:
            row.update(n=0, recall=np.nan, full_recall=np.nan)
            rows.append(row)
            continue
        s = _shares(ok["recall"].to_numpy(float), ok[CLUSTER_COLUMN].to_numpy(), n_boot, seed)
        row.update(
            n=s["n"],
            n_clusters=s["n_clusters"],
            recall=s["estimate"],
            q_low=s["q_low"],
            q_high=s["q_high"],
            boot_low=s["boot_low"],
            boot_high=s["boot_high"],
            cr_low=s["cr_low"],
            cr_high=s["cr_high"],
            full_recall=float(ok["all_present"].astype(bool).mean()),
        )
        rows.append(row)
    cols = [
        *by,
        "n",
        "n_clusters",
        "n_unmeasured",
        "recall",
        "q_low",
        "q_high",
        "boot_low",
        "boot_high",
        "cr_low",
        "cr_high",
        "full_recall",
    ]
    return pd.DataFrame(rows).reindex(columns=cols)


def lost_in(preds: pd.DataFrame, per_question: pd.DataFrame) -> pd.DataFrame:
    """``preds`` with ``lost_in`` (one of :data:`LOST`), ``recall`` and ``all_present``: where
    each prediction's answer was lost — ``correct``, ``representation`` (wrong, an anchor
    missing from its context), ``reading`` (wrong, every anchor in context), ``not measured``
    (no recall row: no anchor, T9, an id-less context, or a setting not measured).

    Predictions are matched to recall rows on (qid, strategy, setting); a wrong prediction is
    any whose ``correct`` is not True (errors and empties included, App. D1).
    """
    need = [c for c in ("qid", "strategy", "setting", "correct") if c not in preds.columns]
    if need:
        raise StatsInputError(f"lost_in: predictions lack column(s) {need}")
    key = ["qid", "strategy", "setting"]
    rec = per_question[per_question["measurable"].astype(bool)][[*key, "recall", "all_present"]]
    if rec.duplicated(key).any():
        raise StatsInputError(
            f"lost_in: recall rows repeat {rec[rec.duplicated(key)].iloc[0][key].to_dict()}"
        )
    base = preds.drop(columns=[c for c in ("recall", "all_present", "lost_in") if c in preds])
    out = base.merge(rec, on=key, how="left", validate="many_to_one")
    correct = out["correct"].fillna(False).astype(bool).to_numpy()
    present = out["all_present"].astype("boolean")
    lost = np.where(
        present.isna(),
        "not measured",
        np.where(correct, "correct", np.where(present.fillna(False), "reading", "representation")),
    )
    out["lost_in"] = lost
    out.index = preds.index
    return out


def label_losses(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    profile: str | None = None,
    prep: str = "rule-based",
    known: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`lost_in` for a run's predictions, measuring recall for the strategies and static
    settings they hold (the failure explorer's "lost in" filter; notebook 13).

    Only predictions whose contexts this prep model builds (``prep_model`` ``prep`` or
    ``none``) are matched; the others are ``not measured``. ``known``: recall rows already
    measured (the ``evidence`` stage's artifact, :data:`RECALL_COLUMNS`); a strategy it holds
    for every setting of the predictions is taken from it, not measured again.

    Returns:
        (predictions with ``lost_in``, the per-question recall it used).
    """
    settings = [s for s in ("post", "pre") if s in set(preds["setting"])]
    known = known if known is not None else pd.DataFrame(columns=list(RECALL_COLUMNS))
    have = set(zip(known["strategy"], known["setting"], strict=True))
    covered = {s for s in set(known["strategy"]) if all((s, st) in have for st in settings)}
    # Strategies answered on the same questions share one context build; a variant asked on a
    # subset (notebook 11's K sweep) is measured on that subset only.
    groups: dict[tuple, list[str]] = {}
    for name, qids in preds.groupby("strategy")["qid"]:
        if not is_kit_strategy(str(name)) or str(name) in covered:
            continue  # an outside system's memory (not measured), or measured already
        # an outside memory service (read back from the run's read log) is measured alone,
        # so a context it cannot give leaves only its own rows unmeasured
        alone = (str(name),) if parse_label(str(name))[0] in SERVICE_STRATEGIES else ()
        groups.setdefault((*alone, *sorted(set(qids))), []).append(str(name))
    frames = [known[known["strategy"].isin(covered)]]
    for key, names in groups.items():
        qs = questions[questions["qid"].isin(set(key))]
        try:
            frames.append(evidence_recall(qs, names, profile, settings, prep))
        except MemoryServiceError as exc:
            log.warning("%s: not measured (%s)", ", ".join(names), exc)
    frames = [f for f in frames if not f.empty]
    per_q = (
        pd.concat(frames, ignore_index=True)
        if frames
        else recall_of_contexts(
            questions, pd.DataFrame(columns=["qid", "strategy", "setting", "context"])
        )
    )
    out = lost_in(preds, per_q)
    if "prep_model" in out.columns:
        other = ~out["prep_model"].astype(str).isin([prep, "none"])
        out.loc[other, ["recall", "all_present"]] = np.nan
        out.loc[other, "lost_in"] = "not measured"
    return out, per_q


SPLIT_SHARES = ("lost_representation", "lost_reading")


def _split_row(g: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """One cell's shares of :func:`loss_split` and their two bootstrap intervals."""
    row: dict = {}
    lost = g["lost_in"].to_numpy()
    oc = g["oracle_correct"]
    has_o = oc.notna().all()
    ocb = oc.fillna(False).astype(bool).to_numpy()
    reading = lost == "reading"
    acc = float(np.mean(lost == "correct"))
    row.update(
        n=len(g),
        n_clusters=int(g[CLUSTER_COLUMN].nunique()),
        accuracy=acc,
        loss=1.0 - acc,
        lost_representation=float(np.mean(lost == "representation")),
        lost_reading=float(np.mean(reading)),
        lost_reading_oracle_right=float(np.mean(reading & ocb)) if has_o else np.nan,
        lost_reading_oracle_wrong=float(np.mean(reading & ~ocb)) if has_o else np.nan,
        correct_without_evidence=float(
            np.mean((lost == "correct") & ~g["all_present"].astype(bool))
        ),
        oracle_accuracy=float(ocb.mean()) if has_o else np.nan,
    )
    cl = g[CLUSTER_COLUMN].to_numpy()
    for share, name in (
        (lost == "representation", "lost_representation"),
        (reading, "lost_reading"),
    ):
        s = _shares(share.astype(float), cl, n_boot, seed)
        for b in ("q_low", "q_high", "boot_low", "boot_high"):
            row[f"{name}_{b}"] = s[b]
    return row


def loss_split(
    preds: pd.DataFrame,
    per_question: pd.DataFrame,
    questions: pd.DataFrame,
    oracle: str = ORACLE,
    by: Sequence[str] = ("strategy", "backbone", "setting", "task"),
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """The representation-vs-reading split of every cell's accuracy loss (module docstring).

    Args:
        preds: predictions (qid, strategy, backbone, setting, task, correct).
        per_question: :func:`evidence_recall` rows for the same strategies and settings.
        questions: questions.parquet rows (patient clusters).
        oracle: the strategy label whose answers give the reading ceiling.
        by: the cell (``task`` also gets the pooled ``all`` row).

    Returns:
        ``by`` + n, n_clusters, accuracy, loss (1 - accuracy), lost_representation,
        lost_reading, lost_reading_oracle_right, lost_reading_oracle_wrong,
        correct_without_evidence (right although an anchor was missing), oracle_accuracy (NaN
        without oracle predictions), and for each of lost_representation / lost_reading its
        question-level bootstrap interval (``*_q_low`` / ``*_q_high``) and patient-clustered
        bootstrap interval (``*_boot_low`` / ``*_boot_high``). Rows are measured questions
        only; a cell without any is left out.
    """
    by = list(by)
    tagged = lost_in(preds, per_question)
    tagged = tagged[tagged["lost_in"] != "not measured"].copy()
    cols = [
        *by,
        "n",
        "n_clusters",
        "accuracy",
        "loss",
        *SPLIT_SHARES,
        "lost_reading_oracle_right",
        "lost_reading_oracle_wrong",
        "correct_without_evidence",
        "oracle_accuracy",
        *(f"{s}_{b}" for s in SPLIT_SHARES for b in ("q_low", "q_high", "boot_low", "boot_high")),
    ]
    if tagged.empty:
        return pd.DataFrame(columns=cols)
    o = preds[preds["strategy"] == oracle][["qid", "backbone", "setting", "correct"]]
    o = o.rename(columns={"correct": "oracle_correct"}).drop_duplicates(
        ["qid", "backbone", "setting"]
    )
    tagged = tagged.merge(o, on=["qid", "backbone", "setting"], how="left")
    tagged[CLUSTER_COLUMN] = tagged["qid"].map(question_clusters(questions))
    if "task" in by:
        tagged = _with_overall(tagged)
    rows = []
    for keys, g in tagged.groupby(by, sort=True):
        row = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
        rows.append(row | _split_row(g, n_boot, seed))
    return pd.DataFrame(rows).reindex(columns=cols)


def recall_chart(table: pd.DataFrame, setting: str = "post") -> alt.Chart:
    """Evidence recall per strategy × task (heat map, ``all`` last), one setting."""
    data = table[table["setting"] == setting].dropna(subset=["recall"])
    tasks = sorted(t for t in data["task"].unique() if t != ALL) + [ALL]
    base = alt.Chart(data, title=f"Evidence recall: share of anchor events in context ({setting})")
    enc = dict(
        x=alt.X("task:N", sort=tasks, title=None),
        y=alt.Y(
            "strategy:N",
            title=None,
            sort=alt.EncodingSortField("recall", "max", order="descending"),
        ),
    )
    heat = base.mark_rect().encode(
        **enc,
        color=alt.Color("recall:Q", title="recall", scale=alt.Scale(domain=[0, 1], scheme="blues")),
        tooltip=[
            "strategy",
            "task",
            "n",
            alt.Tooltip("recall:Q", format=".3f"),
            alt.Tooltip("boot_low:Q", format=".3f"),
            alt.Tooltip("boot_high:Q", format=".3f"),
        ],
    )
    text = base.mark_text(fontSize=9).encode(
        **enc,
        text=alt.Text("recall:Q", format=".2f"),
        color=alt.condition(alt.datum.recall > 0.6, alt.value("white"), alt.value("black")),
    )
    return (heat + text).properties(width=30 * len(tasks), height=22 * data["strategy"].nunique())


def loss_chart(split: pd.DataFrame, backbone: str, setting: str = "post") -> alt.Chart:
    """One backbone's pooled (``task = all``) split per strategy: stacked bars of accuracy,
    lost in representation, lost in reading (the three sum to 1), oracle accuracy ticked."""
    pooled = split[
        (split["backbone"] == backbone) & (split["setting"] == setting) & (split["task"] == ALL)
    ]
    long = pooled.melt(
        id_vars=["strategy"],
        value_vars=["accuracy", *SPLIT_SHARES],
        var_name="part",
        value_name="share",
    )
    order = list(pooled.sort_values("accuracy", ascending=False)["strategy"])
    bars = (
        alt.Chart(long, title=f"Where the answer was lost ({backbone}, {setting})")
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", sort=order, title=None),
            x=alt.X(
                "share:Q",
                stack="zero",
                title="share of measured questions",
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("part:N", sort=["accuracy", *SPLIT_SHARES], title=None),
            tooltip=["strategy", "part", alt.Tooltip("share:Q", format=".3f")],
        )
    )
    tick = (
        alt.Chart(pooled.dropna(subset=["oracle_accuracy"]))
        .mark_tick(color="black", thickness=2, size=16)
        .encode(y=alt.Y("strategy:N", sort=order), x="oracle_accuracy:Q")
    )
    return (bars + tick).properties(width=360, height=22 * max(1, len(order)))
