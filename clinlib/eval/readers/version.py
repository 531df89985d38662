"""The version of the offline readers' policy: what identifies a stored reader prediction.

The offline readers (``reference``, ``eager``; :mod:`clinlib.eval.readers.policies`) are deterministic
code, not models, and their answers are never cached; but a stored prediction is keyed by
(qid, strategy, backbone, prep_model, setting) only, so before this version a prediction made
by an OLDER policy counted as done after the policy code changed, and was shown as the
current reader's answer. Each reader row now records :func:`reader_version` (a digest of the
policy modules' source, so no one has to remember to bump a constant);
:func:`clinlib.eval.harness.store.load_predictions` leaves out reader rows of another version, and a
run therefore asks them again. The gold rules (:mod:`clinlib.tasks.rules`) are not part of
it: a gold change changes questions.parquet, which already makes every prediction stale
(clinlib.core.guards, "predictions basis"). Paper §4 "Backbones".
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from clinlib.llm.presets import OFFLINE_READER_NAMES

# The registered reader backbones whose rows carry a version (clinlib.eval.readers.policies).
READER_BACKBONES: tuple[str, ...] = OFFLINE_READER_NAMES
# The modules whose source is the readers' policy: every module of this package but this one.
READER_MODULES: tuple[str, ...] = (
    "answers",
    "decision",
    "imaging",
    "order",
    "policies",
    "prompt",
    "relative",
    "trap",
)
VERSION_CHARS = 16


@functools.cache
def policy_digest() -> str:
    """sha256 (first :data:`VERSION_CHARS` hex digits) of the reader modules' source."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in READER_MODULES:
        h.update(name.encode() + b"\0" + (here / f"{name}.py").read_bytes() + b"\0")
    return h.hexdigest()[:VERSION_CHARS]


def reader_version(backbone: str) -> str | None:
    """The version a prediction of ``backbone`` records: the policy digest for an offline
    reader, None for every other backbone (an LLM's answers are keyed by its name and the
    response cache's request hash)."""
    return policy_digest() if backbone in READER_BACKBONES else None
