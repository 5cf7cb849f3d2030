"""Text embedders for the semantic search signal (decision 0011).

An :class:`Embedder` turns texts into L2-normalised float32 vectors; the store keeps the
vectors of every document beside its row (``processes_vectors``, a DERIVED table) under
the embedder's :attr:`~Embedder.name` and :attr:`~Embedder.dim`, so a different model is
never compared with vectors of another one: its vectors are recomputed instead.

The default, :class:`WordLlamaEmbedder`, is a *static* embedding model (a token-embedding
table averaged over the text) whose weights ship inside the ``wordllama`` wheel. It is
loaded from the installed package's own files with downloads disabled, so it never
touches the network (a test proves it with sockets and the Hugging Face hub disabled).

A deployment that can download a hub model plugs it in with :class:`FunctionEmbedder`
around any ``texts -> array`` callable, for instance a model2vec ``StaticModel`` or a
fastembed ``TextEmbedding`` loaded from a local folder (both load offline), and passes it
to ``StoreHolder.for_settings(settings, embedder=...)`` — see decision 0011.

Embedders are called from several threads at once (the save path and the tool workers);
the default is thread-safe (read-only numpy table, the tokenizers library is re-entrant).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from robot_mcp_memory._exceptions import EmbedderUnavailable

__all__ = [
    "DEFAULT_MODEL",
    "MAX_EMBED_CHARS",
    "Embedder",
    "FunctionEmbedder",
    "HashingEmbedder",
    "Pairs",
    "Vectors",
    "WordLlamaEmbedder",
    "document_texts",
    "load_default_embedder",
    "normalise",
]

DEFAULT_MODEL = "wordllama/l2_supercat-256"
"""The default embedder's :attr:`~Embedder.name` (stored beside each vector)."""

MAX_EMBED_CHARS = 8_000
"""A text is embedded by its first 8 000 characters.

A static model averages token vectors, so the head of a long document already fixes its
direction; the cap bounds the transient memory of one embedding (tokens x dim floats) for
a 256 KiB document.
"""

Vectors = npt.NDArray[np.float32]
"""Unit-length float32 vectors, one row per text."""

Pairs = list[tuple[Vectors, Vectors]]
"""Each document's (head, whole-document) vectors."""


def document_texts(title: str, task_pattern: str, tags: Sequence[str], body: str) -> list[str]:
    """The two texts a document is embedded by: its head (title, task pattern, tags) and
    the whole document."""
    head = "\n".join(part for part in (title, task_pattern, " ".join(tags)) if part)
    return [head, head + "\n" + body]


@runtime_checkable
class Embedder(Protocol):
    """What the store needs of an embedding model.

    ``name`` identifies the model (and its dimension) in the stored vectors: two embedders
    with the same ``name`` must produce comparable vectors. ``embed`` returns one row per
    text, float32, each row L2-normalised (an all-zero row for a text with nothing to
    embed is allowed: its cosine with anything is 0). It must not raise for any string.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalise(vectors: npt.ArrayLike) -> Vectors:
    """``vectors`` as a 2-D float32 array with unit rows (zero rows stay zero). Pure."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[np.newaxis, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    out = np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
    out[~np.isfinite(out)] = 0.0
    result: Vectors = out
    return result


class FunctionEmbedder:
    """An :class:`Embedder` around any ``texts -> array`` callable (a hub model, a fake).

    Args:
        name: stored beside each vector; change it whenever the model changes.
        dim: the model's output dimension (checked on every call).
        encode: returns one vector per text (any array-like, any norm; normalised here).

    Example, a model2vec model copied to a local folder (loads offline)::

        from model2vec import StaticModel
        model = StaticModel.from_pretrained("/opt/models/potion-base-8M")
        embedder = FunctionEmbedder("model2vec/potion-base-8M", 256, model.encode)
    """

    def __init__(self, name: str, dim: int, encode: Callable[[list[str]], Any]) -> None:
        if not name or dim < 1:
            raise ValueError(f"an embedder needs a name and a dimension >= 1, got {name!r}, {dim}")
        self._name = name
        self._dim = dim
        self._encode = encode

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        out = normalise(self._encode([t[:MAX_EMBED_CHARS] for t in texts]))
        if out.shape != (len(texts), self._dim):
            raise ValueError(
                f"embedder {self._name!r} returned shape {out.shape}, expected "
                f"({len(texts)}, {self._dim})"
            )
        return out

    def __repr__(self) -> str:
        return f"FunctionEmbedder(name={self._name!r}, dim={self._dim})"


class HashingEmbedder:
    """A deterministic bag-of-words embedder with no model: each lowercased word adds one
    to a bucket chosen by its hash (BLAKE2b, stable across processes).

    Not semantic at all — texts are close only when they share words. For tests and for
    exercising the hybrid path where no model may be loaded. ``name`` includes ``dim``.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text[:MAX_EMBED_CHARS].lower().split():
                digest = hashlib.blake2b(word.strip(".,;:!?()[]\"'").encode(), digest_size=4)
                out[i, int.from_bytes(digest.digest(), "little") % self._dim] += 1.0
        return normalise(out)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"


class WordLlamaEmbedder:
    """The default embedder: wordllama ``l2_supercat`` at 256 dimensions, from the wheel.

    Load it with :func:`load_default_embedder` (which says why when it cannot). The
    weights derive from LLaMA 2 token embeddings; decision 0011 states the licence
    position.
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        self._dim = int(model.embedding.shape[1])

    @property
    def name(self) -> str:
        return DEFAULT_MODEL

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        # One call per text: wordllama pads a batch to its longest member, so a short title
        # beside a long body would cost the body's length twice.
        rows = [self._model.embed(t[:MAX_EMBED_CHARS] or " ", norm=False)[0] for t in texts]
        return normalise(np.vstack(rows))

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r}, dim={self._dim})"


def _import_wordllama() -> Any:
    # wordllama's __init__ calls logging.basicConfig(level=INFO): undo that side effect so
    # importing it never changes how the host process logs.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama  # type: ignore[import-untyped]  # optional, imported on demand
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


def load_default_embedder() -> WordLlamaEmbedder:
    """Load :class:`WordLlamaEmbedder` from the installed ``wordllama`` package, offline.

    ``cache_dir`` points at the package's own directory (where its tokenizer config
    lives) and downloads are disabled, so nothing is fetched whatever the environment.
    Takes about a second and ~60 MiB.

    Raises:
        EmbedderUnavailable: the package is not installed or its files are missing.
    """
    try:
        wordllama = _import_wordllama()
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"the embedding model package 'wordllama' is not installed ({exc.name or exc}); "
            "install the 'memory' extra to enable semantic search"
        ) from None
    package_dir = Path(wordllama.__file__).parent
    try:
        model = wordllama.WordLlama.load(
            "l2_supercat", dim=256, cache_dir=package_dir, disable_download=True
        )
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise EmbedderUnavailable(
            f"the wordllama model files are missing or unreadable in {package_dir} ({exc}); "
            "reinstall the 'memory' extra to enable semantic search"
        ) from None
    return WordLlamaEmbedder(model)
