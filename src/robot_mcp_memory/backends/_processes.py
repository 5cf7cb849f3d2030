"""The process documents' SQL that both backends spell alike, written once over a
:class:`~._sql.Session` and its :class:`~._sql.Dialect`.

``processes`` and ``processes_revisions`` have the same columns on both backends; what
differs (the row's key, the row lock, how a list is bound, bytewise order) is the
dialect's. The lexical index, the vectors, the counted outcomes and the bounds on
revisions are each backend's own (:mod:`.sqlite`, :mod:`.postgres`).

Every statement here reads or writes the one store behind the session; the visibility
filter of every read (:func:`visible`) is this module's, so a list, a count, a pool and a
row read for a find all filter alike.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from robot_mcp_memory._limits import (
    MAX_COUNT,
    NEAR_DUPLICATE_CANDIDATES,
    STALE_FAILURE_SHARE,
    STALE_MIN_OUTCOMES,
    STALE_WINDOW,
)
from robot_mcp_memory.backends._sql import Dialect, Row, Session
from robot_mcp_memory.processes import (
    COLUMNS,
    DocTerms,
    Embedder,
    Lexical,
    Pairs,
    Scored,
    Semantic,
    Vectors,
)

__all__ = [
    "CONTENT",
    "RELIABILITY_SQL",
    "IndexReads",
    "IndexWrites",
    "Reads",
    "Tx",
    "count",
    "current_at",
    "delete_row",
    "holding_sql",
    "insert_row",
    "keep_revision",
    "kept",
    "latest_life",
    "lexical_pool",
    "lexical_top",
    "lives",
    "merged_markdown",
    "outcome_sql",
    "owner",
    "page",
    "read_row",
    "read_rows",
    "reliabilities",
    "revision_markdown",
    "revisions",
    "row_columns",
    "rows_of",
    "set_columns",
    "stale_sql",
    "states",
    "stored_vectors",
    "visible",
]

CONTENT = (
    "title",
    "task_pattern",
    "tags",
    "robot",
    "updated",
    "source_mission_id",
    "body",
    "shared",
)
"""The columns a save, a revert, a merge or a note may change (never the counters)."""

_COUNTERS = ("success_count", "failure_count", "last_used", "last_success")

RELIABILITY_SQL = "(p.success_count + 1.0) / (p.success_count + p.failure_count + 2.0)"
""":func:`robot_mcp_kit.reliability` as SQL over ``processes AS p``: the same Laplace-smoothed
success rate, computed in the query so the top-k cut happens in the store. The one SQL
copy of the formula; a test checks it against the function."""

_P_COLUMNS = ", ".join("p." + c for c in COLUMNS.split(", "))

_LATEST_LIFE = (
    "SELECT max(life) FROM (SELECT life FROM processes WHERE id = ? "
    "UNION ALL SELECT life FROM processes_revisions WHERE doc_id = ?) AS lives"
)
"""The latest life of an id (its row's, else its highest kept; NULL when neither), bound
``(id, id)``."""

# Run after the row is inserted, as its own statement: its snapshot sees every revision a
# concurrent delete or merge of the id kept (on PostgreSQL an INSERT that met the deleted
# row's index entry waited for that transaction), and no later one can end a life of the
# id while this transaction holds its row.
_PLACE_IN_LIFE = (
    "UPDATE processes AS p SET life = l.life, revision = 1 + coalesce((SELECT "
    "max(r.revision) FROM processes_revisions AS r WHERE r.doc_id = p.id "
    "AND r.life = l.life), 0) FROM (SELECT CASE WHEN ? AND max(life) IS NOT NULL "
    "THEN max(life) ELSE coalesce(max(life), 0) + 1 END AS life FROM processes_revisions "
    "WHERE doc_id = ?) AS l WHERE p.{key} = ?"
)


def stale_sql(prefix: str = "") -> str:
    """The condition "this row is stale" (:class:`~robot_mcp_memory.processes.DocState`'s
    rule, its SQL twin) on ``prefix``'s columns; constants only, valid on both backends."""
    outcomes = f"length({prefix}recent_outcomes)"
    failures = f"({outcomes} - length(replace({prefix}recent_outcomes, 'f', '')))"
    return (
        f"({outcomes} >= {int(STALE_MIN_OUTCOMES)} AND "
        f"{failures} > {float(STALE_FAILURE_SHARE)} * {outcomes})"
    )


def visible(d: Dialect, robots: Collection[str] | None) -> tuple[str, list[Any]]:
    """The visibility filter over ``processes AS p`` and its parameters; "" for everything.

    ``robots`` None: every document; otherwise the documents whose ``robot`` is one of
    these, plus the ``shared`` ones (an empty collection: shared only). Every read path —
    lists, counts, lexical and semantic pools, the rows a find returns — filters with this
    one condition (the semantic path must never widen it).
    """
    if robots is None:
        return "", []
    names = sorted(set(robots))
    if not names:
        return "p.shared", []
    among, param = d.one_of("p.robot", names)
    return f"(p.shared OR {among})", [param]


def _where(*conditions: str) -> str:
    kept = [c for c in conditions if c]
    return f"WHERE {' AND '.join(kept)}" if kept else ""


def row_columns(d: Dialect) -> str:
    """What a write reads of a row: its key, columns, revision, life and last success."""
    return f"p.{d.key} AS key, {_P_COLUMNS}, p.revision, p.life, p.last_success"


# --- reads ----------------------------------------------------------------------------


def read_row(s: Session, id: str, *, lock: bool = False) -> Row | None:
    """The row of ``id`` (:func:`row_columns`), locked with ``lock``."""
    d = s.dialect
    return s.one(
        f"SELECT {row_columns(d)} FROM processes AS p WHERE p.id = ?"  # noqa: S608
        f"{d.for_update if lock else ''}",
        [id],
    )


def read_rows(s: Session, ids: Collection[str]) -> dict[str, Row]:
    """The rows of ``ids``, locked in id order."""
    d = s.dialect
    among, param = d.one_of("p.id", sorted(set(ids)))
    rows = s.all(
        f"SELECT {row_columns(d)} FROM processes AS p WHERE {among} "  # noqa: S608
        f"ORDER BY p.id{d.bytewise}{d.for_update}",
        [param],
    )
    return {str(r["id"]): r for r in rows}


def owner(s: Session, id: str) -> tuple[str, bool] | None:
    """``(robot, shared)`` of ``id``, or None."""
    row = s.one("SELECT robot, shared FROM processes WHERE id = ?", [id])
    return None if row is None else (str(row["robot"]), bool(row["shared"]))


def page(
    s: Session, robots: Collection[str] | None, stale: bool | None, limit: int, offset: int
) -> list[Row]:
    """A page of visible documents by id, bytewise; ``stale`` filters by the mark."""
    d = s.dialect
    scope, params = visible(d, robots)
    marked = "" if stale is None else stale_sql("p.") if stale else f"NOT {stale_sql('p.')}"
    return s.all(
        f"SELECT {_P_COLUMNS} FROM processes AS p {_where(scope, marked)} "  # noqa: S608
        f"ORDER BY p.id{d.bytewise} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )


def count(s: Session, robots: Collection[str] | None) -> int:
    """How many visible documents there are."""
    scope, params = visible(s.dialect, robots)
    row = s.one(f"SELECT count(*) AS n FROM processes AS p {_where(scope)}", params)  # noqa: S608
    return 0 if row is None else int(row["n"])


def states(s: Session, ids: Collection[str]) -> list[Row]:
    """``id``, ``revision``, ``recent_outcomes``, ``last_success``, ``life`` of ``ids``."""
    among, param = s.dialect.one_of("id", sorted(set(ids)))
    return s.all(
        "SELECT id, revision, recent_outcomes, last_success, life FROM processes "  # noqa: S608
        f"WHERE {among}",
        [param],
    )


def lives(s: Session, id: str) -> list[int]:
    """The lives of ``id`` with a row or a kept revision, oldest first."""
    rows = s.all(
        "SELECT life FROM processes WHERE id = ? "
        "UNION SELECT life FROM processes_revisions WHERE doc_id = ? ORDER BY 1",
        [id, id],
    )
    return [int(r["life"]) for r in rows]


def revisions(s: Session, id: str, life: int | None) -> list[Row]:
    """The kept revisions of ``id``'s life ``life`` (None: its latest), newest first; a
    revision kept with no owner brings its ``markdown`` (the owner is read from it)."""
    return s.all(
        "SELECT revision, replaced, reason, life, robot, shared, CASE WHEN robot IS NULL "  # noqa: S608
        "AND shared IS NULL THEN markdown END AS markdown FROM processes_revisions "
        f"WHERE doc_id = ? AND life = coalesce(?, ({_LATEST_LIFE})) ORDER BY revision DESC",
        [id, life, id, id],
    )


def revision_markdown(s: Session, id: str, revision: int, life: int | None) -> str | None:
    """The markdown of a kept revision of ``id``'s life ``life`` (None: its latest)."""
    row = s.one(
        "SELECT markdown FROM processes_revisions WHERE doc_id = ? AND revision = ? "  # noqa: S608
        f"AND life = coalesce(?, ({_LATEST_LIFE}))",
        [id, revision, life, id, id],
    )
    return None if row is None else str(row["markdown"])


def current_at(s: Session, id: str, revision: int, life: int | None) -> Row | None:
    """The row of ``id`` when it is at ``revision`` of ``life`` (None: any)."""
    return s.one(
        f"SELECT {COLUMNS} FROM processes WHERE id = ? AND revision = ? "  # noqa: S608
        "AND life = coalesce(?, life)",
        [id, revision, life],
    )


def reliabilities(
    s: Session, keys: Collection[int], robots: Collection[str] | None
) -> dict[int, float]:
    """The reliability of each visible one of ``keys``."""
    d = s.dialect
    scope, params = visible(d, robots)
    among, param = d.one_of(f"p.{d.key}", sorted(keys))
    rows = s.all(
        f"SELECT p.{d.key} AS key, {RELIABILITY_SQL} AS reliability FROM processes AS p "  # noqa: S608
        f"{_where(among, scope)}",
        [param, *params],
    )
    return {int(r["key"]): float(r["reliability"]) for r in rows}


def rows_of(s: Session, keys: Collection[int], robots: Collection[str] | None) -> dict[int, Row]:
    """The rows of each visible one of ``keys``."""
    d = s.dialect
    scope, params = visible(d, robots)
    among, param = d.one_of(f"p.{d.key}", sorted(keys))
    rows = s.all(
        f"SELECT p.{d.key} AS key, {_P_COLUMNS} FROM processes AS p {_where(among, scope)}",  # noqa: S608
        [param, *params],
    )
    return {int(r["key"]): r for r in rows}


def lexical_top(
    s: Session, matches: str, params: Sequence[Any], robots: Collection[str] | None, k: int
) -> list[Row]:
    """The ``k`` visible matches best by relevance x reliability (ties: smaller key), with
    their rows, ``relevance``, ``reliability`` and ``score``. ``matches`` is a subquery of
    ``(rid, relevance)`` with ``params``.

    Two steps: score every match joining the index to the rows by key, keep the top k by
    score, and only then read those k rows in full (carrying bodies through the sort would
    cost more than the search itself).
    """
    d = s.dialect
    scope, scope_params = visible(d, robots)
    return s.all(
        f"SELECT {_P_COLUMNS}, top.relevance, top.reliability, top.score FROM ("  # noqa: S608
        f"SELECT m.rid, m.relevance, {RELIABILITY_SQL} AS reliability, "
        f"m.relevance * {RELIABILITY_SQL} AS score FROM ({matches}) AS m "
        f"JOIN processes AS p ON p.{d.key} = m.rid {_where(scope)} "
        "ORDER BY score DESC, m.rid LIMIT ?) AS top "
        f"JOIN processes AS p ON p.{d.key} = top.rid ORDER BY top.score DESC, top.rid",
        [*params, *scope_params, k],
    )


def lexical_pool(
    s: Session, matches: str, params: Sequence[Any], robots: Collection[str] | None, limit: int
) -> dict[int, tuple[float, float]]:
    """The ``limit`` visible matches best by relevance: key -> (relevance, reliability)."""
    d = s.dialect
    scope, scope_params = visible(d, robots)
    rows = s.all(
        f"SELECT m.rid, m.relevance, {RELIABILITY_SQL} AS reliability FROM ({matches}) AS m "  # noqa: S608
        f"JOIN processes AS p ON p.{d.key} = m.rid {_where(scope)} "
        "ORDER BY m.relevance DESC, m.rid LIMIT ?",
        [*params, *scope_params, limit],
    )
    return {int(r["rid"]): (float(r["relevance"]), float(r["reliability"])) for r in rows}


def holding_sql(d: Dialect, postings: str, key: str, owners: Sequence[str] | None) -> str:
    """The near-copy candidates' query over ``postings`` (the FROM of the postings, whose
    ``o.term`` and ``o.owner`` it filters, ``key`` the document's key column in it):
    ``(id, title)`` of the documents holding at least ``?`` of the ``?`` terms, other than
    ``?``, those holding most first; parameters: the terms, the owners (when given), the
    quorum, the id."""
    in_owners = "" if owners is None else f"AND {d.any_of.format(column='o.owner')}"
    return (
        f"SELECT d.id, d.title FROM (SELECT {key} AS rid, count(*) AS hits "  # noqa: S608
        f"FROM {postings} WHERE {d.any_of.format(column='o.term')} {in_owners} "
        f"GROUP BY {key} HAVING count(*) >= ?) AS c "
        f"JOIN processes AS d ON d.{d.key} = c.rid WHERE d.id <> ? "
        f"ORDER BY c.hits DESC, d.id{d.bytewise} LIMIT {int(NEAR_DUPLICATE_CANDIDATES)}"
    )


# --- writes ---------------------------------------------------------------------------


def stored_vectors(
    vectors: Pairs | None, model: Embedder | None
) -> tuple[Embedder, Vectors, Vectors] | None:
    """What a write stores of a document's vectors: the model in use and the (head, whole)
    pair; None to drop the document's vectors (no model in use, or none computed), which
    the next sync with a model recomputes."""
    if vectors is None or model is None:
        return None
    head, whole = vectors[0]
    return model, head, whole


def outcome_sql(d: Dialect, success: bool) -> str:
    """The one statement that counts an outcome of the document ``id = ?`` at the time
    ``?``: the saturating counter (it stops at ``MAX_COUNT``), ``last_used``, the recent
    outcomes (the last ``STALE_WINDOW``) and, on a success, ``last_success``. Parameters:
    the time, ``"s"``/``"f"``, whether it succeeded, the time again, the id."""
    column = "success_count" if success else "failure_count"
    recent = d.tail.format(text="recent_outcomes || ?", n=int(STALE_WINDOW))
    return (
        f"UPDATE processes SET {column} = {d.smallest}({column} + 1, {int(MAX_COUNT)}), "  # noqa: S608
        f"last_used = ?, recent_outcomes = {recent}, "
        "last_success = CASE WHEN ? THEN ? ELSE last_success END WHERE id = ?"
    )


def insert_row(s: Session, values: dict[str, Any], *, resume_life: bool) -> int | None:
    """Insert a document (``values`` by column) unless its id is taken, placed in its id's
    lives (a new life at revision 1, or its latest life after that life's kept revisions);
    its key, or None when the id is taken."""
    d = s.dialect
    columns = COLUMNS.split(", ")
    row = s.one(
        f"INSERT INTO processes ({COLUMNS}) VALUES ({', '.join('?' for _ in columns)}) "  # noqa: S608
        f"ON CONFLICT (id) DO NOTHING RETURNING {d.key} AS key",
        [values[c] for c in columns],
    )
    if row is None:
        return None
    key = int(row["key"])
    s.run(_PLACE_IN_LIFE.format(key=d.key), [resume_life, values["id"], key])
    return key


def set_columns(s: Session, key: int, values: dict[str, Any], *, bump: bool = False) -> None:
    """Set the given content or counter columns of the row ``key``; ``bump`` raises its
    revision by one."""
    names = [c for c in (*CONTENT, *_COUNTERS) if c in values]
    sets = [f"{c} = ?" for c in names]
    if bump:
        sets.append("revision = revision + 1")
    s.run(
        f"UPDATE processes SET {', '.join(sets)} WHERE {s.dialect.key} = ?",  # noqa: S608
        [*(values[c] for c in names), key],
    )


def delete_row(s: Session, key: int) -> None:
    """Delete the row ``key``."""
    s.run(f"DELETE FROM processes WHERE {s.dialect.key} = ?", [key])  # noqa: S608


def latest_life(s: Session, id: str) -> int:
    """The latest life of ``id`` (0: it has neither a row nor a kept revision)."""
    row = s.one(f"SELECT ({_LATEST_LIFE}) AS life", [id, id])
    return 0 if row is None or row["life"] is None else int(row["life"])


def kept(s: Session, id: str, revision: int, life: int) -> Row | None:
    """``markdown``, ``reason`` and ``replaced`` of a kept revision."""
    return s.one(
        "SELECT markdown, reason, replaced FROM processes_revisions "
        "WHERE doc_id = ? AND life = ? AND revision = ?",
        [id, life, revision],
    )


def merged_markdown(s: Session, id: str, revision: int, replaced: str) -> str | None:
    """The version of ``id`` a merge kept (``reason`` merged, at ``replaced``)."""
    row = s.one(
        "SELECT markdown FROM processes_revisions WHERE doc_id = ? AND revision = ? "
        "AND reason = 'merged' AND replaced = ?",
        [id, revision, replaced],
    )
    return None if row is None else str(row["markdown"])


def keep_revision(s: Session, row: Row, markdown: str, reason: str, replaced: str) -> None:
    """Keep the version ``row`` holds under its id, life and revision, with its owner."""
    s.run(
        "INSERT INTO processes_revisions (doc_id, life, revision, replaced, reason, markdown, "
        "robot, shared) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (doc_id, life, revision) DO UPDATE SET replaced = excluded.replaced, "
        "reason = excluded.reason, markdown = excluded.markdown, robot = excluded.robot, "
        "shared = excluded.shared",
        [
            str(row["id"]),
            int(row["life"]),
            int(row["revision"]),
            replaced,
            reason,
            markdown,
            str(row["robot"]),
            bool(row["shared"]),
        ],
    )


# --- the reads and the transaction, over a backend's index -----------------------------


class IndexReads(Protocol):
    """What a backend's lexical index and vectors answer a find (see
    :class:`~robot_mcp_memory.processes.ProcessReads` for each)."""

    postings: tuple[str, str]
    """The near-copy candidates' postings: their FROM (``o.term``, ``o.owner``) and the
    document's key column in it (:func:`holding_sql`)."""

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]: ...

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]: ...

    def matches(self, query: Lexical) -> tuple[str, list[Any]] | None:
        """The subquery ``(rid, relevance)`` of every document matching the query (bm25 by
        the ranking's rules) and its parameters; None when nothing can match."""
        ...

    def semantic_pool(
        self, s: Session, query: Semantic
    ) -> tuple[dict[int, float], float, float]: ...

    def index_terms(self, s: Session, id: str) -> list[str]: ...

    def term_frequencies(self, s: Session, ids: Collection[str]) -> dict[str, dict[str, float]]: ...


class IndexWrites(Protocol):
    """What a backend's index, vectors and revision bound do inside a write (see
    :class:`~robot_mcp_memory.processes.ProcessTx` for each)."""

    def delete(self, s: Session, key: int) -> None: ...

    def index(self, s: Session, key: int, terms: DocTerms, vectors: Pairs | None) -> Row: ...

    def owned(self, s: Session, robot: str) -> int:
        """How many documents ``robot`` owns, counted so that a concurrent write adding one
        of its documents waits for this transaction."""
        ...

    def prune_revisions(self, s: Session, id: str, keep: int) -> None: ...


def _holds(d: Dialect, id: str) -> bool:
    """Whether the store can hold ``id`` (an id it cannot hold is never found)."""
    return d.holds_nul or "\x00" not in id


class Reads:
    """The process documents' reads on one backend (a
    :class:`~robot_mcp_memory.processes.ProcessReads`): the shared SQL of this module over
    ``s``, the lexical index and the vectors ``index``'s.

    Args:
        s: the session every read runs in.
        index: the backend's index.
    """

    def __init__(self, s: Session, index: IndexReads) -> None:
        self._s = s
        self._index = index

    def row(self, id: str) -> Row | None:
        if not _holds(self._s.dialect, id):
            return None
        return self._s.one(f"SELECT {COLUMNS} FROM processes WHERE id = ?", [id])  # noqa: S608

    def owner(self, id: str) -> tuple[str, bool] | None:
        return owner(self._s, id) if _holds(self._s.dialect, id) else None

    def rows(
        self, *, robots: Collection[str] | None, stale: bool | None, limit: int, offset: int
    ) -> list[Row]:
        return page(self._s, robots, stale, limit, offset)

    def count(self, *, robots: Collection[str] | None) -> int:
        return count(self._s, robots)

    def states(self, ids: Collection[str]) -> list[Row]:
        wanted = [i for i in ids if _holds(self._s.dialect, i)]
        return states(self._s, wanted) if wanted else []

    def lives(self, id: str) -> list[int]:
        return lives(self._s, id) if _holds(self._s.dialect, id) else []

    def revisions(self, id: str, life: int | None) -> list[Row]:
        return revisions(self._s, id, life) if _holds(self._s.dialect, id) else []

    def revision_markdown(self, id: str, revision: int, life: int | None) -> str | None:
        if not _holds(self._s.dialect, id):
            return None
        return revision_markdown(self._s, id, revision, life)

    def current_at(self, id: str, revision: int, life: int | None) -> Row | None:
        return current_at(self._s, id, revision, life) if _holds(self._s.dialect, id) else None

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        return self._index.stems(words)

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        return self._index.document_frequency(terms, owners)

    def lexical_top(self, query: Lexical, k: int) -> list[Scored]:
        matches = self._index.matches(query)
        if matches is None:
            return []
        return [
            Scored(r, float(r["relevance"]), float(r["reliability"]), float(r["score"]))
            for r in lexical_top(self._s, matches[0], matches[1], query.robots, k)
        ]

    def lexical_pool(self, query: Lexical, limit: int) -> dict[int, tuple[float, float]]:
        matches = self._index.matches(query)
        if matches is None:
            return {}
        return lexical_pool(self._s, matches[0], matches[1], query.robots, limit)

    def semantic_pool(self, query: Semantic) -> tuple[dict[int, float], float, float]:
        return self._index.semantic_pool(self._s, query)

    def reliabilities(
        self, keys: Collection[int], robots: Collection[str] | None
    ) -> dict[int, float]:
        return reliabilities(self._s, keys, robots)

    def rows_of(self, keys: Collection[int], robots: Collection[str] | None) -> dict[int, Row]:
        return rows_of(self._s, keys, robots)

    def index_terms(self, id: str) -> list[str]:
        return self._index.index_terms(self._s, id) if _holds(self._s.dialect, id) else []

    def holding(
        self, terms: Sequence[str], owners: Sequence[str] | None, at_least: int, other_than: str
    ) -> list[tuple[str, str]]:
        d = self._s.dialect
        source, key = self._index.postings
        params: list[Any] = [d.values(terms)]
        if owners is not None:
            params.append(d.values(owners))
        rows = self._s.all(holding_sql(d, source, key, owners), [*params, at_least, other_than])
        return [(str(r["id"]), str(r["title"])) for r in rows]

    def term_frequencies(self, ids: Collection[str]) -> dict[str, dict[str, float]]:
        wanted = [i for i in ids if _holds(self._s.dialect, i)]
        return self._index.term_frequencies(self._s, wanted) if wanted else {}


class Tx:
    """One write transaction of the process documents on one backend (a
    :class:`~robot_mcp_memory.processes.ProcessTx`): the shared SQL of this module over
    ``s``; the index, the vectors, the robot's count and the revision bound ``index``'s.

    Args:
        s: the session of the transaction.
        index: the backend's writes.
    """

    def __init__(self, s: Session, index: IndexWrites) -> None:
        self.session = s
        self._index = index

    def row(self, id: str) -> Row | None:
        if not _holds(self.session.dialect, id):
            return None
        return read_row(self.session, id, lock=True)

    def rows(self, ids: Collection[str]) -> dict[str, Row]:
        wanted = [i for i in ids if _holds(self.session.dialect, i)]
        return read_rows(self.session, wanted) if wanted else {}

    def insert(self, values: dict[str, Any], *, resume_life: bool) -> int | None:
        return insert_row(self.session, values, resume_life=resume_life)

    def update(self, key: int, values: dict[str, Any], *, bump: bool) -> None:
        set_columns(self.session, key, values, bump=bump)

    def set_counters(self, key: int, values: dict[str, Any]) -> None:
        set_columns(self.session, key, values)

    def delete(self, key: int) -> None:
        self._index.delete(self.session, key)

    def index(self, key: int, terms: DocTerms, vectors: Pairs | None) -> Row:
        return self._index.index(self.session, key, terms, vectors)

    def owned(self, robot: str) -> int:
        return self._index.owned(self.session, robot)

    def latest_life(self, id: str) -> int:
        return latest_life(self.session, id)

    def kept(self, id: str, revision: int, life: int) -> Row | None:
        if not _holds(self.session.dialect, id):
            return None
        return kept(self.session, id, revision, life)

    def merged_markdown(self, id: str, revision: int, replaced: str) -> str | None:
        return merged_markdown(self.session, id, revision, replaced)

    def keep_revision(self, row: Row, markdown: str, reason: str, replaced: str) -> None:
        keep_revision(self.session, row, markdown, reason, replaced)

    def prune_revisions(self, id: str, keep: int) -> None:
        self._index.prune_revisions(self.session, id, keep)
