"""The construction cache: artifacts on disk, keyed by what they were built from.

Artifacts live under ``data/build/<profile>/constructions/<strategy>/<subject>-<key>.json``.
The key is the sha256 of: the cache format version, the strategy name and code version, its
construction parameters (not access-only ones such as K), the prep model's versioned id
(``rule-based/v1``, ``deepseek-chat-v3.1:deepseek/deepseek-chat-v3.1``, or ``none``), the
patient, and the sha256 of the dialogue text the construction read — so a T3 pre-injected
variant of a dialogue gets its own entry while unchanged dialogues are shared between
settings. Writes are atomic (:func:`clinlib.core.io.atomic_path`), so a crash never leaves a
half-written artifact that looks complete; an unreadable file (or one holding another entry)
is found by the batch build, reported as ``repaired`` and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pandas as pd

from clinlib.core.config import build_dir
from clinlib.core.io import atomic_path
from clinlib.strategies.base import Artifact, Strategy, StrategyError, check_turns, dialogue_hash
from clinlib.strategies.build_cost import attach_usage, metered
from clinlib.strategies.prep import PrepModel

log = logging.getLogger("clinlib.strategies")

CACHE_VERSION = 1
CONSTRUCTIONS_DIR = "constructions"


class ConstructionCache:
    """Artifacts on disk keyed by what they were built from (the module docstring says how).

    Args:
        root: the ``constructions`` folder.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @staticmethod
    def key(strategy: Strategy, subject_id: int, dialogue_sha: str, prep: PrepModel | None) -> str:
        """The cache key of one construction."""
        payload = {
            "cache_version": CACHE_VERSION,
            "strategy": strategy.name,
            "code_version": strategy.code_version,
            "params": strategy.construction_params,
            "prep": strategy.prep_key(prep),
            "subject_id": int(subject_id),
            "dialogue": dialogue_sha,
        }
        blob = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def path(self, strategy_name: str, subject_id: int, key: str) -> Path:
        """Where the artifact of ``key`` lives."""
        return self.root / strategy_name / f"{int(subject_id)}-{key[:24]}.json"

    def exists(self, strategy_name: str, subject_id: int, key: str) -> bool:
        """True when the artifact is on disk."""
        return self.path(strategy_name, subject_id, key).is_file()

    def get(self, strategy_name: str, subject_id: int, key: str) -> Artifact | None:
        """The stored artifact, or None (missing, or unreadable: it will be rebuilt)."""
        path = self.path(strategy_name, subject_id, key)
        if not path.is_file():
            return None
        try:
            art = Artifact.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError, StrategyError, OSError) as exc:
            log.warning("rebuilding unreadable construction %s (%s)", path, exc)
            return None
        if (art.strategy, art.subject_id, art.key) != (strategy_name, int(subject_id), key):
            log.warning("rebuilding construction %s: it holds another entry", path)
            return None
        return art

    def put(self, artifact: Artifact) -> Path:
        """Write an artifact atomically (its ``key`` must be set)."""
        if not artifact.key:
            raise StrategyError("artifact has no cache key; use ConstructionCache.key()")
        path = self.path(artifact.strategy, artifact.subject_id, artifact.key)
        with atomic_path(path) as tmp:
            tmp.write_text(artifact.to_json(), encoding="utf-8")
        return path

    def get_or_build(
        self,
        strategy: Strategy,
        subject_id: int,
        turns: pd.DataFrame,
        prep: PrepModel | None,
        dialogue_sha: str | None = None,
    ) -> Artifact:
        """The cached artifact, built and stored first if missing."""
        sha = dialogue_sha or dialogue_hash(check_turns(turns, f"patient {subject_id}"))
        key = self.key(strategy, subject_id, sha, prep)
        hit = self.get(strategy.name, subject_id, key)
        if hit is not None:
            return hit
        metered_prep, sink = metered(prep) if strategy.uses_prep else (prep, None)
        artifact = strategy.construct(subject_id, turns, metered_prep)
        attach_usage([artifact], sink)
        artifact.key = key
        self.put(artifact)
        return artifact


def constructions_dir(profile: str | None = None) -> Path:
    """``data/build/<profile>/constructions``."""
    return build_dir(profile) / CONSTRUCTIONS_DIR
