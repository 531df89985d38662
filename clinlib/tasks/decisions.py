"""Selection and leak check of the extended T11 set (long-horizon decisions; LongMedBench
its decision task, T3-N / T3-A / T3-D; the generator's spec is :mod:`clinlib.tasks.generators.t11`). Nothing here touches
T1–T9.

Selection: the task's count is split evenly over its three subtypes; next-action and argument
questions are selected like any task's (:func:`clinlib.tasks.build.select_task`: stratified by
disease and complexity tertile, the per-patient cap, a seeded order); discharge questions are
selected half with gold yes, half with gold no (a cut within six hours of discharge is rarer
than one before it; an unbalanced set would let a constant "no" look accurate), the remainder
of a short half going to the other.

L3 (the cut never leaks the answer) for T11: the stated stay holds only events BEFORE the cut
(every ``YYYY-MM-DD HH:MM`` line of the stem is earlier than ``meta.cut_time``), no discharge
line, and the stem's "It is now" is the cut's minute. What the history representation adds
is the harness's side: ``history-visits(m=...)`` shows only visits before the current one
(:mod:`clinlib.strategies.window`). The rule lives with T10's in
:mod:`clinlib.tasks.gates.ordering`.
"""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from clinlib.tasks.answers.kinds import AnswerKind


def _split(count: int) -> dict[str, int]:
    base, rest = divmod(int(count), 3)
    out = {"next_action": base, "argument": base, "discharge": base}
    for s in ("next_action", "argument", "discharge")[:rest]:
        out[s] += 1
    return out


def select_t11(
    cands: pd.DataFrame, task: str, count: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """Select ``count`` T11 questions (module docstring), with
    :func:`clinlib.tasks.build.select_task`'s return shape."""
    # imported here: the T11 task module reads this module's answer kind while the task
    # registry (which clinlib.tasks.build reads) is loading
    from clinlib.tasks.build import per_patient_cap, select_task

    want = _split(count)
    parts, avails, missing = [], [], 0
    # the subtypes are selected apart, under the whole task's per-patient cap (gate L4's share)
    cap, taken = per_patient_cap(count), Counter()

    def pick(group: pd.DataFrame, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        sel, avail, _ = select_task(group, task, n, seed, cap=cap, taken=taken)
        taken.update(int(s) for ids in sel["subject_ids"] for s in ids)
        return sel, avail

    for subtype in ("next_action", "argument"):
        sub = cands[cands["subtype"] == subtype].reset_index(drop=True)
        sel, avail = pick(sub, want[subtype])
        parts.append(sel)
        avails.append(avail[avail["subtype"] == subtype])
        missing += want[subtype] - len(sel)
    dis = cands[cands["subtype"] == "discharge"]
    yes = dis[dis["gold"].astype(str) == "A"].reset_index(drop=True)
    no = dis[dis["gold"].astype(str) != "A"].reset_index(drop=True)
    n_yes = min(len(yes), want["discharge"] // 2 + want["discharge"] % 2)
    n_no = min(len(no), want["discharge"] - n_yes)
    n_yes = min(len(yes), want["discharge"] - n_no)
    sel_d = [pick(g, n)[0] for g, n in ((yes, n_yes), (no, n_no)) if n > 0]
    parts += sel_d
    n_d = sum(len(s) for s in sel_d)
    missing += want["discharge"] - n_d
    avails.append(
        pd.DataFrame(
            [(task, "discharge", len(dis), want["discharge"], n_d)], columns=avails[0].columns
        )
    )
    out = pd.concat(parts, ignore_index=True).sort_values("qid", kind="stable")
    short = None
    if missing > 0:
        short = {
            "task": task,
            "target": int(count),
            "available": int(len(cands)),
            "selected": int(len(out)),
            "missing": int(missing),
        }
    return out.reset_index(drop=True), pd.concat(avails, ignore_index=True), short


# --- the open-ended variant (T11O): next action and argument as free text ------------------
# LongMedBench asks T3-N / T3-A open-ended and credits "actions E_24h, events that occur within
# 24h after t_GT" by time decay (its Figure 2). Gold (canonical): the ground-truth text, then
# every other credited entry as ``|<text>=<credit>``: ``"Potassium|Sodium=0.9583"``. An entry is
# an action kind (``lab test``, ``medication order``, ``procedure``) or an argument (a lab's
# panel name, a drug's recorded name, a procedure's title).
KIND_WORDS = {
    "lab test": ("lab", "labs", "lab test", "laboratory", "blood test", "blood draw"),
    "medication order": ("medication", "medications", "drug", "prescription", "medication order"),
    "procedure": ("procedure", "procedures"),
}
_OPEN_GOLD_RE = re.compile(r"[^|=]+(?:\|[^|=]+=(?:0|1)\.\d{4})*")


def words(text: object) -> str:
    """Lower-case alphanumeric words of a text, single-spaced."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", str(text).lower()).split())


def split_open_gold(gold: str) -> dict[str, float]:
    """entry text -> credit of an open gold (the first entry = 1)."""
    first, *rest = gold.split("|")
    out = {first.strip(): 1.0}
    for part in rest:
        text, value = part.rsplit("=", 1)
        out[text.strip()] = float(value)
    return out


def open_gold_problem(gold: object, options: list[str] | None = None) -> str | None:
    """Why ``gold`` is not a canonical open T11 gold (None when it is)."""
    if not isinstance(gold, str) or not _OPEN_GOLD_RE.fullmatch(gold):
        return "not '<text>' followed by '|<text>=<credit>' parts"
    if any(float(v) > 1 for v in split_open_gold(gold).values()):
        return "a credit above 1"
    return None


def _kind_of(answer: str) -> str | None:
    """The one action kind an answer names (None: none or several)."""
    w = f" {words(answer)} "
    named = {k for k, syn in KIND_WORDS.items() if any(f" {s} " in w for s in syn)}
    return named.pop() if len(named) == 1 else None


def open_score(parsed: str | None, gold: str) -> float:
    """The credit of an open answer: a next action is the one kind it names; an argument
    matches the LONGEST entry whose words begin it (``Heparin 5000 UNIT SC`` matches
    ``Heparin``; ``Potassium`` does not match ``Potassium Chloride``); 0 otherwise."""
    if parsed is None:
        return 0.0
    credits = split_open_gold(gold)
    if set(credits) <= set(KIND_WORDS):
        kind = _kind_of(parsed)
        return credits.get(kind, 0.0) if kind else 0.0
    w = words(parsed)
    hits = [e for e in credits if words(e) and (w == words(e) or w.startswith(words(e) + " "))]
    return credits[max(hits, key=lambda e: len(words(e)))] if hits else 0.0


def _open_read(text: str, options: list[str] | None = None) -> str | None:
    line = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
    line = re.sub(r"^(?:answer|the next action is|next action)\s*[:\-]?\s*", "", line, flags=re.I)
    line = line.strip(" .;:\"'")
    return line or None


OPEN_DECISION = AnswerKind(
    "text",
    _open_read,
    _open_read,
    open_gold_problem,
    lambda parsed, gold: open_score(parsed, gold) >= 1.0,
    grade=open_score,
)
