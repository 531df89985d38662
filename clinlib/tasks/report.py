"""Tables, text views and charts for notebook 03 (paper §3 "Task suite" / "Evaluation set",
Fig. 1; Appendix A gates; Appendix B subtype strata; §5.5 the T3 injection probe).

Everything returns a DataFrame, a string or an altair chart, so the notebook stays a few calls
per cell. :func:`load_question_set` reads questions.parquet, gates.parquet and
question_availability.parquet of a profile and builds them when they are missing.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence

import altair as alt
import pandas as pd

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.plots import PALETTE
from clinlib.tasks import rules
from clinlib.tasks.build import build_questions
from clinlib.tasks.generators.common import stable_hash
from clinlib.tasks.injections import Injection, apply_injections
from clinlib.tasks.registry import get_spec

SPEAKER = {"patient": "Patient", "clinician": "Clinician"}
EVIDENCE_MARK = ">> "
CONTEXT_TURNS = 2

# Splits the paper reports in its text (§3, Fig. 5, Appendix B.2 / B.6): (task, group,
# subtypes in the group, paper count).
PAPER_SPLITS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("T3", "yes (injected)", ("Y-admit", "Y-er"), 300),
    ("T3", "no", ("N-admit", "N-er"), 300),
    (
        "T5",
        "yes (controlled contradiction)",
        ("controlled_dx_presence", "controlled_procedure", "controlled_lab_value"),
        455,
    ),
    ("T5", "no (control + natural)", ("controlled_control", "natural_c2_lab_non_glucose"), 40),
    ("T9", "lab", ("lab", "lab-unmeasured"), 1147),
    ("T9", "other", ("other",), 353),
)


def load_question_set(profile: str | None = None, build: bool = True) -> dict[str, pd.DataFrame]:
    """The evaluation set of a profile: ``{"questions", "gates", "availability"}``.

    Args:
        profile: build profile (default $CLINTRACE_PROFILE, else quick).
        build: build the set (clinlib.tasks.build.build_questions) when it is missing.
    """
    name = resolve_profile(profile)
    paths = {
        "questions": artifact_path("questions.parquet", name),
        "gates": artifact_path("gates.parquet", name),
        "availability": artifact_path("question_availability.parquet", name),
    }
    if not all(p.exists() for p in paths.values()):
        if not build:
            missing = [str(p) for p in paths.values() if not p.exists()]
            raise FileNotFoundError(f"{missing[0]} does not exist; build the question set first")
        return build_questions(name)
    return {k: pd.read_parquet(p) for k, p in paths.items()}


# --------------------------------------------------------------------------- tables


def task_counts(questions: pd.DataFrame, targets: dict[str, int] | None = None) -> pd.DataFrame:
    """Per task: title, questions built, the profile's target and the paper's count (§3)."""
    got = questions["task"].value_counts()
    rows = []
    for t, paper in rules.PAPER_COUNTS.items():
        rows.append(
            {
                "task": t,
                "title": get_spec(t).title,
                "questions": int(got.get(t, 0)),
                "target": int((targets or {}).get(t, paper)),
                "paper": paper,
                "share": float(got.get(t, 0)) / max(len(questions), 1),
                "paper_share": paper / sum(rules.PAPER_COUNTS.values()),
            }
        )
    return pd.DataFrame(rows)


def subtype_counts(availability: pd.DataFrame) -> pd.DataFrame:
    """Per task x subtype: candidates generated, quota and questions selected."""
    return availability[["task", "subtype", "candidates", "quota", "selected"]].copy()


def paper_splits(questions: pd.DataFrame) -> pd.DataFrame:
    """The splits the paper reports (T3 yes/no, T5 455/40, T9 lab/other) beside ours, as
    counts and shares within the task."""
    rows = []
    for task, group, subtypes, paper in PAPER_SPLITS:
        q = questions[questions["task"] == task]
        n = int(q["subtype"].isin(subtypes).sum())
        total_paper = sum(p for t, _, _, p in PAPER_SPLITS if t == task)
        rows.append(
            {
                "task": task,
                "group": group,
                "questions": n,
                "share": n / max(len(q), 1),
                "paper": paper,
                "paper_share": paper / total_paper,
            }
        )
    return pd.DataFrame(rows)


def gate_matrix(gates: pd.DataFrame) -> pd.DataFrame:
    """Gate x task table of ``failed/checked`` (``PASS`` marks, ``!`` a failed gate)."""
    g = gates.copy()
    g["cell"] = [
        f"{int(f)}/{int(c)}" + ("" if bool(p) else " !")
        for f, c, p in zip(g["n_failed"], g["n_checked"], g["passed"], strict=True)
    ]
    return g.pivot_table(index="gate", columns="task", values="cell", aggfunc="first").fillna("")


# --------------------------------------------------------------------------- text views


def example_questions(questions: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """One question per task (a seeded, stable choice), in task order."""
    q = questions.copy()
    q["_k"] = [stable_hash(seed, "example", x) for x in q["qid"]]
    picked = q.sort_values(["task", "_k"]).groupby("task", sort=True).head(1)
    return picked.drop(columns="_k").reset_index(drop=True)


def _as_list(x) -> list:
    """A list column value (a list, or a numpy array once read back from parquet)."""
    return [] if x is None else list(x)


def _plain_line(r: dict) -> str:
    return f"{SPEAKER.get(r['speaker'], r['speaker'])}: {r['text']}"


def _turn_line(r: dict, mark: bool, with_ids: bool) -> str:
    text = r.get("text_tagged") if with_ids and r.get("text_tagged") else r["text"]
    prefix = EVIDENCE_MARK if mark else " " * len(EVIDENCE_MARK)
    return f"{prefix}[{int(r['turn_idx'])}] {SPEAKER.get(r['speaker'], r['speaker'])}: {text}"


def evidence_view(
    question: pd.Series | dict, turns: pd.DataFrame, context: int = CONTEXT_TURNS
) -> str:
    """The question, its gold and the dialogue turns around its evidence (marked ``>>``).

    T9 questions have no evidence turn by construction; the view then shows the start of
    the encounter the question is about, where the asked fact is absent.
    """
    q = dict(question)
    lines = [f"{q['qid']}  ({q['task']} / {q['subtype']})", f"Q: {q['question']}"]
    lines.append(f"gold: {q['gold']}")
    ev = _as_list(q.get("evidence_turns"))
    by_subject: dict[int, set[int]] = {}
    for tag in ev:
        sid, t = tag.split(":")
        by_subject.setdefault(int(sid), set()).add(int(t))
    if not by_subject:
        meta = json.loads(q["meta"])
        sid = int(q["subject_ids"][0])
        visit = meta.get("visit_idx")
        p = turns[turns["subject_id"] == sid]
        if visit is not None:
            p = p[p["visit_idx"] == int(visit)]
        lines.append(f"-- patient {sid}: no turn states the asked fact; the encounter opens:")
        lines += [_turn_line(r, False, True) for r in p.head(2 * context + 1).to_dict("records")]
        return "\n".join(lines)
    for sid, marked in sorted(by_subject.items()):
        p = turns[turns["subject_id"] == sid].sort_values("turn_idx")
        keep = {t + d for t in marked for d in range(-context, context + 1)}
        lines.append(f"-- patient {sid}:")
        last = None
        for r in p[p["turn_idx"].isin(keep)].to_dict("records"):
            if last is not None and int(r["turn_idx"]) != last + 1:
                lines.append("   ...")
            lines.append(_turn_line(r, int(r["turn_idx"]) in marked, True))
            last = int(r["turn_idx"])
    return "\n".join(lines)


def injection_diff(turns: pd.DataFrame, questions: pd.DataFrame, task: str, seed: int = 0) -> str:
    """A unified diff (difflib) of one encounter before and after one of ``task``'s
    injections (the first injected question in a seeded order)."""
    q = questions[(questions["task"] == task) & (questions["injection"].astype(str) != "")]
    if q.empty:
        return f"{task}: no injected question in this set"
    q = q.assign(_k=[stable_hash(seed, "diff", x) for x in q["qid"]]).sort_values("_k")
    inj = Injection.from_json(str(q["injection"].iloc[0]))
    visit = turns[(turns["subject_id"] == inj.subject_id) & (turns["visit_idx"] == inj.visit_idx)]
    after = apply_injections(visit, [inj])
    a = [_plain_line(r) for r in visit.sort_values("turn_idx").to_dict("records")]
    b = [_plain_line(r) for r in after.to_dict("records")]
    head = (
        f"{q['qid'].iloc[0]}: {task} injection into patient {inj.subject_id}, visit "
        f"{inj.visit_idx}, after turn {inj.after_turn_idx}"
    )
    diff = difflib.unified_diff(a, b, "original", "injected", n=2, lineterm="")
    return head + "\n" + "\n".join(diff)


# --------------------------------------------------------------------------- charts


def counts_chart(questions: pd.DataFrame) -> alt.Chart:
    """Share of the question set per task: this build vs the paper's 6,271 (§3)."""
    t = task_counts(questions)
    long = pd.concat(
        [
            t.assign(source="this build", value=t["share"]),
            t.assign(source="paper (6,271)", value=t["paper_share"]),
        ]
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("task:N", title=None),
            xOffset="source:N",
            y=alt.Y("value:Q", title="share of questions", axis=alt.Axis(format="%")),
            color=alt.Color("source:N", title=None),
            tooltip=["task", "title", "source", alt.Tooltip("value:Q", format=".1%")],
        )
        .properties(title="Questions per task", width=360, height=200)
    )


def subtype_chart(availability: pd.DataFrame, tasks: Sequence[str] | None = None) -> alt.Chart:
    """Selected questions per subtype, one small panel per task."""
    a = availability if tasks is None else availability[availability["task"].isin(tasks)]
    return (
        alt.Chart(a)
        .mark_bar()
        .encode(
            y=alt.Y("subtype:N", title=None, sort=None),
            x=alt.X("selected:Q", title="questions"),
            color=alt.value(PALETTE[0]),
            tooltip=["task", "subtype", "candidates", "quota", "selected"],
        )
        .properties(width=150, height=alt.Step(12))
        .facet(facet=alt.Facet("task:N", title=None), columns=3)
        .resolve_scale(y="independent", x="independent")
        .properties(title="Questions per subtype (Appendix B strata)")
    )


def gate_chart(gates: pd.DataFrame) -> alt.Chart:
    """Failure rate per gate and task; hard gates must sit below their threshold."""
    g = gates[gates["gate"].str.match(r"L\d")].copy()
    g["rate"] = g["n_failed"] / g["n_checked"].clip(lower=1)
    return (
        alt.Chart(g)
        .mark_rect()
        .encode(
            x=alt.X("task:N", title=None),
            y=alt.Y("gate:N", title=None),
            color=alt.Color("rate:Q", title="failure rate", scale=alt.Scale(scheme="reds")),
            tooltip=["gate", "task", "n_checked", "n_failed", "passed", "detail"],
        )
        .properties(title="Validation gates L0–L4 (Appendix A)", width=300, height=110)
    )
