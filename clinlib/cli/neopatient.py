"""``clintrace neopatient``: neopatient's generator (PopMedQA §3, Fig. 2) — recipe sampling,
record generation (rule-based by default, a backbone optional), matching to the kit's code
vocabularies through a vector index (the kit's shipped static encoder, offline), verification,
and the verified records written as MEDS that ``clintrace cohort --meds-dir`` reads."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from clinlib.cli.common import ConfigOpt, add_command, fail, run_stage
from clinlib.data.neopatient import (
    COHORTS,
    LENGTH_BINS,
    CodeIndex,
    NeoRun,
    generate_cohort,
    write_run,
)
from clinlib.data.neopatient.pipeline import vocabulary_accuracy
from clinlib.data.neopatient.recipes import cohort_spec
from clinlib.llm import ChatRequest, GenerationParams, get_backbone, run_batch
from clinlib.strategies import encoders
from clinlib.strategies.embed import PACKAGED_MODELS, resolve_model_path

# A run that keeps fewer verified records than this share of those asked for is refused.
MIN_KEPT = 0.8
BACKBONE_MAX_TOKENS = 8192


def static_encoder():
    """The kit's shipped static encoder (checked against its manifest, loaded offline) as a
    ``texts -> normalised vectors`` callable."""
    encoders.verify_folder(encoders.STATIC_MODEL_DIR)
    model = encoders.load_static(encoders.STATIC_MODEL_DIR)

    def encode(texts: Sequence[str]):
        return model.encode(list(texts), max_length=None, normalize=True, use_multiprocessing=False)

    return encode


def make_encoder(name: str):
    """The matching step's encoder: the shipped static model (default), or a
    sentence-transformers model that is already on this machine — the packaged
    all-MiniLM-L6-v2 or a local folder. Nothing is downloaded."""
    if name == encoders.STATIC_MODEL:
        return static_encoder()
    path = resolve_model_path(name)
    if name not in PACKAGED_MODELS and not Path(path).is_dir():
        raise ValueError(
            f"--encoder {name!r}: not {encoders.STATIC_MODEL}, a packaged model "
            f"({', '.join(PACKAGED_MODELS)}) or a local folder; nothing is downloaded"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, device="cpu")

    def encode(texts: Sequence[str]):
        return model.encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    return encode


def backbone_writer(name: str, config: Path | None):
    """A backbone of the kit's registry as a ``prompts -> replies`` callable (one batch)."""
    backbone = get_backbone(name, config)
    params = GenerationParams(temperature=0.0, max_tokens=BACKBONE_MAX_TOKENS)

    def complete(prompts: Sequence[str]) -> list[str | None]:
        requests = [
            ChatRequest(f"neopatient-{i}", [{"role": "user", "content": p}], params)
            for i, p in enumerate(prompts)
        ]
        return [r.response for r in run_batch(backbone, requests, config=config)]

    return complete


def check_out_dir(out_dir: Path) -> None:
    """Refuse (one line) an output folder that cannot be written, before any work."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir}: exists and is not a folder")
    meds = (out_dir / "metadata" / "dataset.json").exists()
    if out_dir.is_dir() and any(out_dir.iterdir()) and not meds:
        raise ValueError(f"--out {out_dir}: a non-empty folder that is not a MEDS dataset")
    parent = out_dir.parent
    existing = next(p for p in (parent, *parent.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"--out {out_dir}: {existing} is a file, not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise ValueError(f"--out {out_dir}: cannot write in {parent} ({exc.strerror})") from None


def report_lines(run: NeoRun, asked: int) -> list[str]:
    """The run's report: writer, yield, rejections by check, match accuracy, bins reached."""
    lines = [
        f"writer: {run.writer}; {len(run.recipes)} of {asked} records verified "
        f"({run.attempts} generated, {run.seconds:.1f}s)",
        "rejected by check: "
        + (", ".join(f"{k} x{v}" for k, v in run.rejections.most_common()) or "none"),
    ]
    if run.match:
        m = run.match
        lines.append(
            f"matching: {m['correct']:,} of {m['events']:,} events coded as planned "
            f"({m['accuracy']:.2%}); {m['descriptions_correct']} of {m['descriptions']} "
            f"distinct descriptions"
        )
        lines.append(
            f"mismatched events: {len(run.mismatches)} (in rejected records: "
            f"{len(run.mismatches) - run.mismatches_kept}, in written ones: {run.mismatches_kept})"
        )
    for name, group in run.bins().groupby("length_bin"):
        low, high = LENGTH_BINS[name]
        ev = group["events"]
        lines.append(
            f"bin {name} [{low}, {high}) events: {len(ev)} records, min {ev.min()}, "
            f"median {int(ev.median())}, max {ev.max()}"
        )
    return lines


def neopatient(
    recipe: Annotated[str, typer.Argument(help=f"cohort recipe: {', '.join(COHORTS)}")],
    out: Annotated[Path, typer.Option("--out", help="MEDS dataset root to write")],
    n: Annotated[int, typer.Option("--n", help="records to generate")] = 100,
    length_bin: Annotated[
        str, typer.Option("--bin", help=f"record length bin: {', '.join(LENGTH_BINS)}")
    ] = "short",
    seed: Annotated[int, typer.Option(help="seed")] = 0,
    backbone: Annotated[
        str | None,
        typer.Option(help="write the events with this backbone (default: rule-based)"),
    ] = None,
    encoder: Annotated[
        str,
        typer.Option(help="matching encoder: the shipped static model, all-MiniLM-L6-v2, a folder"),
    ] = encoders.STATIC_MODEL,
    config: ConfigOpt = None,
) -> None:
    """Generate synthetic patient records from a cohort recipe (neopatient: sample, generate,
    match, verify) and write them as MEDS for `clintrace cohort --meds-dir`.

    The default writer is rule-based; --backbone has a language model write each stay. Codes
    come from a vector index of the kit's vocabularies (the shipped static encoder, offline).
    """
    spec = run_stage(cohort_spec, recipe)
    run_stage(check_out_dir, out)
    if length_bin not in LENGTH_BINS:
        fail(ValueError(f"unknown length bin {length_bin!r}; known: {', '.join(LENGTH_BINS)}"))
    writer = run_stage(backbone_writer, backbone, config) if backbone else None
    index = CodeIndex(run_stage(make_encoder, encoder))
    run = run_stage(generate_cohort, recipe, n, index.encode, length_bin, seed, writer, index)
    for line in report_lines(run, n):
        typer.echo(line)
    right, total, misses = vocabulary_accuracy(index)
    typer.echo(
        f"matching over the whole index: {right} of {total} descriptions (every code in both "
        f"rule-based surface forms); misses: "
        + ("; ".join(f"{t!r} -> {got} (planned {want})" for t, want, got in misses) or "none")
    )
    if len(run.recipes) < MIN_KEPT * n:
        fail(ValueError(f"only {len(run.recipes)} of {n} records passed verification"))
    run_stage(write_run, run, out)
    summary = {
        "recipe": recipe,
        "positive": spec.positive,
        "negative": spec.negative,
        "writer": run.writer,
        "length_bin": length_bin,
        "encoder": encoder,
        "seed": seed,
        "asked": n,
        "written": len(run.recipes),
        "rejections": dict(run.rejections),
        "matching": run.match,
        "matching_over_index": {"correct": right, "descriptions": total},
        "synthetic": "yes: neopatient records, not MIMIC",
    }
    (out / "metadata" / "neopatient.json").write_text(json.dumps(summary, indent=2) + "\n")
    typer.echo(f"neopatient: {len(run.recipes)} records, {len(run.events):,} events -> {out}")


def register(app: typer.Typer) -> None:
    add_command(app, neopatient)
