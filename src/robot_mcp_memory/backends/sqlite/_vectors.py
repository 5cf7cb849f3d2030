"""The documents' vectors in memory, for brute-force cosine (decision 0011).

``processes_vectors`` (a DERIVED table of ``index.db``) is the durable copy: one row per
document with two float32 blobs — ``head`` (title + task pattern + tags) and ``doc`` (the
whole document) — and the model's name and dimension. :class:`VectorIndex` is its copy in
memory: two ``(n, dim)`` matrices plus, per row, the document's rowid, robot and ``shared``
flag, so one query is two matrix-vector products over every document (about a millisecond
for 10 000 documents) and a mask.

The mask only *preselects*: the visibility filter that decides is the SQL one
(:func:`robot_mcp_memory.backends._processes.visible`), applied again when the chosen rows
are read, so a stale robot here can never hand a document to a robot that may not see it.

Thread-safe: every method takes the index's lock. Updates are O(1) (slots are reused; the
matrices double when full).
"""

from __future__ import annotations

import threading
from collections.abc import Collection

import numpy as np
import numpy.typing as npt

__all__ = ["VectorIndex", "from_blob", "to_blob"]

Vectors = npt.NDArray[np.float32]

_INITIAL_CAPACITY = 64


def _dot(matrix: Vectors, vector: Vectors) -> Vectors:
    # einsum, not `@`: a matrix-vector product this size is memory-bound, and BLAS hands it
    # to its thread pool, whose wake-up after the SQL part of a query cost 10+ ms on a busy
    # 2-core machine (measured, decision 0011); einsum's loop stays on the calling thread.
    result: Vectors = np.einsum("ij,j->i", matrix, vector)
    return result


def to_blob(vector: Vectors) -> bytes:
    """One vector as the stored blob: little-endian float32."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> Vectors | None:
    """The vector stored in ``blob``, or None if it is not ``dim`` float32 values."""
    if not isinstance(blob, bytes | bytearray | memoryview) or len(blob) != 4 * dim:
        return None
    vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    return vector if bool(np.isfinite(vector).all()) else None


class VectorIndex:
    """Per-document head and whole-document vectors, scored by the better cosine."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._head = np.zeros((_INITIAL_CAPACITY, dim), dtype=np.float32)
        self._doc = np.zeros((_INITIAL_CAPACITY, dim), dtype=np.float32)
        self._rowids = np.full(_INITIAL_CAPACITY, -1, dtype=np.int64)
        self._robot = np.full(_INITIAL_CAPACITY, -1, dtype=np.int32)
        self._shared = np.zeros(_INITIAL_CAPACITY, dtype=bool)
        self._slot: dict[int, int] = {}
        self._free: list[int] = []
        self._used = 0  # slots ever handed out; rows >= _used are unused
        self._robot_codes: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._slot)

    def _code(self, robot: str) -> int:
        code = self._robot_codes.get(robot)
        if code is None:
            code = self._robot_codes[robot] = len(self._robot_codes)
        return code

    def _grow(self) -> None:
        capacity = 2 * len(self._rowids)
        for attr, fill in (("_head", 0.0), ("_doc", 0.0)):
            old = getattr(self, attr)
            new = np.full((capacity, self.dim), fill, dtype=np.float32)
            new[: len(old)] = old
            setattr(self, attr, new)
        self._rowids = np.concatenate(
            [self._rowids, np.full(capacity - len(self._rowids), -1, dtype=np.int64)]
        )
        self._robot = np.concatenate(
            [self._robot, np.full(capacity - len(self._robot), -1, dtype=np.int32)]
        )
        self._shared = np.concatenate(
            [self._shared, np.zeros(capacity - len(self._shared), dtype=bool)]
        )

    def put(self, rowid: int, head: Vectors, doc: Vectors, robot: str, shared: bool) -> None:
        """Set (insert or replace) the vectors and owner of document ``rowid``."""
        with self._lock:
            slot = self._slot.get(rowid)
            if slot is None:
                if self._free:
                    slot = self._free.pop()
                else:
                    if self._used == len(self._rowids):
                        self._grow()
                    slot = self._used
                    self._used += 1
                self._slot[rowid] = slot
            self._head[slot] = head
            self._doc[slot] = doc
            self._rowids[slot] = rowid
            self._robot[slot] = self._code(robot)
            self._shared[slot] = shared

    def remove(self, rowid: int) -> None:
        """Forget document ``rowid`` (nothing if unknown)."""
        with self._lock:
            slot = self._slot.pop(rowid, None)
            if slot is None:
                return
            self._rowids[slot] = -1
            self._robot[slot] = -1
            self._shared[slot] = False
            self._head[slot] = 0.0
            self._doc[slot] = 0.0
            self._free.append(slot)

    def clear(self) -> None:
        """Forget every document."""
        with self._lock:
            self._slot.clear()
            self._free.clear()
            self._used = 0
            self._rowids[:] = -1
            self._robot[:] = -1
            self._shared[:] = False

    def rowids(self) -> set[int]:
        """The rowids held."""
        with self._lock:
            return set(self._slot)

    def cosines(self, rowids: Collection[int], query: Vectors) -> dict[int, float]:
        """The better cosine of each of ``rowids`` held here with a unit ``query`` vector."""
        with self._lock:
            slots = [(r, self._slot[r]) for r in rowids if r in self._slot]
            if not slots:
                return {}
            index = np.fromiter((s for _, s in slots), dtype=np.int64, count=len(slots))
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            cos = np.maximum(_dot(self._head[index], q), _dot(self._doc[index], q))
            return {r: float(c) for (r, _), c in zip(slots, cos.tolist(), strict=True)}

    def score(
        self, query: Vectors, robots: Collection[str] | None, top: int
    ) -> tuple[npt.NDArray[np.int64], Vectors, float, float]:
        """The ``top`` best visible documents for a unit ``query`` vector.

        Returns ``(rowids, cosines, low, high)``: the candidates best first, each one's
        better cosine of its head and whole-document vectors, and the lowest and highest
        such cosine over *every* visible document (what min-max normalisation needs).
        ``robots`` preselects as :func:`robot_mcp_memory.processes._rows.scope_sql` filters.
        """
        with self._lock:
            n = self._used
            if n == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32), 0.0, 0.0
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            cos = np.maximum(_dot(self._head[:n], q), _dot(self._doc[:n], q))
            visible = self._rowids[:n] >= 0
            if robots is not None:
                codes = [self._robot_codes[r] for r in robots if r in self._robot_codes]
                visible &= self._shared[:n] | np.isin(self._robot[:n], codes)
            index = np.flatnonzero(visible)
            if index.size == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32), 0.0, 0.0
            scores = cos[index]
            low, high = float(scores.min()), float(scores.max())
            if index.size > top:
                part = np.argpartition(-scores, top - 1)[:top]
                index, scores = index[part], scores[part]
            order = np.argsort(-scores, kind="stable")
            return self._rowids[index[order]].copy(), scores[order].copy(), low, high
