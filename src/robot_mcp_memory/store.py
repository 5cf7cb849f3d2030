"""ProcessStore: process documents as rows of ``index.db`` (memory spec §4, decision 0002).

The row is the source of truth: a document's markdown is rendered from its row on the way
out and nothing is ever written to a markdown file. Each document's row and its search
index entry are written in ONE cold transaction (:meth:`SqliteStore.transaction`), so they
cannot disagree and a kill -9 leaves either the old or the new document.

Which path a write takes follows its kind (DESIGN §4):

- cold, on the caller's thread, never dropped: :meth:`ProcessStore.save`,
  :meth:`~ProcessStore.delete`, :meth:`~ProcessStore.reindex`, and the note that
  :meth:`~ProcessStore.record_outcome` appends to the body;
- hot, on the kit's writer thread (``SqliteStore.enqueue``): the outcome counters and
  ``last_used``, as *relative* updates (``n = n + 1``). A save never writes the counters of
  an existing row, so the two paths never overwrite each other.

Search (:meth:`ProcessStore.find`): the query is NFKC-normalised and reduced to words
(runs of Unicode letters and digits), lowercased; English function words and polite
filler (:data:`STOPWORDS`) are dropped; adjacent words are also tried joined ("mail room"
→ "mailroom"); each term is double-quoted — so FTS5 operators (``AND``, ``NEAR``, ``*``,
``"``, ``^``, ``:``, parentheses...) are inert — and the terms are OR-ed, at most
:data:`MAX_TERMS` of them. A query with no words left finds nothing. Ranking is in SQL
over every match::

    score = -bm25(processes_fts, ...weights) * (s + 1) / (s + f + 2)
    ORDER BY score DESC LIMIT k

with column weights :data:`BM25_WEIGHTS` (title counts most, then the task pattern, the
tags, the body). The index is joined to the rows by rowid: every write gives a document's
index entry its row's rowid (and ``reindex()`` rebuilds them that way), so the ``id``
column of ``processes_fts`` is never read on the search path — reading it for every match
costs more than the search itself (see ``benchmarks/bench_memory.py``).

A query is never refused for its length: past :data:`MAX_QUERY_BYTES` it is searched by
its first 2 KiB (:func:`truncate_query` says whether it was cut, DESIGN §5).

Reads are tolerant of a damaged row (issue 9): a counter or timestamp the document model
would refuse (a REAL counter left by an overflow, a hand-edited date) is repaired on the
way out and logged as ``process_row_repaired``; a row that cannot be read at all is left
out of searches and lists (logged as ``process_row_damaged``) and raises
:class:`DamagedRow` from :meth:`ProcessStore.get`. Nothing here ever fails a whole search
because of one row, and :meth:`ProcessStore.delete` never reads the document, so any row
can be deleted.

All methods are thread-safe (the kit store is). Added in 0.1 (issue 6).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.docmodel import DocError, ProcessDoc
from robot_mcp_memory.limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_ID_LENGTH,
    MAX_K,
    MAX_LIMIT,
    MAX_QUERY_BYTES,
    clamp,
)

__all__ = [
    "BM25_WEIGHTS",
    "MAX_NOTE_CHARS",
    "MAX_TERMS",
    "STOPWORDS",
    "DamagedRow",
    "Found",
    "Owner",
    "ProcessStore",
    "Saved",
    "append_outcome",
    "search_terms",
    "truncate_query",
]

logger = logging.getLogger("robot_mcp_memory.store")

MAX_TERMS = 32
"""Most terms one search ORs together (single words first, then joined pairs)."""

MAX_NOTE_CHARS = 500
"""An outcome note is cut to this many characters (one line in the Outcome log)."""

BM25_WEIGHTS = (0.0, 4.0, 3.0, 2.0, 1.0)
"""bm25 weights of ``processes_fts``'s columns: id (unindexed), title, task_pattern, tags, body."""

_MAX_SUFFIX = 1000  # id-2 … id-1000: beyond that, something is generating ids in a loop

_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be been before being
    below between both but by can could did do does doing down during each either few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just let lets me might more most must my myself near neither
    no nor not now of off on once only or other ought our ours ourselves out over own
    same shall she should so some such than that the their theirs them themselves then
    there these they this those through thus to too under until up upon us very was we
    were what when where whether which while who whom whose why will with within without
    would yet you your yours yourself yourselves
    please pls kindly thanks thank thx hey hi hello ok okay sure maybe also really
    s t ll re ve don doesn didn isn aren wasn weren wouldn shouldn couldn
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""Words a query is not searched by: English function words and polite filler.

Content verbs (get, bring, fetch, take, go, put, open) are deliberately *not* here: they
are what a process's ``task_pattern`` is written in.
"""

_WORD = re.compile(r"[^\W_]+")
_OUTCOME_HEADING = re.compile(r"^##[ \t]+outcome log[ \t]*$", re.MULTILINE | re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}[ \t]", re.MULTILINE)

_COLUMNS = (
    "id, title, task_pattern, tags, robot, created, updated, success_count, "
    "failure_count, last_used, source_mission_id, body, shared"
)


class DamagedRow(Exception):
    """A stored row cannot be read back as a document even after repair.

    ``id`` names it. Searches and lists leave such a row out; an admin can delete it.
    """

    def __init__(self, id: str) -> None:
        super().__init__(
            f"process {id!r} is stored damaged and cannot be read; delete it with "
            "delete_process and save it again"
        )
        self.id = id


@dataclass(frozen=True)
class Owner:
    """Who a stored document belongs to: what visibility checks need, without the body."""

    id: str
    robot: str
    shared: bool


@dataclass(frozen=True)
class Found:
    """One search result.

    ``bm25`` is the positive relevance (``-bm25()``, higher is better), ``reliability`` the
    Laplace-smoothed success rate, ``score = bm25 * reliability`` what results are ranked by.
    """

    doc: ProcessDoc
    score: float
    bm25: float
    reliability: float


@dataclass(frozen=True)
class Saved:
    """The outcome of :meth:`ProcessStore.save`.

    ``doc`` is the document as stored (its final id, counters, timestamps); ``created`` is
    False when an existing document was updated; ``renamed_from`` is the id the caller
    asked for when the document was stored under a suffixed one (``-2``, ``-3``…).
    """

    doc: ProcessDoc
    created: bool
    renamed_from: str | None


def search_terms(query: str) -> list[str]:
    """The words :meth:`ProcessStore.find` searches for, in order, deduplicated.

    Single words first (lowercased, stopwords dropped), then each pair of adjacent words
    joined into one, at most :data:`MAX_TERMS` in all. Pure.
    """
    words: list[str] = _WORD.findall(unicodedata.normalize("NFKC", query).lower())
    kept = [w for w in words if w not in STOPWORDS]
    terms: dict[str, None] = dict.fromkeys(kept)
    for first, second in itertools.pairwise(kept):
        terms.setdefault(first + second)
    return list(terms)[:MAX_TERMS]


def _match_expression(terms: Sequence[str]) -> str:
    # Terms are letters and digits only; doubling quotes is belt and braces.
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def truncate_query(query: str) -> tuple[str, bool]:
    """``query`` cut to its first :data:`MAX_QUERY_BYTES` UTF-8 bytes, and whether it was cut.

    Never splits a character; lone surrogates (valid in JSON, not in UTF-8) are dropped.
    Pure.
    """
    data = query.encode("utf-8", "ignore")
    truncated = len(data) > MAX_QUERY_BYTES
    if truncated:
        data = data[:MAX_QUERY_BYTES]
    return data.decode("utf-8", "ignore"), truncated


def _suffixed(base: str, n: int) -> str:
    suffix = f"-{n}"
    return base[: MAX_ID_LENGTH - len(suffix)].rstrip("-") + suffix


def _same_mission(stored: str | None, incoming: str | None) -> bool:
    return stored is None or incoming is None or stored == incoming


def _outcome_line(when: str, success: bool, note: str) -> str:
    text = " ".join(note.split())
    if len(text) > MAX_NOTE_CHARS:
        text = text[: MAX_NOTE_CHARS - 1] + "…"
    return f"- {when} {'success' if success else 'failure'}: {text}"


def append_outcome(body: str, line: str) -> str:
    """Return ``body`` with ``line`` appended under ``## Outcome log`` (created at the end if
    missing). Pure."""
    heading = _OUTCOME_HEADING.search(body)
    if heading is None:
        return body.rstrip("\n") + "\n\n## Outcome log\n" + line + "\n"
    start = heading.end()
    following = _SECTION_END.search(body, start)
    end = following.start() if following else len(body)
    section = body[start:end].rstrip("\n")
    rest = body[end:]
    return body[:start] + section + "\n" + line + "\n" + ("\n" if rest else "") + rest


class ProcessStore:
    """The process documents of one ``index.db`` (decision 0002).

    Args:
        store: the kit store opened on :data:`robot_mcp_memory.db.SCHEMA`
            (:func:`robot_mcp_memory.db.open_index`). The ProcessStore owns it from here:
            :meth:`close` closes it.
        robot_id: written as a saved document's ``robot`` when the document says
            ``unknown`` (the ``ROBOT_ID`` of the server).
        clock: the time source (injected by tests).
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        robot_id: str = "unknown",
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.robot_id = robot_id
        self._clock = clock

    # --- reads ---------------------------------------------------------------------

    def get(self, id: str) -> ProcessDoc | None:
        """The document with this id, or None. Sees committed rows (hot counter updates
        still in the queue are not yet visible; ``store.flush()`` first if that matters)."""
        row = self.store.query_one(
            f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608 - constant columns
            (id,),
        )
        return None if row is None else _row_to_doc(row)

    def owner(self, id: str) -> Owner | None:
        """Who the document ``id`` belongs to, or None; reads two columns, never the body.

        For visibility checks: it works on a row too damaged to read as a document.
        """
        row = self.store.query_one("SELECT robot, shared FROM processes WHERE id = ?", (id,))
        if row is None:
            return None
        return Owner(id=id, robot=str(row["robot"]), shared=bool(row["shared"]))

    def get_markdown(self, id: str) -> str | None:
        """The document rendered as markdown, or None."""
        doc = self.get(id)
        return None if doc is None else doc.render()

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """The ``k`` best documents for a natural-language ``query``, best first.

        Never raises for the text of a query (operators, quotes, emoji, control characters
        are all inert, any length is searched by its first :data:`MAX_QUERY_BYTES`), and a
        damaged row is left out rather than failing the search.

        Args:
            query: any text.
            k: clamped to ``1..MAX_K``.
            robots: None for every document; otherwise only documents whose ``robot`` is
                one of these, plus the ``shared`` ones (an empty collection: shared only).
        """
        terms = search_terms(truncate_query(query)[0])
        if not terms:
            return []
        weights = ", ".join(repr(float(w)) for w in BM25_WEIGHTS)
        scope_sql, scope_params = _scope(robots, "p.")
        reliability = "(p.success_count + 1.0) / (p.success_count + p.failure_count + 2.0)"
        # Two steps: score every match joining the index to the rows by rowid (the index
        # row shares its document row's rowid), keep the top k by score, and only then
        # read those k rows in full. Reading the fts `id` column, or carrying bodies
        # through the sort, for every match would cost more than the search itself.
        sql = (
            f"SELECT {', '.join('p.' + c for c in _COLUMNS.split(', '))}, "  # noqa: S608
            "  top.relevance, top.reliability, top.score "
            "FROM ("
            "  SELECT processes_fts.rowid AS rid, "
            f"   -bm25(processes_fts, {weights}) AS relevance, "
            f"   {reliability} AS reliability, "
            f"   -bm25(processes_fts, {weights}) * {reliability} AS score "
            "  FROM processes_fts JOIN processes AS p ON p.rowid = processes_fts.rowid "
            f"  WHERE processes_fts MATCH ? {'AND ' + scope_sql if scope_sql else ''} "
            "  ORDER BY score DESC, rid LIMIT ?"
            ") AS top JOIN processes AS p ON p.rowid = top.rid "
            "ORDER BY top.score DESC, top.rid"
        )
        rows = self.store.query(sql, (_match_expression(terms), *scope_params, clamp(k, 1, MAX_K)))
        found = []
        for row in rows:
            doc = _readable(row)
            if doc is not None:
                found.append(
                    Found(
                        doc=doc,
                        score=float(row["score"]),
                        bm25=float(row["relevance"]),
                        reliability=float(row["reliability"]),
                    )
                )
        return found

    def list(
        self, limit: int = 50, offset: int = 0, *, robots: Collection[str] | None = None
    ) -> list[ProcessDoc]:
        """Documents ordered by id; ``limit`` clamped to ``1..MAX_LIMIT``.

        ``robots`` filters as in :meth:`find`. A damaged row is left out (logged).
        """
        scope_sql, scope_params = _scope(robots, "")
        rows = self.store.query(
            f"SELECT {_COLUMNS} FROM processes "  # noqa: S608 - constant columns
            f"{'WHERE ' + scope_sql if scope_sql else ''} ORDER BY id LIMIT ? OFFSET ?",
            (*scope_params, clamp(limit, 1, MAX_LIMIT), max(0, int(offset))),
        )
        return [doc for doc in map(_readable, rows) if doc is not None]

    def count(self, *, robots: Collection[str] | None = None) -> int:
        """How many documents there are (``robots`` filters as in :meth:`find`)."""
        scope_sql, scope_params = _scope(robots, "")
        row = self.store.query_one(
            f"SELECT count(*) FROM processes {'WHERE ' + scope_sql if scope_sql else ''}",  # noqa: S608
            scope_params,
        )
        return int(row[0]) if row is not None else 0

    # --- cold writes ---------------------------------------------------------------

    def save(self, doc: ProcessDoc, *, guard: Callable[[sqlite3.Row], None] | None = None) -> Saved:
        """Insert or update a document; row and index in one transaction (cold).

        Collision rules (memory spec §5): if a document with this id exists and comes from
        the same teaching mission — equal ``source_mission_id``, or either one missing — it
        is updated in place: content replaced, ``updated`` bumped, ``created``, the
        counters and ``last_used`` kept. If it comes from a different mission, the document
        goes to ``id-2``, then ``id-3``… (updating the first of those that is from its
        mission). A new document keeps the counters and timestamps it carries (a copy
        between deployments stays a copy); ``created`` defaults to now.

        ``robot: unknown`` becomes this store's ``robot_id`` (on an update: the stored
        robot, unless this store has a robot id).

        ``guard``, when given, is called inside the save's transaction with the row it is
        about to update (columns ``id``, ``robot``, ``shared``, ``source_mission_id``) — the
        row the collision rule finally chose, not the id that was asked for — and may raise
        to refuse the save; nothing is written then.

        The size limit is the document model's (on the markdown the client sent, and on
        the body), never on a re-rendered form the client did not write.

        Raises:
            DocError: ``reason="conflict"`` when ``id-2`` … ``id-1000`` are all taken.
        """
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self.robot_id
        base = doc.id
        with self.store.transaction() as conn:
            candidate, n = base, 1
            while True:
                row = conn.execute(
                    "SELECT rowid, id, robot, shared, source_mission_id FROM processes "
                    "WHERE id = ?",
                    (candidate,),
                ).fetchone()
                if row is None:
                    self._insert(conn, doc, candidate, robot, now)
                    created = True
                    break
                if _same_mission(row["source_mission_id"], doc.source_mission_id):
                    if guard is not None:
                        guard(row)
                    self._update(conn, doc, candidate, row, robot, now)
                    created = False
                    break
                n += 1
                if n > _MAX_SUFFIX:
                    raise DocError(
                        "id",
                        "conflict",
                        f"id {base!r} and its suffixed forms up to "
                        f"{_suffixed(base, _MAX_SUFFIX)!r} all belong to other missions; "
                        "choose a different id",
                    )
                candidate = _suffixed(base, n)
            stored = conn.execute(
                f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (candidate,),
            ).fetchone()
        return Saved(
            doc=_row_to_doc(stored),
            created=created,
            renamed_from=base if candidate != base else None,
        )

    def _insert(
        self, conn: sqlite3.Connection, doc: ProcessDoc, id: str, robot: str, now: str
    ) -> None:
        tags = _tags_json(doc.tags)
        cursor = conn.execute(
            f"INSERT INTO processes ({_COLUMNS}) "  # noqa: S608 - constant columns
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                id,
                doc.title,
                doc.task_pattern,
                tags,
                robot,
                format_ts(doc.created) if doc.created else now,
                now,
                doc.success_count,
                doc.failure_count,
                format_ts(doc.last_used) if doc.last_used else None,
                doc.source_mission_id,
                doc.body,
                int(doc.shared),
            ),
        )
        _index(conn, cursor.lastrowid, id, doc.title, doc.task_pattern, tags, doc.body)

    def _update(
        self,
        conn: sqlite3.Connection,
        doc: ProcessDoc,
        id: str,
        row: sqlite3.Row,
        robot: str,
        now: str,
    ) -> None:
        tags = _tags_json(doc.tags)
        # Content columns only: the counters belong to the hot path (n = n + 1 on the
        # writer thread) and an absolute write here could undo a queued increment.
        conn.execute(
            "UPDATE processes SET title = ?, task_pattern = ?, tags = ?, robot = ?, "
            "updated = ?, source_mission_id = COALESCE(?, source_mission_id), body = ?, "
            "shared = ? WHERE id = ?",
            (
                doc.title,
                doc.task_pattern,
                tags,
                row["robot"] if robot == "unknown" else robot,
                now,
                doc.source_mission_id,
                doc.body,
                int(doc.shared),
                id,
            ),
        )
        _index(conn, row["rowid"], id, doc.title, doc.task_pattern, tags, doc.body)

    def delete(self, id: str) -> bool:
        """Remove the document and its index entry in one transaction; False if unknown."""
        with self.store.transaction() as conn:
            row = conn.execute("SELECT rowid FROM processes WHERE id = ?", (id,)).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM processes WHERE id = ?", (id,))
            _unindex(conn, row["rowid"])
        return True

    def reindex(self) -> int:
        """Rebuild ``processes_fts`` from the rows; return how many documents it indexed.

        Flushes queued hot writes first, then deletes and refills the index in one
        transaction. For a tokenizer or weight change — the index cannot drift from the
        rows, since every write updates both in one transaction.
        """
        self.store.flush()
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM processes_fts")
            conn.execute(
                "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
                "SELECT rowid, id, title, task_pattern, tags, body FROM processes"
            )
            conn.execute("INSERT INTO processes_fts (processes_fts) VALUES ('optimize')")
            n = int(conn.execute("SELECT count(*) FROM processes").fetchone()[0])
        logger.info("processes_reindexed indexed=%d", n, extra={"indexed": n})
        return n

    # --- outcomes ------------------------------------------------------------------

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count one use of a process; None if the id is unknown.

        The counter and ``last_used`` go through the hot path (``store.enqueue``: the
        writer thread, never blocking the caller; dropped and counted if the queue is
        full). A non-empty ``note`` is a cold write: one line
        ``- <ts> success|failure: <note>`` (whitespace collapsed, cut to
        :data:`MAX_NOTE_CHARS`) appended under ``## Outcome log`` — created at the end of
        the body if missing — with the index entry, in one transaction. ``updated`` is not
        bumped: an outcome is a record about the document, not an edit of it. A note that
        would push the document over 256 KiB is not appended (logged).

        Returns:
            The document as it will be once the counter write lands (counters read before
            the increment was queued, plus one).
        """
        row = self.store.query_one(
            f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
            (id,),
        )
        if row is None:
            return None
        when = self._clock()
        stamp = format_ts(when)
        column = "success_count" if success else "failure_count"
        # Saturating: a counter stops at MAX_COUNT instead of overflowing SQLite's INTEGER
        # into a REAL (and min() turns a REAL left by an older version back into one).
        queued = self.store.enqueue(
            f"UPDATE processes SET {column} = min({column} + 1, {MAX_COUNT}), "  # noqa: S608
            "last_used = ? WHERE id = ?",
            (stamp, id),
        )
        if not queued:
            logger.warning(
                "process_outcome_dropped id=%s success=%s", id, success, extra={"id": id}
            )
        doc = _row_to_doc(row)
        if note.strip():
            body = self._append_note(id, _outcome_line(stamp, success, note))
            if body is not None:
                doc.body = body
        if queued:
            doc.last_used = when
            if success:
                doc.success_count = min(doc.success_count + 1, MAX_COUNT)
            else:
                doc.failure_count = min(doc.failure_count + 1, MAX_COUNT)
        return doc

    def _append_note(self, id: str, line: str) -> str | None:
        with self.store.transaction() as conn:
            row = conn.execute(
                f"SELECT rowid, {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (id,),
            ).fetchone()
            if row is None:
                return None
            body = append_outcome(row["body"], line)
            doc = _row_to_doc(row)
            doc.body = body
            if len(doc.render().encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
                logger.warning(
                    "process_outcome_note_skipped id=%s reason=too_large", id, extra={"id": id}
                )
                return None
            conn.execute("UPDATE processes SET body = ? WHERE id = ?", (body, id))
            _index(conn, row["rowid"], id, row["title"], row["task_pattern"], row["tags"], body)
        return body

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Write queued counters and close the underlying store. Idempotent."""
        self.store.close()

    def __repr__(self) -> str:
        return f"<ProcessStore {str(self.store.path)!r} robot_id={self.robot_id!r}>"


# --- row helpers ----------------------------------------------------------------------


def _tags_json(tags: Sequence[str]) -> str:
    return json.dumps(list(tags), ensure_ascii=False)


# Columns a damaged value of which is replaced by its default on read (the document is
# still the document); a bad id, title or body makes the row unreadable instead.
_REPAIRABLE: dict[str, Any] = {
    "task_pattern": "",
    "tags": [],
    "robot": "unknown",
    "created": None,
    "updated": None,
    "last_used": None,
    "source_mission_id": None,
    "success_count": 0,
    "failure_count": 0,
}


def _row_fields(row: sqlite3.Row) -> dict[str, Any]:
    try:
        tags: Any = json.loads(row["tags"])
    except (TypeError, ValueError):
        tags = None  # repaired below
    return {
        "id": row["id"],
        "title": row["title"],
        "task_pattern": row["task_pattern"],
        "tags": tags,
        "robot": row["robot"],
        "created": row["created"],
        "updated": row["updated"],
        "success_count": _stored_count(row["success_count"]),
        "failure_count": _stored_count(row["failure_count"]),
        "last_used": row["last_used"],
        "source_mission_id": row["source_mission_id"],
        "shared": bool(row["shared"]),
        "body": row["body"],
    }


def _stored_count(value: Any) -> Any:
    # A REAL (an overflowed increment of an older version) or an out-of-range integer is
    # brought back into 0..MAX_COUNT; anything else is left for validation to judge.
    if isinstance(value, float):
        return int(min(max(value, 0.0), float(MAX_COUNT))) if value == value else 0
    if isinstance(value, int) and not 0 <= value <= MAX_COUNT:
        return min(max(value, 0), MAX_COUNT)
    return value


def _row_to_doc(row: sqlite3.Row) -> ProcessDoc:
    """The row as a document, repairing damaged optional fields (logged); else DamagedRow."""
    fields = _row_fields(row)
    repaired: list[str] = []
    for _ in range(len(_REPAIRABLE) + 1):
        try:
            doc = ProcessDoc.model_validate(fields)
        except ValidationError as exc:
            bad = {str(error["loc"][0]) for error in exc.errors() if error.get("loc")}
            fixable = bad & _REPAIRABLE.keys()
            if not fixable or bad - fixable:
                raise DamagedRow(str(row["id"])) from None
            for name in fixable:
                fields[name] = _REPAIRABLE[name]
            repaired.extend(sorted(fixable))
            continue
        if repaired or fields["tags"] is None:
            logger.warning(
                "process_row_repaired id=%s fields=%s", row["id"], ",".join(repaired) or "tags"
            )
        return doc
    raise DamagedRow(str(row["id"]))  # pragma: no cover - each pass repairs a field or raises


def _readable(row: sqlite3.Row) -> ProcessDoc | None:
    """The row as a document, or None (logged) when it is damaged beyond repair."""
    try:
        return _row_to_doc(row)
    except DamagedRow:
        logger.error("process_row_damaged id=%s", row["id"], extra={"id": row["id"]})
        return None


def _scope(robots: Collection[str] | None, prefix: str) -> tuple[str, list[Any]]:
    if robots is None:
        return "", []
    names = sorted(set(robots))
    if not names:
        return f"{prefix}shared = 1", []
    marks = ", ".join("?" for _ in names)
    return f"({prefix}shared = 1 OR {prefix}robot IN ({marks}))", list(names)


def _index(
    conn: sqlite3.Connection,
    rowid: int | None,
    id: str,
    title: str,
    task_pattern: str,
    tags: str,
    body: str,
) -> None:
    # The index row shares the document row's rowid: search joins the two on it, and a
    # document's entry is found without scanning the (UNINDEXED) id column. An entry
    # already at that rowid can only be a stale one (the rows' rowids are unique), so it
    # is replaced.
    conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (rowid,))
    conn.execute(
        "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (rowid, id, title, task_pattern, tags, body),
    )


def _unindex(conn: sqlite3.Connection, rowid: int) -> None:
    conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (rowid,))
