"""Stage-output guards (docs/design.md "The artifact contract"): no stage goes
silently empty, and no stage reads an artifact that a failed or newer run made stale.

Two mechanisms, shared by every stage:

* :func:`check_kept` — a stage that keeps 0 rows, or drops more than a stated share
  (:data:`MAX_DROP_SHARE`) of its input, raises a one-line :class:`StageError` with the
  counts and the drop reasons grouped by cause (``"dose_missing" x35``). ``allow_drops``
  (the CLI's ``--allow-drops``) accepts a large drop; 0 rows is never accepted, since every
  later stage would run on nothing.
* Stage manifests — ``data/build/<profile>/manifests/<stage>.json``. :func:`stage_run` marks
  a stage ``running`` before it writes anything, ``failed`` (with its one-line reason) if it
  raises, and ``ok`` when every output was written, recording the sha256 of each output and of
  each upstream artifact it read. :func:`check_artifact` (called by ``pipeline.load``) then
  refuses an artifact whose stage did not finish, failed, was rewritten behind its back, or
  was built from an upstream artifact that has changed since. A build made before manifests
  existed (no manifest file) is trusted as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from clinlib.core.config import artifact_path, build_dir, resolve_profile
from clinlib.core.io import Staging, atomic_path, deferred_signals

log = logging.getLogger(__name__)

# Above this share of dropped input rows a stage fails ("> 20% of dialogues" is a broken stage, not noise).
MAX_DROP_SHARE = 0.20
MANIFEST_DIR = "manifests"

# stage -> (artifacts it writes, upstream artifacts whose version it depends on).
STAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cohort": (("cohort", "attrition", "eligible", "events", "exclusions", "code_families"), ()),
    "dialogues": (
        ("dialogue_summary", "dialogue_checks", "event_coverage", "dialogues"),
        ("cohort", "events"),
    ),
    "questions": (
        ("questions", "gates", "question_availability"),
        ("cohort", "events", "dialogues", "event_coverage", "dialogue_summary"),
    ),
    # the extended question set (clinlib.tasks.extended), beside the paper's
    "temporal_questions": (
        ("temporal_questions", "temporal_gates", "temporal_availability"),
        ("cohort", "events", "dialogues", "event_coverage", "dialogue_summary"),
    ),
    # trap facts and MedMemoryBench's six query types (clinlib.tasks.traps)
    "traps": (
        ("trap_facts", "trap_checks", "trap_questions", "trap_gates"),
        ("cohort", "events", "dialogues"),
    ),
    # LongMedBench's cells, asked once for notebook 15 (clinlib.analysis.longmed)
    "evaluate-longmed": (
        (
            "longmed_questions",
            "longmed_predictions",
            "longmed_windows",
            "longmed_taus",
            "longmed_pairing",
            "longmed_tau_items",
            "longmed_cloze",
            "longmed_positions",
            "longmed_lengths",
            "longmed_length_drop",
            "longmed_decisions",
            "longmed_table4",
            "longmed_table5",
            "longmed_rejection",
            "longmed_cohort",
        ),
        ("cohort", "events", "questions", "temporal_questions"),
    ),
    # evidence recall, loss labels and construction cost (clinlib.analysis.evidence_stage):
    # notebooks 05, 13 and 16
    "evidence": (
        ("evidence_recall", "loss_labels", "loss_split", "build_costs", "prep_tokens"),
        ("questions", "dialogues"),
    ),
    # the ablation variants' builds and encoder hit rates (clinlib.analysis.ablation_stage)
    "ablations": (
        ("ablation_builds", "ablation_encoder_hits", "ablation_answers"),
        ("cohort", "dialogue_summary", "questions", "dialogues"),
    ),
    # every trap question asked by the reference reader and judged (clinlib.eval.traps.stage)
    "trap-answers": (
        ("trap_answers", "trap_judged", "trap_core_retention"),
        ("trap_questions", "trap_facts", "dialogues"),
    ),
    # every scoreboard over the population question set (clinlib.analysis.population_stage);
    # it checks its own basis (the question set's and predictions' sha256)
    "population_eval": (
        (
            "population_verbosity",
            "population_decomposition",
            "population_formats",
            "population_clustered",
            "population_wins",
            "population_ablations",
            "population_eval_basis",
        ),
        (),
    ),
}
PRODUCER: dict[str, str] = {a: s for s, (outs, _) in STAGES.items() for a in outs}

# The steps of `clintrace pipeline`, in its sequential order (a topological order of the graph
# they make): step -> (the manifest stages above it runs, what it writes, what it reads).
# "What it reads" is what the code reads, not only the manifest inputs (a test checks those are
# included): besides the parquet artifacts, ``raw/hosp`` (the source tables), ``constructions/
# <setting>`` (the construction cache: `strategies (pre)` re-uses the post constructions of
# uninjected patients) and the predictions store. Every run of the harness appends part files
# to one store (clinlib.eval.harness.store), and a run over the profile's own questions first
# claims it (moves stale parts aside), so every step that appends reads ``predictions`` (the
# store evaluate-offline claimed and filled) and runs after it; evidence labels every paper-task
# prediction, the core-memory rows ablations adds included. A step depends on the earlier steps
# that write what it reads (clinlib.cli.schedule runs independent steps side by side).
PIPELINE_STEPS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "synth": ((), ("raw/hosp",), ()),
    "cohort": (("cohort",), (*STAGES["cohort"][0], "source.json"), ("raw/hosp",)),
    "dialogues": (("dialogues",), STAGES["dialogues"][0], ("cohort", "events")),
    "questions": (
        ("questions", "temporal_questions", "traps"),
        (*STAGES["questions"][0], *STAGES["temporal_questions"][0], *STAGES["traps"][0]),
        ("cohort", "events", "dialogues", "event_coverage", "dialogue_summary", "raw/hosp"),
    ),
    # PopMedQA group questions: the cohort, its events and the source tables' descriptions
    "population": (
        (),
        ("population_questions", "population_gates"),
        ("cohort", "events", "source.json", "raw/hosp"),
    ),
    "population-eval": (
        ("population_eval",),
        (*STAGES["population_eval"][0], "population_predictions"),
        ("population_questions",),
    ),
    # event-table reads events.parquet beside the dialogues
    "strategies (post)": ((), ("constructions/post",), ("dialogues", "events")),
    "strategies (pre, T3-injected)": (
        (),
        ("constructions/pre",),
        ("dialogues", "events", "questions", "constructions/post"),
    ),
    "evaluate-offline": (
        (),
        ("predictions",),
        ("questions", "dialogues", "constructions/post", "constructions/pre"),
    ),
    # ablations asks its variants through the harness, then deletes those parts from the store
    # (clinlib.analysis.ablation_stage.variant_answers): a step that lists the store while they
    # exist could open a part that is gone, so every step reading the whole store runs after it
    "ablations": (
        ("ablations",),
        (*STAGES["ablations"][0], "predictions/core-memory", "predictions/variants"),
        (*STAGES["ablations"][1], "constructions/post", "predictions"),
    ),
    "evaluate-longmed": (
        ("evaluate-longmed",),
        (*STAGES["evaluate-longmed"][0], "predictions/longmed"),
        (
            *STAGES["evaluate-longmed"][1],
            "dialogues",
            "constructions/post",
            "predictions",
            "predictions/variants",
        ),
    ),
    "evidence": (
        ("evidence",),
        STAGES["evidence"][0],
        (
            *STAGES["evidence"][1],
            "constructions/post",
            "constructions/pre",
            "predictions",
            "predictions/core-memory",
        ),
    ),
    "trap-answers": (
        ("trap-answers",),
        (*STAGES["trap-answers"][0], "predictions/traps", "judge/lexical"),
        (*STAGES["trap-answers"][1], "constructions/post", "predictions", "predictions/variants"),
    ),
}


def pipeline_needs(
    steps: Iterable[str] | None = None, table: Mapping[str, tuple] = PIPELINE_STEPS
) -> dict[str, tuple[str, ...]]:
    """step -> the earlier steps (of ``steps``, default every step of ``table``) that write
    something it reads. A read no chosen step writes (``raw/hosp`` when synth is skipped) is
    the build's as it stands."""
    chosen = list(table) if steps is None else [s for s in table if s in set(steps)]
    needs: dict[str, tuple[str, ...]] = {}
    for i, step in enumerate(chosen):
        reads = set(table[step][2])
        needs[step] = tuple(e for e in chosen[:i] if reads & set(table[e][1]))
    return needs


def pipeline_problems(table: Mapping[str, tuple] = PIPELINE_STEPS) -> list[str]:
    """What is wrong with a pipeline table (empty: nothing): a read no earlier step writes, a
    thing two steps write, a manifest stage's input or output the step does not declare."""
    problems: list[str] = []
    writer: dict[str, str] = {}
    for step, (stages, writes, reads) in table.items():
        problems += [
            f"{step} reads {r}, which no earlier step writes" for r in reads if r not in writer
        ]
        for stage in stages:
            outs, ins = STAGES[stage]
            problems += [
                f"{step} runs {stage}, which reads {a}: not declared" for a in ins if a not in reads
            ]
            problems += [
                f"{step} runs {stage}, which writes {a}: not declared"
                for a in outs
                if a not in writes
            ]
        for w in writes:
            if w in writer:
                problems.append(f"{w} is written by {writer[w]} and {step}")
            writer.setdefault(w, step)
    return problems


class StageError(ValueError):
    """A stage produced nothing usable, or its input is stale; the message is one line."""


# --------------------------------------------------------------------------- drop guard


def group_reasons(reasons: Iterable[str]) -> Counter:
    """Count drop causes; a reason ``"check: detail | check: detail"`` counts each check once."""
    counts: Counter = Counter()
    for reason in reasons:
        causes = {part.split(":", 1)[0].strip() for part in str(reason).split(" | ")}
        counts.update(c for c in causes if c)
    return counts


def exact_share(num: int, den: int) -> Fraction:
    """``num / den`` as an exact fraction (0 when ``den`` is 0), for threshold comparisons
    that must not depend on float rounding."""
    return Fraction(int(num), int(den)) if den else Fraction(0)


def pct_beside(value: float | Fraction, bound: float, min_decimals: int = 0) -> str:
    """``value`` as a percentage with just enough decimals to differ from ``bound`` printed
    the same way, so a comparison never reads "98.0% < 98%" (97/99 = 97.98%).

    Args:
        value: the share (0..1).
        bound: the threshold it is compared with.
        min_decimals: fewest decimals shown.
    """
    exact_value, exact_bound = Fraction(value), Fraction(str(bound))
    for decimals in range(min_decimals, 7):
        text = f"{float(value):.{decimals}%}"
        if exact_value == exact_bound or text != f"{bound:.{decimals}%}":
            return text
    return f"{float(value):.6%}"


def reasons_text(counts: Mapping[str, int]) -> str:
    """``"dose_missing" x35, "no events" x2`` (most frequent first)."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{cause!r} x{n}" for cause, n in items)


def check_kept(
    stage: str,
    what: str,
    kept: int,
    total: int,
    reasons: Mapping[str, int] | None = None,
    *,
    max_share: float = MAX_DROP_SHARE,
    allow_drops: bool = False,
) -> None:
    """Raise :class:`StageError` when ``stage`` kept 0 of ``total`` ``what``, or dropped more
    than ``max_share`` of them (unless ``allow_drops``); log a warning for a smaller drop."""
    dropped = total - kept
    why = f": {reasons_text(reasons)}" if reasons else ""
    if kept <= 0:
        raise StageError(f"{stage}: 0 of {total} {what} kept{why}")
    if dropped <= 0:
        return
    share = exact_share(dropped, total)
    if share > Fraction(str(max_share)) and not allow_drops:
        raise StageError(
            f"{stage}: {dropped} of {total} {what} dropped ({pct_beside(share, max_share)} > "
            f"{max_share:.0%} allowed){why}; fix the input, or pass --allow-drops to accept"
        )
    log.warning("%s: %d of %d %s dropped%s", stage, dropped, total, what, why)


# --------------------------------------------------------------------------- manifests


def manifest_path(stage: str, profile: str | None = None) -> Path:
    """``data/build/<profile>/manifests/<stage>.json``."""
    return artifact_path(MANIFEST_DIR, profile) / f"{stage}.json"


def read_manifest(stage: str, profile: str | None = None) -> dict | None:
    """A stage's manifest, or None when the stage never ran with manifests."""
    path = manifest_path(stage, profile)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError):
        return {"status": "failed", "reason": f"unreadable manifest {path}"}


def _write_manifest(stage: str, profile: str, body: dict) -> None:
    with atomic_path(manifest_path(stage, profile)) as tmp:
        tmp.write_text(json.dumps(body, indent=1, sort_keys=True))


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(path: Path) -> dict:
    st = path.stat()
    return {"sha256": _sha(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _unchanged(path: Path, recorded: Mapping) -> bool:
    # size + mtime is the cheap check; a touched-but-identical file still matches by content.
    if not path.exists():
        return False
    st = path.stat()
    if st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns"):
        return True
    return st.st_size == recorded.get("size") and _sha(path) == recorded.get("sha256")


def _current_sha(artifact: str, profile: str) -> str | None:
    """The sha256 an upstream artifact has in its own stage's manifest (None: unknown)."""
    m = read_manifest(PRODUCER[artifact], profile)
    if not m or m.get("status") != "ok":
        return None
    return m.get("outputs", {}).get(artifact, {}).get("sha256")


@contextmanager
def stage_run(
    stage: str, profile: str | None = None, remove_on_failure: Iterable[str] = ()
) -> Iterator[Staging]:
    """Mark ``stage`` running, then ok (with fingerprints) or failed (with the reason).

    Yields a :class:`~clinlib.core.io.Staging`: outputs written to ``staging.path(name)`` are
    swapped into the build folder together when the body succeeds, so a stage's outputs are
    replaced as one unit or not at all. The inputs are fingerprinted when the stage starts,
    i.e. the versions it is about to read.

    * The body raises an ``Exception`` (bad input, a gate, a crash): the manifest says
      failed, uncommitted staged files are dropped, and ``remove_on_failure`` artifacts are
      deleted (for readers that open a file directly instead of through ``pipeline.load``)
      unless the body committed them itself (a failed gate's report, for inspection).
    * The body is interrupted (Ctrl-C, SIGTERM, SystemExit): nothing is replaced: staged
      files are dropped and the previous manifest is put back, so the previous outputs stay
      exactly as current as they were.
    """
    name = resolve_profile(profile)
    outputs, inputs = STAGES[stage]
    recorded_inputs = {a: _current_sha(a, name) for a in inputs}
    previous = read_manifest(stage, name)
    _write_manifest(stage, name, {"status": "running", "started": time.time()})
    staging = Staging(build_dir(name), stage)
    try:
        yield staging
    except Exception as exc:
        staging.discard()
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        _write_manifest(stage, name, {"status": "failed", "reason": reason})
        for artifact in remove_on_failure:
            if f"{artifact}.parquet" not in staging.committed:
                artifact_path(f"{artifact}.parquet", name).unlink(missing_ok=True)
        raise
    except BaseException:
        staging.discard()
        _restore_manifest(stage, name, previous)
        raise
    with deferred_signals():  # the swap and its manifest: both or (Ctrl-C before) neither
        staging.commit()
        outs = {a: _fingerprint(artifact_path(f"{a}.parquet", name)) for a in outputs}
        _write_manifest(
            stage,
            name,
            {"status": "ok", "finished": time.time(), "outputs": outs, "inputs": recorded_inputs},
        )


def _restore_manifest(stage: str, profile: str, previous: dict | None) -> None:
    """Put back the manifest a stage had before an interrupted run (none: remove it)."""
    if previous is None:
        manifest_path(stage, profile).unlink(missing_ok=True)
    else:
        _write_manifest(stage, profile, previous)


def check_artifact(artifact: str, profile: str | None = None) -> None:
    """Refuse an artifact that is not the current output of a successful stage run.

    Raises:
        StageError: one line naming the artifact, why it is not current, and the command
            to re-run.
    """
    stage = PRODUCER.get(artifact)
    if stage is None:
        return
    name = resolve_profile(profile)
    m = read_manifest(stage, name)
    if m is None:  # built before manifests existed (or by hand): nothing to compare against
        return
    file = f"{artifact}.parquet"
    redo = f"re-run `clintrace {stage} --profile {name}`"
    status = m.get("status")
    if status == "running":
        raise StageError(f"{file}: `clintrace {stage}` started but never finished; {redo}")
    if status != "ok":
        raise StageError(
            f"{file} is not current: the last `clintrace {stage}` failed "
            f"({m.get('reason', 'no reason recorded')}); fix that and {redo}"
        )
    recorded = m.get("outputs", {}).get(artifact)
    if recorded and not _unchanged(artifact_path(file, name), recorded):
        raise StageError(f"{file} changed after `clintrace {stage}` wrote it; {redo}")
    for upstream, sha in m.get("inputs", {}).items():
        up = read_manifest(PRODUCER[upstream], name)
        if up is None or sha is None:
            continue
        if up.get("status") != "ok":
            raise StageError(
                f"{file} is stale: `clintrace {PRODUCER[upstream]}` ran again after it and "
                f"did not succeed; fix that, then {redo}"
            )
        if up.get("outputs", {}).get(upstream, {}).get("sha256") != sha:
            raise StageError(
                f"{file} is stale: {upstream}.parquet was rebuilt after `clintrace {stage}` "
                f"read it; {redo}"
            )


def check_constructions(summary) -> None:
    """The strategies stage built from 0 dialogues: a StageError."""
    if len(summary) == 0:
        raise StageError("strategies: no strategy was built")
    empty = summary[summary["n_dialogues"] == 0]
    if len(empty):
        raise StageError(
            f"strategies: 0 dialogues to build {', '.join(empty['label'].astype(str))} from "
            "(setting " + ", ".join(sorted(set(empty["setting"].astype(str)))) + ")"
        )


def evaluable_patients(cohort, dialogue_summary, questions):
    """The cohort rows of patients with a kept dialogue and at least one question: the only
    ones an evaluation, an ablation subset or the failure explorer can use.

    Args:
        cohort: cohort.parquet rows (subject_id, ...).
        dialogue_summary: dialogue_summary.parquet rows (subject_id, kept).
        questions: questions.parquet rows (subject_ids: the patients each question is about).

    Returns:
        The matching cohort rows, in cohort order.
    """
    kept = set(dialogue_summary.loc[dialogue_summary["kept"].astype(bool), "subject_id"])
    asked = {int(s) for ids in questions["subject_ids"] for s in ids}
    wanted = {int(s) for s in kept} & asked
    return cohort[cohort["subject_id"].astype(int).isin(wanted)].reset_index(drop=True)


# --------------------------------------------------------------------------- predictions basis

# Predictions answer one question set about one set of dialogues. A rebuilt questions.parquet
# (or dialogues.parquet) makes every prediction in predictions/ an answer to something else,
# while a question that keeps its qid (a hash of task, subjects and anchors) would look done.
PREDICTIONS_BASIS_FILE = "_basis.json"
# The extended set (temporal_questions.parquet) is not part of it: its qids hash the whole
# question (clinlib.tasks.generators.t10), so a rebuilt extended set orphans its old answers
# (load_predictions drops them) without making the paper's predictions stale.
BASIS_ARTIFACTS: tuple[str, ...] = ("questions", "dialogues")


def predictions_basis(profile: str | None = None) -> dict[str, str | None]:
    """sha256 of the artifacts that predictions answer (:data:`BASIS_ARTIFACTS`): from their
    stage manifests when recorded, else of the files (None: no such file)."""
    name = resolve_profile(profile)
    basis: dict[str, str | None] = {}
    for artifact in BASIS_ARTIFACTS:
        path = artifact_path(f"{artifact}.parquet", name)
        basis[artifact] = _current_sha(artifact, name) or (_sha(path) if path.exists() else None)
    return basis


def read_basis(directory: Path) -> dict | None:
    """The basis recorded in a predictions folder (None: none recorded, a pre-basis folder)."""
    try:
        return json.loads((directory / PREDICTIONS_BASIS_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_basis(directory: Path, basis: Mapping[str, str | None]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / PREDICTIONS_BASIS_FILE) as tmp:
        tmp.write_text(json.dumps(dict(basis), indent=1, sort_keys=True))


def stale_basis(recorded: Mapping | None, current: Mapping) -> str | None:
    """Which artifact changed since predictions were made (None: same basis, or unknown)."""
    if recorded is None:
        return None
    changed = [a for a in BASIS_ARTIFACTS if recorded.get(a) != current.get(a)]
    return ", ".join(f"{a}.parquet" for a in changed) or None
