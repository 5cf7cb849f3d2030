"""Writes follow the kind: cold on the caller's thread, hot on the writer thread; prune."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest

from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_kit.store import (
    Kind,
    PruneRefused,
    Schema,
    SqliteStore,
    StoreClosed,
    Table,
)

DOCS = Table("docs", Kind.DEFINITION, "CREATE TABLE docs (id TEXT PRIMARY KEY, hits INTEGER)")
DOCS_FTS = Table(
    "docs_fts", Kind.DERIVED, "CREATE VIRTUAL TABLE docs_fts USING fts5(id)", derived_from="docs"
)
EVENTS = Table(
    "events",
    Kind.RECORD,
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL, n INTEGER)",
    time_column="ts",
)
SEEN = Table(
    "seen",
    Kind.BELIEF,
    "CREATE TABLE seen (thing TEXT PRIMARY KEY, at TEXT, epoch INTEGER NOT NULL)",
    epoch_column="epoch",
)
LOG = Table(
    "log", Kind.RECORD, "CREATE TABLE log (id INTEGER PRIMARY KEY, at TEXT)", time_column="at"
)
SCHEMA = Schema(1, (DOCS, DOCS_FTS, EVENTS, SEEN, LOG), pruned=frozenset({"events"}))


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "index.db", SCHEMA)
    yield s
    s.close()


class TestStatementTrace:
    def test_hot_write_runs_on_writer_thread_cold_on_caller(self, store):
        """On sqlite's own trace: the enqueued write ran on the writer, the save on the caller."""
        seen: list[tuple[str, str]] = []
        store.set_trace_callback(lambda sql: seen.append((threading.current_thread().name, sql)))
        store.execute("INSERT INTO docs (id, hits) VALUES ('a', 0)")
        assert store.enqueue("UPDATE docs SET hits = hits + 1 WHERE id = 'a'")
        store.flush(timeout_s=10)
        store.set_trace_callback(None)
        caller = threading.current_thread().name
        cold = [name for name, sql in seen if sql.startswith("INSERT INTO docs")]
        hot = [name for name, sql in seen if sql.startswith("UPDATE docs")]
        assert cold == [caller]
        assert len(hot) == 1
        assert hot[0] != caller
        assert hot[0].startswith("store-writer")
        assert store.query_one("SELECT hits FROM docs WHERE id='a'")["hits"] == 1


class TestKinds:
    @pytest.mark.parametrize("table", ["docs", "docs_fts", "seen", "store_meta", "ghost"])
    def test_prune_refuses_non_record_and_deletes_nothing(self, store, table):
        """prune on a definition, derived, belief or unknown table raises before deleting."""
        store.execute("INSERT INTO docs (id, hits) VALUES ('a', 0)")
        store.execute("INSERT INTO docs_fts (id) VALUES ('a')")
        store.execute("INSERT INTO seen VALUES ('cup', '2020-01-01T00:00:00.000Z', 1)")
        traced: list[str] = []
        store.set_trace_callback(traced.append)
        before = store.counts()
        with pytest.raises(PruneRefused, match="only a declared RECORD"):
            store.prune(table, keep_last=0)
        store.set_trace_callback(None)
        assert store.counts() == before
        assert store.query_one("SELECT count(*) AS n FROM docs_fts")["n"] == 1
        assert not [sql for sql in traced if "DELETE" in sql.upper()]

    def test_record_prunes_by_age_unix_seconds(self, store):
        """A RECORD with a numeric time column loses rows older than the bound only."""
        now = time.time()
        with store.transaction() as conn:
            conn.executemany(
                "INSERT INTO events (ts, n) VALUES (?, ?)",
                [(now - 3600, 1), (now - 7200, 2), (now - 10, 3)],
            )
        assert store.prune("events", older_than_s=1800) == 2
        assert [r["n"] for r in store.query("SELECT n FROM events")] == [3]

    def test_record_prunes_by_age_iso_text(self, store):
        """An ISO-8601 text time column (format_ts) is compared as time too."""
        old = "2001-01-01T00:00:00.000Z"
        new = format_ts(utc_now())
        store.execute("INSERT INTO log (at) VALUES (?)", (old,))
        store.execute("INSERT INTO log (at) VALUES (?)", (new,))
        assert store.prune("log", older_than_s=60) == 1
        assert [r["at"] for r in store.query("SELECT at FROM log")] == [new]

    def test_record_prunes_by_count_keeping_newest(self, store):
        """keep_last keeps the N newest rows by the time column."""
        with store.transaction() as conn:
            conn.executemany(
                "INSERT INTO events (ts, n) VALUES (?, ?)", [(float(i), i) for i in range(10)]
            )
        assert store.prune("events", keep_last=3) == 7
        assert sorted(r["n"] for r in store.query("SELECT n FROM events")) == [7, 8, 9]

    def test_spared_rows_are_kept_and_not_counted(self, store):
        """spare keeps matching rows whatever their age, and keep_last counts the others."""
        now = time.time()
        with store.transaction() as conn:
            conn.executemany(
                "INSERT INTO events (ts, n) VALUES (?, ?)",
                [(now - 7200 + i, i) for i in range(10)],
            )
        assert store.prune("events", keep_last=3, spare={"n": 2}) == 6
        assert sorted(r["n"] for r in store.query("SELECT n FROM events")) == [2, 7, 8, 9]
        assert store.prune("events", older_than_s=60, spare={"n": 2}) == 3
        assert [r["n"] for r in store.query("SELECT n FROM events")] == [2]

    def test_within_bounds_each_owner_by_itself(self, store):
        """within confines the prune (and keep_last's count) to the rows that hold its
        values: the newest 2 of n=1 are kept, n=0 untouched, spare still honoured."""
        with store.transaction() as conn:
            conn.executemany(
                "INSERT INTO events (ts, n) VALUES (?, ?)",
                [(float(i), i % 2) for i in range(10)],
            )
        assert store.prune("events", keep_last=2, within={"n": 1}) == 3
        assert sorted(r["ts"] for r in store.query("SELECT ts FROM events WHERE n = 1")) == [
            7.0,
            9.0,
        ]
        assert store.query_one("SELECT count(*) FROM events WHERE n = 0")[0] == 5
        assert store.prune("events", older_than_s=0, within={"n": 0}, spare={"ts": 0.0}) == 4
        assert sorted(r["ts"] for r in store.query("SELECT ts FROM events")) == [0.0, 7.0, 9.0]

    def test_prune_needs_a_bound(self, store):
        """prune without a bound is a caller error, not 'delete everything'."""
        with pytest.raises(ValueError, match="older_than_s, keep_last"):
            store.prune("events")

    def test_belief_keeps_its_epoch(self, store):
        """A BELIEF's declared epoch column is required by the table and round-trips."""
        with pytest.raises(sqlite3.IntegrityError):
            store.execute("INSERT INTO seen (thing, at) VALUES ('cup', 'now')")
        store.execute("INSERT INTO seen VALUES ('cup', 'now', 7)")
        assert store.query_one("SELECT epoch FROM seen")["epoch"] == 7

    def test_definition_write_is_synchronous(self, store):
        """A cold write is visible to the next read on any thread, with no flush."""
        store.execute("INSERT INTO docs (id, hits) VALUES ('b', 1)")
        got: list[int] = []
        t = threading.Thread(
            target=lambda: got.append(store.query_one("SELECT count(*) AS n FROM docs")["n"])
        )
        t.start()
        t.join(10)
        assert got == [1]


class TestTransactions:
    def test_exception_rolls_back(self, store):
        """A transaction that raises leaves nothing behind."""

        def failing() -> None:
            with store.transaction() as conn:
                conn.execute("INSERT INTO docs (id, hits) VALUES ('x', 0)")
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            failing()
        assert store.counts()["docs"] == 0

    def test_nested_transaction_is_a_savepoint(self, store):
        """An inner failure rolls back only the inner block."""
        with store.transaction() as conn:
            conn.execute("INSERT INTO docs (id, hits) VALUES ('outer', 0)")

            def failing() -> None:
                with store.transaction() as inner:
                    inner.execute("INSERT INTO docs (id, hits) VALUES ('inner', 0)")
                    raise RuntimeError("inner")

            with pytest.raises(RuntimeError):
                failing()
            assert [r["id"] for r in store.query("SELECT id FROM docs")] == ["outer"]
        assert [r["id"] for r in store.query("SELECT id FROM docs")] == ["outer"]

    def test_query_cannot_write(self, store):
        """query() runs on a read-only connection."""
        store.execute("INSERT INTO docs (id, hits) VALUES ('a', 0)")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.query("DELETE FROM docs")
        assert store.counts()["docs"] == 1


class TestHotPath:
    def test_full_queue_drops_and_counts(self, tmp_path):
        """Beyond hot_queue_max, enqueue returns False and counts a drop; never blocks."""
        s = SqliteStore(tmp_path / "x.db", SCHEMA, hot_queue_max=5)
        try:
            with s.transaction():  # hold the write lock: the writer cannot drain
                results = [s.enqueue("INSERT INTO events (ts) VALUES (1)") for _ in range(50)]
            # the writer may hold one batch (5) while it waits for the lock, and 5 more queue
            assert results.count(False) >= 40
            s.flush(timeout_s=10)
            stats = s.stats
            assert stats.dropped == results.count(False)
            assert stats.written == results.count(True) == s.counts()["events"]
        finally:
            s.close()

    def test_failing_job_is_counted_and_the_thread_lives(self, store):
        """A bad hot write is counted failed; its batch-mates and later writes still land."""
        store.enqueue("INSERT INTO events (n) VALUES (1)")
        store.enqueue("INSERT INTO nowhere VALUES (1)")
        store.enqueue("INSERT INTO events (n) VALUES (2)")
        store.flush(timeout_s=10)
        store.enqueue("INSERT INTO events (n) VALUES (3)")
        store.flush(timeout_s=10)
        assert store.stats.failed == 1
        assert store.stats.written == 3
        assert sorted(r["n"] for r in store.query("SELECT n FROM events")) == [1, 2, 3]

    def test_failing_writes_are_logged_once_per_episode(self, store, caplog):
        """Batches that write nothing and fail: one ERROR for the run of them, one WARNING
        when a batch commits again; stats.failing in between (issue 18: a full disk wrote
        one ERROR line per record)."""
        caplog.set_level(logging.WARNING, logger="robot_mcp_kit.store")
        for _ in range(5):
            for _ in range(40):
                store.enqueue("INSERT INTO nowhere VALUES (1)")
            store.flush(timeout_s=10)
        assert store.stats.failing
        assert store.stats.failed == 200
        store.enqueue("INSERT INTO events (n) VALUES (1)")
        store.flush(timeout_s=10)
        assert not store.stats.failing
        lines = [r.getMessage() for r in caplog.records]
        assert [m.split(" ")[0] for m in lines] == [
            "store_hot_write_failed",
            "store_hot_write_recovered",
        ], lines
        assert "no such table: nowhere" in lines[0]
        assert "failed=200" in lines[1]

    def test_enqueue_racing_close_is_a_counted_drop_not_a_silent_loss(self, tmp_path):
        """A hot write that reaches the writer after stop() began is refused and counted.

        Regression: the open check ran before the writer's lock, so a job appended while
        close() was stopping the thread was never written yet enqueue() returned True.
        """
        s = SqliteStore(tmp_path / "x.db", SCHEMA)
        writer = s._writer  # the race is between these two calls; drive them in order
        assert writer.stop(timeout_s=10)
        assert writer.enqueue("INSERT INTO events (n) VALUES (1)", ()) is False
        assert s.stats.dropped == 1
        s.close()

    def test_close_writes_what_is_queued_and_is_idempotent(self, tmp_path):
        """close() drains the queue; a second close is a no-op; later use raises."""
        path = tmp_path / "x.db"
        s = SqliteStore(path, SCHEMA)
        for i in range(2_000):
            s.enqueue("INSERT INTO events (n) VALUES (?)", (i,))
        s.close()
        s.close()
        for call in (
            lambda: s.enqueue("INSERT INTO events (n) VALUES (1)"),
            lambda: s.execute("DELETE FROM events"),
            lambda: s.query("SELECT 1"),
            s.flush,
            s.counts,
            lambda: s.prune("events", keep_last=1),
        ):
            with pytest.raises(StoreClosed, match="closed"):
                call()
        assert s.stats.written == 2_000
        with SqliteStore(path, SCHEMA) as again:
            assert again.counts()["events"] == 2_000
