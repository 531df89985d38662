"""Variant profiles: a profile's corpus re-written by a model, in a build folder of its own
(paper Fig. 2 stages 3-4: dialogues written and questions paraphrased by LLMs; docs/design.md
"The artifact contract").

``clintrace dialogues --rewrite B`` and ``clintrace questions --paraphrase B`` never replace the
template corpus of ``<profile>`` or the predictions made on it: they write
``data/build/<profile>+rw-B/`` (``+pp-B`` for paraphrases), which starts as a copy of the
upstream stages' artifacts (cohort and events; for paraphrases also the dialogues) and of
``source.json``, so every later stage (questions, gates with gold from the raw tables,
strategies, ``run``) treats it as any profile. Its sizes, seed and question counts are the
base profile's (:func:`clinlib.core.config.base_profile`); ``variant.json`` says how it was made.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from typing import Any

from clinlib.core.config import VARIANT_SEP, artifact_path, build_dir, resolve_profile
from clinlib.core.guards import STAGES, check_artifact, manifest_path
from clinlib.core.io import atomic_path
from clinlib.data.build import SOURCE_FILE
from clinlib.eval.harness.store import RunnerError

VARIANT_FILE = "variant.json"
# kind -> the folder suffix: LLM-rewritten dialogues, paraphrased questions.
VARIANT_KINDS: dict[str, str] = {"rewrite": "rw", "paraphrase": "pp"}


def variant_name(profile: str | None, kind: str, backbones: Sequence[str]) -> str:
    """``<profile>+rw-<primary>[+<rescue>...]`` (``pp`` for paraphrases)."""
    if kind not in VARIANT_KINDS:
        raise RunnerError(f"unknown variant kind {kind!r}; known: {sorted(VARIANT_KINDS)}")
    if not backbones:
        raise RunnerError("a variant needs at least one backbone")
    names = "+".join(re.sub(r"[^A-Za-z0-9_.\-]", "_", b) for b in backbones)
    return resolve_profile(f"{resolve_profile(profile)}{VARIANT_SEP}{VARIANT_KINDS[kind]}-{names}")


def read_variant(profile: str | None) -> dict[str, Any] | None:
    """The ``variant.json`` of a profile (None for a profile that is not a variant)."""
    path = artifact_path(VARIANT_FILE, profile)
    return json.loads(path.read_text()) if path.exists() else None


def derive_profile(
    source: str | None, name: str, stages: Sequence[str], record: Mapping[str, Any]
) -> str:
    """Copy the outputs of ``stages`` (with their manifests) and ``source.json`` from
    ``source`` into the variant ``name``; write ``variant.json``.

    Args:
        source: the profile the variant derives from (its stages must be current).
        name: the variant's profile name (must differ from ``source``).
        stages: upstream stages whose artifacts the variant shares, e.g. ``("cohort",)``.
        record: what made the variant (kind, backbones), stored in ``variant.json``.

    Returns:
        ``name``.
    """
    src, dst = resolve_profile(source), resolve_profile(name)
    if src == dst:
        raise RunnerError(f"a variant needs its own name, not its source's ({src!r})")
    old = read_variant(dst)
    if old is not None and old.get("source") != src:
        raise RunnerError(f"profile {dst!r} is a variant of {old.get('source')!r}, not {src!r}")
    if not artifact_path(SOURCE_FILE, src).exists():
        raise FileNotFoundError(
            f"{artifact_path(SOURCE_FILE, src)} is missing: run "
            f"`clintrace cohort --profile {src}` first"
        )
    files = [artifact_path(SOURCE_FILE, src)]
    for stage in stages:
        for artifact in STAGES[stage][0]:
            path = artifact_path(f"{artifact}.parquet", src)
            if path.exists():
                check_artifact(artifact, src)
                files.append(path)
        if manifest_path(stage, src).exists():
            files.append(manifest_path(stage, src))
    for path in files:
        target = build_dir(dst) / path.relative_to(build_dir(src))
        with atomic_path(target) as tmp:
            shutil.copy2(path, tmp)  # same bytes and mtime: the manifests still match
    body = {"source": src, "stages": list(stages), "created": time.time(), **record}
    with atomic_path(artifact_path(VARIANT_FILE, dst)) as tmp:
        tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
    return dst
