"""T7I's selection (named by its spec as a string, so the task module does not import the
selection machinery while the registry loads)."""

from __future__ import annotations

import pandas as pd

from clinlib.tasks import rules
from clinlib.tasks.relative import select_t1r


def select_t7i(
    cands: pd.DataFrame, task: str, count: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """T1R's pair selection (:func:`clinlib.tasks.relative.select_t1r`) run per gold letter,
    a quarter of the pairs each, so every letter is the answer equally often in the selected
    set and a reader that always picks one letter (or the first option it finds in the
    memory) is held at chance; :func:`select_t1r`'s return shape."""
    n_pairs, parts, avails, shorts = int(count) // 2, [], [], []
    for i, letter in enumerate(rules.OPTION_LETTERS):
        want = 2 * (n_pairs // 4 + (1 if i < n_pairs % 4 else 0))
        group = cands[cands["gold"] == letter]
        if want == 0 or group.empty:
            shorts.append(want)
            continue
        out, avail, short = select_t1r(group, task, want, seed)
        parts.append(out)
        avails.append(avail)
        shorts.append(short["missing"] if short else 0)
    chosen = pd.concat(parts, ignore_index=True).sort_values("qid", kind="stable")
    avail = pd.concat(avails, ignore_index=True)
    avail = avail.groupby(["task", "subtype"], as_index=False, sort=False).sum(numeric_only=True)
    missing = sum(shorts)
    short = None
    if missing:
        short = {
            "task": task,
            "target": int(count),
            "available": len(cands),
            "selected": len(chosen),
        }
        short["missing"] = int(count) - len(chosen)
    return chosen.reset_index(drop=True), avail, short
