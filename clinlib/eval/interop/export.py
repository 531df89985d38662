"""The question set with each strategy's context, for the harnesses people run
(docs/guide.md, "Outside predictions, harnesses and a results site").

``clintrace export --format jsonl|inspect OUT`` writes, per (question, strategy, setting),
exactly the chat messages the kit's harness sends (:func:`clinlib.eval.harness.prompts.build_messages`
over the context :func:`clinlib.eval.harness.cells.prepare` builds; paper §4 "Backbones")
with the task's output cap (Appendix E.3) and temperature 0:

* ``dataset.jsonl``: one inspect_ai ``Sample`` per line: ``id`` (``qid|strategy|prep|setting``),
  ``input`` (the messages), ``target`` (the gold), ``metadata`` (qid, task, strategy,
  prep_model, setting, options, max_tokens, question, question_set);
* with ``inspect``, also ``task.py`` (:data:`TASK_FILE`): ``inspect eval OUT/task.py --model
  openai-api/<name>/<model>`` runs it unchanged against any OpenAI-compatible endpoint
  (``<NAME>_BASE_URL`` / ``<NAME>_API_KEY``), scored by the kit's own scorer
  (:func:`clinlib.tasks.score`; clinlib must be importable where inspect runs).

Answers come back through ``clintrace score`` (a JSONL with ``response`` per sample, or
inspect's log: :mod:`clinlib.eval.interop.inspect_log`); the recorded ``question_set`` makes an
answer to an older export a refusal. lm-evaluation-harness YAML is not written (its tasks
take one prompt string and a fixed metric; the kit's chat messages and scorer do not map
without a custom Python task, which is what task.py already is for inspect).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clinlib.core.io import atomic_path
from clinlib.eval.harness.cells import prepare, question_options
from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.harness.store import RunnerError
from clinlib.eval.interop.external import question_set_digest
from clinlib.tasks.answers import MAX_TOKENS

FORMATS: tuple[str, ...] = ("jsonl", "inspect")
DATASET_FILE = "dataset.jsonl"
TASK_FILE_NAME = "task.py"
# The inspect_ai task file written beside the dataset (a template: nothing to fill in).
TASK_FILE = '''"""ClinTrace Kit question set as an inspect_ai task (written by `clintrace export`).

Run:  inspect eval task.py --model openai-api/<name>/<model>
      (with <NAME>_BASE_URL and <NAME>_API_KEY set; any OpenAI-compatible endpoint)
Then: clintrace score <the .eval log> --profile <profile>
Scored by the kit's own scorer (clinlib.tasks.score): clinlib must be importable here.
"""

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState, solver

DATASET = Path(__file__).parent / "dataset.jsonl"
ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser}


def record_to_sample(record):
    messages = [ROLES[m["role"]](content=m["content"]) for m in record["input"]]
    return Sample(id=record["id"], input=messages, target=record["target"],
                  metadata=record["metadata"])


@solver
def answer():
    """One completion per sample with the task's own output cap (temperature 0)."""

    async def solve(state: TaskState, generate):
        return await generate(state, max_tokens=state.metadata["max_tokens"])

    return solve


@scorer(metrics=[mean()])
def clintrace_score():
    """The kit's strict score: 1.0 / 0.0 (Kendall's tau for T10); answer = parsed answer."""

    async def score(state: TaskState, target: Target) -> Score:
        from clinlib.tasks import score as kit_score

        md = state.metadata
        got = kit_score(md["task"], state.output.completion, target.text, md["options"] or None)
        return Score(value=float(got.value), answer=got.parsed,
                     metadata={"correct": bool(got.correct), "parse_failed": got.parse_failed})

    return score


@task
def clintrace():
    return Task(dataset=json_dataset(str(DATASET), record_to_sample), solver=answer(),
                scorer=clintrace_score(), config=GenerateConfig(temperature=0.0))
'''


def export_records(
    profile: str | None,
    strategies: Sequence[str],
    settings: Sequence[str] = ("post",),
    prep: Any = "rule-based",
    tasks: Iterable[str] | None = None,
    limit: int | None = None,
    config: str | Path | None = None,
) -> list[dict[str, Any]]:
    """One inspect-style sample per (question, strategy, setting value), in the kit's order;
    ``config`` names user backbones (a prep backbone may be one of them)."""
    digest = question_set_digest(profile)
    out = []
    for _setting, sub, ctx in prepare(
        profile, list(strategies), list(settings), prep, tasks, limit, None, config
    ):
        by_qid = {q["qid"]: q for q in sub.to_dict("records")}
        for c in ctx.to_dict("records"):
            q = by_qid[c["qid"]]
            meta = {
                "qid": q["qid"],
                "task": q["task"],
                "strategy": c["label"],
                "prep_model": c["prep_model"],
                "setting": c["setting"],
                "options": question_options(q) or [],
                "max_tokens": MAX_TOKENS[q["task"]],
                "question": q["question"],
                "question_set": digest,
            }
            out.append(
                {
                    "id": "|".join((q["qid"], c["label"], c["prep_model"], c["setting"])),
                    "input": build_messages(q, c["context"]),
                    "target": str(q["gold"]),
                    "metadata": meta,
                }
            )
    if not out:
        raise RunnerError("export: no questions to export (check --tasks / --limit / --settings)")
    return out


def write_export(out_dir: str | Path, records: list[dict[str, Any]], fmt: str) -> Path:
    """Write the dataset (and the inspect task file) into ``out_dir`` as one atomic folder."""
    if fmt not in FORMATS:
        raise RunnerError(f"export format {fmt!r} not one of {list(FORMATS)}")
    out_dir = Path(out_dir)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        with (tmp / DATASET_FILE).open("w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if fmt == "inspect":
            (tmp / TASK_FILE_NAME).write_text(TASK_FILE, encoding="utf-8")
    return out_dir


def export_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Samples per (strategy, setting, task): what an export holds, for the command's echo."""
    meta = pd.DataFrame([r["metadata"] for r in records])
    return meta.groupby(["strategy", "setting", "task"]).size().rename("samples").reset_index()
