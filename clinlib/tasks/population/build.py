"""The population stage: questions, their three renderings, the solver gate and the other gates
(PopMedQA App. C), written to ``population_questions.parquet`` and ``population_gates.parquet``.

Gates (as for T1-T9, seeded and reproducible), in the order a draw meets them:

- ``length``: the descriptions rendering's measured length lies within ``BIN_TOLERANCE`` of its
  bin (the seed bins lengths "as text"); measured first, on the descriptions rendering alone,
  so a draw that cannot fit its bin is neither rendered twice more nor checked. A draw too long
  (short) for its bin retires its group size and every larger (smaller) one from the cell;
- ``structure``: every record of the group is printed in every rendering and parses back;
- ``leakage``: no subject id, cohort role name or planted-pattern word in any prompt;
- ``agreement``: the checker (:mod:`.checker`, an independent code path from the prompt text
  alone) reaches the recipe's gold in every rendering; a question it does not is dropped;
- ``distribution``: yes/no golds of P-TST and P-ICC are not one-sided, and every (task, bin)
  cell holds at least one question (else a ``shortfall`` row says why).

A question that fails a gate is retried with the next seed (``MAX_ATTEMPTS``).

Sources. Every task's gold comes from a pattern planted into the group's records (a spec's
``plant`` table; :mod:`.plant`), so population questions need the synthetic source: the kit
does not plant synthetic signatures into real patients' records (MIMIC-IV, MEDS), since the
result would no longer be those patients' records and a reader could not tell which events
were real. On such a source the stage writes no questions, records why in
``manifests/population.json`` (status ``not_applicable``) and returns empty frames; the CLI
prints that one line and exits 0, as a stage that does not apply (not an empty result).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from itertools import cycle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.config import artifact_path, build_dir, resolve_profile
from clinlib.core.guards import MANIFEST_DIR, StageError
from clinlib.core.io import read_artifact, write_parquet
from clinlib.tasks.population.checker import check_key, check_many
from clinlib.tasks.population.describe import describe_events
from clinlib.tasks.population.groups import attributes, sample_cohorts
from clinlib.tasks.population.questions import (
    BIN_TOLERANCE,
    PAPER_BINS,
    QUICK_BINS,
    is_perfect,
    make_question,
    render_rest,
    score,
)
from clinlib.tasks.population.render import RENDERINGS, record_ids
from clinlib.tasks.population.spec import TaskIdea, load_specs

QUESTIONS_FILE = "population_questions.parquet"
GATES_FILE = "population_gates.parquet"
# the checker's answer to every kept (question, rendering), keyed by its input's digest
# (checker.check_key): the group reader of population-eval reads it instead of solving again
CHECKS_FILE = "population_checks.parquet"
PER_CELL = {
    "quick": 2,
    "paper": 12,
}  # paper: 12 x 10 tasks x 5 bins, >= 500 kept after shortfalls (PopMedQA's scale, §2)
MAX_ATTEMPTS = 12
TOKENS_PER_PATIENT = 5_000  # a typical full record as descriptions (cl100k_base), for sizes_for
MIN_DISTRIBUTION = 6  # yes/no golds checked for one-sidedness from this many on
LEAK_WORDS: tuple[str, ...] = ("clique", "outlier", "planted", "PLANT-", "subject_id", "tertile")
GATE_ORDER: tuple[str, ...] = ("length", "structure", "leakage", "agreement")
GATE_COLUMNS = ["gate", "task", "bin_tokens", "n_checked", "n_failed", "detail"]


PLANT_SOURCES: tuple[str, ...] = ("synthetic",)  # sources whose records the stage may plant
STATUS_FILE = "population.json"  # under manifests/: ok or not_applicable, with the reason


def not_applicable(source: str, specs: Sequence[TaskIdea]) -> str | None:
    """Why population questions cannot be built on a ``source`` build (None when they can)."""
    if source in PLANT_SOURCES or not any(spec.plant for spec in specs):
        return None
    return (
        f"population questions need the synthetic source: each task's gold is a pattern planted "
        f"into the records, and the kit does not plant into a {source} source's real records"
    )


def population_status(profile: str | None = None) -> dict[str, Any]:
    """The stage's status manifest of ``profile`` (``{}`` before the stage has run)."""
    path = build_dir(resolve_profile(profile)) / MANIFEST_DIR / STATUS_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def checker_answers(profile: str) -> dict[str, str]:
    """:data:`CHECKS_FILE` of ``profile`` as key -> the checker's answer (JSON); empty on a
    build made before the file existed."""
    path = build_dir(resolve_profile(profile)) / CHECKS_FILE
    if not path.exists():
        return {}
    return _read_checks(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _read_checks(path: str, mtime_ns: int) -> dict[str, str]:
    df = pd.read_parquet(path, columns=["key", "answer"])
    return dict(zip(df["key"], df["answer"], strict=True))


def source_kind(profile: str) -> str:
    """The build's source kind (``source.json``'s ``kind``: synthetic, mimic, meds)."""
    path = build_dir(profile) / "source.json"
    return json.loads(path.read_text()).get("kind", "unknown") if path.exists() else "unknown"


def _write_status(name: str, status: dict[str, Any]) -> None:
    d = build_dir(name) / MANIFEST_DIR
    d.mkdir(parents=True, exist_ok=True)
    (d / STATUS_FILE).write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")


def population_events(profile: str) -> pd.DataFrame:
    """The build's events with every concept's full description as its label (what the
    descriptions rendering prints; :mod:`clinlib.tasks.population.describe`)."""
    events = read_artifact(artifact_path("events.parquet", profile), "cohort")
    return describe_events(events, build_dir(profile) / "raw" / "hosp")


def object_strings(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` with its string columns held as Python objects (a missing value stays
    missing): every question filters, sorts and plants a group's rows, and on pyarrow-backed
    strings each of those is a pyarrow ``take`` per column, about a tenth of the stage."""
    cols = {c: object for c in events.columns if isinstance(events[c].dtype, pd.StringDtype)}
    return events.astype(cols)


def bins_for(profile: str) -> tuple[int, ...]:
    return QUICK_BINS if profile == "quick" else PAPER_BINS


def _leaks(q: dict[str, Any]) -> list[str]:
    contexts = [r.text for r in q["rendered"].values()]
    bad = [w for w in LEAK_WORDS if any(w in t for t in contexts)]
    bad += [
        str(s) for s in q["subject_ids"] if any(str(s) in t for t in [q["question"], *contexts])
    ]
    return bad


def length_fails(q: dict[str, Any], count: Callable[[str], int]) -> str | None:
    """Why the descriptions rendering's measured length lies outside its bin, or None."""
    n = count(q["rendered"]["descriptions"].text)
    lo, hi = BIN_TOLERANCE
    if not lo * q["bin_tokens"] <= n <= hi * q["bin_tokens"]:
        return f"{n} tokens for a {q['bin_tokens']} bin"
    return None


def check_question(q: dict[str, Any], count: Callable[[str], int]) -> tuple[str, str] | None:
    """The first gate (in :data:`GATE_ORDER`) the question fails, as (gate, detail), or None.
    The length comes first: it needs only the descriptions rendering and is the cheapest."""
    too = length_fails(q, count)
    if too:
        return "length", too
    for r in q["rendered"].values():
        try:
            recs = record_ids(r.text)  # what parse_group reads back, without keeping lines
        except ValueError as exc:
            return "structure", f"{r.rendering}: {exc}"
        if sorted(recs) != sorted(q["pids"]):
            return "structure", f"{r.rendering}: records {len(recs)} != patients {len(q['pids'])}"
    if _leaks(q):
        return "leakage", ", ".join(_leaks(q))[:120]
    gold = json.loads(q["gold"])
    rendered = list(q["rendered"].values())  # the checker re-reads each text on its own
    answers = check_many(q["task"], q["question"], [r.text for r in rendered])
    q["checks"] = {r.rendering: ans for r, ans in zip(rendered, answers, strict=True)}
    for r, ans in zip(rendered, answers, strict=True):
        if ans is None or not is_perfect(q["task"], score(q["task"], ans, gold)):
            return "agreement", f"{r.rendering}: checker answer {str(ans)[:80]} != gold"
    return None


def _rows(q: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    base = {k: v for k, v in q.items() if k not in ("rendered", "plan", "checks")}
    return [
        dict(
            base,
            rendering=r.rendering,
            context=r.text,
            n_codes=r.n_codes,
            concepts=json.dumps(r.concepts, sort_keys=True),
            seed=seed,
            # the checker's answer under its input's key: CHECKS_FILE, not the questions
            _key=check_key(q["task"], q["question"], r.text),
            _answer=json.dumps(q["checks"][r.rendering]),
        )
        for r in q["rendered"].values()
    ]


def _tally(gates: dict, task: str, bin_tokens: int, failed: tuple[str, str] | None) -> None:
    for g in GATE_ORDER:
        gates.setdefault((g, task, bin_tokens), [0, 0, {}])[0] += 1
        if failed and failed[0] == g:
            tally = gates[(g, task, bin_tokens)]
            tally[1] += 1
            tally[2][failed[1][:60]] = tally[2].get(failed[1][:60], 0) + 1
            return


def _resize(sizes: list[int], n: int, detail: str, bin_tokens: int) -> None:
    """After a length failure at size ``n``: a group too long for the bin drops ``n`` and every
    larger size, one too short every size up to ``n`` (while another size is left)."""
    too_long = int(detail.split()[0]) > bin_tokens
    keep = [s for s in sizes if (s < n if too_long else s > n)]
    if keep:
        sizes[:] = keep


def rosters(spec: TaskIdea, attrs, seed: int) -> dict[str, tuple[int, dict[str, list[int]]] | str]:
    """Each variant's cohorts built once at N_max (:func:`.groups.sample_cohorts`), keyed by the
    variant's JSON: every question of the idea is a subsample of them (PopMedQA §2.1 step 3)."""
    out = {}
    for i, v in enumerate(spec.params.get("variants") or [{}]):
        rng = np.random.default_rng([seed, hash_task(spec.task), i, 7])
        out[json.dumps(v, sort_keys=True)] = sample_cohorts(spec, attrs, v, rng)
    return out


def _cell(
    spec: TaskIdea, attrs, events, bin_tokens, want, seed, count, gates, offset=0, built=None
):
    """Up to ``want`` questions of one (spec, bin); tallies the gates in ``gates``. Each draw is
    subsampled from its variant's N_max cohorts (``built``: :func:`rosters`), rendered as
    descriptions first and measured; only a draw that fits its bin is rendered the other two
    ways and checked (structure, leakage, the checker)."""
    rows: list[dict[str, Any]] = []
    vs = spec.params.get("variants") or [{}]
    variants = cycle(vs[offset % len(vs) :] + vs[: offset % len(vs)])
    built = built if built is not None else rosters(spec, attrs, seed)
    n_max = min((r[0] for r in built.values() if not isinstance(r, str)), default=0)
    sizes = sizes_for([s for s in spec.sizes if s <= n_max] or list(spec.sizes), bin_tokens)
    attempt = 0
    reasons: dict[str, int] = {}
    while len(rows) < want * len(RENDERINGS) and attempt < MAX_ATTEMPTS * want:
        s = seed * 100_003 + hash_task(spec.task) * 1_009 + bin_tokens + attempt
        attempt += 1
        n = sizes[(attempt - 1) % len(sizes)]
        v = next(variants)
        roster = built[json.dumps(v, sort_keys=True)]
        if isinstance(roster, str):
            reasons[roster] = reasons.get(roster, 0) + 1
            continue
        q = make_question(
            spec, attrs, events, n, bin_tokens, v, s, count, ("descriptions",), roster[1]
        )
        if isinstance(q, str):
            reasons[q] = reasons.get(q, 0) + 1
            if q.startswith("cohort ") and len(sizes) > 1 and n == max(sizes):
                sizes.remove(n)  # the pool cannot fill this size: stop asking for it
            continue
        too = length_fails(q, count)
        if not too:
            q = render_rest(q)
        failed = ("length", too) if too else check_question(q, count)
        _tally(gates, spec.task, bin_tokens, failed)
        if too:
            _resize(sizes, n, too, bin_tokens)
        elif failed is None:
            rows += _rows(q, s)
    return rows, reasons


def sizes_for(sizes: Sequence[int], bin_tokens: int) -> list[int]:
    """The spec's group sizes, those nearest ``bin_tokens / TOKENS_PER_PATIENT`` first (a
    256K-token bin needs a large group, an 8K one a small group)."""
    want = bin_tokens / TOKENS_PER_PATIENT
    return sorted(sizes, key=lambda n: (abs(n - want), n))


def hash_task(task: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(task))


def _distribution(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    one = df[df["rendering"] == "descriptions"]
    for task in ("P-TST", "P-ICC"):
        sub = one[one["task"] == task]
        if sub.empty:
            continue
        vals = [
            v
            for g in sub["gold"]
            for v in (json.loads(g).values() if task == "P-ICC" else [json.loads(g)])
        ]
        share = sum(bool(v) for v in vals) / len(vals)
        out.append(
            {
                "gate": "distribution",
                "task": task,
                "bin_tokens": 0,
                "n_checked": len(vals),
                "n_failed": int(len(vals) >= MIN_DISTRIBUTION and not 0.2 <= share <= 0.8),
                "detail": f"true share {share:.2f}",
            }
        )
    return out


def build_population(
    profile: str | None = None,
    count: Callable[[str], int] | None = None,
    specs: str | Path | None = None,
    seed: int = 0,
    per_cell: int | None = None,
    bins: Sequence[int] | None = None,
    tasks: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build, gate and write the population set; returns (questions, gates)."""
    name = resolve_profile(profile)
    if count is None:
        raise StageError("build_population: pass a token counter (clinlib.llm.tokens.count_tokens)")
    source = source_kind(name)
    chosen = [s for s in load_specs(specs) if not tasks or s.task in tasks]
    reason = not_applicable(source, chosen)
    if reason:
        for f in (QUESTIONS_FILE, GATES_FILE, CHECKS_FILE):  # no stale set survives
            (build_dir(name) / f).unlink(missing_ok=True)
        _write_status(name, {"status": "not_applicable", "source": source, "reason": reason})
        return pd.DataFrame(columns=["qid", "task", "rendering"]), pd.DataFrame(
            columns=GATE_COLUMNS
        )
    cohort = read_artifact(artifact_path("cohort.parquet", name), "cohort")
    events = object_strings(population_events(name))
    attrs = attributes(cohort, events)
    count = functools.lru_cache(maxsize=None)(count)
    want = per_cell or PER_CELL.get(name, PER_CELL["paper"])
    rows: list[dict[str, Any]] = []
    gates: dict[tuple, list] = {}
    shortfalls: list[dict[str, Any]] = []
    for spec in chosen:
        built = rosters(spec, attrs, seed)  # the idea's cohorts at N_max, shared by its questions
        for i, b in enumerate(bins or bins_for(name)):
            if spec.plant and source != "synthetic":
                shortfalls.append(
                    _short(spec.task, b, f"planted task skipped on a {source} source")
                )
                continue
            got, reasons = _cell(
                spec, attrs, events, b, want, seed, count, gates, offset=i, built=built
            )
            rows += got
            if len(got) < want * len(RENDERINGS):
                shortfalls.append(
                    _short(
                        spec.task,
                        b,
                        f"{len(got) // 3}/{want} made; "
                        + "; ".join(f"{k} x{v}" for k, v in sorted(reasons.items()))
                        if reasons
                        else "gates",
                    )
                )
    df, gates_df = _finish(name, rows, gates, shortfalls)
    _write_status(name, {"status": "ok", "source": source, "questions": int(df["qid"].nunique())})
    return df, gates_df


def _short(task: str, b: int, detail: str) -> dict[str, Any]:
    return {
        "gate": "shortfall",
        "task": task,
        "bin_tokens": b,
        "n_checked": 0,
        "n_failed": 0,
        "detail": detail,
    }


def _finish(name, rows, gates, shortfalls) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not rows:
        raise StageError(
            f"population: no question passed the gates on profile {name!r}; "
            f"shortfalls: {[s['detail'] for s in shortfalls][:3]}"
        )
    df = pd.DataFrame(rows)
    checks = df[["qid", "rendering", "_key", "_answer"]].rename(columns=lambda c: c.lstrip("_"))
    df = df.drop(columns=["_key", "_answer"])
    g = [
        {
            "gate": k[0],
            "task": k[1],
            "bin_tokens": k[2],
            "n_checked": v[0],
            "n_failed": v[1],
            "detail": "; ".join(f"{d} x{c}" for d, c in sorted(v[2].items())),
        }
        for k, v in gates.items()
    ]
    gates_df = pd.DataFrame(g + _distribution(df) + shortfalls, columns=GATE_COLUMNS)
    bad = gates_df[(gates_df["gate"] == "distribution") & (gates_df["n_failed"] > 0)]
    if not bad.empty:
        raise StageError(
            f"population: one-sided gold in {', '.join(bad['task'])} ({bad['detail'].iloc[0]})"
        )
    write_parquet(gates_df, build_dir(name) / GATES_FILE)
    write_parquet(checks, build_dir(name) / CHECKS_FILE)
    write_parquet(df, build_dir(name) / QUESTIONS_FILE)
    return df, gates_df
