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

from collections import Counter

import pandas as pd

from clinlib.tasks.build import per_patient_cap, select_task


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
